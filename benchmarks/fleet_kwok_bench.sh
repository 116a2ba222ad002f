#!/usr/bin/env bash
# `gpunode fleet` against a live API server with 1000 GPU nodes: the test cluster
# (test/k8s/cluster.sh, Kubernetes 1.36) plus 1000 KWOK fake 8-GPU nodes in 4 pools (test/k8s/kwok.sh),
# then `gpunode fleet --kubeconfig ...` end to end (list the Nodes 500 a page + the ResourceSlices,
# analyse, render the table), 10 runs after one warm-up, wall time and peak RSS of each
# (os.wait4). Also measured: creating the 1000 nodes and their Ready, the control plane's and kwok's
# idle CPU and RSS with them, and where fleet's time goes (the API server's answer alone, fleet on the
# same NodeList saved to a file, -o json). Writes benchmarks/results/fleet-kwok-<date>.md (and .json).
#
#   benchmarks/fleet_kwok_bench.sh [BUILD_DIR]     (default build-rel: its bin/gpunode)
# Environment: FLEET_KWOK_RUNS (10), FLEET_KWOK_NODES (1000), FLEET_KWOK_IDLE_S (60, the idle window),
# GPUNODE_KWOK_LEASE_SECONDS (kwok.sh: 40). Needs root, Go, podman (the cluster's needs). It uses the
# test cluster alone: take the cluster lock where several users share the machine
# (flock -o /tmp/gpunode-cluster.lock benchmarks/fleet_kwok_bench.sh). Every number is a wall-clock
# time: the load average of the machine is written beside them.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build_arg=${1:-$src/build-rel}
gpunode=$(realpath -m "$build_arg")/bin/gpunode
[ -x "$gpunode" ] || { echo "fleet_kwok_bench: $gpunode missing (cmake --build $build_arg --target gpunode)"; exit 2; }
runs=${FLEET_KWOK_RUNS:-10}
nodes=${FLEET_KWOK_NODES:-1000}
idle_s=${FLEET_KWOK_IDLE_S:-60}
day=$(date -u +%F)
out=$src/benchmarks/results/fleet-kwok-$day
ns=kwok-bench
E2E_IMAGE=0
export GPUNODE_K8S_KCM_QPS=${GPUNODE_K8S_KCM_QPS:-200}
bench_cleanup() { bash "$src/test/k8s/kwok.sh" down >/dev/null 2>&1 || true; rm -rf "${work:-/nonexistent}"; cleanup; }
# shellcheck source=../test/k8s/e2e_lib.sh
. "$src/test/k8s/e2e_lib.sh"
trap bench_cleanup EXIT
work=$(mktemp -d /tmp/fleet-kwok.XXXXXX)

step "idle without the fake nodes: the cluster alone, $((idle_s / 2)) s"
bash "$src/test/k8s/kwok.sh" usage "$((idle_s / 2))" | tee "$work/usage0.txt"

step "$nodes KWOK nodes in 4 pools"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
bash "$src/test/k8s/kwok.sh" up "$nodes" 4 > "$work/kwok-up.txt" || fail "kwok.sh up"
cat "$work/kwok-up.txt"

step "idle: ${idle_s} s after 20 s of settling"
sleep 20
load_idle0=$(cut -d' ' -f1-3 /proc/loadavg)
bash "$src/test/k8s/kwok.sh" usage "$idle_s" | tee "$work/usage.txt"
load_idle1=$(cut -d' ' -f1-3 /proc/loadavg)

step "gpunode fleet --kubeconfig (1 warm-up + $runs runs, table and -o json interleaved)"
python3 - "$gpunode" "$KUBECONFIG" "$runs" "$work" <<'PY' || fail "fleet runs"
import json, os, subprocess, sys, time
gpunode, kc, runs, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

def run(args, out):
    t0 = time.perf_counter()
    with open(out, "wb") as f:
        p = subprocess.Popen([gpunode, "fleet"] + args, stdout=f, stderr=subprocess.PIPE)
        _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    return wall, ru.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), err

modes = (("table", ["--kubeconfig", kc]), ("json", ["--kubeconfig", kc, "-o", "json"]))
res = {name: {"wall_s": [], "rss_mib": [], "exit": set()} for name, _ in modes}
for name, args in modes:
    run(args, f"{work}/warmup.{name}")
for i in range(runs):  # interleaved, so that both see the same load
    for name, args in modes:
        w, r, rc, err = run(args, f"{work}/fleet.{name}")
        if rc not in (0, 1):
            sys.exit(f"gpunode fleet {' '.join(args)}: exit {rc}: {err.strip()[:400]}")
        res[name]["wall_s"].append(w); res[name]["rss_mib"].append(r); res[name]["exit"].add(rc)
for v in res.values():
    v["exit"] = sorted(v["exit"])
