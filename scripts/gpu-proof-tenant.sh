#!/usr/bin/env bash
# Tenant safety on the real GPU machine (through the device tool): a container gets exactly the GPU
# it was allocated. Real runc through `gpunode oci-runtime`, the spec from `gpunode cdi generate` on
# the real host; each container runs `nvidia-smi -L` and lists its /dev/nvidia* nodes:
#   unprivileged NVIDIA_VISIBLE_DEVICES=all (an image's ENV, as uid 1000 too) -> no GPU
#   the device plugin's volume-mount request for GPU 0 -> GPU 0
#   the kubelet's CDI annotation -> GPU 0; beside the container's own =all -> still only GPU 0
#   privileged (CAP_SYS_ADMIN) =all, Docker's --gpus hook =0, the setting on -> the GPU
#   another vendor's device through the variable -> refused before runc
# and the privilege split of the chart's pod: the agent on the real GPU publishing into a folder and
# opening no TCP port; the front (`gpunode exporter --from-dir`) as uid 65534 with no capabilities
# serving the real GPU's metrics, going 503 when the agent dies.
#
#   bash scripts/gpu-proof-tenant.sh    on the GPU machine, as root, from the repo root, with
#                                       .gpubundle/ from `scripts/bundle-gpu.sh --with-runc`
#   GPUNODE_PROOF_SIMULATE=1 bash scripts/gpu-proof-tenant.sh    here: the agent/front part only,
#                                       on the simulated h200-real (the containers need the GPU)
# Output: $OUT/tenant-proof.tgz and $OUT/tenant-transcript.txt (default /tmp/gpunode-out).
PROOF_NAME=tenant
. "$(dirname "$0")/gpu-proof-lib.sh"

containers() {
export PATH=$PWD/.gpubundle/bin:$PATH LD_LIBRARY_PATH=$PWD/.gpubundle/lib

# The spec's hooks are run by runc with the spec's env only: a wrapper that finds the bundle's
# libraries (on a real install gpunode is a plain binary on the host).
cat > "$W/gpunode-hook" <<EOF
#!/bin/sh
LD_LIBRARY_PATH=$PWD/.gpubundle/lib exec $PWD/.gpubundle/bin/gpunode "\$@"
EOF
chmod +x "$W/gpunode-hook"
run gpunode cdi generate --output "$W/cdi/nvidia.yaml" --hook-path "$W/gpunode-hook" > "$L/cdi-generate.txt" 2>&1 ||
  fail "cdi generate: $(tail -3 "$L/cdi-generate.txt")"
nvidia-smi -L > "$L/host-nvidia-smi-L.txt" 2>&1
gpus_on_host=$(grep -c '^GPU ' "$L/host-nvidia-smi-L.txt")
say "host: $gpus_on_host GPU(s): $(head -1 "$L/host-nvidia-smi-L.txt")"

CMD='export PATH=$PATH:/usr/local/nvidia/bin; echo "gpus=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU ")"; echo "nodes=$(ls /dev | grep -cE "^nvidia[0-9]+$")"; env | grep ^NVIDIA_VISIBLE'
n=0
# case NAME WANT_GPUS [SHIM-ENV] -- BUNDLE-OPTIONS...   (WANT_GPUS "refused": the shim must refuse)
case_() {
  local name=$1 want=$2 shim_env=()
  shift 2
  while [ "${1:-}" != -- ]; do shim_env+=("$1"); shift; done
  shift
  n=$((n + 1))
  oci_bundle "$W/b$n" "$CMD" "$@" || { fail "$name: bundle"; return; }
  local out rc=0
  out=$(env "${shim_env[@]}" GPUNODE_OCI_LOG="$L/shim.log" .gpubundle/run gpunode oci-runtime --runtime-path runc \
        --spec-dir "$W/cdi" run --bundle "$W/b$n" "gpn-tenant-$n" 2>&1) || rc=$?
  run runc delete -f "gpn-tenant-$n" >/dev/null 2>&1
  printf '== %s (%s)\n%s\nexit %s\n' "$name" "$*" "$out" "$rc" >> "$L/containers.txt"
  if [ "$want" = refused ]; then
    [ "$rc" != 0 ] && pass "$name: refused ($(printf '%s' "$out" | grep -m1 error | cut -c1-150))" ||
      fail "$name: the shim ran it: $out"
    return
  fi
  local gpus nodes
  gpus=$(printf '%s\n' "$out" | sed -n 's/^gpus=//p')
  nodes=$(printf '%s\n' "$out" | sed -n 's/^nodes=//p')
  if [ "$rc" = 0 ] && [ "$gpus" = "$want" ] && [ "$nodes" = "$want" ]; then
    pass "$name: nvidia-smi lists $gpus GPU(s), $nodes /dev/nvidia<N> node(s)"
  else
    fail "$name: want $want GPU(s), got gpus=$gpus nodes=$nodes exit $rc: $(printf '%s' "$out" | tail -3)"
  fi
}
say "containers through gpunode oci-runtime + runc"
case_ "unprivileged, its own NVIDIA_VISIBLE_DEVICES=all" 0 -- --env NVIDIA_VISIBLE_DEVICES=all
case_ "an image's ENV NVIDIA_VISIBLE_DEVICES=all as uid 1000" 0 -- --env NVIDIA_VISIBLE_DEVICES=all --uid 1000
case_ "the device plugin's volume-mount request for GPU 0" 1 -- \
  --env NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices --mount 0
case_ "the kubelet's CDI annotation nvidia.com/gpu=0" 1 -- --annotation cdi.k8s.io/gpunode-device-plugin_x=nvidia.com/gpu=0
case_ "CDI annotation for GPU 0 beside the container's own =all" 1 -- \
  --annotation cdi.k8s.io/gpunode-device-plugin_x=nvidia.com/gpu=0 --env NVIDIA_VISIBLE_DEVICES=all
case_ "privileged (CAP_SYS_ADMIN), NVIDIA_VISIBLE_DEVICES=all" "$gpus_on_host" -- --privileged --env NVIDIA_VISIBLE_DEVICES=all
case_ "Docker's --gpus hook, NVIDIA_VISIBLE_DEVICES=0" 1 -- --docker-hook --env NVIDIA_VISIBLE_DEVICES=0
case_ "accept-envvar-when-unprivileged set, =0" 1 GPUNODE_ACCEPT_ENVVAR_WHEN_UNPRIVILEGED=true -- \
  --env NVIDIA_VISIBLE_DEVICES=0
case_ "volume mounts switched off, volume-mount request" 0 GPUNODE_ACCEPT_VOLUME_MOUNTS=false -- \
  --env NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices --mount 0
case_ "another vendor's device through the variable (privileged)" refused -- --privileged \
  --env NVIDIA_VISIBLE_DEVICES=example.com/nic=nic0
[ -f "$L/shim.log" ] && tail -20 "$L/shim.log" > "$L/shim-log-tail.txt"
}
if [ "$SIM" = 1 ]; then
  say "containers: skipped (simulated; test/e2e/oci_shim_test.sh is their simulated form)"
