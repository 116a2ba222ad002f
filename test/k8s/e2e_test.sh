#!/usr/bin/env bash
# End to end on a real Kubernetes (test/k8s/cluster.sh: kubelet, containerd 2, API server; only the
# GPUs are simulated, at NVML's ABI): the gpunode chart in simulate mode on the dgx-h200 profile.
#   1. helm install -> the DaemonSet pod Ready -> Node capacity/allocatable nvidia.com/gpu = 8
#      (time from install to allocatable reported)
#      and GFD's/gpunode's labels on the Node (put there by the agent through the API); the pod is
#      one container (gpunode agent), its start -> plugin registration < 2 s, GpuStackReady=True,
#      /readyz and gpunode_component_up
#   1b. one node's token reaches only that node: with a token bound to the agent's pod the API server
#      (the chart's ValidatingAdmissionPolicy) refuses another Node, unrelated labels, cordon/taints,
#      status.addresses, other conditions and events about other Nodes (test/k8s/e2e_security.sh)
#   2. the chart's default, the CDI path (cdi-cri: the kubelet names CDI devices, containerd applies
#      the chart's spec): a pod asking for 2 GPUs runs and sees exactly its 2 /dev/nvidia<N> nodes,
#      the control nodes and the driver files; a pod asking for 8 stays Pending with "Insufficient
#      nvidia.com/gpu"; after the first ends, the second runs
#   2b. the runtime-shim path: containerd given the nvidia runtime by `gpunode runtime configure`
#      (restarted), RuntimeClass nvidia, the plugin with volume-mounts: gpunode oci-runtime gives
#      the pod exactly its 2 GPUs; a 1-GPU pod that sets NVIDIA_VISIBLE_DEVICES=all itself sees 1,
#      a pod without a GPU request and that env sees none
#   3. the gpunode pod deleted: the DaemonSet brings it back, the kubelet sees the plugin again,
#      allocatable returns, a running GPU pod is untouched
#   3b. the kubelet restarted: the plugin registers again within 5 s; a GPU pod still schedules
#   4. GPU 3 lost (the simulated profile edited on the host, as a GPU falls off the bus): allocatable
#      drops to 7 (target 2 s, reported; fails past 5 s)
#   4b. the validation gate: CUDA broken on the node (cuInit NO_DEVICE in the live profile) ->
#      GpuStackReady=False reason CudaNoDevice on the Node within 5 s, an Event, allocatable 0 with
#      the plugin still registered; mended -> True and 8 again
#   4c. per-node configuration by relabelling, without a pod restart: nvidia.com/device-plugin.config
#      =shared (time-slicing x4) -> 32, =exclusive -> 8; nvidia.com/gpu.deploy.dcgm-exporter=false
#      switches the exporter off (port closed) within 5 s, removing the label brings it back
#   5. Debian's Prometheus scrapes the exporter through the chart's Service: the running GPU pod's
#      pod/namespace/container labels come from the real kubelet's pod-resources API
#   5b. helm upgrade to the broken-mismatch profile (kernel module 550 vs NVML 535): GpuStackReady=
#      False reason DriverVersionMismatch within 5 s of the agent's start, allocatable 0 and staying
#      0, gpunode fleet exit 1; back to dgx-h200: 8 and True
#   6. helm upgrade to time-slicing with 4 replicas (devicePlugin.defaultConfig=shared) -> allocatable 32; helm uninstall (its
#      pre-delete hook) leaves no plugin socket, no gpunode label and no CDI spec behind
# Usage: test/k8s/e2e_test.sh BUILD_DIR (a Release build tree: the image is built from it).
# Exit 77 (skipped) without Go or as non-root, unless CI=true: then those are failures.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=e2e_lib.sh
. "$src/test/k8s/e2e_lib.sh"
# shellcheck source=e2e_security.sh
. "$src/test/k8s/e2e_security.sh"

