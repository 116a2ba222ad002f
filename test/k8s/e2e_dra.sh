#!/usr/bin/env bash
# gpunode as a DRA driver on a real Kubernetes 1.36 (test/k8s/cluster.sh; only the GPUs are
# simulated): the chart in simulate mode (dgx-h200) with dra.enabled and the device plugin off.
#   1. helm install -> the node's ResourceSlice of gpu.nvidia.com: 8 devices gpu-0..gpu-7 with
#      NVIDIA's attributes (productName, driverVersion, memory); the DeviceClasses gpu.nvidia.com and
#      mig.nvidia.com (NVIDIA's names and CEL)
#   2. a pod with a one-GPU ResourceClaimTemplate sees exactly one /dev/nvidia<N> (the claim's CDI
#      spec, applied by containerd); a pod with two claims sees two distinct GPUs
#   3. CEL: productName and memory >= 100Gi selects; memory >= 1Ti stays Pending with the
#      scheduler's reason
#   4. a bad opaque config (resource.nvidia.com/v1beta1 GpuConfig with an unknown field): the pod
#      does not start and its events name the field
#   4b. the exporter labels a claim's GPU with its pod; the plugin's pod deleted under a pod with a
#      claim: the pod keeps running, its claim is
#      unprepared by the new plugin when it ends; 100 claims created and deleted at once leave no
#      claim spec and no checkpoint entry
#   4d. sharing from NVIDIA's opaque config: a TimeSlicing (Long) claim sets its GPU's time slice
#      (the node's nvidia-smi) and unprepare sets it back; an MPS claim's container gets the claim's
#      own control daemon (CUDA_MPS_PIPE_DIRECTORY, its control pipe); three pods sharing one
#      claim see the same GPU
#   4c. a pod asking for nvidia.com/gpu: 1 without a claim runs on one GPU through the
#      gpu.nvidia.com class's extendedResourceName (DRAExtendedResource, on in 1.36)
#   5. GPU 3 falls off the bus -> its device is tainted gpu.nvidia.com/gpu-lost and a claim only
#      gpu-3 satisfies (CEL on its uuid) stays Pending; back -> untainted, and such a claim runs
#   5b. the node becomes an a100-mig node (helm upgrade): its slice has the MIG devices, a claim of
#      the mig.nvidia.com class runs on one
#   6. helm uninstall -> no ResourceSlice of the driver, no claim spec left in /var/run/cdi
# Usage: test/k8s/e2e_dra.sh BUILD_DIR (a Release build tree: the image is built from it).
# Exit 77 (skipped) without Go or as non-root, unless CI=true: then those are failures.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
ns=gpunode-dra
# shellcheck source=e2e_lib.sh
. "$src/test/k8s/e2e_lib.sh"


step "1. helm install (simulate dgx-h200, dra.enabled, devicePlugin off) -> a ResourceSlice with 8 GPUs"
kubectl label node "$node" nvidia.com/gpu.present=true --overwrite >/dev/null
t0=$(date +%s.%N)
helm install gpunode "$src/deploy/helm/gpunode" -n "$ns" --create-namespace \
  --set simulate.enabled=true --set simulate.profile=dgx-h200 \
  --set image.repository=localhost/gpunode --set image.tag="$version" --set image.pullPolicy=Never \
  --set validator.interval=3s --set validator.retry=2s \
  --set dra.enabled=true --set devicePlugin.enabled=false --set dra.healthRecovery=5s \
  --set dra.kubeletRegistrarDir="$state/kubelet/plugins_registry" --set dra.kubeletPluginsDir="$state/kubelet/plugins" \
  --set exporter.podResourcesDir="$state/kubelet/pod-resources" --set exporter.collectInterval=2000 \
  >/dev/null || fail "helm install"
deadline=$((SECONDS + 120))
until [ "$(devices | wc -l)" = 8 ]; do
  [ $SECONDS -lt $deadline ] || fail "the node's ResourceSlices have $(devices | wc -l) devices, not 8, 120 s after helm install"
  sleep 0.5
