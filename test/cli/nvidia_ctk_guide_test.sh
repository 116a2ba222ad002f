#!/usr/bin/env bash
# The nvidia-ctk command lines of NVIDIA's own install guide, verbatim, run by gpunode installed as
# nvidia-ctk (a link, as the package installs it) against a temporary host root
# (GPUNODE_HOST_ROOT: the files the guide names, /etc/docker/daemon.json etc., are written below it),
# on a simulated 8x H200 node (`gpunode sim hostroot`); then the files checked, and the runtime
# configs compared with what NVIDIA's nvidia-ctk v1.18.2 writes for the same command line
# (daemon.json: the same runtimes entry; containerd and CRI-O: the same runtime section).
#   test/cli/nvidia_ctk_guide_test.sh <gpunode> <libgpunode-simnvml.so>
# Sources of the command lines (NVIDIA Container Toolkit docs, read 2026-12):
#   docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html
#     ("Configuring Docker", "Rootless mode", "Configuring containerd", "Configuring CRI-O")
#   docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html
#     ("Generating a CDI specification", "Using CDI with non-CDI-enabled runtimes")
# NVIDIA's binary: test/data/nvidia-ctk-1.18/regen.sh --print-binary (the peers cache, or built
# with Go); without it the side-by-side part is skipped, a failure under CI=true.
# Exit 0 pass, 1 fail.
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 <gpunode> <libgpunode-simnvml.so>" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
gpunode=$(readlink -f "$1")
simlib=$(readlink -f "$2")
work=$(mktemp -d "${TMPDIR:-/tmp}/gpunode-ctk-guide.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
command -v python3 >/dev/null || { echo "FAIL: python3 is needed" >&2; exit 1; }

mkdir -p "$work/bin"
ln -s "$gpunode" "$work/bin/nvidia-ctk"
root=$work/host
GPUNODE_SIM_LIBRARY=$simlib "$gpunode" sim hostroot -q --profile-file "$work/profile.yaml" dgx-h200 "$root" ||
  { echo "FAIL: gpunode sim hostroot" >&2; exit 1; }
export PATH=$work/bin:$PATH GPUNODE_HOST_ROOT=$root GPUNODE_SIM_LIBRARY=$simlib GPUNODE_SIM_PROFILE=$work/profile.yaml
export GPUNODE_NVML_LIBRARY=$root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 HOME=/home/user
unset NVIDIA_CTK_CONFIG_FILE_PATH XDG_CONFIG_HOME
sudo() { "$@"; }  # the guide's sudo: this test owns the host root

# guide 'COMMAND LINE' WANT_RC: runs the line as the guide prints it; stdout/stderr in $work/out, err
guide() {
  local rc=0
  eval "$1" >"$work/out" 2>"$work/err" || rc=$?
  if [ "$rc" != "$2" ]; then
    fail "\`$1\`: exit $rc, want $2: $(head -c 600 "$work/err")"
    return 1
  fi
  echo "ok: \$ $1"
}
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(eval(sys.argv[2]), sort_keys=True))" "$@"; }
toml() { python3 -c "import tomllib,json,sys; d=tomllib.load(open(sys.argv[1],'rb')); print(json.dumps(eval(sys.argv[2]), sort_keys=True))" "$@"; }
want() {  # want WHAT GOT EXPECTED
  [ "$2" = "$3" ] || fail "$1: got $2, want $3"
}
nvidia_entry='{"args": [], "path": "nvidia-container-runtime"}'
cri='d["plugins"]["io.containerd.grpc.v1.cri"]'

# --- install guide: Configuring Docker -----------------------------------------------------------
guide 'sudo nvidia-ctk runtime configure --runtime=docker' 0 &&
  want "daemon.json runtimes.nvidia" "$(json "$root/etc/docker/daemon.json" 'd["runtimes"]["nvidia"]')" \
    "$(echo "$nvidia_entry" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin), sort_keys=True))')"
want "daemon.json default-runtime (not asked for)" "$(json "$root/etc/docker/daemon.json" 'd.get("default-runtime")')" null
guide 'sudo nvidia-ctk runtime configure --runtime=docker' 0 && grep -q "already configured" "$work/out" ||
  fail "a second runtime configure should change nothing: $(cat "$work/out")"
# Rootless mode: the user's daemon.json, and NVIDIA's cgroup setting
guide 'nvidia-ctk runtime configure --runtime=docker --config=$HOME/.config/docker/daemon.json' 0 &&
  want "rootless daemon.json runtimes.nvidia" \
    "$(json "$root/home/user/.config/docker/daemon.json" 'sorted(d["runtimes"]["nvidia"].items())')" '[["args", []], ["path", "nvidia-container-runtime"]]'
guide 'sudo nvidia-ctk config --set nvidia-container-cli.no-cgroups --in-place' 0 &&
  grep -q "does not apply to gpunode" "$work/err" || fail "config --set nvidia-container-cli.no-cgroups: no \"does not apply\" note"
