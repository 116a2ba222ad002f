#!/usr/bin/env bash
# ctest label "e2e": `gpunode oci-runtime` in front of the REAL runc. OCI bundles whose config.json
# asks for GPUs through a CDI annotation, /dev/null volume mounts under
# /var/run/nvidia-container-devices, or NVIDIA_VISIBLE_DEVICES (believed only in a privileged
# container, with Docker's --gpus hook, or with the setting on) get exactly those GPUs' device
# nodes, the driver files and the hooks' work, from the spec `gpunode cdi generate` wrote for a
# fixture host root with real character devices (see podman_cdi_test.sh for the fixture steps).
# An unprivileged container's own NVIDIA_VISIBLE_DEVICES=all gets no GPU.
#
#   usage: oci_shim_test.sh PATH/TO/gpunode      (as root; needs runc, busybox-static)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bin=${1:?usage: $0 PATH/TO/gpunode}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[ -x "$bin" ] || e2e_fail "$bin: not an executable"
profile=dgx-h200

e2e_require_root
e2e_require_tools runc busybox python3 ldconfig
e2e_init

e2e_step "fixture host root of $profile, spec from gpunode cdi generate"
host=$E2E_TMP/host
e2e_fixture_root "$bin" "$profile" "$host"
driver_root=$(e2e_fixture_driver_root "$host")
cdi_dir=$E2E_TMP/cdi
mkdir -p "$cdi_dir"
e2e_gpunode_fixture "$bin" "$profile" "$host" cdi generate --hook-path "$(e2e_hook_path "$bin")" --driver-root "$driver_root" \
  --output "$cdi_dir/nvidia.yaml" 2> "$E2E_TMP/generate.err" || e2e_fail "cdi generate: $(cat "$E2E_TMP/generate.err")"
e2e_assert_device_nodes_under "$cdi_dir/nvidia.yaml" "$driver_root"
libcuda=$(grep -o 'containerPath: "[^"]*/libcuda\.so\.[0-9][0-9.]*"' "$cdi_dir/nvidia.yaml" | head -1 | cut -d'"' -f2)
[ -n "$libcuda" ] || e2e_fail "no libcuda mount in the spec"
e2e_ok "spec with $(grep -c '  - name: ' "$cdi_dir/nvidia.yaml") devices; libcuda at $libcuda"

e2e_busybox_rootfs "$E2E_TMP/busybox"
# shellcheck disable=SC2016
report='for n in /dev/nvidia*; do [ -c "$n" ] && echo "node $n $(stat -c %t:%T "$n")"; done
echo "env $NVIDIA_VISIBLE_DEVICES"
echo "lib $(md5sum < "$1" | cut -d" " -f1)"
echo "link $(readlink "$(dirname "$1")/libcuda.so")"
echo "ldconf $(grep -v "^#" /etc/ld.so.conf.d/00-gpunode-cdi.conf 2>/dev/null | tr "\n" " ")"'