done
t1=$(date +%s.%N)
names=$(devices | awk '{print $1}' | sort | tr '\n' ' ')
[ "$names" = "gpu-0 gpu-1 gpu-2 gpu-3 gpu-4 gpu-5 gpu-6 gpu-7 " ] || fail "device names: $names"
slice_json | python3 -c '
import json, sys
d = json.load(sys.stdin)["items"][0]["spec"]["devices"][0]
a, c = d["attributes"], d["capacity"]
assert a["productName"]["string"] == "NVIDIA H200", a
assert a["type"]["string"] == "gpu" and a["driverVersion"]["version"].startswith("580."), a
assert c["memory"]["value"] == "143771Mi", c
print("   device %s: %s, driver %s, memory %s, %d attributes" % (d["name"], a["productName"]["string"], a["driverVersion"]["version"], c["memory"]["value"], len(a)))
' || fail "the slice's attributes: $(slice_json | head -c 800)"
ok "8 devices gpu-0..gpu-7 $(python3 -c "print(round($t1-$t0,1))") s after helm install"
for c in gpu.nvidia.com mig.nvidia.com; do
  kubectl get deviceclass "$c" >/dev/null 2>&1 || fail "no DeviceClass $c"
done
ok "DeviceClasses gpu.nvidia.com, mig.nvidia.com"
deadline=$((SECONDS + 30))
until [ "$(kubectl get node "$node" -o go-template='{{index .metadata.labels "gpunode.io/dra.driver"}}')" = "$driver" ]; do
  [ $SECONDS -lt $deadline ] || fail "no gpunode.io/dra.driver=$driver label on the Node"
  sleep 0.5
done
fleet=$("$build/bin/gpunode" fleet --kubeconfig "$KUBECONFIG" -o json || true)
printf '%s' "$fleet" | python3 -c '
import json, sys
d = json.load(sys.stdin)
below = [f for f in d.get("findings", []) if f.get("id") == "below-capacity"]
assert not below, below
' || fail "gpunode fleet reports the DRA node below capacity: $(printf '%s' "$fleet" | head -c 600)"
ok "Node label gpunode.io/dra.driver=$driver; gpunode fleet does not count the node below capacity"

step "2. a one-GPU claim sees exactly one GPU; two claims see two distinct GPUs"
template one-gpu ""
pod one "$LIST" t:one-gpu
kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/one --timeout=120s >/dev/null ||
  fail "pod 'one' did not run: $(kubectl get pod one -o jsonpath='{.status.phase} {.status.conditions}')"
[ "$(gpus_of one | wc -w)" = 1 ] || fail "pod 'one' sees '$(gpus_of one)'"
ok "pod 'one' sees $(gpus_of one)"
template other-gpu ""
pod two "$LIST" t:one-gpu t:other-gpu
kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/two --timeout=120s >/dev/null || fail "pod 'two' did not run"
[ "$(gpus_of two | wc -w)" = 2 ] || fail "pod 'two' sees '$(gpus_of two)', not 2 distinct GPUs"
ok "pod 'two' (two claims) sees $(gpus_of two)"
ls /var/run/cdi | grep -q '^k8s.gpu.nvidia.com-claim_' || true

step "3. CEL selectors: productName and memory >= 100Gi run; memory >= 1Ti stays Pending"
template big "device.attributes[\"gpu.nvidia.com\"].productName == \"NVIDIA H200\" && device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"100Gi\")) >= 0"
pod big "$LIST" t:big
kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/big --timeout=120s >/dev/null || fail "pod 'big' did not run"
ok "pod 'big' (productName, memory >= 100Gi) sees $(gpus_of big)"
template huge "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"1Ti\")) >= 0"
pod huge "$LIST" t:huge
sleep 5
[ "$(kubectl get pod huge -o jsonpath='{.status.phase}')" = Pending ] || fail "pod 'huge' is not Pending"
why=$(kubectl get pod huge -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}')
[ -n "$why" ] || fail "pod 'huge' Pending without the scheduler's reason"
ok "pod 'huge' (memory >= 1Ti) Pending: $why"
kubectl delete pod huge --wait=false >/dev/null

step "4. a bad opaque config: the pod does not start, its events name the field"
template badcfg "" '{apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: TimeSlicing, timeSlicingConfig: {intervall: Long}}}'
pod badcfg "$LIST" t:badcfg
deadline=$((SECONDS + 90))
until kubectl get events --field-selector involvedObject.name=badcfg -o jsonpath='{.items[*].message}' | grep -q intervall; do
  [ $SECONDS -lt $deadline ] || fail "no event of pod 'badcfg' names the field: $(kubectl get events --field-selector involvedObject.name=badcfg -o jsonpath='{.items[*].message}')"
  sleep 1
