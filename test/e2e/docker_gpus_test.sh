#!/usr/bin/env bash
# ctest label "e2e": `docker run --gpus` with Debian's Docker (docker.io 20.10) on a node set up by
# gpunode alone. Docker offers --gpus only when it finds `nvidia-container-runtime-hook` in its
# PATH (moby daemon/nvidia_linux.go); `gpunode runtime configure --runtime docker` links that name
# to gpunode and makes gpunode's OCI shim Docker's (default) `nvidia` runtime, which gives the
# container what NVIDIA_VISIBLE_DEVICES / NVIDIA_DRIVER_CAPABILITIES ask for from the CDI spec of a
# fixture host root with real character devices, and removes the hook Docker added. The hook is
# what makes the variable count in an unprivileged container: without --gpus, an image's or a
# user's NVIDIA_VISIBLE_DEVICES counts only in a privileged container (CAP_SYS_ADMIN).
#
# dockerd runs as root with a private data root, exec root and socket, no network (--bridge=none,
# no iptables); the image is `docker import`ed from a busybox-static root; nothing is pulled. An image
# whose ENV has NVIDIA_REQUIRE_CUDA=cuda>=13.1 is refused on the node's CUDA 13.0 driver, and starts
# with NVIDIA_DISABLE_REQUIRE=1.
#
# Then the same node as NVIDIA's `nvidia-ctk runtime configure --runtime=docker` leaves it: runc
# stays Docker's default runtime (no --set-as-default), and `nvidia-container-runtime-hook prestart`
# (gpunode) injects into the created container from outside: device nodes, driver files, the ld
# cache, and the devices allowed in its device cgroup (v1 here). The same --gpus matrix must see
# exactly the requested nodes and files; the cgroup is proven by opening nodes: a requested one
# fails with ENXIO (allowed, but no driver behind a simulated node), one not requested (made with
# mknod in the container) with EPERM (denied by the cgroup).
#
#   usage: docker_gpus_test.sh PATH/TO/gpunode      (as root; needs docker.io, runc, busybox-static)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bin=${1:?usage: $0 PATH/TO/gpunode}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[ -x "$bin" ] || e2e_fail "$bin: not an executable"
profile=dgx-h200

e2e_require_root
e2e_require_tools runc busybox python3
for t in /usr/sbin/dockerd /usr/bin/docker; do
  [ -x "$t" ] || e2e_require_tools "$(basename "$t")"  # fails in CI, skips elsewhere, naming docker.io
done
e2e_init

e2e_step "fixture host root of $profile and its CDI spec"
host=$E2E_TMP/host
e2e_fixture_root "$bin" "$profile" "$host"
driver_root=$(e2e_fixture_driver_root "$host")
cdi_dir=$E2E_TMP/cdi
mkdir -p "$cdi_dir"
e2e_gpunode_fixture "$bin" "$profile" "$host" cdi generate --hook-path "$(e2e_hook_path "$bin")" --driver-root "$driver_root" \
  --output "$cdi_dir/nvidia.yaml" 2> "$E2E_TMP/generate.err" || e2e_fail "cdi generate: $(cat "$E2E_TMP/generate.err")"
uuid2=$(e2e_gpunode_fixture "$bin" "$profile" "$host" cdi list "$cdi_dir/nvidia.yaml" | sed -n 's/^nvidia.com\/gpu=\(GPU-.*\)$/\1/p' | sed -n 3p)
[ -n "$uuid2" ] || e2e_fail "no third GPU UUID in the spec"
e2e_ok "spec with 8 GPUs; GPU 2 is $uuid2"

e2e_step "gpunode runtime configure --runtime docker --set-as-default"
mkdir -p "$E2E_TMP/bin" "$E2E_TMP/docker"
ln -s "$bin" "$E2E_TMP/bin/nvidia-container-runtime"
out=$("$bin" --host-root "$host" runtime configure --runtime docker --config "$E2E_TMP/docker/daemon.json" \
        --runtime-path "$E2E_TMP/bin/nvidia-container-runtime" --set-as-default --backup-dir "$E2E_TMP/backups" 2>&1) ||
  e2e_fail "runtime configure: $out"
