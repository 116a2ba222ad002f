#!/usr/bin/env bash
# Installs gpunode's dependencies from Debian 12 packages.
#   install-deps.sh build   what configuring and building gpunode needs (scripts/doctor.sh)
#   install-deps.sh test    what the tests, benchmarks and fuzzing need on top of that
#   install-deps.sh [all]   both (scripts/test.sh; the default, as before the split)
# Idempotent: packages already present are left alone; safe to run again.
# Cold, the build set is ~1/3 of the full set's download (benchmarks/results/cold-start-2026-12-03.md).
set -euo pipefail

# ---- the build set: cmake configure + `cmake --build build --target gpunode gpunode_simnvml` ----
build_packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config
  # libraries
  libabsl-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev libtomlplusplus-dev
  # the exporter's HTTP(S) server (Boost.Beast on asio, header-only: one event loop, whole-request
  # deadlines, asio::ssl over OpenSSL) and its bcrypt basic auth; cpp-httplib is the kube client
  # (and the exporter tests' client)
  libboost-dev libcpp-httplib-dev libssl-dev libcrypt-dev zlib1g-dev
  # gRPC (kubelet device plugin and pod-resources APIs)
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
)

# ---- the test set: ctest (unit, component, e2e, k8s), benchmarks, fuzzing ----
test_packages=(
  # tests, fuzzing, benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev
  # openssl(1) makes the certificates of the exporter's TLS tests
  openssl
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

case "${1:-all}" in
  build) packages=("${build_packages[@]}") ;;
  test) packages=("${test_packages[@]}") ;;
  all) packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  *) echo "install-deps: unknown set '$1' (want build, test or all)" >&2; exit 3 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present (${1:-all})"
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