done
ok "pod 'badcfg': $(kubectl get events --field-selector involvedObject.name=badcfg -o jsonpath='{.items[*].message}' | grep -o '[^;]*intervall[^;]*' | head -1 | cut -c1-200)"
kubectl delete pod badcfg one two big --wait=true >/dev/null

step "4b. the plugin restarted under a running pod: unprepared after the restart; 100 claims created and deleted quickly leave nothing"
pod long 'ls /dev | grep -E "^nvidia[0-9]+$"; sleep 600' t:one-gpu
kubectl wait --for=condition=Ready pod/long --timeout=120s >/dev/null || fail "pod 'long' did not start"
specs_before=$(ls /var/run/cdi | grep -c '^k8s.gpu.nvidia.com-claim_' || true)
[ "$specs_before" = 1 ] || fail "$specs_before claim specs while one claim is prepared"
# The exporter labels the claim's GPU with its pod (the kubelet's PodResources API reports DRA
# allocations: KubeletPodResourcesDynamicResources, GA in 1.36).
pod_ip=$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=gpunode -o jsonpath='{.items[0].status.podIP}')
long_gpu=$(kubectl logs long | grep -E '^nvidia[0-9]+$' | tr -dc '0-9')
deadline=$((SECONDS + 60))
until grep -q '^DCGM_FI_DEV_GPU_TEMP{.*pod="long"' < <(curl -s --max-time 2 "http://$pod_ip:9400/metrics"); do
  [ $SECONDS -lt $deadline ] || fail "no DCGM_FI_DEV_GPU_TEMP series of pod 'long' (its claim's GPU $long_gpu) 60 s after it started: $(curl -s --max-time 2 "http://$pod_ip:9400/metrics" | grep '^DCGM_FI_DEV_GPU_TEMP' | head -3)"
  sleep 1
done
series=$(curl -s --max-time 2 "http://$pod_ip:9400/metrics" | grep '^DCGM_FI_DEV_GPU_TEMP{.*pod="long"')
echo "$series" | grep -q "gpu=\"$long_gpu\"" || fail "pod 'long' labels another GPU than its claim's ($long_gpu): $series"
ok "the exporter labels GPU $long_gpu with pod 'long' (a DRA claim): $(echo "$series" | grep -o 'namespace="[^"]*",pod="long"[^,}]*' | head -1)"
kubectl -n "$ns" delete pod -l app.kubernetes.io/instance=gpunode --wait=true >/dev/null
kubectl -n "$ns" rollout status daemonset/gpunode --timeout=120s >/dev/null || fail "the gpunode pod did not come back"
[ "$(kubectl get pod long -o jsonpath='{.status.phase}')" = Running ] || fail "pod 'long' did not survive the plugin's restart"
kubectl delete pod long --wait=true --timeout=90s >/dev/null || fail "pod 'long' not deleted"
deadline=$((SECONDS + 60))
until [ "$(ls /var/run/cdi | grep -c '^k8s.gpu.nvidia.com-claim_' || true)" = 0 ]; do
  [ $SECONDS -lt $deadline ] || fail "the claim spec of pod 'long' stayed after its deletion across a plugin restart"
  sleep 0.5
done
ok "pod 'long' ran through a plugin restart; its claim unprepared by the new plugin"
for i in $(seq 100); do pod_yaml "q$i" 'true' t:one-gpu; echo ---; done | kubectl apply -f - >/dev/null
kubectl delete pod $(printf 'q%s ' $(seq 100)) --wait=false >/dev/null 2>&1 || true
deadline=$((SECONDS + 240))
until [ -z "$(kubectl get pods -o name | grep '^pod/q' || true)" ] && [ -z "$(kubectl get resourceclaims -o name 2>/dev/null | grep 'q[0-9]*-one-gpu' || true)" ]; do
  [ $SECONDS -lt $deadline ] || fail "pods or claims of the 100 left: $(kubectl get pods,resourceclaims -o name | tr '\n' ' ')"
  sleep 1