alloc() { kubectl get node "$node" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}'; }
cap() { kubectl get node "$node" -o jsonpath='{.status.capacity.nvidia\.com/gpu}'; }
wait_alloc() {  # VALUE SECONDS
  local deadline=$((SECONDS + $2))
  while [ "$(alloc)" != "$1" ]; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

step "1. helm install (simulate dgx-h200) -> allocatable nvidia.com/gpu 8"
kubectl label node "$node" nvidia.com/gpu.present=true --overwrite >/dev/null
t0=$(date +%s.%N)
helm install gpunode "$src/deploy/helm/gpunode" -n "$ns" --create-namespace \
  --set simulate.enabled=true --set simulate.profile=dgx-h200 \
  --set image.repository=localhost/gpunode --set image.tag="$version" --set image.pullPolicy=Never \
  --set exporter.collectInterval=1000 --set validator.interval=3s --set validator.retry=2s \
  --set-json 'devicePlugin.configs={"exclusive":{"version":"v1"},"shared":{"version":"v1","sharing":{"timeSlicing":{"resources":[{"name":"nvidia.com/gpu","replicas":4}]}}}}' \
  --set devicePlugin.defaultConfig=exclusive \
  >/dev/null || fail "helm install"
wait_alloc 8 120 || fail "allocatable nvidia.com/gpu is '$(alloc)', not 8, 120 s after helm install"
t1=$(date +%s.%N)
ok "allocatable 8, capacity $(cap): $(python3 -c "print(round($t1-$t0,1))") s after helm install"
kubectl -n "$ns" rollout status daemonset/gpunode --timeout=120s >/dev/null || fail "DaemonSet not Ready"
containers=$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=gpunode -o jsonpath='{.items[0].spec.containers[*].name}')
[ "$containers" = "agent front" ] || fail "the gpunode pod runs containers '$containers', not agent and front"
ok "DaemonSet pod Ready: the agent and its unprivileged front"
security_front_container
agent_log() { kubectl -n "$ns" logs daemonset/gpunode -c agent 2>/dev/null; }
reg_ms=$(agent_log | sed -n 's/.*allocatable advertised .* \([0-9]*\) ms after start.*/\1/p' | head -1)
[ -n "$reg_ms" ] || fail "no 'allocatable advertised' line in the agent's log"
[ "$reg_ms" -lt 2000 ] || fail "the GPUs were advertised $reg_ms ms after the agent started (target 2 s)"
ok "agent start -> allocatable advertised (plugin registered, validation passed) in $reg_ms ms (target 2000 ms)"
condition() {  # FIELD of the Node condition GpuStackReady
  kubectl get node "$node" -o jsonpath="{.status.conditions[?(@.type==\"GpuStackReady\")].$1}"
}
deadline=$((SECONDS + 30))
until [ "$(condition status)" = True ]; do
  [ $SECONDS -lt $deadline ] || fail "Node condition GpuStackReady is '$(condition status)' ($(condition reason)), not True"
  sleep 0.5
done
ok "Node condition GpuStackReady=True ($(condition reason))"
pod_ip=$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=gpunode -o jsonpath='{.items[0].status.podIP}')
ready=$(curl -s --max-time 3 "http://$pod_ip:9401/readyz" | tail -1)
[ "$ready" = "readyz ok" ] || fail "agent /readyz on $pod_ip:9401: '$ready'"
up=$(curl -s --max-time 3 "http://$pod_ip:9401/metrics" | grep -c '^gpunode_component_up{.*} 1$' || true)
[ "$up" -ge 5 ] || fail "only $up components up in gpunode_component_up"
ok "agent /readyz ok; gpunode_component_up=1 for $up components (cdi, validator, plugin, labels, exporter, node)"
node_label() { kubectl get node "$node" -o go-template="{{index .metadata.labels \"$1\"}}"; }
deadline=$((SECONDS + 30))
until [ "$(node_label nvidia.com/gpu.count)" = 8 ]; do
  [ $SECONDS -lt $deadline ] || fail "no nvidia.com/gpu.count=8 label on the Node 30 s after the pod was Ready"
  sleep 0.5
done
product=$(node_label nvidia.com/gpu.product)
[ -n "$product" ] || fail "no nvidia.com/gpu.product label"
nlabels=$(kubectl get node "$node" -o go-template='{{range $k, $v := .metadata.labels}}{{$k}}{{"\n"}}{{end}}' | grep -cE '^(nvidia\.com|gpunode\.io)/' || true)
# gpunode's labels are its server-side apply's (field manager gpunode): nvidia.com/gpu.present, set
# before with the same value, is shared with its owner (so it stays at uninstall), not gpunode's alone.
managed=$(kubectl get node "$node" -o json | python3 -c '
import json, sys
n = json.load(sys.stdin)
owned = {}
for e in n["metadata"].get("managedFields", []):
    for k in e.get("fieldsV1", {}).get("f:metadata", {}).get("f:labels", {}):
        if k.startswith("f:"):
            owned.setdefault(k[2:], set()).add(e.get("manager", "") + "/" + e.get("operation", ""))
print(",".join(sorted(k for k, m in owned.items() if m == {"gpunode/Apply"})))')
case ",$managed," in *,nvidia.com/gpu.present,*) fail "gpunode owns nvidia.com/gpu.present alone, which was there before it" ;; esac
ok "Node labels: nvidia.com/gpu.product=$product nvidia.com/gpu.count=8, $nlabels nvidia.com/ and gpunode.io/ labels; $(printf '%s' "$managed" | tr ',' '\n' | grep -c .) owned by gpunode's apply alone"
fleet_json() { "$build/bin/gpunode" fleet --kubeconfig "$KUBECONFIG" -o json; }
rc=0; fleet=$(fleet_json) || rc=$?
[ "$rc" = 0 ] || fail "gpunode fleet against the live cluster exited $rc: $(printf '%s' "$fleet" | head -c 400)"
printf '%s' "$fleet" | python3 -c '
import json, sys
d = json.load(sys.stdin)
s = d["summary"]
assert s["gpuNodes"] == 1 and s["allocatable"] == 8 and s["healthy"], s
p = d["pools"][0]
print("   fleet: pool %s, %d node, %d GPUs allocatable, agent %s" % (p.get("name"), s["gpuNodes"], s["allocatable"], ",".join(s["agentVersions"])))
' || fail "gpunode fleet: $(printf '%s' "$fleet" | head -c 600)"
ok "gpunode fleet against the live cluster: healthy, one pool"

