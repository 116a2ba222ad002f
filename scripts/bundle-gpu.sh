#!/usr/bin/env bash
# Packs build/bin/gpunode with its non-base shared libraries into .gpubundle/ for the GPU machine
# (see DESIGN.md, "Running on the GPU machine"); run there as `.gpubundle/run gpunode doctor`.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpubundle
progs=(build/bin/gpunode)
[ -x build/bin/nvml_call_costs ] && progs+=(build/bin/nvml_call_costs)
../shared/tools/bundle-for-gpu.sh .gpubundle "${progs[@]}"
strip .gpubundle/bin/*
