#!/usr/bin/env bash
# Issue 4's proof on the real GPU machine (through the device tool): `gpunode exporter` on the real
# H200: the NVML ABI check for the exporter's new entry points (field values, PCIe replays,
# encoder/decoder, GPM) against the real nvml.h, a /metrics page idle and one read while a CUDA
# load runs (GPM DCGM_FI_PROF_* ratios), /health and the status page, and the benchmark side by
# side with the peers' methods (nvidia-smi per scrape, prometheus_client + pynvml).
# Expects .gpubundle/ from `scripts/bundle-gpu.sh` (gpunode, exporter_load, podresources_emulator).
# Output: $OUT/exporter.tgz.
set -uo pipefail
FINAL=${OUT:-/tmp/gpunode-out}
mkdir -p "$FINAL"
OUT=$(mktemp -d)
trap 'tar -C "$OUT" -czf "$FINAL/exporter.tgz" . ; ls -la "$OUT"' EXIT
B=.gpubundle/run

scripts/nvml-abi-check.sh > "$OUT/abi.txt" 2>&1
tail -3 "$OUT/abi.txt"
nvidia-smi --query-gpu=name,driver_version,temperature.gpu,temperature.memory,power.draw,utilization.gpu,memory.used --format=csv > "$OUT/nvidia-smi.csv" 2>&1

# One page, idle (--once: one sampling round, 1 s apart for GPM).
$B gpunode exporter --once > "$OUT/metrics-idle.prom" 2> "$OUT/once.log"; echo "exit $?" >> "$OUT/once.log"

# The exporter serving at 1 s, with pod labels from the pod-resources emulator.
W=$(mktemp -d /tmp/gpn-exp-XXXXXX)
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
echo "[{\"namespace\":\"ml\",\"pod\":\"train-0\",\"container\":\"main\",\"resource\":\"nvidia.com/gpu\",\"devices\":[\"$uuid\"]}]" > "$W/pods.json"
$B podresources_emulator --socket "$W/kubelet.sock" --pods "$W/pods.json" > "$OUT/emulator.log" 2>&1 &
emu=$!
sleep 0.5
$B gpunode exporter -c 1000 --listen 127.0.0.1:9400 --pod-resources-socket "$W/kubelet.sock" > "$OUT/exporter.log" 2>&1 &
exp=$!
sleep 3
curl -s -D "$OUT/metrics-headers.txt" http://127.0.0.1:9400/metrics > "$OUT/metrics-pods-idle.prom"
curl -s -w 'HTTP %{http_code}\n' http://127.0.0.1:9400/health > "$OUT/health.txt"

# A CUDA load (bf16 GEMM in a loop, torch) for 20 s: GPM sees the tensor pipes and DRAM busy.
python3 - > "$OUT/load.log" 2>&1 <<'PY' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.time() + 20
n = 0
while time.time() < end:
    c = a @ b
    n += 1
    if n % 50 == 0:
        torch.cuda.synchronize()
torch.cuda.synchronize()
print(f"{n} GEMMs of 8192^3 bf16 in 20 s: {2 * 8192**3 * n / 20 / 1e12:.0f} TFLOPS")
PY
load=$!
sleep 8
curl -s http://127.0.0.1:9400/metrics > "$OUT/metrics-load.prom"
curl -s http://127.0.0.1:9400/ > "$OUT/status-page-load.html"
sleep 4
curl -s http://127.0.0.1:9400/metrics > "$OUT/metrics-load-2.prom"
wait $load
kill -TERM $exp; wait $exp; echo "exporter exit $?" >> "$OUT/exporter.log"
kill -TERM $emu; wait $emu 2>/dev/null
grep -E '^DCGM_FI_PROF|^DCGM_FI_DEV_(GPU_UTIL|POWER_USAGE|GPU_TEMP|MEMORY_TEMP|FB_USED)' "$OUT/metrics-load.prom"

# Benchmark: gpunode vs nvidia-smi per scrape vs prometheus_client + pynvml, same load program.
python3 benchmarks/exporter_bench.py --gpunode "$B gpunode" --load "$B exporter_load" \
  --emulator "$B podresources_emulator" --peers --out "$OUT/exporter-bench-h200.json" \
  > /dev/null 2> "$OUT/exporter-bench.log"
# The same on a simulated dgx-h200 (8 GPUs) on this machine's CPU.
python3 benchmarks/exporter_bench.py --gpunode "$B gpunode" --load "$B exporter_load" \
  --emulator "$B podresources_emulator" --simulate dgx-h200 --out "$OUT/exporter-bench-sim-dgx-h200-on-h200-host.json" \
  > /dev/null 2>> "$OUT/exporter-bench.log"
for f in "$OUT"/exporter-bench-*.json; do python3 - "$f" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    s, l, p, b = r.get("steady_1hz", {}), r.get("load", {}), r.get("paced", {}), r.get("burst", {})
    print(f'{r["target"]:40s} cpu@1Hz {s.get("cpu_percent_of_one_core")}%  rss {s.get("rss_mib")} MiB  '
          f'paced p50 {p.get("latency_ms", {}).get("p50")} p99 {p.get("latency_ms", {}).get("p99")} ms err {p.get("errors")} | '
          f'burst p99 {b.get("latency_ms", {}).get("p99")} ms | '
          f'closed p50 {l.get("latency_ms", {}).get("p50")} p99 {l.get("latency_ms", {}).get("p99")} ms  '
          f'rps {l.get("rps")} err {l.get("errors")}  peak {r.get("rss_peak_mib")} MiB {r.get("error", "")}')
PY
done
