#!/usr/bin/env bash
# Fake GPU nodes for the test cluster (test/k8s/cluster.sh), played by KWOK (sigs.k8s.io/kwok, pinned
# in test/k8s/versions.env, built by `test/k8s/build.sh kwok`): the kwok controller runs as a host
# process against the running cluster and keeps the fake nodes Ready (leases) and the pods bound to
# them Running/Ready, with kwok's default stages (kustomize/stage/fast: node-initialize,
# node-heartbeat-with-lease, pod-ready, pod-complete, pod-delete).
#
#   test/k8s/kwok.sh up N [POOLS]   start kwok (when not running), create N fake nodes round-robin in
#                                   POOLS pools (default 4; at most 64), wait until they are all Ready
#                                   and each has its Lease renewed by kwok. Prints one line
#                                   `kwok: {...}` of JSON timings on stdout.
#   test/k8s/kwok.sh down           delete the fake nodes (one deletecollection request, when the API
#                                   server answers) and stop kwok. Idempotent. (`cluster.sh down` stops
#                                   kwok too; the nodes go with etcd's data.)
#   test/k8s/kwok.sh start | stop   the kwok controller alone
#   test/k8s/kwok.sh usage [SECS]   CPU (% of one core, averaged over SECS, default 30) and RSS of
#                                   kube-apiserver, etcd, kwok, kube-controller-manager, kube-scheduler
#   test/k8s/kwok.sh status         kwok's pid and the number of fake nodes, Ready ones
#
# Each fake node (test/k8s/kwok_kube.py builds it; POSTed by 8 threads on keep-alive connections of
# one process, one request a node) looks like a gpunode/GFD-labelled 8-GPU node: labels
# nvidia.com/gpu.present=true, gpu.product (per pool: h100 NVIDIA-H100-80GB-HBM3, a100
# NVIDIA-A100-SXM4-80GB, l40s NVIDIA-L40S, h200 NVIDIA-H200, then the same products again as pools
# h100-1, ...), gpu.count=8, gpu.memory, gpu.family, gpu.compute.major/minor,
# cuda.driver-version.full (and .major/.minor/.revision) = $KWOK_DRIVER_VERSION,
# gpunode.io/agent.version, gpunode-test/pool=<pool>, gpunode-test/kwok=true; annotation
# kwok.x-k8s.io/node=fake (what kwok manages: --manage-nodes-with-annotation-selector); taint
# kwok.x-k8s.io/node=fake:NoSchedule (only pods tolerating it land there: not the gpunode chart's
# DaemonSet); capacity/allocatable nvidia.com/gpu 8; condition GpuStackReady True "all checks passed
# (gpunode doctor) on driver <version>". Names: kwok-<pool>-<nnnn>. Each is created Ready (the
# status kwok's node-initialize stage would give it), so the node lifecycle controller never taints
# it not-ready, and with spec.podCIDR inside the cluster's only /24 (kwok_kube.py says why).
#
# Start the cluster with GPUNODE_K8S_KCM_QPS=200 for DaemonSets on the fake nodes (a driver
# DaemonSet): at the controller manager's default 20 requests/s one of 250 pods took ~100 s, at 200
# ~20 s (`up` warns). The stand-in of gpunode's agent for the fake nodes is test/k8s/kwok_agent.py,
# the maxUnavailable watcher test/k8s/kwok_watch.py; test/k8s/kwok_smoke.sh runs them all.
# kwok's state: pid $S/run/kwok.pid, log $S/logs/kwok.log, KWOK_WORKDIR $S/kwok (so ~/.kwok is
# neither read nor written), $S = $GPUNODE_K8S_STATE (default /tmp/gpunode-k8s).
#
# environment:
#   KWOK_DRIVER_VERSION         the fake nodes' initial driver version (default 570.195.03)
#   GPUNODE_KWOK_LEASE_SECONDS  node lease duration (default 40, as a kubelet: renewed every 10 s, so
#                               N/10 lease updates a second; renewed at a quarter of it, which must
#                               stay within the controller manager's 50 s grace: 10..160). Idle
#                               with 1000 nodes, API server/etcd/kwok CPU: 40 s 25-32/7-10/8-10 %
#                               of a core, 160 s 11/4/3 % (benchmarks/results/fleet-kwok-*.md)
#   GPUNODE_KWOK_PARALLEL       concurrent node creations (default 8)
#   GPUNODE_KWOK_READY_TIMEOUT  seconds to wait for the nodes to be Ready (default 300)
#   GPUNODE_KWOK_V              kwok's log level (default WARN; INFO logs every lease renewal: 300
#                               lines a second with 1000 nodes)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
S=$(realpath -m "${GPUNODE_K8S_STATE:-/tmp/gpunode-k8s}")
export GPUNODE_K8S_STATE=$S
KC=$S/admin.kubeconfig
DRIVER=${KWOK_DRIVER_VERSION:-570.195.03}
LEASE=${GPUNODE_KWOK_LEASE_SECONDS:-40}
PARALLEL=${GPUNODE_KWOK_PARALLEL:-8}
READY_TIMEOUT=${GPUNODE_KWOK_READY_TIMEOUT:-300}
KWOK_V=${GPUNODE_KWOK_V:-WARN}
log() { echo "kwok: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

kwok_pid() {
  local pid exe
  [ -s "$S/run/kwok.pid" ] || return 1
  pid=$(cat "$S/run/kwok.pid")
  [ -d "/proc/$pid" ] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [ "$(basename "${exe% (deleted)}")" = kwok ] || return 1
  echo "$pid"
}

# alive PID: exists and is not a zombie
alive() {
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

api_up() {
  [ -f "$KC" ] && curl -sf --max-time 2 --cacert "$S/pki/ca.crt" --cert "$S/pki/admin.crt" --key "$S/pki/admin.key" \
    https://127.0.0.1:6443/readyz >/dev/null 2>&1
}

do_start() {
  [[ "$LEASE" =~ ^[0-9]+$ ]] && ((LEASE >= 10 && LEASE <= 160)) || die "GPUNODE_KWOK_LEASE_SECONDS=$LEASE: expected 10..160"
  if pid=$(kwok_pid); then log "kwok already runs (pid $pid)"; return 0; fi
  api_up || die "the test cluster is not up (no answer from https://127.0.0.1:6443/readyz; test/k8s/cluster.sh up)"
  local out bin stages
  out=$(nice -n 10 bash "$here/build.sh" kwok) || die "test/k8s/build.sh kwok failed"
  bin=$(printf '%s\n' "$out" | tail -n 1)
  stages=$(dirname "$bin")/stages.yaml
  [ -x "$bin/kwok" ] && [ -s "$stages" ] || die "$bin/kwok or $stages missing after build.sh kwok"
  mkdir -p "$S/run" "$S/logs" "$S/kwok"
  echo "=== $(date -u +%FT%TZ) kwok" >> "$S/logs/kwok.log"
  # --cidr only serves pods on nodes without a podCIDR (ours have one); no --server-address: no port
  KWOK_WORKDIR=$S/kwok setsid "$bin/kwok" --kubeconfig "$KC" --config "$stages" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds "$LEASE" --node-ip 10.244.0.1 --cidr 10.244.0.240/28 --v "$KWOK_V" \
    >> "$S/logs/kwok.log" 2>&1 < /dev/null &
  echo $! > "$S/run/kwok.pid"
  local i
  # a bad flag or config ends it at once; the nodes need it only once they exist (wait-ready waits)
  # (the PID is setsid's until it execs kwok: alive is enough here, kwok_pid checks the binary after)
  local pid=$!
  for ((i = 0; i < 10; i++)); do
    alive "$pid" || { tail -n 20 "$S/logs/kwok.log" >&2; die "kwok exited while starting (log $S/logs/kwok.log)"; }
    sleep 0.1
  done
  kwok_pid >/dev/null || die "pid $pid is not kwok ($(readlink "/proc/$pid/exe" 2>&1))"
  log "kwok $(basename "$(dirname "$bin")") started (pid $(cat "$S/run/kwok.pid"), log $S/logs/kwok.log)"
}

do_stop() {
  local pid i
  if pid=$(kwok_pid); then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do kwok_pid >/dev/null || break; sleep 0.1; done
    if kwok_pid >/dev/null; then log "kwok (pid $pid) ignored SIGTERM for 5 s: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; fi
    log "stopped kwok (pid $pid)"
  fi
  rm -f "$S/run/kwok.pid"
}

do_up() {
  local n=${1:-} pools=${2:-4}
  [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 100000)) || die "usage: kwok.sh up N [POOLS] (N 1..100000)"
  [[ "$pools" =~ ^[0-9]+$ ]] && ((pools >= 1 && pools <= 64)) || die "POOLS: expected 1..64, got $pools"
  do_start
  local kcm
  kcm=$(tr '\0' ' ' < "/proc/$(cat "$S/run/kube-controller-manager.pid" 2>/dev/null)/cmdline" 2>/dev/null || true)
  [[ "$kcm" == *--kube-api-qps=* ]] || log "WARNING: the controller manager runs at its default 20 requests/s: DaemonSet pods on the fake nodes come up at ~2-3 a second (start the cluster with GPUNODE_K8S_KCM_QPS=200)"
  local agent t0 create ready
  agent=$(sed -n 's/^project(gpunode VERSION \([0-9.]*\).*/\1/p' "$here/../../CMakeLists.txt")
  t0=$(now)
  create=$(python3 "$here/kwok_kube.py" --kubeconfig "$KC" create-nodes --count "$n" --pools "$pools" \
    --driver-version "$DRIVER" --agent-version "$agent" --parallel "$PARALLEL") || die "creating the fake nodes failed: $create"
  local created_s
  created_s=$(since "$t0")
  ready=$(python3 "$here/kwok_kube.py" --kubeconfig "$KC" wait-ready --count "$n" --timeout "$READY_TIMEOUT") ||
    { tail -n 20 "$S/logs/kwok.log" >&2; die "the fake nodes are not all Ready: $ready"; }
  log "$n fake nodes in $pools pools: created in $created_s s, all Ready $(since "$t0") s after the first request"
  echo "kwok: {\"nodes\": $n, \"pools\": $pools, \"created_s\": $created_s, \"ready_s\": $(since "$t0"), \"create\": $create, \"wait\": $ready}"
}

do_down() {
  if api_up; then
    python3 "$here/kwok_kube.py" --kubeconfig "$KC" delete-nodes >/dev/null || log "WARNING: deleting the fake nodes failed"
  fi
  do_stop
}

# usage [SECS]: CPU % (of one core) over SECS and RSS of the control plane and kwok
do_usage() {
  local secs=${1:-30} c pid hz
  hz=$(getconf CLK_TCK)
  declare -A t0 pids
  for c in kube-apiserver etcd kwok kube-controller-manager kube-scheduler; do
    if [ "$c" = kwok ]; then pid=$(kwok_pid) || continue; else
      [ -s "$S/run/$c.pid" ] || continue; pid=$(cat "$S/run/$c.pid"); [ -d "/proc/$pid" ] || continue; fi
    pids[$c]=$pid
    t0[$c]=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
  done
  sleep "$secs"
  for c in kube-apiserver etcd kwok kube-controller-manager kube-scheduler; do
    [ -n "${pids[$c]:-}" ] || continue
    pid=${pids[$c]}
    awk -v c="$c" -v a="${t0[$c]}" -v s="$secs" -v hz="$hz" -v rss="$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")" \
      '{ printf "%-24s cpu %5.1f %%  rss %4d MiB\n", c, ($14 + $15 - a) / hz / s * 100, rss / 1024 }' "/proc/$pid/stat"
  done
}

do_status() {
  local pid
  if pid=$(kwok_pid); then echo "kwok running pid $pid"; else echo "kwok stopped"; fi
  api_up || { echo "API server: not answering"; return 3; }
  python3 - "$KC" "$here" <<'PY'
import sys
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[2])
import kwok_kube as k
items, _ = k.Client(sys.argv[1]).list("/api/v1/nodes", {"labelSelector": k.FAKE_LABEL + "=true"})
ready = sum(1 for n in items if (k.condition(n, "Ready") or {}).get("status") == "True")
print(f"fake nodes: {len(items)}, Ready: {ready}")
PY
}

case "${1:-}" in
  up) shift; do_up "$@" ;;
  down) do_down ;;
  start) do_start ;;
  stop) do_stop ;;
  usage) shift; do_usage "$@" ;;
  status) do_status ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
