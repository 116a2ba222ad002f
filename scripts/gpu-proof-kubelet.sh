#!/usr/bin/env bash
# A STANDALONE kubelet (no API server) on the GPU machine runs a static pod that asks for
# `nvidia.com/gpu: 1` and prints `nvidia-smi -L`; the GPU reaches the pod through gpunode's device
# plugin (DEVICE_LIST_STRATEGY=cdi-cri: the kubelet hands the CDI name to containerd) and the CDI
# spec `gpunode cdi generate` wrote. Optional second part (GPUNODE_PROOF_SHIM=1, the default): the
# same pod through containerd's `nvidia` runtime = `gpunode oci-runtime` (plugin in volume-mounts mode).
#
#   bash scripts/gpu-proof-kubelet.sh            on the GPU machine, as root, from the repo root,
#                                                with .k8sbundle/ from scripts/bundle-k8s-gpu.sh
#   GPUNODE_PROOF_SIMULATE=1 bash scripts/gpu-proof-kubelet.sh
#       here, without a GPU: a simulated dgx-h200 node (`gpunode sim hostroot --device-nodes`, the
#       simulated NVML), the pod runs `ls -l /dev/nvidia*; env | grep NVIDIA` instead of nvidia-smi.
#       It re-runs itself inside `unshare --mount --net --pid --fork --mount-proc` with tmpfs over
#       /run, /var/lib and /var/log (what the kubelet and containerd hard-code), so a test cluster on
#       the same machine is not disturbed (GPUNODE_PROOF_ISOLATE=0 skips that; =1 forces it).
#
# Output: $OUT/transcript.txt (short) and $OUT/kubelet-proof.tgz (every log, config, spec and the
# pod logs); without $OUT, /tmp/gpunode-out. Exit 0 only if the cdi-cri pod printed the GPU.
# Every process it starts is stopped on exit (by PID), every mount it made is unmounted, its cgroup
# root removed.
# Env: GPUNODE_PROOF_SHIM=0 skips the runtime-shim pod; GPUNODE_PROOF_POD_CMD replaces the pod's
# command; GPUNODE_PROOF_KEEP=1 leaves everything running (debugging); KUBELET_V (default 2).
set -uo pipefail
umask 022
REPO=$(pwd)
SELF=$REPO/scripts/gpu-proof-kubelet.sh
[ -f "$SELF" ] || SELF=$(readlink -f "$0")
SIM=${GPUNODE_PROOF_SIMULATE:-0}
FINAL=${OUT:-/tmp/gpunode-out}

# ---------------------------------------------------------------- local isolation (simulate mode)
if [ "${GPUNODE_PROOF_INNER:-0}" != 1 ] && [ "${GPUNODE_PROOF_ISOLATE:-$SIM}" = 1 ]; then
  [ "$(id -u)" = 0 ] || { echo "gpu-proof-kubelet: must run as root" >&2; exit 2; }
  mkdir -p "$FINAL"
  exec unshare --mount --net --pid --fork --mount-proc --propagation private \
    env GPUNODE_PROOF_INNER=1 OUT="$FINAL" bash -c '
      set -e
      ip link set lo up
      # the fixed paths of the kubelet (/var/lib/kubelet, /var/log/pods, /var/log/containers),
      # containerd (/run/containerd/s shim sockets) and CDI (/var/run/cdi = /run/cdi): private tmpfs
      # over their parents, which exist on every host (no directory is created on the host)
      for d in /run /var/lib /var/log; do mount -t tmpfs -o mode=755 gpunode-proof "$d"; done
      exec bash "$0"' "$SELF"
fi

# ---------------------------------------------------------------- settings
KB=$REPO/.k8sbundle
W=$(mktemp -d /tmp/gpk-XXXXXX)   # short: containerd's socket path must stay < 108 bytes
chmod 755 "$W"
B=$W/b                            # unpacked bundle
L=$W/logs
T=$L/transcript.txt
mkdir -p "$B" "$L" "$FINAL"
CGROOT=${GPUNODE_PROOF_CGROUP_ROOT:-/gpunode-standalone}
NODE=gpunode-proof
PAUSE_IMAGE=gpunode.test/pause:k8sbundle
TEST_IMAGE=gpunode.test/nvsmi:k8sbundle
KUBELET_V=${KUBELET_V:-2}
SOCK=$W/c/containerd.sock
CDI_DIR=/var/run/cdi
DP_DIR=/var/lib/kubelet/device-plugins
MANIFESTS=$W/manifests
if [ "$SIM" = 1 ]; then
  POD_CMD_DEFAULT='echo "--- /dev/nvidia*"; ls -l /dev/nvidia*; echo "--- env"; env | grep NVIDIA | sort'
else
  POD_CMD_DEFAULT='export PATH=$PATH:/usr/local/nvidia/bin:/usr/bin; echo "--- nvidia-smi -L"; nvidia-smi -L; echo "--- /dev/nvidia*"; ls -l /dev/nvidia*; echo "--- env"; env | grep NVIDIA | sort'