res["json"]["bytes"] = os.path.getsize(f"{work}/fleet.json")
res["table"]["bytes"] = os.path.getsize(f"{work}/fleet.table")
json.dump(res, open(f"{work}/runs.json", "w"))
PY
head -c 1500 "$work/fleet.table"; echo

step "where the time goes"
# the API server's answers alone (curl, nothing parsed): the Nodes as fleet asks for them (limit=500,
# from the watch cache) and the ResourceSlices
# (a User-Agent of its own: the API server pretty-prints JSON for curl's, 1.7x the bytes)
acurl() {
  curl -s -A gpunode-fleet-bench -H 'Accept: application/json' --cacert "$state/pki/ca.crt" --cert "$state/pki/admin.crt" \
    --key "$state/pki/admin.key" "$@"
}
acurl -o "$work/nodes.json" "https://127.0.0.1:6443/api/v1/nodes?limit=500&resourceVersion=0"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(len(d["items"]), d["metadata"].get("continue", ""))' \
  "$work/nodes.json" > "$work/page1.txt"
for i in 1 2 3 4 5 6; do
  acurl -o /dev/null -w '%{time_starttransfer} %{time_total} %{size_download}\n' "https://127.0.0.1:6443/api/v1/nodes?limit=500&resourceVersion=0"
done | tail -n 5 > "$work/curl-nodes.txt"
for i in 1 2 3 4 5 6; do
  acurl -o /dev/null -w '%{time_starttransfer} %{time_total} %{size_download}\n' "https://127.0.0.1:6443/apis/resource.k8s.io/v1/resourceslices?limit=500&resourceVersion=0"
done | tail -n 5 > "$work/curl-slices.txt"
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
n, cont = (open(f"{w}/page1.txt").read().split() + [""])[:2]
def rows(f):
    return [tuple(float(x) for x in l.split()) for l in open(f) if l.strip()]
json.dump({"items_first_page": int(n), "continue": bool(cont), "nodes": rows(f"{w}/curl-nodes.txt"),
           "slices": rows(f"{w}/curl-slices.txt")}, open(f"{w}/list.json", "w"))
PY
python3 - "$gpunode" "$work" <<'PY' || fail "fleet --from timing"
import json, os, subprocess, sys, time
gpunode, work = sys.argv[1], sys.argv[2]
out = {}
for name, args in (("from_table", ["--from", f"{work}/nodes.json"]), ("from_json", ["--from", f"{work}/nodes.json", "-o", "json"])):
    walls, rss = [], []
    for i in range(6):
        t0 = time.perf_counter()
        with open(f"{work}/{name}.out", "wb") as f:
            p = subprocess.Popen([gpunode, "fleet"] + args, stdout=f, stderr=subprocess.DEVNULL)
            _, st, ru = os.wait4(p.pid, 0)
        if i:
            walls.append(time.perf_counter() - t0); rss.append(ru.ru_maxrss / 1024)
    out[name] = {"wall_s": walls, "rss_mib": rss}
json.dump(out, open(f"{work}/from.json", "w"))
PY

step "results -> $out.md"
python3 - "$work" "$out" "$nodes" "$runs" "$gpunode" "$load_before" "$load_idle0" "$load_idle1" "$(cut -d' ' -f1-3 /proc/loadavg)" \
  "$(nproc)" "$(git -C "$src" rev-parse --short HEAD)" "${GPUNODE_KWOK_LEASE_SECONDS:-40}" "$GPUNODE_K8S_KCM_QPS" <<'PY'
import json, statistics, sys
work, out, nodes, runs, gpunode, lb, li0, li1, la, cores, commit, lease, qps = sys.argv[1:]
r = json.load(open(f"{work}/runs.json"))
lst = json.load(open(f"{work}/list.json"))
frm = json.load(open(f"{work}/from.json"))
up_line = open(f"{work}/kwok-up.txt").read().strip().splitlines()[-1]
up = json.loads(up_line.split("kwok: ", 1)[1])
usage = open(f"{work}/usage.txt").read().rstrip()
usage0 = open(f"{work}/usage0.txt").read().rstrip()

def q(v, p):
    v = sorted(v)
    if not v:
        return float("nan")
    i = min(len(v) - 1, max(0, int(round(p / 100 * (len(v) - 1)))))
    return v[i]

def ms(v):
    return f"{v * 1000:.0f} ms"

