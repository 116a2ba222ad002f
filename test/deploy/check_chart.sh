#!/usr/bin/env bash
# Static checks of the Helm chart deploy/helm/gpunode: `helm lint --strict` and `helm template`
# with the default values, simulate mode, monitoring on (ServiceMonitor, PrometheusRule,
# dashboard), a device-plugin config and DRA (dra.enabled: DeviceClasses, RBAC, the ResourceSlice
# policy, the kubelet plugin mounts, the agent's dra section; refused beside the device plugin
# unless dra.alongsideDevicePlugin), the driver manager (driverManager.enabled: the NVIDIADriver CRD
# with NVIDIA's names and rules, the controller Deployment, its RBAC exactly; nothing of it when
# off); every rendered document must parse as YAML
# (python3 yaml.safe_load_all) and carry apiVersion/kind/metadata.name; values.schema.json must
# refuse unknown and out-of-range values; the chart's copies of deploy/monitoring files must be
# identical to them. helm comes from test/k8s/build.sh (built from source with Go, cached).
# Usage: bash test/deploy/check_chart.sh     Exit 0: passed; 1: a check failed; 77: skipped (Go
# or python3-yaml missing and CI unset; with CI=true a missing tool is a failure).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CHART="$ROOT/deploy/helm/gpunode"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok:   $*"; }
missing() {
  if [ "${CI:-}" = true ]; then fail "$* (CI=true: a missing tool is a failure)"; fi
  echo "skip: $*"
  exit 77
}

echo "== gpunode chart checks ($CHART)"
python3 -c 'import yaml' 2>/dev/null || missing "python3 with PyYAML not found (Debian: apt-get install python3-yaml)"
# build.sh prints its bin folder on the last line; it needs Go only when helm is not cached yet.
# Only helm: these checks need nothing else of the test cluster.
rc=0
out=$(bash "$ROOT/test/k8s/build.sh" helm 2> "$WORK/build.log") || rc=$?
if [ "$rc" = 77 ] || { [ "$rc" != 0 ] && ! command -v go >/dev/null; }; then
  missing "Go is not installed, so test/k8s/build.sh cannot build helm ($(tail -n1 "$WORK/build.log"))"
fi
[ "$rc" = 0 ] || fail "test/k8s/build.sh failed ($rc): $(tail -n3 "$WORK/build.log")"
HELM="$(tail -n1 <<< "$out")/helm"
[ -x "$HELM" ] || fail "no helm at $HELM"
echo "     $("$HELM" version --short)"

for f in prometheusrule.yaml grafana-dashboard.json; do
  cmp -s "$ROOT/deploy/monitoring/$f" "$CHART/files/$f" ||
    fail "deploy/helm/gpunode/files/$f differs from deploy/monitoring/$f (copy it: cp deploy/monitoring/$f deploy/helm/gpunode/files/)"
done
ok "files/ matches deploy/monitoring/"

"$HELM" lint --strict "$CHART" > "$WORK/lint.log" 2>&1 || { cat "$WORK/lint.log"; fail "helm lint --strict"; }
ok "helm lint --strict"
"$HELM" lint --strict "$CHART" --set simulate.enabled=true > "$WORK/lint.log" 2>&1 ||
  { cat "$WORK/lint.log"; fail "helm lint --strict (simulate)"; }
ok "helm lint --strict --set simulate.enabled=true"

