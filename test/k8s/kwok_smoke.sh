#!/usr/bin/env bash
# Smoke test of the fleet-scale pieces on the real test cluster (test/k8s/cluster.sh):
#   1. test/k8s/kwok.sh up 1000 4: 1000 fake 8-GPU nodes in 4 pools, all Ready (times printed)
#   2. the gpunode chart (deploy/helm/gpunode, installed without hooks) puts no pod on them: they
#      match its nodeAffinity (nvidia.com/gpu.present=true) but carry the kwok taint
#   3. test/k8s/kwok_agent.py, the agent's stand-in: a driver DaemonSet (pods labelled
#      gpunode.io/nvidia-driver, annotation gpunode.io/driver-version=580.95.05) tolerating the taint,
#      nodeSelector pool h100 (250 nodes): its pods Running on the fake nodes; the stand-in sets
#      driver label + GpuStackReady True on 247 of them, False (DriverVersionMismatch) on the 3
#      configured to fail (two by --fail, one by label), later on the slow one; nothing on the other pools.
#      Then a new template (580.105.08) and two pods deleted (OnDelete): those two nodes validated on
#      it, the rest kept; a driver pod on the real node: the stand-in leaves that node alone
#   4. test/k8s/kwok_watch.py: a stand-in upgrade of the 250 h100 nodes in waves of 4 (state labels,
#      cordon) watched twice: --max-unavailable smoke=4 --until-all-state upgrade-done -> exit 0,
#      max 4; --max-unavailable smoke=3 --fail-fast -> exit 1, the violation named
#   5. everything stopped: the stand-in exits 0 on SIGTERM, kwok.sh down, cluster down
#
#   test/k8s/kwok_smoke.sh        (root, Go, podman: what the cluster needs; ~2.5 min warm)
# Uses the cluster alone: take the cluster lock around it where several users share the machine
# (flock -o /tmp/gpunode-cluster.lock test/k8s/kwok_smoke.sh; -o: the cluster's daemons must not
# inherit the lock, or a cluster kept with GPUNODE_E2E_KEEP=1 holds it until its `down`).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
ns=kwok-smoke
# the controller manager at 200 requests/s (cluster.sh): 250 DaemonSet pods in ~20 s, not ~100 s
export GPUNODE_K8S_KCM_QPS=${GPUNODE_K8S_KCM_QPS:-200}
E2E_IMAGE=0
here=$src/test/k8s
agent_pid=
watch_pids=()
smoke_cleanup() {
  local p
  for p in $agent_pid "${watch_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  helm uninstall gpunode -n "$ns" --no-hooks >/dev/null 2>&1 || true
  bash "$here/kwok.sh" down >/dev/null 2>&1 || true
  [ -z "${work:-}" ] || [ "${GPUNODE_E2E_KEEP:-}" = 1 ] || rm -rf "$work"
  cleanup
}
# shellcheck source=e2e_lib.sh
. "$here/e2e_lib.sh"
trap smoke_cleanup EXIT
work=$(mktemp -d /tmp/kwok-smoke.XXXXXX)
kc=$KUBECONFIG

step "1. 1000 fake GPU nodes in 4 pools (kwok.sh up 1000 4)"
out=$(bash "$here/kwok.sh" up 1000 4) || fail "kwok.sh up"
echo "   $out"
n=$(kubectl get nodes -l gpunode-test/kwok=true --no-headers | awk '$2 == "Ready"' | wc -l)
[ "$n" = 1000 ] || fail "$n fake nodes Ready, not 1000"
for p in h100 a100 l40s h200; do
  c=$(kubectl get nodes -l "gpunode-test/pool=$p" -o name | wc -l)
  [ "$c" = 250 ] || fail "pool $p has $c nodes, not 250"
done
ok "1000 Ready, 250 in each pool"

