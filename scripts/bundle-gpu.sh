#!/usr/bin/env bash
# Packs build/bin/gpunode with its non-base shared libraries into .gpubundle/ for the GPU machine
# (see DESIGN.md, "Running on the GPU machine"); run there as `.gpubundle/run gpunode doctor`.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpubundle
../shared/tools/bundle-for-gpu.sh .gpubundle build/bin/gpunode
