#!/usr/bin/env bash
# gpunode's DRA driver and NVIDIA's (gpu-kubelet-plugin, test/peers/versions.env) side by side on
# the same simulated dgx-h200 node of a real Kubernetes 1.36 (test/k8s/cluster.sh), one after the
# other with the same driver name gpu.nvidia.com, both as host processes with the same view of the
# node (test/peers/plugin_ns.sh: its /sys, /proc/driver, /dev; the host's /var/run/cdi, where
# containerd reads the claims' specs) and the same DeviceClasses (the chart's). For each driver:
#   1. started -> its ResourceSlice of 8 devices (the time it took); the slices are compared
#      afterwards: every difference in device names, attributes and capacities must be listed in
#      test/peers/dra_differences.txt with its reason (an unlisted one fails, a stale line too)
#   2. the same claims: a one-GPU claim sees exactly one GPU; two claims two distinct GPUs; CEL on
#      productName and memory; three pods sharing one ResourceClaim see the same GPU; a TimeSlicing
#      (Long) claim sets its GPU's time slice (the node's nvidia-smi: the simulated driver's), and
#      what is left after its unprepare (NVIDIA with its TimeSlicingSettings gate on)
#   3. NodePrepareResources/NodeUnprepareResources at the gRPC level (test/tools/dra_kubelet
#      --socket on the node service the kubelet registered): CLAIMS ResourceClaims allocated through
#      the real API server as the scheduler writes it, each prepared and unprepared in turn
#   4. claim created -> pod Running for PODS pods one after the other (a ResourceClaimTemplate per
#      pod), from the pod's ADDED event to its Running event in one `kubectl get --watch`
#   5. GPU 3 falls off the bus (the simulated profile) -> the time until the slice shows a taint,
#      which devices are tainted, and whether the taint goes when the GPU is back (NVIDIA with
#      its NVMLDeviceHealthCheck gate on); behaviour that differs is listed like the slices' fields
#   6. idle: RSS and CPU over 10 s with nothing to do
# Numbers go to RESULTS (a JSON file) when DRA_PEERS_RESULTS names one: benchmarks/dra_bench.sh
# runs this suite with 20 pods and 100 claims and writes benchmarks/results/dra-peers-*.md.
#
#   test/peers/dra_test.sh BUILD_DIR [DRA_KUBELET]
# BUILD_DIR: a Release tree (gpunode, gpunode_simnvml); DRA_KUBELET: test/tools/dra_kubelet (default:
# the one in BUILD_DIR/bin).
# Environment: DRA_PEERS_PODS (default 5), DRA_PEERS_CLAIMS (default 20), DRA_PEERS_RESULTS.
# Needs root, Go (the cluster and NVIDIA's plugin are built from their modules), podman (the test
# images). Exit 77 (skipped) without them, unless CI=true: then that is a failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
pods_n=${DRA_PEERS_PODS:-5}
claims_n=${DRA_PEERS_CLAIMS:-20}
results=${DRA_PEERS_RESULTS:-}
# shellcheck source=common.sh
. "$here/common.sh"
[ "$(id -u)" = 0 ] || peers_skip "needs root (the test cluster, a private mount namespace)"
peers_setup "$(realpath -m "${1:-$src/build-rel}")" gpu-kubelet-plugin
nvidia_plugin=$PEERS_BIN/gpu-kubelet-plugin
[ -x "$nvidia_plugin" ] || { echo "FAIL: $nvidia_plugin was not built by test/peers/build.sh" >&2; exit 1; }
dra_kubelet=${2:-$(dirname "$GPUNODE")/dra_kubelet}
[ -x "$dra_kubelet" ] || peers_skip "no $dra_kubelet (cmake --build BUILD --target dra_kubelet, or name it)"
peers_work=$WORK
ns=gpunode-dra-peers
E2E_IMAGE=0
# shellcheck source=../k8s/e2e_lib.sh
. "$src/test/k8s/e2e_lib.sh"
plugin_pid=
stop_plugin() {
  [ -n "$plugin_pid" ] || return 0
  kill -TERM "$plugin_pid" 2>/dev/null || true
  local i
  for i in $(seq 100); do kill -0 "$plugin_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$plugin_pid" 2>/dev/null || true
  wait "$plugin_pid" 2>/dev/null || true
  plugin_pid=
}
trap 'stop_plugin; cleanup; rm -rf "$peers_work"' EXIT