e2e_assert_contains "$out" "linked $host/usr/bin/nvidia-container-runtime-hook -> $E2E_TMP/bin/nvidia-container-runtime" \
  "the hook name Docker looks for is installed"
e2e_assert_contains "$(cat "$E2E_TMP/docker/daemon.json")" '"default-runtime": "nvidia"' "nvidia is Docker's default runtime"
# dockerd's PATH: the hook (and nothing else of the fixture), then the system's
mkdir -p "$E2E_TMP/hookbin"
ln -s "$host/usr/bin/nvidia-container-runtime-hook" "$E2E_TMP/hookbin/nvidia-container-runtime-hook"

e2e_step "dockerd (private data root, no network)"
d=$E2E_TMP/docker
sock=$d/docker.sock
env -i PATH="$E2E_TMP/hookbin:/usr/sbin:/usr/bin:/sbin:/bin" HOME=/root \
  GPUNODE_CDI_SPEC_DIRS="$cdi_dir" GPUNODE_OCI_LOG="$E2E_TMP/shim.log" GPUNODE_RUNTIME_PATH="$(command -v runc)" \
  GPUNODE_SIMULATE="$profile" \
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
  setsid /usr/sbin/dockerd --config-file "$d/daemon.json" --data-root "$d/root" --exec-root "$d/exec" \
    --pidfile "$d/dockerd.pid" -H "unix://$sock" --bridge=none --iptables=false --ip-forward=false \
    --ip-masq=false --userland-proxy=false --storage-driver=vfs --cgroup-parent "$E2E_CGROUP_PARENT" \
    --log-level warn > "$d/dockerd.log" 2>&1 < /dev/null &
dockerd_pid=$!
stop_dockerd() {
  kill "$dockerd_pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$dockerd_pid" 2>/dev/null || true
  pkill -9 -f "$d/exec" 2>/dev/null || true
  grep -o " $d/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
}
e2e_on_exit stop_dockerd
dk() { /usr/bin/docker -H "unix://$sock" "$@"; }
for _ in $(seq 150); do dk version >/dev/null 2>&1 && break; kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.2; done
dk version >/dev/null 2>&1 || e2e_fail "dockerd did not start: $(tail -20 "$d/dockerd.log")"
info=$(dk info 2>/dev/null)
e2e_assert_contains "$info" "Default Runtime: nvidia" "Docker's default runtime"
e2e_ok "dockerd $(dk version --format '{{.Server.Version}}') up"

e2e_busybox_rootfs "$E2E_TMP/busybox"
tar -C "$E2E_TMP/busybox" -c . | dk import - gpunode.test/busybox:1 >/dev/null || e2e_fail "docker import"
report='ls /dev | grep -E "^nvidia[0-9]+$" | tr "\n" " "; echo; ls /usr/lib/x86_64-linux-gnu 2>/dev/null | grep -E "^lib(cuda|nvidia-ml|nvcuvid)\.so\.[0-9]+\." | sed "s/\.so.*//" | sort | tr "\n" " "; echo'
run() { dk run --rm --network none "$@" gpunode.test/busybox:1 sh -c "$report" 2>&1; }

e2e_step "docker run --gpus all"
out=$(run --gpus all) || e2e_fail "--gpus all: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "nvidia0 nvidia1 nvidia2 nvidia3 nvidia4 nvidia5 nvidia6 nvidia7 " "every GPU node"
e2e_assert_eq "$(sed -n 2p <<< "$out")" "libcuda libnvidia-ml " "utility,compute files (NVIDIA's default capabilities), no video"
grep -q "removed nvidia-container-runtime-hook" "$E2E_TMP/shim.log" || e2e_fail "the shim did not remove Docker's hook: $(tail -3 "$E2E_TMP/shim.log")"
e2e_ok "the shim removed the prestart hook Docker added"