step "2. the gpunode chart's DaemonSet stays off the fake nodes (their taint)"
helm install gpunode "$src/deploy/helm/gpunode" -n "$ns" --create-namespace --no-hooks >/dev/null || fail "helm install"
matching=$(kubectl get nodes -l nvidia.com/gpu.present=true -o name | wc -l)
deadline=$((SECONDS + 30))
until [ -n "$(kubectl -n "$ns" get ds gpunode -o jsonpath='{.status.observedGeneration}' 2>/dev/null)" ]; do
  [ $SECONDS -lt $deadline ] || fail "the DaemonSet's status was not written in 30 s"
  sleep 0.5
done
desired=$(kubectl -n "$ns" get ds gpunode -o jsonpath='{.status.desiredNumberScheduled}')
on_fake=$(kubectl -n "$ns" get pods -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c '^kwok-' || true)
[ "$desired" = 0 ] && [ "$on_fake" = 0 ] || fail "the chart's DaemonSet wants $desired pods, $on_fake on fake nodes"
helm uninstall gpunode -n "$ns" --no-hooks >/dev/null || fail "helm uninstall"
ok "$matching nodes match its nodeAffinity (nvidia.com/gpu.present=true): desiredNumberScheduled 0, no pod on a fake node"

step "3. a driver DaemonSet on pool h100, the agent's stand-in validates its nodes"
kubectl label node kwok-h100-0007 gpunode-test/fail-validation=true >/dev/null
kubectl label node kwok-h100-0011 gpunode-test/slow=true >/dev/null
python3 "$here/kwok_agent.py" --kubeconfig "$kc" --delay 0.5-2 --slow-delay 6-8 \
  --fail kwok-h100-0003,kwok-h100-0005 --stats "$work/agent.json" 2> "$work/agent.log" &
agent_pid=$!
kubectl get namespace "$ns" >/dev/null 2>&1 || kubectl create namespace "$ns" >/dev/null
t0=$(date +%s.%N)
kubectl apply -f - >/dev/null <<YAML || fail "the driver DaemonSet"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-driver-smoke, namespace: $ns}
spec:
  selector: {matchLabels: {gpunode.io/nvidia-driver: smoke}}
  updateStrategy: {type: OnDelete}
  template:
    metadata:
      labels: {gpunode.io/nvidia-driver: smoke, app.kubernetes.io/component: nvidia-driver}
      annotations: {gpunode.io/driver-version: 580.95.05}
    spec:
      nodeSelector: {gpunode-test/pool: h100}
      tolerations: [{key: kwok.x-k8s.io/node, operator: Equal, value: fake, effect: NoSchedule}]
      containers: [{name: nvidia-driver, image: gpunode.test/busybox:1, imagePullPolicy: Never}]
YAML
deadline=$((SECONDS + 120))
until [ "$(kubectl -n "$ns" get ds nvidia-driver-smoke -o jsonpath='{.status.numberReady}')" = 250 ]; do
  [ $SECONDS -lt $deadline ] || fail "driver pods Ready: $(kubectl -n "$ns" get ds nvidia-driver-smoke -o jsonpath='{.status.numberReady}') of 250 after 120 s"
  sleep 0.5
done
running_s=$(python3 -c "import time; print(round(time.time() - $t0, 1))")
ok "250 driver pods Running/Ready on the fake h100 nodes ${running_s} s after the DaemonSet"
# the stand-in: 246 validated + 1 slow (6-8 s later) pass, 3 fail
verdicts() {
  kubectl get nodes -l gpunode-test/kwok=true -o json | python3 -c '
import json, sys
passed = failed = other = untouched = 0
for n in json.load(sys.stdin)["items"]:
    lab = n["metadata"]["labels"]
    c = next((c for c in n["status"].get("conditions", []) if c["type"] == "GpuStackReady"), {})
    v = lab.get("nvidia.com/cuda.driver-version.full")
    if lab["gpunode-test/pool"] != "h100":
        untouched += v == "570.195.03" and c.get("status") == "True" and c.get("message", "").endswith("driver 570.195.03")
        continue
    if v == "580.95.05" and c.get("status") == "True" and c.get("message", "").endswith("on driver 580.95.05"):
        passed += 1
    elif c.get("status") == "False" and c.get("reason") == "DriverVersionMismatch" and v == "570.195.03":
        failed += 1
    else:
        other += 1
print(passed, failed, other, untouched)'
}
deadline=$((SECONDS + 60))
while read -r passed failed other untouched < <(verdicts); [ "$passed/$failed" != 247/3 ]; do
  [ $SECONDS -lt $deadline ] || fail "stand-in: $passed passed, $failed failed, $other neither of 250 after 60 s ($(tail -3 "$work/agent.log"))"
  sleep 1
