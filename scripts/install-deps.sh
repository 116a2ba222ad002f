#!/usr/bin/env bash
# Installs every build and test dependency of gpunode from Debian 12 packages.
# Idempotent: packages already present are left alone; safe to run again.
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build ccache pkg-config
  # libraries
  libabsl-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev libtomlplusplus-dev
  # the exporter's HTTP(S) server (Boost.Beast on asio, header-only: one event loop, whole-request
  # deadlines, asio::ssl over OpenSSL) and its bcrypt basic auth; cpp-httplib is its tests' client
  libboost-dev libcpp-httplib-dev libssl-dev libcrypt-dev zlib1g-dev
  # openssl(1) makes the certificates of the exporter's TLS tests
  openssl
  # gRPC (kubelet device plugin and pod-resources APIs)
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  # tests, fuzzing, benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev
  # tools the tests and benchmark scripts call
  python3 python3-yaml procps
  # shells that parse and run `gpunode completion zsh|fish` in test/cli/completion_cli_test.cc
  zsh fish
  # real containers in the end-to-end tests (test/e2e): podman on runc, a static busybox as their root
  podman runc busybox-static
  # `docker run --gpus` on a node set up by gpunode (test/e2e/docker_gpus_test.sh): Debian's Docker
  docker.io
  # a real registry (distribution 2.8) and htpasswd (bcrypt) for `gpunode image config`'s test
  # (test/image/e2e_registry_test.sh starts its own instances; the package's service is not used)
  docker-registry apache2-utils
  # the one-node Kubernetes test cluster (test/k8s/cluster.sh): CNI plugins (/usr/lib/cni), kube-proxy's
  # and CNI's iptables, ip/ss, curl for health checks; plus runc, podman, busybox-static, openssl above
  containernetworking-plugins iptables iproute2 curl
  # promtool (metric lint) and a real Prometheus server for the exporter's tests
  prometheus
  # headless Chromium renders the exporter's status page in its test (screenshot + DOM)
  chromium fonts-dejavu-core
  # [test set, appended for the Debian package's test] test/host/package_test.sh (ctest -L package):
  # mmdebstrap makes the clean Debian root, lintian checks the .deb, systemd-analyze (systemd, not
  # started) verifies the unit, file is what CPack's dpkg-shlibdeps step needs
  mmdebstrap lintian systemd file
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# docker-registry's package enables a system registry on :5000; the tests start their own on
# loopback ports, so the packaged service is stopped and disabled (where systemd runs).
if printf '%s\n' "${missing[@]}" | grep -qx docker-registry && [ -d /run/systemd/system ]; then
  $SUDO systemctl disable --now docker-registry.service >/dev/null 2>&1 || true
fi