done
left=$(ls /var/run/cdi | grep -c '^k8s.gpu.nvidia.com-claim_' || true)
[ "$left" = 0 ] || fail "$left claim specs left after 100 claims created and deleted"
ckpt=$state/kubelet/plugins/$driver/gpunode-checkpoint.json
[ -f "$ckpt" ] || fail "no checkpoint at $ckpt"
python3 -c "import json,sys; sys.exit(len(json.load(open(sys.argv[1]))['data']['claims']) != 0)" "$ckpt" ||
  fail "the checkpoint still holds claims after 100 were created and deleted: $(head -c 400 "$ckpt")"
ok "100 claims created and deleted at once: no claim spec left, the checkpoint empty"

step "4c. nvidia.com/gpu: 1 without a claim, served by DRA (the class's extendedResourceName)"
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: ext}
spec:
  restartPolicy: Never
  containers:
    - name: ext
      image: gpunode.test/busybox:1
      imagePullPolicy: Never
      command: [sh, -c, '$LIST']
      resources: {limits: {nvidia.com/gpu: 1}}
YAML
if kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/ext --timeout=90s >/dev/null 2>&1; then
  [ "$(gpus_of ext | wc -w)" = 1 ] || fail "pod 'ext' sees '$(gpus_of ext)'"
  ok "pod 'ext' (nvidia.com/gpu: 1, no claim) sees $(gpus_of ext)"
else
  fail "pod 'ext' (nvidia.com/gpu: 1) did not run: $(kubectl get pod ext -o jsonpath='{.status.phase} {.status.conditions[*].message}')"
fi
kubectl delete pod ext --wait=true >/dev/null

step "4d. sharing: TimeSlicing sets the GPU's time slice; MPS gives the claim its own daemon; one claim shared by 3 pods"
nvsmi() { LD_PRELOAD=$build/bin/libgpunode-simnvml.so GPUNODE_SIM_PROFILE=/var/lib/gpunode/sim/profile.yaml /var/lib/gpunode/sim/usr/bin/nvidia-smi "$@"; }
nvsmi -L >/dev/null || fail "the simulated node's nvidia-smi does not run: $(nvsmi -L 2>&1 | head -3)"
template ts "" '{apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: Long}}}'
pod ts "$LIST; sleep 600" t:ts
kubectl wait --for=condition=Ready pod/ts --timeout=120s >/dev/null ||
  fail "pod 'ts' did not start: $(kubectl get events --field-selector involvedObject.name=ts -o jsonpath='{.items[*].message}' | tail -c 400)"
ts_gpu=$(gpus_of ts | tr -dc '0-9')
slice=$(nvsmi compute-policy -i "$ts_gpu" -l | sed -n 's/.*Timeslice \([0-9]\).*/\1/p')
[ "$slice" = 3 ] || fail "GPU $ts_gpu has time slice '$slice' under a Long claim, not 3"
kubectl delete pod ts --wait=true >/dev/null
deadline=$((SECONDS + 60))
until [ "$(nvsmi compute-policy -i "$ts_gpu" -l | sed -n 's/.*Timeslice \([0-9]\).*/\1/p')" = 0 ]; do
  [ $SECONDS -lt $deadline ] || fail "GPU $ts_gpu kept its Long time slice after the claim's unprepare"
  sleep 0.5
done
ok "GPU $ts_gpu: time slice 3 (Long) while the claim was prepared, 0 (Default) after"
template mps "" '{apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 50}}}'
pod mps 'echo pipe=$CUDA_MPS_PIPE_DIRECTORY; ls /tmp/nvidia-mps; ls /dev | grep -E "^nvidia[0-9]+$"' t:mps
kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/mps --timeout=120s >/dev/null ||
  fail "pod 'mps' did not run: $(kubectl get events --field-selector involvedObject.name=mps -o jsonpath='{.items[*].message}' | tail -c 400)"
