#!/usr/bin/env bash
# Issue 13's proof on the real GPU machine (through the device tool; no Kubernetes there): the agent
# with every component on the real H200 (kubelet_emulator as the kubelet, no API server): the
# validation gate opens after the real doctor (cuInit in a child), the plugin advertises the GPU,
# the exporter serves, the labels and the CDI spec are written; its RSS by mapping, whether
# libcuda is mapped (it must not be), CPU over a window; the footprint table of the agent next to
# the separate commands and the Python NVML exporter; MIG read and planned (--dry-run: the GPU
# machine's MIG layout is never changed); the NVML ABI check (MIG structs included) against the
# real nvml.h.
#
#   bash scripts/gpu-proof-agent.sh        on the GPU machine, as root, from the repo root, with
#                                          .gpubundle/ from scripts/bundle-gpu.sh (build/ Release)
#   GPUNODE_PROOF_SIMULATE=1 bash scripts/gpu-proof-agent.sh    here, on a simulated h200-real
# Output: $OUT/agent-proof.tgz and $OUT/agent-transcript.txt (default /tmp/gpunode-out).
set -uo pipefail
SIM=${GPUNODE_PROOF_SIMULATE:-0}
FINAL=${OUT:-/tmp/gpunode-out}
mkdir -p "$FINAL"
W=$(mktemp -d /tmp/gpn-agent-XXXXXX)
L=$W/logs
mkdir -p "$L" "$W/dp"
T=$L/agent-transcript.txt
PIDS=()
FAILED=0
say() { echo "== $*" | tee -a "$T" >&2; }
add() { tee -a "$T" >&2; }
fail() { say "FAIL: $*"; FAILED=1; }
cleanup() {
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill -TERM "${PIDS[i]}" 2>/dev/null; done
  sleep 1
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  cp "$T" "$FINAL/agent-transcript.txt"
  tar -C "$L" -czf "$FINAL/agent-proof.tgz" . 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT

if [ "$SIM" = 1 ]; then
  BIN=${GPUNODE_PROOF_BIN:-build/bin}
  run() { local p=$1; shift; "$BIN/$p" "$@"; }
  spawn() { local p=$1; shift; exec "$BIN/$p" "$@"; }
  G=(--simulate h200-real)
  GP="$BIN/gpunode --simulate h200-real"
  export GPUNODE_SIM_LIBRARY=${GPUNODE_SIM_LIBRARY:-$PWD/$BIN/libgpunode-simnvml.so}
else
  [ "$(id -u)" = 0 ] || { echo "gpu-proof-agent: run as root" >&2; exit 2; }
  run() { .gpubundle/run "$@"; }
  spawn() { exec .gpubundle/run "$@"; }
  G=()
  GP=".gpubundle/run gpunode"
fi
say "agent proof ($([ "$SIM" = 1 ] && echo simulated h200-real || echo real GPU)), $(date -u +%FT%TZ)"
run gpunode --version 2>&1 | add

# ------------------------------------------------------------------ the agent, every component on
cat > "$W/agent.yaml" <<YAML
apiVersion: gpunode/v1
kind: AgentConfig
kubernetes: {enabled: false}
healthListen: 127.0.0.1:19401
cdi: {enabled: true, args: [cdi, generate, --output, $W/nvidia.yaml]}
validator: {enabled: true, cuda: true}
plugin: {kubeletDir: $W/dp}
labels: {nodeLabels: false, featuresFile: $W/features}
exporter: {listen: "127.0.0.1:19400", collectInterval: 1000}
YAML
cp "$W/agent.yaml" "$L/"
spawn kubelet_emulator --dir "$W/dp" --timeout-s 60 --allocate 1 > "$L/kubelet.jsonl" 2>&1 &
PIDS+=($!)
sleep 0.3
t0=$(date +%s.%N)
spawn gpunode "${G[@]}" agent --config "$W/agent.yaml" > "$L/agent.log" 2>&1 &
agent=$!
PIDS+=("$agent")
deadline=$((SECONDS + 60))
until curl -sf --max-time 2 http://127.0.0.1:19401/readyz > "$L/readyz.txt" 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || { fail "agent not ready 60 s after start"; break; }
  kill -0 $agent 2>/dev/null || { fail "the agent exited"; break; }
  sleep 0.05
done
t1=$(date +%s.%N)
say "ready (every component up) $(python3 -c "print(round($t1-$t0,2))") s after start (wall, incl. process start)"
cat "$L/readyz.txt" | add
grep -E "allocatable advertised|ready: every|validator\] (passed|FAILED)|\[cdi\]" "$L/agent.log" | add
sleep 3
grep '"event":"list"' "$L/kubelet.jsonl" | tail -1 | cut -c1-400 | add
grep -q '"health":"Healthy"' "$L/kubelet.jsonl" || fail "the plugin never advertised a Healthy GPU"
curl -s --max-time 2 http://127.0.0.1:19401/metrics > "$L/component-metrics.txt"
curl -s --max-time 2 http://127.0.0.1:19400/metrics > "$L/metrics.txt"
grep -c '^DCGM_FI_' "$L/metrics.txt" | sed 's/^/DCGM_FI_ samples on :9400: /' | add
grep '^gpunode_component_up' "$L/component-metrics.txt" | add
head -5 "$W/features" 2>/dev/null | add
[ -s "$W/nvidia.yaml" ] && cp "$W/nvidia.yaml" "$L/cdi-nvidia.yaml" || fail "no CDI spec written"
cp "$W/features" "$L/features.txt" 2>/dev/null
# Footprint of this running agent (after 10 s of 1 s sampling), and CPU over 30 s.
sleep 7
{ grep -E "VmRSS|RssAnon|RssFile|Threads" /proc/$agent/status
  echo "libcuda mapped: $(grep -c libcuda /proc/$agent/maps)"
  cat /proc/$agent/smaps_rollup; } > "$L/agent-rss.txt" 2>&1
cat "$L/agent-rss.txt" | head -6 | add
# The agent never loads libcuda itself (doctor's CUDA check runs in a child); on a real driver
# libnvidia-ml maps libcuda at nvmlInit_v2 (benchmarks/results/footprint-2026-12-01.md), so only
# the simulated node, whose NVML does not, must show none.
if [ "$SIM" = 1 ]; then grep -q "libcuda mapped: 0" "$L/agent-rss.txt" || fail "libcuda is mapped into the agent"; fi
c0=$(awk '{print $14+$15+$16+$17}' /proc/$agent/stat)
sleep 30
c1=$(awk '{print $14+$15+$16+$17}' /proc/$agent/stat)
say "agent CPU over 30 s (exporter at 1 s, children included): $(python3 -c "print(round(($c1-$c0)/$(getconf CLK_TCK)/30*100,2))") % of a core"
curl -s --max-time 2 http://127.0.0.1:19401/readyz | tail -1 | add
kill -TERM $agent; wait $agent; echo "agent exit $?" | add
tail -3 "$L/agent.log" | add

# ------------------------------------------------------------------ the default intervals
if [ "${AGENT_DEFAULT_CPU:-1}" = 1 ]; then
  say "the agent at the default intervals (exporter 30 s, labels 60 s, validator 5 min): CPU over 60 s"
  sed 's/, collectInterval: 1000//' "$W/agent.yaml" > "$W/agent-default.yaml"
  spawn gpunode "${G[@]}" agent --config "$W/agent-default.yaml" > "$L/agent-default.log" 2>&1 &
  agent=$!
  PIDS+=("$agent")
  sleep 5
  c0=$(awk '{print $14+$15+$16+$17}' /proc/$agent/stat)
  sleep 60
  c1=$(awk '{print $14+$15+$16+$17}' /proc/$agent/stat)
  say "agent CPU over 60 s at the default intervals: $(python3 -c "print(round(($c1-$c0)/$(getconf CLK_TCK)/60*100,3))") % of a core; VmRSS $(awk '/VmRSS/{print $2}' /proc/$agent/status) kB"
  kill -TERM $agent; wait $agent
fi
[ "${AGENT_ONLY_DEFAULT_CPU:-0}" = 1 ] && { [ $FAILED = 0 ] && say "PASS" || say "FAILED"; exit $FAILED; }

# ------------------------------------------------------------------ footprint table, peers
say "footprint: the separate commands, the agent, the Python NVML exporter (settle 8 s, CPU over 20 s)"
peer=--peer
python3 benchmarks/footprint.py --gpunode "$GP" --settle 8 --cpu-window 20 $peer --json "$L/footprint.json" 2>&1 | add

# ------------------------------------------------------------------ MIG: read and plan only
cat > "$W/mig.yaml" <<'YAML'
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.18gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.18gb": 7}
YAML
say "MIG: show, and plan all-1g.18gb with --dry-run (never applied here)"
run gpunode "${G[@]}" mig show 2>&1 | add
run gpunode "${G[@]}" mig apply -f "$W/mig.yaml" -c all-1g.18gb --dry-run 2>&1 | head -30 | add
run gpunode "${G[@]}" mig apply -f "$W/mig.yaml" -c all-1g.18gb 2>&1 | tail -3 | add   # must be refused
run gpunode "${G[@]}" mig show 2>&1 | head -5 > "$L/mig-after.txt"

# ------------------------------------------------------------------ ABI check (MIG structs too)
if [ "$SIM" != 1 ]; then
  scripts/nvml-abi-check.sh > "$L/abi.txt" 2>&1
  say "ABI check"; tail -5 "$L/abi.txt" | add
fi
[ $FAILED = 0 ] && say "PASS" || say "FAILED"
exit $FAILED
