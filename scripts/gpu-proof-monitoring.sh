#!/usr/bin/env bash
# Issue 31's hardware-facing part on the real GPU (through the device tool; no Kubernetes there):
#   1. the framebuffer fields on the real H200 — DCGM_FI_DEV_FB_TOTAL, _FREE, _USED, _RESERVED from a
#      collectors file that asks for them — beside nvidia-smi's memory.total/free/used/reserved;
#   2. the first stage of the autoscaling chain on a real load: a bf16 GEMM loop (torch) started and
#      stopped on the GPU, and the time until the exporter's /metrics shows DCGM_FI_DEV_GPU_UTIL >= 60
#      and then <= 10, with the chart's default collect interval (5 s) and dcgm-exporter's (30 s).
#      (The other stages — scrape, custom metrics API, HPA — are measured on the test cluster by
#      test/k8s/e2e_monitoring.sh and benchmarks/hpa_chain_bench.sh.)
#
#   bash scripts/gpu-proof-monitoring.sh [ROUNDS_5S] [ROUNDS_30S]   on the GPU machine, as root, with .gpubundle/
#   GPUNODE_PROOF_SIMULATE=1 bash scripts/gpu-proof-monitoring.sh  here (part 1 only: no real load)
# Output: $OUT/monitoring-proof.tgz and $OUT/monitoring-transcript.txt.
PROOF_NAME=monitoring
. "$(dirname "$0")/gpu-proof-lib.sh"
R5=${1:-5}
R30=${2:-3}

say "1. framebuffer fields beside nvidia-smi"
cat > "$W/fb.csv" <<'CSV'
# Format: DCGM field, Prometheus metric type, help message
DCGM_FI_DEV_FB_TOTAL, gauge, Framebuffer memory total (in MiB).
DCGM_FI_DEV_FB_FREE, gauge, Framebuffer memory free (in MiB).
DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).
DCGM_FI_DEV_FB_RESERVED, gauge, Framebuffer memory reserved (in MiB).
DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).
CSV
run gpunode "${G[@]}" exporter --once -f "$W/fb.csv" > "$L/metrics-fb.prom" 2> "$L/once-fb.log"
grep -E '^DCGM_FI_DEV_FB_' "$L/metrics-fb.prom" | sed 's/{.*}//' | add
if [ "$SIM" = 0 ]; then
  nvidia-smi --query-gpu=memory.total,memory.free,memory.used,memory.reserved --format=csv | tee "$L/nvidia-smi-memory.csv" | add
  read -r t f u r <<<"$(nvidia-smi --query-gpu=memory.total,memory.free,memory.used,memory.reserved --format=csv,noheader,nounits | head -1 | tr -d ',')"
  for pair in "TOTAL $t" "RESERVED $r"; do
    set -- $pair
    got=$(sed -n "s/^DCGM_FI_DEV_FB_$1{gpu=\"0\".*} //p" "$L/metrics-fb.prom")
    [ "$got" = "$2" ] && pass "DCGM_FI_DEV_FB_$1 = $got MiB = nvidia-smi's" || fail "DCGM_FI_DEV_FB_$1 = '$got' MiB, nvidia-smi says $2"
  done
fi

[ "$SIM" = 1 ] && { say "simulated: no real load, part 2 skipped"; exit "$FAILED"; }

say "2. exporter stage of the autoscaling chain on a real GEMM load"
util() { curl -s --max-time 2 "http://127.0.0.1:$1/metrics" | sed -n 's/^DCGM_FI_DEV_GPU_UTIL{gpu="0".*} //p'; }
now() { date +%s.%N; }
cat > "$W/load.py" <<'PY'
import os, sys, time, torch
started, stop = sys.argv[1], sys.argv[2]
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
c = a @ b
torch.cuda.synchronize()
open(started, "w").close()
n = 0
while not os.path.exists(stop):
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
    n += 20
print(f"{n} GEMMs", flush=True)
PY
results=$L/chain.jsonl
: > "$results"
for spec in "5000 $R5" "30000 $R30"; do
  set -- $spec
  ms=$1 rounds=$2 port=$((19500 + ms / 1000))
  proof_bg gpunode exporter -c "$ms" --listen "127.0.0.1:$port" -f "$W/fb.csv" 2> "$L/exporter-$ms.log"
  deadline=$((SECONDS + 60))
  until [ -n "$(util "$port")" ]; do [ $SECONDS -lt $deadline ] || { fail "exporter -c $ms: no DCGM_FI_DEV_GPU_UTIL"; break; }; sleep 0.2; done
  for ((r = 1; r <= rounds; r++)); do
    # a random phase against the collection clock
    sleep "$(python3 -c "import random; print(round(random.uniform(0, $ms / 1000), 2))")"
    rm -f "$W/started" "$W/stop"
    python3 "$W/load.py" "$W/started" "$W/stop" > "$L/load-$ms-$r.log" 2>&1 &
    lp=$!
    until [ -e "$W/started" ] || ! kill -0 "$lp" 2>/dev/null; do sleep 0.02; done
    [ -e "$W/started" ] || { fail "the GEMM load did not start: $(tail -3 "$L/load-$ms-$r.log")"; break 2; }
    t0=$(now); up=
    deadline=$((SECONDS + 3 * ms / 1000 + 10))
    while [ $SECONDS -lt $deadline ]; do
      v=$(util "$port"); if [ -n "$v" ] && [ "$v" -ge 60 ]; then up=$(python3 -c "print(round($(now)-$t0,2))"); break; fi
      sleep 0.1
    done
    touch "$W/stop"; wait "$lp"
    t1=$(now); down=
    deadline=$((SECONDS + 3 * ms / 1000 + 10))
    while [ $SECONDS -lt $deadline ]; do
      v=$(util "$port"); if [ -n "$v" ] && [ "$v" -le 10 ]; then down=$(python3 -c "print(round($(now)-$t1,2))"); break; fi
      sleep 0.1
    done
    echo "{\"collect_ms\": $ms, \"round\": $r, \"up_s\": ${up:-null}, \"down_s\": ${down:-null}}" | tee -a "$results" | add
    [ -n "$up" ] && [ -n "$down" ] || fail "collect $ms ms round $r: utilization did not follow the load"
  done
  kill "${PIDS[-1]}" 2>/dev/null; wait "${PIDS[-1]}" 2>/dev/null
done
python3 - "$results" <<'PY' | add
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for ms in sorted({r["collect_ms"] for r in rows}):
    for k in ("up_s", "down_s"):
        v = sorted(r[k] for r in rows if r["collect_ms"] == ms and r[k] is not None)
        if v:
            print(f"collect {ms} ms: {k} median {statistics.median(v):.2f} s, max {v[-1]:.2f} s (n={len(v)})")
PY
nvidia-smi --query-gpu=name,driver_version,utilization.gpu,memory.used --format=csv | add
say "done: $([ "$FAILED" = 0 ] && echo PASS || echo FAIL)"
exit "$FAILED"
