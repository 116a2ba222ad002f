#!/usr/bin/env python3
"""Whole-process time of `gpunode compat check` answering from the data set (issue 32: < 10 ms).

  compat_bench.py --gpunode BIN [--baseline BIN] [--runs N] [--json OUT]

For each case (an image, a driver, a GPU) runs `BIN compat check --image I --driver D --gpu G`
N times (after one warm-up run) and reports median and p99 wall time, with the built-in data set
(the generated tables) and with `--data data/compat.yaml` (the same facts through the YAML loader,
the path every run took before). --baseline times another build's binary on the same cases (e.g.
one from before the tables). Timing helpers: peers_bench.py's summary()/pct(). The verdict's exit
status (0 compatible, 1 incompatible) is accepted; anything else fails the run.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from peers_bench import summary  # noqa: E402

ROOT = os.path.dirname(HERE)
CASES = [
    ("nvcr.io/nvidia/pytorch:24.05-py3", "535.104.05", "H100"),
    ("nvidia/cuda:12.8.1-base-ubuntu24.04", "570.86.10", "A100"),
    ("vllm/vllm-openai:v0.8.5", "550.54.15", "T4"),
]


def timed(cmd, runs):
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # warm
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        dt = (time.perf_counter() - t) * 1000
        if p.returncode not in (0, 1) or not p.stdout:
            raise SystemExit(f"compat_bench: {' '.join(cmd)} exited {p.returncode}: {p.stderr[-2000:]}")
        out.append(dt)
    return summary(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpunode", required=True)
    ap.add_argument("--baseline", help="another gpunode binary timed on the same cases")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--json")
    a = ap.parse_args()
    yaml = os.path.join(ROOT, "data", "compat.yaml")
    doc = {"machine": os.uname().nodename, "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
           "runs": a.runs, "cases": []}
    for image, driver, gpu in CASES:
        base = ["compat", "check", "--image", image, "--driver", driver, "--gpu", gpu]
        row = {"image": image, "driver": driver, "gpu": gpu,
               "builtin": timed([a.gpunode] + base, a.runs),
               "yaml_data": timed([a.gpunode] + base + ["--data", yaml], a.runs)}
        if a.baseline:
            row["baseline"] = timed([a.baseline] + base, a.runs)
        doc["cases"].append(row)
        line = f"{image} / {driver} / {gpu}: built-in median {row['builtin']['median_ms']:.2f} ms p99 " \
               f"{row['builtin']['p99_ms']:.2f} ms; --data YAML median {row['yaml_data']['median_ms']:.2f} ms"
        if a.baseline:
            line += f"; baseline median {row['baseline']['median_ms']:.2f} ms p99 {row['baseline']['p99_ms']:.2f} ms"
        print(line, file=sys.stderr)
    text = json.dumps(doc, indent=1)
    print(text)
    if a.json:
        open(a.json, "w").write(text + "\n")


if __name__ == "__main__":
    main()
