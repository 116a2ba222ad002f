#!/usr/bin/env bash
# kernels/bench_kernels.ptx, kernels/bench_kernels_sm75.ptx and kernels/bench_kernels_sm90a.ptx are
# generated from the .cu files beside them (scripts/gen-ptx.sh) and committed, so builds need no CUDA toolkit. Where nvcc exists, this checks the committed file is
# current: regenerate and compare. A different nvcc release writes different PTX: then it skips and
# says which release made the committed file.
set -euo pipefail
src=${1:?source dir}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$nvcc" ]; then echo "SKIP: no nvcc here (the committed PTX is used as is)"; exit 77; fi
committed=$(grep -m1 '^// Cuda compilation tools' "$src/kernels/bench_kernels.ptx" || true)
mine=$("$nvcc" --version | grep -m1 '^Cuda compilation tools' || true)
if [ "// $mine" != "$committed" ]; then
  echo "SKIP: committed PTX made by '${committed#// }', this nvcc is '$mine'"; exit 77
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
(cd "$src" && scripts/gen-ptx.sh "$tmp" >/dev/null)
# nvcc names anonymous-namespace symbols after a hash of the source's absolute path
# (_INTERNAL_ec204aae_..., GLOBAL__N__ec204aae_...): the same source in another checkout gives
# other names and nothing else. Compare with those hashes blanked.
norm() { sed -E 's/_INTERNAL_[0-9a-f]{8}_/_INTERNAL_x_/g; s/GLOBAL__N__[0-9a-f]{8}_/GLOBAL__N__x_/g' "$1"; }
for f in bench_kernels.ptx bench_kernels_sm75.ptx bench_kernels_sm90a.ptx; do
  if ! diff -q <(norm "$src/kernels/$f") <(norm "$tmp/$f") >/dev/null; then
    echo "FAIL: kernels/$f is stale: run scripts/gen-ptx.sh and commit it"
    diff <(norm "$src/kernels/$f") <(norm "$tmp/$f") | head -20
    exit 1
  fi
done
echo "ok: kernels/bench_kernels.ptx, bench_kernels_sm75.ptx and bench_kernels_sm90a.ptx are current ($mine)"
