#!/usr/bin/env bash
# On a 2-GPU machine (device kind nvidia-h200-x2): doctor timing (with and without cuInit),
# the p2p bench, doctor's report. Writes $OUT/x2.tgz.
set -uo pipefail
FINAL=${OUT:-/tmp/gpunode-out}; OUT=$(mktemp -d); mkdir -p "$FINAL"
trap 'tar -C "$OUT" -czf "$FINAL/x2.tgz" .' EXIT
B=.gpubundle/run
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
$B gpunode doctor -o json > "$OUT/doctor.json" 2>&1
$B gpunode doctor --color never > "$OUT/doctor.txt" 2>&1
python3 benchmarks/doctor_bench.py --runs 10 --json "$OUT/bench-nocuda.json" -- $B gpunode doctor --no-cuda > "$OUT/doctor-bench.txt" 2>&1
python3 benchmarks/doctor_bench.py --runs 10 --json "$OUT/bench-full.json" -- $B gpunode doctor >> "$OUT/doctor-bench.txt" 2>&1
$B gpunode bench -q -o json > "$OUT/gpunode-bench.json" 2>&1
$B gpunode bench -q --tests p2p,pcie --color never > "$OUT/gpunode-bench-p2p.txt" 2>&1
cat "$OUT/doctor-bench.txt" "$OUT/topo.txt" "$OUT/gpunode-bench-p2p.txt"
