#!/usr/bin/env bash
# kernels/bench_kernels.ptx and kernels/bench_kernels_sm90a.ptx are generated from the .cu files
# beside them (scripts/gen-ptx.sh) and committed, so builds need no CUDA toolkit. Where nvcc exists, this checks the committed file is
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
for f in bench_kernels.ptx bench_kernels_sm90a.ptx; do
  if ! diff -q "$src/kernels/$f" "$tmp/$f" >/dev/null; then
    echo "FAIL: kernels/$f is stale: run scripts/gen-ptx.sh and commit it"
    diff "$src/kernels/$f" "$tmp/$f" | head -20
    exit 1
  fi
done
echo "ok: kernels/bench_kernels.ptx and kernels/bench_kernels_sm90a.ptx are current ($mine)"
