#!/usr/bin/env python3
"""Turn the chart's ServiceMonitor and PrometheusRule into a plain Prometheus configuration, the way
prometheus-operator does, for a Prometheus run on the test cluster's host (no operator, no CRDs).

  prom_operator_config.py --servicemonitor SM.yaml --kubeconfig KUBECONFIG \
      [--prometheusrule RULE.yaml --rules-out rules.yml] [--evaluation-interval 30s] > prometheus.yml

What is reproduced (prometheus-operator pkg/prometheus/promcfg.go, generateServiceMonitorConfig, for
the fields the chart's ServiceMonitor uses): one scrape job per endpoint named
serviceMonitor/<namespace>/<name>/<index>; kubernetes_sd_configs role `endpoints` limited to the
ServiceMonitor's namespace (namespaceSelector not set); `keep` on every selector.matchLabels entry
(service label value and labelpresent); `keep` on the endpoint's port name; the target labels the
operator adds (namespace, service, pod, container, endpoint, job = the Service's name; node/pod from
the endpoint's target reference); pods in phase Failed or Succeeded dropped; then the endpoint's own
relabelings and metricRelabelings; interval, scrapeTimeout, path, scheme, honorLabels.
A PrometheusRule's spec.groups is a Prometheus rule file as it is.
Anything else in the ServiceMonitor (tlsConfig, bearerTokenSecret, matchExpressions, namespaceSelector,
targetLabels, podTargetLabels, ...) is refused, naming the field: the test must not pass on a
configuration it did not reproduce.
"""
import argparse
import re
import sys

import yaml

SUPPORTED_ENDPOINT = {"port", "path", "scheme", "interval", "scrapeTimeout", "honorLabels", "relabelings",
                      "metricRelabelings"}
SUPPORTED_SPEC = {"selector", "endpoints"}


def die(msg):
    print(f"prom_operator_config: {msg}", file=sys.stderr)
    sys.exit(2)


def load_one(path, kind):
    try:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
    except (OSError, yaml.YAMLError) as e:
        die(f"{path}: {e}")
    docs = [d for d in docs if isinstance(d, dict) and d.get("kind") == kind]
    if len(docs) != 1:
        die(f"{path}: expected one {kind}, found {len(docs)}")
    return docs[0]


def sanitize(name):  # Prometheus' label-name sanitizing of Kubernetes label keys
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def relabel(r, where):
    out = {}
    for k, v in r.items():
        key = {"sourceLabels": "source_labels", "targetLabel": "target_label"}.get(k, k)
        if key not in ("source_labels", "target_label", "separator", "regex", "modulus", "replacement", "action"):
            die(f"{where}: field {k!r} is not reproduced")
        out[key] = v
    if "action" in out:
        out["action"] = out["action"].lower()
    return out


def scrape_config(sm, kubeconfig):
    meta, spec = sm.get("metadata", {}), sm.get("spec", {})
    ns, name = meta.get("namespace"), meta.get("name")
    if not ns or not name:
        die("the ServiceMonitor needs metadata.name and metadata.namespace (render it with helm template -n NS)")
    extra = set(spec) - SUPPORTED_SPEC
    if extra:
        die(f"ServiceMonitor spec fields {sorted(extra)} are not reproduced")
    selector = spec.get("selector", {})
    if set(selector) - {"matchLabels"}:
        die(f"ServiceMonitor spec.selector fields {sorted(set(selector) - {'matchLabels'})} are not reproduced")
    jobs = []
    for i, ep in enumerate(spec.get("endpoints") or []):
        extra = set(ep) - SUPPORTED_ENDPOINT
        if extra:
            die(f"spec.endpoints[{i}] fields {sorted(extra)} are not reproduced")
        if "port" not in ep:
            die(f"spec.endpoints[{i}]: only named ports (port) are reproduced")
        rl = [{"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"}]
        for k, v in sorted((selector.get("matchLabels") or {}).items()):
            s = sanitize(k)
            rl.append({"action": "keep",
                       "source_labels": [f"__meta_kubernetes_service_label_{s}",
                                         f"__meta_kubernetes_service_labelpresent_{s}"],
                       "regex": f"({re.escape(str(v))});true"})
        rl.append({"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"],
                   "regex": re.escape(ep["port"])})
        rl += [
            {"source_labels": ["__meta_kubernetes_endpoint_address_target_kind",
                               "__meta_kubernetes_endpoint_address_target_name"],
             "separator": ";", "regex": "Node;(.*)", "replacement": "${1}", "target_label": "node"},
            {"source_labels": ["__meta_kubernetes_endpoint_address_target_kind",
                               "__meta_kubernetes_endpoint_address_target_name"],
             "separator": ";", "regex": "Pod;(.*)", "replacement": "${1}", "target_label": "pod"},
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
            {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
            {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)"},
            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "${1}"},
            {"target_label": "endpoint", "replacement": ep["port"]},
        ]
        rl += [relabel(r, f"spec.endpoints[{i}].relabelings[{j}]") for j, r in enumerate(ep.get("relabelings") or [])]
        job = {
            "job_name": f"serviceMonitor/{ns}/{name}/{i}",
            "honor_labels": bool(ep.get("honorLabels", False)),
            "kubernetes_sd_configs": [{"role": "endpoints", "kubeconfig_file": kubeconfig,
                                       "namespaces": {"names": [ns]}}],
            "metrics_path": ep.get("path", "/metrics"),
            "scheme": ep.get("scheme", "http"),
            "relabel_configs": rl,
        }
        if "interval" in ep:
            job["scrape_interval"] = ep["interval"]
        if "scrapeTimeout" in ep:
            job["scrape_timeout"] = ep["scrapeTimeout"]
        mrl = ep.get("metricRelabelings") or []
        if mrl:
            job["metric_relabel_configs"] = [relabel(r, f"spec.endpoints[{i}].metricRelabelings[{j}]")
                                             for j, r in enumerate(mrl)]
        jobs.append(job)
    if not jobs:
        die("the ServiceMonitor has no endpoints")
    return jobs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--servicemonitor", required=True)
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--prometheusrule")
    ap.add_argument("--rules-out")
    ap.add_argument("--evaluation-interval", default="30s")  # prometheus-operator's default
    a = ap.parse_args()
    cfg = {"global": {"evaluation_interval": a.evaluation_interval},
           "scrape_configs": scrape_config(load_one(a.servicemonitor, "ServiceMonitor"), a.kubeconfig)}
    if a.prometheusrule:
        if not a.rules_out:
            die("--prometheusrule needs --rules-out")
        rule = load_one(a.prometheusrule, "PrometheusRule")
        groups = (rule.get("spec") or {}).get("groups")
        if not groups:
            die(f"{a.prometheusrule}: no spec.groups")
        with open(a.rules_out, "w") as f:
            yaml.safe_dump({"groups": groups}, f, sort_keys=False)
        cfg["rule_files"] = [a.rules_out]
    yaml.safe_dump(cfg, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