registrar=$state/kubelet/plugins_registry
plugins=$state/kubelet/plugins
socket=$plugins/$driver/dra.sock
nodedir=$WORK/node
root=$nodedir/root
profile=$nodedir/profile.yaml
"$GPUNODE" sim hostroot dgx-h200 "$root" --device-nodes --profile-file "$profile" -q
# NVIDIA's plugin loads libnvidia-ml.so.1 from its driver root: make that the simulated one.
cp "$SIM_LIB" "$(readlink -f "$root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")"
cp "$profile" "$nodedir/profile.orig"
# The chart's DeviceClasses (NVIDIA's names and CEL), for both drivers.
helm template gpunode "$src/deploy/helm/gpunode" --set dra.enabled=true --set devicePlugin.enabled=false \
  --show-only templates/deviceclass.yaml | kubectl apply -f - >/dev/null || fail "DeviceClasses"

start_gpunode() {
  PLUGIN_NS_HOST_CDI=1 "$here/plugin_ns.sh" "$root" -- env GPUNODE_SIM_PROFILE="$profile" \
    "$GPUNODE" --nvml-library "$SIM_LIB" --cuda-library "$SIM_LIB" dra-plugin --node-name "$node" \
    --kubeconfig "$KUBECONFIG" --cdi-root /var/run/cdi --nvidia-driver-root "$root" --disable-hook all \
    --kubelet-registrar-directory-path "$registrar" --kubelet-plugins-directory-path "$plugins" \
    --health-recovery 5s >"$WORK/gpunode.log" 2>&1 &
  plugin_pid=$!
}
start_nvidia() {
  # NVIDIA's hooks (nvidia-cdi-hook) are not on this machine: /bin/true stands for them.
  PLUGIN_NS_HOST_CDI=1 "$here/plugin_ns.sh" "$root" -- env GPUNODE_SIM_PROFILE="$profile" \
    "$nvidia_plugin" --node-name "$node" --namespace default --image-name none \
    --kubeconfig "$KUBECONFIG" --cdi-root /var/run/cdi --nvidia-driver-root "$root" \
    --container-driver-root "$root" --nvidia-cdi-hook-path /bin/true \
    --kubelet-registrar-directory-path "$registrar" --kubelet-plugins-directory-path "$plugins" \
    --healthcheck-port -1 --feature-gates NVMLDeviceHealthCheck=true,TimeSlicingSettings=true >"$WORK/nvidia.log" 2>&1 &
  plugin_pid=$!
}

now() { date +%s.%N; }
watch_pid=
watch_log() {  # API-PATH FILE: the watch's events in FILE, each JSON line after its arrival time
  kubectl get --raw "$1?watch=1" 2>/dev/null |
    python3 -u -c 'import sys, time
for l in sys.stdin: print("%.4f %s" % (time.time(), l.strip()), flush=True)' >"$2" &
  watch_pid=$!
}
stop_watch_log() {
  pkill -f "kubectl get --raw /.*watch=1" 2>/dev/null || true
  wait "$watch_pid" 2>/dev/null || true
}
since() { python3 -c "print(round(($(now) - $1) * 1000))"; }
# The time slice of GPU N as the node's nvidia-smi reports it (the simulated driver's program).
timeslice_of() {
  LD_PRELOAD=$SIM_LIB GPUNODE_SIM_PROFILE=$profile "$root/usr/bin/nvidia-smi" compute-policy -i "$1" -l |
    sed -n 's/^GPU [0-9]* (.*): Timeslice \([0-9]\).*/\1/p'
}
succeeded() {  # POD...
  local p
  for p in "$@"; do
    kubectl wait --for=jsonpath='{.status.phase}'=Succeeded "pod/$p" --timeout=120s >/dev/null ||
      fail "$who: pod '$p' did not run: $(kubectl get pod "$p" -o jsonpath='{.status.phase} {.status.conditions[*].message}') $(kubectl get events --field-selector involvedObject.name="$p" -o jsonpath='{.items[*].message}' | tail -c 400)"
  done
}