step "1b. one node's token reaches only that node (ValidatingAdmissionPolicy gpunode-node-restriction)"
security_node_restriction

gpu_pod() {  # NAME GPUS COMMAND
  kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  restartPolicy: Never
  containers:
    - name: $1
      image: gpunode.test/busybox:1
      imagePullPolicy: Never
      command:
        - sh
        - -c
        - |
          $3
      resources: {limits: {nvidia.com/gpu: $2}}
YAML
}

step "2. the default (cdi-cri): a pod with 2 GPUs sees exactly its 2; a pod with 8 waits for them"
[ -s /var/run/cdi/nvidia.yaml ] || fail "the chart wrote no /var/run/cdi/nvidia.yaml"
grep -q "hostPath: \"/var/lib/gpunode/sim/dev/nvidia0\"" /var/run/cdi/nvidia.yaml ||
  fail "the spec's device nodes do not point at the simulated node's /dev: $(grep -m3 hostPath /var/run/cdi/nvidia.yaml)"
gpu_pod two 2 'ls /dev | grep -E "^nvidia[0-9]+$"; ls /dev/nvidiactl /dev/nvidia-uvm; ls /usr/lib/x86_64-linux-gnu/ | grep -c "^libnvidia-ml.so"; echo "visible=$NVIDIA_VISIBLE_DEVICES"; sleep 8'
kubectl wait --for=condition=Ready pod/two --timeout=60s >/dev/null || fail "pod 'two' did not start"
gpu_pod eight 8 'ls /dev | grep -cE "^nvidia[0-9]+$"'
sleep 2
phase=$(kubectl get pod eight -o jsonpath='{.status.phase}')
why=$(kubectl get pod eight -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}')
[ "$phase" = Pending ] || fail "pod 'eight' is $phase while 'two' holds 2 of 8 GPUs"
case "$why" in *"Insufficient nvidia.com/gpu"*) ok "pod 'eight' Pending: $why" ;; *) fail "pod 'eight' Pending for another reason: $why" ;; esac
kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/two --timeout=60s >/dev/null || fail "pod 'two' did not end"
out=$(kubectl logs two)
n=$(printf '%s\n' "$out" | grep -cE '^nvidia[0-9]+$' || true)
[ "$n" = 2 ] || fail "pod 'two' sees $n GPU device nodes, not 2: $out"
printf '%s\n' "$out" | grep -q '^/dev/nvidia-uvm$' || fail "pod 'two' lacks the control nodes: $out"
printf '%s\n' "$out" | grep -q '^visible=void$' || fail "pod 'two': NVIDIA_VISIBLE_DEVICES is not the spec's void: $out"
ok "pod 'two' (CDI devices from the kubelet, applied by containerd): $(printf '%s\n' "$out" | grep -E '^nvidia[0-9]+$' | tr '\n' ' ')+ control nodes, libnvidia-ml mounted, NVIDIA_VISIBLE_DEVICES=void"
kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/eight --timeout=90s >/dev/null ||
  fail "pod 'eight' did not run after 'two' ended ($(kubectl get pod eight -o jsonpath='{.status.phase}'))"
[ "$(kubectl logs eight)" = 8 ] || fail "pod 'eight' sees $(kubectl logs eight) GPUs"
ok "pod 'eight' ran after 'two' ended and saw 8 GPUs"
kubectl delete pod two eight --wait=true >/dev/null

