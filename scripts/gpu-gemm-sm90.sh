#!/usr/bin/env bash
# On an H100/H200 (the device tool's machine): builds benchmarks/gemm_sm90_tune.cu with nvcc, checks
# every variant of the Hopper GEMM (kernels/bench_kernels_sm90a.cu) against cuBLASLt and times them
# beside it. Output: the table on stdout, and under $OUT (if set) the log, nvcc's resource report and
# the kernel's SASS instruction mix.
# Usage: scripts/gpu-gemm-sm90.sh [SECONDS per sustained timing, default 2]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gemm-sm90}; mkdir -p "$out"
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv | tee "$out/nvidia-smi.csv"
"$nvcc" --version | tail -2
"$nvcc" -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -DGPUNODE_SM90_VARIANTS -Xptxas -v \
  -o /tmp/gemm_sm90_tune benchmarks/gemm_sm90_tune.cu -lcuda -ldl 2> "$out/ptxas.txt" || { cat "$out/ptxas.txt"; exit 1; }
grep -A2 "gpunode_gemm_bf16_sm90'" "$out/ptxas.txt" | tail -2 || true
if command -v cuobjdump >/dev/null; then
  cuobjdump --dump-sass /tmp/gemm_sm90_tune | grep -oE "(HGMMA|UTMALDG|HMMA)[.A-Z0-9x]*" | sort | uniq -c > "$out/sass-mix.txt" || true
  cat "$out/sass-mix.txt"
fi
set -o pipefail
/tmp/gemm_sm90_tune "${1:-2}" 2>&1 | tee "$out/gemm-sm90-tune.txt"
