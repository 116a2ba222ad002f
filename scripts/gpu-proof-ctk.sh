#!/usr/bin/env bash
# NVIDIA's nvidia-ctk command lines run by gpunode (installed as nvidia-ctk: a link) on the real
# H200 (docs/nvidia-ctk.md): the CDI spec of the real driver and its device names, the control
# device nodes and /dev/char links it would make (dry runs: the machine's /dev is left alone), the
# runtime configs of NVIDIA's install guide in a scratch host root, `info`, and what does not apply.
#   bash scripts/gpu-proof-ctk.sh          (as root, with .gpubundle/ from scripts/bundle-gpu.sh)
#   GPUNODE_PROOF_SIMULATE=1 bash scripts/gpu-proof-ctk.sh   (here, on the simulated h200-real)
# Output: $OUT/ctk-transcript.txt and $OUT/ctk-proof.tgz (the spec, configs and logs).
PROOF_NAME=ctk
# shellcheck source=scripts/gpu-proof-lib.sh
. "$(dirname "$0")/gpu-proof-lib.sh"

mkdir -p "$W/bin"
ln -s "$(run_path gpunode)" "$W/bin/nvidia-ctk"
ctk() { "$W/bin/nvidia-ctk" "$@"; }
# step LOG WANT_RC ARGS...: nvidia-ctk ARGS, output in $L/LOG, exit code checked
step() {
  local log=$1 want=$2 rc=0
  shift 2
  echo "\$ nvidia-ctk $*" >>"$T"
  ctk "$@" >"$L/$log" 2>&1 || rc=$?
  head -n 40 "$L/$log" | add
  if [ "$rc" = "$want" ]; then pass "nvidia-ctk $* (exit $rc)"; else fail "nvidia-ctk $*: exit $rc, want $want"; fi
}

step version.txt 0 --version
# The real driver's spec, to a file of this machine (no --host-root: paths are the host's own)
step cdi-generate.log 0 "${G[@]}" cdi generate --output="$L/nvidia.yaml"
step cdi-list.txt 0 cdi list --spec-dir="$L"
grep -qx 'nvidia.com/gpu=all' "$L/cdi-list.txt" && grep -qx 'nvidia.com/gpu=0' "$L/cdi-list.txt" ||
  fail "cdi list: no nvidia.com/gpu=all / =0"
step cdi-generate-uuid.log 0 "${G[@]}" cdi generate --device-name-strategy=uuid --format=json --output="$L/nvidia-uuid.json"
# Device nodes from the real /proc/devices, and the /dev/char links: dry runs
# (simulated: this machine's /proc/devices has no nvidia majors, which is an error, exit 2)
step create-device-nodes.txt "$([ "$SIM" = 1 ] && echo 2 || echo 0)" system create-device-nodes --control-devices --dry-run
step dev-char-symlinks.txt 0 system create-dev-char-symlinks --dry-run
# The install guide's runtime configuration, in a scratch host root
H=$W/host
mkdir -p "$H"
for r in docker containerd crio; do
  step "runtime-$r.txt" 0 --host-root "$H" runtime configure --runtime=$r
done
step runtime-docker-default.txt 0 --host-root "$H" runtime configure --runtime=docker --set-as-default --cdi.enabled
cp -r "$H/etc" "$L/host-etc"
# info is doctor on the real node (exit 0 or 1: warnings are the machine's)
echo "\$ nvidia-ctk info" >>"$T"
ctk "${G[@]}" info >"$L/info.txt" 2>&1
rc=$?
head -n 30 "$L/info.txt" | add
[ "$rc" -le 1 ] && pass "nvidia-ctk info (doctor, exit $rc)" || fail "nvidia-ctk info: exit $rc"
# What does not apply: one line, exit 3
step mode-csv.txt 3 cdi generate --mode=csv
step oci-hook.txt 3 runtime configure --runtime=crio --config-mode=oci-hook
exit "$FAILED"
