# Sourced by test/k8s/e2e_test.sh (needs its fail/ok/step helpers, $ns, $node, $state, $KUBECONFIG):
# the tenant-safety checks of docs/security.md, in the real cluster.

# A pod may not take GPUs it was not given. Under gpunode's OCI runtime shim (RuntimeClass nvidia,
# set up by step 2b) with the chart's volume-mounts strategy: a pod's own NVIDIA_VISIBLE_DEVICES=all
# is ignored (it is unprivileged), so a 1-GPU pod sees exactly its one GPU and a pod without a GPU
# request sees none.
security_pods_under_shim() {
  shim_pod() {  # NAME GPUS (0: no request) COMMAND
    local limits=""
    [ "$2" = 0 ] || limits="resources: {limits: {nvidia.com/gpu: $2}}"
    kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  restartPolicy: Never
  runtimeClassName: nvidia
  containers:
    - name: $1
      image: gpunode.test/busybox:1
      imagePullPolicy: Never
      env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}]
      command: [sh, -c, '$3']
      $limits
YAML
  }
  local cmd='ls /dev | grep -cE "^nvidia[0-9]+$"; ls /dev/nvidiactl 2>/dev/null || echo no-nvidiactl'
  shim_pod greedy 1 "$cmd"
  shim_pod nogpu 0 "$cmd"
  for p in greedy nogpu; do
    kubectl wait --for=jsonpath='{.status.phase}'=Succeeded "pod/$p" --timeout=90s >/dev/null ||
      fail "pod '$p' did not run: $(kubectl get pod "$p" -o jsonpath='{.status}' | head -c 600)"
  done
  local out
  out=$(kubectl logs greedy)
  [ "$(printf '%s\n' "$out" | head -1)" = 1 ] ||
    fail "pod 'greedy' (nvidia.com/gpu: 1, NVIDIA_VISIBLE_DEVICES=all in its env) sees $(printf '%s' "$out" | head -1) GPUs, not 1: $out"
  ok "pod 'greedy' (1 GPU allocated, NVIDIA_VISIBLE_DEVICES=all in its own env, runtime nvidia): sees exactly 1 GPU"
  out=$(kubectl logs nogpu)
  [ "$(printf '%s\n' "$out" | head -1)" = 0 ] && printf '%s\n' "$out" | grep -q '^no-nvidiactl$' ||
    fail "pod 'nogpu' (no GPU request, NVIDIA_VISIBLE_DEVICES=all, runtime nvidia) sees GPUs: $out"
  ok "pod 'nogpu' (no GPU request, NVIDIA_VISIBLE_DEVICES=all, runtime nvidia): no GPU, no /dev/nvidiactl"
  kubectl delete pod greedy nogpu --wait=true >/dev/null
}

# One node's token reaches only that node (templates/node-restriction.yaml): with a token bound to
# the agent's pod, as the agent itself holds, the API server refuses what the agent never needs.
security_node_restriction() {
  local pod server ca token other=gpunode-e2e-other
  pod=$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=gpunode -o jsonpath='{.items[0].metadata.name}')
  server=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
  ca=$state/e2e-ca.crt
  kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d > "$ca"
  [ -s "$ca" ] || cp "$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')" "$ca"
  token=$(kubectl -n "$ns" create token gpunode --bound-object-kind Pod --bound-object-name "$pod" --duration 10m) ||
    fail "kubectl create token for the agent's service account"
  as_agent() { kubectl --kubeconfig=/dev/null --server="$server" --certificate-authority="$ca" --token="$token" "$@"; }
  refused() {  # WHAT EXPECTED-MESSAGE-PART COMMAND...
    local what=$1 want=$2 out
    shift 2
    if out=$(as_agent "$@" 2>&1); then fail "the agent's token could $what: $out"; fi
    case "$out" in
      *"$want"*) ok "the agent's token cannot $what: $(printf '%s' "$out" | sed -n 's/.*denied request: //p' | head -c 140)" ;;
      *) fail "the agent's token was refused to $what, but not by gpunode's policy: $out" ;;
    esac
  }
  local who
  who=$(as_agent auth whoami -o json 2>&1 | python3 -c '
import json, sys
print((json.load(sys.stdin)["status"]["userInfo"].get("extra") or {}).get("authentication.kubernetes.io/node-name", ["-"])[0])' 2>&1)
  [ "$who" = "$node" ] || fail "the agent's bound token does not carry node-name $node: $who"
  as_agent label node "$node" nvidia.com/e2e-probe=1 >/dev/null || fail "the agent's token cannot set a nvidia.com/ label on its own Node"
  as_agent label node "$node" nvidia.com/e2e-probe- >/dev/null || fail "the agent's token cannot remove its nvidia.com/ label"
  ok "the agent's token sets and removes nvidia.com/ labels on its own Node $node"
  refused "set an unrelated label on its own Node" "only labels under nvidia.com/ and gpunode.io/" \
    label node "$node" example.com/attract=yes
  refused "remove a label it does not own" "only labels under nvidia.com/ and gpunode.io/" \
    label node "$node" kubernetes.io/hostname-
  refused "cordon its own Node" "may not change a Node's spec" patch node "$node" --type=merge \
    -p '{"spec":{"unschedulable":true}}'
  refused "taint its own Node" "may not change a Node's spec" patch node "$node" --type=merge \
    -p '{"spec":{"taints":[{"key":"e2e","value":"x","effect":"NoSchedule"}]}}'
  refused "change status.addresses" "may not change a Node's status.addresses" patch node "$node" \
    --subresource=status --type=merge -p '{"status":{"addresses":[{"type":"InternalIP","address":"192.0.2.7"}]}}'
  refused "mark its Node NotReady" "may set only the GpuStackReady condition" patch node "$node" \
    --subresource=status --type=strategic -p '{"status":{"conditions":[{"type":"Ready","status":"False","reason":"E2e","message":"forged"}]}}'
  local cur
  cur=$(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="GpuStackReady")]}')
  as_agent patch node "$node" --subresource=status --type=strategic -p "{\"status\":{\"conditions\":[$cur]}}" >/dev/null ||
    fail "the agent's token cannot set its own GpuStackReady condition"
  ok "the agent's token sets the GpuStackReady condition of its own Node"
  kubectl delete node "$other" --wait=false >/dev/null 2>&1 || true
  kubectl create -f - >/dev/null <<YAML || fail "create Node $other"