upgrade() {  # helm upgrade --reuse-values ARGS..., then wait for the new pod and allocatable 8
  local before
  before=$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=gpunode -o jsonpath='{.items[0].metadata.name}')
  helm upgrade gpunode "$src/deploy/helm/gpunode" -n "$ns" --reuse-values "$@" >/dev/null || fail "helm upgrade $*"
  kubectl -n "$ns" rollout status daemonset/gpunode --timeout=120s >/dev/null || fail "DaemonSet not Ready after helm upgrade $*"
  kubectl -n "$ns" wait --for=delete "pod/$before" --timeout=60s >/dev/null 2>&1 || true
  wait_alloc 8 60 || fail "allocatable is '$(alloc)' after helm upgrade $*"
}

step "2b. the runtime-shim path: gpunode runtime configure + RuntimeClass nvidia"
mkdir -p "$state/bin"
ln -sf "$build/bin/gpunode" "$state/bin/nvidia-container-runtime"
"$build/bin/gpunode" runtime configure --runtime containerd --config "$state/containerd/config.toml" \
  --runtime-path "$state/bin/nvidia-container-runtime" --backup-dir "$state/backups" >"$state/logs/runtime-configure.log" 2>&1 ||
  { cat "$state/logs/runtime-configure.log"; fail "gpunode runtime configure --runtime containerd"; }
grep -q "runtimes.nvidia" "$state/containerd/config.toml" || fail "no nvidia runtime in containerd's config"
"$src/test/k8s/cluster.sh" restart-containerd >/dev/null 2>&1 || fail "cluster.sh restart-containerd"
kubectl apply -f - >/dev/null <<YAML || fail "RuntimeClass nvidia"
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: nvidia}
handler: nvidia
YAML
upgrade --set devicePlugin.deviceListStrategy=volume-mounts --set devicePlugin.passDeviceSpecs=false
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: shim}
spec:
  restartPolicy: Never
  runtimeClassName: nvidia
  containers:
    - name: shim
      image: gpunode.test/busybox:1
      imagePullPolicy: Never
      command: [sh, -c, 'ls /dev | grep -E "^nvidia[0-9]+$"; ls /dev/nvidiactl; echo "visible=\$NVIDIA_VISIBLE_DEVICES"']
      resources: {limits: {nvidia.com/gpu: 2}}
YAML
kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/shim --timeout=90s >/dev/null ||
  fail "pod 'shim' did not run: $(kubectl get pod shim -o jsonpath='{.status}' | head -c 600)"
out=$(kubectl logs shim)
n=$(printf '%s\n' "$out" | grep -cE '^nvidia[0-9]+$' || true)
[ "$n" = 2 ] || fail "pod 'shim' (nvidia runtime) sees $n GPU device nodes, not 2: $out"
printf '%s\n' "$out" | grep -q '^/dev/nvidiactl$' || fail "pod 'shim' has no /dev/nvidiactl: $out"
ok "pod 'shim' (runtimeClassName nvidia -> gpunode oci-runtime -> runc): $(printf '%s\n' "$out" | grep -E '^nvidia[0-9]+$' | tr '\n' ' ')+ nvidiactl"
kubectl delete pod shim --wait=true >/dev/null
security_pods_under_shim
upgrade --set devicePlugin.deviceListStrategy=cdi-cri --set devicePlugin.passDeviceSpecs=

step "3. the gpunode pod deleted: the DaemonSet brings it back; a running GPU pod is untouched"
gpu_pod keeper 1 'sleep 3600'
kubectl wait --for=condition=Ready pod/keeper --timeout=60s >/dev/null || fail "pod 'keeper' did not start"
started=$(kubectl get pod keeper -o jsonpath='{.status.containerStatuses[0].state.running.startedAt}')
old=$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=gpunode -o jsonpath='{.items[0].metadata.name}')
t0=$(date +%s.%N)
kubectl -n "$ns" delete pod "$old" --wait=false >/dev/null
deadline=$((SECONDS + 120))
until new=$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=gpunode -o jsonpath='{.items[?(@.status.phase=="Running")].metadata.name}') &&
      [ -n "$new" ] && [ "$new" != "$old" ]; do
  [ $SECONDS -lt $deadline ] || fail "no new gpunode pod 120 s after deleting $old"
  sleep 0.5
