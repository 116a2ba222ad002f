#!/usr/bin/env bash
# The driver-upgrade controller at fleet scale: 1 000 KWOK GPU nodes in 4 pools on the real test
# cluster (test/k8s/kwok.sh), the agent's stand-in on each (test/k8s/kwok_agent.py: it validates a
# node once its driver pod runs, after 0.5-2 s, slow nodes 5-8 s, some nodes fail), the controller
# as a host process (gpunode fleet controller, with a Lease), one NVIDIADriver per pool with
# maxUnavailable 10 %, and a watcher of every Node (test/k8s/kwok_watch.py) that proves the limit
# held at every moment.
#   1. NVIDIADrivers at v1: every node gets its driver pod and is upgrade-done
#   2. all four -> v2: h100 and a100 complete; l40s (on-failure: continue) completes with its 3
#      failing nodes upgrade-failed; h200 (on-failure: halt) stops starting nodes after its failing
#      node fails; the controller is stopped mid-wave and started again, and continues
#   2b. `gpunode fleet` on the live nodes shows each pool's target, progress and failures
#   3. the watcher saw at most 25 unavailable nodes per pool (10 % of 250) at every event
# Numbers (one JSON line `upgrade-kwok: {...}`): the wave's wall time, API requests per node, the
# controller's CPU seconds and peak RSS. benchmarks/upgrade_kwok_bench.sh keeps them.
# Usage: test/k8s/e2e_upgrade_kwok.sh BUILD_DIR. KWOK_NODES (default 1000, a multiple of 4).
# Exit 77 (skipped) without Go or as non-root, unless CI=true: then those are failures.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
ns=gpunode-kwok-upgrade
here=$src/test/k8s
export GPUNODE_K8S_KCM_QPS=${GPUNODE_K8S_KCM_QPS:-200}  # DaemonSet pods on 1 000 nodes (kwok.sh says why)
E2E_IMAGE=0
N=${KWOK_NODES:-1000}
per_pool=$((N / 4))
limit=$(((per_pool * 10 + 99) / 100))  # 10 %, rounded up as the controller rounds
agent_pid= ctl_pid= watch_pid=
kwok_cleanup() {
  local p
  for p in $ctl_pid $agent_pid $watch_pid; do kill "$p" 2>/dev/null || true; done
  bash "$here/kwok.sh" down >/dev/null 2>&1 || true
  [ -z "${work:-}" ] || [ "${GPUNODE_E2E_KEEP:-}" = 1 ] || rm -rf "$work"
  cleanup
}
# shellcheck source=e2e_lib.sh
. "$here/e2e_lib.sh"
trap kwok_cleanup EXIT
work=$(mktemp -d /tmp/kwok-upgrade.XXXXXX)
gpunode=$build/bin/gpunode
v1=570.195.03 v2=580.95.05

start_controller() {
  "$gpunode" fleet controller --kubeconfig "$KUBECONFIG" --namespace "$ns" --lease-name driver-manager \
    --identity "controller-$1" --busy-resync 1s --resync 10s --qps 200 --timeout validation=20s \
    >> "$work/controller-$1.log" 2>&1 &
  ctl_pid=$!
}
# CPU seconds and peak RSS (MiB) of a running process
usage_of() { python3 - "$1" <<'PY'
import os, sys
pid = sys.argv[1]
stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
tick = os.sysconf("SC_CLK_TCK")
cpu = (int(stat[11]) + int(stat[12])) / tick
hwm = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmHWM"))
print(f"{cpu:.1f} {hwm / 1024:.1f}")
PY
}
counts() {  # per pool: done failed required underway (from the Nodes' labels)
  kubectl get nodes -l gpunode-test/kwok=true -o json | python3 -c '
import json, sys
pools = {}
for n in json.load(sys.stdin)["items"]:
    l = n["metadata"]["labels"]
    p = pools.setdefault(l["gpunode-test/pool"], {"done": 0, "failed": 0, "required": 0, "underway": 0, "none": 0, "v2": 0})
    s = l.get("nvidia.com/gpu-driver-upgrade-state", "")
    k = {"upgrade-done": "done", "upgrade-failed": "failed", "upgrade-required": "required", "": "none"}.get(s, "underway")
    p[k] += 1
    p["v2"] += l.get("nvidia.com/cuda.driver-version.full") == sys.argv[1]
print(json.dumps(pools, sort_keys=True))' "$v2"
}
nvd() {  # POOL VERSION ON-FAILURE
  cat <<YAML
---
apiVersion: nvidia.com/v1alpha1
kind: NVIDIADriver
metadata:
  name: $1
  annotations: {gpunode.io/driver-upgrade.on-failure: $3}
spec:
  driverType: gpu
  repository: gpunode.test
  image: fake-driver
  version: "$2"
  imagePullPolicy: Never
  nodeSelector: {gpunode-test/pool: $1}
  tolerations: [{key: kwok.x-k8s.io/node, operator: Equal, value: fake, effect: NoSchedule}]
  upgradePolicy: {autoUpgrade: true, maxParallelUpgrades: 0, maxUnavailable: 10%, podDeletion: {timeoutSeconds: 60}}
YAML
}
apply_all() { { nvd h100 "$1" halt; nvd a100 "$1" halt; nvd l40s "$1" continue; nvd h200 "$1" halt; } | kubectl apply -f - >/dev/null; }

