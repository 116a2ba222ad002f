#!/usr/bin/env bash
# ctest e2e_image_stores (label e2e): `gpunode image list` against the node's three real image stores,
# each a private instance of Debian's own program with its own folders and socket under a temp dir:
#   - containers-storage: podman (--root/--runroot of its own, vfs) builds the test images FROM scratch;
#   - containerd: `containerd` with its own root, state and socket; the images go in with
#     `ctr images import` (an OCI archive and a Docker archive from `podman save`, a two-platform
#     index from `podman manifest push --all`), into the namespaces k8s.io and default;
#   - Docker: a private dockerd (test/e2e/lib.sh's e2e_dockerd); the images go in with `docker load`.
# Each store's List and Find answers are checked (env, labels, platform, digests, namespaces), then a
# missing image, a missing socket, a socket that never answers (the deadline), a garbage images.json.
# Nothing is pulled; nothing of the machine's own stores is read or written.
#
# The images: build_images below (env and labels in the shape of NVIDIA's CUDA images; test values).
# When test/image/make_images.sh exists it builds them instead: it is called as
#   make_images.sh PODMAN_WRAPPER  and must leave at least gpunode.test/cuda:12.8.1-base in that store.
#
#   usage: stores_e2e_test.sh PATH/TO/gpunode   (as root; needs podman, containerd + ctr, docker.io)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"

bin=${1:?usage: $0 PATH/TO/gpunode}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[ -x "$bin" ] || e2e_fail "$bin: not an executable"

e2e_require_root
missing=()
for t in podman containerd ctr /usr/sbin/dockerd /usr/bin/docker python3; do
  command -v "$t" >/dev/null 2>&1 || missing+=("$t")
