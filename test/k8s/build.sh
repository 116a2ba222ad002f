#!/usr/bin/env bash
# Builds the test cluster's upstream components from their published Go modules, pinned in
# test/k8s/versions.env, into a cache outside the repo keyed by version:
#   ${GPUNODE_CACHE:-~/.cache/gpunode}/k8s/<k8s>-<etcd>-<containerd>-<helm>/bin/
# Only what is missing is built, so only the first run on a machine pays (see docs/kubernetes.md
# for the measured cold and warm times). Prints the bin folder on its last line.
#
# Kubernetes: k8s.io/kubernetes's go.mod points its ~33 staging modules (k8s.io/api, client-go, ...)
# at ./staging with `replace`, which Go ignores in a dependency; a small wrapper module requires
# k8s.io/kubernetes and pins each staging module to the matching v0.Y.Z, generated from that tag's
# own go.mod. Version ldflags make the binaries (and so the Node) report the real version.
#
# KWOK (`build.sh kwok`, not part of `all`): the kwok controller alone (sigs.k8s.io/kwok/cmd/kwok) into
#   ${GPUNODE_CACHE:-~/.cache/gpunode}/k8s/kwok-<version>/bin/kwok
# with its default stages (kustomize/stage/fast of the same module: node-initialize,
# node-heartbeat-with-lease, pod-ready, pod-complete, pod-delete) copied beside it as stages.yaml.
# Prints that bin folder on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
command -v go >/dev/null || { echo "k8s build: Go is not installed (needed to build the test cluster)" >&2; exit 77; }
key="$K8S_VERSION-etcd$ETCD_VERSION-containerd$CONTAINERD_VERSION-helm$HELM_VERSION"
# HOME may be unset under a CI runner; Go needs it for its own caches too.
export HOME=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
cache=${GPUNODE_CACHE:-$HOME/.cache/gpunode}/k8s/$key
bin=$cache/bin
mkdir -p "$bin" "$cache/src"
export GOFLAGS=-buildvcs=false CGO_ENABLED=${CGO_ENABLED:-1}
jobs=${GPUNODE_GO_JOBS:-$(nproc)}
log() { echo "k8s build: $*" >&2; }

have() { for b in "$@"; do [ -x "$bin/$b" ] || return 1; done; }

# A wrapper module in $cache/src/<name> with go.mod from stdin; runs `go mod tidy`-free resolution
# by `go get` of the named packages.
wrapper() {
  local dir=$cache/src/$1
  mkdir -p "$dir"
  cat > "$dir/go.mod"
  echo "$dir"
}

