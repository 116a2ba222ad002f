#!/usr/bin/env bash
# Issue 13's MPS proof on the real GPU machine (through the device tool): `gpunode plugin` with
# sharing.mps (2 replicas) registered at the kubelet stand-in (kubelet_emulator: no kubelet there)
# starts gpunode's MPS control daemon on GPU 0; two Allocates of one replica each; two processes
# with the returned env run the bench's GEMM kernel at once as MPS clients (each in its own mount
# namespace with the container's mounts: <mpsRoot>/shm on /dev/shm, the pipe directory); nvidia-smi
# shows both as type M+C and the MPS server; each one's throughput is recorded; the plugin stops
# (the daemon quits) and `nvidia-smi -q` before/after shows compute mode and every other setting
# unchanged.
#
#   bash scripts/gpu-proof-mps.sh                 on the GPU machine, as root, from the repo root,
#                                                 with .gpubundle/ from scripts/bundle-gpu.sh
#   GPUNODE_PROOF_SIMULATE=1 bash scripts/gpu-proof-mps.sh
#       here: a simulated h200-real node (`gpunode sim hostroot`, which installs the simulated
#       nvidia-cuda-mps-control), binaries from $GPUNODE_PROOF_BIN (default build/bin); the bench
#       and nvidia-smi steps are skipped (no GPU), the daemon's control.log is shown instead.
#
# Output: $OUT/mps-transcript.txt and $OUT/mps-proof.tgz (default /tmp/gpunode-out). Exit 0 only
# when every step passed. Every process it starts is stopped by PID on exit.
set -uo pipefail
SIM=${GPUNODE_PROOF_SIMULATE:-0}
FINAL=${OUT:-/tmp/gpunode-out}
mkdir -p "$FINAL"
W=$(mktemp -d /tmp/gpn-mps-XXXXXX)
L=$W/logs
mkdir -p "$L" "$W/dp"
T=$L/mps-transcript.txt
MPS_ROOT=$W/mps                      # a scratch MPS root: nothing is left in /run/nvidia/mps
PIPE=$MPS_ROOT/nvidia.com/gpu/pipe
PIDS=()
FAILED=0
say() { echo "== $*" | tee -a "$T" >&2; }
add() { tee -a "$T" >&2; }
fail() { say "FAIL: $*"; FAILED=1; }
cleanup() {
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill -TERM "${PIDS[i]}" 2>/dev/null; done
  sleep 1
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  # A daemon of ours still running (the plugin did not quit it): quit it, as a last resort.
  if [ -e "$PIPE/control" ] && [ -n "${MPSCTL:-}" ]; then
    echo quit | run_ctl >/dev/null 2>&1
  fi
  cp -r "$MPS_ROOT"/*/log "$L/mps-log" 2>/dev/null
  cp "$T" "$FINAL/mps-transcript.txt"
  tar -C "$L" -czf "$FINAL/mps-proof.tgz" . 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT

if [ "$SIM" = 1 ]; then
  BIN=${GPUNODE_PROOF_BIN:-build/bin}
  run() { local p=$1; shift; "$BIN/$p" "$@"; }
  # `spawn X ... &`: the background job's PID is the program's own (signals reach it)
  spawn() { local p=$1; shift; exec "$BIN/$p" "$@"; }
  export GPUNODE_SIM_LIBRARY=${GPUNODE_SIM_LIBRARY:-$PWD/$BIN/libgpunode-simnvml.so}
  run gpunode sim hostroot --profile-file "$W/profile.yaml" h200-real "$W/root" > "$L/hostroot.txt" 2>&1 ||
    fail "sim hostroot"
  # the simulated node as the chart runs it: its host root, the simulated NVML, the profile file
  export GPUNODE_SIM_PROFILE=$W/profile.yaml
  G=(--host-root "$W/root" --nvml-library "$GPUNODE_SIM_LIBRARY" --cuda-library "$GPUNODE_SIM_LIBRARY")
  MPSCTL=$W/root/usr/bin/nvidia-cuda-mps-control
  MPS_ROOT_HOST=$W/root$MPS_ROOT   # where the host-root paths land here
  [ -x "$MPSCTL" ] || fail "the host root has no simulated nvidia-cuda-mps-control (build gpunode_sim_mps_control)"
else
  [ "$(id -u)" = 0 ] || { echo "gpu-proof-mps: run as root" >&2; exit 2; }
  run() { .gpubundle/run "$@"; }
  spawn() { exec .gpubundle/run "$@"; }
  G=()
  MPSCTL=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
  MPS_ROOT_HOST=$MPS_ROOT
fi
run_ctl() { CUDA_MPS_PIPE_DIRECTORY=$MPS_ROOT_HOST/nvidia.com/gpu/pipe "$MPSCTL"; }
smi_settings() { # the settings an MPS manager must not change, per GPU
  nvidia-smi -q | grep -E "^GPU |Compute Mode|Persistence Mode|Current +: |Pending +: |Accounting Mode|Power Limit|Applications Clocks|ECC Mode|Multi-Instance|MIG Mode" -A0
}

say "MPS proof ($([ "$SIM" = 1 ] && echo simulated h200-real || echo real GPU)), $(date -u +%FT%TZ)"
cat > "$W/mps.yaml" <<EOF
version: v1
flags:
  mpsRoot: $MPS_ROOT
sharing:
  mps:
    resources:
    - name: nvidia.com/gpu
      replicas: 2
EOF
cat "$W/mps.yaml" | add
cp "$W/mps.yaml" "$L/"

if [ "$SIM" != 1 ]; then
  nvidia-smi -q > "$L/smi-q-before.txt" 2>&1
  smi_settings > "$L/settings-before.txt" 2>&1
  say "settings before"; cat "$L/settings-before.txt" | add
fi

# --------------------------------------------------------------------------- plugin + Allocates
say "plugin with sharing.mps, kubelet_emulator allocating one replica (twice)"
spawn kubelet_emulator --dir "$W/dp" --timeout-s 30 --allocate 1 > "$L/kubelet-1.jsonl" 2>&1 &
emu=$!
sleep 0.3
spawn gpunode "${G[@]}" plugin --kubelet-dir "$W/dp" --config-file "$W/mps.yaml" > "$L/plugin.log" 2>&1 &
plugin=$!
PIDS+=("$plugin")
# A plugin that exits (refuses the config) ends the wait at once.
while kill -0 $emu 2>/dev/null; do
  kill -0 $plugin 2>/dev/null || { sleep 0.5; kill -TERM $emu 2>/dev/null; }
  sleep 0.2
done
wait $emu
# A second container, a second single-replica Allocate (the emulator allocates the first ID of
# its list; the env of every replica of one GPU is the same).
spawn kubelet_emulator --dir "$W/dp" --timeout-s 15 --allocate 1 > "$L/kubelet-2.jsonl" 2>&1 &
emu2=$!
PIDS+=("$emu2")
cat "$L/kubelet-1.jsonl" | add
head -c 2000 "$L/plugin.log" | add
ALLOC=$(grep '"event":"allocate"' "$L/kubelet-1.jsonl" | head -1)
if ! echo "$ALLOC" | grep -q '"ok":true' || ! echo "$ALLOC" | grep -q CUDA_MPS_PIPE_DIRECTORY; then
  fail "plugin step: no Allocate with CUDA_MPS_PIPE_DIRECTORY (see plugin.log)"
  exit 1
fi
envof() { echo "$ALLOC" | python3 -c "import json,sys; print(json.load(sys.stdin)['envs'].get('$1',''))"; }
UUID=$(envof NVIDIA_VISIBLE_DEVICES)
PCT=$(envof CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)
LIMIT=$(envof CUDA_MPS_PINNED_DEVICE_MEM_LIMIT)
say "Allocate: GPU $UUID, CUDA_MPS_PIPE_DIRECTORY=$(envof CUDA_MPS_PIPE_DIRECTORY), threads $PCT%, pinned $LIMIT"
sleep 1
grep '"event":"allocate"' "$L/kubelet-2.jsonl" | add
say "the daemon: pipe directory and answers"
ls -la "$MPS_ROOT_HOST/nvidia.com/gpu/pipe" 2>&1 | add
echo get_default_active_thread_percentage | run_ctl 2>&1 | add
# the real daemon's `control` is a Unix socket, the simulated one's a FIFO
[ -e "$MPS_ROOT_HOST/nvidia.com/gpu/pipe/control" ] || fail "no control pipe in $PIPE"

# --------------------------------------------------------------------------- two MPS clients
if [ "$SIM" = 1 ]; then
  say "simulated: no GPU to run the bench on; the daemon's control.log"
  cat "$MPS_ROOT_HOST/nvidia.com/gpu/log/control.log" | add
else
  # Each client as the container would be: its own mount namespace with <mpsRoot>/shm on
  # /dev/shm; the pipe directory at its host path (the container sees it at /mps/...).
  client() {
    unshare -m sh -c "mount --make-rprivate / && mount --bind '$MPS_ROOT/shm' /dev/shm && \
      exec env CUDA_MPS_PIPE_DIRECTORY='$PIPE' CUDA_MPS_ACTIVE_THREAD_PERCENTAGE='$PCT' \
      CUDA_MPS_PINNED_DEVICE_MEM_LIMIT='$LIMIT' CUDA_VISIBLE_DEVICES='$UUID' \
      .gpubundle/run gpunode bench --tests gemm --gpus 0 --duration 5 --force -q -o json"
  }
  say "two bench processes at once under MPS"
  client > "$L/bench-1.json" 2> "$L/bench-1.err" & c1=$!
  client > "$L/bench-2.json" 2> "$L/bench-2.err" & c2=$!
  PIDS+=("$c1" "$c2")
  sleep 4
  nvidia-smi > "$L/smi-during.txt" 2>&1
  echo get_server_list | run_ctl > "$L/server-list.txt" 2>&1
  cat "$L/smi-during.txt" | add
  say "get_server_list: $(tr '\n' ' ' < "$L/server-list.txt")"
  wait $c1; r1=$?; wait $c2; r2=$?
  [ "$(grep -c ' M+C ' "$L/smi-during.txt")" -ge 2 ] || fail "nvidia-smi does not list two M+C processes"
  grep -q 'nvidia-cuda-mps-server' "$L/smi-during.txt" || fail "nvidia-smi does not list the MPS server"
  for i in 1 2; do
    say "client $i throughput"
    python3 - "$L/bench-$i.json" <<'PY' 2>&1 | add
import json, sys
d = json.load(open(sys.argv[1]))
def walk(x, path=""):
    if isinstance(x, dict):
        if "value" in x and "unit" in x:
            print(f"  {path}: {x['value']} {x['unit']}")
        for k, v in x.items():
            if k != "ceiling":
                walk(v, f"{path}/{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            walk(v, f"{path}[{i}]")
walk(d)
PY
  done
  # Each client has half the GPU (50 % of the SMs), so its verdict against the whole card's
  # ceiling is "fail" (exit 2) by design; what must hold: both ran, measured, and their results
  # checked out (no mismatches).
  for i in 1 2; do
    python3 - "$L/bench-$i.json" <<'PY' || fail "bench client $i did not measure a checked GEMM (see bench-$i.err)"
import json, sys
d = json.load(open(sys.argv[1]))
r = d["gpus"][0]["tests"][0]["results"]
assert r and all(x.get("check", {}).get("ok") for x in r if "check" in x), r
PY
  done
  [ $r1 -le 2 ] && [ $r2 -le 2 ] || fail "a bench client crashed (exit $r1, $r2; see bench-*.err)"
fi

# --------------------------------------------------------------------------- stop, settings after
say "stop the plugin (SIGTERM): its daemon must quit"
kill -TERM $plugin; wait $plugin; echo "plugin exit $?" | add
sleep 1
if [ -e "$MPS_ROOT_HOST/nvidia.com/gpu/pipe/control" ]; then fail "the control pipe is still there after stop"; fi
if pgrep -f nvidia-cuda-mps-control > "$L/pgrep-after.txt"; then
  say "nvidia-cuda-mps-control processes after stop:"; cat "$L/pgrep-after.txt" | add
fi
if [ "$SIM" != 1 ]; then
  nvidia-smi -q > "$L/smi-q-after.txt" 2>&1
  smi_settings > "$L/settings-after.txt" 2>&1
  if diff "$L/settings-before.txt" "$L/settings-after.txt" > "$L/settings.diff"; then
    say "settings unchanged (compute mode, persistence, ECC, MIG, power limit, clocks)"
  else
    fail "settings changed:"; cat "$L/settings.diff" | add
  fi
fi
[ $FAILED = 0 ] && say "PASS" || say "FAILED"
exit $FAILED
