#!/usr/bin/env bash
# The seeds' check `docker run --rm --gpus all IMAGE nvidia-smi` on a node set up by gpunode alone
# (docs/docker.md), on the GPU machine, which has the NVIDIA driver and no Docker: Debian 12's
# dockerd 20.10 + containerd + runc from .dockerbundle/ (scripts/bundle-docker-gpu.sh), started
# privately (own data root, exec root, socket, no network); `gpunode cdi generate` writes the CDI
# spec, `gpunode runtime configure --runtime docker --set-as-default` the daemon.json (nvidia =
# gpunode's OCI shim, the default runtime) and the `nvidia-container-runtime-hook` link Docker looks
# for to offer --gpus. The image is `docker import`ed (busybox + glibc; the host's nvidia-smi and
# driver libraries come in through the CDI spec).
#
#   bash scripts/gpu-proof-docker.sh            on the GPU machine, as root, from the repo root
#   GPUNODE_PROOF_SIMULATE=1 bash scripts/gpu-proof-docker.sh
#       here, without a GPU: a simulated dgx-h200 node (`gpunode sim hostroot --device-nodes`, the
#       simulated NVML); the containers list /dev/nvidia* and the driver libraries instead of running
#       nvidia-smi. It re-runs itself inside `unshare --mount --pid --fork --mount-proc [--net]` with
#       tmpfs over /run, /var/lib/docker and /etc/docker (dockerd's and containerd's fixed paths), so
#       other Docker/containerd/podman users of the machine are not disturbed
#       (GPUNODE_PROOF_ISOLATE=0 skips that, =1 forces it; GPUNODE_PROOF_NET=0 keeps the host network).
#
# Output: $OUT/transcript.txt (short) and $OUT/docker-proof.tgz (dockerd's log, the shim's debug log,
# daemon.json, the CDI spec, every container's output); without $OUT, /tmp/gpunode-out.
# Exit 0 only if `docker run --rm --gpus all IMAGE nvidia-smi -L` lists the H200 (simulated: all 8
# GPU device nodes); the other checks are reported as PASS/FAIL lines and in the RESULT line.
# Every process it starts is stopped on exit (by PID), every mount it made is unmounted, its cgroups
# removed, and what dockerd created in /etc/docker, /run/docker, /run/containerd or /var/lib/docker
# (if those did not exist before) removed.
# Env: GPUNODE_PROOF_DEADLINE_S (default 270; each docker run has 60 s more, cleanup ~25 s), GPUNODE_PROOF_KEEP=1 leaves everything (debugging),
#      GPUNODE_PROOF_STORAGE=overlay2|vfs forces dockerd's storage driver.
set -uo pipefail
umask 022
REPO=$(pwd)
SELF=$REPO/scripts/gpu-proof-docker.sh
[ -f "$SELF" ] || SELF=$(readlink -f "$0")
SIM=${GPUNODE_PROOF_SIMULATE:-0}
# GPUNODE_PROOF_FAKE_SMI=1 (with SIMULATE=1, for testing this script): the simulated node's
# nvidia-smi, which the spec mounts into containers, becomes a script that lists the /dev/nvidiaN it
# sees as H200s, so the real-GPU checks run against the simulated node
FAKE=0; [ "$SIM" = 1 ] && [ "${GPUNODE_PROOF_FAKE_SMI:-0}" = 1 ] && FAKE=1
REAL_CHECKS=1; [ "$SIM" = 1 ] && [ "$FAKE" != 1 ] && REAL_CHECKS=0
FINAL=${OUT:-/tmp/gpunode-out}

# ---------------------------------------------------------------- isolation
if [ "${GPUNODE_PROOF_INNER:-0}" != 1 ]; then
  [ "$(id -u)" = 0 ] || { echo "gpu-proof-docker: must run as root" >&2; exit 2; }
  iso=${GPUNODE_PROOF_ISOLATE:-$SIM}
  if [ "$iso" = 1 ]; then
    mkdir -p "$FINAL"
    net=(); [ "${GPUNODE_PROOF_NET:-1}" = 1 ] && net=(--net)
    exec unshare --mount "${net[@]}" --pid --fork --mount-proc --propagation private \
      env GPUNODE_PROOF_INNER=1 GPUNODE_PROOF_ISOLATED=1 OUT="$FINAL" bash -c '
        set -e
        ip link set lo up 2>/dev/null || true
        # dockerd/containerd fixed paths: /run (docker.sock, /run/docker, /run/containerd),
        # /var/lib/docker, /etc/docker (key.json): private tmpfs over those that exist
        mount -t tmpfs -o mode=755 gpunode-proof /run
        for d in /var/lib/docker /var/lib/containerd /etc/docker; do
          [ -d "$d" ] && mount -t tmpfs -o mode=755 gpunode-proof "$d"
        done
        exec bash "$0"' "$SELF"
  fi
fi