# name | helm template arguments | kinds that must be rendered
cases=(
  "default||ServiceAccount Service DaemonSet"
  "simulate|--set simulate.enabled=true|ServiceAccount Service DaemonSet"
  "monitoring|--set monitoring.serviceMonitor.enabled=true --set monitoring.prometheusRule.enabled=true --set monitoring.dashboard.enabled=true|ServiceAccount Service DaemonSet ServiceMonitor PrometheusRule ConfigMap"
  "config|--set runtimeConfigure.enabled=true --set-json devicePlugin.config={\"version\":\"v1\",\"sharing\":{\"timeSlicing\":{\"resources\":[{\"name\":\"nvidia.com/gpu\",\"replicas\":4}]}}}|ConfigMap DaemonSet"
  "minimal|--set exporter.enabled=false --set labels.enabled=false --set cdi.enabled=false --set serviceAccount.create=false|DaemonSet"
  "dra|--set dra.enabled=true --set devicePlugin.enabled=false --set-json dra.additionalXidsToIgnore=[79,94]|DeviceClass ValidatingAdmissionPolicy ValidatingAdmissionPolicyBinding ClusterRole DaemonSet ConfigMap"
  "dra-sim|--set simulate.enabled=true --set dra.enabled=true --set devicePlugin.enabled=false --set dra.driverName=gpu.example.com --set dra.extendedResourceName=false --set cdi.enabled=false|DeviceClass DaemonSet"
  "dra-alongside|--set dra.enabled=true --set dra.alongsideDevicePlugin=true --set dra.deviceClasses=false --set nodeRestriction.enabled=false|DaemonSet ConfigMap"
  "driver-manager|--set driverManager.enabled=true|CustomResourceDefinition Deployment ServiceAccount ClusterRole ClusterRoleBinding Role RoleBinding DaemonSet"
  "driver-manager-opts|--set driverManager.enabled=true --set driverManager.crd.install=false --set driverManager.onFailure=continue --set driverManager.rollbackOnFailure=true --set driverManager.resync=30s --set driverManager.replicas=1 --set-json driverManager.tolerations=[{\"operator\":\"Exists\"}]|Deployment ClusterRole"
  "pod-labels|--set exporter.podLabels=true --set exporter.podUid=true --set-json exporter.podLabelAllowlist=[\"^team$\",\"app\"]|ClusterRole ConfigMap DaemonSet"
  "hardened|--set networkPolicy.enabled=true --set-json networkPolicy.metricsFrom=[{\"namespaceSelector\":{\"matchLabels\":{\"kubernetes.io/metadata.name\":\"monitoring\"}}}] --set-json exporter.webConfig={\"basic_auth_users\":{\"prometheus\":\"x\"}}|NetworkPolicy Secret DaemonSet"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name args kinds <<< "$c"
  # shellcheck disable=SC2086
  "$HELM" template gpunode "$CHART" --namespace gpunode $args > "$WORK/$name.yaml" 2> "$WORK/$name.err" ||
    { cat "$WORK/$name.err"; fail "helm template ($name)"; }
  python3 - "$WORK/$name.yaml" "$kinds" <<'PY' || fail "rendered YAML ($name)"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None]
kinds = [d.get("kind") for d in docs]
for d in docs:
    for k in ("apiVersion", "kind"):
        if not d.get(k):
            sys.exit("a document without %s: %r" % (k, d)[:300])
    if not (d.get("metadata") or {}).get("name"):
        sys.exit("a %s without metadata.name" % d["kind"])
for k in sys.argv[2].split():
    if k not in kinds:
        sys.exit("no %s rendered (got %s)" % (k, kinds))
for d in docs:
    if d["kind"] != "DaemonSet":
        continue
    spec = d["spec"]["template"]["spec"]
    containers = spec["containers"] + spec.get("initContainers", [])
    for c in containers:
        mounts = {m["name"] for m in c.get("volumeMounts", [])}
        vols = {v["name"] for v in spec.get("volumes", [])}
        if mounts - vols:
            sys.exit("container %s mounts undefined volumes %s" % (c["name"], mounts - vols))
        if not c.get("resources", {}).get("limits", {}).get("memory"):
            sys.exit("container %s has no memory limit" % c["name"])
print("     %d documents: %s" % (len(docs), " ".join(kinds)))
PY
  ok "helm template ($name)"
done
grep -q 'name: GPUNODE_SIM_PROFILE' "$WORK/simulate.yaml" || fail "simulate mode: no GPUNODE_SIM_PROFILE"
grep -q -- '--device-nodes' "$WORK/simulate.yaml" || fail "simulate mode: no sim hostroot --device-nodes"
grep -q 'GPUNODE_SIM_PROFILE\|libgpunode-simnvml' "$WORK/default.yaml" && fail "default values render simulate-mode settings"
ok "simulate settings only in simulate mode"

# The tenant-safety defaults (docs/security.md) as rendered: the node restriction policy and its
# binding, events only in "default", a device-list strategy a pod cannot forge, the agent with no
# port, the front unprivileged and without token or host path.
python3 - "$WORK/default.yaml" "$WORK/hardened.yaml" <<'PY' || fail "tenant-safety defaults"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
by = lambda kind: [d for d in docs if d["kind"] == kind]
assert by("ValidatingAdmissionPolicy") and by("ValidatingAdmissionPolicyBinding"), "no node restriction policy"
for r in by("ClusterRole"):
    for rule in r.get("rules", []):
        assert "events" not in rule.get("resources", []), "events granted cluster-wide by %s" % r["metadata"]["name"]
