#!/usr/bin/env bash
# ctest `layers`: docs/ARCHITECTURE.md's folder map, src/CMakeLists.txt and the #include lines
# agree (scripts/check-layers.py), and the check does catch a folder reaching past its layer.
set -euo pipefail
repo=${1:?usage: layers_test.sh REPO}
python3 "$repo/scripts/check-layers.py" "$repo"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs"
cp -r "$repo/src" "$repo/sim" "$tmp/"
cp "$repo/docs/ARCHITECTURE.md" "$tmp/docs/"
# The plugin reaching into doctor (what src/plugin/labels.cc did before src/labels/ existed).
echo '#include "src/doctor/doctor.h"' >> "$tmp/src/plugin/server.h"
# A library the folder map does not list for its folder.
sed -i 's/^gpunode_library(mig PUBLIC gpunode_gpu/gpunode_library(mig PUBLIC gpunode_kube gpunode_gpu/' "$tmp/src/CMakeLists.txt"
if out=$(python3 "$repo/scripts/check-layers.py" "$tmp" 2>&1); then
  echo "FAIL: check-layers passed a tree with a forbidden include and link:"; echo "$out"; exit 1
fi
grep -q 'src/plugin/server.h:.*includes src/doctor/, which the folder map does not allow' <<<"$out" ||
  { echo "FAIL: the forbidden include was not named:"; echo "$out"; exit 1; }
grep -q 'gpunode_mig links gpunode_kube, which the folder map does not list' <<<"$out" ||
  { echo "FAIL: the forbidden link was not named:"; echo "$out"; exit 1; }
echo "layers: a forbidden include and a forbidden link are both caught"
