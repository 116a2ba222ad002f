#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (fuzz/) and runs each for SECONDS (default 120).
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-120}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGPUNODE_FUZZ=ON -DGPUNODE_BUILD_TESTS=OFF >/dev/null
cmake --build build-fuzz --target fuzz_targets
status=0
for f in build-fuzz/bin/fuzz_*; do
  name=$(basename "$f")
  mkdir -p "build-fuzz/corpus/$name"
  echo "fuzz: $name for ${secs}s"
  seeds=()
  [ -d "fuzz/seeds/${name#fuzz_}" ] && seeds=("fuzz/seeds/${name#fuzz_}")
  if ! "$f" -max_total_time="$secs" -max_len=4096 -print_final_stats=0 "build-fuzz/corpus/$name" \
       "${seeds[@]}" >"build-fuzz/$name.log" 2>&1; then
    echo "fuzz: $name FAILED"; tail -30 "build-fuzz/$name.log"; status=1
  else
    grep -E "^#[0-9]+.*DONE" "build-fuzz/$name.log" | tail -1 || true
  fi
done
exit $status
