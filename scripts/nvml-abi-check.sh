#!/usr/bin/env bash
# On a GPU machine (no build tree there): compiles test/gpu/nvml_abi_check.cc against the machine's
# nvml.h and runs it against its libnvidia-ml (or LIBRARY). The proof scripts call this.
#   scripts/nvml-abi-check.sh [LIBRARY]
set -euo pipefail
cd "$(dirname "$0")/.."
inc=${GPUNODE_NVML_INCLUDE_DIR:-}
if [ -z "$inc" ]; then
  # NVIDIA's header, not another project's of the same name (hwloc ships an nvml.h of its own).
  h=""
  for c in /usr/local/cuda/include/nvml.h $(find /usr/local /opt /usr/include / -name nvml.h -path '*include*' 2>/dev/null); do
    if grep -q nvmlDeviceGetHandleByIndex_v2 "$c" 2>/dev/null; then h=$c; break; fi
  done
  [ -n "$h" ] || { echo "nvml-abi-check: no NVIDIA nvml.h on this machine (set GPUNODE_NVML_INCLUDE_DIR)" >&2; exit 2; }
  inc=$(dirname "$h")
fi
echo "nvml.h from: $inc"
out=$(mktemp); trap 'rm -f "$out"' EXIT
g++ -std=c++20 -I. -I"$inc" test/gpu/nvml_abi_check.cc -ldl -o "$out"
"$out" "$@"
