#!/usr/bin/env bash
# NVIDIA_REQUIRE_* enforced by the OCI shim on the real GPU machine (issue 32; through the device
# tool): real runc through `gpunode oci-runtime`, the spec from `gpunode cdi generate` on the host,
# the node's facts from its NVML (the H200 machine: driver 580 = CUDA 13.0). Each container runs
# `nvidia-smi -L`:
#   NVIDIA_REQUIRE_CUDA="cuda>=13.1"                       -> refused before runc, the term named
#   NVIDIA_REQUIRE_CUDA="cuda>=12.8"                       -> runs, nvidia-smi lists the GPU
#   NVIDIA_REQUIRE_CUDA="cuda>=13.1" NVIDIA_DISABLE_REQUIRE=1 -> runs
#   nvidia/cuda 12.8.1's published value (test/compat/published_env.h) -> runs (cuda>=12.8 holds)
#   NVIDIA_REQUIRE_ARCH="arch>=10.0" (an H200 is 9.0)       -> refused
#   a legacy image: CUDA_VERSION=13.1.0, no NVIDIA_REQUIRE_CUDA -> refused (cuda>=13.1)
# and `gpunode compat check` agreeing (rule image-requires, --cuda with the same requirement is not
# possible from the CLI yet: the verdict for --cuda 13.1 on this node is recorded beside it).
#
#   bash scripts/gpu-proof-require.sh    on the GPU machine, as root, from the repo root, with
#                                        .gpubundle/ from `scripts/bundle-gpu.sh --with-runc`
#   GPUNODE_PROOF_SIMULATE=1 bash scripts/gpu-proof-require.sh    here, as root: the simulated
#                                        h200-real (driver 580.159.04, CUDA 13.0), the spec generated
#                                        in memory by the shim; no nvidia-smi in the containers
# Output: $OUT/require-proof.tgz and $OUT/require-transcript.txt (default /tmp/gpunode-out).
PROOF_NAME=require
. "$(dirname "$0")/gpu-proof-lib.sh"

shim_env=()
spec_dir=$W/cdi
mkdir -p "$spec_dir"
if [ "$SIM" = 1 ]; then
  [ "$(id -u)" = 0 ] || { echo "gpu-proof-require: runc needs root, also simulated" >&2; exit 2; }
  shim_env=(GPUNODE_SIMULATE=h200-real)  # no spec file: the shim generates the simulated node's
  runc_path=$(command -v runc)
else
  export PATH=$PWD/.gpubundle/bin:$PATH LD_LIBRARY_PATH=$PWD/.gpubundle/lib
  runc_path=$PWD/.gpubundle/bin/runc
  # The spec's hooks are run by runc with the spec's env only: a wrapper that finds the bundle's
  # libraries (on a real install gpunode is a plain binary on the host).
  cat > "$W/gpunode-hook" <<HOOK
#!/bin/sh
LD_LIBRARY_PATH=$PWD/.gpubundle/lib exec $PWD/.gpubundle/bin/gpunode "\$@"
HOOK
  chmod +x "$W/gpunode-hook"
  run gpunode cdi generate --output "$spec_dir/nvidia.yaml" --hook-path "$W/gpunode-hook" > "$L/cdi-generate.txt" 2>&1 ||
    fail "cdi generate: $(tail -3 "$L/cdi-generate.txt")"
  nvidia-smi > "$L/host-nvidia-smi.txt" 2>&1
  say "host: $(grep -m1 -o 'Driver Version: [0-9.]*   *CUDA Version: [0-9.]*' "$L/host-nvidia-smi.txt" | tr -s ' ')"
fi