fi
POD_CMD=${GPUNODE_PROOF_POD_CMD:-$POD_CMD_DEFAULT}
T0=$(date +%s.%N)
PIDS=()          # name:pid of what we started, stopped in reverse order
CREATED_CDI=0
MOUNTS_BEFORE=$W/mounts-before
awk '{print $5}' /proc/self/mountinfo | sort > "$MOUNTS_BEFORE"

ts() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%6.1f", b - a }'; }
say() { echo "[$(ts)s] $*" | tee -a "$T" >&2; }
section() { { echo; echo "== $*"; } | tee -a "$T" >&2; }
add() { tee -a "$T" >&2; }    # command output into the transcript
tailog() { # tailog FILE [N]: the last lines of a log into the transcript
  [ -f "$1" ] || { echo "   ($1: no such file)" | add; return 0; }
  { echo "   ----- last ${2:-30} lines of ${1#"$W"/} -----"; tail -n "${2:-30}" "$1" | sed 's/^/   | /' | cut -c1-400; } | add
}
die() {
  say "FAILED: $*"
  local f
  for f in "$L"/containerd.log "$L"/kubelet.log "$L"/plugin.log; do [ -f "$f" ] && tailog "$f" 25; done
  RESULT="FAILED: $*"
  exit 1
}
elapsed_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

