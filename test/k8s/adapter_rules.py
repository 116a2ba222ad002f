#!/usr/bin/env python3
"""Render prometheus-adapter's config file from a Helm values file.

    test/k8s/adapter_rules.py VALUES.yaml > config.yaml
    test/k8s/adapter_rules.py --args VALUES.yaml     # the chart's Prometheus flags, one a line

The monitoring test (test/k8s/e2e_monitoring.sh) runs prometheus-adapter as a plain process with
--config=config.yaml instead of installing its Helm chart; this script produces the same config.yaml
the chart would put in its ConfigMap, so the test exercises deploy/monitoring/prometheus-adapter-values.yaml
itself.

Source of the rendering rules: the prometheus-community/helm-charts chart `prometheus-adapter`
(chart 5.3.0, appVersion v0.12.0), templates/configmap.yaml (named custom-metrics-configmap.yaml in
older chart versions; unchanged since helm-charts commit bf6ee8e1c9a6040363965b1882b94a7ce2b23925)
and values.yaml. What that template does, and so what this script does:
  - rules.existing set: the chart renders no ConfigMap (it mounts the named one); an error here.
  - `rules:` is written when rules.default or rules.custom is non-empty (Helm truthiness); it holds
    the chart's six built-in rules when rules.default is true (the chart's values.yaml default is
    `default: true`, so a values file that leaves it out gets them), followed by rules.custom.
  - `externalRules:` is rules.external when non-empty.
  - `resourceRules:` is rules.resource (a mapping: cpu, memory, nodeQuery..., window) when non-empty.
The field names are those of the adapter's own config (sigs.k8s.io/prometheus-adapter
pkg/config/config.go: rules, externalRules, resourceRules). Like Helm's toYaml, mappings are written
with sorted keys.

With --args it prints instead the two flags the chart's templates/deployment.yaml derives from the
values besides --config: --prometheus-url=<prometheus.url>[:<prometheus.port>]<prometheus.path> and
--metrics-relist-interval=<metricsRelistInterval> (chart defaults http://prometheus.default.svc, 9090,
"" and 1m), so a test running the adapter as a process passes what the chart would.

Exit status: 0 with the config on stdout; 2 on bad input (unreadable, not YAML, not a mapping, no
rules, rules of the wrong shape), with a message naming the problem on stderr.
"""
import sys

try:
    import yaml
except ImportError:  # python3-yaml (Debian), installed by scripts/install-deps.sh
    sys.stderr.write("adapter_rules: PyYAML is missing (Debian package python3-yaml)\n")
    sys.exit(2)

MAX_BYTES = 1 << 20  # a values file is a few KiB; refuse anything absurd

# The chart's built-in rules (templates/configmap.yaml, the `if .Values.rules.default` block),
# verbatim as data.
DEFAULT_RULES_YAML = r"""
- seriesQuery: '{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}'
  seriesFilters: []
  resources:
    overrides:
      namespace:
        resource: namespace
      pod:
        resource: pod
  name:
    matches: ^container_(.*)_seconds_total$
    as: ""
  metricsQuery: sum(rate(<<.Series>>{<<.LabelMatchers>>,container!="POD"}[5m]))
    by (<<.GroupBy>>)
- seriesQuery: '{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}'
  seriesFilters:
  - isNot: ^container_.*_seconds_total$
  resources:
    overrides:
      namespace:
        resource: namespace
      pod:
        resource: pod
  name:
    matches: ^container_(.*)_total$
    as: ""
  metricsQuery: sum(rate(<<.Series>>{<<.LabelMatchers>>,container!="POD"}[5m]))
    by (<<.GroupBy>>)
- seriesQuery: '{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}'
  seriesFilters:
  - isNot: ^container_.*_total$
  resources:
    overrides:
      namespace:
        resource: namespace
      pod:
        resource: pod
  name:
    matches: ^container_(.*)$
    as: ""
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>,container!="POD"}) by (<<.GroupBy>>)
- seriesQuery: '{namespace!="",__name__!~"^container_.*"}'
  seriesFilters:
  - isNot: .*_total$
  resources:
    template: <<.Resource>>
  name:
    matches: ""
    as: ""
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
- seriesQuery: '{namespace!="",__name__!~"^container_.*"}'
  seriesFilters:
  - isNot: .*_seconds_total
  resources:
    template: <<.Resource>>
  name:
    matches: ^(.*)_total$
    as: ""
  metricsQuery: sum(rate(<<.Series>>{<<.LabelMatchers>>}[5m])) by (<<.GroupBy>>)
- seriesQuery: '{namespace!="",__name__!~"^container_.*"}'
  seriesFilters: []
  resources:
    template: <<.Resource>>
  name:
    matches: ^(.*)_seconds_total$
    as: ""
  metricsQuery: sum(rate(<<.Series>>{<<.LabelMatchers>>}[5m])) by (<<.GroupBy>>)
"""

# Keys of one discovery rule (pkg/config/config.go DiscoveryRule); metricsQuery and seriesQuery are
# required by the adapter, the rest optional.
RULE_KEYS = {"seriesQuery", "seriesFilters", "resources", "name", "metricsQuery"}


