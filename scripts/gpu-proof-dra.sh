#!/usr/bin/env bash
# gpunode as a DRA driver on the real GPU machine (through the device tool; issue 29): there is no
# Kubernetes there, so dra_kubelet (test/tools/dra_kubelet_main.cc) plays the kubelet's DRA manager,
# the scheduler's allocation and an API server stand-in. The real `gpunode dra-plugin`:
#   - prints and publishes the real GPU's ResourceSlice (NVIDIA's names and attributes);
#   - registers through the plugin registry, is asked to prepare a claim allocated to the GPU, and
#     writes the claim's CDI spec; a container (real runc through `gpunode oci-runtime`, the
#     kubelet's CDI annotation naming the claim's device) runs `nvidia-smi -L` through it;
#   - prepares and unprepares 100 more claims (p50/p99 at the gRPC level) and unprepares the first:
#     no spec file is left.
#
#   bash scripts/gpu-proof-dra.sh    on the GPU machine, as root, from the repo root, with
#                                    .gpubundle/ from `scripts/bundle-gpu.sh --with-runc`
#   GPUNODE_PROOF_SIMULATE=1 bash scripts/gpu-proof-dra.sh    here, on the simulated h200-real
#                                    (no container: that needs the GPU)
# Output: $OUT/dra-proof.tgz and $OUT/dra-transcript.txt (default /tmp/gpunode-out).
PROOF_NAME=dra
. "$(dirname "$0")/gpu-proof-lib.sh"

NODE=gpu-node-1
K=$W/k
mkdir -p "$K" "$W/cdi"
# The spec's hooks are run by runc with the spec's env only: a wrapper that finds the bundle's
# libraries (on a real install gpunode is a plain binary on the host).
cat > "$W/gpunode-hook" <<EOF
#!/bin/sh
LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} exec $(run_path gpunode) "\$@"
EOF
chmod +x "$W/gpunode-hook"

run gpunode "${G[@]}" dra-plugin --print > "$L/dra-print.txt" 2>&1 || fail "dra-plugin --print: $(tail -2 "$L/dra-print.txt")"
add < "$L/dra-print.txt"
run gpunode "${G[@]}" dra-plugin --print -o yaml --node-name "$NODE" > "$L/resourceslice.yaml" 2>&1 ||
  fail "dra-plugin --print -o yaml"

proof_bg dra_kubelet --dir "$K" --node "$NODE" --bench 100 --hold-file "$W/hold" --timeout-s 60 > "$L/dra_kubelet.jsonl" 2>&1
for _ in $(seq 100); do [ -s "$K/kubeconfig" ] && break; sleep 0.1; done
[ -s "$K/kubeconfig" ] || fail "dra_kubelet wrote no kubeconfig: $(cat "$L/dra_kubelet.jsonl")"
"$(run_path gpunode)" "${G[@]}" dra-plugin --node-name "$NODE" --kubeconfig "$K/kubeconfig" \
  --cdi-root "$W/cdi" --kubelet-registrar-directory-path "$K/reg" --kubelet-plugins-directory-path "$K/plugins" \
  --hook-path "$W/gpunode-hook" > "$L/dra-plugin.log" 2> "$L/dra-plugin.stderr" &
PIDS+=($!)
PLUGIN=$!
for _ in $(seq 600); do grep -q '"event":"prepared"\|"event":"error"' "$L/dra_kubelet.jsonl" && break; sleep 0.1; done
grep '"event":"registered"\|"event":"prepared"\|"event":"error"' "$L/dra_kubelet.jsonl" | cut -c1-400 | add
CDI_ID=$(sed -n 's/.*"cdiDeviceIDs":\["\([^"]*\)".*/\1/p' "$L/dra_kubelet.jsonl" | head -1)
[ -n "$CDI_ID" ] && pass "claim prepared: $CDI_ID" || fail "no CDI device for the claim: $(tail -3 "$L/dra_kubelet.jsonl")"
SPEC=$(ls "$W"/cdi/k8s.gpu.nvidia.com-claim_*.yaml 2>/dev/null | head -1)
[ -n "$SPEC" ] && cp "$SPEC" "$L/claim-spec.yaml" && say "the claim's CDI spec: $(basename "$SPEC")"

if [ "$SIM" != 1 ] && [ -n "$CDI_ID" ]; then
  export PATH=$PWD/.gpubundle/bin:$PATH
  nvidia-smi -L > "$L/host-nvidia-smi-L.txt" 2>&1
  CMD='export PATH=$PATH:/usr/local/nvidia/bin; echo "nodes=$(ls /dev | grep -E "^nvidia[0-9]+$" | tr "\n" " ")"; nvidia-smi -L'
  oci_bundle "$W/b1" "$CMD" --annotation "cdi.k8s.io/gpunode-dra_proof=$CDI_ID" || fail "bundle"
  out=$(GPUNODE_OCI_LOG="$L/shim.log" .gpubundle/run gpunode oci-runtime --runtime-path runc --spec-dir "$W/cdi" \
        run --bundle "$W/b1" gpn-dra-1 2>&1)
  rc=$?
  run runc delete -f gpn-dra-1 >/dev/null 2>&1
  printf '%s\nexit %s\n' "$out" "$rc" > "$L/container.txt"
  add < "$L/container.txt"
  host_gpu=$(head -1 "$L/host-nvidia-smi-L.txt")
  if [ "$rc" = 0 ] && printf '%s' "$out" | grep -qF "$(printf '%s' "$host_gpu" | sed 's/^GPU [0-9]*: //')"; then
    pass "the container sees the claim's GPU through its CDI spec"
  else
    fail "the container did not see the GPU (exit $rc)"
  fi
fi
touch "$W/hold"
for _ in $(seq 600); do grep -q '"event":"unprepared"' "$L/dra_kubelet.jsonl" && break; sleep 0.1; done
grep '"event":"bench"\|"event":"unprepared"' "$L/dra_kubelet.jsonl" | add
grep -q '"event":"bench"' "$L/dra_kubelet.jsonl" || fail "no benchmark line"
grep '"event":"unprepared"' "$L/dra_kubelet.jsonl" | grep -q '"ok":true' && pass "unprepared" || fail "unprepare failed"
left=$(ls "$W"/cdi 2>/dev/null | grep -c claim_)
[ -n "$CDI_ID" ] && [ "$left" = 0 ] && pass "no claim spec left after 101 prepares and unprepares" || fail "$left claim spec(s) left"
sleep 1
say "dra-plugin after the run: $(grep -E '^(VmHWM|VmRSS)' /proc/$PLUGIN/status | tr -s ' \t' ' ' | tr '\n' ' ')cpu $(awk '{print ($14+$15)/100 " s"}' /proc/$PLUGIN/stat)"
kill -TERM "$PLUGIN" 2>/dev/null
wait "$PLUGIN" 2>/dev/null
say "dra-plugin exited $?"
cat "$L/dra-plugin.log" "$L/dra-plugin.stderr" | grep -v NodePrepareResources | tail -8 | add
[ "$FAILED" = 0 ] && say "PASS" || say "FAILED"
exit "$FAILED"
