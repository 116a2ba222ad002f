#!/usr/bin/env bash
# sim/nvml/nvml_entry_points.inc (every entry point of nvml.h, expanded into the simulated NVML's
# NOT_SUPPORTED stubs) is generated from CUDA 13.0's nvml.h as vendored by the go-nvml release
# pinned in test/peers/versions.env (GO_NVML_VERSION) and committed. This checks it is current:
# the header comes from `go mod download`, scripts/gen-nvml-entry-points.py --check compares.
#
#   test/sim/nvml_entry_points_current.sh [SOURCE_DIR]
#
# Exit 0 current, 1 stale (the differences are named) or broken, 77 skipped: without Go, or when
# the module cannot be downloaded (offline, no module cache), unless CI=true: then those fail.
set -euo pipefail
src=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
skip() {
  if [ "${CI:-}" = true ]; then echo "FAIL: $*"; exit 1; fi
  echo "SKIP: $*"; exit 77
}
command -v python3 >/dev/null || skip "python3 is not installed: it runs scripts/gen-nvml-entry-points.py"
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then PATH=$PATH:/usr/local/go/bin; fi
command -v go >/dev/null || skip "Go is not installed: it fetches go-nvml's nvml.h (go mod download)"
version=$(sed -n 's/^GO_NVML_VERSION=//p' "$src/test/peers/versions.env")
[ -n "$version" ] || { echo "FAIL: no GO_NVML_VERSION in test/peers/versions.env"; exit 1; }
if ! json=$(cd / && go mod download -json "github.com/NVIDIA/go-nvml@$version" 2>&1); then
  skip "go mod download github.com/NVIDIA/go-nvml@$version failed (offline?): $(echo "$json" | tr '\n' ' ' | head -c 300)"
fi
dir=$(printf '%s' "$json" | python3 -c 'import json, sys; print(json.load(sys.stdin).get("Dir", ""))')
header=$dir/pkg/nvml/nvml.h
[ -f "$header" ] || { echo "FAIL: go-nvml@$version has no pkg/nvml/nvml.h (looked in '$dir')"; exit 1; }
python3 "$src/scripts/gen-nvml-entry-points.py" --check --output "$src/sim/nvml/nvml_entry_points.inc" "$header"
