#!/usr/bin/env bash
# ctest `layers`: docs/ARCHITECTURE.md's folder map, its node-side/cluster-side table,
# src/CMakeLists.txt and the #include lines agree (scripts/check-layers.py), and the check does
# catch a folder reaching past its layer or its side; src/dra (node side) may widen its row to the
# device model, and src/upgrade (cluster side) is refused it.
set -euo pipefail
repo=${1:?usage: layers_test.sh REPO}
python3 "$repo/scripts/check-layers.py" "$repo"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
copy() {  # a fresh copy of what the check reads, in $tmp/$1
  rm -rf "$tmp/$1"; mkdir -p "$tmp/$1/docs"
  cp -r "$repo/src" "$repo/sim" "$tmp/$1/"
  cp "$repo/docs/ARCHITECTURE.md" "$tmp/$1/docs/"
}
expect() {  # expect TREE PATTERN WHAT: the check fails on TREE naming PATTERN
  local out
  if out=$(python3 "$repo/scripts/check-layers.py" "$tmp/$1" 2>&1); then
    echo "FAIL: check-layers passed a tree with $3:"; echo "$out"; exit 1
  fi
  grep -q -- "$2" <<<"$out" || { echo "FAIL: $3 was not named:"; echo "$out"; exit 1; }
}

copy bad
# The device-plugin server reaching into doctor (what src/plugin/labels.cc did before src/labels/ existed).
echo '#include "src/doctor/doctor.h"' >> "$tmp/bad/src/deviceplugin/server.h"
# A library the folder map does not list for its folder.
sed -i 's/^gpunode_library(mig PUBLIC gpunode_gpu/gpunode_library(mig PUBLIC gpunode_kube gpunode_gpu/' "$tmp/bad/src/CMakeLists.txt"
expect bad 'src/deviceplugin/server.h:.*includes src/doctor/, which the folder map does not allow' 'a forbidden include'
expect bad 'gpunode_mig links gpunode_kube, which the folder map does not list' 'a forbidden link'

# A cluster-side folder whose row lets it use the node side (fleet on the device model).
copy side
sed -i 's/^\(| `src\/fleet\/` |.*\)| kube, compat, base |$/\1| kube, compat, devices, base |/' "$tmp/side/docs/ARCHITECTURE.md"
expect side 'src/fleet/ is cluster side but may depend on src/devices/ (node side)' 'a cluster-side folder on the node side'
# A folder on no side.
copy noside
sed -i 's/, `src\/mig\/`//' "$tmp/noside/docs/ARCHITECTURE.md"
expect noside 'src/mig/: on no side' 'a folder on no side'

# The DRA driver (src/dra, node side) may grow into devices, lifecycle and kube by widening its
# row; the upgrade controller (src/upgrade, cluster side) may not use the device model.
copy future
sed -i 's/^\(| `src\/dra\/` |.*| \)\([^|]*\) |$/\1devices, lifecycle, \2 |/' "$tmp/future/docs/ARCHITECTURE.md"
printf '#include "src/devices/devices.h"\n#include "src/lifecycle/harness.h"\n#include "src/kube/client.h"\n' > "$tmp/future/src/dra/driver.cc"
sed -i 's/^gpunode_library(dra PUBLIC /gpunode_library(dra PUBLIC gpunode_devices gpunode_lifecycle /' "$tmp/future/src/CMakeLists.txt"
python3 "$repo/scripts/check-layers.py" "$tmp/future" >/dev/null ||
  { echo "FAIL: src/dra within its widened row was refused:"; python3 "$repo/scripts/check-layers.py" "$tmp/future"; exit 1; }
echo '#include "src/devices/devices.h"' >> "$tmp/future/src/upgrade/controller.cc"
expect future 'src/upgrade/controller.cc:[0-9]*: includes src/devices/, which the folder map does not allow' 'the upgrade controller on the device model'
echo "layers: a forbidden include, a forbidden link, a cluster-side folder on the node side and a folder on no side are caught; src/dra and src/upgrade have their places"
