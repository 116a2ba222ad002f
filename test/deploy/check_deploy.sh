#!/usr/bin/env bash
# Static checks of deploy/monitoring/ (Prometheus rules, Grafana dashboard, prometheus-adapter
# values, Kubernetes manifests). Needs only Debian-packaged tools:
#   promtool (package "prometheus"), python3; python3-yaml (PyYAML) for the YAML checks.
# Usage: bash test/deploy/check_deploy.sh        Exit 0: all passed; 1: a check failed;
# 77: promtool or python3 missing (ctest SKIP_RETURN_CODE).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MON="$ROOT/deploy/monitoring"
TESTS="$ROOT/test/deploy"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok:   $*"; }
skip() { echo "skip: $*"; }

# Metric names the gpunode exporter serves (docs/exporter.md), plus the dcgm-exporter label that
# looks like a metric name. Every DCGM_* / gpunode_* token in the files must be one of these.
ALLOWED="
DCGM_FI_DEV_SM_CLOCK DCGM_FI_DEV_MEM_CLOCK DCGM_FI_DEV_MEMORY_TEMP DCGM_FI_DEV_GPU_TEMP
DCGM_FI_DEV_POWER_USAGE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION DCGM_FI_DEV_PCIE_REPLAY_COUNTER
DCGM_FI_DEV_GPU_UTIL DCGM_FI_DEV_MEM_COPY_UTIL DCGM_FI_DEV_ENC_UTIL DCGM_FI_DEV_DEC_UTIL
DCGM_FI_DEV_XID_ERRORS DCGM_FI_DEV_FB_FREE DCGM_FI_DEV_FB_USED DCGM_FI_DEV_FB_RESERVED
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS
DCGM_FI_DEV_ROW_REMAP_FAILURE DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL DCGM_FI_PROF_GR_ENGINE_ACTIVE
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE DCGM_FI_PROF_DRAM_ACTIVE DCGM_FI_PROF_PCIE_TX_BYTES
DCGM_FI_PROF_PCIE_RX_BYTES
gpunode_gpu_health gpunode_xid_errors_total gpunode_collection_duration_seconds
gpunode_last_collection_timestamp_seconds gpunode_collection_errors_total gpunode_pod_mapping_up
gpunode_build_info
DCGM_FI_DRIVER_VERSION
"

echo "== gpunode deploy checks ($MON)"
command -v promtool >/dev/null || { echo "promtool not found (Debian: apt-get install prometheus)"; exit 77; }
command -v python3 >/dev/null || { echo "python3 not found"; exit 77; }
echo "     $(promtool --version 2>&1 | head -n1)"
HAVE_YAML=0
if python3 -c 'import yaml' 2>/dev/null; then HAVE_YAML=1; fi

FILES=(service.yaml servicemonitor.yaml prometheusrule.yaml grafana-dashboard.json
       prometheus-adapter-values.yaml hpa-example.yaml README.md)
for f in "${FILES[@]}"; do [[ -s "$MON/$f" ]] || fail "missing or empty: deploy/monitoring/$f"; done
[[ -s "$TESTS/alerts_test.yaml" ]] || fail "missing test/deploy/alerts_test.yaml"
ok "all ${#FILES[@]} files of deploy/monitoring present"

# --- 1. PrometheusRule spec -> plain rules file -------------------------------------------------
# Everything below the top-level `spec:` key, de-indented by two spaces, is a Prometheus rules file
# (`groups:`). Plain awk, so this works without PyYAML; cross-checked with PyYAML below.
RULES="$WORK/gpunode-alerts.rules.yaml"
awk 'f { sub(/^  /, ""); print } /^spec:[[:space:]]*$/ { f = 1 }' "$MON/prometheusrule.yaml" > "$RULES"
grep -q '^groups:' "$RULES" || fail "prometheusrule.yaml: no 'spec:' with 'groups:' under it"
if [[ $HAVE_YAML == 1 ]]; then
  python3 - "$MON/prometheusrule.yaml" "$RULES" <<'PY' || fail "extracted rules differ from the PrometheusRule's spec"
import sys, yaml
cr = yaml.safe_load(open(sys.argv[1]))
plain = yaml.safe_load(open(sys.argv[2]))
assert cr["apiVersion"] == "monitoring.coreos.com/v1" and cr["kind"] == "PrometheusRule", "not a monitoring.coreos.com/v1 PrometheusRule"
assert set(cr) <= {"apiVersion", "kind", "metadata", "spec"}, f"unexpected top-level keys {set(cr)}"
assert plain == cr["spec"], "awk extraction != yaml spec"
PY
  ok "prometheusrule.yaml spec extracted; identical to PyYAML's view of spec"