e2e_step "docker run --gpus 2 / device=1,3 / device=<UUID> / none"
out=$(run --gpus 2) || e2e_fail "--gpus 2: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "nvidia0 nvidia1 " "--gpus 2: the first two, as Docker numbers them"
out=$(run --gpus '"device=1,3"') || e2e_fail "device=1,3: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "nvidia1 nvidia3 " "--gpus \"device=1,3\""
out=$(run --gpus "\"device=$uuid2\"") || e2e_fail "device=UUID: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "nvidia2 " "--gpus \"device=$uuid2\""
out=$(run) || e2e_fail "no --gpus: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "" "no --gpus: no GPU node"

e2e_step "NVIDIA_DRIVER_CAPABILITIES"
out=$(run --gpus 1 -e NVIDIA_DRIVER_CAPABILITIES=video,utility) || e2e_fail "capabilities: $out"
e2e_assert_eq "$(sed -n 2p <<< "$out")" "libnvcuvid libnvidia-ml " "video,utility: libnvcuvid and NVML, no libcuda"
out=$(run --gpus 1 -e NVIDIA_DRIVER_CAPABILITIES=all) || e2e_fail "capabilities all: $out"
e2e_assert_eq "$(sed -n 2p <<< "$out")" "libcuda libnvcuvid libnvidia-ml " "all"
if out=$(run --gpus 1 -e NVIDIA_DRIVER_CAPABILITIES=compute,warp); then e2e_fail "an unknown capability started: $out"; fi
e2e_assert_contains "$out" 'unknown driver capability "warp"' "an unknown capability is refused, named"

e2e_step "NVIDIA_VISIBLE_DEVICES without --gpus: only in a privileged container"
out=$(run -e NVIDIA_VISIBLE_DEVICES=all) || e2e_fail "-e NVIDIA_VISIBLE_DEVICES=all: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "" "-e NVIDIA_VISIBLE_DEVICES=all, unprivileged: no GPU node"
grep -q "ignored NVIDIA_VISIBLE_DEVICES=all: the container is unprivileged" "$E2E_TMP/shim.log" ||
  e2e_fail "the shim did not log the ignored request: $(tail -3 "$E2E_TMP/shim.log")"
out=$(run --runtime nvidia --cap-add SYS_ADMIN -e NVIDIA_VISIBLE_DEVICES=5) || e2e_fail "--cap-add SYS_ADMIN: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "nvidia5 " "--cap-add SYS_ADMIN -e NVIDIA_VISIBLE_DEVICES=5: GPU 5"
out=$(run --gpus '"device=6"' -e NVIDIA_VISIBLE_DEVICES=all) || e2e_fail "--gpus with -e: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "nvidia6 " "--gpus \"device=6\" -e NVIDIA_VISIBLE_DEVICES=all: Docker's value comes last"

e2e_step "mistakes: an unknown device; --gpus with runc as the runtime"
if out=$(run --gpus '"device=9"'); then e2e_fail "device=9 started on an 8-GPU node: $out"; fi
e2e_assert_contains "$out" "nvidia.com/gpu=9" "the start fails naming the device"
e2e_assert_contains "$out" "requested by NVIDIA_VISIBLE_DEVICES=9" "... and where it was asked for"
out=$(run --runtime runc --gpus 1) || e2e_fail "--runtime runc --gpus 1: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "nvidia0 " "--runtime runc --gpus 1: the hook gives GPU 0"
e2e_step "NVIDIA_REQUIRE_CUDA in the image's config: refused when the node's driver (580, CUDA 13.0) fails it"
# The node's facts (driver and CUDA version, each GPU's brand and compute capability) come from its
# NVML: here the simulated dgx-h200's (GPUNODE_SIMULATE in the shim's environment).
tar -C "$E2E_TMP/busybox" -c . | dk import -c 'ENV NVIDIA_REQUIRE_CUDA=cuda>=13.1' -c 'ENV CUDA_VERSION=13.1.0' - \
  gpunode.test/cuda-require:13.1 >/dev/null || e2e_fail "docker import with ENV"