done
[ "$untouched" = 750 ] || fail "the other pools: $untouched of 750 nodes still on 570.195.03 with GpuStackReady True"
for nd in kwok-h100-0003 kwok-h100-0005 kwok-h100-0007; do
  r=$(kubectl get node "$nd" -o jsonpath='{.status.conditions[?(@.type=="GpuStackReady")].reason}')
  [ "$r" = DriverVersionMismatch ] || fail "$nd: GpuStackReady reason $r"
done
ok "stand-in: 247 nodes on 580.95.05 with GpuStackReady True (the slow one too), 3 DriverVersionMismatch, 750 others untouched ($(python3 -c "import time; print(round(time.time() - $t0, 1))") s after the DaemonSet)"
# OnDelete, as the controller's DaemonSet: a new template, two pods deleted -> their new pods, new version
kubectl -n "$ns" patch ds nvidia-driver-smoke --type merge \
  -p '{"spec":{"template":{"metadata":{"annotations":{"gpunode.io/driver-version":"580.105.08"}}}}}' >/dev/null
kubectl -n "$ns" delete pods --wait=false --field-selector spec.nodeName=kwok-h100-0000 >/dev/null
kubectl -n "$ns" delete pods --wait=false --field-selector spec.nodeName=kwok-h100-0001 >/dev/null
deadline=$((SECONDS + 60))
until [ "$(kubectl get nodes kwok-h100-0000 kwok-h100-0001 -o jsonpath='{range .items[*]}{.metadata.labels.nvidia\.com/cuda\.driver-version\.full} {.status.conditions[?(@.type=="GpuStackReady")].message}|{end}')" = \
  "580.105.08 all checks passed (gpunode doctor) on driver 580.105.08|580.105.08 all checks passed (gpunode doctor) on driver 580.105.08|" ]; do
  [ $SECONDS -lt $deadline ] || fail "the two nodes whose driver pod was replaced are not on 580.105.08 after 60 s"
  sleep 0.5
done
[ "$(kubectl get node kwok-h100-0002 -o jsonpath='{.metadata.labels.nvidia\.com/cuda\.driver-version\.full}')" = 580.95.05 ] ||
  fail "kwok-h100-0002 (its pod kept) changed version"
# a driver pod on the real node: the stand-in never touches a node without the kwok annotation
kubectl -n "$ns" apply -f - >/dev/null <<YAML || fail "the driver pod on the real node"
apiVersion: v1
kind: Pod
metadata:
  name: driver-on-real-node
  labels: {gpunode.io/nvidia-driver: smoke-real}
  annotations: {gpunode.io/driver-version: 580.95.05}
spec:
  nodeName: $node
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: gpunode.test/busybox:1, imagePullPolicy: Never, command: [sleep, "3600"]}]
YAML
kubectl -n "$ns" wait --for=condition=Ready pod/driver-on-real-node --timeout=60s >/dev/null || fail "the pod on the real node is not Ready"
sleep 3
[ -z "$(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="GpuStackReady")].status}{.metadata.labels.nvidia\.com/cuda\.driver-version\.full}')" ] ||
  fail "the stand-in changed the real node $node"
kubectl -n "$ns" delete pod driver-on-real-node --wait=false >/dev/null
ok "new template + 2 pods deleted (OnDelete): those 2 nodes on 580.105.08, the rest kept; a driver pod on the real node $node: node untouched"

step "4. the watcher during a stand-in upgrade of pool h100 (waves of 4)"
kubectl get nodes -l gpunode-test/pool=h100 -o name | sed 's#node/##' > "$work/h100"
python3 - "$kc" "$here" "$work/h100" prep <<'PY' || fail "labelling the h100 nodes"
import sys
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[2])
import kwok_kube as k
c = k.Client(sys.argv[1])
for n in open(sys.argv[3]).read().split():
    c.request("PATCH", f"/api/v1/nodes/{n}", {"metadata": {"labels": {
        "nvidia.com/gpu-operator.driver.owner": "smoke", "nvidia.com/gpu-driver-upgrade-state": "upgrade-required"}}},
        "application/strategic-merge-patch+json")
