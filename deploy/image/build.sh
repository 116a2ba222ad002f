#!/usr/bin/env bash
# Builds the container image gpunode:<version> locally, without pulling anything: FROM scratch with
# the gpunode binary, the simulated NVML (libgpunode-simnvml.so, for test clusters), exactly the
# shared libraries they load (from ldd) and the dynamic loader. No shell, no /etc/passwd.
#
#   deploy/image/build.sh [BUILD_DIR] [--output FILE] [--tag NAME:TAG]
#
# BUILD_DIR (default build-rel): a Release build tree; the targets gpunode and gpunode_simnvml are
# built in it (niced) when missing or stale. --output FILE also writes an OCI archive for
# `ctr -n k8s.io images import FILE` (or `podman load -i FILE`).
# Layout: /usr/bin/gpunode, /usr/bin/nvidia-container-runtime -> gpunode (the OCI runtime shim's
# name, docs/cdi.md), /usr/lib/gpunode/libgpunode-simnvml.so (where gpunode looks beside
# ../lib/gpunode), libraries under /usr/lib/x86_64-linux-gnu, /lib -> usr/lib, /lib64 -> usr/lib64.
# Needs podman (Debian 12's podman 4.3 builds with its built-in buildah).
set -euo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
build=""
output=""
tag=""
while [ $# -gt 0 ]; do
  case "$1" in
    --output) output=$2; shift 2 ;;
    --output=*) output=${1#--output=}; shift ;;
    --tag) tag=$2; shift 2 ;;
    --tag=*) tag=${1#--tag=}; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "build.sh: unknown option $1" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
build=$(realpath -m "${build:-$src/build-rel}")
version=$(sed -n 's/^project(gpunode VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ -n "$version" ] || { echo "build.sh: no project VERSION in CMakeLists.txt" >&2; exit 1; }
tag=${tag:-gpunode:$version}
command -v podman >/dev/null || { echo "build.sh: podman is missing (apt-get install podman)" >&2; exit 1; }

if [ ! -f "$build/CMakeCache.txt" ]; then
  nice -n 10 cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUNODE_BUILD_TESTS=OFF
fi
grep -q '^CMAKE_BUILD_TYPE:STRING=Release' "$build/CMakeCache.txt" ||
  echo "build.sh: warning: $build is not a Release build" >&2
nice -n 10 cmake --build "$build" --target gpunode gpunode_simnvml

ctx=$(mktemp -d "${TMPDIR:-/tmp}/gpunode-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
root=$ctx/rootfs
mkdir -p "$root"/usr/bin "$root"/usr/lib/gpunode "$root"/usr/lib/x86_64-linux-gnu "$root"/usr/lib64 \
         "$root"/tmp "$root"/etc "$root"/host
chmod 1777 "$root/tmp"
ln -s usr/lib "$root/lib"
ln -s usr/lib64 "$root/lib64"

install -m 0755 "$build/bin/gpunode" "$root/usr/bin/gpunode"
install -m 0755 "$build/bin/libgpunode-simnvml.so" "$root/usr/lib/gpunode/libgpunode-simnvml.so"
strip --strip-all "$root/usr/bin/gpunode"
strip --strip-unneeded "$root/usr/lib/gpunode/libgpunode-simnvml.so"
# The simulated driver's programs beside its library (`gpunode sim hostroot` installs them into the
# simulated root as usr/bin/nvidia-smi and nvidia-cuda-mps-control: DRA claims' time slices and MPS
# daemons run them there). Built with gpunode_simnvml.
for p in gpunode-sim-nvidia-smi gpunode-sim-mps-control; do
  install -m 0755 "$build/bin/$p" "$root/usr/lib/gpunode/$p"
  strip --strip-all "$root/usr/lib/gpunode/$p"
done
ln -s gpunode "$root/usr/bin/nvidia-container-runtime"
ln -s gpunode "$root/usr/bin/gpunode-oci-runtime"
ln -s gpunode "$root/usr/bin/nvidia-container-runtime-hook"  # Docker offers --gpus when it finds it
# NVIDIA's component names: their Helm charts' `command:` lines run these (docs/nvidia-flags.md)
for n in nvidia-device-plugin gpu-feature-discovery dcgm-exporter; do ln -s gpunode "$root/usr/bin/$n"; done

# Every library ldd resolves for both files, copied (links followed) to the path the loader finds
# it under, and the loader itself. The loader's own name is /lib64/ld-linux-x86-64.so.2.
libs=$( { ldd "$build/bin/gpunode"; ldd "$build/bin/libgpunode-simnvml.so"; ldd "$build/bin/gpunode-sim-nvidia-smi"; } |
        awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u)
for lib in $libs; do
  real=$(realpath "$lib")
  case "$lib" in
    */ld-linux*) dest=$root/usr/lib64/$(basename "$lib") ;;
    *) dest=$root/usr/lib/x86_64-linux-gnu/$(basename "$lib") ;;
  esac
  cp "$real" "$dest"
  chmod 0755 "$dest"
  case "$lib" in */ld-linux*) ;; *) strip --strip-unneeded "$dest" 2>/dev/null || true ;; esac
