#!/usr/bin/env bash
# Regenerates the committed PTX of `gpunode bench`'s kernels from kernels/*.cu:
#   kernels/bench_kernels.ptx        compute_80, every GPU from Ampere on (bench_kernels.cu)
#   kernels/bench_kernels_sm75.ptx   compute_75, Turing (T4): the same source without bf16 and
#                                    cp.async (bench_kernels.cu, its GPUNODE_TURING branches)
#   kernels/bench_kernels_sm90a.ptx  the Hopper GEMM with wgmma and TMA, sm_90a (bench_kernels_sm90a.cu)
# Run it where nvcc exists (the GPU machine has CUDA 13) after changing the kernels, and commit
# the .cu and .ptx files together. Builds embed the committed files, so no build needs a CUDA
# toolkit; the test `bench_ptx_current` (ctest, only where nvcc exists) fails when they disagree.
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
# compute_75: Turing's fp16 tensor cores (mma.sync m16n8k8 under WMMA); CUDA 13 still targets it
# (it dropped compute_70 and older). bench loads it on compute capability 7.5, or anywhere with
# `bench --ptx compute_75` (the driver JITs it for newer GPUs too).
"$nvcc" -ptx -arch=compute_75 -O3 -std=c++17 -o "$out/bench_kernels_sm75.ptx" kernels/bench_kernels.cu
# sm_90a: wgmma and setmaxnreg exist only there; the driver JITs this PTX for compute capability 9.0
# alone, and bench loads it only there.
"$nvcc" -ptx -arch=compute_90a -O3 -std=c++17 -o "$out/bench_kernels_sm90a.ptx" kernels/bench_kernels_sm90a.cu
# nvcc 13 stamps its own PTX ISA (9.0), which only R580+ drivers JIT; GPU nodes often run older
# branches (R535, R550, R570). No file needs more than the ISA that introduced its target: 7.0
# (CUDA 11.0, R450) for compute_80 and compute_75, 8.0 (CUDA 12.0, R525) for sm_90a's wgmma. The
# header says so; ptxas checks every instruction against the declared ISA, and it must accept it.
ptxas=$(dirname "$nvcc")/ptxas
lower() {  # FILE ISA SM
  sed -i "s/^\.version [0-9]*\.[0-9]*\$/.version $2/" "$out/$1"
  if [ -x "$ptxas" ]; then
    "$ptxas" -arch="$3" -o /dev/null "$out/$1" ||
      { echo "gen-ptx: $1 is not valid PTX ISA $2 for $3 (see above)" >&2; exit 1; }
  fi
}
lower bench_kernels.ptx 7.0 sm_80
lower bench_kernels_sm75.ptx 7.0 sm_75
lower bench_kernels_sm90a.ptx 8.0 sm_90a
echo "gen-ptx: wrote $out/bench_kernels.ptx, $out/bench_kernels_sm75.ptx and $out/bench_kernels_sm90a.ptx ($("$nvcc" --version | tail -2 | head -1))"
