#!/usr/bin/env bash
# Issue 15 on the GPU machine (through the device tool): NVIDIA's components and gpunode side by
# side, on the real H200 and on simulated nodes run by this machine's CPU.
#   1. the simulated NVML's exports against the real libnvidia-ml.so.1 (scripts/gpu-nvml-exports.sh)
#   2. the real node: gpu-feature-discovery --oneshot vs gpunode labels --oneshot; nvidia-ctk cdi
#      generate vs gpunode cdi generate; NVIDIA's device plugin vs gpunode's through plugin_probe
#   3. benchmarks/peers_bench.py on dgx-h200 and the 16-GPU node (simulated, this CPU)
# Expects .gpubundle/ from scripts/bundle-gpu.sh (gpunode, plugin_bench, plugin_probe, the
# simulated NVML) and .gpubundle/peers.tar.xz (NVIDIA's binaries from test/peers/build.sh).
# Output: $OUT/peers/ (text, JSON, Markdown; the real node's files as real.tgz). PEERS_IDLE_S
# (default 60) sets the idle window, PEERS_RUNS (500) the request count, PEERS_PARTS ("1 2 3")
# which parts run.
set -uo pipefail
FINAL=${OUT:-/tmp/gpunode-out}/peers
mkdir -p "$FINAL/real"
B=$PWD/.gpubundle
export LD_LIBRARY_PATH=$B/lib
P=$(mktemp -d /tmp/peers-bin.XXXXXX)
tar -C "$P" -xJf "$B/peers.tar.xz" || { echo "no $B/peers.tar.xz" >&2; exit 2; }
"$P/nvidia-device-plugin" --version > "$FINAL/versions.txt" 2>&1
"$P/nvidia-ctk" --version >> "$FINAL/versions.txt" 2>&1
"$B/bin/gpunode" --version >> "$FINAL/versions.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$FINAL/versions.txt" 2>&1

parts=" ${PEERS_PARTS:-1 2 3} "
trap 'tar -C "$FINAL" -czf "$FINAL/real.tgz" real && rm -rf "$FINAL/real"' EXIT
if [[ $parts == *" 1 "* ]]; then
echo "== 1. exports"
bash scripts/gpu-nvml-exports.sh "$B/bin/libgpunode-simnvml.so" sim/nvml/nvml_entry_points.inc \
  > "$FINAL/nvml-exports.txt" 2>&1
echo "exit $?" >> "$FINAL/nvml-exports.txt"
tail -n 15 "$FINAL/nvml-exports.txt"

fi
if [[ $parts == *" 2 "* ]]; then
echo "== 2. the real node"
R=$FINAL/real
"$P/gpu-feature-discovery" --oneshot --no-timestamp --output-file "$R/gfd-labels.txt" > "$R/gfd.log" 2>&1
echo "exit $?" >> "$R/gfd.log"
"$B/bin/gpunode" labels --oneshot --no-timestamp --output-file "$R/gpunode-labels.txt" > "$R/gpunode-labels.log" 2>&1
echo "exit $?" >> "$R/gpunode-labels.log"
{
  echo "# nvidia.com/ labels: < gpu-feature-discovery only, > gpunode only"
  diff <(grep '^nvidia.com/' "$R/gfd-labels.txt" | sort) <(grep '^nvidia.com/' "$R/gpunode-labels.txt" | sort)
  echo "diff exit $?"
} > "$R/labels-diff.txt"
cat "$R/labels-diff.txt"
"$P/nvidia-ctk" cdi generate --format json --output "$R/nvidia-ctk.json" > "$R/nvidia-ctk.log" 2>&1
echo "exit $?" >> "$R/nvidia-ctk.log"
"$B/bin/gpunode" cdi generate -q --format json --output "$R/gpunode-cdi.json" > "$R/gpunode-cdi.log" 2>&1
echo "exit $?" >> "$R/gpunode-cdi.log"
# The same comparison and expected differences as the simulated suite (test/peers/cdi_test.sh).
python3 test/peers/cdi_compare.py --differences test/peers/cdi_differences.txt --verbose \
  "real-h200/index=$R/nvidia-ctk.json,$R/gpunode-cdi.json,/" > "$R/cdi-diff.txt" 2>&1
echo "cdi_compare exit $?" >> "$R/cdi-diff.txt"
tail -n 30 "$R/cdi-diff.txt"
# Device plugins on the real GPU: the machine has no kubelet, so plugin_probe serves kubelet.sock.
dp=/var/lib/kubelet/device-plugins
mkdir -p "$dp"
for who in nvidia gpunode; do
  rm -f "$dp"/*.sock
  "$B/bin/plugin_probe" --dir "$dp" --timeout-s 30 > "$R/plugin-$who.json" 2> "$R/plugin-probe-$who.err" &
  probe=$!
  if [ $who = nvidia ]; then
    "$P/nvidia-device-plugin" > "$R/plugin-$who.log" 2>&1 &
  else
    "$B/bin/gpunode" plugin > "$R/plugin-$who.log" 2>&1 &
  fi
  plugin=$!
  wait $probe; echo "probe exit $?" >> "$R/plugin-probe-$who.err"
  kill $plugin; wait $plugin 2>/dev/null
done
real_nvml=$(ldconfig -p | awk '/libnvidia-ml.so.1 .*x86-64/{print $NF; exit}')
python3 test/peers/plugin_compare.py real-h200 "$R/plugin-nvidia.json" "$R/plugin-gpunode.json" \
  --sim-lib "$real_nvml" --profile /dev/null > "$R/plugin-diff.txt" 2>&1
echo "plugin-diff exit $?" >> "$R/plugin-diff.txt"
cat "$R/plugin-diff.txt"

fi
if [[ $parts == *" 3 "* ]]; then
echo "== 3. benchmarks on simulated nodes, this CPU"
python3 benchmarks/peers_bench.py --build "$B" --plugin-bench "$B/bin/plugin_bench" --peers-bin "$P" --runs "${PEERS_RUNS:-500}" \
  --idle-s "${PEERS_IDLE_S:-60}" --json "$FINAL/peers-bench.json" --markdown "$FINAL/peers-bench.md" \
  > /dev/null 2> "$FINAL/peers-bench.log"
echo "peers_bench exit $?" >> "$FINAL/peers-bench.log"
cat "$FINAL/peers-bench.md" "$FINAL/peers-bench.log" 2>/dev/null | tail -n 40
lscpu | grep -E '^Model name|^CPU\(s\)' > "$FINAL/cpu.txt"
fi
