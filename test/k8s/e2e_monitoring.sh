#!/usr/bin/env bash
# Autoscaling, dashboards and alerts on gpunode's GPU metrics in a real Kubernetes 1.36
# (test/k8s/cluster.sh; only the GPUs are simulated): the chart in simulate mode (dgx-h200) with its
# default exporter settings, and beside it what a platform team runs to watch and scale on them:
#   1. Prometheus (built from its Go module with Kubernetes service discovery, test/k8s/build.sh
#      prometheus; Debian's is built without it) scraping the agents exactly as the chart's
#      ServiceMonitor describes (prometheus-operator's translation, test/k8s/prom_operator_config.py:
#      endpoints of the Service gpunode-exporter, port `metrics`, 15 s, honorLabels false, node
#      relabelled) and evaluating the chart's PrometheusRule
#   2. prometheus-adapter (sigs.k8s.io/prometheus-adapter, test/k8s/build.sh prometheus-adapter) with
#      deploy/monitoring/prometheus-adapter-values.yaml's rules, registered as the APIService
#      v1beta1.custom.metrics.k8s.io (an extension API server on the node's address)
#   3. a Deployment whose pod takes one GPU (its labels and UID on its GPU's series: the chart's
#      exporter.podLabels/podUid) and deploy/monitoring/hpa-example.yaml (min 1, max 4,
#      target 60; the test shortens the stabilization windows): the simulated utilization of exactly
#      the GPU the pod got raised to 90 % -> the HPA scales out; lowered to 10 % -> it scales in. The
#      time from the change to each stage is reported: the exporter's sample, Prometheus' scrape,
#      the custom metrics API, the HPA's decision, the new replica Running
#   4. an XID 79 (GPU fallen off the bus) injected on the simulated node: GpuFatalXid and GpuLost fire
#      in Prometheus (/api/v1/alerts); the GPU back: both resolve. The rule file is the chart's with
#      its windows shortened for the test (10m -> 30s, for: 1m -> 10s), said as such.
#   5. while that GPU is lost (so the XID and collection-error panels have data too): every query of
#      deploy/monitoring/grafana-dashboard.json and of NVIDIA's dashboard 12239
#      (test/data/grafana/dcgm-exporter-dashboard.json) returns series, the variables resolved as
#      Grafana does (test/k8s/grafana_queries.py)
# Usage: test/k8s/e2e_monitoring.sh BUILD_DIR (a Release build tree: the image is built from it).
# Exit 77 (skipped) without Go or as non-root, unless CI=true: then those are failures.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
ns=gpunode-mon
# shellcheck source=e2e_lib.sh
. "$src/test/k8s/e2e_lib.sh"
mon_pids=()
mon_cleanup() {
  local p
  for p in "${mon_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  cleanup
}
trap mon_cleanup EXIT
mon_dump() {
  echo "--- prometheus log"; tail -15 "$state/logs/prometheus-mon.log" 2>/dev/null || true
  echo "--- adapter log"; tail -15 "$state/logs/prometheus-adapter.log" 2>/dev/null || true
  echo "--- hpa"; kubectl describe hpa gpu-inference 2>&1 | tail -25 || true
}
fail() { echo "FAIL: $*"; mon_dump; dump; exit 1; }
now() { date +%s.%N; }
since() { python3 -c "print(f'{$(now)-$1:.1f}')"; }

prom_bin=$("$src/test/k8s/build.sh" prometheus | tail -1)/prometheus
adapter_bin=$("$src/test/k8s/build.sh" prometheus-adapter | tail -1)/adapter
[ -x "$prom_bin" ] || fail "no Prometheus at $prom_bin after test/k8s/build.sh prometheus"
[ -x "$adapter_bin" ] || fail "no prometheus-adapter at $adapter_bin after test/k8s/build.sh prometheus-adapter"

step "1. helm install (simulate dgx-h200, the chart's exporter defaults) and Prometheus from the chart's ServiceMonitor and PrometheusRule"
kubectl label node "$node" nvidia.com/gpu.present=true --overwrite >/dev/null
chart_args=(--set simulate.enabled=true --set simulate.profile=dgx-h200
  --set image.repository=localhost/gpunode --set image.tag="$version" --set image.pullPolicy=Never
  --set validator.interval=3s --set validator.retry=2s
  --set exporter.podLabels=true --set exporter.podUid=true)