assert any(r["metadata"].get("namespace") == "default" and any("events" in x["resources"] for x in r["rules"])
           for r in by("Role")), "no Role for events in namespace default"
agent_cfg = yaml.safe_load(by("ConfigMap")[0]["data"]["agent.yaml"])
assert agent_cfg["plugin"]["deviceListStrategy"] == "cdi-cri", agent_cfg["plugin"]
assert agent_cfg["healthListen"] == "" and agent_cfg["exporter"]["listen"] == "" and agent_cfg["publishDir"]
spec = by("DaemonSet")[0]["spec"]["template"]["spec"]
assert spec.get("automountServiceAccountToken") is False
c = {x["name"]: x for x in spec["containers"]}
assert not c["agent"].get("ports"), "the agent declares ports"
f = c["front"]
sc = f["securityContext"]
assert sc["runAsNonRoot"] and sc["runAsUser"] != 0 and sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add") and not sc.get("privileged")
vols = {v["name"]: v for v in spec["volumes"]}
for m in f["volumeMounts"]:
    v = vols[m["name"]]
    assert "hostPath" not in v and "projected" not in v, "the front mounts %s" % m["name"]
    assert m.get("readOnly"), "the front mounts %s read-write" % m["name"]
hard = [d for d in yaml.safe_load_all(open(sys.argv[2])) if d]
front = [x for d in hard if d["kind"] == "DaemonSet" for x in d["spec"]["template"]["spec"]["containers"] if x["name"] == "front"][0]
assert "--web-config-file" in front["args"], front["args"]
print("     node restriction, events in default, cdi-cri, agent without ports, front unprivileged without token or host path")
PY
ok "tenant-safety defaults as rendered"

# DRA (docs/dra.md): nothing of it by default; with dra.enabled NVIDIA's DeviceClasses and CEL, the
# ResourceSlice and ResourceClaim rules, the policy that keeps each agent to its own node's slices of
# its driver, the kubelet's plugin folders mounted read-write at their host paths, the CDI folder,
# and the agent's dra section; the uninstall hook may delete slices.
python3 - "$WORK" <<'PY' || fail "DRA objects"
import sys, yaml
def load(name):
    return [d for d in yaml.safe_load_all(open("%s/%s.yaml" % (sys.argv[1], name))) if d]
def by(docs, kind):
    return [d for d in docs if d["kind"] == kind]
def agent_cfg(docs):
    return yaml.safe_load([c for c in by(docs, "ConfigMap") if c["metadata"]["name"].endswith("-agent")][0]["data"]["agent.yaml"])
def rules(docs, name_suffix=""):
    out = []
    for r in by(docs, "ClusterRole"):
        if r["metadata"]["name"].endswith(name_suffix):
            out += r.get("rules", [])
    return out
def agent(docs):
    spec = by(docs, "DaemonSet")[0]["spec"]["template"]["spec"]
    return spec, [c for c in spec["containers"] if c["name"] == "agent"][0]

for name in ("default", "simulate", "minimal", "config"):
    docs = load(name)
    assert not by(docs, "DeviceClass"), "%s: DeviceClass rendered" % name
    assert "dra" not in agent_cfg(docs), "%s: the agent config has a dra section" % name
    for rule in rules(docs):
        assert "resource.k8s.io" not in rule.get("apiGroups", []), "%s: resource.k8s.io granted: %r" % (name, rule)
    assert not any("resourceslice" in d["metadata"]["name"] for d in docs), "%s: a ResourceSlice policy" % name
    spec, a = agent(docs)
    vols = {v["name"] for v in spec["volumes"]}
    assert not vols & {"kubelet-plugins", "kubelet-plugins-registry"}, "%s: DRA volumes %s" % (name, vols)

docs = load("dra")
classes = {d["metadata"]["name"]: d for d in by(docs, "DeviceClass")}
assert set(classes) == {"gpu.nvidia.com", "mig.nvidia.com"}, classes.keys()
for n, t in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig")):
    d = classes[n]
    assert d["apiVersion"] == "resource.k8s.io/v1", d["apiVersion"]
    want = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '%s'" % t
    assert d["spec"]["selectors"] == [{"cel": {"expression": want}}], d["spec"]["selectors"]