[ ! -e "$root/etc/nvidia-container-runtime/config.toml" ] ||
  fail "config --set nvidia-container-cli.no-cgroups wrote $(cat "$root/etc/nvidia-container-runtime/config.toml")"

# --- Configuring containerd / CRI-O --------------------------------------------------------------
guide 'sudo nvidia-ctk runtime configure --runtime=containerd' 0 &&
  want "containerd runtimes.nvidia BinaryName" \
    "$(toml "$root/etc/containerd/config.toml" "$cri"'["containerd"]["runtimes"]["nvidia"]["options"]["BinaryName"]')" \
    '"/usr/bin/nvidia-container-runtime"'
guide 'sudo nvidia-ctk runtime configure --runtime=crio' 0 &&
  want "crio runtimes.nvidia" "$(toml "$root/etc/crio/crio.conf.d/99-nvidia.toml" 'd["crio"]["runtime"]["runtimes"]["nvidia"]["runtime_path"]')" \
    '"/usr/bin/nvidia-container-runtime"'

# --- Support for Container Device Interface ------------------------------------------------------
guide 'sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml' 0 &&
  grep -q '^kind: "\{0,1\}nvidia.com/gpu' "$root/etc/cdi/nvidia.yaml" || fail "no nvidia.com/gpu spec at $root/etc/cdi/nvidia.yaml"
guide 'nvidia-ctk cdi list' 0
cp "$work/out" "$work/list.out"
want "cdi list: devices" "$(wc -l <"$work/out" | tr -d ' ')" 17  # 8 by index, 8 by UUID, all
for name in nvidia.com/gpu=all nvidia.com/gpu=0 nvidia.com/gpu=7; do
  grep -qx "$name" "$work/out" || fail "cdi list has no $name: $(cat "$work/out")"
done
grep -q "Found 17 CDI devices" "$work/err" || fail "cdi list: no \"Found 17 CDI devices\": $(cat "$work/err")"
guide 'sudo nvidia-ctk config --in-place --set nvidia-container-runtime.mode=cdi' 0 &&
  grep -q "does not apply to gpunode" "$work/err" || fail "config mode=cdi: no note"
# The issue's lines: Docker with nvidia as the default runtime and CDI on
guide 'sudo nvidia-ctk runtime configure --runtime=docker --set-as-default --cdi.enabled' 0
want "daemon.json default-runtime" "$(json "$root/etc/docker/daemon.json" 'd.get("default-runtime")')" '"nvidia"'
want "daemon.json features.cdi" "$(json "$root/etc/docker/daemon.json" 'd.get("features", {}).get("cdi")')" true
# A key gpunode's OCI runtime reads, set the way NVIDIA's docs set keys
guide 'sudo nvidia-ctk config --set accept-nvidia-visible-devices-as-volume-mounts=false --in-place' 0
grep -qx 'accept-nvidia-visible-devices-as-volume-mounts = false' "$root/etc/nvidia-container-runtime/config.toml" ||
  fail "config --set did not write the key: $(cat "$root/etc/nvidia-container-runtime/config.toml" 2>&1)"
# What does not apply says so in one line, exit 3, and changes nothing
cp "$root/etc/docker/daemon.json" "$work/daemon.before"
guide 'sudo nvidia-ctk runtime configure --runtime=docker --config-mode=oci-hook' 3
[ "$(wc -l <"$work/err")" = 1 ] && grep -q "does not apply to gpunode" "$work/err" || fail "oci-hook: $(cat "$work/err")"
cmp -s "$work/daemon.before" "$root/etc/docker/daemon.json" || fail "a refused command changed daemon.json"

# gpunode ctk is the same; NVIDIA's variables count as flags; gpunode's -o works before the command
"$gpunode" ctk cdi list >"$work/ctk.out" 2>/dev/null && cmp -s "$work/list.out" "$work/ctk.out" ||
  fail "gpunode ctk cdi list differs from nvidia-ctk cdi list"
want "gpunode -o json ctk cdi list" "$("$gpunode" -o json ctk cdi list | json /dev/stdin 'len(d["devices"])')" 17
NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/etc/cdi/from-env.json guide 'nvidia-ctk cdi generate' 0 &&
  want "cdi generate to \$NVIDIA_CTK_CDI_OUTPUT_FILE_PATH" "$(json "$root/etc/cdi/from-env.json" 'd["kind"]')" '"nvidia.com/gpu"'
# (the host's modprobe: chroot into the host root)
DRY_RUN=true guide 'nvidia-ctk system create-device-nodes --load-kernel-modules' 0 &&
  grep -qx "would run chroot $root /sbin/modprobe nvidia" "$work/out" || fail "modprobe dry run: $(cat "$work/out")"