done
kubectl -n "$ns" rollout status daemonset/gpunode --timeout=120s >/dev/null || fail "DaemonSet not Ready again"
wait_alloc 8 60 || fail "allocatable is '$(alloc)' after the gpunode pod came back"
t1=$(date +%s.%N)
ok "new pod $new, allocatable 8 again $(python3 -c "print(round($t1-$t0,1))") s after the delete"
[ "$(kubectl get pod keeper -o jsonpath='{.status.phase}')" = Running ] || fail "pod 'keeper' is not running"
[ "$(kubectl get pod keeper -o jsonpath='{.status.containerStatuses[0].state.running.startedAt}')" = "$started" ] &&
  [ "$(kubectl get pod keeper -o jsonpath='{.status.containerStatuses[0].restartCount}')" = 0 ] ||
  fail "pod 'keeper' was restarted"
ok "GPU pod 'keeper' untouched (started $started, 0 restarts)"
kubectl delete pod keeper --wait=true --grace-period=1 >/dev/null

step "3b. the kubelet restarted: the plugin registers again within 5 s"
klog=$state/logs/kubelet.log
before=$(grep -c 'Got registration request from device plugin with resource' "$klog" || true)
t0=$(date +%s.%N)
"$src/test/k8s/cluster.sh" restart-kubelet >/dev/null 2>&1 || fail "cluster.sh restart-kubelet"
deadline=$((SECONDS + 30))
while [ "$(grep -c 'Got registration request from device plugin with resource' "$klog" || true)" -le "$before" ]; do
  [ $SECONDS -lt $deadline ] || fail "the plugin did not register with the restarted kubelet within 30 s"
  sleep 0.1
done
t1=$(date +%s.%N)
dt=$(python3 -c "print(round($t1-$t0,2))")
python3 -c "import sys; sys.exit(0 if $t1-$t0 < 5 else 1)" || fail "registered again only after $dt s (target 5 s)"
ok "registered again $dt s after the kubelet restart (stop included)"
gpu_pod after 1 'ls /dev | grep -cE "^nvidia[0-9]+$"'
kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/after --timeout=90s >/dev/null ||
  fail "a GPU pod did not run after the kubelet restart"
[ "$(kubectl logs after)" = 1 ] || fail "pod 'after' sees $(kubectl logs after) GPUs"
ok "a 1-GPU pod runs after the restart and sees 1 GPU"
kubectl delete pod after --wait=true >/dev/null

profile=/var/lib/gpunode/sim/profile.yaml
[ -f "$profile" ] || fail "$profile: the chart's simulated profile file is missing"
cp "$profile" "$state/profile.orig.yaml"
step "4b. the validation gate: CUDA fails on the node -> every GPU Unhealthy, GpuStackReady=False (target 5 s)"
sed 's/^  cuda_version: "13.0"$/  cuda_version: "13.0"\n  cuda_init_error: NO_DEVICE/' "$state/profile.orig.yaml" > "$profile.tmp"
grep -q 'cuda_init_error: NO_DEVICE' "$profile.tmp" || fail "could not break CUDA in $profile"
t0=$(date +%s.%N)
mv "$profile.tmp" "$profile"
deadline=$((SECONDS + 30))
until [ "$(condition status)" = False ]; do
  [ $SECONDS -lt $deadline ] || fail "GpuStackReady is still '$(condition status)' 30 s after CUDA broke"
  sleep 0.1
done
t1=$(date +%s.%N)
reason=$(condition reason)
[ "$reason" = CudaNoDevice ] || fail "GpuStackReady=False with reason '$reason', not CudaNoDevice"
dt=$(python3 -c "print(round($t1-$t0,2))")
python3 -c "import sys; sys.exit(0 if $t1-$t0 < 5 else 1)" || fail "the failing validation reached the Node only after $dt s (target 5 s)"
ok "GpuStackReady=False (CudaNoDevice: $(condition message | cut -c1-60)...) on the Node $dt s after CUDA broke"
wait_alloc 0 10 || fail "allocatable is '$(alloc)', not 0, while the gate is closed"
ok "allocatable 0 (capacity $(cap)): the plugin stays registered, every GPU Unhealthy"
kubectl get events -n default --field-selector involvedObject.name="$node",reason=CudaNoDevice -o name | grep -q . ||
  fail "no Warning event CudaNoDevice on the Node"