assert classes["gpu.nvidia.com"]["spec"]["extendedResourceName"] == "nvidia.com/gpu"
assert "extendedResourceName" not in classes["mig.nvidia.com"]["spec"]
verbs = {}
for rule in rules(docs):
    if "resource.k8s.io" in rule["apiGroups"]:
        for r in rule["resources"]:
            verbs.setdefault(r, set()).update(rule["verbs"])
assert verbs.get("resourceslices") == {"get", "list", "watch", "create", "update", "patch", "delete"}, verbs
assert verbs.get("resourceclaims") == {"get", "list", "watch"}, verbs
assert "resourceslices" in str(rules(docs, "-uninstall")), "the uninstall hook may not delete ResourceSlices"
hook = [r for r in rules(docs, "-uninstall") if "resourceslices" in r["resources"]][0]
assert set(hook["verbs"]) == {"list", "delete"}, hook
vap = [d for d in by(docs, "ValidatingAdmissionPolicy") if d["metadata"]["name"].endswith("-resourceslice-restriction")]
assert vap, "no ResourceSlice restriction policy"
vap = vap[0]["spec"]
assert vap["failurePolicy"] == "Fail"
rr = vap["matchConstraints"]["resourceRules"][0]
assert rr["apiGroups"] == ["resource.k8s.io"] and rr["resources"] == ["resourceslices"], rr
assert set(rr["operations"]) == {"CREATE", "UPDATE", "DELETE"}, rr
assert vap["matchConditions"][0]["expression"] == "request.userInfo.username == 'system:serviceaccount:gpunode:gpunode'", vap["matchConditions"]
v = {x["name"]: x["expression"] for x in vap["variables"]}
assert v["driver"] == "'gpu.nvidia.com'" and "authentication.kubernetes.io/node-name" in v["nodeName"], v
exprs = " ".join(x["expression"] for x in vap["validations"])
for s in ("variables.newNode == variables.nodeName", "variables.oldNode == variables.nodeName",
          "variables.newDriver == variables.driver", "variables.oldDriver == variables.driver"):
    assert s in exprs, "the policy does not check %s" % s
assert any(b["spec"]["policyName"].endswith("-resourceslice-restriction") and b["spec"]["validationActions"] == ["Deny"]
           for b in by(docs, "ValidatingAdmissionPolicyBinding")), "no binding of the ResourceSlice policy"
spec, a = agent(docs)
vols = {x["name"]: x for x in spec["volumes"]}
mounts = {m["name"]: m for m in a["volumeMounts"]}
for vol, path in (("kubelet-plugins-registry", "/var/lib/kubelet/plugins_registry"),
                  ("kubelet-plugins", "/var/lib/kubelet/plugins"), ("cdi-specs", "/var/run/cdi")):
    assert vols[vol]["hostPath"]["path"] == path and mounts[vol]["mountPath"] == path, (vols[vol], mounts[vol])
    assert not mounts[vol].get("readOnly"), "%s mounted read-only" % vol
assert "device-plugins" not in mounts, "the device plugin's folder mounted with devicePlugin.enabled=false"
cfg = agent_cfg(docs)
assert cfg["dra"] == {"enabled": True, "driverName": "gpu.nvidia.com", "cdiRoot": "/var/run/cdi",
                      "registrarDir": "/var/lib/kubelet/plugins_registry", "pluginsDir": "/var/lib/kubelet/plugins",
                      "additionalXidsToIgnore": [79, 94], "healthRecovery": "5m", "hookPath": "/usr/bin/gpunode",
                      "driverRoot": "/", "disableHooks": []}, cfg["dra"]
assert cfg["plugin"]["enabled"] is False, cfg["plugin"]

docs = load("dra-sim")
classes = {d["metadata"]["name"]: d for d in by(docs, "DeviceClass")}
gpu = classes["gpu.nvidia.com"]["spec"]
assert gpu["selectors"][0]["cel"]["expression"] == \
    "device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].type == 'gpu'", gpu
