#!/usr/bin/env bash
# Autoscaling on GPU utilization, end to end (issue 31): how long from a GPU's utilization changing to
# the HPA's decision, and where the time goes — measured by test/k8s/e2e_monitoring.sh on the real
# test cluster (Prometheus with the chart's ServiceMonitor, prometheus-adapter, the HPA of
# deploy/monitoring/hpa-example.yaml with 0 s up / 15 s down stabilization):
#   exporter     the exporter's /metrics shows the new value (its collect interval)
#   prometheus   Prometheus has it (+ the ServiceMonitor's scrape interval)
#   api          the custom metrics API (prometheus-adapter) answers it for the pod
#   hpa          the HPA's desiredReplicas changed (+ the controller manager's 15 s HPA sync)
#   ready        the new replica Ready / the extra one gone
# for the chart's default collect interval and for dcgm-exporter's default (30 s), ROUNDS up/down
# each, every change at a random phase of 0-30 s against the three clocks (collection, scrape, HPA
# sync), written as benchmarks/results/hpa-chain-<date>.{md,json}.
#
#   benchmarks/hpa_chain_bench.sh [BUILD_DIR] [ROUNDS]   (default build-rel, 5; root, Go, podman)
# Every number is a wall-clock time: run it on a quiet machine.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-$src/build-rel}")
rounds=${2:-5}
day=$(date +%F)
out=$src/benchmarks/results/hpa-chain-$day
# GPUNODE_BENCH_SETTINGS (default "default 30000"): which collect intervals; with
# GPUNODE_BENCH_APPEND=1 the rounds are added to today's log (a setting measured in a second sitting).
[ "${GPUNODE_BENCH_APPEND:-0}" = 1 ] || : > "$out.log"
for ms in ${GPUNODE_BENCH_SETTINGS:-default 30000}; do
  echo "== collect interval: $ms" | tee -a "$out.log"
  if [ "$ms" = default ]; then
    GPUNODE_MON_PHASE_S=30 GPUNODE_MON_ROUNDS=$rounds "$src/test/k8s/e2e_monitoring.sh" "$build" | tee -a "$out.log"
  else
    GPUNODE_MON_PHASE_S=30 GPUNODE_MON_ROUNDS=$rounds GPUNODE_MON_COLLECT_MS=$ms "$src/test/k8s/e2e_monitoring.sh" "$build" | tee -a "$out.log"
  fi
done
python3 - "$out.log" "$out" "$(nproc)" "$(git -C "$src" rev-parse --short HEAD)" <<'PY'
import json, statistics, sys
log, out, cpus, commit = sys.argv[1:5]
rows = [json.loads(l.split("monitoring-hpa: ", 1)[1]) for l in open(log) if l.startswith("monitoring-hpa: ")]
if not rows:
    sys.exit("no monitoring-hpa lines in " + log)
def num(v):
    try: return float(v)
    except (TypeError, ValueError): return None
def stats(vals):
    v = sorted(x for x in vals if x is not None)
    if not v: return None
    return {"n": len(v), "median": round(statistics.median(v), 1), "max": round(v[-1], 1)}
result = {"commit": commit, "cpus": int(cpus), "settings": {}}
for ms in sorted({r["collect_interval_ms"] for r in rows}, key=int):
    rs = [r for r in rows if r["collect_interval_ms"] == ms]
    result["settings"][ms] = {d: {k: stats([num(r[d][k]) for r in rs]) for k in rs[0][d]} for d in ("up", "down")}
json.dump(result, open(out + ".json", "w"), indent=1)
names = {"exporter_s": "exporter /metrics", "prometheus_s": "Prometheus", "api_s": "custom metrics API",
         "hpa_s": "HPA decision", "ready_s": "new replica Ready", "one_replica_s": "back to 1 replica"}
md = [f"# GPU utilization -> HPA, stage by stage (benchmarks/hpa_chain_bench.sh)", "",
      f"Commit {commit}, this machine ({cpus} cores) running the whole test cluster. Seconds from the",
      "simulated GPU's utilization changing (90 % up, 10 % down, each at a random 0-30 s phase) to each",
      "stage; median and max of the rounds (1 s polling resolution).",
      "ServiceMonitor scrape 15 s, prometheus-adapter queries Prometheus per request, HPA sync 15 s",
      "(the controller manager's default), stabilization 0 s up / 15 s down.", ""]
for d, title in (("up", "Scale out (90 %)"), ("down", "Scale in (10 %)")):
    md += [f"## {title}", "", "| stage | " + " | ".join(f"collect {ms} ms: median / max" for ms in result["settings"]) + " |",
           "|---|" + "---|" * len(result["settings"])]
    for k in next(iter(result["settings"].values()))[d]:
        cells = []
        for ms, s in result["settings"].items():
            st = s[d][k]
            cells.append(f"{st['median']} / {st['max']} s (n={st['n']})" if st else "-")
        md.append(f"| {names.get(k, k)} | " + " | ".join(cells) + " |")
    md.append("")
open(out + ".md", "w").write("\n".join(md))
print("\n".join(md))
PY
