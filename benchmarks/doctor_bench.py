#!/usr/bin/env python3
"""Times `gpunode doctor` and, for comparison, `nvidia-smi -q` on the same node.

Usage: doctor_bench.py [--runs N] [--json OUT] -- GPUNODE_COMMAND...
  e.g. benchmarks/doctor_bench.py --runs 20 -- build/bin/gpunode doctor
       benchmarks/doctor_bench.py --runs 20 -- build/bin/gpunode --simulate dgx-h200 doctor

Each run executes the whole program (process start to exit, wall clock) with `-o json`
appended, and reads the split that doctor reports itself (timings.*). Prints medians and
min/max; with --json writes them as a document. nvidia-smi -q is timed when it is on PATH.
"""
import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time


def run_timed(cmd):
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return (time.perf_counter() - start) * 1000.0, proc


def summarize(values):
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2), "runs": len(values)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = [c for c in args.command if c != "--"]
    if not cmd:
        ap.error("give the gpunode doctor command after --")
    cmd = cmd + ["-o", "json"]

    wall, fields = [], {}
    for _ in range(args.runs):
        ms, proc = run_timed(cmd)
        if proc.returncode not in (0, 1, 2):
            sys.exit(f"doctor failed with exit {proc.returncode}: {proc.stderr.strip()}")
        doc = json.loads(proc.stdout)
        wall.append(ms)
        for key, value in doc["timings"].items():
            fields.setdefault(key, []).append(value)

    results = {"command": " ".join(cmd), "doctor_wall_ms": summarize(wall),
               "doctor_split_ms": {k: summarize(v) for k, v in fields.items()}}
    smi = shutil.which("nvidia-smi")
    if smi:
        smi_ms = []
        for _ in range(args.runs):
            ms, proc = run_timed([smi, "-q"])
            if proc.returncode == 0:
                smi_ms.append(ms)
        if smi_ms:
            results["nvidia_smi_q_wall_ms"] = summarize(smi_ms)

    print(f"{'measure':34s} {'median':>9s} {'min':>9s} {'max':>9s}  (ms, {args.runs} runs)")
    def row(name, s):
        print(f"{name:34s} {s['median']:9.2f} {s['min']:9.2f} {s['max']:9.2f}")
    row("gpunode doctor, whole process", results["doctor_wall_ms"])
    for key in ("totalMs", "nonCudaMs", "nvmlLoadMs", "nvmlInitMs", "nvmlQueryMs", "filesMs", "cudaInitMs"):
        if key in results["doctor_split_ms"]:
            row(f"  doctor {key}", results["doctor_split_ms"][key])
    if "nvidia_smi_q_wall_ms" in results:
        row("nvidia-smi -q, whole process", results["nvidia_smi_q_wall_ms"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