build_kubernetes() {
  local targets=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
  have "${targets[@]}" && return 0
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local staging=v0.${K8S_VERSION#v1.}
  log "Kubernetes $K8S_VERSION (staging modules $staging): ${targets[*]}"
  local info mod
  info=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION")
  mod=$(printf '%s' "$info" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
  local dir
  dir=$(
    {
      echo "module gpunode.test/k8s"
      echo
      grep -E '^go [0-9]' "$mod"
      grep -E '^godebug ' "$mod" || true
      echo
      echo "require k8s.io/kubernetes $K8S_VERSION"
      echo
      echo "replace ("
      sed -n 's#^\t\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$staging"'#p' "$mod"
      echo ")"
    } | wrapper kubernetes
  )
  cat > "$dir/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubectl/pkg/cmd"
)
GO
  (cd "$dir" && go mod tidy -e >/dev/null 2>"$cache/src/kubernetes.tidy.log" || { cat "$cache/src/kubernetes.tidy.log" >&2; exit 1; })
  local pkg=k8s.io/component-base/version
  local ld="-s -w -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  ld+=" -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1"
  ld+=" -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  for t in "${targets[@]}"; do
    [ -x "$bin/$t" ] && continue
    log "  go build $t"
    (cd "$dir" && go build -p "$jobs" -trimpath -tags tools -ldflags "$ld" -o "$bin/$t.tmp" "k8s.io/kubernetes/cmd/$t")
    mv "$bin/$t.tmp" "$bin/$t"
  done
}

build_etcd() {
  have etcd && return 0
  log "etcd $ETCD_VERSION"
  local dir
  dir=$(printf 'module gpunode.test/etcd\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" | wrapper etcd)
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > "$dir/tools.go"
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1 && CGO_ENABLED=0 go build -p "$jobs" -trimpath -ldflags "-s -w" -o "$bin/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$bin/etcd.tmp" "$bin/etcd"
}

build_containerd() {
  have containerd containerd-shim-runc-v2 ctr && return 0
  log "containerd $CONTAINERD_VERSION"
  local dir
  dir=$(printf 'module gpunode.test/containerd\n\ngo 1.26\n\nrequire github.com/containerd/containerd/v2 %s\n' "$CONTAINERD_VERSION" | wrapper containerd)
  printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "github.com/containerd/containerd/v2/cmd/containerd"\n\t_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"\n\t_ "github.com/containerd/containerd/v2/cmd/ctr"\n)\n' > "$dir/tools.go"
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1)
  local ld="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
  for t in containerd containerd-shim-runc-v2 ctr; do
    [ -x "$bin/$t" ] && continue
    log "  go build $t"
    local cgo=1; [ "$t" = containerd-shim-runc-v2 ] && cgo=0
    (cd "$dir" && CGO_ENABLED=$cgo go build -p "$jobs" -trimpath -tags "no_btrfs tools" -ldflags "$ld" \
      -o "$bin/$t.tmp" "github.com/containerd/containerd/v2/cmd/$t")
    mv "$bin/$t.tmp" "$bin/$t"
  done
}

build_helm() {
  have helm && return 0
  log "helm $HELM_VERSION"
  local dir minor=${K8S_VERSION#v1.}
  minor=${minor%%.*}
  dir=$(printf 'module gpunode.test/helm\n\ngo 1.26\n\nrequire helm.sh/helm/v3 %s\n' "$HELM_VERSION" | wrapper helm)
  printf '//go:build tools\n\npackage tools\n\nimport _ "helm.sh/helm/v3/cmd/helm"\n' > "$dir/tools.go"
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1 && CGO_ENABLED=0 go build -p "$jobs" -trimpath -tags tools \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor" \
    -o "$bin/helm.tmp" helm.sh/helm/v3/cmd/helm)
  mv "$bin/helm.tmp" "$bin/helm"
}

# kwok: its go.mod has no replace directive, so `go install module/cmd@version` builds exactly the
# versions it pins (no wrapper module needed). CGO off: a static binary.
build_kwok() {
  local kc=${GPUNODE_CACHE:-$HOME/.cache/gpunode}/k8s/kwok-$KWOK_VERSION
  bin=$kc/bin
  if [ -x "$bin/kwok" ] && [ -s "$kc/stages.yaml" ]; then return 0; fi
  mkdir -p "$bin"
  log "kwok $KWOK_VERSION (sigs.k8s.io/kwok/cmd/kwok)"
  local mod
  mod=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')
  [ -d "$mod/kustomize/stage" ] || { log "sigs.k8s.io/kwok@$KWOK_VERSION: no kustomize/stage in $mod"; exit 1; }
  local f
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    printf -- '---\n# sigs.k8s.io/kwok@%s kustomize/stage/%s\n' "$KWOK_VERSION" "$f"
    cat "$mod/kustomize/stage/$f"
  done > "$kc/stages.yaml.tmp"
  mv "$kc/stages.yaml.tmp" "$kc/stages.yaml"
  rm -rf "$kc/gobin"
  GOBIN=$kc/gobin CGO_ENABLED=0 go install -p "$jobs" -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  mv "$kc/gobin/kwok" "$bin/kwok"
  rm -rf "$kc/gobin"
}

# Prometheus (`build.sh prometheus`, not part of `all`): Debian's package is built without Kubernetes
# service discovery (its +ds build drops it), which the monitoring test needs (a ServiceMonitor is
# endpoints SD). Built from github.com/prometheus/prometheus, whose v0.3XX.Y module versions are the
# 3.XX.Y releases, with its own build tags leaving out every SD but static, file and Kubernetes
# (remove_all_sd, enable_kubernetes_sd) and without the web UI's assets (the test uses the HTTP API):
#   ${GPUNODE_CACHE:-~/.cache/gpunode}/k8s/prometheus-<version>/bin/prometheus
# Its go.mod has no replace directive, so `go install module/cmd@version` builds exactly its pins.
build_prometheus() {
  local pc=${GPUNODE_CACHE:-$HOME/.cache/gpunode}/k8s/prometheus-$PROMETHEUS_VERSION
  bin=$pc/bin
  if [ -x "$bin/prometheus" ]; then return 0; fi
  mkdir -p "$bin"
  rm -rf "$pc/gobin"
  log "prometheus $PROMETHEUS_VERSION (github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_MODULE_VERSION, Kubernetes SD only)"
  GOBIN=$pc/gobin CGO_ENABLED=0 go install -p "$jobs" -trimpath -tags remove_all_sd,enable_kubernetes_sd \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION#v}" \
    "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_MODULE_VERSION"
  mv "$pc/gobin/prometheus" "$bin/prometheus"
  rm -rf "$pc/gobin"
}

# prometheus-adapter (`build.sh prometheus-adapter`, not part of `all`): the custom-metrics API server
# (sigs.k8s.io/prometheus-adapter/cmd/adapter) for the monitoring test's HPA check, into
#   ${GPUNODE_CACHE:-~/.cache/gpunode}/k8s/prometheus-adapter-<version>/bin/adapter
# Its go.mod has no replace directive, but `go install module@version` asks the proxy for the module's
# version list (to look for a deprecation notice), which the proxy here refuses; so the exact version
# is downloaded (`go mod download`), copied out of the read-only module cache and built in place with
# its own go.mod/go.sum. Upstream's Makefile builds it the same way: CGO off, no version ldflags.
build_prometheus_adapter() {
  local ac=${GPUNODE_CACHE:-$HOME/.cache/gpunode}/k8s/prometheus-adapter-$PROMETHEUS_ADAPTER_VERSION
  bin=$ac/bin
  if [ -x "$bin/adapter" ]; then return 0; fi
  mkdir -p "$bin"
  log "prometheus-adapter $PROMETHEUS_ADAPTER_VERSION (sigs.k8s.io/prometheus-adapter/cmd/adapter)"
  local mod src=$ac/src
  mod=$(go mod download -json "sigs.k8s.io/prometheus-adapter@$PROMETHEUS_ADAPTER_VERSION" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')
  [ -f "$mod/go.mod" ] || { log "sigs.k8s.io/prometheus-adapter@$PROMETHEUS_ADAPTER_VERSION: no go.mod in '$mod'"; exit 1; }
  rm -rf "$src"
  cp -r "$mod" "$src"
  chmod -R u+w "$src"
  (cd "$src" && CGO_ENABLED=0 go build -p "$jobs" -trimpath -ldflags "-s -w" -o "$bin/adapter.tmp" ./cmd/adapter)
  mv "$bin/adapter.tmp" "$bin/adapter"
  rm -rf "$src"
}

start=$SECONDS
which=${1:-all}
case "$which" in
  all) build_etcd; build_containerd; build_helm; build_kubernetes ;;
  kubernetes|etcd|containerd|helm|kwok|prometheus) "build_$which" ;;
  prometheus-adapter) build_prometheus_adapter ;;
  *) echo "usage: test/k8s/build.sh [all|kubernetes|etcd|containerd|helm|kwok|prometheus|prometheus-adapter]" >&2; exit 2 ;;
esac
log "done in $((SECONDS - start)) s"
echo "$bin"