PY
python3 "$here/kwok_watch.py" --kubeconfig "$kc" --max-unavailable smoke=4 --until-all-state upgrade-done \
  --timeout 120 --output "$work/watch-ok.json" 2> "$work/watch-ok.log" &
watch_pids+=($!)
python3 "$here/kwok_watch.py" --kubeconfig "$kc" --max-unavailable smoke=3 --fail-fast --timeout 120 \
  --output "$work/watch-bad.json" 2> "$work/watch-bad.log" &
watch_pids+=($!)
sleep 2  # both have listed
t0=$(date +%s.%N)
python3 - "$kc" "$here" "$work/h100" <<'PY' || fail "the stand-in upgrade"
import sys
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[2])
import kwok_kube as k
c = k.Client(sys.argv[1])
nodes = open(sys.argv[3]).read().split()
smp = "application/strategic-merge-patch+json"
def patch(n, state, unsched):
    c.request("PATCH", f"/api/v1/nodes/{n}", {"metadata": {"labels": {"nvidia.com/gpu-driver-upgrade-state": state}},
                                               "spec": {"unschedulable": unsched}}, smp)
for i in range(0, len(nodes), 4):
    wave = nodes[i:i + 4]
    for n in wave:
        patch(n, "cordon-required", True)
    for n in wave:
        patch(n, "validation-required", True)
    for n in wave:
        patch(n, "upgrade-done", False)
PY
rc_ok=0; wait "${watch_pids[0]}" || rc_ok=$?
rc_bad=0; wait "${watch_pids[1]}" || rc_bad=$?
watch_pids=()
upgrade_s=$(python3 -c "import time; print(round(time.time() - $t0, 1))")
read -r max events until_ok < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1])); p = s["pools"]["smoke"]
print(p["maxUnavailable"], s["events"], s["untilReached"])' "$work/watch-ok.json")
[ "$rc_ok" = 0 ] && [ "$max" = 4 ] && [ "$until_ok" = True ] ||
  fail "watcher (limit 4): exit $rc_ok, max unavailable $max, until reached $until_ok ($(tail -3 "$work/watch-ok.log"))"
grep -q "VIOLATION pool smoke: 4 nodes unavailable > limit 3" "$work/watch-bad.log" && [ "$rc_bad" = 1 ] ||
  fail "watcher (limit 3): exit $rc_bad, no violation reported ($(tail -3 "$work/watch-bad.log"))"
ok "upgrade of 250 nodes in $upgrade_s s: limit 4 held (max 4, $events events, exit 0); limit 3 flagged (exit 1):"
echo "      $(grep -m1 VIOLATION "$work/watch-bad.log" | cut -c1-240)"

step "5. stop: the stand-in (SIGTERM), the driver DaemonSet, kwok, the cluster"
kubectl -n "$ns" delete ds nvidia-driver-smoke --wait=false >/dev/null
kill -TERM "$agent_pid"
rc=0; wait "$agent_pid" || rc=$?
agent_pid=
[ "$rc" = 0 ] || fail "kwok_agent.py exited $rc on SIGTERM ($(tail -3 "$work/agent.log"))"
grep -q '"validated": 249, "failed": 3, "skipped_not_fake": 1, "errors": 0' "$work/agent.json" ||
  fail "stand-in counters: $(cat "$work/agent.json") (expected 249 validated, 3 failed, 1 real node skipped, 0 errors)"
ok "stand-in stopped (exit 0): $(cat "$work/agent.json")"
bash "$here/kwok.sh" down 2>&1 | sed 's/^/   /'
[ -z "$(bash "$here/kwok.sh" status 2>/dev/null | grep 'kwok running')" ] || fail "kwok still runs after kwok.sh down"
e2e_passed=1
echo "PASS: kwok smoke"