apiVersion: v1
kind: Node
metadata: {name: $other, labels: {nvidia.com/gpu.present: "true"}}
YAML
  refused "label another Node" "may change only its own Node" label node "$other" nvidia.com/gpu.product=forged
  refused "remove another Node's label" "may change only its own Node" label node "$other" nvidia.com/gpu.present-
  refused "create an Event about another Node" "may create events only about its own Node" create -n default -f - <<YAML
apiVersion: v1
kind: Event
metadata: {name: e2e-forged, namespace: default}
involvedObject: {kind: Node, name: $other}
reason: Forged
message: forged
type: Warning
YAML
  kubectl delete node "$other" >/dev/null || fail "delete Node $other"
}

# The parts that face the network run apart from the privileged agent (chart's `front` container):
# looked at from the node, as root, through /proc — not from what the pod spec claims.
security_front_container() {
  local front="" agent="" st uid p
  # The pod's own processes (by its cgroup), not a gpunode of some test running beside the cluster.
  uid=$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=gpunode -o jsonpath='{.items[0].metadata.uid}')
  for p in $(pgrep -f 'gpunode'); do
    grep -q "pod$uid" "/proc/$p/cgroup" 2>/dev/null || continue
    case "$(tr '\0' ' ' < "/proc/$p/cmdline")" in
      *"exporter --from-dir"*) front=$p ;;
      *" agent --config"*) agent=$p ;;
    esac
  done
  [ -n "$front" ] || fail "no 'gpunode exporter --from-dir' process on the node"
  [ -n "$agent" ] || fail "no 'gpunode agent' process on the node"
  st=/proc/$front/status
  [ "$(awk '/^Uid:/ {print $2}' "$st")" = 65534 ] || fail "the front runs as uid $(awk '/^Uid:/ {print $2}' "$st"), not 65534"
  for c in CapEff CapPrm CapBnd; do
    [ "$(awk -v c="$c:" '$1 == c {print $2}' "$st")" = 0000000000000000 ] ||
      fail "the front has capabilities: $(grep "^$c" "$st")"
  done
  [ ! -e "/proc/$front/root/var/run/secrets/kubernetes.io/serviceaccount/token" ] ||
    fail "the front container has a service-account token"
  grep -q ' / .* ro,' "/proc/$front/mountinfo" || grep -qE '^[0-9]+ [0-9]+ [0-9:]+ / / ro[, ]' "/proc/$front/mountinfo" ||
    fail "the front's root filesystem is not read-only"
  ok "front (pid $front): uid 65534, no capabilities (effective, permitted, bounding), no token, read-only root"
  local listeners
  listeners=$(nsenter -t "$agent" -n ss -Hltnp 2>/dev/null)
  printf '%s\n' "$listeners" | grep -q "pid=$agent," && fail "the privileged agent listens on TCP: $listeners"
  printf '%s\n' "$listeners" | grep -q "pid=$front," || fail "the front does not listen: $listeners"
  ok "the privileged agent opens no TCP port; the pod's listeners are the front's: $(printf '%s\n' "$listeners" | awk '{print $4}' | tr '\n' ' ')"
}
