#!/usr/bin/env bash
# The Grafana dashboards against a real Prometheus (Debian's package) scraping `gpunode exporter` on
# a simulated dgx-h200, through test/k8s/grafana_queries.py (which resolves the variables and runs
# every panel query the way Grafana does):
#   1. gpunode's dashboard (deploy/monitoring/grafana-dashboard.json) and NVIDIA's dcgm-exporter
#      dashboard (test/data/grafana, grafana.com 12239): every query returns series. The scrape is
#      shaped like the cluster's: the target carries the namespace/pod/container/node labels that
#      Kubernetes service discovery and deploy/monitoring/servicemonitor.yaml give it, so the
#      exporter's own pod labels are stored as exported_* (honor_labels false); a pod holds GPU 2
#      (the kubelet's pod-resources API played by podresources_emulator), GPU 5 reports XID 48 and
#      GPU 3 falls off the bus, so the XID, pod and collection-error panels have something to show.
#   2. The resolver itself on a small dashboard of ours: dependency order, single/multi/All values
#      and their escaping, ${var:regex}, [[var]], query_result with a regex, custom, constant,
#      textbox and interval variables, $__rate_interval/$interval, repeated panels, rows, hidden
#      targets; then a broken dashboard (exit 1 naming the queries) and bad input (exit 2).
# Usage: grafana_queries_test.sh PATH/TO/gpunode PATH/TO/podresources_emulator
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
GPUNODE=${1:?usage: $0 PATH/TO/gpunode PATH/TO/podresources_emulator}
EMULATOR=${2:?usage: $0 PATH/TO/gpunode PATH/TO/podresources_emulator}
if ! command -v prometheus >/dev/null; then
  echo "SKIP: prometheus is not installed (Debian package prometheus; scripts/install-deps.sh installs it)"
  exit "$E2E_SKIP"
fi
e2e_require_tools python3
e2e_init
CHECK="$E2E_SOURCE_DIR/test/k8s/grafana_queries.py"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
EXP_PORT=$(free_port)
PROM_PORT=$(free_port)
PROM="http://127.0.0.1:$PROM_PORT"

e2e_step "a pod (ml/train-0) holding GPU 2, through the pod-resources API"
cat > "$E2E_TMP/pods.json" <<'JSON'
[{"namespace":"ml","pod":"train-0","container":"main","resource":"nvidia.com/gpu",
  "devices":["GPU-31c2c315-5e4a-4ea9-9589-dbd68102602d"]}]
JSON
"$EMULATOR" --socket "$E2E_TMP/kubelet.sock" --pods "$E2E_TMP/pods.json" > "$E2E_TMP/emulator.log" 2>&1 &
e2e_on_exit kill $!

e2e_step "gpunode exporter (simulated dgx-h200) on 127.0.0.1:$EXP_PORT, 1 s interval, pod attribution on"
cp "$E2E_SOURCE_DIR/data/profiles/dgx-h200.yaml" "$E2E_TMP/profile.yaml"
for _ in $(seq 1 50); do [ -S "$E2E_TMP/kubelet.sock" ] && break; sleep 0.1; done
GPUNODE_SIM_RELOAD_MS=0 "$GPUNODE" --simulate "$E2E_TMP/profile.yaml" exporter -c 1000 \
  --listen "127.0.0.1:$EXP_PORT" -k --pod-resources-socket "$E2E_TMP/kubelet.sock" \
  --kubernetes-enable-dra=false > "$E2E_TMP/exporter.log" 2>&1 &
e2e_on_exit kill $!

# The target labels of a Kubernetes scrape through the ServiceMonitor (endpoints SD: namespace, pod,
# container of the exporter's pod; `node` from its relabeling), so the exporter's pod/namespace/container
# become exported_* exactly as in a cluster.
cat > "$E2E_TMP/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: gpunode-exporter
    static_configs:
      - targets: ["127.0.0.1:$EXP_PORT"]
        labels: {namespace: gpunode, pod: gpunode-agent-x7k2p, container: agent, node: dgx-h200-01}
YAML
e2e_step "prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}') on 127.0.0.1:$PROM_PORT"
prometheus --config.file="$E2E_TMP/prometheus.yml" --storage.tsdb.path="$E2E_TMP/tsdb" \
  --web.listen-address="127.0.0.1:$PROM_PORT" > "$E2E_TMP/prometheus.log" 2>&1 &
e2e_on_exit kill $!

