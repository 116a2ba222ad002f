# Shared by the end-to-end tests on the real test cluster (e2e_test.sh, e2e_dra.sh): sourced, never
# run. Expects `src` (the repository) and $1 (the Release build tree); sets build, ns (default
# gpunode-e2e), bin/PATH, state and node, defines skip/fail/ok/step, dump and the cleanup trap
# (GPUNODE_E2E_KEEP=1 keeps a failed run's cluster), the DRA helpers (template, claim, pod,
# devices, gpus_of), fake_driver_image (gpunode.test/fake-driver:<version>, the driver container
# of NVIDIADriver tests), brings the cluster up and imports the gpunode image built from $build
# (as localhost/gpunode:$version; not with E2E_IMAGE=0).
build=$(realpath -m "${1:-$src/build-rel}")
ns=${ns:-gpunode-e2e}
skip() {
  if [ "${CI:-}" = true ]; then echo "FAIL: $*"; exit 1; fi
  echo "SKIP: $*"; exit 77
}
fail() { echo "FAIL: $*"; dump; exit 1; }
ok() { echo "   ok: $*"; }
step() { echo "-- $*"; }
[ "$(id -u)" -eq 0 ] || skip "the test cluster runs as root"
command -v go >/dev/null || skip "Go is not installed: it builds the test cluster (test/k8s/build.sh)"
command -v podman >/dev/null || skip "podman is not installed: it builds the images"

bin=$("$src/test/k8s/build.sh" | tail -1)
export PATH="$bin:$PATH"
state=${GPUNODE_K8S_STATE:-/tmp/gpunode-k8s}
prom_pid=
cleanup() {
  [ -z "$prom_pid" ] || kill "$prom_pid" 2>/dev/null || true
  # GPUNODE_E2E_KEEP=1: leave the cluster up after a failure, to look at it (cluster.sh down ends it)
  if [ "${GPUNODE_E2E_KEEP:-}" = 1 ] && [ "${e2e_passed:-}" != 1 ]; then
    echo "cluster kept: export KUBECONFIG=$KUBECONFIG PATH=$bin:\$PATH"; return
  fi
  helm uninstall gpunode -n "$ns" --wait --timeout 60s >/dev/null 2>&1 || true
  "$src/test/k8s/cluster.sh" down >/dev/null 2>&1 || true
}
dump() {
  echo "--- pods"; kubectl get pods -A -o wide 2>&1 | tail -20 || true
  echo "--- gpunode pod"; kubectl -n "$ns" describe pods 2>&1 | tail -40 || true
  echo "--- logs agent"; kubectl -n "$ns" logs daemonset/gpunode -c agent --tail 40 2>&1 || true
  echo "--- logs front"; kubectl -n "$ns" logs daemonset/gpunode -c front --tail 10 2>&1 || true
  echo "--- kubelet log"; tail -20 "$state/logs/kubelet.log" 2>/dev/null || true
  local p
  for p in $(kubectl get pods -n default -o jsonpath='{.items[*].metadata.name}' 2>/dev/null); do
    echo "--- pod $p: $(kubectl get pod "$p" -o jsonpath='{.status.phase}' 2>&1)"; kubectl logs "$p" --tail 10 2>&1 || true
  done
}
trap cleanup EXIT
step "cluster up"
"$src/test/k8s/cluster.sh" down >/dev/null 2>&1 || true
eval "$("$src/test/k8s/cluster.sh" up)" || fail "cluster.sh up"
node=$(kubectl get nodes -o jsonpath='{.items[0].metadata.name}')
ok "node $node Ready ($(kubectl get node "$node" -o jsonpath='{.status.nodeInfo.kubeletVersion}'))"
# Pods in `default` need its service account, which the controller manager makes a moment later.
deadline=$((SECONDS + 60))
until kubectl get serviceaccount default -n default >/dev/null 2>&1; do
  [ $SECONDS -lt $deadline ] || fail "no service account default/default 60 s after the cluster came up"
  sleep 0.5
done

# DRA helpers (e2e_dra.sh, test/peers/dra_test.sh). `driver` (default gpu.nvidia.com) names the
# DRA driver; pods run the test image in `default`.
driver=${driver:-gpu.nvidia.com}
LIST='ls /dev | grep -E "^nvidia[0-9]+$"'
slice_json() { kubectl get resourceslices -o json --field-selector "spec.nodeName=$node,spec.driver=$driver"; }
devices() {  # the devices of the node's slices: name taint-keys ("-": none), one per line
  slice_json | python3 -c '
import json, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # grep -q stops reading early
for s in json.load(sys.stdin)["items"]:
    for d in s["spec"].get("devices", []):
        print(d["name"], ",".join(t["key"] for t in d.get("taints", [])) or "-")'
}
gpus_of() { kubectl logs "$1" | grep -E '^nvidia[0-9]+$' | sort | tr '\n' ' '; }
template() {  # NAME [SELECTOR-CEL [CONFIG-JSON]]: a one-GPU ResourceClaimTemplate of the GPU class
  local sel="" cfg=""
  [ -z "${2:-}" ] || sel="            selectors: [{cel: {expression: '$2'}}]"
  [ -z "${3:-}" ] || cfg="      config: [{opaque: {driver: $driver, parameters: $3}}]"
  kubectl apply -f - >/dev/null <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: $1}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.nvidia.com
