#!/usr/bin/env bash
# One device plugin on one simulated node, asked every kubelet question by plugin_probe; prints
# the probe's JSON. Runs inside plugin_ns.sh (a private mount namespace shaped like a plugin
# container), so both plugins read the same node and nothing on the machine changes.
#
#   plugin_run.sh nvidia|gpunode HOSTROOT PROFILE_FILE PROBE -- PLUGIN-ARGS...
# Both plugins read the node from HOSTROOT and the simulated NVML (SIM_LIB) with PROFILE_FILE.
# Needs root. Environment: PEERS_BIN, GPUNODE, SIM_LIB, SIM_LIBDIR (test/peers/common.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
who=$1 root=$2 profile=$3 probe=$4
shift 4
[ "${1:-}" = -- ] && shift
if [ "${PLUGIN_RUN_INNER:-}" != 1 ]; then
  exec env PLUGIN_RUN_INNER=1 "$here/plugin_ns.sh" "$root" -- "$0" "$who" "$root" "$profile" "$probe" -- "$@"
fi
dp=/var/lib/kubelet/device-plugins
log=$(mktemp)
# 90 s: under a loaded CI run (ASan tests and the cluster beside it) a plugin can take long to
# serve; a quick one answers in well under a second either way.
"$probe" --dir "$dp" --timeout-s "${PLUGIN_PROBE_TIMEOUT_S:-90}" > "$log.json" &
probe_pid=$!
case $who in
  nvidia)
    GPUNODE_SIM_PROFILE=$profile LD_LIBRARY_PATH=$SIM_LIBDIR \
      "$PEERS_BIN/nvidia-device-plugin" --driver-root="$root" --dev-root="$root" \
      --driver-root-ctr-path="$root" "$@" >"$log" 2>&1 &
    ;;
  gpunode)
    GPUNODE_SIM_PROFILE=$profile GPUNODE_NVML_LIBRARY=$SIM_LIB GPUNODE_CUDA_LIBRARY=$SIM_LIB \
      "$GPUNODE" --host-root "$root" plugin --driver-root="$root" --dev-root="$root" "$@" >"$log" 2>&1 &
    ;;
  *) echo "plugin_run: nvidia or gpunode, not $who" >&2; exit 3 ;;
esac
plugin_pid=$!
# A plugin that exits stops the probe at once rather than after its timeout.
while kill -0 "$probe_pid" 2>/dev/null; do
  if ! kill -0 "$plugin_pid" 2>/dev/null; then
    sleep 0.5
    kill "$probe_pid" 2>/dev/null || true
    echo "plugin_run: the $who plugin exited before the probe finished" >&2
    break
  fi
  sleep 0.1
done
rc=0
wait "$probe_pid" || rc=$?
kill "$plugin_pid" 2>/dev/null || true
wait "$plugin_pid" 2>/dev/null || true
if [ "$rc" != 0 ] || [ "${PLUGIN_RUN_LOG:-}" = 1 ]; then
  echo "plugin_run: $who plugin's log:" >&2
  tail -n 40 "$log" >&2
fi
cat "$log.json"
rm -f "$log" "$log.json"
exit "$rc"
