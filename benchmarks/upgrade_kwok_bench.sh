#!/usr/bin/env bash
# The driver-upgrade controller at fleet scale (issue 30): test/k8s/e2e_upgrade_kwok.sh — 1000 KWOK
# nodes in 4 pools on the real test cluster, the agent's stand-in validating each node 0.5-2 s after
# its driver pod runs (slow nodes 5-8 s), maxUnavailable 10 %, one pool continuing past 3 failures
# and one halting at its first — and its numbers written as benchmarks/results/upgrade-kwok-<date>.md:
#   - the wave's wall time (every NVIDIADriver patched to v2 -> every pool settled)
#   - per node, cordon-required -> upgrade-done (p50, p99, max; the controller's log, 1 s resolution)
#   - the controller's API requests (writes and on-demand lists; not its informers' watches) per node
#   - the controller's CPU seconds and peak RSS (two instances: it is stopped and started mid-wave)
#
#   benchmarks/upgrade_kwok_bench.sh [BUILD_DIR]   (default build-rel; root, Go, podman)
# Run it on a quiet machine: every number is a wall-clock time.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-$src/build-rel}")
day=$(date +%F)
out=$src/benchmarks/results/upgrade-kwok-$day
"$src/test/k8s/e2e_upgrade_kwok.sh" "$build" | tee "$out.log"
line=$(sed -n 's/^upgrade-kwok: //p' "$out.log" | tail -1)
[ -n "$line" ] || { echo "no numbers in $out.log" >&2; exit 1; }
python3 - "$line" "$out.md" "$(nproc)" "$(git -C "$src" rev-parse --short HEAD)" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
p = r["per_node"]
md = f"""# Driver upgrade of {r['nodes']} KWOK nodes (benchmarks/upgrade_kwok_bench.sh)

Commit {sys.argv[4]}, this machine ({sys.argv[3]} cores) running the whole cluster (API server, etcd,
controller manager, scheduler, KWOK, the agent's stand-in, the controller). 4 pools of {r['nodes'] // 4},
maxUnavailable 10 %, maxParallelUpgrades 0; the stand-in validates 0.5-2 s after a driver pod runs
(one slow node per pool: 5-8 s); 3 nodes of l40s fail (on-failure continue), 1 of h200 (halt).

| measure | value |
|---|---|
| wave: NVIDIADrivers patched -> every pool settled | {r['wave_s']} s |
| per node cordon-required -> upgrade-done ({p['upgraded']} nodes) | p50 {p['p50_s']:.0f} s, p99 {p['p99_s']:.0f} s, max {p['max_s']:.0f} s |
| controller API requests (writes, pod lists) | {r['requests']} ({r['requests_per_node']} per node) |
| controller 1 (start -> stopped mid-wave): CPU, peak RSS | {r['controller1_cpu_s']:.1f} s, {r['controller1_rss_mib']:.1f} MiB |
| controller 2 (started mid-wave -> end): CPU, peak RSS | {r['controller2_cpu_s']:.1f} s, {r['controller2_rss_mib']:.1f} MiB |

Target: RSS < 50 MiB. No peer was run: NVIDIA's upgrade controller is part of the GPU Operator's
binary (k8s-operator-libs), not built here.
"""
open(sys.argv[2], "w").write(md)
print(md)
PY