step "$N fake GPU nodes in 4 pools (kwok.sh up)"
KWOK_DRIVER_VERSION=$v1 bash "$here/kwok.sh" up "$N" 4 | sed 's/^/   /' || fail "kwok.sh up"
helm template gpunode "$src/deploy/helm/gpunode" --set driverManager.enabled=true \
  --show-only templates/crd-nvidiadriver.yaml | kubectl apply -f - >/dev/null || fail "the NVIDIADriver CRD"
kubectl wait --for condition=established crd/nvidiadrivers.nvidia.com --timeout 30s >/dev/null || fail "CRD not established"
kubectl create namespace "$ns" >/dev/null
python3 "$here/kwok_agent.py" --kubeconfig "$KUBECONFIG" --delay 0.5-2 --slow-delay 5-8 \
  --stats "$work/agent.json" 2> "$work/agent.log" &
agent_pid=$!
for p in h100 a100 l40s h200; do kubectl label node "kwok-$p-0009" gpunode-test/slow=true >/dev/null; done
ok "$N nodes Ready, the CRD, the agent's stand-in"

step "1. NVIDIADrivers at $v1 -> every node upgrade-done with its driver pod"
start_controller 1
t0=$(date +%s.%N)
apply_all $v1
deadline=$((SECONDS + 300))
until [ "$(kubectl get nodes -l nvidia.com/gpu-driver-upgrade-state=upgrade-done -o name | wc -l)" = "$N" ]; do
  [ $SECONDS -lt $deadline ] || fail "not every node upgrade-done 300 s after the NVIDIADrivers: $(counts)"
  sleep 2
done
ok "$N nodes upgrade-done at $v1 in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s (DaemonSet pods created and run by KWOK)"

step "2. all four pools -> $v2 (maxUnavailable 10 % = $limit); l40s continues past its 3 failures, h200 halts at its 1"
for n in kwok-l40s-0020 kwok-l40s-0120 kwok-l40s-0220 kwok-h200-0100; do
  kubectl label node "$n" gpunode-test/fail-validation=true >/dev/null
done
python3 "$here/kwok_watch.py" --kubeconfig "$KUBECONFIG" --max-unavailable "*=$limit" --output "$work/watch.json" \
  2> "$work/watch.log" &
watch_pid=$!
sleep 2
read -r cpu0 rss0 < <(usage_of "$ctl_pid")
t1=$(date +%s.%N)
apply_all $v2
# stop the controller mid-wave (a quarter of the nodes at v2), start another: it continues from the
# Nodes' labels
until python3 -c "import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if sum(p['v2'] for p in d.values()) >= $N // 4 else 1)" "$(counts)"; do
  sleep 1
done
read -r cpu1 rss1 < <(usage_of "$ctl_pid")
kill -TERM "$ctl_pid"; wait "$ctl_pid" 2>/dev/null || true
mid=$(counts)
start_controller 2
ok "controller 1 stopped at $mid; controller 2 started"
settled() {
  python3 -c '
import json, sys
d = json.loads(sys.argv[1]); per = int(sys.argv[2])
ok = all(d[p]["done"] == per for p in ("h100", "a100"))
ok = ok and d["l40s"]["done"] == per - 3 and d["l40s"]["failed"] == 3
ok = ok and d["h200"]["failed"] == 1 and d["h200"]["underway"] == 0
sys.exit(0 if ok else 1)' "$1" "$per_pool"
}
deadline=$((SECONDS + 900))
until c=$(counts) && settled "$c"; do
  [ $SECONDS -lt $deadline ] || fail "the wave did not settle in 900 s: $c"
  sleep 2
done
t2=$(date +%s.%N)
read -r cpu2 rss2 < <(usage_of "$ctl_pid")
final=$(counts)
echo "   per pool: $final"
python3 -c '
import json, sys
d = json.loads(sys.argv[1])
h = d["h200"]
assert h["required"] > 0, "h200 halted: some nodes must still wait, %s" % h
print("   h200 halted with %d done, %d waiting, %d failed" % (h["done"], h["required"], h["failed"]))' "$final" || fail "h200 did not halt: $final"
status=$("$gpunode" fleet upgrade status h200 --kubeconfig "$KUBECONFIG" -o json || true)
echo "$status" | python3 -c '
import json, sys
p = json.load(sys.stdin)["pools"][0]
assert "halted" in p["halted"] and "kwok-h200-0100" in p["halted"], p["halted"]' || fail "fleet upgrade status h200 does not say why it halted"
ok "h100, a100 at $v2; l40s at $v2 but its 3 failing nodes; h200 halted after kwok-h200-0100 failed"

