# shellcheck shell=bash
# test/e2e/lib.sh: helpers for end-to-end tests that run REAL containers (podman, runc) against a
# simulated GPU node. Source it from a bash test script:
#
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   e2e_require_root; e2e_require_tools podman runc; e2e_init
#
# What it provides (every name starts with e2e_ / E2E_):
#   e2e_init                         $E2E_TMP (removed at exit), $E2E_CGROUP_PARENT, the exit trap
#   e2e_on_exit CMD [ARG...]         run CMD at exit, last registered first (after a failure too)
#   e2e_step MSG / e2e_ok MSG        print what is being checked / what passed
#   e2e_fail MSG                     print MSG and exit 1 (the first failed assertion ends the test)
#   e2e_assert_eq ACTUAL EXPECTED WHAT, e2e_assert_contains HAYSTACK NEEDLE WHAT
#   e2e_require_root                 exit $E2E_SKIP (77) when not root: mknod, mounts and runc need it
#   e2e_require_tools TOOL...        fail, naming scripts/install-deps.sh, when a tool is missing
#   e2e_fixture_root GPUNODE PROFILE DIR
#                                    `gpunode sim hostroot` + the /dev/nvidia* plain files replaced by
#                                    real character devices (numbers from the fixture's proc/devices)
#   e2e_fixture_driver_root DIR      make DIR usable as `--driver-root DIR` of `--host-root DIR`
#   e2e_gpunode_fixture GPUNODE PROFILE DIR ARG...
#                                    run gpunode on the fixture host root with the simulated NVML
#   e2e_assert_device_nodes_under SPEC DIR
#                                    every device node of a YAML spec has hostPath DIR/dev/...
#   e2e_busybox_rootfs DIR           a container root: static busybox + its applets, etc dev proc sys tmp
#   e2e_oci_bundle DIR ROOTFS ARG... a runc bundle: DIR/config.json from `runc spec`, edited
#   e2e_runc ARG...                  runc with its state under $E2E_TMP (not /run/runc)
#   e2e_podman_setup CDI_DIR         a throw-away podman: storage, config, CDI dir, cgroup parent
#   e2e_podman ARG...                podman with that setup (`e2e_podman run ...`)
#   e2e_podman_run ARG...            `podman run --rm` with the flags this kind of machine needs
#   e2e_dockerd DIR [ARG...] / e2e_docker ARG...
#                                    a private dockerd (own data root and socket, no network), and
#                                    the docker CLI on its socket
#
# The machine these tests target: root in a privileged container/VM, cgroup v1 or v2, no systemd
# (so --cgroup-manager=cgroupfs), no CNI/netavark network (so --network=none), no
# CAP_SYS_RESOURCE (so rlimits may only be lowered: explicit --ulimit), podman 4.3 (Debian 12),
# which reads CDI specs only from /etc/cdi and /var/run/cdi (no --cdi-spec-dir, no cdi_spec_dirs):
# e2e_podman runs podman in a private mount namespace where /run is an overlay and /run/cdi a bind
# mount of CDI_DIR, so the machine's /etc and /run are never written.

E2E_SKIP=77
E2E_SOURCE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# Device numbers of the fixture's nodes when its proc/devices does not name them. 195 is the
# NVIDIA driver's fixed major (nvidia<N> = 195:N, nvidiactl 195:255, nvidia-modeset 195:254);
# nvidia-uvm and nvidia-caps get dynamic majors on a real host: any fixed pair will do.
E2E_NVIDIA_MAJOR=195
E2E_UVM_MAJOR=510
E2E_CAPS_MAJOR=511

_e2e_exit_cmds=()

e2e_step() { printf '%s\n' "-- $*"; }
e2e_ok() { printf '%s\n' "   ok: $*"; }
e2e_fail() {
  printf '%s\n' "FAIL: $*" >&2
  exit 1
}

