#!/usr/bin/env bash
# Issue 3's proof on the real GPU machine (through the device tool): `gpunode plugin` on the real
# GPUs, registered at a kubelet stand-in over real gRPC (kubelet_emulator: the machine has no
# kubelet), its device list, GetPreferredAllocation, Allocate, a kubelet restart, and its cost
# (start to registration, memory, idle CPU); `gpunode labels --print` on the real node.
# Expects .gpubundle/ from `scripts/bundle-gpu.sh` (gpunode, kubelet_emulator). Output:
# $OUT/plugin.tgz.
set -uo pipefail
FINAL=${OUT:-/tmp/gpunode-out}
mkdir -p "$FINAL"
OUT=$(mktemp -d)
trap 'tar -C "$OUT" -czf "$FINAL/plugin.tgz" . ; ls -la "$OUT"' EXIT
B=.gpubundle/run
W=$(mktemp -d /tmp/gpn-dp-XXXXXX)
ngpu=$(nvidia-smi -L | wc -l)
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1

$B gpunode plugin --print > "$OUT/print.txt" 2>&1; echo "exit $?" >> "$OUT/print.txt"
$B gpunode plugin --print -o json > "$OUT/print.json" 2>&1

# Start the kubelet stand-in first, then the plugin: the emulator's "registered after_ms" is the
# plugin's whole start (process, NVML, topology, gRPC serve, register).
$B kubelet_emulator --dir "$W" --timeout-s 30 --preferred "$ngpu" --allocate 1 --restart > "$OUT/kubelet.jsonl" 2>&1 &
emu=$!
sleep 0.3
$B gpunode plugin --kubelet-dir "$W" > "$OUT/plugin.log" 2>&1 &
plugin=$!
wait $emu; echo "kubelet_emulator exit $?" >> "$OUT/kubelet.jsonl"
# A second emulator keeps the plugin registered while we measure it idle.
$B kubelet_emulator --dir "$W" --timeout-s 30 > "$OUT/kubelet-2.jsonl" 2>&1 &
emu2=$!
sleep 1
pid=$(pgrep -f "bin/gpunode plugin --kubelet-dir $W" | head -1)
t0=$(awk '{print $14+$15}' /proc/$pid/stat); sleep 10; t1=$(awk '{print $14+$15}' /proc/$pid/stat)
{
  echo "pid $pid"
  grep -E 'VmRSS|VmHWM|Threads' /proc/$pid/status
  echo "idle cpu over 10 s: $(( t1 - t0 )) ticks of $(getconf CLK_TCK)/s"
} > "$OUT/footprint.txt"
kill -TERM $plugin; wait $plugin; echo "plugin exit $?" >> "$OUT/plugin.log"
wait $emu2 2>/dev/null
ls -la "$W" > "$OUT/dir-after-stop.txt" 2>&1

# Five cold starts: time from process start to registration, as the kubelet sees it.
for i in 1 2 3 4 5; do
  W2=$(mktemp -d /tmp/gpn-dp-XXXXXX)
  $B kubelet_emulator --dir "$W2" --timeout-s 30 > "$W2.out" 2>&1 &
  e=$!; sleep 0.3
  $B gpunode plugin --kubelet-dir "$W2" > /dev/null 2>&1 &
  p=$!
  wait $e; head -1 "$W2.out" >> "$OUT/cold-starts.jsonl"
  kill -TERM $p; wait $p
done

# The same benchmark as on the dev machine (simulated dgx-h200 over real gRPC), on this CPU.
$B plugin_bench --gpunode "$PWD/.gpubundle/bin/gpunode" --profile data/profiles/dgx-h200.yaml --runs 2000 \
  > "$OUT/plugin-bench-sim-dgx-h200.json" 2>&1

$B gpunode labels --print --no-timestamp > "$OUT/labels.txt" 2>&1; echo "exit $?" >> "$OUT/labels.txt"
$B gpunode labels --print -o json > "$OUT/labels.json" 2>&1
cat "$OUT/plugin-bench-sim-dgx-h200.json" "$OUT/print.txt" "$OUT/kubelet.jsonl" "$OUT/plugin.log" "$OUT/footprint.txt" "$OUT/cold-starts.jsonl" "$OUT/labels.txt"