else
  skip "PyYAML not installed (Debian: python3-yaml): extraction not cross-checked"
fi

out="$(promtool check rules "$RULES" 2>&1)" || { echo "$out"; fail "promtool check rules"; }
ok "promtool check rules: $(echo "$out" | grep -o 'SUCCESS.*' || echo "$out")"

cp "$TESTS/alerts_test.yaml" "$WORK/alerts_test.yaml"
out="$(cd "$WORK" && promtool test rules alerts_test.yaml 2>&1)" || { echo "$out"; fail "promtool test rules"; }
ntests=$(grep -c '^  - interval:' "$TESTS/alerts_test.yaml")
ncases=$(grep -c 'eval_time:' "$TESTS/alerts_test.yaml")
ok "promtool test rules test/deploy/alerts_test.yaml: $ntests groups, $ncases alert evaluations passed"

# --- 2. Dashboard JSON ------------------------------------------------------------------------------
# Parses the JSON, checks structure, and writes every query as a recording rule into a scratch
# rules file so promtool parses the PromQL (Grafana's $__rate_interval etc. replaced by durations).
python3 - "$MON/grafana-dashboard.json" "$WORK/dashboard.rules.yaml" <<'PY' || fail "grafana-dashboard.json"
import json, re, sys
d = json.load(open(sys.argv[1]))
err = []
if not (36 <= d.get("schemaVersion", 0) <= 41): err.append(f"schemaVersion {d.get('schemaVersion')} not ~39")
if not d.get("uid") or not d.get("title"): err.append("uid/title missing")
tv = {v["name"]: v for v in d.get("templating", {}).get("list", [])}
if tv.get("DS_PROMETHEUS", {}).get("type") != "datasource" or tv["DS_PROMETHEUS"].get("query") != "prometheus":
    err.append("template variable DS_PROMETHEUS (type datasource, prometheus) missing")
for name in ("instance", "Hostname", "gpu"):
    q = tv.get(name, {}).get("definition", "")
    if not q.startswith("label_values(DCGM_FI_DEV_GPU_TEMP"):
        err.append(f"template variable {name}: not label_values(DCGM_FI_DEV_GPU_TEMP...)")
exprs = []
for name, v in tv.items():
    m = re.match(r"label_values\((.*),\s*\w+\)$", v.get("definition", ""))
    if m: exprs.append((f"variable {name}", m.group(1)))
ids, ds_ok = set(), True
def walk(panels):
    for p in panels:
        yield p
        yield from walk(p.get("panels", []))
panels = list(walk(d.get("panels", [])))
for p in panels:
    if p["id"] in ids: err.append(f"duplicate panel id {p['id']}")
    ids.add(p["id"])
    if "gridPos" not in p: err.append(f"panel {p['id']} without gridPos")
    if p["type"] == "row": continue
    if p.get("datasource", {}).get("uid") != "${DS_PROMETHEUS}": err.append(f"panel '{p['title']}' datasource is not ${{DS_PROMETHEUS}}")
    if not p.get("targets"): err.append(f"panel '{p['title']}' has no targets")
    for t in p.get("targets", []):
        if t.get("datasource", {}).get("uid") != "${DS_PROMETHEUS}": err.append(f"panel '{p['title']}' target {t.get('refId')} datasource")
        exprs.append((f"panel '{p['title']}' {t.get('refId')}", t["expr"]))
text = " ".join(e for _, e in exprs)
need = ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE",
        "rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP",
        "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
        "increase(gpunode_xid_errors_total", "gpunode_gpu_health", "exported_pod",
        "gpunode_collection_duration_seconds"]
for n in need:
    if n not in text: err.append(f"no panel query uses {n}")
subst = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
with open(sys.argv[2], "w") as f:
    f.write("groups:\n  - name: dashboard_exprs\n    rules:\n")
    for i, (where, e) in enumerate(exprs):
        for k, v in subst.items(): e = e.replace(k, v)
        f.write(f"      - record: dashboard_expr_{i}\n        expr: {json.dumps(e)}\n")
if err:
    print("\n".join(err)); sys.exit(1)
print(f"ok:   grafana-dashboard.json parses: schemaVersion {d['schemaVersion']}, {len(panels)} panels, "
      f"{len(exprs)} queries, variables {', '.join(tv)}")
PY
out="$(promtool check rules "$WORK/dashboard.rules.yaml" 2>&1)" || { echo "$out"; fail "dashboard queries are not valid PromQL"; }
ok "every dashboard query parses as PromQL (promtool)"

