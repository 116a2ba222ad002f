#!/usr/bin/env bash
# `docker run --gpus` with runc as Docker's default runtime, on the real GPU machine (issue 33;
# through the device tool): plain runc — no gpunode shim — runs OCI bundles whose config has the
# prestart hook Docker adds for --gpus, [nvidia-container-runtime-hook prestart], answered by
# gpunode under that name. The hook injects into the created container from outside: device
# nodes, the driver files of NVIDIA_DRIVER_CAPABILITIES, the spec's hooks (symlinks, ld cache),
# and the devices allowed in the container's device cgroup (the H200 machine: cgroup v2, a
# BPF_PROG_TYPE_CGROUP_DEVICE program in front of runc's). Containers:
#   NVIDIA_VISIBLE_DEVICES=all        -> nvidia-smi -L lists the H200; /dev/nvidia0 opens
#   NVIDIA_VISIBLE_DEVICES=none       -> the driver only: no GPU node; GPU 0's node made with mknod
#                                        in the container cannot be opened (EPERM: the cgroup)
#   NVIDIA_VISIBLE_DEVICES=all, NVIDIA_DRIVER_CAPABILITIES=utility -> NVML, no libcuda
#   no NVIDIA_VISIBLE_DEVICES         -> the hook does nothing; no GPU
#   NVIDIA_REQUIRE_CUDA=cuda>=99.0    -> the hook refuses, runc's start fails naming the term
#
#   bash scripts/gpu-proof-hook-runc.sh    on the GPU machine, as root, from the repo root, with
#                                          .gpubundle/ from `scripts/bundle-gpu.sh --with-runc`
#   GPUNODE_PROOF_SIMULATE=1 bash scripts/gpu-proof-hook-runc.sh    here, as root: the simulated
#                                          h200-real, its spec generated in memory by the hook
#                                          (simulated nodes carry its numbers); no nvidia-smi
# Output: $OUT/hook-runc-proof.tgz and $OUT/hook-runc-transcript.txt (default /tmp/gpunode-out),
# for docs/examples/h200/hook-runc-33/.
PROOF_NAME=hook-runc
. "$(dirname "$0")/gpu-proof-lib.sh"

spec_dir=$W/cdi
mkdir -p "$spec_dir" "$W/bin"
gpunode_bin=$(run_path gpunode)
hook_env=(PATH=/usr/sbin:/usr/bin:/sbin:/bin "GPUNODE_OCI_LOG=$L/hook.log" "GPUNODE_CDI_SPEC_DIRS=$spec_dir")
if [ "$SIM" = 1 ]; then
  [ "$(id -u)" = 0 ] || { echo "gpu-proof-hook-runc: runc needs root, also simulated" >&2; exit 2; }
  hook_env+=(GPUNODE_SIMULATE=h200-real "GPUNODE_SIM_LIBRARY=$GPUNODE_SIM_LIBRARY")
  runc_path=$(command -v runc)
else
  export PATH=$PWD/.gpubundle/bin:$PATH LD_LIBRARY_PATH=$PWD/.gpubundle/lib
  runc_path=$PWD/.gpubundle/bin/runc
  hook_env+=("LD_LIBRARY_PATH=$PWD/.gpubundle/lib")
  # The spec's hooks run with the spec's env only: a wrapper that finds the bundle's libraries.
  cat > "$W/gpunode-hook" <<HOOK
#!/bin/sh
LD_LIBRARY_PATH=$PWD/.gpubundle/lib exec $gpunode_bin "\$@"
HOOK
  chmod +x "$W/gpunode-hook"
  run gpunode cdi generate --output "$spec_dir/nvidia.yaml" --hook-path "$W/gpunode-hook" > "$L/cdi-generate.txt" 2>&1 ||
    fail "cdi generate: $(tail -3 "$L/cdi-generate.txt")"
  nvidia-smi -L > "$L/host-nvidia-smi.txt" 2>&1
  say "host: $(head -1 "$L/host-nvidia-smi.txt")"
fi
# gpunode under the name Docker's hook has (argv[0] decides what gpunode is).
ln -sf "$gpunode_bin" "$W/bin/nvidia-container-runtime-hook"
say "kernel $(uname -r); $(stat -fc %T /sys/fs/cgroup) at /sys/fs/cgroup; runc: $("$runc_path" --version | head -1)"

CMD='export PATH=$PATH:/usr/local/nvidia/bin
echo "nodes=$(ls /dev | grep -E "^nvidia" | tr "\n" " ")"
echo "libs=$(find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o \( -name "libcuda.so.*" -o -name "libnvidia-ml.so.*" \) -print 2>/dev/null | sed "s|.*/||; s|\.so.*||" | sort -u | tr "\n" " ")"
nvidia-smi -L 2>&1 | head -2
if [ -e /dev/nvidia0 ]; then
  if head -c0 /dev/nvidia0 2>/tmp/err; then echo "open nvidia0: ok"; else echo "open nvidia0: $(sed "s/.*: //" /tmp/err)"; fi
fi
if mknod /dev/probe-gpu0 c 195 0 2>/tmp/err; then
  if head -c0 /dev/probe-gpu0 2>/tmp/err; then echo "open mknod-gpu0: ok"; else echo "open mknod-gpu0: $(sed "s/.*: //" /tmp/err)"; fi
