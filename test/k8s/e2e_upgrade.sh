#!/usr/bin/env bash
# The driver-upgrade controller on a real Kubernetes 1.36 (test/k8s/cluster.sh; only the GPUs are
# simulated): the chart in simulate mode (dgx-h200) with driverManager.enabled (2 replicas, one
# acting by a Lease), an NVIDIADriver whose install image is the fake driver container
# (test/k8s/fake_driver.sh: it changes the simulated driver's version in the node's host root, the
# path a real driver container takes as far as gpunode can see).
#   1. NVIDIADriver v1 -> its DaemonSet's pod on the node, the node upgrade-done (owner label set)
#   2. a GPU Deployment runs; a PodDisruptionBudget blocks its eviction: NVIDIADriver -> v2, the
#      node is cordoned and waits in pod-deletion-required with the budget named (status, fleet
#      upgrade status)
#   3. the budget goes: the GPU pod is evicted, the acting controller is killed mid-upgrade and the
#      other replica continues; the driver pod is replaced, the agent validates v2, the node is
#      uncordoned (upgrade-done, labels say v2) and the Deployment's new pod runs
#   4. a broken driver (kernel module and NVML disagree) -> upgrade-failed with the reason, the
#      node stays cordoned, an Event, `fleet upgrade status` exits 1 naming it
#   5. `gpunode fleet upgrade rollback NODE` -> the previous driver (v2) through the same steps
#   5b. `gpunode fleet upgrade retry NODE` with the pool's rollback-on-failure annotation: toward the
#      broken driver again, it fails validation and goes back to v2 by itself
#   6. the NVIDIADriver deleted -> its DaemonSets go (owner reference), the owner label goes
# Usage: test/k8s/e2e_upgrade.sh BUILD_DIR (a Release build tree: the image is built from it).
# Exit 77 (skipped) without Go or as non-root, unless CI=true: then those are failures.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
ns=gpunode-upgrade
# shellcheck source=e2e_lib.sh
. "$src/test/k8s/e2e_lib.sh"

v1=580.95.05 v2=580.105.08 v3=580.126.09
gpunode=$build/bin/gpunode
# A label or annotation of the node ("" when absent: go-template says "<no value>").
nodelabel() { kubectl get node "$node" -o go-template="{{index .metadata.labels \"$1\"}}" 2>/dev/null | sed 's/^<no value>$//'; }
nodeanno() { kubectl get node "$node" -o go-template="{{index .metadata.annotations \"$1\"}}" 2>/dev/null | sed 's/^<no value>$//'; }
no_owner() { [ -z "$(nodelabel nvidia.com/gpu-operator.driver.owner)" ]; }
state() { nodelabel nvidia.com/gpu-driver-upgrade-state; }
cordoned() { [ "$(kubectl get node "$node" -o jsonpath='{.spec.unschedulable}')" = true ]; }
gate() { kubectl get node "$node" -o jsonpath='{range .status.conditions[?(@.type=="GpuStackReady")]}{.status} {.reason}: {.message}{end}'; }
elapsed() { python3 -c "print(round($(date +%s.%N) - $1, 1))"; }
# wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds (polling every 0.5 s)
wait_for() {
  local limit=$1 what=$2 deadline=$((SECONDS + $1))
  shift 2
  until "$@"; do
    [ $SECONDS -lt $deadline ] || fail "$what: not after $limit s (state '$(state)', reason '$(nodeanno gpunode.io/driver-upgrade.reason)', gate '$(gate)')"
    sleep 0.5
  done
}
state_is() { [ "$(state)" = "$1" ]; }
nvd() {  # VERSION IMAGE: apply the NVIDIADriver sim-pool
  kubectl apply -f - >/dev/null <<YAML
apiVersion: nvidia.com/v1alpha1
kind: NVIDIADriver
metadata: {name: sim-pool}
spec:
  driverType: gpu
  repository: gpunode.test
  image: $2
  version: "$1"
  imagePullPolicy: Never
  upgradePolicy:
    autoUpgrade: true
    maxParallelUpgrades: 1
    maxUnavailable: 1
    podDeletion: {timeoutSeconds: 300}
    drain: {enable: false}
YAML
}
dm_logs() { kubectl -n "$ns" logs deploy/gpunode-driver-manager --tail 30 2>&1 || true; }