else
  containers
fi

# ------------------------------------------------------------------ the agent and its front
say "privilege split: the agent publishes, the unprivileged front serves"
P=$W/publish
chmod 755 "$W"   # (mktemp made it 0700: the front runs as uid 65534)
mkdir -p "$P"
cat > "$W/agent.yaml" <<YAML
apiVersion: gpunode/v1
kind: AgentConfig
kubernetes: {enabled: false}
healthListen: ""
publishDir: $P
plugin: {enabled: false}
labels: {enabled: false}
validator: {enabled: true, cuda: true, gate: false}
exporter: {enabled: true, listen: "", collectInterval: 1000}
YAML
proof_bg gpunode "${G[@]}" agent --config "$W/agent.yaml" > "$L/agent.log" 2>&1
agent_pid=${PIDS[-1]}
# As the chart runs it: uid 65534, every capability dropped (setpriv from util-linux).
front_cmd=(gpunode exporter --from-dir "$P" --listen 127.0.0.1:19400 --health-listen 127.0.0.1:19401)
if command -v setpriv >/dev/null; then
  proof_bg setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs \
    "$(run_path gpunode)" "${front_cmd[@]:1}"
else
  proof_bg "${front_cmd[@]}"
fi > "$L/front.log" 2>&1
front_pid=${PIDS[-1]}
for _ in $(seq 100); do
  curl -sf http://127.0.0.1:19401/readyz > "$L/front-readyz.txt" 2>&1 && break
  sleep 0.2
done
curl -s http://127.0.0.1:19401/readyz | tail -1 | add
curl -s http://127.0.0.1:19400/metrics > "$L/front-metrics.txt"
n=$(grep -c '^DCGM_FI_DEV_GPU_TEMP{' "$L/front-metrics.txt")
[ "$n" -ge 1 ] && pass "front serves the agent's page: $n GPU(s), $(grep -c '^DCGM_' "$L/front-metrics.txt") DCGM series, $(grep -m1 '^DCGM_FI_DEV_GPU_TEMP{' "$L/front-metrics.txt" | cut -c1-120)" ||
  fail "the front serves no DCGM_FI_DEV_GPU_TEMP: $(head -5 "$L/front-metrics.txt")"
ss -ltnp > "$L/listeners.txt" 2>&1
grep -q "pid=$agent_pid," "$L/listeners.txt" && fail "the agent listens on TCP: $(grep "pid=$agent_pid," "$L/listeners.txt")" ||
  pass "the agent (pid $agent_pid) opens no TCP port"
fp=$(pgrep -f 'exporter --from-dir' | head -1)
[ -n "$fp" ] && grep -E '^(Uid|CapEff|CapBnd):' "/proc/$fp/status" | tr -s '\t' ' ' | add
# Scrape cost from the front vs. what the agent's live page would cost: 200 scrapes each way.
python3 - > "$L/scrape-times.txt" <<'PY'
import statistics, time, urllib.request
t = []
for _ in range(200):
    s = time.perf_counter(); urllib.request.urlopen("http://127.0.0.1:19400/metrics").read(); t.append((time.perf_counter() - s) * 1000)
t.sort()
print(f"front /metrics, 200 scrapes: p50 {statistics.median(t):.3f} ms, p99 {t[197]:.3f} ms")
PY
add < "$L/scrape-times.txt"
kill -KILL "$agent_pid"
t0=$(date +%s.%N)
until [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:19401/readyz)" = 503 ]; do
  python3 -c "import sys; sys.exit(0 if $(date +%s.%N) - $t0 < 15 else 1)" || break
  sleep 0.1
done
dt=$(python3 -c "print(round($(date +%s.%N) - $t0, 2))")
[ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:19401/readyz)" = 503 ] &&
  pass "agent killed: the front answers 503 after $dt s ($(curl -s http://127.0.0.1:19401/readyz | head -1 | cut -c1-100))" ||
  fail "the front still answers ready $dt s after the agent was killed"
[ $FAILED = 0 ] && say "PASS" || say "FAILED"
exit $FAILED