$sel
$cfg
YAML
}
claim() {  # NAME: a one-GPU ResourceClaim of the GPU class (for pods that share it)
  kubectl apply -f - >/dev/null <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1}
spec:
  devices:
    requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
YAML
}
pod() { pod_yaml "$@" | kubectl apply -f - >/dev/null; }
pod_yaml() {  # NAME COMMAND SOURCE...: a pod with claims; a SOURCE is t:TEMPLATE or c:CLAIM
  local name=$1 cmd=$2 claims="" refs="" n=0 s
  shift 2
  for s in "$@"; do
    n=$((n + 1))
    case $s in
      t:*) claims+="    - {name: c$n, resourceClaimTemplateName: ${s#t:}}"$'\n' ;;
      c:*) claims+="    - {name: c$n, resourceClaimName: ${s#c:}}"$'\n' ;;
    esac
    refs+="          - {name: c$n}"$'\n'
  done
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $name}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  resourceClaims:
$claims  containers:
    - name: c
      image: gpunode.test/busybox:1
      imagePullPolicy: Never
      command: [sh, -c, '$cmd']
      resources:
        claims:
$refs
YAML
}
# fake_driver_image VERSION [broken]: imports gpunode.test/fake-driver:VERSION (with "broken":
# gpunode.test/fake-driver-broken:VERSION) into containerd and prints its name. The test image's
# busybox with test/k8s/fake_driver.sh as entrypoint and /usr/bin/nvidia-driver, VERSION baked in
# (GPUNODE_FAKE_DRIVER_VERSION): NVIDIA's driver container on a simulated node (see that script for
# what it writes where). Built with podman once per version, kind and script content (kept as
# $state/images/<name>-<version>-<hash>.tar, as cluster.sh keeps its images).
fake_driver_image() {
  local version=$1 name=fake-driver broken=0 hash d ref
  case ${2:-} in
    '') ;;
    broken) name=fake-driver-broken; broken=1 ;;
    *) fail "fake_driver_image $version $2: the second argument is 'broken' or nothing" ;;
  esac
  [[ $version =~ ^[0-9]+(\.[0-9]+)+$ ]] || fail "fake_driver_image: '$version' is not a driver version like 580.95.05"
  ref=gpunode.test/$name:$version
  hash=$(sha256sum "$src/test/k8s/fake_driver.sh" | cut -c1-12)
  d=$state/images/$name-$version-$hash
  if [ ! -s "$d.tar" ]; then
    [ -s "$state/images/busybox.tar" ] || fail "no $state/images/busybox.tar (test/k8s/cluster.sh up builds it)"
    rm -rf "$d" && mkdir -p "$d"
    cp "$src/test/k8s/fake_driver.sh" "$d/nvidia-driver"
    printf '%s\n' "FROM oci-archive:$state/images/busybox.tar" "COPY nvidia-driver /usr/bin/nvidia-driver" \
      "ENV PATH=/usr/bin:/bin GPUNODE_FAKE_DRIVER_VERSION=$version GPUNODE_FAKE_DRIVER_BROKEN=$broken" \
      'ENTRYPOINT ["/bin/sh", "/usr/bin/nvidia-driver"]' > "$d/Containerfile"
    { podman build -q --network none -f "$d/Containerfile" -t "$ref" "$d" &&
      podman save -q --format oci-archive -o "$d.tar.tmp" "$ref"; } >> "$state/logs/images.log" 2>&1 ||
      { tail -5 "$state/logs/images.log"; fail "podman could not build $ref"; }
    podman rmi -f "$ref" >> "$state/logs/images.log" 2>&1 || true
    mv "$d.tar.tmp" "$d.tar"
    rm -rf "$d"
  fi
  ctr --address "$state/containerd/containerd.sock" -n k8s.io images import "$d.tar" >/dev/null ||
    fail "ctr images import of $ref"
  echo "$ref"
}

version=$(sed -n 's/^project(gpunode VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
# E2E_IMAGE=0: a suite that runs gpunode as a host process (test/peers/dra_test.sh) needs no image.
[ "${E2E_IMAGE:-1}" = 0 ] && return 0
step "gpunode image from $build, imported into containerd"
image_tar=$state/gpunode-image.tar
"$src/deploy/image/build.sh" "$build" --output "$image_tar" >"$state/logs/image-build.log" 2>&1 ||
  { tail -20 "$state/logs/image-build.log"; fail "deploy/image/build.sh"; }
ctr --address "$state/containerd/containerd.sock" -n k8s.io images import "$image_tar" >/dev/null ||
  fail "ctr images import"
ok "localhost/gpunode:$version ($(du -h "$image_tar" | cut -f1) archive)"