assert "extendedResourceName" not in gpu, gpu
cfg = agent_cfg(docs)
assert cfg["dra"]["driverName"] == "gpu.example.com" and cfg["dra"]["additionalXidsToIgnore"] == [], cfg["dra"]
# simulated: the claims' specs name the simulated root's host paths, as the cdi step's, no hooks
assert cfg["dra"]["hostRoot"] == "/" and cfg["dra"]["driverRoot"] == "/var/lib/gpunode/sim" and \
    cfg["dra"]["disableHooks"] == ["all"], cfg["dra"]
spec, a = agent(docs)
assert "cdi-specs" in {m["name"] for m in a["volumeMounts"]}, "dra without cdi.enabled: no CDI folder mounted"
vap = [d for d in by(docs, "ValidatingAdmissionPolicy") if d["metadata"]["name"].endswith("-resourceslice-restriction")][0]
assert {x["name"]: x["expression"] for x in vap["spec"]["variables"]}["driver"] == "'gpu.example.com'"

docs = load("dra-alongside")
assert not by(docs, "DeviceClass"), "dra.deviceClasses=false rendered DeviceClasses"
assert not by(docs, "ValidatingAdmissionPolicy"), "nodeRestriction.enabled=false rendered a policy"
cfg = agent_cfg(docs)
assert cfg["dra"]["enabled"] is True and cfg["plugin"]["enabled"] is True
spec, a = agent(docs)
assert {"device-plugins", "kubelet-plugins", "kubelet-plugins-registry"} <= {m["name"] for m in a["volumeMounts"]}
print("     none by default; DeviceClasses with NVIDIA's CEL and extendedResourceName, RBAC, the slice policy, mounts, agent config")
PY
ok "DRA objects as rendered"
# The driver manager (driverManager.enabled): NVIDIA's NVIDIADriver CRD (names, enums, defaults, the
# CEL rules, the status subresource, kept at uninstall), `gpunode fleet controller` as an
# unprivileged Deployment of the chart's image, and its RBAC exactly as the controller needs it;
# the agents get the ClusterPolicy's policy file (optional ConfigMap mounts and policyFile) with it
# only.
python3 - "$WORK" <<'PY' || fail "driver manager objects"
import sys, yaml
def load(name):
    return [d for d in yaml.safe_load_all(open("%s/%s.yaml" % (sys.argv[1], name))) if d]
def by(docs, kind):
    return [d for d in docs if d["kind"] == kind]
def grants(role):
    out = {}
    for r in role.get("rules", []):
        for g in r["apiGroups"]:
            for res in r["resources"]:
                assert not r.get("resourceNames"), r
                out.setdefault((g, res), set()).update(r["verbs"])
    return out

POLICY_MOUNTS = {"policy": "/etc/gpunode/policy", "policy-device-plugin": "/etc/gpunode/policy-device-plugin",
                 "policy-mig": "/etc/gpunode/policy-mig", "policy-exporter": "/etc/gpunode/policy-exporter"}
def agent_of(docs):
    ds = [d for d in by(docs, "DaemonSet") if any(c["name"] == "agent" for c in d["spec"]["template"]["spec"]["containers"])]
    assert len(ds) == 1, [d["metadata"]["name"] for d in by(docs, "DaemonSet")]
    pod = ds[0]["spec"]["template"]["spec"]
    return pod, [c for c in pod["containers"] if c["name"] == "agent"][0]
def agent_config(docs):
    (cm,) = [d for d in by(docs, "ConfigMap") if d["metadata"]["name"] == "gpunode-agent"]
    return yaml.safe_load(cm["data"]["agent.yaml"])

for name in ("default", "simulate", "minimal", "config", "dra", "hardened"):
    docs = load(name)
    assert not by(docs, "CustomResourceDefinition") and not by(docs, "Deployment"), "%s: driver manager rendered" % name
    assert not any("driver-manager" in d["metadata"]["name"] for d in docs), "%s: a driver-manager object" % name
    pod, agent = agent_of(docs)
    assert not set(POLICY_MOUNTS) & {v["name"] for v in pod["volumes"]}, "%s: policy volumes without the driver manager" % name
    assert "policyFile" not in agent_config(docs), "%s: policyFile without the driver manager" % name
    for r in by(docs, "ClusterRole"):
        assert not any("nvidia.com" in x.get("apiGroups", []) for x in r.get("rules", [])), "%s: nvidia.com granted" % name

