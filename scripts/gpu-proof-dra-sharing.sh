#!/usr/bin/env bash
# A DRA claim's sharing settings carried out on the real GPU (issue 29; through the device tool).
# dra_kubelet plays the kubelet, the scheduler and the API server (as in gpu-proof-dra.sh); the real
# `gpunode dra-plugin` prepares, one after the other:
#   1. a claim with NVIDIA's GpuConfig TimeSlicing{interval: Long}: the plugin runs the driver's
#      nvidia-smi (-c DEFAULT, compute-policy --set-timeslice 3); what nvidia-smi reports while it
#      is held and after its unprepare (the slice set back to Default) is kept;
#   2. a claim with MPS{defaultActiveThreadPercentage: 50}: the plugin starts the driver's
#      nvidia-cuda-mps-control for the claim; its control pipe answers 50; a CUDA program (gpunode
#      bench, hbm copy) runs as its client through the claim's pipe folder and the MPS server it
#      spawns is listed; after the unprepare no control daemon is left.
#
#   bash scripts/gpu-proof-dra-sharing.sh   on the GPU machine, as root, with .gpubundle/
#   GPUNODE_PROOF_SIMULATE=1 bash scripts/gpu-proof-dra-sharing.sh   here, on the simulated node
#                                           (the simulated driver's nvidia-smi and MPS control)
# Output: $OUT/dra-sharing-proof.tgz and $OUT/dra-sharing-transcript.txt.
PROOF_NAME=dra-sharing
. "$(dirname "$0")/gpu-proof-lib.sh"

NODE=gpu-node-1
if [ "$SIM" = 1 ]; then
  # The simulated node as a host root: its nvidia-smi and nvidia-cuda-mps-control are the
  # simulated driver's programs; the plugin reads it as its driver root.
  run gpunode sim hostroot h200-real "$W/root" --profile-file "$W/profile.yaml" -q || fail "sim hostroot"
  export GPUNODE_SIM_PROFILE=$W/profile.yaml
  G=(--nvml-library "$GPUNODE_SIM_LIBRARY")
  DRIVER_ROOT=$W/root
  SMI() { LD_PRELOAD=$GPUNODE_SIM_LIBRARY "$W/root/usr/bin/nvidia-smi" "$@"; }
  MPSCTL() { "$W/root/usr/bin/nvidia-cuda-mps-control" "$@"; }
else
  DRIVER_ROOT=/
  SMI() { nvidia-smi "$@"; }
  MPSCTL() { nvidia-cuda-mps-control "$@"; }
fi

# One claim through the real plugin: NAME CONFIG-JSON; leaves the plugin running with the claim
# prepared until $W/NAME/hold exists. Sets K (its folder) and PLUGIN.
claim() {
  local name=$1 config=$2
  K=$W/$name
  # The plugins folder as short as the kubelet's (/var/lib/kubelet/plugins): the MPS daemon's
  # control socket lives below it, and a Unix socket's path has at most 107 bytes.
  P=/tmp/gpnp-$name
  rm -rf "$P"
  mkdir -p "$K/cdi" "$P"
  proof_bg dra_kubelet --dir "$K" --node "$NODE" --hold-file "$K/hold" --timeout-s 120 --config "$config" \
    > "$L/$name-dra_kubelet.jsonl" 2>&1
  for _ in $(seq 100); do [ -s "$K/kubeconfig" ] && break; sleep 0.1; done
  "$(run_path gpunode)" "${G[@]}" dra-plugin --node-name "$NODE" --kubeconfig "$K/kubeconfig" \
    --cdi-root "$K/cdi" --nvidia-driver-root "$DRIVER_ROOT" --disable-hook all \
    --kubelet-registrar-directory-path "$K/reg" --kubelet-plugins-directory-path "$P" \
    > "$L/$name-plugin.log" 2>&1 &
  PIDS+=($!)
  PLUGIN=$!
  for _ in $(seq 600); do grep -q '"event":"prepared"\|"event":"error"' "$L/$name-dra_kubelet.jsonl" && break; sleep 0.1; done
  grep '"event":"prepared"\|"event":"error"' "$L/$name-dra_kubelet.jsonl" | cut -c1-400 | add
}
release() {  # NAME: unprepare, stop the plugin
  touch "$W/$1/hold"
  for _ in $(seq 600); do grep -q '"event":"unprepared"' "$L/$1-dra_kubelet.jsonl" && break; sleep 0.1; done
  grep '"event":"unprepared"' "$L/$1-dra_kubelet.jsonl" | cut -c1-300 | add
  kill -TERM "$PLUGIN" 2>/dev/null
  wait "$PLUGIN" 2>/dev/null
  grep -i 'time slice\|mps\|sharing' "$L/$1-plugin.log" | cut -c1-300 | add
}

