#!/usr/bin/env bash
# Packs what scripts/gpu-proof-kubelet.sh needs on the GPU machine (Ubuntu 24.04, no container
# runtime, no Kubernetes, no network) into .k8sbundle/ (git-ignored through .git/info/exclude):
#
#   .k8sbundle/payload.tar.xz   one xz archive (xz -9e; decompressible with xz, busybox or python3):
#     bin/kubelet containerd containerd-shim-runc-v2 ctr   test/k8s/build.sh's pinned builds
#     bin/runc                                             Debian 12's runc (+ lib/libseccomp.so.2)
#     bin/gpunode bin/libgpunode-simnvml.so lib/ run       gpunode + its libraries (bundle-for-gpu.sh)
#     images/pause.tar                                     gpunode.test/pause:k8sbundle (OCI archive)
#     images/nvsmi.tar                                     gpunode.test/nvsmi:k8sbundle (OCI archive):
#        busybox-static + Debian 12's glibc runtime, enough for the host's nvidia-smi that CDI mounts in
#     VERSIONS                                             what went in
#   .k8sbundle/SHA256SUMS       of the archive
#
# Usage: scripts/bundle-k8s-gpu.sh            (as root: podman builds the two images FROM scratch)
# Env:   GPUNODE_BIN=build-rel/bin           gpunode and libgpunode-simnvml.so from there
#        K8S_BUNDLE_XZ="-9e"                 xz preset (-6 builds 4x faster, ~1 MB larger)
# Time: ~4-6 min on 2 cores (xz -9e of ~170 MB). Size: see the last line it prints.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
GBIN=${GPUNODE_BIN:-build-rel/bin}
XZ_PRESET=${K8S_BUNDLE_XZ:--9e}
DEST=$REPO/.k8sbundle
log() { echo "bundle-k8s-gpu: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (podman builds the images)"
for c in podman xz tar strip sha256sum; do command -v "$c" >/dev/null || die "missing $c"; done
file -L /bin/busybox | grep -q 'statically linked' || die "need busybox-static (/bin/busybox)"
[ -x "$GBIN/gpunode" ] || die "$GBIN/gpunode missing (build the Release tree first)"
[ -f "$GBIN/libgpunode-simnvml.so" ] || die "$GBIN/libgpunode-simnvml.so missing"
K8SBIN=$(bash test/k8s/build.sh | tail -n 1)
for b in kubelet containerd containerd-shim-runc-v2 ctr; do [ -x "$K8SBIN/$b" ] || die "$K8SBIN/$b missing"; done
RUNC=$(command -v runc) || die "runc missing (apt-get install runc)"

# never committed: .git/info/exclude (not .gitignore, which others edit)
mkdir -p .git/info
grep -qx '/.k8sbundle/' .git/info/exclude 2>/dev/null || echo '/.k8sbundle/' >> .git/info/exclude

STAGE=$(mktemp -d /tmp/k8sbundle-stage-XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
P=$STAGE/payload
mkdir -p "$P/bin" "$P/images"

# 1. gpunode + its libraries, runc + libseccomp (bundle-for-gpu.sh leaves out glibc/libstdc++/libgcc_s)
../shared/tools/bundle-for-gpu.sh "$P" "$GBIN/gpunode" "$GBIN/libgpunode-simnvml.so" "$RUNC" >&2
# 2. the pinned Kubernetes/containerd builds; strip only if that makes them smaller
for b in kubelet containerd containerd-shim-runc-v2 ctr; do cp "$K8SBIN/$b" "$P/bin/$b"; done
for f in "$P"/bin/* "$P"/lib/*; do
  cp "$f" "$STAGE/s" && strip "$STAGE/s" 2>/dev/null && [ "$(stat -c %s "$STAGE/s")" -lt "$(stat -c %s "$f")" ] &&
    cat "$STAGE/s" > "$f"
  rm -f "$STAGE/s"
done
# they must still run
"$P/bin/kubelet" --version >/dev/null || die "stripped kubelet does not run"
"$P/bin/containerd" --version >/dev/null || die "stripped containerd does not run"
"$P/bin/ctr" --version >/dev/null || die "stripped ctr does not run"
"$P/bin/containerd-shim-runc-v2" -v >/dev/null || die "stripped shim does not run"
LD_LIBRARY_PATH=$P/lib "$P/bin/runc" --version >/dev/null || die "runc does not run"
LD_LIBRARY_PATH=$P/lib "$P/bin/gpunode" --version >/dev/null || die "stripped gpunode does not run"

# 3. the two images, FROM scratch with podman (as test/k8s/cluster.sh's build_images does), in a
# private podman store so nothing touches the host's images or another build's tags
I=$STAGE/img
mkdir -p "$I/rootfs/bin" "$I/rootfs/etc" "$I/rootfs/tmp" "$I/rootfs/root"
cp /bin/busybox "$I/rootfs/bin/busybox"
for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$I/rootfs/bin/$a"; done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' > "$I/rootfs/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\n' > "$I/rootfs/etc/group"
chmod 1777 "$I/rootfs/tmp"
tar -C "$I/rootfs" -cf "$I/rootfs.tar" .
# the test image: the same busybox layer + Debian 12's glibc runtime (what nvidia-smi links against),
# merged-/usr layout like Debian's and Ubuntu's (/lib -> usr/lib, /lib64 -> usr/lib64)
G=$I/glibc
mkdir -p "$G/usr/lib/x86_64-linux-gnu" "$G/usr/lib64" "$G/usr/bin" "$G/etc"
for l in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1; do
  cp -L "/lib/x86_64-linux-gnu/$l" "$G/usr/lib/x86_64-linux-gnu/$l"
done
ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$G/usr/lib64/ld-linux-x86-64.so.2"
ln -s usr/lib "$G/lib"; ln -s usr/lib64 "$G/lib64"
echo 'include /etc/ld.so.conf.d/*.conf' > "$G/etc/ld.so.conf"
mkdir -p "$G/etc/ld.so.conf.d"
tar -C "$G" -cf "$I/glibc.tar" .
cat > "$I/Containerfile.pause" <<'EOF'
FROM scratch
ADD rootfs.tar /
ENTRYPOINT ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait; done"]
EOF
cat > "$I/Containerfile.nvsmi" <<'EOF'
FROM scratch
ADD rootfs.tar /
ADD glibc.tar /
ENV PATH=/usr/local/nvidia/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CMD ["/bin/sh"]
EOF
PM=(podman --root "$STAGE/podman/root" --runroot "$STAGE/podman/run" --storage-driver vfs)
for img in pause nvsmi; do
  ref=gpunode.test/$img:k8sbundle
  "${PM[@]}" build -q --network none -f "$I/Containerfile.$img" -t "$ref" "$I" > "$STAGE/podman-$img.log" 2>&1 ||
    { cat "$STAGE/podman-$img.log" >&2; die "podman build of $ref failed"; }
  "${PM[@]}" save -q --format oci-archive -o "$P/images/$img.tar" "$ref" >> "$STAGE/podman-$img.log" 2>&1 ||
    { cat "$STAGE/podman-$img.log" >&2; die "podman save of $ref failed"; }
done
"${PM[@]}" rmi -a -f >/dev/null 2>&1 || true
chmod -R u+w "$STAGE/podman" 2>/dev/null || true

{
  echo "built $(date -u +%FT%TZ) on $(hostname) from $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  "$P/bin/kubelet" --version
  "$P/bin/containerd" --version
  LD_LIBRARY_PATH=$P/lib "$P/bin/runc" --version | head -1
  echo "gpunode $(LD_LIBRARY_PATH=$P/lib "$P/bin/gpunode" --version)"
  echo "images: gpunode.test/pause:k8sbundle gpunode.test/nvsmi:k8sbundle (busybox $(/bin/busybox | head -1 | awk '{print $2}'), glibc $(dpkg-query -W -f '${Version}' libc6))"
  (cd "$P" && find . -type f -printf '%s %p\n' | sort -k2)
} > "$P/VERSIONS"

# 4. one archive; xz so that the GPU side can unpack it with xz, busybox unxz or python3's lzma
rm -rf "$DEST"; mkdir -p "$DEST"
log "compressing $(du -sh "$P" | cut -f1) with xz $XZ_PRESET (minutes)"
tar -C "$P" --owner=0 --group=0 --sort=name -cf - . | xz "$XZ_PRESET" -T1 -c > "$DEST/payload.tar.xz.tmp"
mv "$DEST/payload.tar.xz.tmp" "$DEST/payload.tar.xz"
(cd "$DEST" && sha256sum payload.tar.xz > SHA256SUMS)
cp "$P/VERSIONS" "$DEST/VERSIONS"
tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
b=$(du -cb "$DEST" | tail -1 | cut -f1)
log "$(sed -n 2,5p "$P/VERSIONS" | tr '\n' ';')"
echo "bundle $DEST: $((b / 1024)) KiB compressed ($(du -sb "$P" | cut -f1) bytes unpacked); working tree $((tree / 1024)) KiB; together $(((b + tree) / 1048576)) MiB of 60"
