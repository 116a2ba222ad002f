#!/usr/bin/env python3
"""Times `gpunode cdi generate` and the OCI runtime shim's overhead (issue 5's speed targets).

Usage:
  cdi_bench.py [--runs N] [--json OUT] --gpunode PATH [--simulate PROFILE | --host]

--simulate PROFILE (default dgx-h200): writes the profile's host root once (`gpunode sim hostroot`)
and times `gpunode --host-root ROOT cdi generate` with the simulated NVML library, so the number is
the generator's (NVML queries, ld.so.cache parse, driver folder walk, render, atomic write), not
the making of the fixture. The whole `--simulate` command (which writes a host root on every run)
is timed too, for reference.
--host: times `gpunode cdi generate` on this machine's real driver (the H200 proof).

The shim: a bundle whose config.json asks for NVIDIA_VISIBLE_DEVICES=all is passed through
`gpunode oci-runtime --runtime-path /bin/true create --bundle B` (inject, write back, exec
/bin/true), against `/bin/true create ...` alone; the difference is what the shim adds to a
container start. Every run is a whole process, wall clock; medians with min/max.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def timed(cmd, env=None, cwd=None):
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    ms = (time.perf_counter() - start) * 1000.0
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    return ms


def summarize(values):
    return {"median_ms": round(statistics.median(values), 2), "min_ms": round(min(values), 2),
            "max_ms": round(max(values), 2), "runs": len(values)}


def series(runs, cmd, env=None, before=None):
    out = []
    for _ in range(runs):
        if before:
            before()
        out.append(timed(cmd, env))
    return summarize(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("--gpunode", required=True)
    ap.add_argument("--simulate", default="dgx-h200")
    ap.add_argument("--host", action="store_true", help="the real driver of this machine")
    args = ap.parse_args()
    gpunode = os.path.abspath(args.gpunode)
    # The spec's default home, /var/run/cdi, is a tmpfs: write there too (the atomic write fsyncs,
    # which on a disk costs more than everything else together).
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    work = tempfile.mkdtemp(prefix="gpunode-cdi-bench-", dir=shm)
    results = {"gpunode": gpunode, "runs": args.runs, "work_dir": work}
    try:
        spec = os.path.join(work, "cdi", "nvidia.yaml")
        env = dict(os.environ)
        if args.host:
            results["node"] = "host"
            gen = [gpunode, "cdi", "generate", "--output", spec]
        else:
            results["node"] = f"simulated {args.simulate}"
            root = os.path.join(work, "root")
            subprocess.run([gpunode, "sim", "hostroot", args.simulate, root], check=True,
                           stdout=subprocess.DEVNULL)
            profile = os.path.join(work, "profile.yaml")
            src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "profiles",
                               args.simulate + ".yaml")
            shutil.copy(src if os.path.exists(src) else args.simulate, profile)
            lib = os.path.join(os.path.dirname(gpunode), "libgpunode-simnvml.so")
            env.update(GPUNODE_NVML_LIBRARY=lib, GPUNODE_CUDA_LIBRARY=lib, GPUNODE_SIM_PROFILE=profile)
            gen = [gpunode, "--host-root", root, "cdi", "generate", "--output", spec,
                   "--hook-path", gpunode]
            results["simulate_whole_command"] = series(
                args.runs, [gpunode, "--simulate", args.simulate, "cdi", "generate", "--output",
                            os.path.join(work, "whole.yaml")])
        timed(gen, env)  # warm the page cache
        results["cdi_generate"] = series(args.runs, gen, env)
        with open(spec) as f:
            text = f.read()
        results["spec_bytes"] = len(text)
        results["spec_devices"] = text.count("  - name: ")

        # The shim: inject `all` from that spec, then exec /bin/true.
        bundle = os.path.join(work, "bundle")
        os.makedirs(os.path.join(bundle, "rootfs"))
        config = {"ociVersion": "1.0.2",
                  "process": {"args": ["sh"], "env": ["PATH=/bin", "NVIDIA_VISIBLE_DEVICES=all"]},
                  "root": {"path": "rootfs"}}
        text_config = json.dumps(config)

        def reset():
            with open(os.path.join(bundle, "config.json"), "w") as f:
                f.write(text_config)

        true = shutil.which("true")
        shim = [gpunode, "oci-runtime", "--runtime-path", true, "--spec-dir", os.path.dirname(spec),
                "--no-generate", "create", "--bundle", bundle, "bench"]
        shim_env = dict(os.environ)
        if not args.host:
            # The simulated spec names /dev/nvidia* nodes this machine does not have, and the shim
            # stats each host node: back every node by the real /dev/null (the same work).
            with open(spec) as f:
                s = f.read()
            s = re.sub(r'(\s+)- path: "(/dev/[^"]+)"', r'\1- path: "\2"\1  hostPath: "/dev/null"', s)
            with open(spec, "w") as f:
                f.write(s)
        reset()
        timed(shim, shim_env)
        results["shim_create_all"] = series(args.runs, shim, shim_env, before=reset)
        results["runtime_alone"] = series(args.runs, [true, "create", "--bundle", bundle, "bench"], shim_env,
                                          before=reset)
        results["shim_overhead_ms"] = round(results["shim_create_all"]["median_ms"] -
                                            results["runtime_alone"]["median_ms"], 2)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