docs = load("driver-manager")
crd = by(docs, "CustomResourceDefinition")
assert len(crd) == 1, crd
crd = crd[0]
assert crd["metadata"]["name"] == "nvidiadrivers.nvidia.com"
assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
s = crd["spec"]
assert s["group"] == "nvidia.com" and s["scope"] == "Cluster", s
assert s["names"] == {"kind": "NVIDIADriver", "listKind": "NVIDIADriverList", "plural": "nvidiadrivers",
                      "singular": "nvidiadriver", "shortNames": ["nvd", "nvdriver", "nvdrivers"]}, s["names"]
(v,) = s["versions"]
assert v["name"] == "v1alpha1" and v["served"] and v["storage"] and v["subresources"] == {"status": {}}, v["name"]
cols = {c["jsonPath"]: c for c in v["additionalPrinterColumns"]}
for path in (".status.state", ".spec.version", ".metadata.creationTimestamp"):
    assert path in cols and cols[path].get("priority", 0) == 0, "printer column %s" % path
schema = v["schema"]["openAPIV3Schema"]
spec = schema["properties"]["spec"]
p = spec["properties"]
assert p["driverType"]["enum"] == ["gpu", "vgpu", "vgpu-host-manager"] and p["driverType"]["default"] == "gpu"
assert [x["rule"] for x in p["driverType"]["x-kubernetes-validations"]] == ["self == oldSelf"]
assert [x["rule"] for x in p["usePrecompiled"]["x-kubernetes-validations"]] == ["self == oldSelf"]
assert p["default"] == {"description": p["default"]["description"], "type": "boolean", "default": False}
assert p["kernelModuleType"]["enum"] == ["auto", "open", "proprietary"] and p["kernelModuleType"]["default"] == "auto"
assert p["image"]["default"] == "nvcr.io/nvidia/driver"
rules = [x["rule"] for x in spec["x-kubernetes-validations"]]
assert any("self.default" in r and "size(self.nodeSelector) == 0" in r for r in rules), rules
for f in ("repository", "version", "imagePullPolicy", "imagePullSecrets", "env", "args", "nodeSelector", "tolerations",
          "labels", "annotations", "priorityClassName", "manager", "rdma", "gds", "gdrcopy", "resources",
          "licensingConfig", "kernelModuleConfig", "startupProbe", "nodeAffinity", "podSecurityContext", "hostNetwork"):
    assert f in p, "spec.%s missing" % f
u = p["upgradePolicy"]["properties"]
assert u["autoUpgrade"]["default"] is True and u["maxParallelUpgrades"]["default"] == 1
assert u["maxUnavailable"]["default"] == "25%" and u["maxUnavailable"]["x-kubernetes-int-or-string"] is True
assert u["drain"]["properties"]["timeoutSeconds"]["default"] == 300 and u["drain"]["properties"]["enable"]["default"] is False
assert u["podDeletion"]["properties"]["timeoutSeconds"]["default"] == 300
assert u["waitForCompletion"]["properties"]["timeoutSeconds"]["default"] == 0
st = schema["properties"]["status"]
assert st["x-kubernetes-preserve-unknown-fields"] is True
assert {"state", "conditions", "observedGeneration", "nodes"} <= set(st["properties"]), st["properties"].keys()
assert not any(d["kind"] == "CustomResourceDefinition" and d["metadata"]["name"].startswith("clusterpolicies") for d in docs)

sa = "gpunode-driver-manager"
cr = [r for r in by(docs, "ClusterRole") if r["metadata"]["name"] == sa]
assert len(cr) == 1, [r["metadata"]["name"] for r in by(docs, "ClusterRole")]
want = {("", "nodes"): {"get", "list", "watch", "patch"}, ("", "nodes/status"): {"patch"},
        ("", "pods"): {"get", "list", "watch", "delete"}, ("", "pods/eviction"): {"create"},
        ("policy", "poddisruptionbudgets"): {"list", "watch"},
        ("nvidia.com", "nvidiadrivers"): {"get", "list", "watch"},
        ("nvidia.com", "nvidiadrivers/status"): {"get", "update", "patch"},
        ("nvidia.com", "clusterpolicies"): {"get", "list", "watch"},
        ("nvidia.com", "clusterpolicies/status"): {"get", "patch"},
        ("", "configmaps"): {"get"}}
