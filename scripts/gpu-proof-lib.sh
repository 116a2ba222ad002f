# Shared by the real-GPU proof scripts (scripts/gpu-proof-*.sh): sourced, never run.
#
#   PROOF_NAME=tenant . scripts/gpu-proof-lib.sh
#
# gives: $FINAL (the device tool's $OUT, default /tmp/gpunode-out), a work folder $W with logs in
# $L and the transcript $T; say/add/fail; spawn-and-remember (proof_bg PROG ARGS... fills PIDS); on exit
# every remembered process is stopped and $L is packed into $FINAL/$PROOF_NAME-proof.tgz with the
# transcript beside it. GPUNODE_PROOF_SIMULATE=1 runs the same proof here on the simulated
# h200-real node from build/bin (or GPUNODE_PROOF_BIN); otherwise .gpubundle/ from
# scripts/bundle-gpu.sh is used, as root.
#   run PROG ARGS...   a program of the bundle (gpunode, runc, busybox, kubelet_emulator, ...)
#   run_path PROG      its path (to hand to another program, e.g. setpriv)
#   G                  gpunode's global flags for this node (--simulate h200-real or none)
#   oci_bundle DIR CMD [--env K=V]... [--privileged] [--mount ID]... [--annotation K=V]... [--uid N] [--docker-hook]
#                      an OCI bundle (runc spec) running CMD in a busybox root with nvidia-smi's glibc
set -uo pipefail
: "${PROOF_NAME:?set PROOF_NAME before sourcing gpu-proof-lib.sh}"
SIM=${GPUNODE_PROOF_SIMULATE:-0}
FINAL=${OUT:-/tmp/gpunode-out}
mkdir -p "$FINAL"
W=$(mktemp -d "/tmp/gpn-$PROOF_NAME-XXXXXX")
L=$W/logs
mkdir -p "$L"
T=$L/$PROOF_NAME-transcript.txt
PIDS=()
FAILED=0
say() { echo "== $*" | tee -a "$T" >&2; }
add() { tee -a "$T" >&2; }
fail() { say "FAIL: $*"; FAILED=1; }
pass() { say "ok: $*"; }
proof_cleanup() {
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill -TERM "${PIDS[i]}" 2>/dev/null; done
  [ ${#PIDS[@]} = 0 ] || sleep 1
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  cp "$T" "$FINAL/$PROOF_NAME-transcript.txt"
  tar -C "$L" -czf "$FINAL/$PROOF_NAME-proof.tgz" . 2>/dev/null
  rm -rf "$W"
}
trap proof_cleanup EXIT
# The program itself in the background (not a subshell around it), so its pid is in PIDS.
proof_bg() { local p=$1; shift; "$(run_path "$p")" "$@" & PIDS+=($!); }

if [ "$SIM" = 1 ]; then
  BIN=${GPUNODE_PROOF_BIN:-build/bin}
  run() { local p=$1; shift; if [ -x "$BIN/$p" ]; then "$BIN/$p" "$@"; else "$p" "$@"; fi; }
  run_path() { [ -x "$BIN/$1" ] && echo "$PWD/$BIN/$1" || command -v "$1"; }
  G=(--simulate h200-real)
  export GPUNODE_SIM_LIBRARY=${GPUNODE_SIM_LIBRARY:-$PWD/$BIN/libgpunode-simnvml.so}
else
  [ "$(id -u)" = 0 ] || { echo "gpu-proof-$PROOF_NAME: run as root" >&2; exit 2; }
  ROOT=$PWD
  run() { "$ROOT/.gpubundle/run" "$@"; }
  run_path() { if [ -x ".gpubundle/bin/$1" ]; then echo "$PWD/.gpubundle/bin/$1"; else command -v "$1"; fi; }
  export LD_LIBRARY_PATH=$PWD/.gpubundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  G=()
fi
say "$PROOF_NAME proof ($([ "$SIM" = 1 ] && echo simulated h200-real || echo real GPU)), $(date -u +%FT%TZ)"
run gpunode --version 2>&1 | head -1 | add

# A busybox root with the glibc nvidia-smi links against (a CUDA image would bring its own).
proof_rootfs() {
  local r=$1 busybox
  busybox=$( [ "$SIM" = 1 ] && command -v busybox || echo "$PWD/.gpubundle/bin/busybox")
  mkdir -p "$r"/{bin,dev,proc,sys,tmp,etc,usr/bin,run}
  cp "$busybox" "$r/bin/busybox"
  for a in sh ls cat echo grep stat head wc; do ln -sf busybox "$r/bin/$a"; done
  if command -v nvidia-smi >/dev/null; then
    for lib in $(ldd "$(command -v nvidia-smi)" | awk '/=>/ {print $3} /ld-linux/ {print $1}'); do
      mkdir -p "$r$(dirname "$lib")"; cp -L "$lib" "$r$lib"
    done
  fi
  echo "root:x:0:0:root:/root:/bin/sh" > "$r/etc/passwd"
}

oci_bundle() {
  local dir=$1 cmd=$2
  shift 2
  [ -d "$W/rootfs" ] || proof_rootfs "$W/rootfs"
  mkdir -p "$dir"
  rm -rf "$dir/rootfs"; cp -a "$W/rootfs" "$dir/rootfs"
  (cd "$dir" && run runc spec) || return 1
  python3 - "$dir" "$cmd" "$@" <<'PY'
import json, sys
d, cmd, *opts = sys.argv[1:]
c = json.load(open(f"{d}/config.json"))
c["root"] = {"path": f"{d}/rootfs", "readonly": False}
c["process"]["terminal"] = False
c["process"]["args"] = ["/bin/sh", "-c", cmd]
c["process"]["env"] = [e for e in c["process"]["env"] if not e.startswith("NVIDIA_")]
c["linux"].pop("uidMappings", None); c["linux"].pop("gidMappings", None)
it = iter(opts)
for o in it:
    if o == "--env":
        c["process"]["env"].append(next(it))
    elif o == "--privileged":
        c["process"]["capabilities"]["bounding"].append("CAP_SYS_ADMIN")
    elif o == "--mount":
        c["mounts"].append({"destination": "/var/run/nvidia-container-devices/" + next(it),
                            "type": "bind", "source": "/dev/null", "options": ["rbind", "ro"]})
    elif o == "--annotation":
        k, v = next(it).split("=", 1)
        c.setdefault("annotations", {})[k] = v
    elif o == "--uid":
        u = int(next(it)); c["process"]["user"] = {"uid": u, "gid": u}
    elif o == "--docker-hook":
        c.setdefault("hooks", {}).setdefault("prestart", []).append(
            {"path": "/usr/bin/nvidia-container-runtime-hook", "args": ["nvidia-container-runtime-hook", "prestart"]})
    else:
        sys.exit(f"oci_bundle: unknown option {o}")
json.dump(c, open(f"{d}/config.json", "w"), indent=1)
PY
}
