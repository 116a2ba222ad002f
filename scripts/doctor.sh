#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install dependencies, build, run `gpunode doctor`.
# On a machine without an NVIDIA GPU it also runs the same check on the built-in simulated
# 8x H200 node, and says so. Extra arguments go to doctor (e.g. -o json).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh build  # the build set only; scripts/test.sh installs the rest
# Release, as scripts/test.sh's build-rel: no -g (RelWithDebInfo's debug info cost ~1/3 more compile
# CPU, benchmarks/results/cold-start-2026-12-03.md), and ccache then serves test.sh's Release build.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUNODE_BUILD_TESTS=OFF >/dev/null
cmake --build build --target gpunode gpunode_simnvml
rc=0
build/bin/gpunode doctor "$@" || rc=$?
if ! grep -qs 0x10de /sys/bus/pci/devices/*/vendor; then
  echo
  echo "This machine has no NVIDIA GPU. The same check on the built-in simulated node 'dgx-h200'"
  echo "(8x H200; see 'build/bin/gpunode sim list' for broken nodes to try):"
  echo
  build/bin/gpunode --simulate dgx-h200 doctor "$@" || rc=$?
fi
exit $rc
