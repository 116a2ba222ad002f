#!/usr/bin/env bash
# Regenerates the committed PTX of `gpunode bench`'s kernels: kernels/bench_kernels.ptx (compute_80,
# every GPU from Ampere on) from kernels/bench_kernels.cu, and kernels/bench_kernels_sm90a.ptx (the
# Hopper GEMM with wgmma and TMA, sm_90a) from kernels/bench_kernels_sm90a.cu. Run it where nvcc exists (the GPU machine has CUDA 13) after changing the
# kernels, and commit both files. Builds embed the committed file, so no build needs a CUDA toolkit;
# the test `bench_ptx_current` (ctest, only where nvcc exists) fails when the two disagree.
# No CUDA toolkit here? scripts/fetch-nvcc.sh puts the same nvcc release (13.0.88, from PyPI's
# NVIDIA wheels) under ~/.cache/gpunode and prints the NVCC=... to use.
# Usage: scripts/gen-ptx.sh [OUTDIR]   (default: kernels/)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-kernels}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$nvcc" ] || { echo "gen-ptx: no nvcc (set NVCC=...)" >&2; exit 77; }
# compute_80: the oldest target with bf16 tensor cores and cp.async; the driver JITs it for
# sm_80..sm_120.
"$nvcc" -ptx -arch=compute_80 -O3 -std=c++17 -o "$out/bench_kernels.ptx" kernels/bench_kernels.cu
# sm_90a: wgmma and setmaxnreg exist only there; the driver JITs this PTX for compute capability 9.0
# alone, and bench loads it only there.
"$nvcc" -ptx -arch=compute_90a -O3 -std=c++17 -o "$out/bench_kernels_sm90a.ptx" kernels/bench_kernels_sm90a.cu
echo "gen-ptx: wrote $out/bench_kernels.ptx and $out/bench_kernels_sm90a.ptx ($("$nvcc" --version | tail -2 | head -1))"
