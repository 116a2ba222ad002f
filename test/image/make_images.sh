#!/usr/bin/env bash
# make_images.sh OUTDIR: builds the test images of test/data/images/*.Containerfile (FROM scratch:
# only the config of a real GPU image, its env and labels; no file) with podman, for linux/amd64
# and linux/arm64 (the arm64 build gets NVARCH=sbsa, so the platform chosen is visible).
#
# Everything goes under OUTDIR (nothing else on the machine is written):
#   OUTDIR/storage/{root,runroot,tmp}  podman's containers-storage (vfs) holding, per image NAME:TAG
#                                       localhost/gpunode-test/NAME:TAG-amd64, ...:TAG-arm64 and the
#                                       manifest list localhost/gpunode-test/NAME:TAG (both)
#   OUTDIR/oci/NAME-TAG-ARCH.tar        each single image as an OCI archive (for containerd/docker)
#   OUTDIR/images.tsv                   NAME<TAB>TAG<TAB>source Containerfile, one line per image
#   OUTDIR/podman.sh                    podman with that storage: `OUTDIR/podman.sh images`
# Needs podman (Debian 12's 4.3 works). Safe to run again (images are rebuilt).
set -euo pipefail
OUT=${1:?usage: $0 OUTDIR}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DATA=$HERE/../data/images
command -v podman >/dev/null || { echo "make_images.sh: podman is missing (scripts/install-deps.sh)" >&2; exit 2; }
mkdir -p "$OUT/storage/root" "$OUT/storage/runroot" "$OUT/storage/tmp" "$OUT/oci"
OUT=$(cd "$OUT" && pwd)
cat > "$OUT/podman.sh" <<SH
#!/bin/sh
# podman with the storage of make_images.sh (no system configuration read or written)
export TMPDIR="$OUT/storage/tmp" CONTAINERS_CONF=/dev/null CONTAINERS_REGISTRIES_CONF=/dev/null
exec podman --root "$OUT/storage/root" --runroot "$OUT/storage/runroot" --tmpdir "$OUT/storage/tmp" \\
  --storage-driver vfs --cgroup-manager cgroupfs --events-backend none "\$@"
SH
chmod +x "$OUT/podman.sh"
P=$OUT/podman.sh
: > "$OUT/images.tsv"
for f in "$DATA"/*.Containerfile; do
  base=$(basename "$f" .Containerfile)       # e.g. cuda-12.8.1-base-ubuntu24.04
  case "$base" in
    cuda-*) name=cuda; tag=${base#cuda-} ;;
    pytorch-*) name=pytorch; tag=${base#pytorch-} ;;
    vllm-openai-*) name=vllm-openai; tag=${base#vllm-openai-} ;;
    *) echo "make_images.sh: $f: unknown image family" >&2; exit 2 ;;
  esac
  img=localhost/gpunode-test/$name
  "$P" manifest rm "$img:$tag" >/dev/null 2>&1 || true
  "$P" rmi -f "$img:$tag" >/dev/null 2>&1 || true
  "$P" manifest create "$img:$tag" >/dev/null
  for arch in amd64 arm64; do
    nvarch=x86_64
    [ "$arch" = arm64 ] && nvarch=sbsa
    "$P" build -q --layers=false --no-cache --platform "linux/$arch" --build-arg "TARGETARCH=$arch" --build-arg "NVARCH=$nvarch" \
      --timestamp 0 -t "$img:$tag-$arch" -f "$f" "$DATA" >/dev/null
    "$P" manifest add "$img:$tag" "containers-storage:$img:$tag-$arch" >/dev/null
    rm -f "$OUT/oci/$name-$tag-$arch.tar"
    "$P" save -q --format oci-archive -o "$OUT/oci/$name-$tag-$arch.tar" "$img:$tag-$arch"
  done
  printf '%s\t%s\t%s\n' "$name" "$tag" "test/data/images/$(basename "$f")" >> "$OUT/images.tsv"
done
echo "make_images.sh: $(wc -l < "$OUT/images.tsv") images (amd64 + arm64 each) in $OUT"