start_bg() { # start_bg NAME LOGFILE CMD...: background process in its own session, PID remembered
  local name=$1 logf=$2; shift 2
  echo "=== $(date -u +%FT%TZ) $*" >> "$logf"
  setsid "$@" >> "$logf" 2>&1 < /dev/null &
  PIDS+=("$name:$!")
  eval "PID_${name//-/_}=$!"
}
alive() { local st; st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1; [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]; }
stop_pid() { # stop_pid NAME PID [GRACE]
  local i
  alive "$2" || return 0
  kill -TERM "$2" 2>/dev/null || true
  for ((i = 0; i < ${3:-10} * 10; i++)); do alive "$2" || break; sleep 0.1; done
  alive "$2" && { say "$1 (pid $2) ignored SIGTERM: SIGKILL"; kill -KILL "$2" 2>/dev/null || true; sleep 0.3; }
  return 0
}
stop_named() { # stop_named NAME: the last process started under that name
  local e pid=""
  for e in "${PIDS[@]}"; do [ "${e%%:*}" = "$1" ] && pid=${e#*:}; done
  [ -n "$pid" ] && stop_pid "$1" "$pid" "${2:-10}"
}
ctr_() { "$B/bin/ctr" --address "$SOCK" -n k8s.io "$@"; }

# ---------------------------------------------------------------- cleanup (trap)
shims_of_ours() { # PIDs of containerd-shim-runc-v2 serving our containerd
  local p
  for p in /proc/[0-9]*; do
    [[ "$(readlink "$p/exe" 2>/dev/null)" == "$B/bin/containerd-shim-runc-v2"* ]] && echo "${p#/proc/}"
  done
}
kill_pods() { # pod processes: everything in our cgroup root, and our shims
  local pids=() f p
  for f in $(find /sys/fs/cgroup/*"$CGROOT" /sys/fs/cgroup"$CGROOT" -name cgroup.procs 2>/dev/null); do
    while read -r p; do [ -n "$p" ] && pids+=("$p"); done < "$f"
  done
  while read -r p; do [ -n "$p" ] && pids+=("$p"); done < <(shims_of_ours)
  [ ${#pids[@]} -gt 0 ] || return 0
  mapfile -t pids < <(printf '%s\n' "${pids[@]}" | sort -un)
  kill -KILL "${pids[@]}" 2>/dev/null || true
  sleep 0.5
}
unmount_ours() { # every mount that appeared since we started, under paths we own or lent to k8s
  local i m
  for ((i = 0; i < 3; i++)); do
    mapfile -t ms < <(awk '{print $5}' /proc/self/mountinfo | sort | comm -13 "$MOUNTS_BEFORE" - |
      grep -E "^($W|/var/lib/kubelet|/run/containerd|/var/run/containerd|/run/netns|/run/cdi)(/|$)" | sort -r)
    [ ${#ms[@]} -gt 0 ] || return 0
    for m in "${ms[@]}"; do m=$(printf '%b' "$m"); umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  done
}
finish() {
  local rc=$?
  trap - EXIT INT TERM
  kill -- -"$WATCHDOG" 2>/dev/null
  [ -n "${RESULT:-}" ] || { [ $rc = 0 ] && RESULT=PASSED || RESULT="FAILED (exit $rc)"; }
  if [ "${GPUNODE_PROOF_KEEP:-0}" = 1 ]; then
    say "GPUNODE_PROOF_KEEP=1: leaving everything running in $W"
  else
    # kubelet first (it would restart pods), then the containers through containerd, then the rest
    stop_named kubelet 15
    if [ -x "$B/bin/ctr" ] && [ -S "$SOCK" ]; then
      ctr_ containers ls > "$L/ctr-containers-at-exit.txt" 2>&1
      local t
      for t in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -a -s SIGKILL "$t" >/dev/null 2>&1; done
      sleep 0.3
      for t in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$t" >/dev/null 2>&1; done
    fi
    local i e
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do e=${PIDS[i]}; stop_pid "${e%%:*}" "${e#*:}" 10; done
    kill_pods
    unmount_ours
    [ -f "$CDI_DIR/nvidia.yaml" ] && cp "$CDI_DIR/nvidia.yaml" "$L/nvidia.yaml" 2>/dev/null
    [ "$CREATED_CDI" = 1 ] && rm -f "$CDI_DIR/nvidia.yaml"
    rm -f "$DP_DIR/kubelet.sock"
    local d
    for d in /sys/fs/cgroup/*"$CGROOT" /sys/fs/cgroup"$CGROOT"; do
      [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
      [ -d "$d" ] && say "WARNING: could not remove cgroup $d"
    done
    [ "${MOUNTED_CGROUP:-0}" = 1 ] && umount /sys/fs/cgroup 2>/dev/null
  fi
  section "RESULT: $RESULT (total $(ts | tr -d ' ') s)"
  # keep: logs, configs, spec, pod logs (no binaries)
  cp -r "$W/etc" "$L/etc" 2>/dev/null
  tar -C "$L" -czf "$FINAL/kubelet-proof.tgz" . 2>/dev/null
  cp "$T" "$FINAL/transcript.txt"
  if [ "${GPUNODE_PROOF_KEEP:-0}" != 1 ]; then
    chmod -R u+w "$W" 2>/dev/null; rm -rf "$W" 2>/dev/null || say "WARNING: could not remove all of $W"
  fi
  ls -la "$FINAL" >&2
  exit $rc
}
trap finish EXIT
trap 'die "interrupted or past the deadline (GPUNODE_PROOF_DEADLINE_S=$DEADLINE_S)"' INT TERM
# the whole run must end well inside the device tool's 10 minutes (and the brief's 8): a watchdog
DEADLINE_S=${GPUNODE_PROOF_DEADLINE_S:-420}
setsid bash -c "sleep $DEADLINE_S; kill -TERM $$" > /dev/null 2>&1 < /dev/null &
WATCHDOG=$!

# ---------------------------------------------------------------- (a) unpack, host checks
section "gpunode standalone-kubelet proof ($([ "$SIM" = 1 ] && echo "SIMULATED dgx-h200" || echo "real GPUs")) $(date -u +%FT%TZ)"
[ "$(id -u)" = 0 ] || die "must run as root"
[ -s "$KB/payload.tar.xz" ] || die "$KB/payload.tar.xz missing: run scripts/bundle-k8s-gpu.sh on the build machine and carry .k8sbundle"
say "host: $(uname -sr), $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}"), $(nproc) cpus, cgroup fs $(stat -fc %T /sys/fs/cgroup), work dir $W"
t=$(date +%s.%N)
if (cd "$KB" && sha256sum -c --quiet SHA256SUMS) > "$L/unpack.log" 2>&1; then :; else tailog "$L/unpack.log"; die "payload.tar.xz does not match SHA256SUMS"; fi
if command -v xz >/dev/null; then
  xz -dc "$KB/payload.tar.xz" | tar -C "$B" -xf - 2>> "$L/unpack.log"
elif command -v python3 >/dev/null; then
  python3 -c 'import lzma,sys,shutil; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer, 1<<20)' "$KB/payload.tar.xz" |
    tar -C "$B" -xf - 2>> "$L/unpack.log"
else
  die "neither xz nor python3 here to unpack the bundle"
fi
[ -x "$B/bin/kubelet" ] && [ -x "$B/bin/gpunode" ] || { tailog "$L/unpack.log"; die "unpacking failed"; }
say "unpacked $(du -sh "$B" | cut -f1) in $(elapsed_since "$t") s"
# wrappers: the bundle's programs with the bundle's libraries (runc needs libseccomp; the CDI hooks
# are run by runc with the spec's env only, so they need their own wrapper, as on a real node gpunode
# would just be a binary on the host)
mkdir -p "$W/wrap" "$W/etc"
for p in runc gpunode; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s/bin/%s "$@"\n' "$B" "$B" "$p" > "$W/wrap/$p"
done
cp "$W/wrap/gpunode" "$W/wrap/gpunode-hook"
chmod 755 "$W/wrap"/*
export PATH=$W/wrap:$B/bin:$PATH
{
  echo "   kubelet:    $("$B/bin/kubelet" --version 2>&1)"
  echo "   containerd: $("$B/bin/containerd" --version 2>&1)"
  echo "   runc:       $("$W/wrap/runc" --version 2>&1 | head -1) ($("$W/wrap/runc" --version 2>&1 | grep libseccomp))"
  echo "   gpunode:    $("$W/wrap/gpunode" --version 2>&1)"
} | add
"$W/wrap/runc" --version >/dev/null 2>&1 || die "the bundle's runc does not run here"
"$W/wrap/gpunode" --version >/dev/null 2>&1 || die "the bundle's gpunode does not run here: $("$W/wrap/gpunode" --version 2>&1 | tail -2)"

# gpunode's view of the node: real, or the simulated dgx-h200 (fixture host root with real
# character devices + the simulated NVML)
GPN=("$W/wrap/gpunode")
if [ "$SIM" = 1 ]; then
  SIMROOT=$W/simroot
  "$W/wrap/gpunode" sim hostroot --device-nodes dgx-h200 "$SIMROOT" > "$L/sim-hostroot.log" 2>&1 ||
    { tailog "$L/sim-hostroot.log"; die "gpunode sim hostroot --device-nodes dgx-h200 failed (needs CAP_MKNOD)"; }
  # --driver-root = the fixture itself, so the spec's mounts point at the fixture's files (the
  # host root sees its own path through a link to /, as test/e2e/lib.sh's e2e_fixture_driver_root)
  mkdir -p "$SIMROOT$(dirname "$SIMROOT")"; ln -sfn / "$SIMROOT$SIMROOT"
  export GPUNODE_SIM_PROFILE=dgx-h200
  GPN+=(--host-root "$SIMROOT" --nvml-library "$B/bin/libgpunode-simnvml.so" --cuda-library "$B/bin/libgpunode-simnvml.so")
  say "simulated node: $SIMROOT ($(ls "$SIMROOT"/dev | tr '\n' ' '))"
  echo "--- host: ls -l \$SIMROOT/dev/nvidia* (simulated)" | add
  ls -l "$SIMROOT"/dev/nvidia[0-9] "$SIMROOT"/dev/nvidiactl 2>&1 | sed 's/^/   /' | add
else
  echo "--- host: nvidia-smi -L" | add
  nvidia-smi -L 2>&1 | tee "$L/host-nvidia-smi-L.txt" | sed 's/^/   /' | add
  [ "${PIPESTATUS[0]}" = 0 ] || die "nvidia-smi -L fails on the host"
  ls -l /dev/nvidia* > "$L/host-dev-nvidia.txt" 2>&1
fi

# host adaptations (as test/k8s/cluster.sh): cgroup version, CAP_SYS_RESOURCE, overlay mounts
if ! mountpoint -q /sys/fs/cgroup; then
  # a bare VM whose init mounted no cgroup file system: the unified hierarchy
  mkdir -p /sys/fs/cgroup
  mount -t cgroup2 none /sys/fs/cgroup 2>> "$L/cgroups.log" && { MOUNTED_CGROUP=1; say "adapt: mounted cgroup2 on /sys/fs/cgroup (none was mounted)"; } ||
    say "WARNING: no cgroup file system at /sys/fs/cgroup and cgroup2 cannot be mounted"
fi
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then CGROUP_V=2; else CGROUP_V=1; fi
capeff=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
if (((0x$capeff >> 24) & 1)); then RESTRICT_OOM=false; else
  RESTRICT_OOM=true
  say "adapt: no CAP_SYS_RESOURCE: containerd restrict_oom_score_adj = true, kubelet oomScoreAdj 0"
fi
if [ "$CGROUP_V" = 1 ]; then
  say "adapt: cgroup v1: kubelet failCgroupV1: false; $CGROOT made in every hierarchy"
  for h in /sys/fs/cgroup/*/; do
    h=${h%/}
    [ "$(basename "$h")" = unified ] && continue
    mountpoint -q "$h" || continue
    mkdir -p "$h$CGROOT" 2>> "$L/cgroups.log" || { say "WARNING: cannot create $h$CGROOT"; continue; }
    if [ -f "$h/cpuset.cpus" ]; then
      [ -n "$(cat "$h$CGROOT/cpuset.cpus")" ] || cat "$h/cpuset.cpus" > "$h$CGROOT/cpuset.cpus"
      [ -n "$(cat "$h$CGROOT/cpuset.mems")" ] || cat "$h/cpuset.mems" > "$h$CGROOT/cpuset.mems"
    fi
  done
else
  # the kubelet's cgroupfs driver needs the controllers delegated below the root
  say "cgroup v2: controllers $(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null), root subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null)"
  for c in $(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null); do
    grep -qw "$c" /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null ||
      echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control 2>> "$L/cgroups.log" || say "adapt: could not enable cgroup controller $c at the root"
  done
  mkdir -p "/sys/fs/cgroup$CGROOT" 2>> "$L/cgroups.log" || say "WARNING: cannot create /sys/fs/cgroup$CGROOT"
fi
# overlayfs where the kernel lets us mount one on containerd's root's file system, else `native`
mkdir -p "$W/c/root" "$W/c/state" "$W/c/runc" "$W/ovl-test"/{l,u,w,m}
echo ok > "$W/ovl-test/l/f"
if mount -t overlay overlay -o "lowerdir=$W/ovl-test/l,upperdir=$W/ovl-test/u,workdir=$W/ovl-test/w" "$W/ovl-test/m" 2> "$L/overlay-test.log" &&
  [ "$(cat "$W/ovl-test/m/f" 2>/dev/null)" = ok ]; then
  SNAP=overlayfs
  umount "$W/ovl-test/m"
else
  SNAP=native
  say "adapt: no overlay mount possible in $W ($(head -c 200 "$L/overlay-test.log")): snapshotter native"
fi
rm -rf "$W/ovl-test"
say "cgroup v$CGROUP_V, cgroup driver cgroupfs, cgroup root $CGROOT, snapshotter $SNAP"

# ---------------------------------------------------------------- containerd config + start
# containerd_config RUNTIME: the CRI's default runtime is `runc` (bundle's runc) or `nvidia`
# (gpunode oci-runtime -> runc, part h)
containerd_config() {
  local default=$1
  cat > "$W/etc/containerd.toml" <<EOF
version = 3
root = '$W/c/root'
state = '$W/c/state'
imports = []
disabled_plugins = ['io.containerd.nri.v1.nri', 'io.containerd.snapshotter.v1.devmapper',
  'io.containerd.snapshotter.v1.zfs', 'io.containerd.snapshotter.v1.blockfile', 'io.containerd.snapshotter.v1.btrfs',
  'io.containerd.snapshotter.v1.erofs', 'io.containerd.differ.v1.erofs']

[grpc]
  address = '$SOCK'

[ttrpc]
  address = '$SOCK.ttrpc'

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = '$SNAP'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '$PAUSE_IMAGE'

  [plugins.'io.containerd.cri.v1.runtime']
    restrict_oom_score_adj = $RESTRICT_OOM
    enable_cdi = true
    cdi_spec_dirs = ['$CDI_DIR']
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = '$default'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '$W/wrap/runc'
          Root = '$W/c/runc'
          SystemdCgroup = false
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia.options]
          BinaryName = '$W/wrap/nvidia-container-runtime'
          Root = '$W/c/runc'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['$W/cni-bin']
      conf_dir = '$W/cni'
      max_conf_num = 1

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'

  [plugins.'io.containerd.internal.v1.opt']
    path = '$W/c/opt'
EOF
}
# the runtime shim as containerd's `nvidia` runtime: gpunode oci-runtime in front of the bundle's runc
cat > "$W/wrap/nvidia-container-runtime" <<EOF
#!/bin/sh
export LD_LIBRARY_PATH=$B/lib
export GPUNODE_RUNTIME_PATH=$W/wrap/runc GPUNODE_CDI_SPEC_DIRS=$CDI_DIR GPUNODE_OCI_LOG=$L/oci-runtime.log
exec $B/bin/gpunode oci-runtime "\$@"
EOF
chmod 755 "$W/wrap/nvidia-container-runtime"
mkdir -p "$W/cni" "$W/cni-bin"

start_containerd() {
  containerd_config "$1"
  start_bg containerd "$L/containerd.log" "$B/bin/containerd" --config "$W/etc/containerd.toml"
  local t=$SECONDS
  until "$B/bin/ctr" --address "$SOCK" version > /dev/null 2>&1; do
    alive "$PID_containerd" || die "containerd exited while starting"
    ((SECONDS - t < 30)) || die "containerd not answering after 30 s"
    sleep 0.2
  done
  say "containerd up (pid $PID_containerd, default runtime $1)"
}

section "(a) containerd"
start_containerd runc
"$B/bin/ctr" --address "$SOCK" version 2>&1 | grep -v -e DEPRECATION -e '^ *$' | sed 's/^/   /' | add
grep -qE 'snapshotter.*(not|skip).*'"$SNAP"'|failed to load.*'"$SNAP" "$L/containerd.log" && say "WARNING: containerd complains about snapshotter $SNAP (see containerd.log)"

# ---------------------------------------------------------------- (b) images
section "(b) images"
for img in pause nvsmi; do
  ctr_ images import --snapshotter "$SNAP" "$B/images/$img.tar" >> "$L/images.log" 2>&1 ||
    { tailog "$L/images.log"; die "ctr images import $img.tar failed"; }
done
ctr_ images label "$PAUSE_IMAGE" io.cri-containerd.pinned=pinned >> "$L/images.log" 2>&1
ctr_ images ls 2>> "$L/images.log" | awk '$1 !~ /^sha256:/ {print "   " $1 "  " $NF}' | add
have=$(ctr_ images ls -q 2>> "$L/images.log")
for ref in "$PAUSE_IMAGE" "$TEST_IMAGE"; do
  grep -qx "$ref" <<< "$have" || die "$ref not in containerd after import (have: $(tr '\n' ' ' <<< "$have"))"
done

# ---------------------------------------------------------------- (c) CDI spec
section "(c) gpunode cdi generate"
mkdir -p "$CDI_DIR"
[ -e "$CDI_DIR/nvidia.yaml" ] || CREATED_CDI=1
[ "$CREATED_CDI" = 1 ] || cp "$CDI_DIR/nvidia.yaml" "$L/nvidia.yaml.before"
gen=(cdi generate --output "$CDI_DIR/nvidia.yaml" --hook-path "$W/wrap/gpunode-hook")
[ "$SIM" = 1 ] && gen+=(--driver-root "$SIMROOT")
echo "   gpunode ${gen[*]}" | add
"${GPN[@]}" "${gen[@]}" > "$L/cdi-generate.log" 2>&1 || { tailog "$L/cdi-generate.log"; die "gpunode cdi generate failed"; }
CREATED_CDI=1
if [ "$SIM" = 1 ] && ! grep -q 'hostPath: "'"$SIMROOT"'/dev/' "$CDI_DIR/nvidia.yaml"; then
  die "the spec's device nodes have no hostPath under $SIMROOT/dev (gpunode cdi generate --driver-root writes them)"
fi
cp "$CDI_DIR/nvidia.yaml" "$L/nvidia.yaml"
"${GPN[@]}" cdi validate "$CDI_DIR/nvidia.yaml" >> "$L/cdi-generate.log" 2>&1 || { tailog "$L/cdi-generate.log"; die "gpunode cdi validate failed"; }
echo "--- gpunode cdi list" | add
"${GPN[@]}" cdi list "$CDI_DIR/nvidia.yaml" 2>&1 | sed 's/^/   /' | add

# ---------------------------------------------------------------- (d) device plugin
start_plugin() { # start_plugin STRATEGY
  mkdir -p "$DP_DIR"
  start_bg plugin "$L/plugin.log" env DEVICE_LIST_STRATEGY="$1" "${GPN[@]}" plugin --kubelet-dir "$DP_DIR"
  sleep 0.5
  alive "$PID_plugin" || die "gpunode plugin exited at once"
  say "gpunode plugin started (pid $PID_plugin, DEVICE_LIST_STRATEGY=$1)"
}
section "(d) gpunode plugin"
"${GPN[@]}" plugin --print > "$L/plugin-print.txt" 2>&1
sed 's/^/   /' "$L/plugin-print.txt" | head -12 | add
start_plugin cdi-cri

# ---------------------------------------------------------------- (e) standalone kubelet
section "(e) kubelet (standalone: no API server, no kubeconfig)"
mkdir -p "$MANIFESTS"
echo "# gpunode proof: no DNS" > "$W/etc/resolv.conf"
kubelet_config() { # kubelet_config FALLBACK(0|1)
  cat > "$W/etc/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: $MANIFESTS
fileCheckFrequency: 1s
syncFrequency: 5s
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$SOCK
cgroupDriver: cgroupfs
cgroupRoot: $CGROOT
failCgroupV1: false
failSwapOn: false
imageGCHighThresholdPercent: 100
evictionHard:
  nodefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.available: "0%"
resolvConf: $W/etc/resolv.conf
serializeImagePulls: false
registerNode: false
EOF
  [ "$RESTRICT_OOM" = false ] || echo "oomScoreAdj: 0" >> "$W/etc/kubelet.yaml"
  if [ "$1" = 1 ]; then
    # second try, for hosts whose cgroups/filesystems the kubelet's QoS tree or local storage
    # accounting cannot use (gVisor, odd VMs)
    cat >> "$W/etc/kubelet.yaml" <<EOF
cgroupsPerQOS: false
enforceNodeAllocatable: []
localStorageCapacityIsolation: false
EOF
  fi
}
REG_LINE="Got registration request from device plugin"
start_kubelet() {
  start_bg kubelet "$L/kubelet.log" "$B/bin/kubelet" --config="$W/etc/kubelet.yaml" \
    --hostname-override="$NODE" --v="$KUBELET_V"
  T_KUBELET=$(date +%s.%N)
  say "kubelet started (pid $PID_kubelet)"
}
wait_registered() { # 0 registered, 1 kubelet died, 2 timeout; $1: seconds
  local t=$SECONDS
  until grep -q "$REG_LINE" "$L/kubelet.log"; do
    alive "$PID_kubelet" || return 1
    ((SECONDS - t < $1)) || return 2
    alive "$PID_plugin" || die "gpunode plugin exited"
    sleep 0.2
  done
  wait_healthy
  return 0
}
# After registering, the kubelet dials the plugin and reads its device list (ListAndWatch); a pod
# admitted before that has no healthy device and is rejected for good. At --v>=2 the kubelet logs
# "Processed device updates ... healthyCount=N": wait for N > 0 (at most 30 s); otherwise 3 s.
wait_healthy() {
  local t=$SECONDS
  if [ "$KUBELET_V" -lt 2 ]; then sleep 3; return 0; fi
  until awk -v reg="$REG_LINE" 'index($0, reg) { ok = 0 } /Processed device updates for resource.*nvidia.com\/gpu.*healthyCount=[1-9]/ { ok = 1 } END { exit !ok }' "$L/kubelet.log"; do
    ((SECONDS - t < 30)) || { say "WARNING: the kubelet logged no healthy nvidia.com/gpu 30 s after the registration"; return 0; }
    sleep 0.2
  done
  say "the kubelet has healthy nvidia.com/gpu devices: $(grep -o 'healthyCount=[0-9]*' "$L/kubelet.log" | tail -1)"
}
kubelet_config 0
start_kubelet
wait_registered 60
rc=$?
if [ $rc = 1 ]; then
  say "kubelet exited:"; tailog "$L/kubelet.log" 15
  say "adapt: kubelet again with cgroupsPerQOS: false, enforceNodeAllocatable: [], localStorageCapacityIsolation: false"
  cp "$L/kubelet.log" "$L/kubelet-first-try.log"
  kubelet_config 1
  start_kubelet
  wait_registered 60
  rc=$?
fi
[ $rc = 0 ] || die "the device plugin did not register at the kubelet ($([ $rc = 1 ] && echo "kubelet exited" || echo "60 s timeout"))"
T_REG=$(date +%s.%N)
say "(f) plugin registered at the kubelet $(awk -v a="$T_KUBELET" -v b="$T_REG" 'BEGIN { printf "%.1f", b - a }') s after the kubelet started"

# ---------------------------------------------------------------- (f) static pod, (g) result
yaml_quote() { local v=${1//\\/\\\\}; v=${v//\"/\\\"}; printf '"%s"' "$v"; }
# run_pod NAME: writes the static pod, waits for its container to finish, puts its log in the transcript
run_pod() {
  local name=$1 ctr=gpu t_pod t log st
  cat > "$W/$name.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $name
  namespace: default
spec:
  hostNetwork: true
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: $ctr
    image: $TEST_IMAGE
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", $(yaml_quote "$POD_CMD")]
    resources:
      limits:
        nvidia.com/gpu: 1
EOF
  cp "$W/$name.yaml" "$L/$name.yaml"
  mv "$W/$name.yaml" "$MANIFESTS/$name.yaml"
  t_pod=$(date +%s.%N)
  say "static pod $name written to $MANIFESTS (command: $POD_CMD)"
  t=$SECONDS
  log=""
  cid=""
  while :; do
    log=$(ls /var/log/pods/default_"$name"-"$NODE"_*/"$ctr"/0.log 2>/dev/null | head -1)
    if [ -z "$cid" ]; then # our container's ID, from the CRI's labels
      for id in $(ctr_ containers ls -q 2>/dev/null); do
        info=$(ctr_ containers info "$id" 2>/dev/null)
        grep -q "\"io.kubernetes.container.name\": \"$ctr\"" <<< "$info" &&
          grep -q "\"io.kubernetes.pod.name\": \"$name-$NODE\"" <<< "$info" && { cid=$id; break; }
      done
    fi
    # finished: it wrote its log and its task is no longer running (the CRI deletes a task at exit)
    if [ -n "$cid" ] && [ -s "$log" ]; then
      st=$(ctr_ tasks ls 2>/dev/null | awk -v id="$cid" '$1 == id {print $3}')
      [ "$st" != RUNNING ] && [ "$st" != CREATED ] && [ "$st" != PAUSED ] && { st=${st:-exited, task deleted}; break; }
    fi
    alive "$PID_kubelet" || die "kubelet exited while running pod $name"
    if grep -qE "(admission denied|UnexpectedAdmissionError|OutOfnvidia|Failed to admit).*$name-$NODE|$name-$NODE.*(admission denied|UnexpectedAdmissionError|OutOfnvidia|Failed to admit)" "$L/kubelet.log"; then
      grep -E "admission denied|UnexpectedAdmissionError|OutOfnvidia|Failed to admit" "$L/kubelet.log" | tail -5 | cut -c1-400 | sed 's/^/   | /' | add
      die "the kubelet rejected pod $name"
    fi
    # a container that cannot be created or started: the kubelet retries forever, we stop at 3
    if [ "$(grep -cE "(CreateContainerError|RunContainerError|StartContainer).*pod=\"default/$name-$NODE\"" "$L/kubelet.log")" -ge 3 ]; then
      grep -E "CreateContainer|StartContainer|RunContainer" "$L/kubelet.log" | grep -v '^===' | tail -3 | cut -c1-600 | sed 's/^/   | /' | add
      die "the container of pod $name cannot be created/started (3 tries)"
    fi
    ((SECONDS - t < POD_TIMEOUT)) || { ctr_ containers ls 2>&1 | sed 's/^/   /' | add; ctr_ tasks ls 2>&1 | sed 's/^/   /' | add; die "pod $name did not finish within $POD_TIMEOUT s"; }
    sleep 0.5
  done
  T_POD_DONE=$(date +%s.%N)
  cp "$log" "$L/$name-0.log"
  say "pod $name finished ($st) $(elapsed_since "$t_pod") s after its manifest was written"
  echo "--- pod $name output ($log)" | add
  # CRI log format: TIME STREAM P|F TEXT
  sed -E 's/^[^ ]+ (stdout|stderr) [PF] /   /' "$log" | add
  POD_OUT=$(sed -E 's/^[^ ]+ (stdout|stderr) [PF] //' "$log")
}
show_plugin_and_kubelet() {
  echo "--- plugin: Allocate lines" | add
  grep -iE 'allocat' "$L/plugin.log" | tail -8 | cut -c1-300 | sed 's/^/   /' | add
  echo "--- kubelet: device-plugin lines" | add
  grep -iE 'device plugin|deviceplugin|devicemanager|nvidia.com/gpu|cdi' "$L/kubelet.log" | grep -v '^===' | head -12 | cut -c1-300 | sed 's/^/   /' | add
}

section "(f, g) static pod, device plugin strategy cdi-cri, runtime runc"
POD_TIMEOUT=120
run_pod gpu-smi-cdi
show_plugin_and_kubelet
if [ "$SIM" = 1 ]; then
  grep -q '/dev/nvidia[0-9]' <<< "$POD_OUT" || die "the pod does not see a /dev/nvidiaN"
  n=$(grep -cE '/dev/nvidia[0-9]+$' <<< "$POD_OUT")
  [ "$n" = 1 ] || die "the pod sees $n GPU device nodes, expected 1"
else
  grep -qE '^GPU [0-9]+: .*\(UUID: GPU-' <<< "$POD_OUT" || die "nvidia-smi -L inside the pod printed no GPU"
  n=$(grep -cE '^GPU [0-9]+: ' <<< "$POD_OUT")
  [ "$n" = 1 ] || die "nvidia-smi -L inside the pod lists $n GPUs, expected 1"
fi
say "PASS cdi-cri: the pod sees exactly one GPU"
uuid=$(grep -o 'GPU-[0-9a-fA-F-]*' "$L/plugin.log" | tail -1)
if [ "$SIM" != 1 ] && [ -n "$uuid" ]; then
  grep -q "$uuid" <<< "$POD_OUT" && say "the pod's GPU is the one the plugin allocated ($uuid)" ||
    say "WARNING: the plugin allocated $uuid, which the pod's nvidia-smi -L does not show"
fi
section "timings (cdi-cri): kubelet start -> plugin registered $(awk -v a="$T_KUBELET" -v b="$T_REG" 'BEGIN { printf "%.1f", b - a }') s -> pod finished $(awk -v a="$T_REG" -v b="$T_POD_DONE" 'BEGIN { printf "%.1f", b - a }') s; whole run so far $(ts | tr -d ' ') s"
RESULT="PASSED (cdi-cri)"

# ---------------------------------------------------------------- (h) runtime-shim path (optional)
if [ "${GPUNODE_PROOF_SHIM:-1}" = 1 ] && [ "$(ts | tr -d ' ' | cut -d. -f1)" -gt 200 ]; then
  say "skipping the runtime-shim part: $(ts | tr -d ' ') s already spent (deadline $DEADLINE_S s)"
elif [ "${GPUNODE_PROOF_SHIM:-1}" = 1 ]; then
  section "(h) runtime shim: containerd default runtime nvidia = gpunode oci-runtime, plugin DEVICE_LIST_STRATEGY=volume-mounts"
  (
    # a failure here must not turn the cdi-cri result into a failure: run it in a subshell with its
    # own die, whose exit code the main script reads
    die() {
      say "FAILED (shim part): $*"
      for f in "$L"/kubelet.log "$L"/plugin.log "$L"/oci-runtime.log "$L"/containerd.log; do [ -f "$f" ] && tailog "$f" 15; done
      printf '%s\n' "${PIDS[@]}" > "$W/pids-from-shim-part"
      exit 1
    }
    stop_named kubelet 15
    rm -f "$MANIFESTS"/*.yaml "$DP_DIR/kubelet.sock"
    stop_named plugin 10
    stop_named containerd 10
    kill_pods
    unmount_ours
    cp "$L/kubelet.log" "$L/kubelet-cdi.log"; cp "$L/plugin.log" "$L/plugin-cdi.log"; cp "$L/containerd.log" "$L/containerd-cdi.log"
    : > "$L/kubelet.log"; : > "$L/plugin.log"
    start_containerd nvidia
    # volume-mounts, not envvar: the shim ignores an unprivileged pod's NVIDIA_VISIBLE_DEVICES
    start_plugin volume-mounts
    kubelet_config "$(grep -q cgroupsPerQOS "$W/etc/kubelet.yaml" && echo 1 || echo 0)"
    start_kubelet
    wait_registered 60 || die "the device plugin did not register at the restarted kubelet"
    POD_TIMEOUT=90
    T_REG=$(date +%s.%N)
    say "plugin registered again $(awk -v a="$T_KUBELET" -v b="$T_REG" 'BEGIN { printf "%.1f", b - a }') s after the kubelet started"
    run_pod gpu-smi-shim
    show_plugin_and_kubelet
    echo "--- gpunode oci-runtime decisions" | add
    grep -v '^$' "$L/oci-runtime.log" 2>/dev/null | tail -6 | cut -c1-300 | sed 's/^/   /' | add
    if [ "$SIM" = 1 ]; then
      n=$(grep -cE '/dev/nvidia[0-9]+$' <<< "$POD_OUT")
    else
      n=$(grep -cE '^GPU [0-9]+: .*\(UUID: GPU-' <<< "$POD_OUT")
    fi
    [ "$n" = 1 ] || die "through the shim the pod sees $n GPUs, expected 1"
    say "PASS shim: the pod sees exactly one GPU through gpunode oci-runtime"
    # the PIDs started in this subshell: hand them to the parent's cleanup
    printf '%s\n' "${PIDS[@]}" > "$W/pids-from-shim-part"
    exit 0
  )
  src=$?
  [ -f "$W/pids-from-shim-part" ] && mapfile -t PIDS < "$W/pids-from-shim-part"
  # a failed subshell may have started processes that the parent does not know of: find them by binary
  if [ $src != 0 ]; then
    for p in /proc/[0-9]*; do
      case "$(readlink "$p/exe" 2>/dev/null)" in "$B"/bin/*) PIDS+=("leftover:${p#/proc/}") ;; esac
    done
    RESULT="PASSED (cdi-cri); shim part FAILED"
  else
    RESULT="PASSED (cdi-cri and runtime shim)"
  fi
fi
exit 0