# One driver's run; its numbers go to $WORK/<who>.json, its slices to $WORK/<who>-slices.json.
run_driver() {
  who=$1
  step "$who: start -> a ResourceSlice with 8 devices"
  local t0 t
  t0=$(now)
  "start_$who"
  deadline=$((SECONDS + 120))
  until [ "$(devices | wc -l)" = 8 ]; do
    [ $SECONDS -lt $deadline ] || { tail -20 "$WORK/$who.log"; fail "$who: $(devices | wc -l) devices, not 8, 120 s after start"; }
    kill -0 "$plugin_pid" 2>/dev/null || { tail -20 "$WORK/$who.log"; fail "$who: the plugin exited"; }
    sleep 0.2
  done
  local slice_ms
  slice_ms=$(since "$t0")
  deadline=$((SECONDS + 30))
  until [ -S "$socket" ]; do
    [ $SECONDS -lt $deadline ] || fail "$who: no node service socket at $socket"
    sleep 0.2
  done
  slice_json >"$WORK/$who-slices.json"
  ok "8 devices $slice_ms ms after start"

  step "$who: the same claims"
  template one-gpu
  template other-gpu
  template big 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H200" && device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("100Gi")) >= 0'
  pod one "$LIST" t:one-gpu
  pod two "$LIST" t:one-gpu t:other-gpu
  pod big "$LIST" t:big
  claim shared
  for i in 1 2 3; do pod "share$i" "$LIST" c:shared; done
  succeeded one two big share1 share2 share3
  [ "$(gpus_of one | wc -w)" = 1 ] || fail "$who: pod 'one' sees '$(gpus_of one)'"
  [ "$(gpus_of two | wc -w)" = 2 ] || fail "$who: pod 'two' sees '$(gpus_of two)', not 2 distinct GPUs"
  [ "$(gpus_of big | wc -w)" = 1 ] || fail "$who: pod 'big' sees '$(gpus_of big)'"
  local s1
  s1=$(gpus_of share1)
  [ "$(echo "$s1" | wc -w)" = 1 ] && [ "$(gpus_of share2)" = "$s1" ] && [ "$(gpus_of share3)" = "$s1" ] ||
    fail "$who: pods sharing one claim see '$s1' '$(gpus_of share2)' '$(gpus_of share3)'"
  ok "one: $(gpus_of one)| two: $(gpus_of two)| CEL: $(gpus_of big)| 3 pods sharing a claim: $s1"
  kubectl delete pod one two big share1 share2 share3 --wait=true >/dev/null
  kubectl delete resourceclaim shared --wait=true >/dev/null

  step "$who: a TimeSlicing claim (interval Long) sets its GPU's time slice"
  template ts "" '{apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: Long}}}'
  pod ts "$LIST; sleep 600" t:ts
  kubectl wait --for=condition=Ready pod/ts --timeout=120s >/dev/null ||
    fail "$who: pod 'ts' did not start: $(kubectl get events --field-selector involvedObject.name=ts -o jsonpath='{.items[*].message}' | tail -c 400)"
  deadline=$((SECONDS + 10))
  until [ -n "$(gpus_of ts)" ]; do [ $SECONDS -lt $deadline ] || break; sleep 0.2; done
  local ts_gpu ts_during ts_after
  ts_gpu=$(gpus_of ts | tr -dc '0-9')
  [ -n "$ts_gpu" ] || fail "$who: pod 'ts' sees no GPU"
  ts_during=$(timeslice_of "$ts_gpu")
  [ "$ts_during" = 3 ] || fail "$who: GPU $ts_gpu has time slice '$ts_during' while the Long claim is prepared, not 3"
  kubectl delete pod ts --wait=true >/dev/null
  deadline=$((SECONDS + 30))  # the claim goes with its pod; unprepared a moment later
  while [ $SECONDS -lt $deadline ] && ls /var/run/cdi | grep -q '^k8s.gpu.nvidia.com-claim_'; do sleep 0.2; done
  ts_after=$(timeslice_of "$ts_gpu")
  echo "$ts_during $ts_after" >"$WORK/$who-timeslice.txt"
  ok "GPU $ts_gpu: time slice $ts_during while prepared, $ts_after after the claim was unprepared"
  # Leave the GPU as it was for the other driver.
  LD_PRELOAD=$SIM_LIB GPUNODE_SIM_PROFILE=$profile "$root/usr/bin/nvidia-smi" compute-policy -i "$ts_gpu" --set-timeslice 0 >/dev/null

  step "$who: NodePrepareResources/NodeUnprepareResources of $claims_n claims (gRPC, the kubelet's socket)"
  local i docs="" uid
  for i in $(seq "$claims_n"); do
    docs+="---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: bench-$i}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]}}
"
  done
  printf '%s' "$docs" | kubectl apply -f - >/dev/null
  : >"$WORK/claims.txt"
  for i in $(seq "$claims_n"); do
    kubectl patch resourceclaim "bench-$i" --subresource=status --type=merge -p \
      "{\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpu\",\"driver\":\"$driver\",\"pool\":\"$node\",\"device\":\"gpu-$(( i % 8 ))\"}]}}}}" >/dev/null ||
      fail "$who: allocating claim bench-$i"
    uid=$(kubectl get resourceclaim "bench-$i" -o jsonpath='{.metadata.uid}')
    echo "$uid default bench-$i" >>"$WORK/claims.txt"
  done
  "$dra_kubelet" --socket "$socket" --claims "$WORK/claims.txt" >"$WORK/$who-grpc.json" ||
    fail "$who: $(cat "$WORK/$who-grpc.json")"
  ok "$(python3 -c "
import json; b = json.load(open('$WORK/$who-grpc.json'))
print('prepare p50 %.1f ms p99 %.1f ms; unprepare p50 %.1f ms p99 %.1f ms' % (b['prepare_ms']['p50'], b['prepare_ms']['p99'], b['unprepare_ms']['p50'], b['unprepare_ms']['p99']))")"
  kubectl delete resourceclaims --all --wait=true >/dev/null

  step "$who: claim created -> pod Running, $pods_n pods one after the other"
  watch_log /api/v1/namespaces/default/pods "$WORK/$who-watch.log"
  sleep 1
  for i in $(seq "$pods_n"); do
    pod "run$i" 'sleep 600' t:one-gpu
    kubectl wait --for=jsonpath='{.status.phase}'=Running "pod/run$i" --timeout=120s >/dev/null ||
      fail "$who: pod 'run$i' not Running: $(kubectl get events --field-selector involvedObject.name="run$i" -o jsonpath='{.items[*].message}' | tail -c 400)"
    kubectl delete pod "run$i" --wait=true >/dev/null
  done
  sleep 1
  stop_watch_log
  python3 - "$WORK/$who-watch.log" "$pods_n" >"$WORK/$who-running.json" <<'PY' || fail "$who: pod start times: $(tail -5 "$WORK/$who-watch.log")"
import json, sys
added, running = {}, {}
for line in open(sys.argv[1]):
    t, _, event = line.partition(" ")
    e = json.loads(event)
    t, typ, name = float(t), e["type"], e["object"]["metadata"]["name"]
    phase = e["object"].get("status", {}).get("phase", "")
    if not name.startswith("run"):
        continue
    if typ == "ADDED":
        added.setdefault(name, t)
    if phase == "Running":
        running.setdefault(name, t)
ms = sorted((running[n] - added[n]) * 1000 for n in added if n in running)
assert len(ms) == int(sys.argv[2]), (len(ms), sys.argv[2])
pct = lambda q: ms[min(len(ms) - 1, int(q * (len(ms) - 1) + 0.5))]
print(json.dumps({"n": len(ms), "p50": pct(0.5), "p99": pct(0.99), "max": ms[-1]}))
PY
  ok "$(python3 -c "import json; b = json.load(open('$WORK/$who-running.json')); print('claim -> Running p50 %.0f ms, p99 %.0f ms (n=%d)' % (b['p50'], b['p99'], b['n']))")"

  step "$who: GPU 3 falls off the bus"
  sed 's/{bus_id: "0000:5d:00.0"/{lost: true, bus_id: "0000:5d:00.0"/' "$nodedir/profile.orig" >"$profile.tmp"
  grep -q 'lost: true' "$profile.tmp" || fail "could not mark GPU 3 lost in $profile"
  # The slices' changes, timestamped as they arrive: "<time> <event> <slice> <device>=<taint keys>;..."
  watch_log /apis/resource.k8s.io/v1/resourceslices "$WORK/$who-slices.log"
  sleep 1
  local lost back taint_ms=null tainted="" untaint=null
  lost=$(now)
  mv "$profile.tmp" "$profile"
  deadline=$((SECONDS + 30))
  until devices | grep -q '^gpu-3 [^-]'; do [ $SECONDS -lt $deadline ] || break; sleep 0.2; done
  tainted=$(devices | awk '$2 != "-" {printf "%s(%s) ", $1, $2}')
  cp "$nodedir/profile.orig" "$profile.tmp"
  back=$(now)
  mv "$profile.tmp" "$profile"
  deadline=$((SECONDS + 30))
  until [ "$(devices | grep -c ' -$')" = 8 ]; do [ $SECONDS -lt $deadline ] || break; sleep 0.2; done
  sleep 0.5
  stop_watch_log
  read -r taint_ms untaint < <(python3 - "$WORK/$who-slices.log" "$lost" "$back" <<'PY'
import json, sys
lost, back = float(sys.argv[2]), float(sys.argv[3])
taint = untaint = "null"
slices = {}  # name -> its devices' taint keys, as of the event
for line in open(sys.argv[1]):
    t, _, event = line.partition(" ")
    t, e = float(t), json.loads(event)
    name = e["object"]["metadata"]["name"]
    if e["type"] == "DELETED":
        slices.pop(name, None)
    else:
        slices[name] = {d["name"]: ",".join(x["key"] for x in d.get("taints", [])) for d in e["object"]["spec"].get("devices", [])}
    devs = {k: v for s in slices.values() for k, v in s.items()}
    if taint == "null" and lost <= t < back and devs.get("gpu-3"):
        taint = "%.0f" % ((t - lost) * 1000)
    if untaint == "null" and t >= back and len(devs) == 8 and not any(devs.values()):
        untaint = "%.0f" % ((t - back) * 1000)
print(taint, untaint)
PY
)
  ok "gpu-3 tainted ${taint_ms} ms after the loss (${tainted:-none}); untainted ${untaint} ms after it came back"

  step "$who: idle RSS and CPU over 10 s"
  # plugin_ns.sh, unshare and env each exec the next: the plugin runs as $plugin_pid itself.
  local pid=$plugin_pid ticks0 ticks1 rss hz
  hz=$(getconf CLK_TCK)
  ticks0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  sleep 10
  ticks1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
  ok "RSS $((rss / 1024)) MiB, CPU $(python3 -c "print(round(($ticks1 - $ticks0) / $hz / 10 * 100, 2))") % idle ($(readlink "/proc/$pid/exe" | xargs basename))"
  python3 - "$WORK/$who.json" <<PY
import json, sys
null = None
json.dump({"driver": "$who", "slice_ms": $slice_ms, "grpc": json.load(open("$WORK/$who-grpc.json")),
           "running": json.load(open("$WORK/$who-running.json")), "gpu_lost_taint_ms": $taint_ms,
           "tainted": "$tainted".split(), "untaint_ms": $untaint, "rss_mib": round($rss / 1024, 1),
           "idle_cpu_percent": round(($ticks1 - $ticks0) / $hz / 10 * 100, 2)}, open(sys.argv[1], "w"))
PY

  step "$who: stopped; its slices removed"
  stop_plugin
  kubectl delete pods --all --wait=true >/dev/null 2>&1 || true
  kubectl delete resourceclaimtemplates --all >/dev/null 2>&1 || true
  kubectl delete resourceslices --field-selector "spec.driver=$driver" >/dev/null 2>&1 || true
  rm -f /var/run/cdi/k8s.gpu.nvidia.com-claim_*
  rm -rf "${plugins:?}/$driver"
}