done
if [ ${#missing[@]} -gt 0 ]; then
  # In CI a missing tool is a failure; elsewhere the test is skipped (ctest: SKIP_RETURN_CODE 77).
  [ -n "${CI:-}" ] && e2e_fail "missing: ${missing[*]} (scripts/install-deps.sh installs podman, containerd, docker.io)"
  echo "SKIP: missing ${missing[*]}"
  exit "$E2E_SKIP"
fi
e2e_init
T=$E2E_TMP
G() { "$bin" image list "$@"; }
# JSON checks: python3 with the document on stdin; `q` is the parsed document.
check() {  # PYTHON-ASSERTIONS (the document on stdin)
  python3 -c "import json,sys; q=json.load(sys.stdin); $1" || e2e_fail "check failed: $1"
}

# ---- containers-storage: a private podman -----------------------------------------------------
PS=$T/ps
mkdir -p "$PS"/{root,runroot,tmp}
cat > "$PS/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "$PS/root"
runroot = "$PS/runroot"
EOF
printf '[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "none"\n' > "$PS/containers.conf"
pm() {
  CONTAINERS_CONF=$PS/containers.conf CONTAINERS_STORAGE_CONF=$PS/storage.conf TMPDIR=$PS/tmp \
    podman --root "$PS/root" --runroot "$PS/runroot" --storage-driver vfs --cgroup-manager cgroupfs \
    --events-backend none --tmpdir "$PS/tmp" "$@"
}
printf '#!/bin/sh\n' > "$T/pm"
declare -f pm >> "$T/pm"
printf 'PS=%q\npm "$@"\n' "$PS" >> "$T/pm"
chmod 755 "$T/pm"

build_images() {
  local ctx=$T/ctx
  mkdir -p "$ctx"
  echo "gpunode test image" > "$ctx/README"
  # env and labels in the shape of nvidia/cuda's base images (test values)
  cat > "$ctx/Containerfile" <<'EOF'
FROM scratch
COPY README /README
ENV NVARCH=x86_64 CUDA_VERSION=12.8.1 \
    NVIDIA_REQUIRE_CUDA="cuda>=12.8 brand=tesla,driver>=535,driver<536 brand=tesla,driver>=550,driver<551" \
    NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility
LABEL maintainer="NVIDIA CORPORATION <cudatools@nvidia.com>" com.nvidia.cudnn.version=""
EOF
  pm build -q -t gpunode.test/cuda:12.8.1-base "$ctx" >/dev/null
  pm build -q --no-cache --arch arm64 --env NVARCH=sbsa -t gpunode.test/cuda:12.8.1-base-arm64 "$ctx" >/dev/null
  printf 'FROM scratch\nCOPY README /README\nLABEL org.opencontainers.image.title="plain"\n' > "$ctx/Plain"
  pm build -q -f "$ctx/Plain" -t gpunode.test/plain:1 "$ctx" >/dev/null
  pm manifest create gpunode.test/cuda-multi:12.8.1 >/dev/null
  pm manifest add gpunode.test/cuda-multi:12.8.1 containers-storage:gpunode.test/cuda:12.8.1-base >/dev/null
  pm manifest add gpunode.test/cuda-multi:12.8.1 containers-storage:gpunode.test/cuda:12.8.1-base-arm64 >/dev/null
}

e2e_step "test images built FROM scratch with podman (private store $PS/root)"
build_images || e2e_fail "podman build"
digest=$(pm image inspect --format '{{.Digest}}' gpunode.test/cuda:12.8.1-base)
e2e_ok "gpunode.test/cuda:12.8.1-base is $digest"

e2e_step "containers-storage: List and Find"
out=$(G --store containers-storage --storage-root "$PS/root" -o json) || e2e_fail "list: $out"
check "
imgs={n: i for s in q['stores'] for i in s['images'] for n in i['names']}
c=imgs['gpunode.test/cuda:12.8.1-base']
assert 'CUDA_VERSION=12.8.1' in c['env'], c
assert c['labels']['maintainer']=='NVIDIA CORPORATION <cudatools@nvidia.com>', c
assert c['platform']=='linux/amd64', c
assert c['source']=='image config (containers-storage $PS/root)', c
assert imgs['gpunode.test/cuda:12.8.1-base-arm64']['platform']=='linux/arm64'
assert not any('CUDA_VERSION' in e for e in imgs['gpunode.test/plain:1']['env'])
assert 'error' not in imgs['gpunode.test/cuda-multi:12.8.1'], imgs['gpunode.test/cuda-multi:12.8.1']
" <<< "$out"
e2e_ok "every image listed with its env, labels and platform"
out=$(G --store containers-storage --storage-root "$PS/root" gpunode.test/cuda:12.8.1-base@"$digest" -o json) || e2e_fail "find: $out"
check "i=q['stores'][0]['images'][0]; assert i['digest']=='$digest', i; assert 'NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=tesla,driver>=535,driver<536 brand=tesla,driver>=550,driver<551' in i['env']" <<< "$out"
out=$(G --store containers-storage --storage-root "$PS/root" gpunode.test/cuda-multi:12.8.1 --platform linux/arm64 -o json) || e2e_fail "find arm64: $out"
check "i=q['stores'][0]['images'][0]; assert 'NVARCH=sbsa' in i['env'] and i['platform']=='linux/arm64', i" <<< "$out"
e2e_ok "Find by tag@digest, and the arm64 instance of a manifest list"
out=$(G --store containers-storage --host-root "$PS" --storage-root /root gpunode.test/plain:1) || e2e_fail "--host-root: $out"
e2e_assert_contains "$out" "gpunode.test/plain:1" "--host-root: the graph root is a host path"

# ---- containerd: a private instance -----------------------------------------------------------
e2e_step "containerd (private root, state and socket) with the images imported by ctr"
C=$T/ctrd
mkdir -p "$C"
csock=$C/containerd.sock
cat > "$C/config.toml" <<EOF
version = 2
root = "$C/root"
state = "$C/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$csock"
[ttrpc]
  address = "$csock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$C/opt"
EOF
setsid containerd --config "$C/config.toml" > "$C/containerd.log" 2>&1 < /dev/null &
ctrd_pid=$!
stop_containerd() {
  kill "$ctrd_pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$ctrd_pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$ctrd_pid" 2>/dev/null || true
}
e2e_on_exit stop_containerd
ctr_() { ctr -a "$csock" "$@"; }
for _ in $(seq 100); do ctr_ version >/dev/null 2>&1 && break; kill -0 "$ctrd_pid" 2>/dev/null || break; sleep 0.2; done
ctr_ version >/dev/null 2>&1 || e2e_fail "containerd did not start: $(tail -20 "$C/containerd.log")"
pm save --format oci-archive -o "$T/cuda-oci.tar" gpunode.test/cuda:12.8.1-base >/dev/null 2>&1 || e2e_fail "podman save oci-archive"
pm save --format docker-archive -o "$T/plain-docker.tar" gpunode.test/plain:1 >/dev/null 2>&1 || e2e_fail "podman save docker-archive"
pm manifest push --all gpunode.test/cuda-multi:12.8.1 "oci-archive:$T/multi.tar:gpunode.test/cuda-multi:12.8.1" >/dev/null 2>&1 ||
  e2e_fail "podman manifest push --all"
ctr_ -n k8s.io images import --no-unpack "$T/cuda-oci.tar" >/dev/null || e2e_fail "ctr import (OCI archive)"
ctr_ -n k8s.io images import --no-unpack --all-platforms "$T/multi.tar" >/dev/null || e2e_fail "ctr import (index)"
ctr_ -n default images import --no-unpack "$T/plain-docker.tar" >/dev/null || e2e_fail "ctr import (Docker archive)"
e2e_ok "k8s.io: $(ctr_ -n k8s.io images ls -q | tr '\n' ' '); default: $(ctr_ -n default images ls -q | tr '\n' ' ')"

e2e_step "containerd: List and Find"
out=$(G --store containerd --containerd-socket "$csock" -o json) || e2e_fail "list: $out"
check "
imgs={(i['namespace'], n): i for s in q['stores'] for i in s['images'] for n in i['names']}
c=imgs[('k8s.io','gpunode.test/cuda:12.8.1-base')]
assert 'CUDA_VERSION=12.8.1' in c['env'] and c['platform']=='linux/amd64', c
assert c['source']=='image config (containerd, k8s.io)', c
assert c['labels']['maintainer']=='NVIDIA CORPORATION <cudatools@nvidia.com>'
m=imgs[('k8s.io','gpunode.test/cuda-multi:12.8.1')]
assert 'NVARCH=x86_64' in m['env'], m
assert ('default','docker.io/gpunode.test/plain:1') in imgs or ('default','gpunode.test/plain:1') in imgs, sorted(imgs)
order=[i['namespace'] for i in q['stores'][0]['images']]
assert order.index('k8s.io') < order.index('default'), order
" <<< "$out"
e2e_ok "images of k8s.io and default, k8s.io first"
out=$(G --store containerd --containerd-socket "$csock" gpunode.test/cuda-multi:12.8.1 --platform linux/arm64 -o json) ||
  e2e_fail "find arm64: $out"
check "i=q['stores'][0]['images'][0]; assert 'NVARCH=sbsa' in i['env'] and i['namespace']=='k8s.io', i" <<< "$out"
e2e_ok "the arm64 manifest of the index"
out=$(G --store containerd --host-root "$C" --containerd-socket /containerd.sock gpunode.test/cuda:12.8.1-base -o json) ||
  e2e_fail "--host-root: $out"
check "i=q['stores'][0]['images'][0]; assert 'CUDA_VERSION=12.8.1' in i['env'], i" <<< "$out"
e2e_ok "--host-root: the socket is a host path"
if out=$(G --store containerd --containerd-socket "$csock" --containerd-namespace default gpunode.test/cuda:12.8.1-base 2>&1); then
  e2e_fail "found in the wrong namespace: $out"
fi
e2e_assert_contains "$out" "containerd $csock: namespace default: image gpunode.test/cuda:12.8.1-base not found" \
  "--containerd-namespace default does not hold it"
if out=$(G --store containerd --containerd-socket "$csock" nothing.test/missing:1 2>&1); then e2e_fail "missing image found: $out"; fi
e2e_assert_contains "$out" "namespaces k8s.io, default: image nothing.test/missing:1 not found" "a missing image, every namespace named"

# ---- Docker: a private dockerd ----------------------------------------------------------------
e2e_step "dockerd (private data root and socket, no network) with the images loaded"
e2e_dockerd "$T/docker"
pm save --format docker-archive -o "$T/cuda-docker.tar" gpunode.test/cuda:12.8.1-base >/dev/null 2>&1 || e2e_fail "podman save"
e2e_docker load -i "$T/cuda-docker.tar" >/dev/null || e2e_fail "docker load (cuda)"
e2e_docker load -i "$T/plain-docker.tar" >/dev/null || e2e_fail "docker load (plain)"
e2e_ok "dockerd $(e2e_docker version --format '{{.Server.Version}}'): $(e2e_docker images --format '{{.Repository}}:{{.Tag}}' | tr '\n' ' ')"
e2e_step "Docker: List and Find"
out=$(G --store docker --docker-socket "$E2E_DOCKER_SOCK" -o json) || e2e_fail "list: $out"
check "
imgs={n: i for s in q['stores'] for i in s['images'] for n in i['names']}
c=imgs['gpunode.test/cuda:12.8.1-base']
assert 'CUDA_VERSION=12.8.1' in c['env'] and c['platform']=='linux/amd64' and c['source']=='image config (docker)', c
assert c['labels']['maintainer']=='NVIDIA CORPORATION <cudatools@nvidia.com>'
assert c['id'].startswith('sha256:')
assert 'gpunode.test/plain:1' in imgs, sorted(imgs)
" <<< "$out"
out=$(G --store docker --docker-socket "$E2E_DOCKER_SOCK" gpunode.test/cuda:12.8.1-base -o json) || e2e_fail "find: $out"
check "i=q['stores'][0]['images'][0]; assert 'NVIDIA_VISIBLE_DEVICES=all' in i['env'], i" <<< "$out"
e2e_ok "Docker lists and finds them, env and labels as built"
if out=$(G --store docker --docker-socket "$E2E_DOCKER_SOCK" nothing.test/missing:1 2>&1); then e2e_fail "missing image found: $out"; fi
e2e_assert_contains "$out" "docker $E2E_DOCKER_SOCK: image nothing.test/missing:1 not found" "a missing image"

# ---- all three at once, and what goes wrong ---------------------------------------------------
e2e_step "all stores at once: one reference found in each"
out=$(G --containerd-socket "$csock" --docker-socket "$E2E_DOCKER_SOCK" --storage-root "$PS/root" gpunode.test/cuda:12.8.1-base -o json) ||
  e2e_fail "all stores: $out"
check "assert [s['store'] for s in q['stores'] if s['images']]==['containerd','docker','containers-storage'], q" <<< "$out"
e2e_ok "containerd, docker and containers-storage each answer"

e2e_step "a missing socket, a socket that never answers, a garbage images.json"
if out=$(G --store containerd --containerd-socket "$T/none.sock" 2>&1); then e2e_fail "missing socket: $out"; fi
e2e_assert_contains "$out" "containerd $T/none.sock: no socket at $T/none.sock" "containerd: a missing socket named"
if out=$(G --store docker --docker-socket "$T/none.sock" 2>&1); then e2e_fail "missing socket: $out"; fi
e2e_assert_contains "$out" "docker $T/none.sock: no socket at" "docker: a missing socket named"
python3 -c "
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(16); time.sleep(120)" "$T/silent.sock" &
silent_pid=$!
e2e_on_exit kill "$silent_pid"
for _ in $(seq 50); do [ -S "$T/silent.sock" ] && break; sleep 0.1; done
for store in containerd docker; do
  start=$(date +%s%N)
  if out=$(G --store "$store" "--$store-socket" "$T/silent.sock" --timeout 1 gpunode.test/cuda:12.8.1-base 2>&1); then
    e2e_fail "$store: a silent socket answered: $out"
  fi
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  e2e_assert_contains "$out" "no answer within 1s" "$store: a socket that never answers meets the deadline"
  [ "$ms" -lt 8000 ] || e2e_fail "$store: took ${ms} ms with --timeout 1"
  e2e_ok "$store: gave up after ${ms} ms"
done
mkdir -p "$T/garbage/overlay-images"
printf '[{"id": "%s", "names": ["gpunode.test/cu' "$(printf 'a%.0s' $(seq 64))" > "$T/garbage/overlay-images/images.json"
if out=$(G --store containers-storage --storage-root "$T/garbage" 2>&1); then e2e_fail "garbage images.json: $out"; fi
e2e_assert_contains "$out" "$T/garbage/overlay-images/images.json" "a cut-short images.json: named"
e2e_assert_contains "$out" "cut short" "... and said what it is"
if out=$(G --store containers-storage --storage-root "$T/nowhere" 2>&1); then e2e_fail "no storage: $out"; fi
e2e_assert_contains "$out" "containers-storage $T/nowhere: no such folder" "no storage folder"
e2e_step "compat check --image answers from the node's store (images with published env values, make_images.sh)"
bash "$E2E_SOURCE_DIR/test/image/make_images.sh" "$T/mk" >/dev/null 2>&1 || e2e_fail "make_images.sh"
cc() { "$bin" -o json compat check --image-source node --store containers-storage --storage-root "$T/mk/storage/root" "$@" |
  python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["verdict"], d["rule"]["id"], d["workload"]["cuda"], d["workload"]["imageConfig"]["source"])'; }
src="image config (containers-storage $T/mk/storage/root)"
v=localhost/gpunode-test/vllm-openai:v0.10.1
e2e_assert_eq "$(cc --image $v --driver 580.65.06 --gpu H100 || true)" "compatible paired-driver 12.8.1 $src" "vLLM v0.10.1 on R580 H100"
e2e_assert_eq "$(cc --image $v --driver 550.54.15 --gpu L40S || true)" "compatible-with-caveats minor-version-compat 12.8.1 $src" "vLLM v0.10.1 on R550 L40S"
e2e_assert_eq "$(cc --image $v --driver 545.29.06 --gpu H100 || true)" "incompatible image-requires 12.8.1 $src" "vLLM v0.10.1 on R545: NVIDIA_REQUIRE_CUDA fails"
e2e_assert_eq "$(cc --image localhost/gpunode-test/cuda:12.8.1-base-ubuntu24.04 --driver 535.104.05 --gpu T4 || true)" \
  "compatible-with-caveats minor-version-compat 12.8.1 $src" "cuda 12.8.1 on R535 T4: brand=tesla,driver>=535,driver<536 admits it"
e2e_assert_eq "$(cc --image localhost/gpunode-test/cuda:12.8.1-base-ubuntu24.04 --driver 535.104.05 --gpu 'RTX 4090' || true)" \
  "incompatible image-requires 12.8.1 $src" "cuda 12.8.1 on R535 RTX 4090: no geforce group, the shim would refuse it"
e2e_assert_eq "$(cc --image localhost/gpunode-test/pytorch:25.08-py3 --driver 580.65.06 --gpu H200 || true)" \
  "compatible paired-driver 13.0.0 $src" "NGC PyTorch 25.08 on R580 H200"

e2e_step "all passed"
