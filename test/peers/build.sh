#!/usr/bin/env bash
# Builds NVIDIA's device plugin, gpu-feature-discovery, nvidia-ctk and the DRA driver's GPU kubelet
# plugin from their published Go modules, pinned in test/peers/versions.env, into a cache outside
# the repo keyed by version:
#   ${GPUNODE_CACHE:-~/.cache/gpunode}/peers/dp<v>-ctk<v>-dra<v>/bin/
# Only what is missing is built. Same link flags as NVIDIA's Makefiles: NVML is resolved at run
# time (lazy binding), so the binaries start on any node and die at the first NVML symbol the
# loaded libnvidia-ml lacks, which is exactly what the simulated NVML must survive.
# Without arguments it builds what the ctest peers suites run (device plugin, GFD, nvidia-ctk);
# NVIDIA's DRA kubelet plugin (~6 min cold on 2 cores) only when named, so CI's cold run does not
# pay for it before a suite uses it. With BINARY arguments, only those are built (e.g.
# gpu-kubelet-plugin). Prints the bin folder on
# its last line. Exit 77 when Go is missing (tests turn that into a skip,
# or a failure under CI).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
command -v go >/dev/null || { echo "peers build: Go is not installed (needed to build NVIDIA's components)" >&2; exit 77; }
export HOME=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
cache=${GPUNODE_CACHE:-$HOME/.cache/gpunode}/peers/dp$DEVICE_PLUGIN_VERSION-ctk$CONTAINER_TOOLKIT_VERSION-dra$DRA_DRIVER_VERSION
bin=$cache/bin
mkdir -p "$bin"
export GOFLAGS=-buildvcs=false CGO_ENABLED=1
log() { echo "peers build: $*" >&2; }
ext='-extldflags=-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files'

# Each module is built in a copy of its published source (`go mod download`), against its own
# go.mod and go.sum: the binaries are the release exactly as published, not re-resolved in a
# wrapper module. (`go install pkg@version` would be the same, but it also asks the proxy for the
# module's version list, which the proxy here refuses.)
# What the ctest peers suites need, when no BINARY is named.
[ $# -gt 0 ] || set -- nvidia-device-plugin gpu-feature-discovery nvidia-ctk
wanted=" $* "
build() { # module version info-package binary...
  local module=$1 version=$2 info=$3; shift 3
  local b missing=()
  for b in "$@"; do
    [ "$wanted" = "  " ] || [[ "$wanted" == *" $b "* ]] || continue
    [ -x "$bin/$b" ] || missing+=("$b")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "$module $version: ${missing[*]}"
  local dir src=$cache/src/${module##*/}
  dir=$(go mod download -json "$module@$version" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')
  [ -d "$dir" ] || { log "go mod download $module@$version gave no source folder"; exit 1; }
  rm -rf "$src"; mkdir -p "${src%/*}"; cp -r "$dir" "$src"; chmod -R u+w "$src"
  local t0; t0=$(date +%s)
  for b in "${missing[@]}"; do
    (cd "$src" && go build -mod=mod -o "$bin/$b" \
      -ldflags "-s -w '$ext' -X $module/$info.version=$version -X $module/$info.gitCommit=$version" "./cmd/$b")
  done
  log "$module $version: built in $(( $(date +%s) - t0 )) s"
}

start=$(date +%s)
build github.com/NVIDIA/k8s-device-plugin "$DEVICE_PLUGIN_VERSION" internal/info nvidia-device-plugin gpu-feature-discovery
build github.com/NVIDIA/nvidia-container-toolkit "$CONTAINER_TOOLKIT_VERSION" internal/info nvidia-ctk
build sigs.k8s.io/dra-driver-nvidia-gpu "$DRA_DRIVER_VERSION" internal/info gpu-kubelet-plugin
log "ready in $(( $(date +%s) - start )) s"
echo "$bin"