e2e_assert_eq() {  # ACTUAL EXPECTED WHAT
  [ "$1" = "$2" ] || e2e_fail "$3: expected '$2', got '$1'"
  e2e_ok "$3: $2"
}

e2e_assert_contains() {  # HAYSTACK NEEDLE WHAT
  case "$1" in
    *"$2"*) e2e_ok "$3" ;;
    *) e2e_fail "$3: '$2' not found in:
$1" ;;
  esac
}

e2e_require_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: $(basename "$0") must run as root (mknod, mounts, runc); ctest reports it as skipped"
    exit "$E2E_SKIP"
  fi
}

# e2e_require_tools podman runc busybox ...: busybox must be the static one (it runs in an empty
# root), so "busybox" checks /bin/busybox from Debian's busybox-static.
e2e_require_tools() {
  local missing=() t
  for t in "$@"; do
    case "$t" in
      busybox)
        if [ ! -x /bin/busybox ] || ! _e2e_is_static /bin/busybox; then missing+=("busybox-static (/bin/busybox)"); fi ;;
      *) command -v "$t" >/dev/null 2>&1 || missing+=("$t") ;;
    esac
  done
  if [ ${#missing[@]} -gt 0 ]; then
    e2e_fail "missing: ${missing[*]}. Install them with scripts/install-deps.sh (it installs podman, runc, busybox-static)"
  fi
}

# True when a binary has no ELF interpreter (statically linked), checked without file(1).
_e2e_is_static() {
  python3 - "$1" <<'PY'
import struct, sys
with open(sys.argv[1], "rb") as f:
    h = f.read(64)
    if h[:4] != b"\x7fELF" or h[4] != 2:
        sys.exit(1)
    phoff, = struct.unpack_from("<Q", h, 32)
    phentsize, phnum = struct.unpack_from("<HH", h, 54)
    for i in range(phnum):
        f.seek(phoff + i * phentsize)
        if struct.unpack("<I", f.read(4))[0] == 3:  # PT_INTERP
            sys.exit(1)
PY
}

e2e_init() {
  E2E_TMP=$(mktemp -d "${TMPDIR:-/tmp}/gpunode-e2e.XXXXXX")
  chmod 755 "$E2E_TMP"
  # Containers' cgroups go below this parent, removed at exit (podman's default, libpod_parent,
  # would stay behind).
  E2E_CGROUP_PARENT="/gpunode-e2e-$(basename "$E2E_TMP" | cut -d. -f2 | tr -dc 'a-zA-Z0-9')"
  trap _e2e_exit EXIT
  trap 'exit 130' INT TERM
}

e2e_on_exit() {
  local q
  printf -v q '%q ' "$@"
  _e2e_exit_cmds+=("$q")
}

_e2e_exit() {
  local rc=$? i
  for ((i = ${#_e2e_exit_cmds[@]} - 1; i >= 0; i--)); do
    eval "${_e2e_exit_cmds[$i]}" || true
  done
  _e2e_remove_cgroups
  [ -n "${E2E_TMP:-}" ] && rm -rf "$E2E_TMP"
  exit "$rc"
}

# Removes the cgroups below $E2E_CGROUP_PARENT, children first. conmon may still be leaving its
# cgroup (<parent>/conmon) when podman has returned: retried for up to 5 s.
_e2e_remove_cgroups() {
  [ -n "${E2E_CGROUP_PARENT:-}" ] || return 0
  local top left _
  for _ in $(seq 50); do
    left=0
    for top in /sys/fs/cgroup/*"$E2E_CGROUP_PARENT" /sys/fs/cgroup"$E2E_CGROUP_PARENT"; do
      [ -d "$top" ] || continue
      find "$top" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [ -d "$top" ] && left=1
    done
    [ "$left" = 0 ] && return 0
    sleep 0.1
  done
  echo "warning: cgroups left behind: /sys/fs/cgroup/*$E2E_CGROUP_PARENT" >&2
}

# The major of a character device named NAME in the fixture's proc/devices, else DEFAULT.
_e2e_major() {  # DIR NAME DEFAULT
  local m
  m=$(awk -v n="$2" '/^Character devices:/ {c=1; next} /^$|^Block devices:/ {c=0} c && $2 == n {print $1; exit}' \
        "$1/proc/devices" 2>/dev/null)
  echo "${m:-$3}"
}

_e2e_mknod() {  # PATH MAJOR MINOR
  rm -f "$1"
  mknod -m 666 "$1" c "$2" "$3" || e2e_fail "mknod $1 c $2 $3"
}

# e2e_fixture_root GPUNODE PROFILE DIR: writes the fixture host root of PROFILE (built-in name or
# file) and replaces its device nodes, which `gpunode sim hostroot` writes as plain files, by real
# character devices: /dev/nvidia<N> = 195:N, nvidiactl 195:255, nvidia-modeset 195:254,
# nvidia-uvm and nvidia-uvm-tools <uvm>:0 and :1, nvidia-caps/nvidia-cap<N> <caps>:N. The majors
# come from the fixture's proc/devices; when it has none, one is written that names the numbers
# used, so every reader of the fixture agrees.
e2e_fixture_root() {
  local bin=$1 profile=$2 dir=$3
  "$bin" sim hostroot "$profile" "$dir" >/dev/null || e2e_fail "gpunode sim hostroot $profile $dir"
  if [ ! -e "$dir/proc/devices" ]; then
    printf 'Character devices:\n  1 mem\n%3d nvidia-frontend\n%3d nvidia-uvm\n%3d nvidia-caps\n\nBlock devices:\n  7 loop\n' \
      "$E2E_NVIDIA_MAJOR" "$E2E_UVM_MAJOR" "$E2E_CAPS_MAJOR" > "$dir/proc/devices"
  fi
  local nv uvm caps f n
  nv=$(_e2e_major "$dir" nvidia-frontend "$(_e2e_major "$dir" nvidia "$E2E_NVIDIA_MAJOR")")
  uvm=$(_e2e_major "$dir" nvidia-uvm "$E2E_UVM_MAJOR")
  caps=$(_e2e_major "$dir" nvidia-caps "$E2E_CAPS_MAJOR")
  for f in "$dir"/dev/nvidia[0-9]*; do
    [ -e "$f" ] || continue
    n=${f##*/nvidia}
    _e2e_mknod "$f" "$nv" "$n"
  done
  [ -e "$dir/dev/nvidiactl" ] && _e2e_mknod "$dir/dev/nvidiactl" "$nv" 255
  [ -e "$dir/dev/nvidia-modeset" ] && _e2e_mknod "$dir/dev/nvidia-modeset" "$nv" 254
  [ -e "$dir/dev/nvidia-uvm" ] && _e2e_mknod "$dir/dev/nvidia-uvm" "$uvm" 0
  [ -e "$dir/dev/nvidia-uvm-tools" ] && _e2e_mknod "$dir/dev/nvidia-uvm-tools" "$uvm" 1
  for f in "$dir"/dev/nvidia-caps/nvidia-cap[0-9]*; do
    [ -e "$f" ] || continue
    n=${f##*/nvidia-cap}
    _e2e_mknod "$f" "$caps" "$n"
  done
  return 0
}

# e2e_fixture_driver_root DIR: lets the fixture be the driver root too, so a spec generated with
# `--host-root DIR --driver-root DIR` mounts the fixture's files: gpunode reads the driver root
# through the host root (DIR/DIR/usr/lib/...), the engine reads hostPath DIR/usr/lib/... A symlink
# DIR/DIR -> / makes both the same file: gpunode follows links inside the host root, as the host
# would, so "/" there is DIR. (This is how a GPU Operator node looks: the driver lives in
# /run/nvidia/driver on the host.) Prints DIR.
e2e_fixture_driver_root() {
  local dir
  dir=$(cd "$1" && pwd -P)
  mkdir -p "$dir$(dirname "$dir")"
  ln -sfn / "$dir$dir"
  echo "$dir"
}

# e2e_gpunode_fixture GPUNODE PROFILE DIR ARG...: gpunode --host-root DIR ARG... with the simulated
# NVML answering from PROFILE. (--simulate cannot be combined with --host-root: it brings its own
# host root, with plain-file device nodes; this runs the same library on our fixture instead.)
e2e_gpunode_fixture() {
  local bin=$1 profile=$2 dir=$3
  shift 3
  local file=$profile
  [ -f "$file" ] || file=$E2E_SOURCE_DIR/data/profiles/$profile.yaml
  [ -f "$file" ] || e2e_fail "profile $profile: neither a file nor $file"
  local lib=${GPUNODE_SIM_LIBRARY:-$(dirname "$bin")/libgpunode-simnvml.so}
  [ -f "$lib" ] || e2e_fail "simulated NVML $lib missing: build the gpunode_simnvml target"
  GPUNODE_SIM_PROFILE=$(cd "$(dirname "$file")" && pwd)/$(basename "$file") \
    "$bin" --host-root "$dir" --nvml-library "$lib" --cuda-library "$lib" "$@"
}

# e2e_assert_device_nodes_under SPEC DIR: every `- path: "/dev/..."` of a YAML spec written by
# `gpunode cdi generate --driver-root DIR` is followed by `hostPath: "DIR/dev/..."` (the dev root
# defaults to the driver root, as nvidia-ctk's --dev-root): the engine takes the fixture's nodes,
# not the host's /dev/nvidia* (which do not exist on a machine without the driver).
e2e_assert_device_nodes_under() {
  python3 - "$1" "$2" <<'PY' || e2e_fail "device nodes of $1 are not all below $2/dev"
import re, sys
path, root = sys.argv[1], sys.argv[2]
lines = open(path).read().split("\n")
n = 0
for i, line in enumerate(lines):
    m = re.match(r'^(\s*)- path: "(/dev/[^"]*)"$', line)
    if m:
        want = '%s  hostPath: "%s%s"' % (m.group(1), root, m.group(2))
        if i + 1 >= len(lines) or lines[i + 1] != want:
            sys.exit("%s: %s has no %s" % (path, m.group(2), want.strip()))
        n += 1
if n == 0:
    sys.exit("no device node in " + path)
PY
}

# e2e_busybox_rootfs DIR: a minimal container root with the static busybox and its applets.
e2e_busybox_rootfs() {
  local dir=$1
  mkdir -p "$dir"/{bin,etc,dev,proc,sys,tmp,root}
  chmod 1777 "$dir/tmp"
  cp /bin/busybox "$dir/bin/busybox"
  chroot "$dir" /bin/busybox --install -s /bin || e2e_fail "busybox --install in $dir"
  printf 'root:x:0:0:root:/root:/bin/sh\n' > "$dir/etc/passwd"
  printf 'root:x:0:\n' > "$dir/etc/group"
}

# e2e_runc ARG...: runc with its state directory under $E2E_TMP.
e2e_runc() {
  mkdir -p "$E2E_TMP/runc-state"
  runc --root "$E2E_TMP/runc-state" "$@"
}

# e2e_oci_bundle DIR ROOTFS ARG...: writes DIR/config.json from `runc spec` with root.path ROOTFS
# (absolute, writable), process.args ARG..., no terminal, cgroupsPath below $E2E_CGROUP_PARENT,
# rlimits lowered to what this machine allows. Further edits: e2e_oci_edit.
e2e_oci_bundle() {
  local dir=$1 rootfs=$2
  shift 2
  mkdir -p "$dir"
  rm -f "$dir/config.json"
  (cd "$dir" && runc spec) || e2e_fail "runc spec in $dir"
  local id
  id=$(basename "$dir" | tr -dc 'a-zA-Z0-9_.-')
  python3 - "$dir/config.json" "$(cd "$rootfs" && pwd)" "${E2E_CGROUP_PARENT:-/gpunode-e2e}/$id" \
    "$(_e2e_ulimit n)" "$(_e2e_ulimit u)" "$@" <<'PY' || e2e_fail "edit $dir/config.json"
import json, sys
path, rootfs, cgroup, nofile, nproc, args = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6:]
c = json.load(open(path))
c["root"] = {"path": rootfs, "readonly": False}
c["process"]["terminal"] = False
if args:
    c["process"]["args"] = args
c["process"]["rlimits"] = [{"type": "RLIMIT_NOFILE", "hard": nofile, "soft": nofile},
                           {"type": "RLIMIT_NPROC", "hard": nproc, "soft": nproc}]
c["linux"]["cgroupsPath"] = cgroup
json.dump(c, open(path, "w"), indent=2)
PY
}

# e2e_oci_edit FILE PYTHON: runs PYTHON with `c` = the parsed JSON of FILE, then writes `c` back.
#   e2e_oci_edit "$bundle/config.json" 'c["process"]["env"].append("A=1")'
e2e_oci_edit() {
  python3 - "$1" "$2" <<'PY' || e2e_fail "edit $1"
import json, sys
c = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
}

# min(4096, the hard limit) of `ulimit -H<letter>`: without CAP_SYS_RESOURCE a container's rlimits
# can only be lowered; 4096 is plenty for the tests. Measured on Debian 12's podman 4.3.1 + runc
# 1.1.5 as root without CAP_SYS_RESOURCE: with no --ulimit, runc fails with "error setting rlimit
# type 7 (NOFILE): operation not permitted" (podman asks for 1048576); with only nofile given, with
# "type 6" (NPROC); and an nproc above 32768 fails even below the machine's hard limit, which plain
# `runc run` accepts.
_e2e_ulimit() {
  local h
  h=$(ulimit -H"$1")
  if [ "$h" = unlimited ] || [ "$h" -gt 4096 ]; then h=4096; fi
  echo "$h"
}

# e2e_podman_setup CDI_DIR: a podman that keeps everything under $E2E_TMP/podman (storage,
# run root, tmp dir, config), reads CDI specs from CDI_DIR only, and puts containers' cgroups
# below $E2E_CGROUP_PARENT.
e2e_podman_setup() {
  E2E_CDI_DIR=$(cd "$1" && pwd)
  E2E_PODMAN_DIR=$E2E_TMP/podman
  mkdir -p "$E2E_PODMAN_DIR"/{root,runroot,tmp,run-upper,run-work,empty}
  cat > "$E2E_PODMAN_DIR/containers.conf" <<EOF
[containers]
netns = "none"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "none"
runtime = "runc"
EOF
  cat > "$E2E_PODMAN_DIR/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "$E2E_PODMAN_DIR/root"
runroot = "$E2E_PODMAN_DIR/runroot"
EOF
}

# e2e_podman ARG...: podman in a private mount namespace (gone when podman exits) in which
#  - /run is an overlay whose writes land in $E2E_PODMAN_DIR/run-upper,
#  - /run/cdi (= /var/run/cdi) is a bind mount of CDI_DIR, and /etc/cdi, if the machine has one,
#    is hidden by an empty directory,
# and with the storage, run root and tmp dir under $E2E_PODMAN_DIR.
e2e_podman() {
  [ -n "${E2E_PODMAN_DIR:-}" ] || e2e_fail "e2e_podman: call e2e_podman_setup first"
  local d=$E2E_PODMAN_DIR
  # shellcheck disable=SC2016  # expanded by the inner bash
  env E2E_PODMAN_DIR="$d" E2E_CDI_DIR="$E2E_CDI_DIR" TMPDIR="$d/tmp" \
      CONTAINERS_CONF="$d/containers.conf" CONTAINERS_STORAGE_CONF="$d/storage.conf" \
    unshare --mount --propagation private -- bash -c '
      set -e
      d=$E2E_PODMAN_DIR
      mount -t overlay overlay -o "lowerdir=/run,upperdir=$d/run-upper,workdir=$d/run-work" /run
      mkdir -p /run/cdi
      mount --bind "$E2E_CDI_DIR" /run/cdi
      if [ -d /etc/cdi ]; then mount --bind "$d/empty" /etc/cdi; fi
      exec podman --root "$d/root" --runroot "$d/runroot" --tmpdir "$d/tmp" --storage-driver vfs \
        --cgroup-manager cgroupfs --events-backend none --runtime runc "$@"
    ' e2e-podman "$@"
}

# e2e_podman_run ARG...: `podman run --rm` with no network, lowered rlimits and the test's cgroup
# parent; ARG... is the rest (--device ..., --rootfs DIR CMD...).
e2e_podman_run() {
  local nofile nproc
  nofile=$(_e2e_ulimit n)
  nproc=$(_e2e_ulimit u)
  e2e_podman run --rm --network none --cgroup-parent "$E2E_CGROUP_PARENT" \
    --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc" "$@"
}

# e2e_hook_path GPUNODE: the path to give `cdi generate --hook-path`: a wrapper that runs GPUNODE
# with LeakSanitizer off. The runtime runs the hooks in the container's namespaces, where an
# ASan build's leak check at exit cannot read /proc/<pid>/task and fails the hook ("LeakSanitizer
# has encountered a fatal error"); address and UB checks stay on. A plain build is unaffected.
e2e_hook_path() {
  local hook=$E2E_TMP/gpunode-hook
  printf '#!/bin/sh\nASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" exec %s "$@"\n' "$1" > "$hook"
  chmod 755 "$hook"
  echo "$hook"
}

# e2e_dockerd DIR [DOCKERD_ARG...]: a private dockerd as root — data root, exec root, pid file and
# socket DIR/docker.sock under DIR, no network (--bridge=none, no iptables), vfs storage, containers'
# cgroups below $E2E_CGROUP_PARENT — stopped at exit (its mounts under DIR unmounted). Its
# environment is PATH=${E2E_DOCKERD_PATH:-/usr/sbin:/usr/bin:/sbin:/bin}, HOME=/root and the
# "NAME=value" words of the array E2E_DOCKERD_ENV. Waits up to 30 s for it to answer; sets
# E2E_DOCKER_SOCK. `e2e_docker ARG...` is the docker CLI on that socket.
e2e_dockerd() {
  local d=$1
  shift
  mkdir -p "$d"
  E2E_DOCKER_SOCK=$d/docker.sock
  env -i PATH="${E2E_DOCKERD_PATH:-/usr/sbin:/usr/bin:/sbin:/bin}" HOME=/root ${E2E_DOCKERD_ENV[@]+"${E2E_DOCKERD_ENV[@]}"} \
    setsid /usr/sbin/dockerd --data-root "$d/root" --exec-root "$d/exec" \
      --pidfile "$d/dockerd.pid" -H "unix://$E2E_DOCKER_SOCK" --bridge=none --iptables=false --ip-forward=false \
      --ip-masq=false --userland-proxy=false --storage-driver=vfs --cgroup-parent "${E2E_CGROUP_PARENT:-/gpunode-e2e}" \
      --log-level warn "$@" > "$d/dockerd.log" 2>&1 < /dev/null &
  _e2e_dockerd_pid=$!
  e2e_on_exit _e2e_stop_dockerd "$_e2e_dockerd_pid" "$d"
  local _
  for _ in $(seq 150); do
    e2e_docker version >/dev/null 2>&1 && return 0
    kill -0 "$_e2e_dockerd_pid" 2>/dev/null || break
    sleep 0.2
  done
  e2e_fail "dockerd did not start: $(tail -20 "$d/dockerd.log")"
}

e2e_docker() { /usr/bin/docker -H "unix://$E2E_DOCKER_SOCK" "$@"; }

_e2e_stop_dockerd() {  # PID DIR
  local pid=$1 d=$2 _
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  grep -o " $d/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
}