out=$(kubectl logs mps)
echo "$out" | grep -q '^pipe=/tmp/nvidia-mps$' || fail "pod 'mps' has no CUDA_MPS_PIPE_DIRECTORY: $out"
echo "$out" | grep -q '^control$' || fail "pod 'mps' sees no MPS control pipe in /tmp/nvidia-mps: $out"
kubectl delete pod mps --wait=true >/dev/null
deadline=$((SECONDS + 60))
until [ "$(ls "$state/kubelet/plugins/$driver/mps" 2>/dev/null | wc -l)" = 0 ]; do
  [ $SECONDS -lt $deadline ] || fail "the MPS claim's folder stayed after its unprepare: $(ls "$state/kubelet/plugins/$driver/mps")"
  sleep 0.5
done
ok "pod 'mps' ($(echo "$out" | grep -E '^nvidia[0-9]+$')): CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps with its daemon's control pipe; its folder gone after unprepare"
claim shared
for i in 1 2 3; do pod "share$i" "$LIST" c:shared; done
for i in 1 2 3; do
  kubectl wait --for=jsonpath='{.status.phase}'=Succeeded "pod/share$i" --timeout=120s >/dev/null || fail "pod 'share$i' did not run"
done
s1=$(gpus_of share1)
[ "$(echo "$s1" | wc -w)" = 1 ] && [ "$(gpus_of share2)" = "$s1" ] && [ "$(gpus_of share3)" = "$s1" ] ||
  fail "3 pods sharing one claim see '$s1' '$(gpus_of share2)' '$(gpus_of share3)'"
ok "3 pods sharing one claim all see $s1"
kubectl delete pod share1 share2 share3 --wait=true >/dev/null
kubectl delete resourceclaim shared --wait=true >/dev/null

step "5. GPU 3 falls off the bus -> gpu-3 tainted gpu.nvidia.com/gpu-lost, a claim for it waits; back -> untainted, it runs"
profile=/var/lib/gpunode/sim/profile.yaml
[ -w "$profile" ] || fail "no simulated profile at $profile"
cp "$profile" "$state/profile.orig"
sed 's/{bus_id: "0000:5d:00.0"/{lost: true, bus_id: "0000:5d:00.0"/' "$state/profile.orig" > "$profile.tmp"
grep -q 'lost: true' "$profile.tmp" || fail "could not mark GPU 3 lost in $profile"
mv "$profile.tmp" "$profile"
t0=$(date +%s.%N)
deadline=$((SECONDS + 30))
until devices | grep -q '^gpu-3 .*gpu.nvidia.com/gpu-lost'; do
  [ $SECONDS -lt $deadline ] || fail "gpu-3 not tainted 30 s after the GPU was lost: $(devices | tr '\n' ';')"
  sleep 0.2
