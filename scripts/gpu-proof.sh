#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool) and writes everything worth keeping to
# $OUT/gpu-proof.tgz:
#   doctor.json / doctor.txt, compat.json / compat.txt, bench.json (doctor vs nvidia-smi -q),
#   nvidia-smi-q.txt + facts.txt (raw values for the h200-real profile), abi.txt (ABI check).
# Expects the bundle made by `scripts/bundle-gpu.sh` in .gpubundle/ (carried, git-ignored).
set -uo pipefail
FINAL=${OUT:-/tmp/gpunode-out}
OUT=$(mktemp -d)   # the device tool returns at most 8 files: everything goes into one tarball
trap 'tar -C "$OUT" -czf "$FINAL/gpu-proof.tgz" . ; ls "$OUT"' EXIT
mkdir -p "$FINAL"
B=.gpubundle/run
{
  echo "== uname"; uname -a
  echo "== nvidia-smi"; nvidia-smi
  echo "== /proc/driver/nvidia/version"; cat /proc/driver/nvidia/version
  for d in /proc/driver/nvidia/gpus/*; do echo "== $d/information"; cat "$d/information"; done
  for d in /sys/bus/pci/devices/*; do
    if [ "$(cat $d/vendor 2>/dev/null)" = "0x10de" ]; then
      echo "== $d"; for f in device class subsystem_vendor subsystem_device current_link_speed current_link_width max_link_speed max_link_width numa_node; do printf '%s: ' $f; cat $d/$f 2>/dev/null || echo '-'; done
      printf 'driver: '; readlink $d/driver || echo '-'
    fi
  done
  echo "== /proc/modules (nvidia)"; grep -E '^(nvidia|nouveau)' /proc/modules
  echo "== /dev/nvidia*"; ls -l /dev/nvidia* 2>&1
  echo "== nodes"; ls /sys/devices/system/node/
  echo "== cuda"; cat /usr/local/cuda/version.json 2>/dev/null | head -20; which nvcc nvidia-smi
  echo "== runtimes"; ls -d /etc/docker /etc/containerd /etc/crio /var/lib/kubelet /etc/cdi /var/run/cdi 2>&1
} > "$OUT/facts.txt" 2>&1
nvidia-smi -q > "$OUT/nvidia-smi-q.txt" 2>&1

$B gpunode doctor > "$OUT/doctor.txt" 2>&1; echo "doctor exit: $?" >> "$OUT/doctor.txt"
$B gpunode doctor -o json > "$OUT/doctor.json" 2>"$OUT/doctor.err"; echo "doctor -o json exit: $?"
$B gpunode compat check --image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime > "$OUT/compat.txt" 2>&1; echo "compat exit: $?" >> "$OUT/compat.txt"
$B gpunode compat check --image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime -o json > "$OUT/compat.json" 2>&1
python3 benchmarks/doctor_bench.py --runs 20 --json "$OUT/bench.json" -- $B gpunode doctor > "$OUT/bench.txt" 2>&1
python3 benchmarks/doctor_bench.py --runs 20 --json "$OUT/bench-nocuda.json" -- $B gpunode doctor --no-cuda >> "$OUT/bench.txt" 2>&1
cat "$OUT/bench.txt"

scripts/nvml-abi-check.sh > "$OUT/abi.txt" 2>&1
cat "$OUT/abi.txt"
tail -5 "$OUT/doctor.txt"
$B gpunode compat driver-for --cuda 13.0 --gpu H200 > "$OUT/compat-driver-for.txt" 2>&1
$B gpunode compat check --cuda 12.4 > "$OUT/compat-cuda124.txt" 2>&1
$B gpunode sim capture --name h200-real \
  --description "1x NVIDIA H200 (SXM, in a Firecracker VM), driver 580.159.04: captured on the real GPU machine" \
  > "$OUT/h200-real.yaml" 2> "$OUT/capture.err"
$B gpunode doctor -o yaml > "$OUT/doctor.yaml" 2>&1
