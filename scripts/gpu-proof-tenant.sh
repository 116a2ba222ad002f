#!/usr/bin/env bash
# Tenant safety on the real GPU machine (through the device tool): a container gets exactly the GPU
# it was allocated. Real runc through `gpunode oci-runtime`, the spec from `gpunode cdi generate` on
# the real host; each container runs `nvidia-smi -L` and lists its /dev/nvidia* nodes:
#   unprivileged NVIDIA_VISIBLE_DEVICES=all (an image's ENV, as uid 1000 too) -> no GPU
#   the device plugin's volume-mount request for GPU 0 -> GPU 0
#   the kubelet's CDI annotation -> GPU 0; beside the container's own =all -> still only GPU 0
#   privileged (CAP_SYS_ADMIN) =all, Docker's --gpus hook =0, the setting on -> the GPU
#   another vendor's device through the variable -> refused before runc
#
#   bash scripts/gpu-proof-tenant.sh    on the GPU machine, as root, from the repo root, with
#                                       .gpubundle/ from `scripts/bundle-gpu.sh --with-runc`
# Output: $OUT/tenant-proof.tgz and $OUT/tenant-transcript.txt (default /tmp/gpunode-out).
PROOF_NAME=tenant
. "$(dirname "$0")/gpu-proof-lib.sh"
[ "$SIM" != 1 ] || { echo "gpu-proof-tenant: the real runc and GPU are needed (test/e2e/oci_shim_test.sh is the simulated form)" >&2; exit 2; }
export PATH=$PWD/.gpubundle/bin:$PATH LD_LIBRARY_PATH=$PWD/.gpubundle/lib

# The spec's hooks are run by runc with the spec's env only: a wrapper that finds the bundle's
# libraries (on a real install gpunode is a plain binary on the host).
cat > "$W/gpunode-hook" <<EOF
#!/bin/sh
LD_LIBRARY_PATH=$PWD/.gpubundle/lib exec $PWD/.gpubundle/bin/gpunode "\$@"
EOF
chmod +x "$W/gpunode-hook"
run gpunode cdi generate --output "$W/cdi/nvidia.yaml" --hook-path "$W/gpunode-hook" > "$L/cdi-generate.txt" 2>&1 ||
  fail "cdi generate: $(tail -3 "$L/cdi-generate.txt")"
nvidia-smi -L > "$L/host-nvidia-smi-L.txt" 2>&1
gpus_on_host=$(grep -c '^GPU ' "$L/host-nvidia-smi-L.txt")
say "host: $gpus_on_host GPU(s): $(head -1 "$L/host-nvidia-smi-L.txt")"

CMD='export PATH=$PATH:/usr/local/nvidia/bin; echo "gpus=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU ")"; echo "nodes=$(ls /dev | grep -cE "^nvidia[0-9]+$")"; env | grep ^NVIDIA_VISIBLE'
n=0
# case NAME WANT_GPUS [SHIM-ENV] -- BUNDLE-OPTIONS...   (WANT_GPUS "refused": the shim must refuse)
case_() {
  local name=$1 want=$2 shim_env=()
  shift 2
  while [ "${1:-}" != -- ]; do shim_env+=("$1"); shift; done
  shift
  n=$((n + 1))
  oci_bundle "$W/b$n" "$CMD" "$@" || { fail "$name: bundle"; return; }
  local out rc=0
  out=$(env "${shim_env[@]}" GPUNODE_OCI_LOG="$L/shim.log" .gpubundle/run gpunode oci-runtime --runtime-path runc \
        --spec-dir "$W/cdi" run --bundle "$W/b$n" "gpn-tenant-$n" 2>&1) || rc=$?
  run runc delete -f "gpn-tenant-$n" >/dev/null 2>&1
  printf '== %s (%s)\n%s\nexit %s\n' "$name" "$*" "$out" "$rc" >> "$L/containers.txt"
  if [ "$want" = refused ]; then
    [ "$rc" != 0 ] && pass "$name: refused ($(printf '%s' "$out" | grep -m1 error | cut -c1-150))" ||
      fail "$name: the shim ran it: $out"
    return
  fi
  local gpus nodes
  gpus=$(printf '%s\n' "$out" | sed -n 's/^gpus=//p')
  nodes=$(printf '%s\n' "$out" | sed -n 's/^nodes=//p')
  if [ "$rc" = 0 ] && [ "$gpus" = "$want" ] && [ "$nodes" = "$want" ]; then
    pass "$name: nvidia-smi lists $gpus GPU(s), $nodes /dev/nvidia<N> node(s)"
  else
    fail "$name: want $want GPU(s), got gpus=$gpus nodes=$nodes exit $rc: $(printf '%s' "$out" | tail -3)"
  fi
}
say "containers through gpunode oci-runtime + runc"
case_ "unprivileged, its own NVIDIA_VISIBLE_DEVICES=all" 0 -- --env NVIDIA_VISIBLE_DEVICES=all
case_ "an image's ENV NVIDIA_VISIBLE_DEVICES=all as uid 1000" 0 -- --env NVIDIA_VISIBLE_DEVICES=all --uid 1000
case_ "the device plugin's volume-mount request for GPU 0" 1 -- \
  --env NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices --mount 0
case_ "the kubelet's CDI annotation nvidia.com/gpu=0" 1 -- --annotation cdi.k8s.io/gpunode-device-plugin_x=nvidia.com/gpu=0
case_ "CDI annotation for GPU 0 beside the container's own =all" 1 -- \
  --annotation cdi.k8s.io/gpunode-device-plugin_x=nvidia.com/gpu=0 --env NVIDIA_VISIBLE_DEVICES=all
case_ "privileged (CAP_SYS_ADMIN), NVIDIA_VISIBLE_DEVICES=all" "$gpus_on_host" -- --privileged --env NVIDIA_VISIBLE_DEVICES=all
case_ "Docker's --gpus hook, NVIDIA_VISIBLE_DEVICES=0" 1 -- --docker-hook --env NVIDIA_VISIBLE_DEVICES=0
case_ "accept-envvar-when-unprivileged set, =0" 1 GPUNODE_ACCEPT_ENVVAR_WHEN_UNPRIVILEGED=true -- \
  --env NVIDIA_VISIBLE_DEVICES=0
case_ "volume mounts switched off, volume-mount request" 0 GPUNODE_ACCEPT_VOLUME_MOUNTS=false -- \
  --env NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices --mount 0
case_ "another vendor's device through the variable (privileged)" refused -- --privileged \
  --env NVIDIA_VISIBLE_DEVICES=example.com/nic=nic0
[ -f "$L/shim.log" ] && tail -20 "$L/shim.log" > "$L/shim-log-tail.txt"
[ $FAILED = 0 ] && say "PASS" || say "FAILED"
exit $FAILED