runi() { dk run --rm --network none "$@" sh -c "$report" 2>&1; }
if out=$(runi --gpus 1 gpunode.test/cuda-require:13.1); then e2e_fail "cuda>=13.1 started on a CUDA 13.0 driver: $out"; fi
e2e_assert_contains "$out" "unsatisfied condition: cuda>=13.1 (NVIDIA_REQUIRE_CUDA, GPU 0 (NVIDIA H200))" "the start fails naming the term"
e2e_assert_contains "$out" "this node's driver runs CUDA 13.0" "... and the node's CUDA version"
out=$(runi --gpus 1 -e NVIDIA_DISABLE_REQUIRE=1 gpunode.test/cuda-require:13.1) || e2e_fail "NVIDIA_DISABLE_REQUIRE=1: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "nvidia0 " "NVIDIA_DISABLE_REQUIRE=1: it starts with GPU 0"
out=$(runi gpunode.test/cuda-require:13.1) || e2e_fail "the same image without --gpus: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "" "without --gpus the requirement is not checked (no GPU, as NVIDIA's hook)"

e2e_step "runc as Docker's default runtime: gpunode runtime configure --runtime docker (no --set-as-default)"
stop_dockerd || true  # (its mount sweep finds nothing: grep exits 1)
d=$E2E_TMP/docker-runc
mkdir -p "$d"
out=$("$bin" --host-root "$host" runtime configure --runtime docker --config "$d/daemon.json" \
        --runtime-path "$E2E_TMP/bin/nvidia-container-runtime" --backup-dir "$E2E_TMP/backups-runc" 2>&1) ||
  e2e_fail "runtime configure: $out"
if grep -q '"default-runtime"' "$d/daemon.json"; then e2e_fail "runc is no longer the default: $(cat "$d/daemon.json")"; fi
e2e_assert_contains "$out" "with runc as Docker's default runtime: gpunode, as that hook, injects the GPUs" "configure says who injects"
E2E_DOCKERD_PATH="$E2E_TMP/hookbin:/usr/sbin:/usr/bin:/sbin:/bin"
E2E_DOCKERD_ENV=(GPUNODE_CDI_SPEC_DIRS="$cdi_dir" GPUNODE_OCI_LOG="$E2E_TMP/hook.log" GPUNODE_SIMULATE="$profile"
  "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
e2e_dockerd "$d" --config-file "$d/daemon.json"
sock=$E2E_DOCKER_SOCK
e2e_assert_contains "$(dk info 2>/dev/null)" "Default Runtime: runc" "Docker's default runtime"
tar -C "$E2E_TMP/busybox" -c . | dk import - gpunode.test/busybox:1 >/dev/null || e2e_fail "docker import"
e2e_ok "dockerd with runc as its default runtime"

e2e_step "runc default: docker run --gpus all / 2 / device=1,3 / device=<UUID> / none"
out=$(run --gpus all) || e2e_fail "--gpus all: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "nvidia0 nvidia1 nvidia2 nvidia3 nvidia4 nvidia5 nvidia6 nvidia7 " "every GPU node"
e2e_assert_eq "$(sed -n 2p <<< "$out")" "libcuda libnvidia-ml " "utility,compute files, no video"
grep -q "hook: pid [0-9]*, 12 device nodes" "$E2E_TMP/hook.log" || e2e_fail "the hook did not inject: $(tail -3 "$E2E_TMP/hook.log")"
e2e_ok "the hook injected ($(grep -o 'hook: pid [0-9]*, [^;]*' "$E2E_TMP/hook.log" | tail -1 | sed 's/pid [0-9]*, //'))"
out=$(run --gpus 2) || e2e_fail "--gpus 2: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "nvidia0 nvidia1 " "--gpus 2"
out=$(run --gpus '"device=1,3"') || e2e_fail "device=1,3: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "nvidia1 nvidia3 " "--gpus \"device=1,3\""
out=$(run --gpus "\"device=$uuid2\"") || e2e_fail "device=UUID: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "nvidia2 " "--gpus \"device=$uuid2\""
out=$(run) || e2e_fail "no --gpus: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "" "no --gpus: no GPU node"
e2e_assert_eq "$(sed -n 2p <<< "$out")" "" "no --gpus: no driver file"

e2e_step "runc default: NVIDIA_DRIVER_CAPABILITIES"
out=$(run --gpus 1 -e NVIDIA_DRIVER_CAPABILITIES=video,utility) || e2e_fail "capabilities: $out"
e2e_assert_eq "$(sed -n 2p <<< "$out")" "libnvcuvid libnvidia-ml " "video,utility: libnvcuvid and NVML, no libcuda"
out=$(run --gpus 1 -e NVIDIA_DRIVER_CAPABILITIES=all) || e2e_fail "capabilities all: $out"
e2e_assert_eq "$(sed -n 2p <<< "$out")" "libcuda libnvcuvid libnvidia-ml " "all"
if out=$(run --gpus 1 -e NVIDIA_DRIVER_CAPABILITIES=compute,warp); then e2e_fail "an unknown capability started: $out"; fi
e2e_assert_contains "$out" 'unknown driver capability "warp"' "an unknown capability is refused, named"

e2e_step "runc default: the files are read-only, the linker finds them, the device cgroup allows only the requested GPU"
probe='grep " /usr/lib/x86_64-linux-gnu/libcuda.so" /proc/mounts | head -1 | cut -d" " -f4 | tr , "\n" | grep -xE "ro|nosuid|nodev" | tr "\n" " "; echo
ls -l /usr/lib/x86_64-linux-gnu/libcuda.so.1 | sed "s/.*-> //"
cat /dev/nvidia1 2>&1 | sed "s/.*: //"
mknod /dev/probe-n5 c 195 5 && cat /dev/probe-n5 2>&1 | sed "s/.*: //"
grep -q libcuda.so.1 /etc/ld.so.cache && echo "libcuda.so.1 in the ld cache"'
out=$(dk run --rm --network none --gpus '"device=1"' gpunode.test/busybox:1 sh -c "$probe" 2>&1) || e2e_fail "probe: $out"
e2e_assert_eq "$(sed -n 1p <<< "$out")" "ro nosuid nodev " "libcuda is mounted read-only, nosuid, nodev"
e2e_assert_contains "$(sed -n 2p <<< "$out")" "libcuda.so.5" "the spec's create-symlinks hook made libcuda.so.1"
e2e_assert_eq "$(sed -n 3p <<< "$out")" "No such device or address" "/dev/nvidia1 (requested): allowed by the cgroup (ENXIO: no driver behind it)"
e2e_assert_eq "$(sed -n 4p <<< "$out")" "Operation not permitted" "GPU 5's node (not requested, made with mknod): EPERM from the cgroup"
e2e_assert_eq "$(sed -n 5p <<< "$out")" "libcuda.so.1 in the ld cache" "the spec's update-ldcache hook ran in the container"

e2e_step "runc default: refusals"
if out=$(run --gpus '"device=9"'); then e2e_fail "device=9 started on an 8-GPU node: $out"; fi
e2e_assert_contains "$out" "nvidia.com/gpu=9" "the start fails naming the device"
tar -C "$E2E_TMP/busybox" -c . | dk import -c 'ENV NVIDIA_REQUIRE_CUDA=cuda>=13.1' - gpunode.test/cuda-require:13.1 >/dev/null ||
  e2e_fail "docker import with ENV"
if out=$(runi --gpus 1 gpunode.test/cuda-require:13.1); then e2e_fail "cuda>=13.1 started on a CUDA 13.0 driver: $out"; fi
e2e_assert_contains "$out" "unsatisfied condition: cuda>=13.1" "NVIDIA_REQUIRE_CUDA is checked by the hook too"
out=$(run -e NVIDIA_VISIBLE_DEVICES=all) || e2e_fail "-e NVIDIA_VISIBLE_DEVICES=all: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "" "-e NVIDIA_VISIBLE_DEVICES=all without --gpus: no hook, no GPU"
out=$(run --runtime nvidia --gpus '"device=4"') || e2e_fail "--runtime nvidia: $out"
e2e_assert_eq "$(head -1 <<< "$out")" "nvidia4 " "--runtime nvidia on the same daemon: the shim (which removes the hook)"
e2e_step "all passed"
