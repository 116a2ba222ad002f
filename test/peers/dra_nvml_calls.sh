#!/usr/bin/env bash
# Which NVML functions NVIDIA's DRA kubelet plugin (gpu-kubelet-plugin, test/peers/versions.env)
# calls on a simulated node, and how the simulated NVML answers each: implemented, stub (answers
# NOT_SUPPORTED) or missing (the plugin would die with "symbol lookup error"). The plugin runs for
# a few seconds inside plugin_ns.sh (the node's /sys, /proc/driver and /dev), its sockets, CDI
# folder and checkpoint in a temporary folder, with an API server address nobody answers (it
# enumerates the GPUs and serves its sockets before it needs one); the calls are read from the
# dynamic linker's lazy bindings (LD_DEBUG=bindings). A tool, not a test: it prints and exits 0
# when the plugin ran.
#
#   dra_nvml_calls.sh BUILD-DIR [PROFILE [SECONDS [PLUGIN-FLAGS...]]]
# e.g. dra_nvml_calls.sh build-rel a100-mig 15 --feature-gates=DynamicMIG=true
# Needs root (mount namespace), Go (to build the plugin) and a Release tree (gpunode, gpunode_simnvml).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"
peers_setup "$1" gpu-kubelet-plugin
profile=${2:-dgx-h200} seconds=${3:-15}
shift $(( $# < 3 ? $# : 3 ))
[ "$(id -u)" = 0 ] || peers_skip "needs root (a private mount namespace)"
plugin=$PEERS_BIN/gpu-kubelet-plugin
[ -x "$plugin" ] || { echo "FAIL: $plugin was not built by test/peers/build.sh" >&2; exit 1; }
node=$WORK/node
mkdir -p "$node/registry" "$node/plugins" "$node/cdi"
"$GPUNODE" sim hostroot "$profile" "$node/root" --device-nodes --profile-file "$node/profile.yaml" -q
# The plugin dlopens libnvidia-ml.so.1 from its driver root by path: make that the simulated one.
cp "$SIM_LIB" "$(readlink -f "$node/root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")"
cat > "$node/kubeconfig" <<'KUBECONFIG'
apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: none, user: {token: none}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
KUBECONFIG
rc=0
timeout -s INT "$seconds" "$here/plugin_ns.sh" "$node/root" -- env GPUNODE_SIM_PROFILE="$node/profile.yaml" \
  LD_DEBUG=bindings LD_DEBUG_OUTPUT="$node/ld" "$plugin" --node-name sim-node --namespace default \
  --image-name gpu-kubelet-plugin --cdi-root "$node/cdi" --nvidia-driver-root "$node/root" \
  --container-driver-root "$node/root" --nvidia-cdi-hook-path /bin/true \
  --kubelet-registrar-directory-path "$node/registry" --kubelet-plugins-directory-path "$node/plugins" \
  --kubeconfig "$node/kubeconfig" --healthcheck-port -1 -v 4 "$@" > "$node/plugin.log" 2>&1 || rc=$?
echo "gpu-kubelet-plugin on $profile for ${seconds} s (exit $rc; 124 = stopped by us):"
grep -E '^(E|F)[0-9]{4} |^Error|symbol lookup error' "$node/plugin.log" | grep -v 'reflector\|resourceslicecontroller' | head -5 | cut -c1-300 || true
echo "devices announced: $(grep -c 'About to announce device' "$node/plugin.log" || true)"
nm -D --defined-only "$SIM_LIB" | awk '{print $3, $2}' | sort > "$node/sim-symbols"
cat "$node"/ld.* | sed -n 's/.*gpu-kubelet-plugin \[0\] to .*libnvidia-ml.* normal symbol `\([^'"'"']*\).*/\1/p' | sort -u |
  join -a1 -e MISSING -o 0,2.2 - "$node/sim-symbols" |
  awk '{print $1, ($2 == "T" ? "implemented" : $2 == "W" ? "stub (NOT_SUPPORTED)" : "missing")}'
