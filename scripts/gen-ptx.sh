#!/usr/bin/env bash
# Regenerates kernels/bench_kernels.ptx, the committed PTX of `gpunode bench`'s kernels, from
# kernels/bench_kernels.cu. Run it where nvcc exists (the GPU machine has CUDA 13) after changing the
# kernels, and commit both files. Builds embed the committed file, so no build needs a CUDA toolkit;
# the test `bench_ptx_current` (ctest, only where nvcc exists) fails when the two disagree.
# Usage: scripts/gen-ptx.sh [OUT]   (default: kernels/bench_kernels.ptx)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-kernels/bench_kernels.ptx}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$nvcc" ] || { echo "gen-ptx: no nvcc (set NVCC=...)" >&2; exit 77; }
# compute_80: the oldest target with bf16 tensor cores and cp.async; the driver JITs it for
# sm_80..sm_120.
"$nvcc" -ptx -arch=compute_80 -O3 -std=c++17 -o "$out" kernels/bench_kernels.cu
echo "gen-ptx: wrote $out ($("$nvcc" --version | tail -2 | head -1))"
