#!/bin/sh
# The NVIDIA driver container of gpunode's test clusters: the entrypoint (and /usr/bin/nvidia-driver)
# of gpunode.test/fake-driver:<version> and gpunode.test/fake-driver-broken:<version>, built by
# fake_driver_image in test/k8s/e2e_lib.sh. It "installs" driver <version> on a simulated node
# (the gpunode chart's simulate mode) the way a real driver container changes a real one:
#   user space (NVML): the profile's driver.version/nvml_version (<root>/profile.yaml, which the
#     simulated NVML re-reads live) and the driver libraries <root>/usr/lib/x86_64-linux-gnu/lib*.so.<version>
#     (the SONAME links moved to them, so the CDI spec regenerated after the change mounts them);
#   kernel module: the profile's host.module.version, <root>/sys/module/nvidia/version,
#     the GPU firmware line and folder, and last <root>/proc/driver/nvidia/version (the agent's
#     validator watches that file and runs doctor again when it changes);
# then writes <ready dir>/.driver-ctr-ready (as NVIDIA's driver container's startup probe does; a
# readinessProbe `test -e /run/nvidia/validations/.driver-ctr-ready` waits for it) and sleeps until
# SIGTERM, putting its version back every few seconds if something rewrites the root (the chart's
# sim-hostroot init container does, whenever the agent's pod restarts: a real kernel module would
# stay loaded). On SIGTERM it removes the ready file and exits 0.
# The broken variant (GPUNODE_FAKE_DRIVER_BROKEN=1) leaves the kernel module at the version the
# node had (GPUNODE_FAKE_DRIVER_MODULE_VERSION, else the root's current module version, else
# 535.183.01) while NVML becomes <version>: the classic "Driver/library version mismatch" (the
# simulated nvmlInit fails with LIB_RM_VERSION_MISMATCH; gpunode doctor: driver.version-mismatch).
#
# Usage: fake_driver.sh [init] [ROOT]
#   ROOT: the simulated node's host root as this container sees it; default $GPUNODE_SIM_ROOT, else
#         /host/var/lib/gpunode/sim (host / mounted at /host, the chart's simulate.hostDir).
# Environment: GPUNODE_FAKE_DRIVER_VERSION (baked into the image), GPUNODE_FAKE_DRIVER_BROKEN (0/1),
#   GPUNODE_FAKE_DRIVER_MODULE_VERSION, GPUNODE_FAKE_DRIVER_READY_DIR (default /run/nvidia/validations),
#   GPUNODE_FAKE_DRIVER_RECHECK (seconds between checks that the root still has its driver, default 2;
#   0: never).
# Needs only busybox (sh, awk, sed, readlink, ln, mv).
set -eu

log() { echo "fake-driver: $*"; }
die() { echo "fake-driver: error: $*" >&2; exit 1; }
is_version() {
  case $1 in '' | *[!0-9.]* | .* | *. | *..* | [!0-9]*) return 1 ;; *.*) return 0 ;; *) return 1 ;; esac
}

[ "${1:-}" = init ] && shift  # NVIDIA's driver container runs as `nvidia-driver init`
VERSION=${GPUNODE_FAKE_DRIVER_VERSION:-}
BROKEN=${GPUNODE_FAKE_DRIVER_BROKEN:-0}
ROOT=${1:-${GPUNODE_SIM_ROOT:-/host/var/lib/gpunode/sim}}
READY_DIR=${GPUNODE_FAKE_DRIVER_READY_DIR:-/run/nvidia/validations}
RECHECK=${GPUNODE_FAKE_DRIVER_RECHECK:-2}
PROFILE=$ROOT/profile.yaml
LIBDIR=$ROOT/usr/lib/x86_64-linux-gnu
READY=$READY_DIR/.driver-ctr-ready

is_version "$VERSION" || die "GPUNODE_FAKE_DRIVER_VERSION='$VERSION' is not a driver version like 580.95.05"
case $RECHECK in '' | *[!0-9]*) die "GPUNODE_FAKE_DRIVER_RECHECK='$RECHECK' is not a number of seconds" ;; esac
[ -f "$PROFILE" ] || die "no simulated node at $ROOT: $PROFILE is missing (GPUNODE_SIM_ROOT, or the root as an argument)"

