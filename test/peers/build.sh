#!/usr/bin/env bash
# Builds NVIDIA's device plugin, gpu-feature-discovery, nvidia-ctk and the DRA driver's GPU kubelet
# plugin from their published Go modules, pinned in test/peers/versions.env, into a cache outside
# the repo. Each component is keyed by its own module and version, so bumping one pin rebuilds only
# that component:
#   ${GPUNODE_CACHE:-~/.cache/gpunode}/peers/<module>-<version>/bin/   e.g. k8s-device-plugin-v0.19.0
# and the binaries of the pinned set are linked (hard links, so a tar of the folder holds the
# files) into one folder, the one the suites use as $PEERS_BIN:
#   ${GPUNODE_CACHE:-~/.cache/gpunode}/peers/dp<v>-ctk<v>-dra<v>/bin/
# Only what is missing is built. Same link flags as NVIDIA's Makefiles: NVML is resolved at run
# time (lazy binding), so the binaries start on any node and die at the first NVML symbol the
# loaded libnvidia-ml lacks, which is exactly what the simulated NVML must survive.
# Without arguments it builds what the ctest peers suites run (device plugin, GFD, nvidia-ctk);
# NVIDIA's DRA kubelet plugin (~6 min cold on 2 cores) only when named, so CI's cold run does not
# pay for it before a suite uses it. With BINARY arguments, only those are built (e.g.
# gpu-kubelet-plugin). Prints the bin folder on its last line. Exit 77 when Go is missing (tests
# turn that into a skip, or a failure under CI). Two runs at once (ctest -j) wait for each other
# per component (flock), so neither sees the other's half-built source copy.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
command -v go >/dev/null || { echo "peers build: Go is not installed (needed to build NVIDIA's components)" >&2; exit 77; }
export HOME=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
peers=${GPUNODE_CACHE:-$HOME/.cache/gpunode}/peers
bin=$peers/dp$DEVICE_PLUGIN_VERSION-ctk$CONTAINER_TOOLKIT_VERSION-dra$DRA_DRIVER_VERSION/bin
mkdir -p "$bin"
export GOFLAGS=-buildvcs=false CGO_ENABLED=1
log() { echo "peers build: $*" >&2; }
ext='-extldflags=-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files'

# Each module is built in a copy of its published source (`go mod download`), against its own
# go.mod and go.sum: the binaries are the release exactly as published, not re-resolved in a
# wrapper module (so the device plugin links the toolkit packages its go.mod requires, whatever
# CONTAINER_TOOLKIT_VERSION says). (`go install pkg@version` would be the same, but it also asks
# the proxy for the module's version list, which the proxy here refuses.)
# What the ctest peers suites need, when no BINARY is named.
[ $# -gt 0 ] || set -- nvidia-device-plugin gpu-feature-discovery nvidia-ctk
wanted=" $* "
build() { # module version info-package binary...
  local module=$1 version=$2 info=$3; shift 3
  local b missing=() own=$peers/${module##*/}-$version
  local own_bin=$own/bin
  mkdir -p "$own_bin"
  local lock_fd
  if command -v flock >/dev/null; then exec {lock_fd}>"$own/.lock" && flock "$lock_fd"; fi
  for b in "$@"; do
    [[ "$wanted" == *" $b "* ]] || continue
    [ -x "$own_bin/$b" ] || missing+=("$b")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "$module $version: ${missing[*]}"
    local dir src=$own/src
    dir=$(go mod download -json "$module@$version" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')
    [ -d "$dir" ] || { log "go mod download $module@$version gave no source folder"; exit 1; }
    rm -rf "$src"; cp -r "$dir" "$src"; chmod -R u+w "$src"
    local t0; t0=$(date +%s)
    for b in "${missing[@]}"; do
      # Built under a temporary name and renamed: a binary that exists is a whole one.
      (cd "$src" && go build -mod=mod -o "$own_bin/.$b.tmp" \
        -ldflags "-s -w '$ext' -X $module/$info.version=$version -X $module/$info.gitCommit=$version" "./cmd/$b")
      mv -f "$own_bin/.$b.tmp" "$own_bin/$b"
    done
    log "$module $version: built in $(( $(date +%s) - t0 )) s"
  fi
  # Every binary of this component that is built, wanted or not, is put in the pinned set's folder.
  for b in "$@"; do
    [ -x "$own_bin/$b" ] || continue
    [ "$own_bin/$b" -ef "$bin/$b" ] || ln -f "$own_bin/$b" "$bin/$b" 2>/dev/null || cp -f "$own_bin/$b" "$bin/$b"
  done
  [ -z "${lock_fd:-}" ] || exec {lock_fd}>&-
}

start=$(date +%s)
build github.com/NVIDIA/k8s-device-plugin "$DEVICE_PLUGIN_VERSION" internal/info nvidia-device-plugin gpu-feature-discovery
build github.com/NVIDIA/nvidia-container-toolkit "$CONTAINER_TOOLKIT_VERSION" internal/info nvidia-ctk
build sigs.k8s.io/dra-driver-nvidia-gpu "$DRA_DRIVER_VERSION" internal/info gpu-kubelet-plugin
log "ready in $(( $(date +%s) - start )) s"
echo "$bin"
