#!/usr/bin/env bash
# Puts NVIDIA's nvcc 13.0.88 (the release that made the committed PTX, and the one on the GPU
# machine) under ~/.cache/gpunode/cuda-13.0.88 from the NVIDIA wheels on PyPI, for machines without
# a CUDA toolkit, and prints the NVCC=... line for scripts/gen-ptx.sh and the ptx-current test.
# Nothing of it enters the repository or the build. About 120 MB downloaded once.
set -euo pipefail
ver=13.0.88
dir=${GPUNODE_CACHE:-$HOME/.cache/gpunode}/cuda-$ver
nvcc=$dir/w/nvidia/cu13/bin/nvcc
if [ ! -x "$nvcc" ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps -d "$tmp" "nvidia-cuda-nvcc==$ver" "nvidia-nvvm==$ver" \
    "nvidia-cuda-crt==$ver" "nvidia-cuda-runtime==13.0.96" "nvidia-cuda-cccl==13.0.85" >&2
  mkdir -p "$dir/w"
  for w in "$tmp"/*.whl; do python3 -m zipfile -e "$w" "$dir/w"; done
  chmod +x "$dir"/w/nvidia/cu13/bin/* "$dir"/w/nvidia/cu13/nvvm/bin/*
fi
"$nvcc" --version | grep -q "V$ver" || { echo "fetch-nvcc: $nvcc is not $ver" >&2; exit 1; }
echo "NVCC=$nvcc"