step "fake driver images $v1, $v2 and a broken $v3"
fake_driver_image $v1 >/dev/null
fake_driver_image $v2 >/dev/null
fake_driver_image $v3 broken >/dev/null
ok "imported"

step "1. helm install (simulate dgx-h200, driverManager.enabled) + NVIDIADriver sim-pool $v1 -> upgrade-done"
kubectl label node "$node" nvidia.com/gpu.present=true --overwrite >/dev/null
helm install gpunode "$src/deploy/helm/gpunode" -n "$ns" --create-namespace \
  --set simulate.enabled=true --set simulate.profile=dgx-h200 \
  --set image.repository=localhost/gpunode --set image.tag="$version" --set image.pullPolicy=Never \
  --set validator.interval=3s --set validator.retry=2s \
  --set driverManager.enabled=true --set driverManager.resync=5s \
  --set driverManager.timeouts.validation=60s --set driverManager.timeouts.pod-restart=120s \
  >/dev/null || fail "helm install"
wait_for 120 "GpuStackReady=True on driver $v1" sh -c "kubectl get node $node -o jsonpath='{.status.conditions[?(@.type==\"GpuStackReady\")].message}' | grep -q 'on driver $v1'"
wait_for 60 "the CRD nvidiadrivers.nvidia.com" sh -c "kubectl get crd nvidiadrivers.nvidia.com >/dev/null 2>&1"
nvd $v1 fake-driver
t0=$(date +%s.%N)
wait_for 120 "node upgrade-done under sim-pool $v1" state_is upgrade-done
[ "$(nodelabel nvidia.com/gpu-operator.driver.owner)" = sim-pool ] || fail "owner label: '$(nodelabel nvidia.com/gpu-operator.driver.owner)'"
kubectl -n "$ns" get daemonset nvidia-driver-sim-pool >/dev/null || fail "no DaemonSet nvidia-driver-sim-pool"
[ "$(kubectl -n "$ns" get daemonset nvidia-driver-sim-pool -o jsonpath='{.spec.updateStrategy.type}')" = OnDelete ] || fail "the DaemonSet's update strategy is not OnDelete"
ok "owner label, DaemonSet (OnDelete), driver pod ready, upgrade-done $(elapsed "$t0") s after the NVIDIADriver"
wait_for 60 "allocatable nvidia.com/gpu 8" sh -c "[ \"\$(kubectl get node $node -o jsonpath='{.status.allocatable.nvidia\\.com/gpu}')\" = 8 ]"

step "2. a GPU Deployment and a PodDisruptionBudget; NVIDIADriver -> $v2: cordoned, waiting on the budget"
kubectl apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: trainer}}
  template:
    metadata: {labels: {app: trainer}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: gpunode.test/busybox:1
        imagePullPolicy: Never
        command: [sh, -c, "sleep 100000"]
        resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: trainer, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: trainer}}
YAML
wait_for 60 "the trainer pod Running" sh -c "kubectl get pods -n default -l app=trainer -o jsonpath='{.items[*].status.phase}' | grep -qx Running"
trainer=$(kubectl get pods -n default -l app=trainer -o jsonpath='{.items[0].metadata.name}')
ok "trainer pod $trainer runs with one GPU"
nvd $v2 fake-driver
t1=$(date +%s.%N)
wait_for 60 "pod-deletion-required" state_is pod-deletion-required
cordoned || fail "the node is not cordoned in pod-deletion-required"
wait_for 60 "the budget named in the node's reason" sh -c "kubectl get node $node -o jsonpath='{.metadata.annotations.gpunode\\.io/driver-upgrade\\.reason}' | grep -qi 'disruption budget'"
status_out=$("$gpunode" fleet upgrade status --kubeconfig "$KUBECONFIG" || true)
echo "$status_out" | sed 's/^/      /'
echo "$status_out" | grep -q "pod-deletion-required" || fail "fleet upgrade status does not show pod-deletion-required"
kubectl get pod -n default "$trainer" >/dev/null 2>&1 || fail "the budget did not keep $trainer"
ok "cordoned, $trainer kept by the budget, the reason names it: $(nodeanno gpunode.io/driver-upgrade.reason | head -c 160)"