# GPUNODE_MON_COLLECT_MS: the exporter's collect interval instead of the chart's default (the benchmark
# compares the default with dcgm-exporter's 30000).
[ -z "${GPUNODE_MON_COLLECT_MS:-}" ] || chart_args+=(--set exporter.collectInterval="$GPUNODE_MON_COLLECT_MS")
helm install gpunode "$src/deploy/helm/gpunode" -n "$ns" --create-namespace "${chart_args[@]}" >/dev/null ||
  fail "helm install"
kubectl -n "$ns" rollout status daemonset/gpunode --timeout=120s >/dev/null || fail "DaemonSet not Ready"
collect_ms=$(kubectl -n "$ns" get configmap -o json | python3 -c '
import json, re, sys
for cm in json.load(sys.stdin)["items"]:
    for v in (cm.get("data") or {}).values():
        m = re.search(r"collectInterval:\s*(\d+)", v)
        if m: print(m.group(1)); sys.exit()
print("?")')
# The ServiceMonitor and PrometheusRule as the chart renders them (prometheus-operator's CRDs are
# not installed: helm template, not helm install, gives the objects).
rm -rf "$state/mon"; mkdir -p "$state/mon"  # no Prometheus data of an earlier run
helm template gpunode "$src/deploy/helm/gpunode" -n "$ns" "${chart_args[@]}" \
  --set monitoring.serviceMonitor.enabled=true --show-only templates/servicemonitor.yaml > "$state/mon/servicemonitor.yaml" ||
  fail "helm template: the ServiceMonitor"
helm template gpunode "$src/deploy/helm/gpunode" -n "$ns" "${chart_args[@]}" \
  --set monitoring.prometheusRule.enabled=true --show-only templates/prometheusrule.yaml > "$state/mon/prometheusrule.yaml" ||
  fail "helm template: the PrometheusRule"
sm_interval=$(sed -n 's/^ *interval: *//p' "$state/mon/servicemonitor.yaml" | head -1)
# The rules' windows shortened so the test does not wait 10 minutes for an alert to resolve.
sed -e 's/\[10m\]/[30s]/g; s/offset 10m/offset 30s/g; s/for: 1m$/for: 10s/' "$state/mon/prometheusrule.yaml" \
  > "$state/mon/prometheusrule-short.yaml"
python3 "$src/test/k8s/prom_operator_config.py" --servicemonitor "$state/mon/servicemonitor.yaml" \
  --kubeconfig "$KUBECONFIG" --prometheusrule "$state/mon/prometheusrule-short.yaml" \
  --rules-out "$state/mon/rules.yml" --evaluation-interval 5s > "$state/mon/prometheus.yml" ||
  fail "prom_operator_config.py"
prom_port=19391
"$prom_bin" --config.file="$state/mon/prometheus.yml" --storage.tsdb.path="$state/mon/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" > "$state/logs/prometheus-mon.log" 2>&1 &
mon_pids+=($!)
prom="http://127.0.0.1:$prom_port"
query() {  # PROMQL: the result as JSON [{"metric": {...}, "value": [t, "v"]}, ...]
  curl -s --max-time 3 "$prom/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["data"]["result"]))' 2>/dev/null || echo '[]'
}
count() { query "$1" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
deadline=$((SECONDS + 90))
until [ "$(count 'up{job="gpunode-exporter"} == 1')" = 1 ] && [ "$(count 'DCGM_FI_DEV_GPU_UTIL')" = 8 ]; do
  [ $SECONDS -lt $deadline ] || fail "Prometheus has no target up{job=\"gpunode-exporter\"} with 8 GPUs 90 s after it started"
  sleep 1
done
target=$(query 'up{job="gpunode-exporter"}' | python3 -c '
import json, sys; m = json.load(sys.stdin)[0]["metric"]; print(m["instance"], m["namespace"], m["pod"], m.get("node", "-"))')
ok "Prometheus $("$prom_bin" --version 2>&1 | head -1 | awk '{print $3}') found the agent through Kubernetes SD (instance pod node: $target), every $sm_interval; exporter collect interval ${collect_ms} ms"

step "2. prometheus-adapter with deploy/monitoring/prometheus-adapter-values.yaml's rules, as the APIService v1beta1.custom.metrics.k8s.io"
python3 "$src/test/k8s/adapter_rules.py" "$src/deploy/monitoring/prometheus-adapter-values.yaml" > "$state/mon/adapter.yaml" ||
  fail "adapter_rules.py"
relist=$(python3 -c '
import sys, yaml
v = yaml.safe_load(open(sys.argv[1])) or {}
print(v.get("metricsRelistInterval") or "1m")' "$src/deploy/monitoring/prometheus-adapter-values.yaml")
adapter_port=6444
mkdir -p "$state/mon/adapter-certs"
"$adapter_bin" --secure-port="$adapter_port" --bind-address=0.0.0.0 --cert-dir="$state/mon/adapter-certs" \
  --lister-kubeconfig="$KUBECONFIG" --authentication-kubeconfig="$KUBECONFIG" --authorization-kubeconfig="$KUBECONFIG" \
  --prometheus-url="$prom/" --config="$state/mon/adapter.yaml" --metrics-relist-interval="$relist" --v=2 \
  > "$state/logs/prometheus-adapter.log" 2>&1 &
mon_pids+=($!)
node_ip=$(kubectl get node "$node" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
kubectl apply -f - >/dev/null 2>&1 <<YAML || fail "the adapter's Service, Endpoints and APIService"
apiVersion: v1
kind: Namespace
metadata: {name: monitoring}
---
apiVersion: v1
kind: Service
metadata: {name: prometheus-adapter, namespace: monitoring}
spec:
  ports: [{name: https, port: 443, targetPort: $adapter_port}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: prometheus-adapter, namespace: monitoring}
subsets:
  - addresses: [{ip: "$node_ip"}]
    ports: [{name: https, port: $adapter_port}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.custom.metrics.k8s.io}
spec:
  service: {name: prometheus-adapter, namespace: monitoring, port: 443}
  group: custom.metrics.k8s.io
  version: v1beta1
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 100
  versionPriority: 100
YAML
deadline=$((SECONDS + 90))
until [ "$(kubectl get apiservice v1beta1.custom.metrics.k8s.io -o jsonpath='{.status.conditions[?(@.type=="Available")].status}')" = True ]; do
  [ $SECONDS -lt $deadline ] || fail "APIService v1beta1.custom.metrics.k8s.io not Available after 90 s: $(kubectl get apiservice v1beta1.custom.metrics.k8s.io -o jsonpath='{.status.conditions[*].message}')"
  sleep 1
done
ok "APIService v1beta1.custom.metrics.k8s.io Available (adapter on $node_ip:$adapter_port, relist every $relist)"

step "3. a one-GPU Deployment and deploy/monitoring/hpa-example.yaml: 90 % on its GPU scales out, 10 % scales in"
kubectl apply -f - >/dev/null <<YAML || fail "Deployment gpu-inference"
apiVersion: apps/v1
kind: Deployment
metadata: {name: gpu-inference, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: gpu-inference}}
  template:
    metadata: {labels: {app: gpu-inference}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: server
          image: gpunode.test/busybox:1
          imagePullPolicy: Never
          command: [sh, -c, 'sleep 3600']
          resources: {limits: {nvidia.com/gpu: 1}}
YAML
kubectl rollout status deployment/gpu-inference --timeout=120s >/dev/null || fail "Deployment gpu-inference not Ready"
pod1=$(kubectl get pods -l app=gpu-inference -o jsonpath='{.items[0].metadata.name}')
kubectl apply -f "$src/deploy/monitoring/hpa-example.yaml" >/dev/null || fail "kubectl apply hpa-example.yaml"
hpa_spec=$(kubectl get hpa gpu-inference -o jsonpath='{.spec.minReplicas} {.spec.maxReplicas} {.spec.metrics[0].pods.target.averageValue}')
[ "$hpa_spec" = "1 4 60" ] || fail "hpa-example.yaml: min max target '$hpa_spec', not '1 4 60'"
# The test's short stabilization windows (the example's are 60 s up, 600 s down).
kubectl patch hpa gpu-inference --type merge \
  -p '{"spec":{"behavior":{"scaleUp":{"stabilizationWindowSeconds":0},"scaleDown":{"stabilizationWindowSeconds":15}}}}' >/dev/null
deadline=$((SECONDS + 180))
gpu_series() { query "DCGM_FI_DEV_GPU_UTIL{exported_pod=\"$pod1\"}"; }
until [ "$(gpu_series | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 1 ] &&
      [ -n "$(kubectl get hpa gpu-inference -o jsonpath='{.status.currentMetrics[0].pods.current.averageValue}')" ]; do
  [ $SECONDS -lt $deadline ] || fail "no GPU series for pod $pod1 in Prometheus, or the HPA has no current metric, 180 s after it ran: $(kubectl get hpa gpu-inference -o jsonpath='{.status.conditions[*].message}')"
  sleep 1
done
read -r uuid gpu_index <<<"$(gpu_series | python3 -c 'import json,sys; m=json.load(sys.stdin)[0]["metric"]; print(m["UUID"], m["gpu"])')"
# dcgm-exporter's --kubernetes-enable-pod-labels/-pod-uid (the chart's exporter.podLabels/podUid): the
# pod's own labels and UID on its GPU's series, through Prometheus.
pod1_uid=$(kubectl get pod "$pod1" -o jsonpath='{.metadata.uid}')
deadline=$((SECONDS + 60))
until [ "$(count "DCGM_FI_DEV_GPU_UTIL{exported_pod=\"$pod1\",app=\"gpu-inference\",pod_uid=\"$pod1_uid\"}")" = 1 ]; do
  [ $SECONDS -lt $deadline ] || fail "no app=gpu-inference and pod_uid=$pod1_uid on pod $pod1's GPU series 60 s after it ran: $(gpu_series)"
  sleep 1
done
ok "pod labels and UID on its GPU's series: app=gpu-inference pod_uid=$pod1_uid"
ok "pod $pod1 on GPU $gpu_index ($uuid); the HPA reads gpu_utilization=$(kubectl get hpa gpu-inference -o jsonpath='{.status.currentMetrics[0].pods.current.averageValue}')"

profile=/var/lib/gpunode/sim/profile.yaml
[ -w "$profile" ] || fail "no simulated profile at $profile"
cp "$profile" "$state/mon/profile.orig"
set_util() {  # UUID PERCENT: the live profile's utilization of that GPU (the simulated NVML follows it)
  python3 - "$profile" "$1" "$2" <<'PY' || fail "could not set the utilization of $1 in $profile"
import os, sys, yaml
path, uuid, pct = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = yaml.safe_load(open(path))
hits = [g for g in p["gpus"] if g.get("uuid") == uuid]
assert len(hits) == 1, f"{uuid}: {len(hits)} GPUs in the profile"
hits[0]["utilization"] = {"gpu": pct, "memory": pct // 2}
with open(path + ".tmp", "w") as f:
    yaml.safe_dump(p, f, sort_keys=False)
os.rename(path + ".tmp", path)
PY
}
agent_ip=$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=gpunode -o jsonpath='{.items[0].status.podIP}')
stage_times() {  # PERCENT CONDITION-ON-REPLICAS: sets te tp ta th tr, the seconds from the change to each stage
  local pct=$1 want=$2 t0 v
  te= tp= ta= th= tr=
  # A random phase against the exporter's collection clock, as a real change has (the benchmark:
  # GPUNODE_MON_PHASE_S=30 also against the 15 s scrape and the 15 s HPA sync).
  sleep "$(python3 -c "import random; print(round(random.uniform(0, ${GPUNODE_MON_PHASE_S:-${collect_ms:-5000} / 1000}), 2))")"
  t0=$(now)
  set_util "$uuid" "$pct"
  local deadline=$((SECONDS + 240))
  while [ -z "$tr" ]; do
    [ $SECONDS -lt $deadline ] || fail "utilization $pct %: stages reached after 240 s: exporter=${te:-no} prometheus=${tp:-no} api=${ta:-no} hpa=${th:-no} replicas=${tr:-no}; hpa: $(kubectl get hpa gpu-inference -o jsonpath='{.status.currentReplicas}/{.status.desiredReplicas} {.status.currentMetrics[0].pods.current.averageValue}')"
    if [ -z "$te" ] && grep -q "^DCGM_FI_DEV_GPU_UTIL{.*UUID=\"$uuid\".*} $pct\$" < <(curl -s --max-time 2 "http://$agent_ip:9400/metrics"); then te=$(since "$t0"); fi
    if [ -z "$tp" ] && [ "$(count "DCGM_FI_DEV_GPU_UTIL{UUID=\"$uuid\"} == $pct")" = 1 ]; then tp=$(since "$t0"); fi
    if [ -z "$ta" ]; then
      v=$(kubectl get --raw "/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/pods/$pod1/gpu_utilization" 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["items"][0]["value"])' 2>/dev/null || true)
      [ "$v" = "$pct" ] && ta=$(since "$t0")
    fi
    if [ -z "$th" ]; then
      v=$(kubectl get hpa gpu-inference -o jsonpath='{.status.desiredReplicas}')
      python3 -c "import sys; sys.exit(0 if ${v:-0} $want else 1)" && th=$(since "$t0")
    fi
    if [ -n "$th" ]; then
      v=$(kubectl get deployment gpu-inference -o jsonpath='{.status.readyReplicas}')
      python3 -c "import sys; sys.exit(0 if ${v:-0} $want and $(kubectl get pods -l app=gpu-inference --no-headers 2>/dev/null | wc -l) ${want} else 1)" && tr=$(since "$t0")
    fi
    sleep 0.25
  done
  te=${te:-?} tp=${tp:-?} ta=${ta:-?}
}
# GPUNODE_MON_ROUNDS (default 1): up and down that many times (benchmarks/hpa_chain_bench.sh).
rounds=${GPUNODE_MON_ROUNDS:-1}
[[ "$rounds" =~ ^[1-9][0-9]?$ ]] || fail "GPUNODE_MON_ROUNDS=$rounds: expected 1..99"
[ -z "${GPUNODE_MON_PHASE_S:-}" ] || [[ "$GPUNODE_MON_PHASE_S" =~ ^[0-9]{1,3}$ ]] ||
  fail "GPUNODE_MON_PHASE_S=$GPUNODE_MON_PHASE_S: expected whole seconds, 0..999"
for ((round = 1; round <= rounds; round++)); do
  stage_times 90 '>= 2'
  up_e=$te up_p=$tp up_a=$ta up_h=$th up_r=$tr
  [ "$(count 'DCGM_FI_DEV_GPU_UTIL == 90')" = 1 ] || fail "more than the pod's GPU shows 90 %: $(query 'DCGM_FI_DEV_GPU_UTIL == 90')"
  replicas_up=$(kubectl get deployment gpu-inference -o jsonpath='{.status.readyReplicas}')
  ok "90 % on GPU $gpu_index only -> scaled out to $replicas_up: exporter ${up_e} s, Prometheus ${up_p} s, custom metrics API ${up_a} s, HPA decision ${up_h} s, replicas Ready ${up_r} s"
  stage_times 10 '== 1'
  down_e=$te down_p=$tp down_a=$ta down_h=$th down_r=$tr
  ok "10 % -> scaled in to 1: exporter ${down_e} s, Prometheus ${down_p} s, custom metrics API ${down_a} s, HPA decision ${down_h} s (scale-down window 15 s), 1 replica ${down_r} s"
  echo "monitoring-hpa: {\"round\": $round, \"collect_interval_ms\": \"$collect_ms\", \"scrape_interval\": \"$sm_interval\", \"up\": {\"exporter_s\": \"$up_e\", \"prometheus_s\": \"$up_p\", \"api_s\": \"$up_a\", \"hpa_s\": $up_h, \"ready_s\": $up_r}, \"down\": {\"exporter_s\": \"$down_e\", \"prometheus_s\": \"$down_p\", \"api_s\": \"$down_a\", \"hpa_s\": $down_h, \"one_replica_s\": $down_r}}"
  # pod1 may be the replica the scale-in removed: follow the one left, and its GPU.
  pod1=$(kubectl get pods -l app=gpu-inference -o jsonpath='{.items[0].metadata.name}')
  if ((round < rounds)); then
    deadline=$((SECONDS + 60))
    until [ "$(gpu_series | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 1 ]; do
      [ $SECONDS -lt $deadline ] || fail "no GPU series for pod $pod1 60 s after the scale-in"
      sleep 1
    done
    read -r uuid gpu_index <<<"$(gpu_series | python3 -c 'import json,sys; m=json.load(sys.stdin)[0]["metric"]; print(m["UUID"], m["gpu"])')"
    cp "$state/mon/profile.orig" "$profile.tmp" && mv "$profile.tmp" "$profile"
  fi
done
cp "$state/mon/profile.orig" "$profile.tmp" && mv "$profile.tmp" "$profile"

step "4. an XID 79 on GPU 5: GpuFatalXid and GpuLost fire; the GPU back: they resolve"
alerts() {  # the firing alerts' names, sorted, one line
  curl -s --max-time 3 "$prom/api/v1/alerts" | python3 -c '
import json, sys
a = json.load(sys.stdin)["data"]["alerts"]
print(" ".join(sorted({x["labels"]["alertname"] for x in a if x["state"] == "firing"})))' 2>/dev/null || true
}
[ -z "$(alerts)" ] || fail "alerts firing before the XID: $(alerts)"
python3 - "$profile" <<'PY' || fail "could not inject XID 79 into $profile"
import os, sys, yaml
path = sys.argv[1]
p = yaml.safe_load(open(path))
g = p["gpus"][5]
g["lost"] = True
g.setdefault("events", []).append({"type": "xid", "xid": 79})
with open(path + ".tmp", "w") as f:
    yaml.safe_dump(p, f, sort_keys=False)
os.rename(path + ".tmp", path)
PY
t0=$(now)
deadline=$((SECONDS + 120))
until [[ " $(alerts) " == *" GpuFatalXid "* && " $(alerts) " == *" GpuLost "* ]]; do
  [ $SECONDS -lt $deadline ] || fail "after XID 79 firing: '$(alerts)' 120 s later (want GpuFatalXid and GpuLost)"
  sleep 1
done
ok "firing $(since "$t0") s after the XID: $(alerts)"
step "5. while GPU 5 is lost: every query of gpunode's dashboard and of NVIDIA's (grafana.com 12239) returns series"
# (now, with an XID and a lost GPU's collection errors on record, the XID and error panels have data
# too, once Prometheus holds two samples of each: the panels' increase() and rate() need two)
deadline=$((SECONDS + 90))
until [ "$(count 'count_over_time(gpunode_xid_errors_total[60s]) >= 2')" -ge 1 ] &&
      [ "$(count 'count_over_time(gpunode_collection_errors_total[60s]) >= 2')" -ge 1 ]; do
  [ $SECONDS -lt $deadline ] || fail "Prometheus holds fewer than two samples of the XID or collection-error series 90 s after the XID"
  sleep 1
done
for d in "$src/deploy/monitoring/grafana-dashboard.json" "$src/test/data/grafana/dcgm-exporter-dashboard.json"; do
  out=$(python3 "$src/test/k8s/grafana_queries.py" --prometheus "$prom" "$d" 2>&1) ||
    fail "$(basename "$d"): queries without series or with errors:
$out"
  ok "$(basename "$d"): $(printf '%s\n' "$out" | tail -1)"
done

step "4b. GPU 5 back: the alerts resolve"
cp "$state/mon/profile.orig" "$profile.tmp" && mv "$profile.tmp" "$profile"
t0=$(now)
deadline=$((SECONDS + 150))
until [ -z "$(alerts)" ]; do
  [ $SECONDS -lt $deadline ] || fail "still firing 150 s after the GPU came back: $(alerts)"
  sleep 1
done
ok "resolved $(since "$t0") s after the GPU came back (GpuFatalXid's window is 30 s in the test's rules)"

kubectl delete hpa gpu-inference >/dev/null; kubectl delete deployment gpu-inference --wait=true >/dev/null
kubectl delete apiservice v1beta1.custom.metrics.k8s.io >/dev/null
e2e_passed=1
step "all passed"