assert grants(cr[0]) == want, grants(cr[0])
roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in by(docs, "Role") if r["metadata"]["name"].startswith(sa)}
assert set(roles) == {("gpunode", sa), ("default", sa + "-events")}, roles.keys()
want = {("apps", "daemonsets"): {"get", "list", "watch", "create", "update", "patch", "delete"},
        ("apps", "controllerrevisions"): {"get", "list"}, ("coordination.k8s.io", "leases"): {"get", "create", "update"},
        ("", "configmaps"): {"get", "create", "update", "patch", "delete"}, ("", "events"): {"create", "patch"}}
assert grants(roles[("gpunode", sa)]) == want, grants(roles[("gpunode", sa)])
assert grants(roles[("default", sa + "-events")]) == {("", "events"): {"create", "patch"}}
binds = [b for b in by(docs, "ClusterRoleBinding") + by(docs, "RoleBinding") if b["metadata"]["name"].startswith(sa)]
assert len(binds) == 3, [b["metadata"]["name"] for b in binds]
for b in binds:
    assert b["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": "gpunode"}], b
    assert b["roleRef"]["name"] == b["metadata"]["name"], b
# the agents' account gets nothing of it
for r in by(docs, "ClusterRole") + by(docs, "Role"):
    if not r["metadata"]["name"].startswith(sa):
        assert not any("nvidia.com" in x.get("apiGroups", []) or "pods" in x.get("resources", []) for x in r.get("rules", [])), r["metadata"]["name"]
assert any(x["metadata"]["name"] == sa for x in by(docs, "ServiceAccount"))

(dep,) = by(docs, "Deployment")
assert dep["metadata"]["name"] == sa and dep["metadata"]["namespace"] == "gpunode" and dep["spec"]["replicas"] == 2
pod = dep["spec"]["template"]["spec"]
assert pod["serviceAccountName"] == sa
assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("volumes"), pod
(c,) = pod["containers"]
ds = by(docs, "DaemonSet")[0]
agent = [x for x in ds["spec"]["template"]["spec"]["containers"] if x["name"] == "agent"][0]
assert c["image"] == agent["image"], (c["image"], agent["image"])
assert c["args"] == ["fleet", "controller", "--namespace", "gpunode", "--lease-name", sa, "--on-failure", "halt",
                     "--resync", "10s", "--agent-policy-configmap", "gpunode-agent-policy"], c["args"]
# A ClusterPolicy's node settings reach the agents: the ConfigMaps the controller writes, mounted
# optional (none until it writes them) where src/upgrade/cluster_policy.h says, and policyFile.
pod, agent_c = agent_of(docs)
vols = {v["name"]: v for v in pod["volumes"]}
for vol, path in POLICY_MOUNTS.items():
    cm_name = "gpunode-agent-" + vol
    assert vols[vol]["configMap"] == {"name": cm_name, "optional": True}, vols[vol]
    (m,) = [x for x in agent_c["volumeMounts"] if x["name"] == vol]
    assert m["mountPath"] == path and m["readOnly"] is True, m
assert agent_config(docs)["policyFile"] == "/etc/gpunode/policy/policy.yaml"
sc = c["securityContext"]
assert sc["runAsNonRoot"] and sc["runAsUser"] != 0 and sc["readOnlyRootFilesystem"] and sc["allowPrivilegeEscalation"] is False
assert sc["capabilities"] == {"drop": ["ALL"]} and not sc.get("privileged"), sc
assert c["resources"] == {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}}, c["resources"]
labels = dep["spec"]["template"]["metadata"]["labels"]
assert labels.get("nvidia.com/gpu-driver-upgrade-drain.skip") == "true", labels
sel = ds["spec"]["selector"]["matchLabels"]
assert not all(labels.get(k) == v for k, v in sel.items()), "the DaemonSet's selector %s matches the controller's pods" % sel
for svc in by(docs, "Service"):
    assert not all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()), "Service %s selects the controller" % svc["metadata"]["name"]
assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()

docs = load("driver-manager-opts")
assert not by(docs, "CustomResourceDefinition"), "driverManager.crd.install=false rendered the CRD"
(dep,) = by(docs, "Deployment")
assert dep["spec"]["replicas"] == 1
c = dep["spec"]["template"]["spec"]["containers"][0]
assert c["args"][6:] == ["--on-failure", "continue", "--rollback-on-failure", "--resync", "30s",
                         "--agent-policy-configmap", "gpunode-agent-policy"], c["args"]