# --- 3. prometheus-adapter metricsQuery parses as PromQL ----------------------------------------
# Template placeholders replaced by what the adapter substitutes for a namespace/pod query.
python3 - "$MON/prometheus-adapter-values.yaml" "$WORK/adapter.rules.yaml" "$HAVE_YAML" <<'PY' || fail "prometheus-adapter-values.yaml"
import json, re, sys
src = open(sys.argv[1]).read()
if sys.argv[3] == "1":
    import yaml
    rules = yaml.safe_load(src)["rules"]["custom"]
    qs = [(r["seriesQuery"], r["metricsQuery"]) for r in rules]
else:  # no PyYAML: take the quoted values of seriesQuery:/metricsQuery: lines
    s = re.findall(r"seriesQuery:\s*'(.*)'", src); m = re.findall(r"metricsQuery:\s*'(.*)'", src)
    qs = list(zip(s, m))
assert qs, "no custom rules"
with open(sys.argv[2], "w") as f:
    f.write("groups:\n  - name: adapter_exprs\n    rules:\n")
    for i, (series, metrics) in enumerate(qs):
        name = re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", series).group(0)
        e = (metrics.replace("<<.Series>>", name)
                    .replace("<<.LabelMatchers>>", 'exported_namespace="default",exported_pod=~"a|b"')
                    .replace("<<.GroupBy>>", "exported_pod"))
        f.write(f"      - record: adapter_series_{i}\n        expr: {json.dumps(series)}\n")
        f.write(f"      - record: adapter_metrics_{i}\n        expr: {json.dumps(e)}\n")
PY
out="$(promtool check rules "$WORK/adapter.rules.yaml" 2>&1)" || { echo "$out"; fail "adapter queries are not valid PromQL"; }
ok "prometheus-adapter seriesQuery/metricsQuery parse as PromQL (promtool)"

# --- 4. Metric names: only what the exporter serves --------------------------------------------
ALLOWED_WORDS=" $(tr -s '[:space:]' ' ' <<<"$ALLOWED") "
bad=0; used=()
for f in "$MON/prometheusrule.yaml" "$MON/grafana-dashboard.json" "$MON/prometheus-adapter-values.yaml" \
         "$MON/hpa-example.yaml" "$TESTS/alerts_test.yaml"; do
  while read -r tok; do
    [[ -z "$tok" ]] && continue
    if [[ "$ALLOWED_WORDS" != *" $tok "* ]]; then
      echo "  ${f#"$ROOT"/}: $tok is not a metric the exporter serves" >&2; bad=1
    fi
    used+=("$tok")
  done < <(grep -oE 'DCGM_[A-Z0-9_]+|gpunode_[a-z_]+' "$f" | sort -u)
done
[[ $bad == 0 ]] || fail "unknown metric names (see above)"
nused=$(printf '%s\n' "${used[@]}" | sort -u | wc -l)
ok "metric names: $nused distinct DCGM_*/gpunode_* names in rules, dashboard, adapter, HPA, tests; all served by the exporter"

# --- 5. YAML manifests --------------------------------------------------------------------------
if [[ $HAVE_YAML == 1 ]]; then
  python3 - "$MON" "$TESTS" <<'PY' || fail "YAML manifests"
import glob, os, re, sys, yaml
mon, tests = sys.argv[1], sys.argv[2]
err = []
files = sorted(glob.glob(os.path.join(mon, "**", "*.yaml"), recursive=True) + glob.glob(os.path.join(tests, "*.yaml")))
docs = {}
for f in files:
    try:
        docs[os.path.basename(f)] = list(yaml.safe_load_all(open(f)))
    except yaml.YAMLError as e:
        err.append(f"{f}: {e}")
if err: print("\n".join(err)); sys.exit(1)
one = lambda n: docs[n][0]
sel = {"app.kubernetes.io/name": "gpunode"}  # the DaemonSet's pods (one agent container each)
svc, sm, pr = one("service.yaml"), one("servicemonitor.yaml"), one("prometheusrule.yaml")
ad, hpa = one("prometheus-adapter-values.yaml"), one("hpa-example.yaml")
def check(cond, msg):
    if not cond: err.append(msg)
# Service
check((svc["apiVersion"], svc["kind"]) == ("v1", "Service"), "service.yaml: not a v1 Service")
check(svc["spec"].get("type", "ClusterIP") == "ClusterIP", "service.yaml: type is not ClusterIP")
check(svc["spec"]["selector"] == sel, f"service.yaml: selector {svc['spec']['selector']} != {sel}")
ports = {p["name"]: p for p in svc["spec"]["ports"]}
check("metrics" in ports and ports["metrics"]["port"] == 9400 and ports["metrics"].get("targetPort", 9400) in (9400, "metrics"),
      "service.yaml: no port named metrics on 9400")