say "1. TimeSlicing{interval: Long}"
SMI --query-gpu=index,uuid,compute_mode --format=csv > "$L/ts-before.txt" 2>&1
SMI compute-policy -l > "$L/ts-policy-before.txt" 2>&1
claim ts '{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}}}'
if grep '"event":"prepared"' "$L/ts-dra_kubelet.jsonl" | grep -q '"error":"",'; then
  pass "TimeSlicing claim prepared"
else
  fail "TimeSlicing claim not prepared: $(grep -o '"error":"[^"]*"' "$L/ts-dra_kubelet.jsonl" | head -2)"
fi
{ echo "\$ nvidia-smi --query-gpu=index,uuid,compute_mode --format=csv   (while the claim is prepared)"
  SMI --query-gpu=index,uuid,compute_mode --format=csv 2>&1
  echo "\$ nvidia-smi compute-policy -l"
  SMI compute-policy -l 2>&1; } | tee "$L/ts-held.txt" | add
release ts
{ echo "\$ nvidia-smi compute-policy -l   (after the unprepare)"; SMI compute-policy -l 2>&1; } | tee "$L/ts-after.txt" | add
grep -q 'time slice Long (3)' "$L/ts-plugin.log" && pass "the plugin set the time slice Long (3)" ||
  fail "no time slice set: $(grep -i 'slice\|nvidia-smi' "$L/ts-plugin.log" | tail -3)"
grep -q 'time slice Default (0) again' "$L/ts-plugin.log" && pass "and Default (0) again at unprepare" ||
  fail "the time slice was not set back"

say "2. MPS{defaultActiveThreadPercentage: 50}"
claim mps '{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":50}}}'
grep '"event":"prepared"' "$L/mps-dra_kubelet.jsonl" | grep -q '"error":"",' && pass "MPS claim prepared" ||
  fail "MPS claim not prepared: $(grep -o '"error":"[^"]*"' "$L/mps-dra_kubelet.jsonl" | head -2)"
PIPE=$(ls -d "$P"/gpu.nvidia.com/mps/*/pipe 2>/dev/null | head -1)
if [ -n "$PIPE" ]; then
  cp "$(ls "$W"/mps/cdi/*.yaml | head -1)" "$L/mps-claim-spec.yaml" 2>/dev/null
  pct=$(echo get_default_active_thread_percentage | CUDA_MPS_PIPE_DIRECTORY=$PIPE MPSCTL 2>&1)
  say "the claim's control daemon ($PIPE): get_default_active_thread_percentage -> $pct"
  case $pct in 50*) pass "the claim's daemon has the claim's 50 %" ;; *) fail "active thread percentage '$pct', not 50" ;; esac
  if [ "$SIM" != 1 ]; then
    # A CUDA client through the claim's pipe folder (what the claim's containers get as /tmp/nvidia-mps).
    CUDA_MPS_PIPE_DIRECTORY=$PIPE timeout 120 "$(run_path gpunode)" bench --tests hbm --duration 0.5 -q > "$L/mps-client.txt" 2>&1
    say "gpunode bench --tests hbm as an MPS client: exit $?"
    tail -4 "$L/mps-client.txt" | add
    servers=$(echo get_server_list | CUDA_MPS_PIPE_DIRECTORY=$PIPE MPSCTL 2>&1)
    say "get_server_list -> ${servers:-none}"
    [ -n "$servers" ] && pass "the client ran under the claim's MPS server" || fail "no MPS server was started for the client"
  fi
else
  fail "no MPS pipe folder under the plugins folder"
fi
release mps
rm -rf /tmp/gpnp-ts /tmp/gpnp-mps
sleep 1
left=0  # this proof's daemons: those whose pipe folder is under $W
for p in $(pgrep -f nvidia-cuda-mps-control); do
  tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -q "^CUDA_MPS_PIPE_DIRECTORY=$W/" && left=$((left + 1))
done
say "control daemons left after the unprepare: $left"
[ "$left" = 0 ] && pass "no MPS control daemon left" || fail "$left MPS control daemon(s) left"
[ "$FAILED" = 0 ] && say "PASS" || say "FAILED"
exit "$FAILED"