step "2b. gpunode fleet on the $N live nodes: each pool's target, progress and failures"
t=$(date +%s.%N)
fleet=$("$gpunode" fleet --kubeconfig "$KUBECONFIG" -o json || true)
fleet_s=$(python3 -c "print(round($(date +%s.%N) - $t, 2))")
printf '%s' "$fleet" | python3 -c '
import json, sys
d = json.load(sys.stdin)
u = {p["name"]: p for p in d["driverUpgrades"]}
assert set(u) == {"h100", "a100", "l40s", "h200"}, sorted(u)
for name, p in sorted(u.items()):
    assert p["targetVersion"] == sys.argv[1], p
    print("   %-5s target %s, %d/%d done, %d failed%s" % (name, p["targetVersion"], p["nodes"]["upgradeDone"], p["nodes"]["total"], p["nodes"]["failed"], ", halted" if p.get("halted") else ""))
assert u["l40s"]["nodes"]["failed"] == 3 and u["h200"]["nodes"]["failed"] == 1, u
failed = [f for f in d["findings"] if f["id"] == "driver-upgrade-failed"]
assert len(failed) == 2, failed
' "$v2" || fail "gpunode fleet's driver upgrades: $(printf '%s' "$fleet" | head -c 600)"
ok "gpunode fleet: 4 pools, the failures as driver-upgrade-failed findings, in $fleet_s s"

step "3. the watcher: never more than $limit unavailable in a pool"
kill -TERM "$watch_pid"; rc=0; wait "$watch_pid" || rc=$?
watch_pid=
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
pools = d.get("pools", d)
for name, p in sorted(pools.items()):
    print("   %-5s max unavailable %s (limit %s), max in progress %s, %d events seen" % (name, p.get("maxUnavailable"), p.get("limitUnavailable"), p.get("maxInProgress"), d.get("events", 0)))
' "$work/watch.json" || true
[ "$rc" = 0 ] || { tail -20 "$work/watch.log"; fail "the watcher saw the limit broken (exit $rc)"; }
ok "maxUnavailable held at every event"

stats1=$(grep -o 'stopped after .*' "$work/controller-1.log" | tail -1)
kill -TERM "$ctl_pid"; wait "$ctl_pid" 2>/dev/null || true
ctl_pid=
stats2=$(grep -o 'stopped after .*' "$work/controller-2.log" | tail -1)
echo "   controller 1: $stats1"
echo "   controller 2: $stats2"
requests=$(printf '%s\n%s\n' "$stats1" "$stats2" | sed -n 's/.* \([0-9]*\) requests.*/\1/p' | awk '{s += $1} END {print s + 0}')
# Per node, from the controllers' logs: cordon-required -> upgrade-done (seconds, 1 s resolution).
per_node=$(cat "$work"/controller-*.log | python3 -c '
import datetime, json, re, sys
start, took = {}, []
for line in sys.stdin:
    m = re.match(r"(\S+) .*: node (\S+) -> (\S+)", line)
    if not m:
        continue
    t = datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
    if m.group(3) == "cordon-required":
        start[m.group(2)] = t
    elif m.group(3) == "upgrade-done" and m.group(2) in start:
        took.append(t - start.pop(m.group(2)))
took.sort()
q = lambda p: took[min(len(took) - 1, int(p * len(took)))] if took else 0
print(json.dumps({"upgraded": len(took), "p50_s": q(0.5), "p99_s": q(0.99), "max_s": took[-1] if took else 0}))')
python3 -c '
import json, sys
a = sys.argv
print("upgrade-kwok: " + json.dumps({"per_node": json.loads(a[10]),
  "nodes": int(a[1]), "wave_s": round(float(a[3]) - float(a[2]), 1),
  "requests": int(a[4] or 0), "requests_per_node": round(int(a[4] or 0) / int(a[1]), 1),
  "controller1_cpu_s": float(a[6]) - float(a[5]), "controller1_rss_mib": float(a[7]),
  "controller2_cpu_s": float(a[8]), "controller2_rss_mib": float(a[9])}))' \
  "$N" "$t1" "$t2" "${requests:-0}" "$cpu0" "$cpu1" "$rss1" "$cpu2" "$rss2" "$per_node"
e2e_passed=1
echo "PASS: e2e_upgrade_kwok"