# value EXPR -> the value of a single-sample instant query, or "none"
value() {
  python3 - "$PROM" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
url = sys.argv[1] + "/api/v1/query?" + urllib.parse.urlencode({"query": sys.argv[2]})
try:
    r = json.load(urllib.request.urlopen(url, timeout=5))["data"]["result"]
    print(r[0]["value"][1] if len(r) == 1 else "none")
except Exception:
    print("none")
PY
}
wait_for() {  # EXPR WANT WHAT: up to 30 s
  local got=""
  for _ in $(seq 1 150); do
    got=$(value "$1")
    [ "$got" = "$2" ] && { e2e_ok "$3"; return 0; }
    sleep 0.2
  done
  echo "--- exporter log"; cat "$E2E_TMP/exporter.log"; echo "--- prometheus log"; tail -20 "$E2E_TMP/prometheus.log"
  e2e_fail "$3: $1 = '$got', want '$2'"
}
wait_for 'count(DCGM_FI_DEV_GPU_TEMP)' 8 "8 GPUs scraped"
wait_for 'count(DCGM_FI_DEV_GPU_UTIL{exported_pod="train-0",exported_namespace="ml",pod="gpunode-agent-x7k2p"})' 1 \
  "GPU 2's series carry exported_pod=train-0 beside the target's pod label"

e2e_step "GPU 5 reports XID 48, GPU 3 falls off the bus (live profile edit)"
python3 - "$E2E_TMP/profile.yaml" <<'PY'
import os, sys
p = sys.argv[1]
s = open(p).read()
s = s.replace("minor: 3,", "minor: 3, lost: true,", 1).replace("minor: 5,", "minor: 5, events: [{type: xid, xid: 48}],", 1)
open(p + ".tmp", "w").write(s)
os.replace(p + ".tmp", p)
PY
wait_for 'gpunode_xid_errors_total{gpu="5",xid="48"}' 1 "XID 48 counted on GPU 5"
wait_for 'count(rate(gpunode_collection_errors_total[6s]) > 0)' 1 "collection errors counted for the lost GPU"

e2e_step "every query of both dashboards returns series"
if ! python3 "$CHECK" --prometheus "$PROM" --scrape-interval 1s "$E2E_SOURCE_DIR/deploy/monitoring/grafana-dashboard.json" \
    "$E2E_SOURCE_DIR/test/data/grafana/dcgm-exporter-dashboard.json" > "$E2E_TMP/dashboards.txt" 2>&1; then
  cat "$E2E_TMP/dashboards.txt"
  e2e_fail "grafana_queries.py found queries without series"
fi
cat "$E2E_TMP/dashboards.txt"
python3 "$CHECK" --prometheus "$PROM" --scrape-interval 1s -o json "$E2E_SOURCE_DIR/deploy/monitoring/grafana-dashboard.json" \
  "$E2E_SOURCE_DIR/test/data/grafana/dcgm-exporter-dashboard.json" > "$E2E_TMP/dashboards.json"
python3 - "$E2E_TMP/dashboards.json" <<'PY' || e2e_fail "dashboard answers"
import json, sys
d = json.load(open(sys.argv[1]))
gpunode, nvidia = d["dashboards"]
q = {(x["panel"], x["refId"]): x for x in gpunode["queries"]}
assert len(gpunode["queries"]) == 34 and len(nvidia["queries"]) == 8, (len(gpunode["queries"]), len(nvidia["queries"]))
assert q[("GPUs by pod", "A")]["series"] == 1, q[("GPUs by pod", "A")]
assert q[("XID errors by code", "A")]["series"] == 1, q[("XID errors by code", "A")]
assert q[("GPU utilization", "A")]["series"] == 7, q[("GPU utilization", "A")]  # GPU 3 is gone
n = {(x["panel"], x["refId"]): x for x in nvidia["queries"]}
gpu = [v for v in nvidia["variables"] if v["name"] == "gpu"][0]
assert gpu["values"] == [str(i) for i in range(8)] and gpu["selected"] == ["All"], gpu
want = 'DCGM_FI_DEV_GPU_TEMP{instance=~"127\\\\.0\\\\.0\\\\.1:%s", gpu=~"(0|1|2|3|4|5|6|7)"}' % d["prometheus"].rsplit(":", 1)[1]
inst = [v for v in nvidia["variables"] if v["name"] == "instance"][0]["values"][0]
want = 'DCGM_FI_DEV_GPU_TEMP{instance=~"%s", gpu=~"(0|1|2|3|4|5|6|7)"}' % inst.replace(".", "\\\\.")
assert n[("GPU Temperature", "A")]["expr"] == want, (n[("GPU Temperature", "A")]["expr"], want)
PY
e2e_ok "gpunode 34/34 and dcgm-exporter 8/8 queries with series; All of 8 GPUs as (0|1|...|7), the instance regex-escaped"

