#!/usr/bin/env bash
# Every test on a fresh Debian 12 machine: install dependencies, build with AddressSanitizer and
# UndefinedBehaviorSanitizer, run the unit, component and end-to-end tests (ctest), then give
# each fuzz target a short smoke run. Tests that need a real GPU carry the ctest label `gpu` and
# are excluded here (run them on a GPU machine with `ctest -L gpu`).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
scripts/install-deps.sh
jobs=$(nproc)
# Go builds the test cluster's pinned upstream components (test/k8s/build.sh; cached outside the
# repo in ~/.cache/gpunode/k8s, so only a machine's first run pays, ~16 min on 2 cores).
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then export PATH=$PATH:/usr/local/go/bin; fi
if command -v go >/dev/null; then
  test/k8s/build.sh >/dev/null
  # Prometheus with Kubernetes SD and prometheus-adapter for e2e_monitoring_k8s (~3 + ~2.5 min the
  # first time), built here so that test's own time limit covers only the test.
  test/k8s/build.sh prometheus >/dev/null
  test/k8s/build.sh prometheus-adapter >/dev/null
  # NVIDIA's device plugin, gpu-feature-discovery and nvidia-ctk, for the side-by-side suites
  # (test/peers/build.sh; cached in ~/.cache/gpunode/peers, ~2 min the first time on 2 cores).
  test/peers/build.sh >/dev/null
elif [ "${CI:-}" = true ]; then
  echo "test: Go is missing; CI needs it to build the test cluster (Kubernetes, containerd, helm) and NVIDIA's components" >&2
  exit 1
else
  echo "test: Go is missing: the Kubernetes tests (label k8s), the side-by-side suites (label peers) and the chart check will be skipped" >&2
fi
# nvcc 13.0.88 from NVIDIA's PyPI wheels (cached in ~/.cache/gpunode), so the test that the committed
# PTX is current with kernels/*.cu runs here too (it skips, saying so, when PyPI cannot be reached).
if nvcc_line=$(scripts/fetch-nvcc.sh 2>/dev/null); then export "$nvcc_line"; else
  echo "test: could not fetch nvcc from PyPI: bench_ptx_current will skip" >&2
fi
# NVIDIA's nvml.h of CUDA 13.0 from PyPI (cached), so the build compiles test/gpu/nvml_abi_check.cc
# and checks our NVML ABI against it (ctest nvml_abi_check; not built when PyPI cannot be reached).
if nvml_inc=$(scripts/fetch-nvml-header.sh 2>/dev/null); then export GPUNODE_NVML_INCLUDE_DIR=$nvml_inc; else
  echo "test: could not fetch nvml.h from PyPI: nvml_abi_check will not be built" >&2
fi
# The gpunode image of the Kubernetes tests is built from a Release tree.
cmake -S . -B build-rel -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUNODE_BUILD_TESTS=OFF >/dev/null
cmake --build build-rel --target gpunode gpunode_simnvml
# -g1: line tables only, which is all ASan's and UBSan's reports print (file:line of each frame);
# full -g costs ~14 % more CPU per test file (35.2 vs 30.2 CPU s for test/fleet/hostile_test.cc,
# benchmarks/results/cold-start-2026-12-03.md). Configure a tree of your own with -g to debug in gdb.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGPUNODE_SANITIZE=ON \
  -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1 >/dev/null
cmake --build build-asan -j "$jobs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-asan --output-on-failure -j "$jobs" -LE 'gpu|long'
# Suites labelled `long` (e2e_upgrade_kwok_k8s: the driver-upgrade controller on 1000 KWOK nodes, ~9 min
# plus ~2 min to build KWOK the first time; peers_dra_k8s: NVIDIA's DRA driver beside gpunode's on the
# test cluster, ~7 min plus ~6 min to build NVIDIA's plugin the first time; kwok_k8s: the KWOK smoke
# test) run one at a time, in that order, while they fit: a cold run of everything else takes most of
# CI's 90 minutes, so a suite that would start after GPUNODE_LONG_UNTIL_MIN (default 62) minutes is
# skipped, saying so (run them alone: ctest --test-dir build-asan -L long).
for t in e2e_upgrade_kwok_k8s peers_dra_k8s kwok_k8s; do
  elapsed_min=$(( ($(date +%s) - started) / 60 ))
  if [ "$elapsed_min" -ge "${GPUNODE_LONG_UNTIL_MIN:-62}" ]; then
    echo "test: long suite $t skipped: this run already took $elapsed_min min (limit ${GPUNODE_LONG_UNTIL_MIN:-62}); run ctest --test-dir build-asan -R '^$t\$' alone"
  else
    ctest --test-dir build-asan --output-on-failure -L long -R "^$t\$"
  fi
done
# The fuzz smoke run (a clang build of its own, ~8 min cold on 2 cores) runs while it fits: CI
# gives a cold run 90 minutes, so after GPUNODE_FUZZ_UNTIL_MIN (default 70) minutes it is skipped,
# saying so (run it alone with scripts/fuzz.sh).
elapsed_min=$(( ($(date +%s) - started) / 60 ))
if [ "${GPUNODE_SKIP_FUZZ:-0}" = 1 ]; then
  echo "test: fuzz smoke run skipped (GPUNODE_SKIP_FUZZ=1)"
elif [ "$elapsed_min" -ge "${GPUNODE_FUZZ_UNTIL_MIN:-70}" ]; then
  echo "test: fuzz smoke run skipped: this run already took $elapsed_min min (limit ${GPUNODE_FUZZ_UNTIL_MIN:-70}); run scripts/fuzz.sh alone"
else
  scripts/fuzz.sh 15
fi