ok "Event CudaNoDevice on the Node"
rc=0; fleet=$(fleet_json) || rc=$?
[ "$rc" = 1 ] || fail "gpunode fleet exited $rc with validation failing on the node (want 1)"
printf '%s' "$fleet" | python3 -c '
import json, sys
d = json.load(sys.stdin)
ids = [f["id"] for f in d["findings"]]
assert "validation-failing" in ids, ids
' || fail "gpunode fleet lists no validation-failing finding: $(printf '%s' "$fleet" | head -c 600)"
ok "gpunode fleet: exit 1, finding validation-failing for the node"
sleep 3
[ "$(alloc)" = 0 ] || fail "allocatable went back to '$(alloc)' while CUDA is still broken"
cp "$state/profile.orig.yaml" "$profile.tmp" && mv "$profile.tmp" "$profile"
wait_alloc 8 30 || fail "allocatable is '$(alloc)', not 8, after CUDA was mended"
[ "$(condition status)" = True ] || fail "GpuStackReady is '$(condition status)' after CUDA was mended"
ok "mended: GpuStackReady=True, allocatable 8"

step "4c. per-node configuration by node labels, no pod restart (target 5 s)"
pod_ip=$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=gpunode -o jsonpath='{.items[0].status.podIP}')
pod_before=$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=gpunode -o jsonpath='{.items[0].metadata.name}')
t0=$(date +%s.%N)
kubectl label node "$node" nvidia.com/device-plugin.config=shared --overwrite >/dev/null
wait_alloc 32 30 || fail "allocatable is '$(alloc)', not 32, after nvidia.com/device-plugin.config=shared"
t1=$(date +%s.%N)
ok "nvidia.com/device-plugin.config=shared (time-slicing x4): allocatable 32 after $(python3 -c "print(round($t1-$t0,2))") s"
deadline=$((SECONDS + 15))
until [ "$(node_label nvidia.com/gpu.replicas)" = 4 ]; do
  [ $SECONDS -lt $deadline ] || fail "nvidia.com/gpu.replicas is '$(node_label nvidia.com/gpu.replicas)', not 4"
  sleep 0.2
done
ok "label nvidia.com/gpu.replicas=4 follows"
t0=$(date +%s.%N)
kubectl label node "$node" nvidia.com/device-plugin.config=exclusive --overwrite >/dev/null
wait_alloc 8 30 || fail "allocatable is '$(alloc)', not 8, after nvidia.com/device-plugin.config=exclusive"
t1=$(date +%s.%N)
ok "nvidia.com/device-plugin.config=exclusive: allocatable 8 after $(python3 -c "print(round($t1-$t0,2))") s"
kubectl label node "$node" nvidia.com/device-plugin.config- >/dev/null
comp() { curl -s --max-time 2 "http://$pod_ip:9401/metrics" | sed -n "s/^gpunode_component_enabled{component=\"$1\"} //p"; }
t0=$(date +%s.%N)
kubectl label node "$node" nvidia.com/gpu.deploy.dcgm-exporter=false --overwrite >/dev/null
deadline=$((SECONDS + 10))
until [ "$(comp exporter)" = 0 ]; do
  [ $SECONDS -lt $deadline ] || fail "the exporter is still on 10 s after nvidia.com/gpu.deploy.dcgm-exporter=false"
  sleep 0.1
done
t1=$(date +%s.%N)
curl -sf --max-time 2 "http://$pod_ip:9400/metrics" >/dev/null && fail "the exporter still serves :9400/metrics after it was switched off"
dt=$(python3 -c "print(round($t1-$t0,2))")
python3 -c "import sys; sys.exit(0 if $t1-$t0 < 5 else 1)" || fail "switched off only after $dt s (target 5 s)"
ok "nvidia.com/gpu.deploy.dcgm-exporter=false: exporter off after $dt s, no /metrics on :9400, plugin untouched (allocatable $(alloc))"
kubectl label node "$node" nvidia.com/gpu.deploy.dcgm-exporter- >/dev/null
deadline=$((SECONDS + 15))
until grep -q DCGM_FI_DEV_GPU_TEMP < <(curl -s --max-time 2 "http://$pod_ip:9400/metrics"); do
  [ $SECONDS -lt $deadline ] || fail "the exporter did not come back after the label was removed"
  sleep 0.2
done
ok "label removed: the exporter serves again"
pod_after=$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=gpunode -o jsonpath='{.items[0].metadata.name}')
restarts=$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=gpunode -o jsonpath='{.items[0].status.containerStatuses[?(@.name=="agent")].restartCount}')
[ "$pod_before" = "$pod_after" ] && [ "$restarts" = 0 ] || fail "the gpunode pod was restarted ($pod_before -> $pod_after, $restarts restarts)"
ok "same pod $pod_after, 0 restarts"

