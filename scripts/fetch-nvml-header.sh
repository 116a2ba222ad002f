#!/usr/bin/env bash
# Puts NVIDIA's nvml.h of CUDA 13.0 (the GPU machine's release) under ~/.cache/gpunode from the
# nvidia-nvml-dev wheel on PyPI, for machines without a CUDA toolkit, and prints the folder that
# holds it (for GPUNODE_NVML_INCLUDE_DIR: the build then compiles test/gpu/nvml_abi_check.cc, which
# checks src/gpu/nvml_abi.h against it). Nothing of it enters the repository. ~120 KB, once.
set -euo pipefail
ver=13.0.87
dir=${GPUNODE_CACHE:-$HOME/.cache/gpunode}/nvml-dev-$ver
inc=$dir/w/nvidia/cu13/include
if [ ! -f "$inc/nvml.h" ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps -d "$tmp" "nvidia-nvml-dev==$ver" >&2
  mkdir -p "$dir/w"
  for w in "$tmp"/*.whl; do python3 -m zipfile -e "$w" "$dir/w"; done
fi
[ -f "$inc/nvml.h" ] || { echo "fetch-nvml-header: no nvml.h in nvidia-nvml-dev $ver" >&2; exit 1; }
echo "$inc"