step "3. the budget goes; the acting controller is killed mid-upgrade; the other replica finishes"
kubectl delete pdb trainer -n default >/dev/null
t2=$(date +%s.%N)
wait_for 60 "the trainer pod evicted" sh -c "! kubectl get pod -n default $trainer >/dev/null 2>&1"
ok "$trainer evicted $(elapsed "$t2") s after the budget went"
holder=$(kubectl -n "$ns" get lease gpunode-driver-manager -o jsonpath='{.spec.holderIdentity}')
[ -n "$holder" ] || fail "no holder of the Lease gpunode-driver-manager"
kubectl -n "$ns" delete pod "$holder" --wait=false >/dev/null || fail "delete the acting controller $holder"
ok "acting controller $holder killed in state $(state)"
wait_for 180 "upgrade-done at $v2 after the controller was killed" state_is upgrade-done
t3=$(date +%s.%N)
holder2=$(kubectl -n "$ns" get lease gpunode-driver-manager -o jsonpath='{.spec.holderIdentity}')
[ "$holder2" != "$holder" ] || fail "the Lease is still held by the killed $holder"
cordoned && fail "the node is still cordoned after upgrade-done"
[ "$(nodelabel nvidia.com/cuda.driver-version.full)" = $v2 ] || fail "the driver label says '$(nodelabel nvidia.com/cuda.driver-version.full)', not $v2"
gate | grep -q "^True .*on driver $v2" || fail "GpuStackReady: $(gate)"
img=$(kubectl -n "$ns" get pods -l gpunode.io/nvidia-driver=sim-pool --field-selector spec.nodeName="$node" -o jsonpath='{.items[*].spec.containers[0].image}')
[ "$img" = "gpunode.test/fake-driver:$v2" ] || fail "the node's driver pod runs '$img'"
wait_for 60 "the trainer's new pod Running after the uncordon" sh -c "kubectl get pods -n default -l app=trainer -o jsonpath='{.items[*].status.phase}' | grep -qx Running"
kubectl get events -n default --field-selector involvedObject.name="$node",reason=DriverUpgradeDone -o name | grep -q . || fail "no DriverUpgradeDone Event on the node"
ok "upgrade-done at $v2 by $holder2: $(python3 -c "print(round($t3-$t2,1))") s after the budget went ($(python3 -c "print(round($t3-$t1,1))") s after the version changed, the budget's wait included); uncordoned, labels and GpuStackReady say $v2, the trainer runs again"

step "4. a broken driver $v3 (module and NVML disagree) -> upgrade-failed, cordoned, explained"
nvd $v3 fake-driver-broken
t4=$(date +%s.%N)
wait_for 240 "upgrade-failed" state_is upgrade-failed
reason=$(nodeanno gpunode.io/driver-upgrade.reason)
echo "$reason" | grep -q DriverVersionMismatch || fail "the reason does not name DriverVersionMismatch: $reason"
cordoned || fail "a failed node must stay cordoned"
kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="GpuDriverUpgrade")].reason}' | grep -qx ValidationFailed ||
  fail "GpuDriverUpgrade condition: $(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="GpuDriverUpgrade")]}')"