step "4. GPU 3 falls off the bus -> allocatable 7 (target 2 s)"
profile=/var/lib/gpunode/sim/profile.yaml
[ -f "$profile" ] || fail "$profile: the chart's simulated profile file is missing"
cp "$profile" "$state/profile.orig.yaml"
sed 's/{bus_id: "0000:5d:00.0"/{lost: true, bus_id: "0000:5d:00.0"/' "$state/profile.orig.yaml" > "$profile.tmp"
grep -q 'lost: true' "$profile.tmp" || fail "could not mark GPU 3 lost in $profile"
t0=$(date +%s.%N)
mv "$profile.tmp" "$profile"
wait_alloc 7 10 || fail "allocatable is '$(alloc)', not 7, 10 s after GPU 3 was lost"
t1=$(date +%s.%N)
dt=$(python3 -c "print(round($t1-$t0,2))")
# The issue's target is 2 s (gpunode's reaction plus the kubelet's 1 s status tick in the test
# cluster): reported here; the test fails only past 5 s, so a loaded CI box does not make it flaky.
python3 -c "import sys; sys.exit(0 if $t1-$t0 < 5 else 1)" || fail "allocatable 7 only after $dt s"
python3 -c "import sys; sys.exit(0 if $t1-$t0 < 2 else 1)" && target="target 2 s: met" || target="target 2 s: MISSED"
ok "allocatable 7 after $dt s (capacity $(cap); $target)"
cp "$state/profile.orig.yaml" "$profile.tmp" && mv "$profile.tmp" "$profile"

step "5. Prometheus scrapes the exporter through the Service; the GPU pod's labels from the kubelet"
command -v prometheus >/dev/null || fail "prometheus (Debian's package) is not installed"
svc_ip=$(kubectl -n "$ns" get svc gpunode-exporter -o jsonpath='{.spec.clusterIP}')
[ -n "$svc_ip" ] || fail "no Service gpunode-exporter"
gpu_pod watched 1 'sleep 3600'
kubectl wait --for=condition=Ready pod/watched --timeout=60s >/dev/null || fail "pod 'watched' did not start"
prom_port=19390
mkdir -p "$state/prometheus"
cat > "$state/prometheus/prometheus.yml" <<YAML
global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: gpunode
    static_configs: [{targets: ["$svc_ip:9400"]}]
YAML
prometheus --config.file="$state/prometheus/prometheus.yml" --storage.tsdb.path="$state/prometheus/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" > "$state/logs/prometheus.log" 2>&1 &
prom_pid=$!
query() {
  curl -s --max-time 2 "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(json.dumps([x["metric"] for x in r]))' 2>/dev/null
}
deadline=$((SECONDS + 60))
until [ "$(query 'up{job="gpunode"}' | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' 2>/dev/null)" = 1 ] &&
      m=$(query 'DCGM_FI_DEV_GPU_TEMP{pod="watched"}') && [ "$m" != "[]" ] && [ -n "$m" ]; do
  [ $SECONDS -lt $deadline ] || { tail -5 "$state/logs/prometheus.log"; fail "no DCGM_FI_DEV_GPU_TEMP{pod=\"watched\"} in Prometheus after 60 s"; }
  sleep 1