# ---------------------------------------------------------------- settings
DB=$REPO/.dockerbundle
W=$(mktemp -d /tmp/gpd-XXXXXX)   # short: containerd's socket lives below the exec root (< 108 bytes)
chmod 755 "$W"
B=$W/b            # unpacked bundle
L=$W/logs
T=$L/transcript.txt
D=$W/d            # dockerd's data root, exec root, socket, daemon.json
CDI_DIR=$W/cdi
HOSTROOT=$W/hostroot   # scratch host root: runtime configure puts the hook link in its /usr/bin
HOOKDIR=$HOSTROOT/usr/bin
IMG=gpunode.test/nvsmi:docker
mkdir -p "$B" "$L" "$FINAL" "$D" "$CDI_DIR" "$HOOKDIR" "$W/wrap"
CGPARENT=/gpunode-docker-proof-${W##*-}
T0=$(date +%s.%N)
DOCKERD_PID=""
MOUNTS_BEFORE=$W/mounts-before
awk '{print $5}' /proc/self/mountinfo | sort > "$MOUNTS_BEFORE"
# fixed paths dockerd/containerd may create: removed at exit if they did not exist before
FIXED=(/etc/docker /run/docker /run/containerd /var/lib/docker /var/lib/containerd /var/run/docker.sock)
PREEXIST=()
for p in "${FIXED[@]}"; do [ -e "$p" ] && PREEXIST+=("$p"); done
CHECKS=0; FAILED=(); KEY=""

ts() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%6.1f", b - a }'; }
say() { echo "[$(ts)s] $*" | tee -a "$T" >&2; }
section() { { echo; echo "== $*"; } | tee -a "$T" >&2; }
add() { tee -a "$T" >&2; }
tailog() { # tailog FILE [N]
  [ -f "$1" ] || { echo "   (${1#"$W"/}: no such file)" | add; return 0; }
  { echo "   ----- last ${2:-30} lines of ${1#"$W"/} -----"; tail -n "${2:-30}" "$1" | sed 's/^/   | /' | cut -c1-400; } | add
}
die() {
  say "FAILED: $*"
  tailog "$D/dockerd.log" 30
  tailog "$L/shim.log" 10
  RESULT="FAILED: $*"
  exit 1
}
pass() { CHECKS=$((CHECKS + 1)); say "PASS $1: ${*:2}"; }
fail() { CHECKS=$((CHECKS + 1)); FAILED+=("$1"); say "FAIL $1: ${*:2}"; }
alive() { local st; st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1; [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]; }
stop_pid() { # stop_pid NAME PID GRACE_S
  local i
  alive "$2" || return 0
  kill -TERM "$2" 2>/dev/null || true
  for ((i = 0; i < $3 * 10; i++)); do alive "$2" || break; sleep 0.1; done
  alive "$2" && { say "$1 (pid $2) ignored SIGTERM for $3 s: SIGKILL"; kill -KILL "$2" 2>/dev/null || true; sleep 0.3; }
  return 0
}
ours() { # PIDs running a program of the bundle (containerd, shims, runc, gpunode)
  local p
  for p in /proc/[0-9]*; do
    [[ "$(readlink "$p/exe" 2>/dev/null)" == "$B"/* ]] && echo "${p#/proc/}"
  done
}
unmount_ours() {
  local i m ms
  for ((i = 0; i < 3; i++)); do
    mapfile -t ms < <(awk '{print $5}' /proc/self/mountinfo | sort | comm -13 "$MOUNTS_BEFORE" - |
      grep -E "^($W|/run/docker|/var/run/docker|/run/containerd|/var/lib/docker)(/|$)" | sort -r)
    [ ${#ms[@]} -gt 0 ] || return 0
    for m in "${ms[@]}"; do m=$(printf '%b' "$m"); umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  done
}

# ---------------------------------------------------------------- cleanup (trap)
finish() {
  local rc=$?
  trap - EXIT INT TERM
  kill -- -"$WATCHDOG" 2>/dev/null
  [ -n "${RESULT:-}" ] || RESULT="FAILED (exit $rc)"
  if [ "${GPUNODE_PROOF_KEEP:-0}" = 1 ]; then
    say "GPUNODE_PROOF_KEEP=1: leaving everything running in $W (dockerd pid $DOCKERD_PID)"
  else
    if [ -n "$DOCKERD_PID" ] && alive "$DOCKERD_PID"; then
      timeout 20 "$B/bin/docker" -H "unix://$D/docker.sock" ps -aq 2>/dev/null | while read -r c; do
        timeout 10 "$B/bin/docker" -H "unix://$D/docker.sock" rm -f "$c" >/dev/null 2>&1; done
      stop_pid dockerd "$DOCKERD_PID" 20
    fi
    local p left
    left=$(ours | tr '\n' ' ')
    [ -z "$left" ] || { say "stopping what dockerd left (pids $left)"; for p in $left; do kill -KILL "$p" 2>/dev/null; done; sleep 0.5; }
    unmount_ours
    local d
    for d in /sys/fs/cgroup/*"$CGPARENT" /sys/fs/cgroup"$CGPARENT"; do
      [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
      [ -d "$d" ] && say "WARNING: could not remove cgroup $d"
    done
    [ "${MOUNTED_CGROUP:-0}" = 1 ] && umount /sys/fs/cgroup 2>/dev/null
    for p in "${FIXED[@]}"; do
      [ -e "$p" ] || [ -L "$p" ] || continue
      printf '%s\n' "${PREEXIST[@]}" | grep -qxF "$p" && continue
      say "removing $p (dockerd created it)"
      rm -rf "$p"
    done
  fi
  section "RESULT: $RESULT (total $(ts | tr -d ' ') s)"
  cp "$D/dockerd.log" "$D/daemon.json" "$L/" 2>/dev/null
  cp "$CDI_DIR/nvidia.yaml" "$L/" 2>/dev/null
  tar -C "$L" -czf "$FINAL/docker-proof.tgz" . 2>/dev/null
  cp "$T" "$FINAL/transcript.txt"
  if [ "${GPUNODE_PROOF_KEEP:-0}" != 1 ]; then
    chmod -R u+w "$W" 2>/dev/null; rm -rf "$W" 2>/dev/null || say "WARNING: could not remove all of $W"
  fi
  ls -la "$FINAL" >&2
  exit $rc
}
trap finish EXIT
DEADLINE_S=${GPUNODE_PROOF_DEADLINE_S:-270}
trap 'die "interrupted or past the deadline (GPUNODE_PROOF_DEADLINE_S=$DEADLINE_S)"' INT TERM
setsid bash -c "sleep $DEADLINE_S; kill -TERM $$" > /dev/null 2>&1 < /dev/null &
WATCHDOG=$!

# ---------------------------------------------------------------- (a) unpack, host
section "gpunode docker run --gpus proof ($([ "$SIM" = 1 ] && echo "SIMULATED dgx-h200$([ "$FAKE" = 1 ] && echo ", FAKE nvidia-smi")" || echo "real GPUs")) $(date -u +%FT%TZ)"
[ "$(id -u)" = 0 ] || die "must run as root"
[ -s "$DB/payload.tar.xz" ] || die "$DB/payload.tar.xz missing: run scripts/bundle-docker-gpu.sh on the build machine and carry .dockerbundle"
say "host: $(uname -sr), $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}"), $(nproc) cpus, cgroup fs $(stat -fc %T /sys/fs/cgroup 2>/dev/null), work dir $W$([ "${GPUNODE_PROOF_ISOLATED:-0}" = 1 ] && echo ", private mount/pid$([ "${GPUNODE_PROOF_NET:-1}" = 1 ] && echo /net) namespace")"
t=$(date +%s.%N)
(cd "$DB" && sha256sum -c --quiet SHA256SUMS) > "$L/unpack.log" 2>&1 || { tailog "$L/unpack.log"; die "payload.tar.xz does not match SHA256SUMS"; }
if command -v xz >/dev/null; then
  xz -dc "$DB/payload.tar.xz" | tar -C "$B" -xf - 2>> "$L/unpack.log"
elif command -v python3 >/dev/null; then
  python3 -c 'import lzma,sys,shutil; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer, 1<<20)' "$DB/payload.tar.xz" |
    tar -C "$B" -xf - 2>> "$L/unpack.log"
else
  die "neither xz nor python3 here to unpack the bundle"
fi
for f in dockerd docker containerd containerd-shim-runc-v2 runc gpunode; do
  [ -x "$B/bin/$f" ] || { tailog "$L/unpack.log"; die "unpacking failed: no bin/$f"; }
done
say "unpacked $(du -sh "$B" | cut -f1) in $(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
# gpunode for our own commands, and as the CDI hooks' program (runc runs those with the spec's
# environment only, so they need their libraries named here; on a real node gpunode is installed)
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s/bin/gpunode "$@"\n' "$B" "$B" > "$W/wrap/gpunode"
cp "$W/wrap/gpunode" "$W/wrap/gpunode-hook"
chmod 755 "$W/wrap"/*
# the OCI runtime Docker registers: gpunode under the shim's name (argv[0] picks the mode); it finds
# its libraries through dockerd's LD_LIBRARY_PATH, which containerd, the runc shim and (as the
# --gpus hook, whose env is dockerd's) runc pass on
ln -s bin/gpunode "$B/nvidia-container-runtime"
BL=$B/lib
{
  echo "   dockerd:    $(LD_LIBRARY_PATH=$BL "$B/bin/dockerd" --version 2>&1)"
  echo "   docker CLI: $(LD_LIBRARY_PATH=$BL "$B/bin/docker" --version 2>&1)"
  echo "   containerd: $(LD_LIBRARY_PATH=$BL "$B/bin/containerd" --version 2>&1)"
  echo "   runc:       $(LD_LIBRARY_PATH=$BL "$B/bin/runc" --version 2>&1 | head -1) ($(LD_LIBRARY_PATH=$BL "$B/bin/runc" --version 2>&1 | grep libseccomp))"
  echo "   gpunode:    $("$W/wrap/gpunode" --version 2>&1)"
} | add
LD_LIBRARY_PATH=$BL "$B/bin/dockerd" --version >/dev/null 2>&1 || die "the bundle's dockerd does not run here: $(LD_LIBRARY_PATH=$BL "$B/bin/dockerd" --version 2>&1 | tail -2)"
LD_LIBRARY_PATH=$BL "$B/bin/runc" --version >/dev/null 2>&1 || die "the bundle's runc does not run here"
"$W/wrap/gpunode" --version >/dev/null 2>&1 || die "the bundle's gpunode does not run here: $("$W/wrap/gpunode" --version 2>&1 | tail -2)"
[ -S /run/containerd/containerd.sock ] && say "WARNING: /run/containerd/containerd.sock exists: dockerd 20.10 uses that containerd instead of starting its own (run with GPUNODE_PROOF_ISOLATE=1 to hide it)"

GPN=("$W/wrap/gpunode")
if [ "$SIM" = 1 ]; then
  SIMROOT=$W/simroot
  "$W/wrap/gpunode" sim hostroot --device-nodes dgx-h200 "$SIMROOT" > "$L/sim-hostroot.log" 2>&1 ||
    { tailog "$L/sim-hostroot.log"; die "gpunode sim hostroot --device-nodes dgx-h200 failed (needs CAP_MKNOD)"; }
  mkdir -p "$SIMROOT$(dirname "$SIMROOT")"; ln -sfn / "$SIMROOT$SIMROOT"
  export GPUNODE_SIM_PROFILE=dgx-h200
  GPN+=(--host-root "$SIMROOT" --nvml-library "$B/bin/libgpunode-simnvml.so" --cuda-library "$B/bin/libgpunode-simnvml.so")
  say "simulated node: $SIMROOT"
  echo "--- host: ls \$SIMROOT/dev (simulated)" | add
  ls "$SIMROOT"/dev | tr '\n' ' ' | sed 's/^/   /' | add; echo | add
else
  # the driver's tools: /usr/bin on stock installs, /usr/local/nvidia/bin on some images
  PATH=$PATH:/usr/local/nvidia/bin:/usr/bin
  echo "--- host: nvidia-smi -L" | add
  nvidia-smi -L > "$L/host-nvidia-smi-L.txt" 2>&1; r=$?
  sed 's/^/   /' "$L/host-nvidia-smi-L.txt" | add
  [ $r = 0 ] || die "nvidia-smi -L fails on the host"
  say "host nvidia-smi: $(command -v nvidia-smi); driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
  ls -l /dev/nvidia* > "$L/host-dev-nvidia.txt" 2>&1
fi

# cgroups, storage driver, AppArmor
if ! mountpoint -q /sys/fs/cgroup; then
  mkdir -p /sys/fs/cgroup
  mount -t cgroup2 none /sys/fs/cgroup 2>> "$L/cgroups.log" && { MOUNTED_CGROUP=1; say "adapt: mounted cgroup2 on /sys/fs/cgroup (none was mounted)"; } ||
    say "WARNING: no cgroup file system at /sys/fs/cgroup and cgroup2 cannot be mounted"
fi
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
  CGROUP_V=2
  for c in $(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null); do
    grep -qw "$c" /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null ||
      echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control 2>> "$L/cgroups.log" || say "adapt: could not enable cgroup controller $c at the root"
  done
else
  CGROUP_V=1
fi
mkdir -p "$D/root" "$D/exec" "$W/ovl"/{l,u,w,m}
echo ok > "$W/ovl/l/f"
if [ -n "${GPUNODE_PROOF_STORAGE:-}" ]; then
  SD=$GPUNODE_PROOF_STORAGE
elif mount -t overlay overlay -o "lowerdir=$W/ovl/l,upperdir=$W/ovl/u,workdir=$W/ovl/w" "$W/ovl/m" 2> "$L/overlay-test.log" &&
  [ "$(cat "$W/ovl/m/f" 2>/dev/null)" = ok ]; then
  SD=overlay2
  umount "$W/ovl/m"
else
  SD=vfs
  say "adapt: no overlay mount possible in $W ($(head -c 200 "$L/overlay-test.log")): storage driver vfs"
fi
rm -rf "$W/ovl"
AA=off
if [ "$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)" = Y ] && [ -d /sys/kernel/security/apparmor ]; then
  AA=on; command -v apparmor_parser >/dev/null || PATH=$PATH:/usr/sbin:/sbin command -v apparmor_parser >/dev/null || AA=on-no-parser
fi
capeff=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
OOMOPT=()
if ! (((0x$capeff >> 24) & 1)); then
  OOMOPT=(--oom-score-adjust=0)
  say "adapt: no CAP_SYS_RESOURCE (CapEff $capeff): dockerd --oom-score-adjust=0 (it and its containerd keep their OOM score)"
fi
say "cgroup v$CGROUP_V (cgroupfs driver, parent $CGPARENT), storage driver $SD, AppArmor $AA, $W on $(stat -fc %T "$W")"

# ---------------------------------------------------------------- (b) gpunode cdi generate
section "(b) gpunode cdi generate"
gen=(cdi generate --output "$CDI_DIR/nvidia.yaml" --hook-path "$W/wrap/gpunode-hook")
[ "$SIM" = 1 ] && gen+=(--driver-root "$SIMROOT")
echo "   \$ gpunode ${gen[*]}" | add
"${GPN[@]}" "${gen[@]}" > "$L/cdi-generate.log" 2>&1 || { tailog "$L/cdi-generate.log"; die "gpunode cdi generate failed"; }
sed 's/^/   /' "$L/cdi-generate.log" | tail -5 | add
if [ "$SIM" = 1 ] && ! grep -q 'hostPath: "'"$SIMROOT"'/dev/' "$CDI_DIR/nvidia.yaml"; then
  die "the spec's device nodes have no hostPath under $SIMROOT/dev"
fi
"${GPN[@]}" cdi validate "$CDI_DIR/nvidia.yaml" >> "$L/cdi-generate.log" 2>&1 || { tailog "$L/cdi-generate.log"; die "gpunode cdi validate failed"; }
"${GPN[@]}" cdi list "$CDI_DIR/nvidia.yaml" > "$L/cdi-list.txt" 2>&1
echo "--- gpunode cdi list" | add
sed 's/^/   /' "$L/cdi-list.txt" | head -20 | add
mapfile -t UUIDS < <(sed -n 's/^nvidia.com\/gpu=\(GPU-.*\)$/\1/p' "$L/cdi-list.txt")
NGPU=${#UUIDS[@]}
[ "$NGPU" -gt 0 ] || die "no GPU UUID in the spec"
if [ "$FAKE" = 1 ]; then
  {
    echo '#!/bin/sh'
    echo '# fake nvidia-smi (gpu-proof-docker.sh GPUNODE_PROOF_FAKE_SMI=1): the /dev/nvidiaN it sees, as H200s'
    echo 'd=${FAKE_SMI_DEV:-/dev}; i=0'
    echo 'for m in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/nvidia/lib64; do ls $m/libnvidia-ml.so.1 >/dev/null 2>&1 && ml=1; done'
    echo '[ -n "$ml" ] || [ -n "$FAKE_SMI_DEV" ] || { echo "NVIDIA-SMI has failed because it could not find libnvidia-ml.so.1"; exit 12; }'
    echo 'case "$1" in --query-gpu=*) echo 580.95.05; exit 0 ;; esac'
    echo '[ "$1" = -L ] || echo "| NVIDIA-SMI 580.95.05 (fake)   Driver Version: 580.95.05 |"'
    n=0
    for u in "${UUIDS[@]}"; do
      echo "[ -e \$d/nvidia$n ] && { echo \"GPU \$i: NVIDIA H200 (UUID: $u)\"; i=\$((i+1)); }"
      n=$((n + 1))
    done
    echo '[ $i -gt 0 ] || { echo "No devices were found"; exit 6; }'
  } > "$SIMROOT/usr/bin/nvidia-smi"
  chmod 755 "$SIMROOT/usr/bin/nvidia-smi"
  echo "--- host: nvidia-smi -L (FAKE, of the simulated node)" | add
  FAKE_SMI_DEV=$SIMROOT/dev "$SIMROOT/usr/bin/nvidia-smi" -L > "$L/host-nvidia-smi-L.txt" 2>&1
  sed 's/^/   /' "$L/host-nvidia-smi-L.txt" | add
fi
if [ "$REAL_CHECKS" != 1 ]; then
  UIDX=$((NGPU > 2 ? 2 : 0))
else
  UIDX=0
  h=$(grep -o 'GPU-[0-9a-fA-F-]*' "$L/host-nvidia-smi-L.txt" | head -1)
  [ "$h" = "${UUIDS[0]}" ] || say "WARNING: the spec's first UUID ${UUIDS[0]} is not the host's GPU 0 ($h)"
fi
UUID=${UUIDS[$UIDX]}
say "spec: $NGPU GPU(s); GPU $UIDX is $UUID; $(grep -c 'hostPath' "$CDI_DIR/nvidia.yaml") mounts/nodes, $(grep -c 'hookName' "$CDI_DIR/nvidia.yaml") hooks"

# ---------------------------------------------------------------- (c) gpunode runtime configure
section "(c) gpunode runtime configure --runtime docker --set-as-default"
cfg=(--host-root "$HOSTROOT" runtime configure --runtime docker --config "$D/daemon.json"
     --runtime-path "$B/nvidia-container-runtime" --set-as-default --backup-dir "$W/backups")
echo "   \$ gpunode ${cfg[*]}" | add
"$W/wrap/gpunode" "${cfg[@]}" > "$L/runtime-configure.log" 2>&1; r=$?
sed 's/^/   /' "$L/runtime-configure.log" | add
[ $r = 0 ] || die "gpunode runtime configure failed (exit $r)"
echo "--- daemon.json" | add
sed 's/^/   /' "$D/daemon.json" | add
[ -L "$HOOKDIR/nvidia-container-runtime-hook" ] || die "no $HOOKDIR/nvidia-container-runtime-hook after runtime configure"
say "hook: $(ls -l "$HOOKDIR/nvidia-container-runtime-hook" | sed 's/.* \//\//')"
grep -q '"default-runtime": *"nvidia"' "$D/daemon.json" || die "daemon.json does not make nvidia the default runtime"

# ---------------------------------------------------------------- (d) dockerd
section "(d) dockerd (private data root, exec root, socket; no network)"
SOCK=$D/docker.sock
DK=("$B/bin/docker" -H "unix://$SOCK")
dk() { LD_LIBRARY_PATH=$BL "${DK[@]}" "$@"; }
start_dockerd() { # start_dockerd STORAGE_DRIVER; 0 when it answers
  local sd=$1 t=$SECONDS
  echo "=== $(date -u +%FT%TZ) storage driver $sd" >> "$D/dockerd.log"
  env -i PATH="$HOOKDIR:$B/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" HOME=/root \
    LD_LIBRARY_PATH="$BL" GPUNODE_CDI_SPEC_DIRS="$CDI_DIR" GPUNODE_OCI_LOG="$L/shim.log" GPUNODE_RUNTIME_PATH="$B/bin/runc" \
    setsid "$B/bin/dockerd" --config-file "$D/daemon.json" --data-root "$D/root" --exec-root "$D/exec" \
      --pidfile "$D/dockerd.pid" -H "unix://$SOCK" --bridge=none --iptables=false --ip-forward=false \
      --ip-masq=false --userland-proxy=false --storage-driver="$sd" --cgroup-parent "$CGPARENT" \
      --exec-opt native.cgroupdriver=cgroupfs "${OOMOPT[@]}" --log-level info >> "$D/dockerd.log" 2>&1 < /dev/null &
  DOCKERD_PID=$!
  until dk version > /dev/null 2>&1; do
    alive "$DOCKERD_PID" || { say "dockerd (storage driver $sd) exited while starting"; tailog "$D/dockerd.log" 15; return 1; }
    ((SECONDS - t < 45)) || { say "dockerd (storage driver $sd) not answering after 45 s"; tailog "$D/dockerd.log" 15; stop_pid dockerd "$DOCKERD_PID" 15; return 1; }
    sleep 0.3
  done
  say "dockerd up (pid $DOCKERD_PID, storage driver $sd) in $((SECONDS - t)) s"
}
if ! start_dockerd "$SD"; then
  [ "$SD" = vfs ] && die "dockerd did not start"
  say "adapt: dockerd again with storage driver vfs"
  stop_pid dockerd "$DOCKERD_PID" 15; unmount_ours; rm -rf "$D/root" "$D/exec"; mkdir -p "$D/root" "$D/exec"
  SD=vfs
  start_dockerd vfs || die "dockerd did not start (overlay2, then vfs)"
fi
dk version > "$L/docker-version.txt" 2>&1
dk info > "$L/docker-info.txt" 2>&1
grep -E '^ *(Server Version|Storage Driver|Cgroup Driver|Cgroup Version|Runtimes|Default Runtime|Init Binary|containerd version|runc version|Kernel Version|Security Options|  (apparmor|seccomp|cgroupns))' \
  "$L/docker-info.txt" | sed 's/^ */   /' | add
grep -q 'Default Runtime: nvidia' "$L/docker-info.txt" || die "Docker's default runtime is not nvidia (docker info: $(grep 'Default Runtime' "$L/docker-info.txt"))"
grep -qE 'level=(error|fatal)' "$D/dockerd.log" && { echo "--- dockerd errors" | add; grep -E 'level=(error|fatal)' "$D/dockerd.log" | head -5 | cut -c1-300 | sed 's/^/   /' | add; }
RUNOPTS=(--rm)
if grep -q "AppArmor enabled on system but the docker-default profile could not be loaded" "$D/dockerd.log"; then
  say "adapt: AppArmor is on but dockerd could not load its profile (no apparmor_parser?): --security-opt apparmor=unconfined"
  RUNOPTS+=(--security-opt apparmor=unconfined)
fi

# ---------------------------------------------------------------- (e) image
section "(e) docker import"
PATHENV=/usr/local/nvidia/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
dk import --change "ENV PATH=$PATHENV" --change 'CMD ["/bin/sh"]' "$B/images/nvsmi-rootfs.tar" "$IMG" > "$L/import.log" 2>&1 ||
  { tailog "$L/import.log"; die "docker import failed"; }
dk images > "$L/images.txt" 2>&1
sed 's/^/   /' "$L/images.txt" | add
echo "   image env: $(dk image inspect -f '{{json .Config.Env}}' "$IMG" 2>&1)" | add
# the seeds' form is `docker run --rm --gpus all IMAGE nvidia-smi`; without Docker's bridge (no
# network here) a container may need --network none
if ! dk run "${RUNOPTS[@]}" "$IMG" true > "$L/probe-run.log" 2>&1; then
  if dk run "${RUNOPTS[@]}" --network none "$IMG" true >> "$L/probe-run.log" 2>&1; then
    say "adapt: docker run needs --network none here ($(head -1 "$L/probe-run.log" | cut -c1-150))"
    RUNOPTS+=(--network none)
  else
    tailog "$L/probe-run.log" 10
    die "docker run of $IMG fails even without GPUs"
  fi
fi

# ---------------------------------------------------------------- (f) docker run
# drun NAME DOCKER-RUN-ARGS...: RUN_OUT, RUN_RC; the output in the transcript and run-NAME.txt
shq() { # shell-quote for display: bare when safe, else in single quotes
  local a out=""
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./=:,@+%-]+$ ]]; then out+=" $a"; else out+=" '${a//\'/\'\\\'\'}'"; fi
  done
  printf '%s' "$out"
}
drun() {
  local name=$1; shift
  local shown
  shown=$(shq "$@")
  echo "--- \$ docker run ${RUNOPTS[*]}$shown" | add
  RUN_OUT=$(timeout 60 env LD_LIBRARY_PATH="$BL" "${DK[@]}" run "${RUNOPTS[@]}" "$@" 2>&1); RUN_RC=$?
  if [ $RUN_RC != 0 ] && grep -qi apparmor <<< "$RUN_OUT" && [[ " ${RUNOPTS[*]} " != *apparmor=unconfined* ]]; then
    printf '%s\n' "$RUN_OUT" | head -5 | cut -c1-300 | sed 's/^/   | /' | add
    say "adapt: the start failed on AppArmor: --security-opt apparmor=unconfined from now on"
    RUNOPTS+=(--security-opt apparmor=unconfined)
    echo "--- \$ docker run ${RUNOPTS[*]}$shown" | add
    RUN_OUT=$(timeout 60 env LD_LIBRARY_PATH="$BL" "${DK[@]}" run "${RUNOPTS[@]}" "$@" 2>&1); RUN_RC=$?
  fi
  { echo "\$ docker run ${RUNOPTS[*]}$shown"; printf '%s\n' "$RUN_OUT"; echo "(exit $RUN_RC)"; } > "$L/run-$name.txt"
  printf '%s\n' "$RUN_OUT" | head -40 | cut -c1-300 | sed 's/^/   /' | add
  echo "   (exit $RUN_RC)" | add
}
# what a container sees: GPU device nodes, and which driver libraries (by name) are mounted
NODES='echo "nodes: $(ls /dev | grep -E "^nvidia[0-9]+$" | tr "\n" " ")"'
LIBS='echo "libs: $(find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o \( -name "libcuda.so*" -o -name "libnvidia-ml.so*" -o -name "libnvcuvid.so*" -o -name "libnvidia-ptxjitcompiler.so*" \) -print 2>/dev/null | sed "s|.*/||; s|\.so.*||" | sort -u | tr "\n" " ")"'
nodes_of() { sed -n 's/^nodes: //p' <<< "$RUN_OUT" | head -1 | sed 's/ *$//'; }
libs_of() { sed -n 's/^libs: //p' <<< "$RUN_OUT" | head -1; }
gpus_of() { grep -cE '^GPU [0-9]+: .*\(UUID: GPU-' <<< "$RUN_OUT"; }
ALL_NODES=$(seq 0 $((NGPU - 1)) | sed 's/^/nvidia/' | tr '\n' ' ' | sed 's/ *$//')

section "(f) docker run --gpus all: nvidia-smi -L (the key check)"
if [ "$REAL_CHECKS" != 1 ]; then
  drun gpus-all --gpus all "$IMG" sh -c "$NODES; $LIBS; ls -l /dev/nvidia0 /dev/nvidiactl; echo \"open: \$(head -c1 /dev/nvidia0 2>&1 >/dev/null)\""
  if [ $RUN_RC = 0 ] && [ "$(nodes_of)" = "$ALL_NODES" ]; then KEY=ok; pass gpus-all "--gpus all: every GPU node ($ALL_NODES)"; else fail gpus-all "--gpus all: nodes '$(nodes_of)', expected '$ALL_NODES' (exit $RUN_RC)"; fi
  # the simulated nodes have no driver behind them: open() says ENXIO when the device cgroup lets the
  # container at them, EPERM when it does not
  o=$(sed -n 's/^open: //p' <<< "$RUN_OUT")
  if grep -qi 'No such device' <<< "$o"; then pass devices-allowed "the device cgroup allows /dev/nvidia0 (open: ENXIO, no driver behind the simulated node)"
  else fail devices-allowed "open /dev/nvidia0 in the container: '$o' (expected ENXIO, not EPERM)"; fi
else
  drun gpus-all-L --gpus all "$IMG" nvidia-smi -L
  if [ $RUN_RC = 0 ] && grep -qE '^GPU 0: .*H200.*\(UUID: GPU-' <<< "$RUN_OUT"; then
    KEY=ok; pass gpus-all-L "docker run --rm --gpus all $IMG nvidia-smi -L lists the H200: $(grep -m1 '^GPU 0' <<< "$RUN_OUT")"
  else
    fail gpus-all-L "--gpus all nvidia-smi -L does not list the H200 (exit $RUN_RC)"
  fi
fi
grep -q "removed nvidia-container-runtime-hook" "$L/shim.log" 2>/dev/null &&
  pass shim-removed-hook "gpunode's shim removed the prestart hook Docker added" ||
  fail shim-removed-hook "no 'removed nvidia-container-runtime-hook' in the shim's log"
[ -z "$KEY" ] && { tailog "$D/dockerd.log" 20; tailog "$L/shim.log" 10; }

section "(g) the other requests"
if [ "$REAL_CHECKS" = 1 ]; then
  drun gpus-all-table --gpus all "$IMG" nvidia-smi
  [ $RUN_RC = 0 ] && grep -q 'NVIDIA-SMI' <<< "$RUN_OUT" && grep -q 'H200' <<< "$RUN_OUT" &&
    pass gpus-all-table "--gpus all nvidia-smi: the full table with the H200" || fail gpus-all-table "--gpus all nvidia-smi (exit $RUN_RC)"
  drun gpus-1 --gpus 1 "$IMG" nvidia-smi -L
  [ $RUN_RC = 0 ] && [ "$(gpus_of)" = 1 ] && grep -q "${UUIDS[0]}" <<< "$RUN_OUT" &&
    pass gpus-1 "--gpus 1: one GPU, GPU 0" || fail gpus-1 "--gpus 1: $(gpus_of) GPU(s) listed (exit $RUN_RC)"
  drun gpus-device0 --gpus '"device=0"' "$IMG" nvidia-smi -L
  [ $RUN_RC = 0 ] && [ "$(gpus_of)" = 1 ] && grep -q "${UUIDS[0]}" <<< "$RUN_OUT" &&
    pass gpus-device0 '--gpus "device=0": GPU 0' || fail gpus-device0 "--gpus \"device=0\": $(gpus_of) GPU(s) listed (exit $RUN_RC)"
  drun gpus-uuid --gpus "\"device=$UUID\"" "$IMG" nvidia-smi -L
  [ $RUN_RC = 0 ] && [ "$(gpus_of)" = 1 ] && grep -q "$UUID" <<< "$RUN_OUT" &&
    pass gpus-uuid "--gpus \"device=$UUID\": that GPU" || fail gpus-uuid "--gpus \"device=$UUID\" (exit $RUN_RC)"
  drun caps-utility --gpus all -e NVIDIA_DRIVER_CAPABILITIES=utility "$IMG" sh -c "$LIBS; nvidia-smi -L"
  l=$(libs_of)
  [ $RUN_RC = 0 ] && ! grep -qw libcuda <<< "$l" && grep -qw libnvidia-ml <<< "$l" && [ "$(gpus_of)" -ge 1 ] &&
    pass caps-utility "NVIDIA_DRIVER_CAPABILITIES=utility: libnvidia-ml, no libcuda ($l); nvidia-smi -L works" ||
    fail caps-utility "NVIDIA_DRIVER_CAPABILITIES=utility: libs '$l', $(gpus_of) GPU(s) (exit $RUN_RC)"
  drun caps-default --gpus all "$IMG" sh -c "$LIBS"
  l=$(libs_of)
  [ $RUN_RC = 0 ] && grep -qw libcuda <<< "$l" && grep -qw libnvidia-ml <<< "$l" &&
    pass caps-default "no NVIDIA_DRIVER_CAPABILITIES (utility,compute): libcuda and libnvidia-ml ($l)" ||
    fail caps-default "default capabilities: libs '$l' (exit $RUN_RC)"
  drun no-gpus "$IMG" sh -c "ls /dev/nvidia* 2>&1; $NODES; command -v nvidia-smi || echo 'no nvidia-smi'"
  [ $RUN_RC = 0 ] && [ -z "$(nodes_of)" ] && ! grep -q '^/dev/nvidia0$' <<< "$RUN_OUT" &&
    pass no-gpus "no --gpus: no /dev/nvidia0" || fail no-gpus "no --gpus: nodes '$(nodes_of)' (exit $RUN_RC)"
else
  drun gpus-1 --gpus 1 "$IMG" sh -c "$NODES"
  [ $RUN_RC = 0 ] && [ "$(nodes_of)" = nvidia0 ] && pass gpus-1 "--gpus 1: nvidia0" || fail gpus-1 "--gpus 1: '$(nodes_of)' (exit $RUN_RC)"
  drun gpus-device0 --gpus '"device=0"' "$IMG" sh -c "$NODES"
  [ $RUN_RC = 0 ] && [ "$(nodes_of)" = nvidia0 ] && pass gpus-device0 '--gpus "device=0": nvidia0' || fail gpus-device0 "--gpus \"device=0\": '$(nodes_of)' (exit $RUN_RC)"
  drun gpus-uuid --gpus "\"device=$UUID\"" "$IMG" sh -c "$NODES"
  [ $RUN_RC = 0 ] && [ "$(nodes_of)" = "nvidia$UIDX" ] && pass gpus-uuid "--gpus \"device=$UUID\": nvidia$UIDX" || fail gpus-uuid "--gpus \"device=$UUID\": '$(nodes_of)' (exit $RUN_RC)"
  drun caps-utility --gpus all -e NVIDIA_DRIVER_CAPABILITIES=utility "$IMG" sh -c "$NODES; $LIBS"
  l=$(libs_of)
  [ $RUN_RC = 0 ] && ! grep -qw libcuda <<< "$l" && grep -qw libnvidia-ml <<< "$l" && [ "$(nodes_of)" = "$ALL_NODES" ] &&
    pass caps-utility "NVIDIA_DRIVER_CAPABILITIES=utility: libnvidia-ml, no libcuda ($l); all nodes" ||
    fail caps-utility "NVIDIA_DRIVER_CAPABILITIES=utility: libs '$l', nodes '$(nodes_of)' (exit $RUN_RC)"
  drun caps-default --gpus all "$IMG" sh -c "$LIBS"
  l=$(libs_of)
  [ $RUN_RC = 0 ] && grep -qw libcuda <<< "$l" && grep -qw libnvidia-ml <<< "$l" &&
    pass caps-default "no NVIDIA_DRIVER_CAPABILITIES (utility,compute): libcuda and libnvidia-ml ($l)" ||
    fail caps-default "default capabilities: libs '$l' (exit $RUN_RC)"
  drun no-gpus "$IMG" sh -c "ls /dev/nvidia* 2>&1; $NODES"
  [ $RUN_RC = 0 ] && [ -z "$(nodes_of)" ] && pass no-gpus "no --gpus: no /dev/nvidia0" || fail no-gpus "no --gpus: nodes '$(nodes_of)' (exit $RUN_RC)"
fi
if [ "$REAL_CHECKS" != 1 ]; then CMD=(sh -c "$NODES"); else CMD=(nvidia-smi -L); fi
# runc as the runtime: gpunode as Docker's prestart hook injects into the created container itself
# (issue 33; src/container/hook_inject.h), the device cgroup included (v2 on the H200 machine).
drun runc-gpus --runtime runc --gpus all "$IMG" "${CMD[@]}"
if [ "$REAL_CHECKS" = 1 ]; then
  [ $RUN_RC = 0 ] && grep -qE '^GPU 0: .*H200' <<< "$RUN_OUT" &&
    pass runc-gpus "--runtime runc --gpus all: gpunode's hook injected, nvidia-smi -L: $(grep -m1 '^GPU 0' <<< "$RUN_OUT")" ||
    fail runc-gpus "--runtime runc --gpus all: exit $RUN_RC: $(tail -3 <<< "$RUN_OUT")"
else
  [ $RUN_RC = 0 ] && [ "$(nodes_of)" = "$ALL_NODES" ] &&
    pass runc-gpus "--runtime runc --gpus all: gpunode's hook injected every GPU node" ||
    fail runc-gpus "--runtime runc --gpus all: nodes '$(nodes_of)' (exit $RUN_RC): $(tail -3 <<< "$RUN_OUT")"
fi
grep -o 'hook: pid [0-9]*, [^;]*' "$L/shim.log" 2>/dev/null | tail -1 | sed 's/^/   /' | add

section "(h) gpunode's OCI shim: debug log (GPUNODE_OCI_LOG)"
grep -v '^$' "$L/shim.log" 2>/dev/null | tail -14 | cut -c1-300 | sed 's/^/   /' | add
grep -E 'level=(error|warn)' "$D/dockerd.log" | grep -v '^===' | tail -5 | cut -c1-300 > "$L/dockerd-warnings.txt"
if [ -s "$L/dockerd-warnings.txt" ]; then echo "--- dockerd warnings/errors (last 5)" | add; sed 's/^/   /' "$L/dockerd-warnings.txt" | add; fi

if [ -n "$KEY" ] && [ ${#FAILED[@]} = 0 ]; then
  RESULT="PASSED: all $CHECKS checks (docker run --gpus all $([ "$REAL_CHECKS" != 1 ] && echo "gets every simulated GPU" || echo "nvidia-smi -L lists the H200"))"
  exit 0
elif [ -n "$KEY" ]; then
  RESULT="PASSED the key check (--gpus all $([ "$REAL_CHECKS" != 1 ] && echo "gets every GPU" || echo "nvidia-smi -L lists the H200")); ${#FAILED[@]} of $CHECKS checks FAILED: ${FAILED[*]}"
  exit 0
else
  RESULT="FAILED: docker run --gpus all $([ "$REAL_CHECKS" != 1 ] && echo "does not get every GPU" || echo "nvidia-smi -L does not list the H200"); failed: ${FAILED[*]}"
  exit 1
fi