done
t1=$(date +%s.%N)
ok "gpu-3 tainted gpu.nvidia.com/gpu-lost $(python3 -c "print(round($t1-$t0,1))") s after the loss; others: $(devices | grep -vc gpu-lost) untainted"
gpu3_uuid=$(slice_json | python3 -c '
import json, sys
for s in json.load(sys.stdin)["items"]:
    for d in s["spec"].get("devices", []):
        if d["name"] == "gpu-3": print(d["attributes"]["uuid"]["string"])' | head -1)
[ -n "$gpu3_uuid" ] || fail "gpu-3 has no uuid attribute while tainted"
template on-gpu3 "device.attributes[\"gpu.nvidia.com\"].uuid == \"$gpu3_uuid\""
pod gpu3 "$LIST" t:on-gpu3
sleep 5
[ "$(kubectl get pod gpu3 -o jsonpath='{.status.phase}')" = Pending ] ||
  fail "pod 'gpu3' (a claim only gpu-3 satisfies) is $(kubectl get pod gpu3 -o jsonpath='{.status.phase}') while gpu-3 is tainted"
ok "pod 'gpu3' (a claim only gpu-3 satisfies) Pending while it is tainted: $(kubectl get pod gpu3 -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}' | cut -c1-120)"
cp "$state/profile.orig" "$profile.tmp" && mv "$profile.tmp" "$profile"
deadline=$((SECONDS + 60))
until [ "$(devices | grep -c ' -$')" = 8 ]; do  # all 8 published again, none tainted
  [ $SECONDS -lt $deadline ] || fail "gpu-3 not back untainted after it came back: $(devices | tr '\n' ';')"
  sleep 1
done
ok "gpu-3 untainted again after the quiet period (dra.healthRecovery=5s)"
# A new pod with that claim now (the scheduler does not look at the Pending one again at once: a
# ResourceSlice's taint going does not requeue it; it retries within its 5 min flush of
# unschedulable pods).
kubectl delete pod gpu3 --wait=true >/dev/null
pod gpu3b "$LIST" t:on-gpu3
kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/gpu3b --timeout=120s >/dev/null ||
  fail "pod 'gpu3b' did not run after gpu-3 recovered: $(kubectl get pod gpu3b -o jsonpath='{.status.phase} {.status.conditions[*].message}'); claims allocated: $(kubectl get resourceclaims -A -o jsonpath='{range .items[?(@.status.allocation)]}{.metadata.name}={.status.allocation.devices.results[*].device} {end}')"
ok "a new pod with that claim runs on $(gpus_of gpu3b) once gpu-3 is untainted; claims allocated now: $(kubectl get resourceclaims -A -o jsonpath='{range .items[?(@.status.allocation)]}{.metadata.name}={.status.allocation.devices.results[*].device} {end}')"
kubectl delete pod gpu3b --wait=true >/dev/null

step "5b. an a100-mig node (helm upgrade): its MIG devices in the slice; a mig.nvidia.com claim runs on one"
helm upgrade gpunode "$src/deploy/helm/gpunode" -n "$ns" --reuse-values --set simulate.profile=a100-mig >/dev/null ||
  fail "helm upgrade to a100-mig"
kubectl -n "$ns" rollout status daemonset/gpunode --timeout=180s >/dev/null || fail "the a100-mig gpunode pod did not start"
deadline=$((SECONDS + 120))
until devices | grep -q -- '-mig-'; do
  [ $SECONDS -lt $deadline ] || fail "no MIG device in the slices 120 s after the upgrade: $(devices | tr '\n' ';')"
  sleep 0.5
done
migs=$(devices | awk '$1 ~ /-mig-/ {print $1}')
ok "MIG devices: $(echo "$migs" | wc -l) ($(echo "$migs" | head -3 | tr '\n' ' ')...); full GPUs: $(devices | awk '$1 !~ /-mig-/' | wc -l)"
kubectl apply -f - >/dev/null <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-mig}
spec:
  spec:
    devices:
      requests:
        - name: mig
          exactly: {deviceClassName: mig.nvidia.com}
YAML
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: mig}
spec:
  restartPolicy: Never
  resourceClaims: [{name: mig, resourceClaimTemplateName: one-mig}]
  containers:
    - name: mig
      image: gpunode.test/busybox:1
      imagePullPolicy: Never
      command: [sh, -c, 'ls /dev | grep -E "^nvidia[0-9]+$"; ls /dev/nvidia-caps']
      resources: {claims: [{name: mig}]}
YAML
kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/mig --timeout=120s >/dev/null ||
  fail "pod 'mig' did not run: $(kubectl get events --field-selector involvedObject.name=mig -o jsonpath='{.items[*].message}' | tail -c 400)"
[ "$(kubectl logs mig | grep -c '^nvidia-cap[0-9]*$')" -ge 1 ] ||
  fail "pod 'mig' sees no MIG capability node: $(kubectl logs mig | tr '\n' ' ')"
mig_claim=$(kubectl get pod mig -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
ok "pod 'mig' runs on $(kubectl get resourceclaim "$mig_claim" -o jsonpath='{.status.allocation.devices.results[0].device}' 2>/dev/null) and sees $(kubectl logs mig | tr '\n' ' ')"
kubectl delete pod mig --wait=true >/dev/null

step "6. helm uninstall -> no ResourceSlice, no claim spec"
helm uninstall gpunode -n "$ns" --wait --timeout 180s >"$state/logs/uninstall.log" 2>&1 || { cat "$state/logs/uninstall.log"; fail "helm uninstall"; }
deadline=$((SECONDS + 30))
until [ "$(devices | wc -l)" = 0 ]; do
  [ $SECONDS -lt $deadline ] || fail "ResourceSlices left after uninstall: $(devices | tr '\n' ';')"
  sleep 0.5
done
left=$(ls /var/run/cdi | grep '^k8s.gpu.nvidia.com-claim_' || true)
[ -z "$left" ] || fail "claim specs left after uninstall: $left"
ok "no ResourceSlice, no claim spec left"
e2e_passed=1
step "all passed"