# shim_run NAME VISIBLE [python edit of config c] [shim flag...]: a fresh bundle + rootfs, run
# through the shim. `runc spec`'s bounding set has no CAP_SYS_ADMIN: unprivileged unless $privileged.
privileged="c['process']['capabilities']['bounding'].append('CAP_SYS_ADMIN')"
shim_run() {
  local name=$1 visible=$2 edit=${3:-}
  shift $(($# < 3 ? $# : 3))
  local rootfs=$E2E_TMP/rootfs-$name bundle=$E2E_TMP/bundle-$name
  cp -a "$E2E_TMP/busybox" "$rootfs"
  e2e_oci_bundle "$bundle" "$rootfs" /bin/sh -c "$report" report "$libcuda"
  e2e_oci_edit "$bundle/config.json" "
c['process']['env'] = [e for e in c['process']['env'] if not e.startswith('NVIDIA_')]
if '$visible' != '-': c['process']['env'].append('NVIDIA_VISIBLE_DEVICES=$visible')
$edit"
  mkdir -p "$E2E_TMP/runc-state"
  out=$(XDG_CONFIG_HOME=$E2E_TMP/xdg "$bin" oci-runtime --runtime-path "$(command -v runc)" --spec-dir "$cdi_dir" \
          --no-generate --debug-log "$E2E_TMP/shim.log" "$@" --root "$E2E_TMP/runc-state" --log "$E2E_TMP/runc-$name.log" \
          run --bundle "$bundle" "gpunode-shim-$name" 2>&1)
  rc=$?
  e2e_runc delete -f "gpunode-shim-$name" >/dev/null 2>&1 || true
}

e2e_step "NVIDIA_VISIBLE_DEVICES=1 in a privileged container through gpunode oci-runtime --runtime-path runc run"
set +e
shim_run one 1 "$privileged"
set -e
[ "$rc" -eq 0 ] || e2e_fail "the shim + runc failed ($rc): $out"
e2e_assert_contains "$out" "node /dev/nvidia1 c3:1" "GPU 1's node, 195:1"
if grep -q '^node /dev/nvidia0 ' <<< "$out"; then e2e_fail "GPU 0's node is in the container: $out"; fi
e2e_ok "GPU 0's node is absent"
e2e_assert_contains "$out" "node /dev/nvidiactl c3:ff" "the control node"
want=$(md5sum < "$host$libcuda" | cut -d' ' -f1)
e2e_assert_contains "$out" "lib $want" "libcuda mounted with the fixture's content"
e2e_assert_contains "$out" "link libcuda.so.1" "create-symlinks hook ran (libcuda.so -> libcuda.so.1)"
e2e_assert_contains "$out" "ldconf $(dirname "$libcuda")" "update-ldcache hook ran"
e2e_assert_contains "$out" "env void" "the spec's NVIDIA_VISIBLE_DEVICES=void comes last (no double injection)"
e2e_assert_contains "$(cat "$E2E_TMP/bundle-one/config.json")" '"gpunode.io/injected-devices":"nvidia.com/gpu=1"' \
  "config.json records what was injected"

e2e_step "NVIDIA_VISIBLE_DEVICES=all, privileged"
set +e; shim_run all all "$privileged"; set -e
[ "$rc" -eq 0 ] || e2e_fail "all: $out"
e2e_assert_eq "$(grep -c '^node /dev/nvidia[0-9]' <<< "$out")" 8 "8 GPU nodes"

e2e_step "an image's NVIDIA_VISIBLE_DEVICES=all, unprivileged, uid 1000: no GPU"
set +e; shim_run unpriv all "c['process']['user'] = {'uid': 1000, 'gid': 1000}"; set -e
[ "$rc" -eq 0 ] || e2e_fail "the unprivileged container did not start: $out"
if grep -q '^node /dev/nvidia' <<< "$out"; then e2e_fail "an unprivileged container's env got GPU nodes: $out"; fi
e2e_ok "no NVIDIA device node in the container"
e2e_assert_contains "$(cat "$E2E_TMP/runc-unpriv.log")" "level=warning" "runc's log has the warning"
e2e_assert_contains "$(cat "$E2E_TMP/runc-unpriv.log")" "ignored NVIDIA_VISIBLE_DEVICES=all: the container is unprivileged" \
  "... naming the request"
e2e_assert_contains "$(cat "$E2E_TMP/runc-unpriv.log")" "accept-nvidia-visible-devices-envvar-when-unprivileged = true" \
  "... and the setting"

e2e_step "... the same with the setting on (NVIDIA's default), in NVIDIA's config file"
mkdir -p "$E2E_TMP/xdg/nvidia-container-runtime"
echo 'accept-nvidia-visible-devices-envvar-when-unprivileged = true' > "$E2E_TMP/xdg/nvidia-container-runtime/config.toml"
set +e; shim_run unpriv-on 3 "c['process']['user'] = {'uid': 1000, 'gid': 1000}"; set -e
rm -r "$E2E_TMP/xdg"
[ "$rc" -eq 0 ] || e2e_fail "setting on: $out"
e2e_assert_eq "$(grep '^node /dev/nvidia[0-9]' <<< "$out" | cut -d' ' -f2 | tr '\n' ' ')" "/dev/nvidia3 " "GPU 3"

e2e_step "a volume-mount request for GPU 1 (the device plugin's volume-mounts strategy), unprivileged"
set +e
shim_run mount /var/run/nvidia-container-devices \
  "c['mounts'].append({'destination': '/var/run/nvidia-container-devices/1', 'type': 'bind', 'source': '/dev/null', 'options': ['rbind', 'ro']})"
set -e
[ "$rc" -eq 0 ] || e2e_fail "volume mount: $out"
e2e_assert_eq "$(grep '^node /dev/nvidia[0-9]' <<< "$out" | cut -d' ' -f2 | tr '\n' ' ')" "/dev/nvidia1 " "exactly GPU 1"
e2e_assert_contains "$out" "node /dev/nvidiactl c3:ff" "the control node"

e2e_step "... the same with --accept-volume-mounts=false: no GPU"
set +e
shim_run mount-off /var/run/nvidia-container-devices \
  "c['mounts'].append({'destination': '/var/run/nvidia-container-devices/1', 'type': 'bind', 'source': '/dev/null', 'options': ['rbind', 'ro']})" \
  --accept-volume-mounts=false
set -e
[ "$rc" -eq 0 ] || e2e_fail "volume mount off: $out"
if grep -q '^node /dev/nvidia' <<< "$out"; then e2e_fail "ignored volume mounts gave GPU nodes: $out"; fi
e2e_assert_contains "$(cat "$E2E_TMP/runc-mount-off.log")" "accept-nvidia-visible-devices-as-volume-mounts is false" \
  "runc's log names the setting"

e2e_step "Docker's --gpus hook in an unprivileged container: the variable Docker appended counts"
set +e
shim_run docker 4 "c['process']['env'].insert(1, 'NVIDIA_VISIBLE_DEVICES=all')
c.setdefault('hooks', {})['prestart'] = [{'path': '/usr/bin/nvidia-container-runtime-hook', 'args': ['nvidia-container-runtime-hook', 'prestart'], 'env': ['PATH=/usr/sbin:/usr/bin']}]"
set -e
[ "$rc" -eq 0 ] || e2e_fail "docker hook: $out"
e2e_assert_eq "$(grep '^node /dev/nvidia[0-9]' <<< "$out" | cut -d' ' -f2 | tr '\n' ' ')" "/dev/nvidia4 " "GPU 4 (the hook removed)"

e2e_step "a CDI annotation, beside the pod's own NVIDIA_VISIBLE_DEVICES=all: only the annotation's GPUs"
set +e; shim_run annot all "c.setdefault('annotations', {})['cdi.k8s.io/gpunode_test'] = 'nvidia.com/gpu=2,nvidia.com/gpu=5'"; set -e
[ "$rc" -eq 0 ] || e2e_fail "annotation: $out"
e2e_assert_eq "$(grep '^node /dev/nvidia[0-9]' <<< "$out" | cut -d' ' -f2 | tr '\n' ' ')" "/dev/nvidia2 /dev/nvidia5 " "GPU 2 and 5"

e2e_step "NVIDIA_VISIBLE_DEVICES unset: the container is left alone"
set +e; shim_run none -; set -e
[ "$rc" -eq 0 ] || e2e_fail "unset: $out"
if grep -q '^node ' <<< "$out"; then e2e_fail "a container that asked for nothing got nodes: $out"; fi
e2e_ok "no NVIDIA node, config.json unchanged by the shim"

e2e_step "an unknown GPU is refused before runc runs"
set +e; shim_run bad 9 "$privileged"; set -e
[ "$rc" -ne 0 ] || e2e_fail "NVIDIA_VISIBLE_DEVICES=9 started a container: $out"
e2e_assert_contains "$out" "unresolvable CDI device nvidia.com/gpu=9" "the error names the device"

e2e_step "another vendor's CDI device in the variable is refused before runc runs"
set +e; shim_run nic example.com/nic=nic0 "$privileged"; set -e
[ "$rc" -ne 0 ] || e2e_fail "NVIDIA_VISIBLE_DEVICES=example.com/nic=nic0 started a container: $out"
e2e_assert_contains "$out" "names only nvidia.com/gpu devices" "the error says what is allowed"
e2e_assert_contains "$(cat "$E2E_TMP/shim.log")" "injected nvidia.com/gpu=1 from $cdi_dir/nvidia.yaml" "the debug log"

# profile_spec PROFILE: a fixture host root and its spec (as above) in $E2E_TMP/spec-<name>/; the
# shim then reads that node's NVML facts through GPUNODE_SIMULATE=PROFILE.
profile_spec() {
  local prof=$1 d
  d=$E2E_TMP/spec-$(basename "$prof" .yaml)
  [ -f "$d/cdi/nvidia.yaml" ] && { echo "$d/cdi"; return; }
  e2e_fixture_root "$bin" "$prof" "$d/host"
  mkdir -p "$d/cdi"
  e2e_gpunode_fixture "$bin" "$prof" "$d/host" cdi generate --hook-path "$(e2e_hook_path "$bin")" \
    --driver-root "$(e2e_fixture_driver_root "$d/host")" --output "$d/cdi/nvidia.yaml" 2> "$d/generate.err" ||
    e2e_fail "cdi generate $prof: $(cat "$d/generate.err")"
  echo "$d/cdi"
}

# NVIDIA_REQUIRE_* (issue 32): the shim evaluates them against the node's driver and the GPUs it
# gives, as NVIDIA's hook does, before runc runs. The node: the simulated pcie-l40s-4 (driver
# 550.127.05, CUDA 12.4).
l40s_specs=$(profile_spec pcie-l40s-4)
req_run() {
  local name=$1 edit=$2
  local rootfs=$E2E_TMP/rootfs-$name bundle=$E2E_TMP/bundle-$name
  cp -a "$E2E_TMP/busybox" "$rootfs"
  e2e_oci_bundle "$bundle" "$rootfs" /bin/sh -c 'for n in /dev/nvidia[0-9]*; do [ -c "$n" ] && echo "node $n"; done' report
  e2e_oci_edit "$bundle/config.json" "
c['process']['env'] = [e for e in c['process']['env'] if not e.startswith('NVIDIA_')]
c['process']['env'].append('NVIDIA_VISIBLE_DEVICES=0')
c['process']['capabilities']['bounding'].append('CAP_SYS_ADMIN')
$edit"
  mkdir -p "$E2E_TMP/runc-state"
  out=$(GPUNODE_SIMULATE=pcie-l40s-4 XDG_CONFIG_HOME=$E2E_TMP/xdg "$bin" oci-runtime --runtime-path "$(command -v runc)" \
          --spec-dir "$l40s_specs" --no-generate --debug-log "$E2E_TMP/shim.log" --root "$E2E_TMP/runc-state" \
          --log "$E2E_TMP/runc-$name.log" run --bundle "$bundle" "gpunode-shim-$name" 2>&1)
  rc=$?
  e2e_runc delete -f "gpunode-shim-$name" >/dev/null 2>&1 || true
}

e2e_step "NVIDIA_REQUIRE_CUDA=cuda>=13.0 on a driver-550 node: refused before runc runs, the failed term named"
set +e; req_run req13 "c['process']['env'].append('NVIDIA_REQUIRE_CUDA=cuda>=13.0')"; set -e
[ "$rc" -ne 0 ] || e2e_fail "cuda>=13.0 started on a CUDA 12.4 driver: $out"
e2e_assert_contains "$out" "unsatisfied condition: cuda>=13.0 (NVIDIA_REQUIRE_CUDA, GPU 0" "the error names the term"
e2e_assert_contains "$out" "this node's driver runs CUDA 12.4" "... and the node's CUDA version"
e2e_assert_contains "$(cat "$E2E_TMP/runc-req13.log")" "unsatisfied condition: cuda>=13.0" "runc's log has it (containerd shows it)"
if grep -q '^node ' <<< "$out"; then e2e_fail "the refused container ran: $out"; fi

e2e_step "... the same with NVIDIA_DISABLE_REQUIRE=1: it starts with its GPU"
set +e
req_run req13off "c['process']['env'] += ['NVIDIA_REQUIRE_CUDA=cuda>=13.0', 'NVIDIA_DISABLE_REQUIRE=1']"
set -e
[ "$rc" -eq 0 ] || e2e_fail "NVIDIA_DISABLE_REQUIRE=1 did not start: $out"
e2e_assert_contains "$out" "node /dev/nvidia0" "GPU 0 in the container"

e2e_step "nvidia/cuda 12.8's published requirement on the same node: admitted through brand=nvidia,driver>=550,driver<551"
# The value nvidia/cuda:12.8.1 images carry, cut to its cuda group and the R550 groups (the whole
# value is in test/compat/published_env.h).
req128='cuda>=12.8 brand=unknown,driver>=550,driver<551 brand=tesla,driver>=550,driver<551 brand=nvidia,driver>=550,driver<551'
set +e; req_run req128 "c['process']['env'] += ['NVIDIA_REQUIRE_CUDA=$req128', 'CUDA_VERSION=12.8.1']"; set -e
[ "$rc" -eq 0 ] || e2e_fail "the CUDA 12.8 requirement was refused on R550: $out"
e2e_assert_contains "$out" "node /dev/nvidia0" "GPU 0 in the container"
e2e_assert_contains "$(cat "$E2E_TMP/shim.log")" "NVIDIA_REQUIRE_CUDA hold (driver 550.127.05, CUDA 12.4, 1 GPU(s))" "the debug log"

e2e_step "a legacy image (CUDA_VERSION=13.0.1, no NVIDIA_REQUIRE_CUDA) requires cuda>=13.0"
set +e; req_run legacy "c['process']['env'].append('CUDA_VERSION=13.0.1')"; set -e
[ "$rc" -ne 0 ] || e2e_fail "a legacy CUDA 13.0 image started on CUDA 12.4: $out"
e2e_assert_contains "$out" "unsatisfied condition: cuda>=13.0 (CUDA_VERSION (legacy image)" "the legacy rule named"
# CUDA forward compatibility (issue 32): an image laid out as nvidia/cuda's (/usr/local/cuda ->
# cuda-12.8, the cuda-compat package's libcuda.so.575.51.03 in compat/) on a simulated R535 node.
# The compat library is an ELF object whose SONAME is libcuda.so.1 (the simulated driver's, renamed).
"$bin" sim hostroot t4-cloud "$E2E_TMP/t4-root" > /dev/null || e2e_fail "sim hostroot t4-cloud"
compat_elf=$E2E_TMP/t4-root/usr/lib/x86_64-linux-gnu/libcuda.so.535.183.01
[ -f "$compat_elf" ] || e2e_fail "no $compat_elf"
sed 's/- name: Tesla T4/- name: NVIDIA GeForce RTX 3060/' "$E2E_SOURCE_DIR/data/profiles/t4-cloud.yaml" > "$E2E_TMP/t4-geforce.yaml"
grep -q 'GeForce RTX 3060' "$E2E_TMP/t4-geforce.yaml" || e2e_fail "the GeForce copy of t4-cloud did not take"
compat_run() {  # compat_run NAME PROFILE [env...]: runs the image; $resolved is the cache's libcuda.so.1
  local name=$1 prof=$2
  shift 2
  local rootfs=$E2E_TMP/rootfs-$name bundle=$E2E_TMP/bundle-$name env_py=""
  cp -a "$E2E_TMP/busybox" "$rootfs"
  mkdir -p "$rootfs/usr/local/cuda-12.8/compat"
  cp "$compat_elf" "$rootfs/usr/local/cuda-12.8/compat/libcuda.so.575.51.03"
  ln -s cuda-12.8 "$rootfs/usr/local/cuda"
  for e in "$@"; do env_py+="c['process']['env'].append('$e')"$'\n'; done
  e2e_oci_bundle "$bundle" "$rootfs" /bin/sh -c 'cat /etc/ld.so.conf.d/00-compat-gpunode.conf 2>/dev/null; true' report
  e2e_oci_edit "$bundle/config.json" "
c['process']['env'] = [e for e in c['process']['env'] if not e.startswith('NVIDIA_')]
c['process']['env'].append('NVIDIA_VISIBLE_DEVICES=0')
c['process']['capabilities']['bounding'].append('CAP_SYS_ADMIN')
$env_py"
  local specs
  specs=$(profile_spec "$prof")
  out=$(GPUNODE_SIMULATE=$prof XDG_CONFIG_HOME=$E2E_TMP/xdg "$bin" oci-runtime --runtime-path "$(command -v runc)" \
          --spec-dir "$specs" --no-generate --debug-log "$E2E_TMP/shim.log" --root "$E2E_TMP/runc-state" \
          --log "$E2E_TMP/runc-$name.log" run --bundle "$bundle" "gpunode-shim-$name" 2>&1)
  rc=$?
  e2e_runc delete -f "gpunode-shim-$name" >/dev/null 2>&1 || true
  resolved=$(ldconfig -p -C "$rootfs/etc/ld.so.cache" 2>/dev/null | grep -m1 'libcuda.so.1 ' || true)
}

e2e_step "forward compatibility on R535 with a datacenter GPU (Tesla T4): libcuda.so.1 is the image's compat library"
req535='cuda>=12.8 brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536'
set +e; compat_run fc-t4 t4-cloud "NVIDIA_REQUIRE_CUDA=$req535" CUDA_VERSION=12.8.1; set -e
[ "$rc" -eq 0 ] || e2e_fail "the CUDA 12.8 image did not start on R535 + T4: $out"
e2e_assert_contains "$out" "/usr/local/cuda/compat" "enable-cuda-compat wrote the compat folder into ld.so.conf.d"
e2e_assert_contains "$resolved" "=> /usr/local/cuda/compat/libcuda.so.1" "the container's ld cache resolves libcuda.so.1 to the compat library"

e2e_step "... on a consumer GPU (GeForce, same driver): the hook is not in the spec, libcuda.so.1 stays the driver's"
set +e; compat_run fc-geforce "$E2E_TMP/t4-geforce.yaml"; set -e
[ "$rc" -eq 0 ] || e2e_fail "the image did not start on the GeForce node: $out"
e2e_assert_contains "$resolved" "=> /usr/lib/x86_64-linux-gnu/libcuda.so.1" "libcuda.so.1 is the driver's"
if grep -q compat <<< "$out"; then e2e_fail "the compat folder was configured on a GeForce: $out"; fi

e2e_step "... and the same image's CUDA 12.8 requirement is refused there (no geforce group in it), as compat check says"
set +e; compat_run fc-geforce-req "$E2E_TMP/t4-geforce.yaml" "NVIDIA_REQUIRE_CUDA=$req535"; set -e
[ "$rc" -ne 0 ] || e2e_fail "the CUDA 12.8 requirement started on R535 + GeForce: $out"
e2e_assert_contains "$out" "unsatisfied condition: cuda>=12.8" "the failed term named"
echo "PASS: $(basename "$0")"