assert dep["spec"]["template"]["spec"]["tolerations"] == [{"operator": "Exists"}]
print("     none when off; the CRD (NVIDIA's names, enums, defaults, CEL), the Deployment, RBAC exactly")
PY
ok "driver manager objects as rendered"
# dra.enabled beside the device plugin is refused, with the way out in the message.
if "$HELM" template gpunode "$CHART" --set dra.enabled=true > /dev/null 2> "$WORK/dra-both.err"; then
  fail "dra.enabled with devicePlugin.enabled rendered without dra.alongsideDevicePlugin"
fi
for want in "dra.enabled=true with devicePlugin.enabled=true" "--set devicePlugin.enabled=false" "--set dra.alongsideDevicePlugin=true"; do
  grep -qF -- "$want" "$WORK/dra-both.err" || { cat "$WORK/dra-both.err"; fail "the refusal does not say: $want"; }
done
ok "dra.enabled beside the device plugin refused: $(grep -m1 -o 'dra.enabled=true with devicePlugin.enabled=true[^:]*' "$WORK/dra-both.err")"

# Pod labels and UID (docs/exporter.md): `get` on pods only with exporter.podLabels or podUid, and
# nothing else on pods; the agent's exporter section carries them.
python3 - "$WORK" <<'PY' || fail "exporter pod labels"
import sys, yaml
def load(name):
    return [d for d in yaml.safe_load_all(open("%s/%s.yaml" % (sys.argv[1], name))) if d]
def pod_rules(docs):
    return [rule for r in docs if r["kind"] in ("ClusterRole", "Role") and not r["metadata"]["name"].endswith("-driver-manager")
            for rule in r.get("rules", []) if "pods" in rule.get("resources", [])]
def exporter_cfg(docs):
    cm = [c for c in docs if c["kind"] == "ConfigMap" and c["metadata"]["name"].endswith("-agent")][0]
    return yaml.safe_load(cm["data"]["agent.yaml"])["exporter"]
for name in ("default", "simulate", "monitoring", "dra"):
    docs = load(name)
    assert not pod_rules(docs), "%s: pods granted: %r" % (name, pod_rules(docs))
    assert "podLabels" not in exporter_cfg(docs), name
docs = load("pod-labels")
assert pod_rules(docs) == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}], pod_rules(docs)
e = exporter_cfg(docs)
assert e["podLabels"] is True and e["podUid"] is True and e["podLabelAllowlist"] == ["^team$", "app"], e
print("     get on pods only with exporter.podLabels/podUid; the agent's exporter section carries them")
PY
ok "exporter pod labels as rendered"
if "$HELM" template gpunode "$CHART" --set exporter.podLabels=true --set serviceAccount.create=false > /dev/null 2> "$WORK/pl.err"; then
  fail "exporter.podLabels without a service account rendered"
fi
grep -qF "exporter.podLabels / exporter.podUid read pods from the API server" "$WORK/pl.err" || { cat "$WORK/pl.err"; fail "the refusal does not say why"; }
ok "exporter.podLabels without a service account refused"

# The schema refuses what it should.
for bad in "--set bogus=1" "--set exporter.port=0" "--set devicePlugin.migStrategy=weird" \
           "--set image.pullPolicy=Sometimes" "--set labels.sleepInterval=soon" "--set simulate.hostDir=relative" \
           "--set dra.driverName=1" "--set dra.driverName=GPU_nvidia" "--set dra.kubeletPluginsDir=plugins" \
           "--set-json dra.additionalXidsToIgnore=[\"79\"]" "--set dra.deviceClasses=yes" \
           "--set driverManager.onFailure=stop" "--set driverManager.resync=soon" "--set driverManager.replicas=0" \
           "--set driverManager.rollbackOnFailure=yes" "--set driverManager.crd.bogus=1" \
           "--set exporter.podLabels=yes" "--set-json exporter.podLabelAllowlist=[1]" "--set exporter.podUid=1"; do
  # shellcheck disable=SC2086
  if "$HELM" template gpunode "$CHART" $bad > /dev/null 2> "$WORK/bad.err"; then
    fail "values.schema.json accepted $bad"
  fi
done
ok "values.schema.json refuses unknown keys and bad values"
echo "== all chart checks passed"