class BadInput(Exception):
    pass


def truthy(v):
    """Helm's `if`: false for nil, false, 0, "" and empty lists/maps."""
    return not (v is None or v is False or v == 0 or v == "" or v == [] or v == {})


def sort_keys(v):
    if isinstance(v, dict):
        return {k: sort_keys(v[k]) for k in sorted(v, key=str)}
    if isinstance(v, list):
        return [sort_keys(x) for x in v]
    return v


def check_rules(where, rules):
    if not isinstance(rules, list):
        raise BadInput(f"{where} must be a list of rules, not {type(rules).__name__}")
    for i, r in enumerate(rules):
        if not isinstance(r, dict):
            raise BadInput(f"{where}[{i}] must be a mapping, not {type(r).__name__}")
        for k in ("seriesQuery", "metricsQuery"):
            if not isinstance(r.get(k), str) or not r[k].strip():
                raise BadInput(f"{where}[{i}] has no {k} (a non-empty string)")
        unknown = sorted(set(map(str, r)) - RULE_KEYS)
        if unknown:
            raise BadInput(f"{where}[{i}] has unknown keys {unknown} (allowed: {sorted(RULE_KEYS)})")


def render(values):
    if not isinstance(values, dict):
        raise BadInput(f"the values file must be a YAML mapping, not {type(values).__name__}")
    rules = values.get("rules")
    if not isinstance(rules, dict):
        raise BadInput("the values file has no `rules:` mapping")
    if truthy(rules.get("existing")):
        raise BadInput(f"rules.existing is set ({rules['existing']!r}): the chart renders no config, "
                       "it mounts that ConfigMap")
    default = rules.get("default", True)  # the chart's values.yaml: default: true
    custom = rules.get("custom")
    external = rules.get("external")
    resource = rules.get("resource")
    out = {}
    if truthy(default) or truthy(custom):
        lst = []
        if truthy(default):
            lst += yaml.safe_load(DEFAULT_RULES_YAML)
        if truthy(custom):
            check_rules("rules.custom", custom)
            lst += custom
        out["rules"] = lst
    if truthy(external):
        check_rules("rules.external", external)
        out["externalRules"] = external
    if truthy(resource):
        if not isinstance(resource, dict):
            raise BadInput(f"rules.resource must be a mapping, not {type(resource).__name__}")
        out["resourceRules"] = resource
    if not out:
        raise BadInput("no rules: rules.default is false and rules.custom, rules.external and "
                       "rules.resource are empty")
    return {k: sort_keys(v) for k, v in out.items()}


def chart_args(values):
    """The chart's --prometheus-url and --metrics-relist-interval (templates/deployment.yaml)."""
    if not isinstance(values, dict):
        raise BadInput(f"the values file must be a YAML mapping, not {type(values).__name__}")
    prom = values.get("prometheus", {})
    if not isinstance(prom, dict):
        raise BadInput("prometheus must be a mapping (url, port, path)")
    url = prom.get("url", "http://prometheus.default.svc")
    port = prom.get("port", 9090)
    path = prom.get("path", "")
    relist = values.get("metricsRelistInterval", "1m")
    for name, v in (("prometheus.url", url), ("prometheus.path", path), ("metricsRelistInterval", relist)):
        if not isinstance(v, str):
            raise BadInput(f"{name} must be a string, not {type(v).__name__}")
        if "{{" in v:
            raise BadInput(f"{name} is a Helm template ({v!r}); render it with helm instead")
    if not url:
        raise BadInput("prometheus.url is empty")
    if port is not None and not isinstance(port, (int, str)):
        raise BadInput(f"prometheus.port must be a number, not {type(port).__name__}")
    full = url + (f":{port}" if truthy(port) else "") + (path or "")
    return [f"--prometheus-url={full}", f"--metrics-relist-interval={relist}"]


def main(argv):
    args = argv[1:]
    want_args = bool(args) and args[0] == "--args"
    if want_args:
        args = args[1:]
    if len(args) != 1 or args[0] in ("-h", "--help"):
        sys.stderr.write("usage: adapter_rules.py [--args] VALUES.yaml\n")
        return 0 if args in (["-h"], ["--help"]) else 2
    path = args[0]
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise BadInput(f"larger than {MAX_BYTES} bytes")
        try:
            values = yaml.safe_load(data.decode("utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise BadInput("not YAML: " + " ".join(str(e).split()))
        if want_args:
            print("\n".join(chart_args(values)))
            return 0
        config = render(values)
    except OSError as e:
        sys.stderr.write(f"adapter_rules: {path}: {e.strerror}\n")
        return 2
    except BadInput as e:
        sys.stderr.write(f"adapter_rules: {path}: {e}\n")
        return 2
    sys.stdout.write(f"# prometheus-adapter config rendered by test/k8s/adapter_rules.py from {path!r}\n")
    sys.stdout.write(yaml.safe_dump(config, sort_keys=False, default_flow_style=False, width=1 << 16))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