t, j = r["table"], r["json"]
med, p99 = statistics.median(t["wall_s"]), q(t["wall_s"], 99)
met = p99 < 1.0
summary = open(f"{work}/fleet.table").read().splitlines()
head = "\n".join(summary[:12])
lines = [
    f"# gpunode fleet against a live API server with {nodes} GPU nodes (KWOK), {out[-10:]}",
    "",
    "Target: `gpunode fleet` end to end against the live nodes in < 1 s.",
    "",
    f"- Cluster: the test cluster (test/k8s/cluster.sh: Kubernetes 1.36.3 from source, one real node, etcd 3.6) "
    f"with {nodes} fake 8-GPU nodes of KWOK 0.8.0 in 4 pools (test/k8s/kwok.sh; kwok renews each node's Lease "
    f"every {int(lease) // 4} s: lease {lease} s), controller manager at {qps} requests/s (GPUNODE_K8S_KCM_QPS).",
    f"- Machine: {cores} cores shared with other builds; load average (1/5/15 min) before the nodes {lb}, "
    f"idle window {li0} -> {li1}, after the runs {la}. Every number is wall-clock time: upper bounds.",
    f"- Binary: `{gpunode}` (Release), repository at {commit}. Command: `benchmarks/fleet_kwok_bench.sh`.",
    "",
    "## gpunode fleet --kubeconfig (the table)",
    "",
    f"{len(t['wall_s'])} runs after one warm-up; each a process: exec, TLS to the API server, "
    f"`GET /api/v1/nodes?limit=500&resourceVersion=0` (the API server answered all {lst['items_first_page']} Nodes in "
    f"{'the first page' if not lst['continue'] else 'pages of 500'}: {lst['nodes'][0][2] / 1e6:.1f} MB of JSON), "
    "the ResourceSlices list (none here), analysis, the table on stdout.",
    "",
    "| | median | p99 | max |",
    "|---|---|---|---|",
    f"| wall time, table | {ms(med)} | {ms(p99)} | {ms(max(t['wall_s']))} |",
    f"| peak RSS, table | {statistics.median(t['rss_mib']):.1f} MiB | {q(t['rss_mib'], 99):.1f} MiB | {max(t['rss_mib']):.1f} MiB |",
    f"| wall time, `-o json` ({len(j['wall_s'])} runs, interleaved with the table's; {j['bytes'] / 1e6:.2f} MB written) | {ms(statistics.median(j['wall_s']))} | {ms(q(j['wall_s'], 99))} | {ms(max(j['wall_s']))} |",
    f"| peak RSS, `-o json` | {statistics.median(j['rss_mib']):.1f} MiB | {q(j['rss_mib'], 99):.1f} MiB | {max(j['rss_mib']):.1f} MiB |",
    "",
    f"Result: **{'met' if met else 'missed'}** (p99 {ms(p99)} {'<' if met else '>='} 1 s; with {len(t['wall_s'])} runs the p99 "
    f"is the slowest run). Exit code(s) {t['exit']}.",
    "",
    "## Where the time goes",
    "",
    "| step | median | max |",
    "|---|---|---|",
    f"| the API server's answer to the Nodes list alone (curl, first byte; 5 runs) | {ms(statistics.median(x[0] for x in lst['nodes']))} | {ms(max(x[0] for x in lst['nodes']))} |",
    f"| the same, whole answer received ({lst['nodes'][0][2] / 1e6:.1f} MB) | {ms(statistics.median(x[1] for x in lst['nodes']))} | {ms(max(x[1] for x in lst['nodes']))} |",
    f"| the ResourceSlices list (curl, whole answer) | {ms(statistics.median(x[1] for x in lst['slices']))} | {ms(max(x[1] for x in lst['slices']))} |",
    f"| `gpunode fleet --from nodes.json` (the same {lst['items_first_page']} Nodes saved to a file: parse + analyse + table, no network; 5 runs) | {ms(statistics.median(frm['from_table']['wall_s']))} | {ms(max(frm['from_table']['wall_s']))} |",
    f"| `gpunode fleet --from nodes.json -o json` | {ms(statistics.median(frm['from_json']['wall_s']))} | {ms(max(frm['from_json']['wall_s']))} |",
    f"| peak RSS of `--from` | {statistics.median(frm['from_table']['rss_mib']):.1f} MiB | {max(frm['from_table']['rss_mib']):.1f} MiB |",
    "",
    "## The fleet",
    "",
    f"- {nodes} nodes created in {up['created_s']} s ({up['create']['parallel']} concurrent POSTs from one process, "
    f"one request a node), all Ready with their Lease {up['ready_s']} s after the first request.",
    "- Idle with them (`kwok.sh usage`: CPU in % of one core over the window, RSS at its end):",
    "",
    "```",
    usage,
    "```",
    "",
    "The cluster alone before (no fake node; half the window):",
    "",
    "```",
    usage0,
    "```",
    "",
    "The first lines of the table:",
    "",
    "```",
    head,
    "```",
]
open(out + ".md", "w").write("\n".join(lines) + "\n")
json.dump({"runs": r, "list": lst, "from": frm, "up": up, "usage": usage, "load": [lb, li0, li1, la]}, open(out + ".json", "w"), indent=1)
print("\n".join(lines))
PY
rm -rf "$work"
e2e_passed=1