done
labels=$(printf '%s' "$m" | python3 -c 'import json,sys; m=json.load(sys.stdin)[0]; print(m.get("namespace"), m.get("container"), m.get("gpu"), m.get("UUID"))')
read -r pns pcont pgpu puuid <<<"$labels"
[ "$pns" = default ] && [ "$pcont" = watched ] || fail "pod labels: $m"
ok "Prometheus ($(prometheus --version 2>&1 | head -1 | awk '{print $3}')) via Service $svc_ip:9400: pod=watched namespace=$pns container=$pcont on gpu $pgpu ($puuid)"
n=$(curl -s --max-time 2 "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode 'query=count(DCGM_FI_DEV_GPU_TEMP)' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["result"][0]["value"][1])')
ok "$n GPUs reporting"
kill "$prom_pid"; wait "$prom_pid" 2>/dev/null || true; prom_pid=
kubectl delete pod watched --wait=true --grace-period=1 >/dev/null

step "5b. a driver that fails validation (simulate.profile=broken-mismatch): allocatable 0, GpuStackReady=False"
helm upgrade gpunode "$src/deploy/helm/gpunode" -n "$ns" --reuse-values --set simulate.profile=broken-mismatch \
  >/dev/null || fail "helm upgrade to broken-mismatch"
deadline=$((SECONDS + 90))
until [ "$(condition reason)" = DriverVersionMismatch ]; do
  [ $SECONDS -lt $deadline ] || fail "GpuStackReady is '$(condition status)' ($(condition reason)) 90 s after the upgrade to broken-mismatch"
  sleep 0.5
done
set_ms=$(agent_log | sed -n 's/.*GpuStackReady=False (DriverVersionMismatch) set \([0-9]*\) ms after the agent started.*/\1/p' | head -1)
[ -n "$set_ms" ] || fail "no 'GpuStackReady=False (DriverVersionMismatch) set' line in the agent's log"
[ "$set_ms" -lt 5000 ] || fail "the failing validation reached the Node $set_ms ms after the agent started (target 5 s)"
ok "GpuStackReady=False (DriverVersionMismatch) on the Node $set_ms ms after the new agent started: $(condition message | cut -c1-70)..."
wait_alloc 0 60 || fail "allocatable is '$(alloc)', not 0, on a node whose driver fails validation"
sleep 5
[ "$(alloc)" = 0 ] || fail "allocatable went back to '$(alloc)' on the broken node"
ok "allocatable 0 (capacity $(cap)) and stays 0: NVML cannot start, the plugin retries with backoff, the agent keeps running"
rc=0; fleet=$(fleet_json) || rc=$?
[ "$rc" = 1 ] || fail "gpunode fleet exited $rc on a node failing validation (want 1)"
ok "gpunode fleet: exit 1"
helm upgrade gpunode "$src/deploy/helm/gpunode" -n "$ns" --reuse-values --set simulate.profile=dgx-h200 \
  >/dev/null || fail "helm upgrade back to dgx-h200"
wait_alloc 8 120 || fail "allocatable is '$(alloc)', not 8, after the upgrade back to dgx-h200"
deadline=$((SECONDS + 30))
until [ "$(condition status)" = True ]; do
  [ $SECONDS -lt $deadline ] || fail "GpuStackReady is '$(condition status)' after the upgrade back to dgx-h200"
  sleep 0.5
done
ok "back on dgx-h200: allocatable 8, GpuStackReady=True"

step "6. helm upgrade to time-slicing (4 replicas) -> 32; helm uninstall leaves no socket"
helm upgrade gpunode "$src/deploy/helm/gpunode" -n "$ns" --reuse-values --set devicePlugin.defaultConfig=shared \
  >/dev/null || fail "helm upgrade"
wait_alloc 32 120 || fail "allocatable is '$(alloc)', not 32, after the upgrade to time-slicing"
ok "allocatable 32"
agent_pod=$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=gpunode -o jsonpath='{.items[0].metadata.name}')
kubectl -n "$ns" logs -f "$agent_pod" -c agent --since=1s > "$state/logs/agent-uninstall.log" 2>&1 &
uninstall_log_pid=$!
t0=$(date +%s.%N)
helm uninstall gpunode -n "$ns" --wait --timeout 180s >"$state/logs/uninstall.log" 2>&1 || { cat "$state/logs/uninstall.log"; fail "helm uninstall"; }
t1=$(date +%s.%N)
kubectl -n "$ns" wait --for=delete pod -l app.kubernetes.io/instance=gpunode --timeout=60s >/dev/null 2>&1 || true
left=$(ls /var/lib/kubelet/device-plugins | grep -vE '^(kubelet\.sock|kubelet_internal_checkpoint|DEPRECATION)$' || true)
[ -z "$left" ] || fail "left in /var/lib/kubelet/device-plugins after uninstall: $left"
ok "helm uninstall in $(python3 -c "print(round($t1-$t0,1))") s; no plugin socket left"
ours=$(kubectl get node "$node" -o go-template='{{range $k, $v := .metadata.labels}}{{$k}}{{"\n"}}{{end}}' | grep -E '^(nvidia\.com|gpunode\.io)/' | grep -vx 'nvidia.com/gpu.present' || true)
[ -z "$ours" ] || fail "labels left on the Node after uninstall: $(printf '%s' "$ours" | tr '\n' ' ')"
[ -z "$(kubectl get node "$node" -o jsonpath='{.metadata.annotations.gpunode\.io/managed-labels}')" ] ||
  fail "the annotation gpunode.io/managed-labels is still on the Node"
[ "$(node_label nvidia.com/gpu.present)" = true ] || fail "uninstall removed nvidia.com/gpu.present, which gpunode did not set"
ok "no gpunode label left (nvidia.com/gpu.present, set before the install, kept)"
kill "$uninstall_log_pid" 2>/dev/null || true
[ ! -e /var/run/cdi/nvidia.yaml ] || { echo "--- the agent's log during the uninstall"; cat "$state/logs/agent-uninstall.log"
  echo "--- /var/run/cdi/nvidia.yaml: $(stat -c '%y' /var/run/cdi/nvidia.yaml)"; fail "/var/run/cdi/nvidia.yaml left after uninstall"; }
ok "no CDI spec left"
e2e_passed=1
step "all passed"