e2e_step "the resolver on a dashboard of ours"
cat > "$E2E_TMP/resolver.json" <<'JSON'
{"title": "resolver", "time": {"from": "now-1h", "to": "now"},
 "templating": {"list": [
  {"name": "gpu", "type": "query", "query": {"query": "label_values(DCGM_FI_DEV_GPU_TEMP{job=\"$job\"}, gpu)"},
   "multi": true, "includeAll": true, "current": {"value": ["$__all"]}, "sort": 3},
  {"name": "job", "type": "query", "query": "label_values(up, job)", "current": {"value": "stale-job"}},
  {"name": "uuid", "type": "query", "query": "query_result(DCGM_FI_DEV_GPU_TEMP{gpu=\"2\"})",
   "regex": "/UUID=\"([^\"]+)\"/"},
  {"name": "pick", "type": "custom", "query": "zero : 0,two : 2,a\\,b", "multi": true,
   "current": {"value": ["0", "2"]}},
  {"name": "dotted", "type": "custom", "query": "1.5,x", "includeAll": true, "allValue": ".+",
   "current": {"value": "$__all"}},
  {"name": "threshold", "type": "constant", "query": "20"},
  {"name": "win", "type": "interval", "query": "1m,5m", "current": {"value": "5m"}},
  {"name": "names", "type": "textbox", "query": "DCGM_FI_DEV_.*_TEMP"}]},
 "panels": [
  {"title": "by job", "targets": [{"refId": "A", "expr": "count(DCGM_FI_DEV_GPU_TEMP{job=\"$job\", gpu=~\"$gpu\"})"},
                                  {"refId": "H", "hide": true, "expr": "this is not promql("}]},
  {"title": "uuid", "targets": [{"refId": "A", "expr": "DCGM_FI_DEV_GPU_TEMP{UUID=\"${uuid}\"} > ${threshold}"}]},
  {"title": "formats", "targets": [{"refId": "A", "expr": "max_over_time(DCGM_FI_DEV_GPU_TEMP{gpu=~\"${gpu:regex}\", gpu=~\"$pick\", gpu!~\"${pick:pipe}9\", job=~\"$dotted\"}[$win])"}]},
  {"title": "brackets", "targets": [{"refId": "A", "expr": "{__name__=~\"[[names]]\", gpu=\"2\"}"}]},
  {"title": "intervals", "targets": [{"refId": "A", "expr": "rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\"}[$__rate_interval]) + 0 * avg_over_time(DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"}[$interval])"}]},
  {"title": "row", "type": "row", "collapsed": true, "panels": [
    {"title": "per gpu", "repeat": "pick", "targets": [{"refId": "A", "expr": "DCGM_FI_DEV_GPU_TEMP{gpu=\"$pick\"}"}]}]}]}
JSON
python3 "$CHECK" --prometheus "$PROM" --scrape-interval 1s -o json "$E2E_TMP/resolver.json" > "$E2E_TMP/resolver.out" ||
  { cat "$E2E_TMP/resolver.out"; e2e_fail "the resolver dashboard has failing queries"; }
python3 - "$E2E_TMP/resolver.out" <<'PY' || e2e_fail "resolved expressions"
import json, sys
d = json.load(open(sys.argv[1]))["dashboards"][0]
got = [(q["panel"], q["expr"], q["series"]) for q in d["queries"]]
want = [
  ("by job", 'count(DCGM_FI_DEV_GPU_TEMP{job="gpunode-exporter", gpu=~"(0|1|2|3|4|5|6|7)"})', 1),
  ("uuid", 'DCGM_FI_DEV_GPU_TEMP{UUID="GPU-31c2c315-5e4a-4ea9-9589-dbd68102602d"} > 20', 1),
  ("formats", 'max_over_time(DCGM_FI_DEV_GPU_TEMP{gpu=~"(0|1|2|3|4|5|6|7)", gpu=~"(0|2)", gpu!~"0|29", job=~".+"}[5m])', 1),  # gpu 0 is excluded by !~"0|29"
  ("brackets", '{__name__=~"DCGM_FI_DEV_.*_TEMP", gpu="2"}', 2),
  ("intervals", 'rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0"}[6s]) + 0 * avg_over_time(DCGM_FI_DEV_POWER_USAGE{gpu="0"}[5s])', 1),
  ("per gpu (pick=0)", 'DCGM_FI_DEV_GPU_TEMP{gpu="0"}', 1),
  ("per gpu (pick=2)", 'DCGM_FI_DEV_GPU_TEMP{gpu="2"}', 1),
]
for g, w in zip(got, want):
    assert g == w, f"\n got  {g}\n want {w}"
assert len(got) == len(want), got
v = {x["name"]: x for x in d["variables"]}
names = [x["name"] for x in d["variables"]]
assert names.index("job") < names.index("gpu"), f"dependency order: job before gpu: {names}"
assert v["job"]["selected"] == ["gpunode-exporter"], v["job"]  # a stale saved value -> the first option
assert v["pick"]["values"] == ["0", "2", "a,b"] and v["pick"]["selected"] == ["zero", "two"], v["pick"]
assert v["win"]["selected"] == ["5m"] and v["threshold"]["values"] == ["20"], (v["win"], v["threshold"])
PY
e2e_ok "dependency order, All/multi/single escaping, \${var:regex|pipe}, [[var]], query_result + regex, custom/constant/textbox/interval, rate intervals, repeats in a collapsed row, hidden target skipped"

python3 "$CHECK" --prometheus "$PROM" --var pick=2 --var 'dotted=1.5' -o json "$E2E_TMP/resolver.json" > "$E2E_TMP/var.out" || true
python3 - "$E2E_TMP/var.out" <<'PY' || e2e_fail "--var"
import json, sys
q = {x["panel"]: x["expr"] for x in json.load(open(sys.argv[1]))["dashboards"][0]["queries"]}
assert 'gpu=~"2", gpu!~"29", job=~"1\\\\.5"' in q["formats"], q["formats"]
assert list(k for k in q if k.startswith("per gpu")) == ["per gpu (pick=2)"], q
PY
e2e_ok "--var selects values (one value of a multi variable is not put in parentheses; 1.5 escaped as 1\\\\.5)"

e2e_step "failures: exit 1 names the queries, exit 2 for bad input"
cat > "$E2E_TMP/broken.json" <<'JSON'
{"title": "broken", "panels": [
  {"title": "missing metric", "targets": [{"refId": "A", "expr": "DCGM_FI_NOT_A_METRIC"}]},
  {"title": "syntax", "targets": [{"refId": "B", "expr": "sum(DCGM_FI_DEV_GPU_TEMP"}]},
  {"title": "legend", "targets": [{"refId": "C", "expr": "DCGM_FI_DEV_GPU_TEMP", "legendFormat": "{{gpu}} {{no_such_label}}"}]},
  {"title": "fine", "targets": [{"refId": "D", "expr": "DCGM_FI_DEV_GPU_TEMP"}]}]}
JSON
rc=0; python3 "$CHECK" --prometheus "$PROM" "$E2E_TMP/broken.json" > "$E2E_TMP/broken.out" 2>&1 || rc=$?
e2e_assert_eq "$rc" 1 "a dashboard with failing queries exits"
grep -q '^empty      0  missing metric \[A\]' "$E2E_TMP/broken.out" || e2e_fail "$(cat "$E2E_TMP/broken.out")"
grep -q '^error      -  syntax \[B\].*bad_data' "$E2E_TMP/broken.out" || e2e_fail "$(cat "$E2E_TMP/broken.out")"
grep -q '^legend.*no_such_label' "$E2E_TMP/broken.out" || e2e_fail "$(cat "$E2E_TMP/broken.out")"
grep -q 'FAILED: 3 queries' "$E2E_TMP/broken.out" || e2e_fail "$(cat "$E2E_TMP/broken.out")"
e2e_ok "empty, PromQL error and a legend naming a missing label are listed; the good query is not"

expect2() {  # WHAT GREP ARGS...: exit 2 and a message matching GREP
  local what=$1 pattern=$2 out rc=0
  shift 2
  out=$(python3 "$CHECK" "$@" 2>&1) || rc=$?
  [ "$rc" = 2 ] && grep -q -- "$pattern" <<<"$out" || e2e_fail "$what: rc $rc: $out"
  e2e_ok "$what: exit 2 ($(head -1 <<<"$out"))"
}
printf '{"title": "x", ' > "$E2E_TMP/notjson.json"
printf '{"title": "no panels"}' > "$E2E_TMP/nopanels.json"
printf '{"panels": [{"title": "t"}], "templating": {"list": [{"name": "a", "type": "query", "query": "label_values(x{l=\\"$b\\"}, l)"}, {"name": "b", "type": "query", "query": "label_values(y{l=\\"$a\\"}, l)"}]}}' > "$E2E_TMP/cycle.json"
expect2 "not JSON" "not JSON" --prometheus "$PROM" "$E2E_TMP/notjson.json"
expect2 "no panels" "no panels" --prometheus "$PROM" "$E2E_TMP/nopanels.json"
expect2 "variable cycle" "cycle: a, b" --prometheus "$PROM" "$E2E_TMP/cycle.json"
expect2 "missing file" "cannot read" --prometheus "$PROM" "$E2E_TMP/absent.json"
expect2 "Prometheus not reachable" "does not answer" --prometheus "http://127.0.0.1:$(free_port)" "$E2E_TMP/resolver.json"
expect2 "unknown --var value" "not among its values" --prometheus "$PROM" --var gpu=42 "$E2E_TMP/resolver.json"
echo "PASS: grafana_queries"