# --- system create-device-nodes (needs mknod: root or CAP_MKNOD) ----------------------------------
devroot=$work/devroot
mkdir -p "$devroot/proc"
printf 'Character devices:\n  1 mem\n195 nvidia-frontend\n234 nvidia-uvm\n\nBlock devices:\n  7 loop\n' >"$devroot/proc/devices"
if mknod "$work/probe" c 1 3 2>/dev/null; then
  GPUNODE_HOST_ROOT=$devroot guide 'sudo nvidia-ctk system create-device-nodes --control-devices' 0
  for node in nvidiactl:195:255 nvidia-modeset:195:254 nvidia-uvm:234:0 nvidia-uvm-tools:234:1; do
    IFS=: read -r n ma mi <<<"$node"
    got=$(stat -c '%F %t:%T %a' "$devroot/dev/$n" 2>&1)
    want "dev/$n" "$got" "$(printf 'character special file %x:%x 666' "$ma" "$mi")"
  done
  GPUNODE_HOST_ROOT=$devroot guide 'sudo nvidia-ctk system create-dev-char-symlinks' 0
  want "dev/char/195:255" "$(readlink "$devroot/dev/char/195:255")" /dev/nvidiactl
else
  echo "skip: system create-device-nodes (mknod is not permitted here)"
fi

# --- side by side with NVIDIA's nvidia-ctk v1.18.2 ------------------------------------------------
nv=$("$repo/test/data/nvidia-ctk-1.18/regen.sh" --print-binary 2>"$work/nv.log") || nv=
if [ -z "$nv" ] || [ ! -x "$nv" ]; then
  if [ "${CI:-}" = true ]; then fail "NVIDIA's nvidia-ctk v1.18.2 is not available: $(tail -3 "$work/nv.log")"; fi
  echo "skip: side by side with NVIDIA's nvidia-ctk (not built: $(tail -1 "$work/nv.log"))"
else
  for flags in "" "--set-as-default --cdi.enabled"; do
    g=$work/g-${flags// /}
    n=$work/n-${flags// /}
    mkdir -p "$g/etc/docker" "$n/etc/docker"
    # an existing daemon.json with settings of its own, kept by both
    printf '{"log-driver": "json-file", "runtimes": {"crun": {"path": "/usr/bin/crun"}}}\n' | tee "$g/etc/docker/daemon.json" >"$n/etc/docker/daemon.json"
    # shellcheck disable=SC2086
    GPUNODE_HOST_ROOT=$g guide "nvidia-ctk runtime configure --runtime=docker $flags" 0
    # shellcheck disable=SC2086
    "$nv" runtime configure --runtime=docker $flags --config="$n/etc/docker/daemon.json" >"$work/nv.out" 2>&1 ||
      fail "NVIDIA's runtime configure --runtime=docker $flags: $(cat "$work/nv.out")"
    want "daemon.json ($flags) vs nvidia-ctk v1.18.2" "$(json "$g/etc/docker/daemon.json" d)" "$(json "$n/etc/docker/daemon.json" d)"
    # containerd: NVIDIA v1.18 writes a drop-in (conf.d/99-nvidia.toml) imported by config.toml;
    # gpunode writes config.toml itself. The runtime section is the same.
    # shellcheck disable=SC2086
    GPUNODE_HOST_ROOT=$g guide "nvidia-ctk runtime configure --runtime=containerd $flags" 0
    # shellcheck disable=SC2086
    "$nv" runtime configure --runtime=containerd $flags --config="$n/etc/containerd/config.toml" \
      --drop-in-config="$n/etc/containerd/conf.d/99-nvidia.toml" >"$work/nv.out" 2>&1 ||
      fail "NVIDIA's runtime configure --runtime=containerd $flags: $(cat "$work/nv.out")"
    for key in '["containerd"]["runtimes"]["nvidia"]' '["containerd"].get("default_runtime_name")' '.get("enable_cdi")'; do
      want "containerd $cri$key ($flags) vs nvidia-ctk v1.18.2" "$(toml "$g/etc/containerd/config.toml" "$cri$key")" \
        "$(toml "$n/etc/containerd/conf.d/99-nvidia.toml" "$cri$key")"
    done
    # shellcheck disable=SC2086
    GPUNODE_HOST_ROOT=$g guide "nvidia-ctk runtime configure --runtime=crio ${flags/--cdi.enabled/}" 0
    # shellcheck disable=SC2086
    "$nv" runtime configure --runtime=crio ${flags/--cdi.enabled/} --config="$n/etc/crio/crio.conf" \
      --drop-in-config="$n/etc/crio/conf.d/99-nvidia.toml" >"$work/nv.out" 2>&1 ||
      fail "NVIDIA's runtime configure --runtime=crio $flags: $(cat "$work/nv.out")"
    for key in '["runtimes"]["nvidia"]' '.get("default_runtime")'; do
      want "crio crio.runtime$key ($flags) vs nvidia-ctk v1.18.2" \
        "$(toml "$g/etc/crio/crio.conf.d/99-nvidia.toml" "d[\"crio\"][\"runtime\"]$key")" \
        "$(toml "$n/etc/crio/conf.d/99-nvidia.toml" "d[\"crio\"][\"runtime\"]$key")"
    done
  done
  echo "side by side with $("$nv" --version | head -1): compared"
fi

if [ "$failures" -gt 0 ]; then
  echo "$failures failures" >&2
  exit 1
fi
echo "PASS: NVIDIA's install guide command lines, run as gpunode"