# A restarted or replaced driver pod is not ready until it has written its driver again.
rm -f "$READY"

current_module() { [ -f "$ROOT/sys/module/nvidia/version" ] && head -n1 "$ROOT/sys/module/nvidia/version" || true; }
MODULE=$VERSION
if [ "$BROKEN" = 1 ]; then
  MODULE=${GPUNODE_FAKE_DRIVER_MODULE_VERSION:-}
  if [ -z "$MODULE" ]; then
    MODULE=$(current_module)
    [ -n "$MODULE" ] && [ "$MODULE" != "$VERSION" ] || MODULE=535.183.01
  fi
  is_version "$MODULE" || die "GPUNODE_FAKE_DRIVER_MODULE_VERSION='$MODULE' is not a driver version"
  [ "$MODULE" != "$VERSION" ] || die "broken: the kernel module version must differ from $VERSION"
fi

# profile.yaml: driver.version and driver.nvml_version (<cuda major>.<version>) become $VERSION,
# host.module.version $MODULE (loaded), in the flow ({...}) or block form the profiles use.
# Written to a temporary file and renamed: the simulated NVML never reads half a profile.
write_profile() {
  awk -v v="$VERSION" -v mv="$MODULE" '
    function setkey(line, key, val, raw,    lead, re) {
      re = "(^|[{, ])" key ": *(\"[^\"]*\"|[^,}#]*[^,}# ])"
      if (!match(line, re)) return line
      lead = substr(line, RSTART, 1)
      if (lead !~ /[{, ]/) lead = ""
      if (!raw) val = "\"" val "\""
      return substr(line, 1, RSTART - 1) lead key ": " val substr(line, RSTART + RLENGTH)
    }
    function getkey(line, key,    re, m) {
      re = "(^|[{, ])" key ": *(\"[^\"]*\"|[^,}#]*[^,}# ])"
      if (!match(line, re)) return ""
      m = substr(line, RSTART, RLENGTH); sub(/^[{, ]/, "", m); sub(/^[a-z_]+: */, "", m); gsub(/"/, "", m)
      return m
    }
    function driverkeys(line,    nv) {
      line = setkey(line, "version", v)
      nv = getkey(line, "nvml_version")
      if (nv != "") { sub(/\..*/, "", nv); line = setkey(line, "nvml_version", nv "." v) }
      return line
    }
    function modkeys(line) {
      if (line ~ /[{]/ && getkey(line, "version") == "") sub(/[{] */, "{version: \"" mv "\", ", line)
      line = setkey(line, "version", mv)
      return setkey(line, "loaded", "true", 1)
    }
    function endhost() {
      if (top == "host" && !modseen && mv != v) print "  module: {loaded: true, version: \"" mv "\"}"
    }
    {
      line = $0
      if (line ~ /^[A-Za-z_]/) {
        endhost()
        top = line; sub(/:.*/, "", top); inmod = 0
        if (top == "driver" && line ~ /[{]/) line = driverkeys(line)
        print line; next
      }
      if (top == "driver" && line ~ /^  [a-z_]+:/) line = driverkeys(line)
      if (top == "host") {
        if (line ~ /^  [a-z_]+:/) {
          inmod = 0
          if (line ~ /^  module:/) {
            modseen = 1; line = modkeys(line)
            if (line !~ /[{]/) { inmod = 1; print line; print "    version: \"" mv "\""; next }
          }
        } else if (inmod && line ~ /^    version:/) {
          next  # written right after "module:"
        } else if (inmod && line ~ /^    [a-z_]+:/) {
          line = setkey(line, "loaded", "true", 1)
        }
      }
      print line
    }
    END { endhost() }' "$PROFILE" > "$PROFILE.fake-driver.tmp" || die "cannot rewrite $PROFILE"
  grep -q "version: \"$VERSION\"" "$PROFILE.fake-driver.tmp" ||
    { rm -f "$PROFILE.fake-driver.tmp"; die "$PROFILE: no driver.version to set"; }
  mv -f "$PROFILE.fake-driver.tmp" "$PROFILE"
}

# The user-space libraries of the driver the node has (the version libcuda.so.1 points at) renamed
# to $VERSION, and every link to them moved along; the stale ones go, as a driver install removes them.
write_libraries() {
  [ -L "$LIBDIR/libcuda.so.1" ] || return 0
  local old f base link
  old=$(readlink "$LIBDIR/libcuda.so.1")
  old=${old##*/libcuda.so.}
  old=${old#libcuda.so.}
  [ "$old" != "$VERSION" ] && is_version "$old" || return 0
  for f in "$LIBDIR"/lib*.so."$old" "$LIBDIR"/vdpau/lib*.so."$old"; do
    [ -f "$f" ] && [ ! -L "$f" ] || continue
    mv -f "$f" "${f%."$old"}.$VERSION"
  done
  for link in "$LIBDIR"/lib*.so*; do
    [ -L "$link" ] || continue
    base=$(readlink "$link")
    case $base in */*) continue ;; *.so."$old") ln -sfn "${base%."$old"}.$VERSION" "$link" ;; esac
  done
}

# The kernel module's files; /proc/driver/nvidia/version last.
write_kernel() {
  local before gpu
  before=$(current_module)
  mkdir -p "$ROOT/sys/module/nvidia" "$ROOT/proc/driver/nvidia"
  echo "$MODULE" > "$ROOT/sys/module/nvidia/version"
  echo live > "$ROOT/sys/module/nvidia/initstate"
  for gpu in "$ROOT"/proc/driver/nvidia/gpus/*/information; do
    [ -f "$gpu" ] || continue
    sed -i "s/^\(GPU Firmware:[[:space:]]*\)[0-9][0-9.]*/\1$MODULE/" "$gpu"
  done
  if [ -n "$before" ] && [ "$before" != "$MODULE" ] && [ -d "$ROOT/lib/firmware/nvidia/$before" ] &&
     [ ! -e "$ROOT/lib/firmware/nvidia/$MODULE" ]; then
    mv "$ROOT/lib/firmware/nvidia/$before" "$ROOT/lib/firmware/nvidia/$MODULE"
  fi
  local proc=$ROOT/proc/driver/nvidia/version
  if [ -f "$proc" ] && grep -q "Kernel Module" "$proc"; then
    sed -r "1s/(Kernel Module( for [^ ]+)?[[:space:]]+)[0-9][0-9.]*/\1$MODULE/" "$proc" > "$proc.fake-driver.tmp"
  else
    printf 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build  (gpunode fake-driver)\nGCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04) \n' \
      "$MODULE" > "$proc.fake-driver.tmp"
  fi
  mv -f "$proc.fake-driver.tmp" "$proc"
}

install_driver() {
  write_libraries
  write_profile
  write_kernel
}

installed() {
  [ "$(current_module)" = "$MODULE" ] && grep -q "version: \"$VERSION\"" "$PROFILE" 2>/dev/null
}

install_driver
if [ "$BROKEN" = 1 ]; then
  log "driver $VERSION installed on $ROOT with kernel module $MODULE left loaded (broken: version mismatch)"
else
  log "driver $VERSION installed on $ROOT (NVML and kernel module)"
fi
mkdir -p "$READY_DIR"
printf 'GDRCOPY_ENABLED: false\nGDS_ENABLED: false\nGPU_DIRECT_RDMA_ENABLED: false\n' > "$READY.tmp"
mv -f "$READY.tmp" "$READY"
log "ready ($READY)"

nap=$RECHECK
[ "$nap" -gt 0 ] || nap=3600  # 0: never check again
sleeper=
trap 'rm -f "$READY"; [ -z "$sleeper" ] || kill "$sleeper" 2>/dev/null || true; log "stopped"; exit 0' TERM INT
while :; do
  sleep "$nap" &
  sleeper=$!
  wait "$sleeper" || true
  [ "$RECHECK" -gt 0 ] || continue
  if ! installed; then
    log "the simulated node's driver was rewritten ($(current_module)): installing $VERSION again"
    install_driver
  fi
done