else echo "mknod: $(cat /tmp/err)"; fi
true'
n=0
# case NAME -- BUNDLE-OPTIONS...   then the checks on $out / $rc
container() {
  local name=$1
  shift 2
  n=$((n + 1))
  oci_bundle "$W/b$n" "$CMD" "$@" || { fail "$name: bundle"; return; }
  python3 - "$W/b$n/config.json" "$W/bin/nvidia-container-runtime-hook" "${hook_env[@]}" <<'PY'
import json, sys
path, hook, *env = sys.argv[1:]
c = json.load(open(path))
# What Docker adds for --gpus (moby daemon/nvidia_linux.go), with the env this machine's gpunode needs.
c.setdefault("hooks", {}).setdefault("prestart", []).append(
    {"path": hook, "args": ["nvidia-container-runtime-hook", "prestart"], "env": env})
for k in ("bounding", "effective", "permitted"):
    c["process"]["capabilities"][k].append("CAP_MKNOD")  # Docker's default set has it
c["linux"]["cgroupsPath"] = "/gpunode-hook-runc-proof/" + path.split("/")[-2]
json.dump(c, open(path, "w"), indent=1)
PY
  rc=0
  out=$(timeout 120 "$runc_path" run --bundle "$W/b$n" "gpn-hook-$n" 2>&1) || rc=$?
  "$runc_path" delete -f "gpn-hook-$n" >/dev/null 2>&1
  printf '== %s (%s)\n%s\nexit %s\n' "$name" "$*" "$out" "$rc" >> "$L/containers.txt"
}

say "plain runc, the prestart hook [nvidia-container-runtime-hook prestart] in each bundle"
container "NVIDIA_VISIBLE_DEVICES=all" -- --env NVIDIA_VISIBLE_DEVICES=all
if [ "$rc" = 0 ] && grep -q '^nodes=.*nvidia0 ' <<< "$out" && grep -qE '^open nvidia0: (ok|No such device or address)$' <<< "$out" &&
   { [ "$SIM" = 1 ] || grep -q '^GPU 0: NVIDIA H200' <<< "$out"; }; then
  pass "all: $(grep -m1 -E '^GPU 0: ' <<< "$out" || grep -m1 '^nodes=' <<< "$out")"
else
  fail "all: exit $rc: $(tail -5 <<< "$out")"
fi
grep -q '^libs=libcuda libnvidia-ml $' <<< "$out" && pass "all: libcuda and libnvidia-ml (utility,compute)" ||
  fail "all: libs: $(grep '^libs=' <<< "$out")"

container "NVIDIA_VISIBLE_DEVICES=none (the driver, no GPU)" -- --env NVIDIA_VISIBLE_DEVICES=none
if [ "$rc" = 0 ] && ! grep -q '^nodes=.*nvidia0 ' <<< "$out" && grep -q '^open mknod-gpu0: Operation not permitted' <<< "$out"; then
  pass "none: no GPU node; GPU 0's node made in the container: $(grep -m1 '^open mknod-gpu0' <<< "$out")"
else
  fail "none: want no nvidia0 and EPERM on a mknod'ed GPU 0, exit $rc: $(tail -5 <<< "$out")"
fi

container "NVIDIA_DRIVER_CAPABILITIES=utility" -- --env NVIDIA_VISIBLE_DEVICES=all --env NVIDIA_DRIVER_CAPABILITIES=utility
if [ "$rc" = 0 ] && grep -q '^libs=libnvidia-ml $' <<< "$out" && { [ "$SIM" = 1 ] || grep -q '^GPU 0: NVIDIA H200' <<< "$out"; }; then
  pass "utility: NVML without libcuda$([ "$SIM" = 1 ] || echo ", nvidia-smi -L works")"
else
  fail "utility: exit $rc: $(tail -5 <<< "$out")"
fi

container "no NVIDIA_VISIBLE_DEVICES" --
if [ "$rc" = 0 ] && grep -q '^nodes=$' <<< "$out" && grep -q '^libs=$' <<< "$out"; then
  pass "no request: the hook does nothing, no GPU"
else
  fail "no request: exit $rc: $(tail -5 <<< "$out")"
fi

container "NVIDIA_REQUIRE_CUDA=cuda>=99.0" -- --env NVIDIA_VISIBLE_DEVICES=all --env 'NVIDIA_REQUIRE_CUDA=cuda>=99.0'
if [ "$rc" != 0 ] && grep -q 'unsatisfied condition: cuda>=99.0' <<< "$out"; then
  pass "cuda>=99.0: refused by the hook: $(grep -m1 -o 'unsatisfied condition: [^)]*)' <<< "$out")"
else
  fail "cuda>=99.0: want refused, exit $rc: $(tail -5 <<< "$out")"
fi

cp "$L/hook.log" "$L/hook-log.txt" 2>/dev/null
say "the hook's log: $(grep -c 'hook: pid' "$L/hook.log" 2>/dev/null || echo 0) injections"
grep -o 'hook: pid [0-9]*, [^;]*' "$L/hook.log" 2>/dev/null | add
rmdir /sys/fs/cgroup/gpunode-hook-runc-proof /sys/fs/cgroup/*/gpunode-hook-runc-proof 2>/dev/null
[ "$FAILED" = 0 ] && say "all passed" || say "FAILED"
exit "$FAILED"
