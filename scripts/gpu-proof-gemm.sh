#!/usr/bin/env bash
# Issue 18's proof on the real H200 (through the device tool): `gpunode bench --tests gemm` as
# built here (the committed sm_90a and compute_80 PTX embedded, JIT-compiled by the driver), once
# with cuBLASLt beside our Hopper kernel (--gemm-library auto) and once with our kernels alone
# (--gemm-library gpunode: what a node with only the driver gets), then the gpu-labelled bench test
# and the footprint table of the long-running services next to the Python NVML exporter.
#
#   bash scripts/gpu-proof-gemm.sh     on the GPU machine, from the repo root, with .gpubundle/
#                                      from scripts/bundle-gpu.sh (build/ Release)
# Output under $OUT (default /tmp/gpunode-out).
set -uo pipefail
O=${OUT:-/tmp/gpunode-out}
mkdir -p "$O"
G=".gpubundle/run gpunode"
# a one-file gpunode for the tools that take a path
printf '#!/bin/sh\nexec %s/.gpubundle/run gpunode "$@"\n' "$PWD" > /tmp/run-gpunode; chmod +x /tmp/run-gpunode
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > "$O/nvidia-smi.txt"
$G --version >> "$O/nvidia-smi.txt" 2>&1
cat "$O/nvidia-smi.txt"
# Text first (it is what a person reads), then JSON; each run starts from an idle GPU's clocks.
$G bench --tests gemm --duration 3 -q > "$O/bench-gemm-auto.txt" 2>&1; echo "auto text rc=$?" | tee -a "$O/bench-gemm-auto.txt"
$G bench --tests gemm --duration 3 -q -o json > "$O/bench-gemm-auto.json" 2>"$O/stderr-auto.txt"; echo "auto json rc=$?"
$G bench --tests gemm --gemm-library gpunode --duration 3 -q > "$O/bench-gemm-gpunode.txt" 2>&1; echo "gpunode text rc=$?" | tee -a "$O/bench-gemm-gpunode.txt"
$G bench --tests gemm --gemm-library gpunode --duration 3 -q -o json > "$O/bench-gemm-gpunode.json" 2>>"$O/stderr-auto.txt"; echo "gpunode json rc=$?"
cat "$O/bench-gemm-auto.txt" "$O/bench-gemm-gpunode.txt"
bash test/bench/bench_gpu_test.sh /tmp/run-gpunode > "$O/bench-gpu-test.txt" 2>&1; echo "bench_gpu_test rc=$?" | tee -a "$O/bench-gpu-test.txt"
tail -3 "$O/bench-gpu-test.txt"
peer=""; python3 -c "import pynvml" 2>/dev/null && peer=--peer
python3 benchmarks/footprint.py --gpunode /tmp/run-gpunode --settle 8 $peer --json "$O/footprint.json" 2>&1 | tee "$O/footprint.txt"
