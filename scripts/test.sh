#!/usr/bin/env bash
# Every test on a fresh Debian 12 machine: install dependencies, build with AddressSanitizer and
# UndefinedBehaviorSanitizer, run the unit, component and end-to-end tests (ctest), then give
# each fuzz target a short smoke run. Tests that need a real GPU carry the ctest label `gpu` and
# are excluded here (run them on a GPU machine with `ctest -L gpu`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGPUNODE_SANITIZE=ON >/dev/null
cmake --build build-asan -j "$jobs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-asan --output-on-failure -j "$jobs" -LE gpu
if [ "${GPUNODE_SKIP_FUZZ:-0}" != 1 ]; then
  scripts/fuzz.sh 15
fi