CMD='export PATH=$PATH:/usr/local/nvidia/bin; echo "nodes=$(ls /dev | grep -cE "^nvidia[0-9]+$")"; nvidia-smi -L 2>&1 | head -2'
n=0
# case NAME WANT -- BUNDLE-OPTIONS...   (WANT: "runs" or "refused:TEXT", TEXT in the shim's error)
case_() {
  local name=$1 want=$2
  shift 3
  n=$((n + 1))
  oci_bundle "$W/b$n" "$CMD" --privileged --env NVIDIA_VISIBLE_DEVICES=0 "$@" || { fail "$name: bundle"; return; }
  local out rc=0
  out=$(env "${shim_env[@]}" GPUNODE_OCI_LOG="$L/shim.log" "$(run_path gpunode)" "${G[@]}" oci-runtime \
        --runtime-path "$runc_path" --spec-dir "$spec_dir" run --bundle "$W/b$n" "gpn-require-$n" 2>&1) || rc=$?
  "$runc_path" delete -f "gpn-require-$n" >/dev/null 2>&1
  printf '== %s (%s)\n%s\nexit %s\n' "$name" "$*" "$out" "$rc" >> "$L/containers.txt"
  case $want in
    refused:*)
      if [ "$rc" != 0 ] && grep -qF -- "${want#refused:}" <<< "$out"; then
        pass "$name: refused: $(grep -m1 'unsatisfied' <<< "$out" | cut -c1-220)"
      else
        fail "$name: want refused with '${want#refused:}', got exit $rc: $(tail -3 <<< "$out")"
      fi ;;
    runs)
      if [ "$rc" = 0 ] && grep -q '^nodes=1$' <<< "$out" && { [ "$SIM" = 1 ] || grep -q '^GPU 0: ' <<< "$out"; }; then
        pass "$name: runs, $(grep -m1 -E '^GPU 0: |^nodes=' <<< "$out")"
      else
        fail "$name: want it to run with GPU 0, got exit $rc: $(tail -3 <<< "$out")"
      fi ;;
  esac
}

say "containers through gpunode oci-runtime + runc, GPU 0 each"
case_ "cuda>=13.1 on a CUDA 13.0 driver" "refused:unsatisfied condition: cuda>=13.1 (NVIDIA_REQUIRE_CUDA" -- \
  --env 'NVIDIA_REQUIRE_CUDA=cuda>=13.1'
case_ "cuda>=12.8" runs -- --env 'NVIDIA_REQUIRE_CUDA=cuda>=12.8'
case_ "cuda>=13.1 with NVIDIA_DISABLE_REQUIRE=1" runs -- --env 'NVIDIA_REQUIRE_CUDA=cuda>=13.1' --env NVIDIA_DISABLE_REQUIRE=1
req1281=$(sed -n '/kCuda1281Require\[\] =/,/;$/p' test/compat/published_env.h | grep -o '"[^"]*"' | tr -d '"' | tr -d '\n')
[ -n "$req1281" ] || fail "could not read nvidia/cuda 12.8.1's value from test/compat/published_env.h"
case_ "nvidia/cuda 12.8.1's published NVIDIA_REQUIRE_CUDA" runs -- --env "NVIDIA_REQUIRE_CUDA=$req1281" --env CUDA_VERSION=12.8.1
case_ "arch>=10.0 on an H200 (9.0)" "refused:arch>=10.0 needs compute capability at least 10.0" -- \
  --env 'NVIDIA_REQUIRE_ARCH=arch>=10.0'
case_ "legacy image CUDA_VERSION=13.1.0" "refused:unsatisfied condition: cuda>=13.1 (CUDA_VERSION (legacy image)" -- \
  --env CUDA_VERSION=13.1.0
grep -E 'hold|requirements not checked|error' "$L/shim.log" 2>/dev/null | cut -c1-240 | add

say "compat check on this node for CUDA 13.1 and 12.8 (the data set's view, beside the shim's)"
for c in 13.1 12.8; do
  run gpunode "${G[@]}" compat check --cuda "$c" 2>&1 | head -4 | add
done
[ "$FAILED" = 0 ] && say "PASS" || say "FAILED"
exit "$FAILED"
