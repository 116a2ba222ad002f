#!/usr/bin/env bash
# The driver-upgrade controller's hardware-facing part on the real GPU (issue 30; through the device
# tool; no Kubernetes there): the gate a node's upgrade waits for is the node's own agent.
#   1. the agent (validator and labels only, no API server) on the real H200: its validator runs
#      gpunode doctor (cuInit in a child) and passes with the message the controller reads —
#      "... checks passed (gpunode doctor) on driver <the real driver's version>" — and its labels
#      say the same version (nvidia.com/cuda.driver-version.full, in NFD's features file);
#   2. the Node the controller would read is built from those labels and that condition: `gpunode
#      fleet drain-plan` plans it for a newer driver in the controller's order and `gpunode fleet`
#      reads it. (The driver itself is not changed on this machine: the upgrade's steps run on the
#      test cluster, test/k8s/e2e_upgrade.sh, with a driver container that changes the simulated one.)
#
#   bash scripts/gpu-proof-upgrade.sh        on the GPU machine, as root, with .gpubundle/
#   GPUNODE_PROOF_SIMULATE=1 bash scripts/gpu-proof-upgrade.sh   here, on the simulated h200-real node
# Output: $OUT/upgrade-proof.tgz and $OUT/upgrade-transcript.txt.
PROOF_NAME=upgrade
. "$(dirname "$0")/gpu-proof-lib.sh"

cat > "$W/agent.yaml" <<YAML
apiVersion: gpunode/v1
kind: AgentConfig
kubernetes: {enabled: false}
healthListen: 127.0.0.1:19411
validator: {enabled: true, cuda: true}
plugin: {enabled: false}
exporter: {enabled: false}
labels: {nodeLabels: false, featuresFile: $W/features}
YAML
cp "$W/agent.yaml" "$L/"
say "1. the agent's validator and labels on this node"
t0=$(date +%s.%N)
proof_bg gpunode "${G[@]}" agent --config "$W/agent.yaml" > "$L/agent.log" 2>&1
for _ in $(seq 600); do grep -q "\[validator\] passed\|\[validator\] FAILED" "$L/agent.log" && [ -s "$W/features" ] && break; sleep 0.1; done
grep "\[validator\]" "$L/agent.log" | head -3 | add
line=$(grep "\[validator\] passed" "$L/agent.log" | head -1)
driver=$(sed -n 's/^nvidia.com\/cuda.driver-version.full=//p' "$W/features")
echo "features file: $(grep -c . "$W/features") labels; nvidia.com/cuda.driver-version.full=$driver" | add
if [ -n "$line" ] && [ -n "$driver" ] && echo "$line" | grep -q "on driver $driver\$"; then
  pass "validator passed on driver $driver ($(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s after the agent started); the labels name the same driver"
else
  fail "no pass naming driver '$driver' (log above)"
fi
message=$(echo "$line" | sed 's/.*AllChecksPassed: //')

say "2. the Node the controller would read: drain-plan to a newer driver, fleet"
python3 - "$W/features" "$message" > "$W/nodes.json" <<'PY' || fail "NodeList"
import json, sys
labels = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if "=" in line:
        k, v = line.split("=", 1)
        labels[k] = v
labels["nvidia.com/gpu-operator.driver.owner"] = "h200"
labels["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-done"
node = {"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "h200-node", "labels": labels},
        "status": {"conditions": [{"type": "Ready", "status": "True"},
                                  {"type": "GpuStackReady", "status": "True", "reason": "AllChecksPassed",
                                   "message": sys.argv[2]}],
                   "capacity": {"nvidia.com/gpu": labels.get("nvidia.com/gpu.count", "1")},
                   "allocatable": {"nvidia.com/gpu": labels.get("nvidia.com/gpu.count", "1")}}}
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]}))
PY
cp "$W/nodes.json" "$L/"
run gpunode fleet drain-plan --from "$W/nodes.json" --to-driver 590.44.01 --max-unavailable 1 2>&1 | add
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] && pass "drain-plan: the node planned for 590.44.01 (exit 0)" || fail "drain-plan exited $rc"
run gpunode fleet --from "$W/nodes.json" --nodes 2>&1 | head -20 | add
exit $FAILED
