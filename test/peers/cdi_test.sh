#!/usr/bin/env bash
# CDI conformance: `nvidia-ctk cdi generate` (NVIDIA Container Toolkit, built from its Go module by
# test/peers/build.sh) and `gpunode cdi generate` on the same simulated host root, for every
# built-in profile (broken-* left out), with the device-name strategies both support (index,
# uuid). The specs are compared by test/peers/cdi_compare.py against the expected differences in
# test/peers/cdi_differences.txt (each explained in docs/cdi.md, "Compared with nvidia-ctk").
#
#   test/peers/cdi_test.sh <gpunode-release-build-dir>
#
# Exit 0 pass, 1 fail (an unlisted difference, a stale listed one, a tool that failed), 77 skip.
# Both tools load NVML from the host root: `gpunode sim hostroot` puts the simulated NVML there as
# libnvidia-ml.so.<version>, and GPUNODE_SIM_PROFILE tells it which node to be. nvidia-ctk only
# takes character devices as device nodes, so the host root is made with --device-nodes (mknod:
# needs root or CAP_MKNOD), and both run in a private mount namespace (unshare -m: root) that shows
# the host root's proc/driver as /proc/driver; without these the suite is skipped.
# CDI_TEST_KEEP=DIR keeps the host roots, specs and logs; CDI_TEST_VERBOSE=1 prints every
# listed difference.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=test/peers/common.sh
. "$here/common.sh"
[ $# -eq 1 ] || { echo "usage: $0 <gpunode-release-build-dir>" >&2; exit 1; }
peers_setup "$1"
CTK=$PEERS_BIN/nvidia-ctk
[ -x "$CTK" ] || { echo "FAIL: $CTK was not built by test/peers/build.sh" >&2; exit 1; }
command -v python3 >/dev/null || peers_skip "python3 is not installed"
probe=$WORK/mknod-probe
if ! mknod "$probe" c 1 3 2>/dev/null; then
  peers_skip "cannot create character devices (mknod needs root or CAP_MKNOD); nvidia-ctk only takes those as device nodes"
fi
rm -f "$probe"
# nvidia-ctk reads the MIG capability minors from /proc/driver/nvidia-caps of the machine it runs
# on, not below --driver-root, and gpunode reads /proc of its --host-root (/): both run in a private
# mount namespace where the host root's proc/driver is bind-mounted over /proc/driver.
in_node() {  # in_node ROOT COMMAND...
  local root=$1
  shift
  unshare -m --propagation private sh -c 'mount --bind "$0/proc/driver" /proc/driver && exec "$@"' "$root" "$@"
}
mkdir -p "$WORK/probe-root/proc/driver/gpunode-probe"
in_node "$WORK/probe-root" test -d /proc/driver/gpunode-probe 2>/dev/null ||
  peers_skip "cannot bind-mount over /proc/driver in a private mount namespace (unshare -m needs root)"
export GPUNODE_SIM_LIBRARY=$SIM_LIB

fail() { echo "FAIL: $*" >&2; exit 1; }
runs=()
for file in "$repo"/data/profiles/*.yaml; do
  profile=$(basename "$file" .yaml)
  case $profile in broken-*) continue ;; esac
  root=$WORK/$profile/root
  mkdir -p "$WORK/$profile"
  "$GPUNODE" sim hostroot --device-nodes --profile-file "$WORK/$profile/profile.yaml" "$profile" "$root" \
    >"$WORK/$profile/hostroot.log" 2>&1 || { cat "$WORK/$profile/hostroot.log" >&2; fail "gpunode sim hostroot $profile"; }
  nvml=$root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1
  if [ "$profile" = dgx-h200 ]; then
    # The IPC endpoints a running node has (persistenced, fabric manager, an MPS pipe folder), so
    # that their mounts are compared too: one profile is enough.
    mkdir -p "$root/run/nvidia-persistenced" "$root/run/nvidia-fabricmanager" "$root/tmp/nvidia-mps"
    python3 -c 'import socket, sys
for path in sys.argv[1:]:
    socket.socket(socket.AF_UNIX).bind(path)' "$root/run/nvidia-persistenced/socket" "$root/run/nvidia-fabricmanager/socket" ||
      fail "cannot create the IPC sockets in $root/run"
  fi
  if ! grep -qa nvmlInit_v2 "$nvml"; then
    fail "$profile: the host root's libnvidia-ml.so.1 is not the simulated NVML ($SIM_LIB was not found by gpunode sim hostroot)"
  fi
  for strategy in index uuid; do
    label=$profile/$strategy
    out=$WORK/$profile/$strategy
    mkdir -p "$out"
    # The hook programs need not exist to write a spec; the paths only appear in it.
    if ! GPUNODE_SIM_PROFILE=$WORK/$profile/profile.yaml in_node "$root" "$CTK" cdi generate \
        --driver-root "$root" --dev-root "$root" --device-name-strategy "$strategy" \
        --nvidia-cdi-hook-path /usr/bin/nvidia-cdi-hook \
        --format json --output "$out/nvidia-ctk.json" >"$out/nvidia-ctk.log" 2>&1; then
      tail -n 20 "$out/nvidia-ctk.log" >&2
      fail "$label: nvidia-ctk cdi generate failed"
    fi
    if ! GPUNODE_SIM_PROFILE=$WORK/$profile/profile.yaml in_node "$root" "$GPUNODE" --nvml-library "$nvml" cdi generate -q \
        --driver-root "$root" --dev-root "$root" --device-name-strategy "$strategy" \
        --hook-path /usr/bin/gpunode --format json --output "$out/gpunode.json" >"$out/gpunode.log" 2>&1; then
      cat "$out/gpunode.log" >&2
      fail "$label: gpunode cdi generate failed"
    fi
    runs+=("$label=$out/nvidia-ctk.json,$out/gpunode.json,$root")
  done
done
[ ${#runs[@]} -gt 0 ] || fail "no profile in $repo/data/profiles"
rc=0
python3 "$here/cdi_compare.py" --differences "$here/cdi_differences.txt" ${CDI_TEST_VERBOSE:+--verbose} "${runs[@]}" || rc=$?
if [ -n "${CDI_TEST_KEEP:-}" ]; then
  mkdir -p "$CDI_TEST_KEEP" && cp -r "$WORK"/. "$CDI_TEST_KEEP"/ && echo "specs kept in $CDI_TEST_KEEP"
fi
if [ "$rc" = 0 ]; then echo "PASS: nvidia-ctk and gpunode CDI specs agree (${#runs[@]} runs) but for the listed differences"; else echo "FAIL: see above" >&2; fi
exit "$rc"