# ServiceMonitor
check((sm["apiVersion"], sm["kind"]) == ("monitoring.coreos.com/v1", "ServiceMonitor"), "servicemonitor.yaml: kind/apiVersion")
ml = sm["spec"]["selector"]["matchLabels"]
check(all(svc["metadata"]["labels"].get(k) == v for k, v in ml.items()), "servicemonitor.yaml: selector does not match the Service's labels")
ep = sm["spec"]["endpoints"]
check(len(ep) == 1, "servicemonitor.yaml: expected one endpoint")
ep = ep[0]
check(ep.get("port") == "metrics" and ep.get("path") == "/metrics", "servicemonitor.yaml: endpoint port/path")
check(ep.get("interval") == "15s" and ep.get("scrapeTimeout") == "10s", "servicemonitor.yaml: interval 15s / scrapeTimeout 10s")
check(ep.get("honorLabels", False) is False, "servicemonitor.yaml: honorLabels must be false (exported_* labels)")
check(any(r.get("sourceLabels") == ["__meta_kubernetes_pod_node_name"] and r.get("targetLabel") == "node"
          for r in ep.get("relabelings", [])), "servicemonitor.yaml: no relabeling of __meta_kubernetes_pod_node_name into node")
# PrometheusRule: alerts, labels, annotations; job name = Service name
want = {"GpuFatalXid", "GpuLost", "GpuRowRemapFailure", "GpuHighTemperature", "GpuHighMemoryTemperature",
        "GpuExporterDown", "GpuMetricsStale", "PodMappingDown"}
alerts = {}
for g in pr["spec"]["groups"]:
    for r in g["rules"]:
        if "alert" in r: alerts[r["alert"]] = r
check(want <= set(alerts), f"prometheusrule.yaml: missing alerts {sorted(want - set(alerts))}")
for name, r in alerts.items():
    check(r.get("labels", {}).get("severity") in ("critical", "warning", "info"), f"{name}: severity label")
    for a in ("summary", "description", "runbook"):
        check(bool(r.get("annotations", {}).get(a)), f"{name}: annotation {a} missing")
    check("README.md#" + name.lower() in r.get("annotations", {}).get("runbook", "") or name == "GpuHighMemoryTemperature",
          f"{name}: runbook does not point at README.md#{name.lower()}")
jobs = set(re.findall(r'job="([^"]+)"', alerts.get("GpuExporterDown", {}).get("expr", "")))
check(jobs == {svc["metadata"]["name"]}, f"GpuExporterDown: job {jobs} != Service name {svc['metadata']['name']} (prometheus-operator's job label)")
# prometheus-adapter values and HPA
rules = ad["rules"]["custom"]
check(ad["rules"].get("default") is False, "adapter: rules.default should be false")
names = {r["name"]["as"] for r in rules}
check("gpu_utilization" in names, "adapter: no gpu_utilization rule")
for r in rules:
    ov = r["resources"]["overrides"]
    check(ov.get("exported_namespace", {}).get("resource") == "namespace" and ov.get("exported_pod", {}).get("resource") == "pod",
          "adapter: overrides exported_namespace->namespace, exported_pod->pod")
    check("<<.GroupBy>>" in r["metricsQuery"] and r["metricsQuery"].startswith("avg("), "adapter: metricsQuery should be avg(...) by (<<.GroupBy>>)")
check((hpa["apiVersion"], hpa["kind"]) == ("autoscaling/v2", "HorizontalPodAutoscaler"), "hpa-example.yaml: autoscaling/v2 HPA")
check(hpa["spec"]["scaleTargetRef"]["kind"] == "Deployment", "hpa-example.yaml: target is not a Deployment")
pm = [m for m in hpa["spec"]["metrics"] if m["type"] == "Pods"]
check(len(pm) == 1 and pm[0]["pods"]["metric"]["name"] in names, "hpa-example.yaml: Pods metric not served by the adapter values")
check(pm and pm[0]["pods"]["target"] == {"type": "AverageValue", "averageValue": "60"}, "hpa-example.yaml: target averageValue 60")
if err: print("\n".join(err)); sys.exit(1)
print(f"ok:   {len(files)} YAML files parse (PyYAML); Service/ServiceMonitor/PrometheusRule/adapter/HPA "
      f"cross-checks passed ({len(alerts)} alerts with severity, summary, description, runbook)")
PY
else
  skip "PyYAML not installed (Debian: python3-yaml): YAML parse and manifest cross-checks skipped"
fi

echo "== PASS: deploy/monitoring checks"
