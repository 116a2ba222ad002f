#!/usr/bin/env bash
# Packs what scripts/gpu-proof-docker.sh needs on the GPU machine (Ubuntu 24.04, no Docker, no
# container runtime, no network) into .dockerbundle/ (git-ignored through .git/info/exclude):
#
#   .dockerbundle/payload.tar.xz   one xz archive (x86 BCJ + LZMA2 9e with a 256 MiB dictionary, so
#                                  the Go programs' shared code compresses once; unpacking needs
#                                  ~260 MiB of memory; decompressible with xz or python3's lzma):
#     bin/dockerd bin/docker bin/docker-init      Debian 12's docker.io (dockerd, the CLI, tini-static)
#     bin/containerd bin/containerd-shim-runc-v2  Debian 12's containerd (docker.io's dependency)
#     bin/runc                                    Debian 12's runc
#     bin/gpunode bin/libgpunode-simnvml.so       gpunode (stripped) + the simulated NVML
#     lib/                                        their non-base libraries (bundle-for-gpu.sh):
#                                                 gpunode's, dockerd's (libdevmapper, libsystemd, ...),
#                                                 runc's libseccomp
#     run                                         bundle-for-gpu.sh's wrapper
#     images/nvsmi-rootfs.tar                     a root file system for `docker import`:
#        busybox-static + Debian 12's glibc runtime, enough for the host's nvidia-smi that CDI mounts in
#     VERSIONS                                    what went in
#   .dockerbundle/SHA256SUMS  .dockerbundle/VERSIONS
#
# Usage: scripts/bundle-docker-gpu.sh            (needs docker.io, containerd, runc, busybox-static, xz)
# Env:   GPUNODE_BIN=build-rel/bin           gpunode and libgpunode-simnvml.so from there
#        DOCKER_BUNDLE_XZ="--x86 --lzma2=preset=9e,dict=256MiB"    xz filter options
# Time: ~5 min on 2 cores. Size: see the last line it prints (must stay under 45 MiB).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
GBIN=${GPUNODE_BIN:-build-rel/bin}
XZ_OPTS=${DOCKER_BUNDLE_XZ:---x86 --lzma2=preset=9e,dict=256MiB}
LIMIT_MIB=45
DEST=$REPO/.dockerbundle
log() { echo "bundle-docker-gpu: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

for c in xz tar strip sha256sum file ldd; do command -v "$c" >/dev/null || die "missing $c"; done
file -L /bin/busybox | grep -q 'statically linked' || die "need busybox-static (/bin/busybox)"
[ -x "$GBIN/gpunode" ] || die "$GBIN/gpunode missing (build the Release tree first)"
[ -f "$GBIN/libgpunode-simnvml.so" ] || die "$GBIN/libgpunode-simnvml.so missing"
DOCKERD=/usr/sbin/dockerd
DOCKER=/usr/bin/docker   # Debian's CLI (20.10), never /usr/local/bin/docker
for f in $DOCKERD $DOCKER /usr/bin/containerd /usr/bin/containerd-shim-runc-v2; do
  [ -x "$f" ] || die "$f missing (apt-get install docker.io)"
done
RUNC=$(command -v runc) || die "runc missing (apt-get install runc)"
INIT=$(readlink -f /usr/bin/docker-init 2>/dev/null || true)

# never committed: .git/info/exclude (not .gitignore, which others edit)
mkdir -p .git/info
grep -qx '/.dockerbundle/' .git/info/exclude 2>/dev/null || echo '/.dockerbundle/' >> .git/info/exclude

STAGE=$(mktemp -d /tmp/dockerbundle-stage-XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
P=$STAGE/payload
mkdir -p "$P/bin" "$P/images"

# 1. the programs + their non-base libraries (bundle-for-gpu.sh leaves out glibc/libstdc++/libgcc_s)
progs=("$GBIN/gpunode" "$GBIN/libgpunode-simnvml.so" "$RUNC" "$DOCKERD" "$DOCKER" /usr/bin/containerd /usr/bin/containerd-shim-runc-v2)
../shared/tools/bundle-for-gpu.sh "$P" "${progs[@]}" >&2
if [ -n "$INIT" ] && [ -x "$INIT" ] && file -L "$INIT" | grep -q 'statically linked'; then
  cp -L "$INIT" "$P/bin/docker-init"
else
  log "no static docker-init (tini-static): left out (only --init needs it)"
fi
# strip only if that makes a file smaller (Debian's Go programs are stripped already)
for f in "$P"/bin/* "$P"/lib/*; do
  cp "$f" "$STAGE/s" && strip "$STAGE/s" 2>/dev/null && [ "$(stat -c %s "$STAGE/s")" -lt "$(stat -c %s "$f")" ] &&
    cat "$STAGE/s" > "$f"
  rm -f "$STAGE/s"
done
# they must still run, with the bundle's libraries only
R() { LD_LIBRARY_PATH=$P/lib "$@"; }
R "$P/bin/dockerd" --version >/dev/null || die "dockerd does not run"
R "$P/bin/docker" --version >/dev/null || die "docker does not run"
R "$P/bin/containerd" --version >/dev/null || die "containerd does not run"
R "$P/bin/containerd-shim-runc-v2" -v >/dev/null || die "containerd-shim-runc-v2 does not run"
R "$P/bin/runc" --version >/dev/null || die "runc does not run"
R "$P/bin/gpunode" --version >/dev/null || die "stripped gpunode does not run"
[ ! -e "$P/bin/docker-init" ] || "$P/bin/docker-init" --version >/dev/null || die "docker-init does not run"
# the bundled gpunode must do what the proof asks of it (catches a binary copied mid-link or from a
# half-rebuilt tree): a simulated node's CDI spec
S=$STAGE/smoke
R "$P/bin/gpunode" sim hostroot dgx-h200 "$S" > "$STAGE/smoke.log" 2>&1 &&
  mkdir -p "$S$(dirname "$S")" && ln -sfn / "$S$S" &&
  GPUNODE_SIM_PROFILE=dgx-h200 R "$P/bin/gpunode" --host-root "$S" --nvml-library "$P/bin/libgpunode-simnvml.so" \
    --cuda-library "$P/bin/libgpunode-simnvml.so" cdi generate --output "$STAGE/smoke.yaml" --driver-root "$S" >> "$STAGE/smoke.log" 2>&1 ||
  { cat "$STAGE/smoke.log" >&2; die "the bundled gpunode fails a simulated cdi generate (rebuild $GBIN and run this again)"; }
rm -rf "$S" "$STAGE/smoke.yaml" "$STAGE/smoke.log"

# 2. the test image's root file system, for `docker import` (gpu-proof-docker.sh sets PATH with
# --change): busybox-static + Debian 12's glibc runtime (what nvidia-smi links against), merged-/usr
# layout like Debian's and Ubuntu's (/lib -> usr/lib, /lib64 -> usr/lib64)
I=$STAGE/rootfs
mkdir -p "$I/bin" "$I/etc/ld.so.conf.d" "$I/tmp" "$I/root" "$I/dev" "$I/proc" "$I/sys" \
  "$I/usr/bin" "$I/usr/sbin" "$I/usr/lib/x86_64-linux-gnu" "$I/usr/lib64" "$I/usr/local/bin"
cp /bin/busybox "$I/bin/busybox"
for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$I/bin/$a"; done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' > "$I/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\n' > "$I/etc/group"
chmod 1777 "$I/tmp"
for l in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1; do
  cp -L "/lib/x86_64-linux-gnu/$l" "$I/usr/lib/x86_64-linux-gnu/$l"
done
ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$I/usr/lib64/ld-linux-x86-64.so.2"
ln -s usr/lib "$I/lib"; ln -s usr/lib64 "$I/lib64"
echo 'include /etc/ld.so.conf.d/*.conf' > "$I/etc/ld.so.conf"
tar -C "$I" --owner=0 --group=0 --numeric-owner --sort=name -cf "$P/images/nvsmi-rootfs.tar" .

{
  echo "built $(date -u +%FT%TZ) on $(hostname) from $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  R "$P/bin/dockerd" --version
  echo "docker CLI: $(R "$P/bin/docker" --version)"
  R "$P/bin/containerd" --version
  R "$P/bin/runc" --version | head -1
  echo "gpunode $(R "$P/bin/gpunode" --version)"
  [ ! -e "$P/bin/docker-init" ] || echo "docker-init: $("$P/bin/docker-init" --version)"
  echo "image rootfs: busybox $(/bin/busybox | head -1 | awk '{print $2}'), glibc $(dpkg-query -W -f '${Version}' libc6)"
  (cd "$P" && find . -type f -printf '%s %p\n' | sort -k2)
} > "$P/VERSIONS"

# 3. one archive; the Go programs first and next to each other, so the big dictionary sees their
# common code
rm -rf "$DEST"; mkdir -p "$DEST"
log "compressing $(du -sh "$P" | cut -f1) with xz $XZ_OPTS (minutes)"
go='bin/dockerd bin/docker bin/containerd bin/containerd-shim-runc-v2 bin/runc'
(cd "$P" && { printf '%s\n' $go; find . -mindepth 1 \( -type f -o -type l \) -printf '%P\n' | LC_ALL=C sort | grep -vxF -f <(printf '%s\n' $go); }) > "$STAGE/order"
(cd "$P" && tar --owner=0 --group=0 --numeric-owner --no-recursion -cf "$STAGE/payload.tar" -T "$STAGE/order")
# shellcheck disable=SC2086
xz $XZ_OPTS -T1 -c "$STAGE/payload.tar" > "$DEST/payload.tar.xz.tmp"
mv "$DEST/payload.tar.xz.tmp" "$DEST/payload.tar.xz"
# the archive must hold every file of the payload
n_in=$(xz -dc "$DEST/payload.tar.xz" | tar -tf - | grep -vc '/$')
n_p=$(cd "$P" && find . -type f -o -type l | wc -l)
[ "$n_in" = "$n_p" ] || die "archive holds $n_in entries, payload has $n_p files"
(cd "$DEST" && sha256sum payload.tar.xz > SHA256SUMS)
cp "$P/VERSIONS" "$DEST/VERSIONS"
tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
b=$(du -cb "$DEST" | tail -1 | cut -f1)
log "$(sed -n 2,7p "$P/VERSIONS" | tr '\n' ';')"
echo "bundle $DEST: $((b / 1024)) KiB = $(awk -v b="$b" 'BEGIN { printf "%.1f", b / 1048576 }') MiB compressed ($(du -sb "$P" | cut -f1) bytes unpacked); working tree $((tree / 1024)) KiB; together $(((b + tree) / 1048576)) MiB of 64"
[ "$b" -lt $((LIMIT_MIB * 1048576)) ] || die "the bundle is over $LIMIT_MIB MiB"