done
if grep -q 'not found' < <(ldd "$build/bin/gpunode"; ldd "$build/bin/libgpunode-simnvml.so"); then
  echo "build.sh: ldd reports a library not found" >&2; exit 1
fi
# The built-in node profiles are embedded in gpunode; the files are shipped too, for
# GPUNODE_SIM_PROFILE=/usr/share/gpunode/profiles/<name>.yaml and as examples.
mkdir -p "$root/usr/share/gpunode/profiles"
cp "$src"/data/profiles/*.yaml "$root/usr/share/gpunode/profiles/"
# The docs that `--help` names as docs/<page>.md, where an installed gpunode's user finds them.
mkdir -p "$root/usr/share/doc/gpunode/docs"
cp "$src"/README.md "$root/usr/share/doc/gpunode/"
cp "$src"/docs/*.md "$root/usr/share/doc/gpunode/docs/"
# gpunode's own runtime: /etc/ld.so.cache is not needed (the loader's default paths are
# /lib/x86_64-linux-gnu and /usr/lib/x86_64-linux-gnu on Debian's multiarch loader).

cat > "$ctx/Containerfile" <<CF
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/bin
LABEL org.opencontainers.image.title="gpunode" \\
      org.opencontainers.image.version="$version" \\
      org.opencontainers.image.description="gpunode: device plugin, exporter, node labels, CDI, runtime shim for NVIDIA GPU nodes" \\
      org.opencontainers.image.source="deploy/image/build.sh"
USER 0:0
EXPOSE 9400
ENTRYPOINT ["/usr/bin/gpunode"]
CMD ["--help"]
CF

# Smoke test of the file system as the image has it: the binary starts with only these libraries
# (chroot, as root; a `podman run` here would need this machine's rlimit/cgroup flags).
if [ "$(id -u)" = 0 ]; then
  chroot "$root" /usr/bin/gpunode --version
  GPUNODE_SIM_PROFILE=dgx-h200 chroot "$root" /usr/bin/gpunode --nvml-library /usr/lib/gpunode/libgpunode-simnvml.so \
    --host-root / plugin --print >/dev/null || { echo "build.sh: the simulated NVML does not load in the image" >&2; exit 1; }
fi
# --pull=never: nothing is fetched; FROM scratch needs nothing.
podman build --pull=never --network=none --cgroup-manager=cgroupfs -q -t "$tag" -f "$ctx/Containerfile" "$ctx" >/dev/null
size=$(podman image inspect --format '{{.Size}}' "$tag")
echo "built $tag: $size bytes ($(awk -v s="$size" 'BEGIN{printf "%.1f MB", s/1e6}') uncompressed)"
if [ -n "$output" ]; then
  rm -f "$output"
  podman save --format oci-archive -o "$output" "$tag"
  echo "wrote $output ($(du -h "$output" | cut -f1)): ctr -n k8s.io images import $output"
fi