kubectl get events -n default --field-selector involvedObject.name="$node",reason=DriverUpgradeFailed -o name | grep -q . || fail "no DriverUpgradeFailed Event on the node"
rc=0; out=$("$gpunode" fleet upgrade status --kubeconfig "$KUBECONFIG") || rc=$?
echo "$out" | sed 's/^/      /'
[ $rc = 1 ] || fail "fleet upgrade status exited $rc with a failed node, not 1"
echo "$out" | grep -q "upgrade-failed" || fail "fleet upgrade status does not list the failed node"
ok "upgrade-failed $(elapsed "$t4") s after $v3 (validation deadline 60 s): $(echo "$reason" | head -c 160)"

step "5. gpunode fleet upgrade rollback $node -> back to $v2 through the same steps"
"$gpunode" fleet upgrade rollback "$node" --kubeconfig "$KUBECONFIG" || fail "fleet upgrade rollback"
t5=$(date +%s.%N)
wait_for 180 "upgrade-done after the rollback" state_is upgrade-done
cordoned && fail "still cordoned after the rollback"
[ "$(nodelabel nvidia.com/cuda.driver-version.full)" = $v2 ] || fail "after the rollback the driver label says '$(nodelabel nvidia.com/cuda.driver-version.full)'"
[ "$(nodelabel gpunode.io/driver-upgrade.rollback)" = true ] || fail "no rollback label on the node"
img=$(kubectl -n "$ns" get pods -l gpunode.io/nvidia-driver=sim-pool --field-selector spec.nodeName="$node" -o jsonpath='{.items[*].spec.containers[0].image}')
[ "$img" = "gpunode.test/fake-driver:$v2" ] || fail "after the rollback the node's driver pod runs '$img'"
ok "rolled back to $v2 in $(elapsed "$t5") s (pod of nvidia-driver-sim-pool-previous), uncordoned"

step "5b. retry $node with rollback-on-failure for the pool -> $v3 fails validation, rolled back to $v2 by itself"
kubectl annotate nvidiadriver sim-pool gpunode.io/driver-upgrade.rollback-on-failure=true --overwrite >/dev/null
"$gpunode" fleet upgrade retry "$node" --kubeconfig "$KUBECONFIG" || fail "fleet upgrade retry"
t6=$(date +%s.%N)
wait_for 60 "the retried node under way" sh -c "[ \"\$(kubectl get node $node -o jsonpath='{.metadata.annotations.gpunode\\.io/driver-upgrade\\.target}')\" = $v3 ]"
wait_for 240 "the automatic rollback's Event" sh -c "kubectl get events -n default --field-selector involvedObject.name=$node,reason=DriverUpgradeRollingBack -o name | grep -q ."
wait_for 120 "upgrade-done after the automatic rollback" state_is upgrade-done
kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="GpuDriverUpgrade")].reason}' | grep -qx RolledBack ||
  fail "GpuDriverUpgrade after the automatic rollback: $(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="GpuDriverUpgrade")]}')"
cordoned && fail "still cordoned after the automatic rollback"
[ "$(nodelabel nvidia.com/cuda.driver-version.full)" = $v2 ] || fail "after the automatic rollback the driver label says '$(nodelabel nvidia.com/cuda.driver-version.full)'"
ok "retried toward $v3, failed validation, rolled back to $v2 by itself in $(elapsed "$t6") s: upgrade-done, condition RolledBack, uncordoned"

step "6. the NVIDIADriver deleted -> its DaemonSets and the owner label go"
kubectl delete nvidiadriver sim-pool >/dev/null
wait_for 60 "the DaemonSets gone" sh -c "[ -z \"\$(kubectl -n $ns get daemonsets -l gpunode.io/nvidia-driver=sim-pool -o name)\" ]"
wait_for 60 "the owner label gone" no_owner
ok "DaemonSets and owner label gone"
echo "--- controller log (last lines)"; dm_logs | tail -12 | sed 's/^/      /'
kubectl delete deployment trainer -n default --wait=false >/dev/null 2>&1 || true
e2e_passed=1
echo "PASS: e2e_upgrade"