run_driver gpunode
run_driver nvidia
# Kept for a look after the run (the cluster's state folder, removed by the next cluster up).
mkdir -p "$state/dra-peers" && cp "$WORK"/*-slices.json "$WORK"/*.log "$state/dra-peers/" 2>/dev/null || true

step "slices compared (test/peers/dra_differences.txt)"
python3 "$here/dra_compare.py" "$WORK/gpunode-slices.json" "$WORK/nvidia-slices.json" >"$WORK/found.tsv" ||
  fail "dra_compare.py"
# Behaviour seen above, where the two differ (case "claims" and "health").
python3 - "$WORK" >>"$WORK/found.tsv" <<'PY'
import json, sys
w = sys.argv[1]
g, n = json.load(open(w + "/gpunode.json")), json.load(open(w + "/nvidia.json"))
gt, nt = open(w + "/gpunode-timeslice.txt").read().split(), open(w + "/nvidia-timeslice.txt").read().split()
if gt[0] != nt[0]:
    print(f"claims\ttime slice while prepared\tgpunode {gt[0]}, NVIDIA {nt[0]}")
if gt[1] != nt[1]:
    print(f"claims\ttime slice after unprepare\tgpunode {gt[1]}, NVIDIA {nt[1]}")
if sorted(g["tainted"]) != sorted(n["tainted"]):
    print(f"health\ttainted when GPU 3 is lost\tgpunode {' '.join(sorted(g['tainted']))}; NVIDIA {' '.join(sorted(n['tainted']))}")
if (g["untaint_ms"] is None) != (n["untaint_ms"] is None):
    print(f"health\tuntainted when GPU 3 is back\tgpunode after {g['untaint_ms']} ms, NVIDIA after {n['untaint_ms']} ms (None: not within 30 s)")
PY
cut -f2- "$WORK/found.tsv" | sed 's/^/   /'
python3 "$here/expect_differences.py" "$here/dra_differences.txt" "$WORK/found.tsv" || fail "slice differences"
ok "every difference is listed"
if [ -n "$results" ]; then
  python3 -c "import json; json.dump({'gpunode': json.load(open('$WORK/gpunode.json')), 'nvidia': json.load(open('$WORK/nvidia.json')), 'pods': $pods_n, 'claims': $claims_n}, open('$results', 'w'), indent=1)"
  ok "numbers in $results"
fi
e2e_passed=1
step "all passed"
