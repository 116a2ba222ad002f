#!/usr/bin/env bash
# gpunode's DRA driver and NVIDIA's gpu-kubelet-plugin (test/peers/versions.env), one run, both
# drivers, on the same simulated dgx-h200 node of the real test cluster (Kubernetes 1.36,
# containerd 2): test/peers/dra_test.sh with 20 pods and 100 claims, its numbers written as
#   benchmarks/results/dra-peers-<date>.json and .md
# What is measured, per driver (the suite's header says how):
#   - start -> its ResourceSlice of 8 devices published
#   - NodePrepareResources / NodeUnprepareResources over gRPC on the socket the kubelet uses,
#     100 claims allocated through the real API server, one after the other (p50, p99, max)
#   - claim created -> pod Running, 20 pods one after the other (p50, p99, max)
#   - GPU 3 lost -> its device tainted in the API server (from the slices' watch), and untainted
#     after it comes back
#   - RSS and CPU over 10 s idle
#
#   benchmarks/dra_bench.sh [BUILD_DIR [DRA_KUBELET]]   (default build-rel and its dra_kubelet)
# Environment: DRA_PEERS_PODS (20), DRA_PEERS_CLAIMS (100). Needs what the suite needs (root, Go,
# podman). Run it on a quiet machine: every number is a wall-clock time.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-$src/build-rel}")
day=$(date +%F)
out=$src/benchmarks/results/dra-peers-$day
export DRA_PEERS_PODS=${DRA_PEERS_PODS:-20} DRA_PEERS_CLAIMS=${DRA_PEERS_CLAIMS:-100}
export DRA_PEERS_RESULTS=$out.json
"$src/test/peers/dra_test.sh" "$build" ${2:+"$2"} | tee "$out.log"
python3 - "$out.json" "$out.md" "$(nproc)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
g, n = r["gpunode"], r["nvidia"]
def f(v, unit="ms"):
    return "—" if v is None else f"{v:.1f} {unit}" if isinstance(v, float) and v < 100 else f"{v:.0f} {unit}"
def ratio(a, b):
    return "—" if a in (None, 0) or b is None else f"{b / a:.2f}×"
rows = [
    ("ResourceSlice published after start", g["slice_ms"], n["slice_ms"]),
    (f"NodePrepareResources p50 (gRPC, {r['claims']} claims)", g["grpc"]["prepare_ms"]["p50"], n["grpc"]["prepare_ms"]["p50"]),
    ("NodePrepareResources p99", g["grpc"]["prepare_ms"]["p99"], n["grpc"]["prepare_ms"]["p99"]),
    ("NodeUnprepareResources p50", g["grpc"]["unprepare_ms"]["p50"], n["grpc"]["unprepare_ms"]["p50"]),
    ("NodeUnprepareResources p99", g["grpc"]["unprepare_ms"]["p99"], n["grpc"]["unprepare_ms"]["p99"]),
    (f"claim created -> pod Running p50 ({r['pods']} pods)", g["running"]["p50"], n["running"]["p50"]),
    ("claim created -> pod Running p99", g["running"]["p99"], n["running"]["p99"]),
    ("GPU 3 lost -> its device tainted", g["gpu_lost_taint_ms"], n["gpu_lost_taint_ms"]),
    ("GPU 3 back -> untainted", g["untaint_ms"], n["untaint_ms"]),
]
lines = [f"# DRA drivers side by side ({sys.argv[1].rsplit('/', 1)[-1][:-5]})", "",
         "`benchmarks/dra_bench.sh` (test/peers/dra_test.sh): gpunode's DRA driver and NVIDIA's "
         "gpu-kubelet-plugin v0.4.1, one after the other, on the same simulated dgx-h200 node of the "
         f"test cluster (Kubernetes 1.36.3, containerd 2.2, {sys.argv[3]} cores). NVIDIA / gpunode > 1: gpunode is faster or smaller.", "",
         "| | gpunode | NVIDIA | NVIDIA / gpunode |", "|---|---|---|---|"]
for name, a, b in rows:
    lines.append(f"| {name} | {f(a)} | {f(b)} | {ratio(a, b)} |")
lines.append(f"| idle RSS | {g['rss_mib']} MiB | {n['rss_mib']} MiB | {ratio(g['rss_mib'], n['rss_mib'])} |")
lines.append(f"| idle CPU (10 s) | {g['idle_cpu_percent']} % | {n['idle_cpu_percent']} % | |")
lines += ["", f"Tainted when GPU 3 was lost — gpunode: {' '.join(g['tainted']) or 'none'}; NVIDIA: {' '.join(n['tainted']) or 'none'}.",
          "Untainted: — means not within 30 s of the GPU coming back."]
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
