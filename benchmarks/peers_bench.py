#!/usr/bin/env python3
"""NVIDIA's node components and gpunode side by side, in one run, on the same simulated node.

  peers_bench.py --build DIR --plugin-bench PATH [--profiles P...] [--runs N] [--idle-s S]
                 [--oneshot-runs N] [--json OUT] [--markdown OUT]

DIR is a Release build (bin/gpunode, bin/libgpunode-simnvml.so); PATH is plugin_bench (a
tests-enabled build's bin/). NVIDIA's binaries come from test/peers/build.sh (pinned releases,
built from their Go modules and cached). For every profile (default: dgx-h200 and the 16-GPU
benchmarks/profiles/sim-h200-16.yaml), both tools run on the same host root and the same simulated
NVML, one after the other:

  device plugin   plugin_bench (real gRPC from a kubelet stand-in) inside test/peers/plugin_ns.sh:
                  start -> registered, Allocate and GetPreferredAllocation round trips (median,
                  p99), XID 79 -> Unhealthy, RSS and CPU over --idle-s seconds idle; and the
                  simulated driver's own XID delivery to a bare NVML client (the floor under
                  both plugins' XID numbers)
  labels          gpu-feature-discovery --oneshot vs gpunode labels --oneshot (whole process,
                  wall clock, the labels file written)
  CDI             nvidia-ctk cdi generate vs gpunode cdi generate (whole process, wall clock,
                  the spec written; timed inside the namespace of test/peers/plugin_ns.sh, which
                  shows the node's /proc/driver as nvidia-ctk needs)

Prints a JSON document (and writes it with --json); --markdown writes the table of ratios
(NVIDIA / gpunode: > 1 means gpunode is faster or smaller). Needs root (the plugin namespace).
"""
import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]


def summary(values):
    return {"median_ms": statistics.median(values), "p99_ms": pct(values, 0.99), "min_ms": min(values),
            "max_ms": max(values), "runs": len(values)}


def timed_runs(cmd, env, runs):
    out = []
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # warm
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        dt = (time.perf_counter() - t) * 1000
        if p.returncode != 0:
            raise SystemExit(f"peers_bench: {' '.join(cmd)} exited {p.returncode}: {p.stderr[-2000:]}")
        out.append(dt)
    return summary(out)


def timed_in(ns, cmd, env, runs):
    """timed_runs inside the wrapper `ns` (its set-up is not timed)."""
    p = subprocess.run(ns + [sys.executable, os.path.abspath(__file__), "--inner", str(runs), "--"] + cmd, env=env,
                       stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"peers_bench: timing {' '.join(cmd)} failed")
    return json.loads(p.stdout)


class EventData(ctypes.Structure):
    _fields_ = [("device", ctypes.c_void_p), ("eventType", ctypes.c_ulonglong), ("eventData", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


def add_xid(text, gpu):
    """The profile text with one more XID 79 on the GPU of minor `gpu` (as plugin_bench edits it)."""
    key = "minor: %d," % gpu
    at = text.index(key)
    eol = text.index("\n", at)
    ev = "{type: xid, xid: 79}"
    lst = text.find("events: [", at)
    if lst != -1 and lst < eol:
        return text[:lst + 9] + ev + ", " + text[lst + 9:]
    return text[:at + len(key)] + " events: [" + ev + "]," + text[at + len(key):]


def xid_floor(sim_lib, profile, runs):
    """The simulated driver's own XID delivery: profile edited -> nvmlEventSetWait_v2 returns it, for
    a bare NVML client (no plugin). What the plugins' XID -> Unhealthy includes before their own part."""
    os.environ["GPUNODE_SIM_PROFILE"] = profile
    os.environ["GPUNODE_SIM_RELOAD_MS"] = "0"
    lib = ctypes.CDLL(sim_lib)
    assert lib.nvmlInit_v2() == 0
    count = ctypes.c_uint()
    lib.nvmlDeviceGetCount_v2(ctypes.byref(count))
    es = ctypes.c_void_p()
    lib.nvmlEventSetCreate(ctypes.byref(es))
    for i in range(count.value):
        h = ctypes.c_void_p()
        lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))
        lib.nvmlDeviceRegisterEvents(h, ctypes.c_ulonglong(0x8), es)  # nvmlEventTypeXidCriticalError
    text = open(profile).read()
    out = []
    data = EventData()
    for i in range(runs):
        text = add_xid(text, i % count.value)
        with open(profile + ".tmp", "w") as f:
            f.write(text)
        t = time.perf_counter()
        os.rename(profile + ".tmp", profile)
        while lib.nvmlEventSetWait_v2(es, ctypes.byref(data), 5000) != 0:
            pass
        out.append((time.perf_counter() - t) * 1000)
    return summary(out)


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--inner-xid":
        print(json.dumps(xid_floor(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        return
    if len(sys.argv) > 3 and sys.argv[1] == "--inner":
        print(json.dumps(timed_runs(sys.argv[4:], dict(os.environ), int(sys.argv[2]))))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--plugin-bench", required=True)
    ap.add_argument("--profiles", nargs="*",
                    default=["dgx-h200", os.path.join(HERE, "profiles", "sim-h200-16.yaml")])
    ap.add_argument("--runs", type=int, default=1000, help="Allocate/GetPreferredAllocation calls")
    ap.add_argument("--idle-s", type=int, default=60)
    ap.add_argument("--oneshot-runs", type=int, default=20)
    ap.add_argument("--peers-bin", help="NVIDIA's binaries (default: test/peers/build.sh builds or finds them)")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("peers_bench: needs root (the plugins run in a private mount namespace)")
    gpunode = os.path.join(a.build, "bin", "gpunode")
    sim_lib = os.path.realpath(os.path.join(a.build, "bin", "libgpunode-simnvml.so"))
    peers = a.peers_bin or subprocess.run([os.path.join(ROOT, "test", "peers", "build.sh")], check=True,
                                          stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]
    versions = dict(l.strip().split("=", 1) for l in open(os.path.join(ROOT, "test", "peers", "versions.env"))
                    if "=" in l and not l.startswith("#"))
    work = tempfile.mkdtemp(prefix="gpunode-peers-bench.")
    libdir = os.path.join(work, "simlib")
    os.makedirs(libdir)
    os.symlink(sim_lib, os.path.join(libdir, "libnvidia-ml.so.1"))
    doc = {"machine": os.uname().nodename, "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
           "nvidia": {"device_plugin": versions.get("DEVICE_PLUGIN_VERSION"),
                      "container_toolkit": versions.get("CONTAINER_TOOLKIT_VERSION")},
           "gpunode": subprocess.run([gpunode, "--version"], stdout=subprocess.PIPE, text=True).stdout.strip(),
           "profiles": {}}
    for profile in a.profiles:
        name = os.path.splitext(os.path.basename(profile))[0]
        pdir = os.path.join(work, name)
        root = os.path.join(pdir, "root")
        prof = os.path.join(pdir, "profile.yaml")
        os.makedirs(pdir)
        subprocess.run([gpunode, "sim", "hostroot", profile, root, "--device-nodes", "--profile-file", prof, "-q"],
                       check=True)
        res = {}
        # The device plugins.
        for who in ("nvidia", "gpunode"):
            cmd = [os.path.join(ROOT, "test", "peers", "plugin_ns.sh"), root, "--", a.plugin_bench,
                   "--gpunode", gpunode, "--profile", prof, "--runs", str(a.runs), "--idle-s", str(a.idle_s),
                   "--kubelet-dir", "/var/lib/kubelet/device-plugins"]
            if who == "nvidia":
                cmd += ["--nvidia-plugin", os.path.join(peers, "nvidia-device-plugin"), "--sim-libdir", libdir]
            else:
                cmd += ["--host-root", root, "--sim-libdir", libdir]
            print(f"peers_bench: {name}: {who} device plugin", file=sys.stderr)
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:
                raise SystemExit(f"peers_bench: plugin_bench ({who}) exited {p.returncode}: {p.stderr[-3000:]}")
            res[f"plugin_{who}"] = json.loads(p.stdout)
        # The simulated driver's own XID delivery, on a copy of the profile.
        floor_prof = os.path.join(pdir, "xid-floor.yaml")
        shutil.copy(prof, floor_prof)
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--inner-xid", sim_lib, floor_prof, "10"],
                           stdout=subprocess.PIPE, text=True, check=True)
        res["xid_floor"] = json.loads(p.stdout)
        env = dict(os.environ, GPUNODE_SIM_PROFILE=prof)
        nv_env = dict(env, LD_LIBRARY_PATH=":".join(x for x in (libdir, os.environ.get("LD_LIBRARY_PATH")) if x))
        gn_env = dict(env, GPUNODE_NVML_LIBRARY=sim_lib, GPUNODE_CUDA_LIBRARY=sim_lib)
        out = os.path.join(pdir, "out")
        # Labels, one shot.
        print(f"peers_bench: {name}: labels one-shot", file=sys.stderr)
        machine = os.path.join(root, "sys", "class", "dmi", "id", "product_name")
        # GFD v0.19.0 publishes NodeFeature objects by default (and exits without an API server);
        # the features file, as test/peers/labels_test.sh runs it. v0.18.x has no such flag.
        gfd_flags = ["--use-node-feature-api=false"] if "--use-node-feature-api" in subprocess.run(
            [os.path.join(peers, "gpu-feature-discovery"), "--help"], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True).stdout else []
        res["labels_nvidia"] = timed_runs(
            [os.path.join(peers, "gpu-feature-discovery"), "--oneshot", "--no-timestamp", "--output-file", out,
             "--machine-type-file", machine] + gfd_flags, nv_env, a.oneshot_runs)
        res["labels_gpunode"] = timed_runs(
            [gpunode, "--host-root", root, "labels", "--oneshot", "--no-timestamp", "--output-file", out], gn_env,
            a.oneshot_runs)
        # CDI specs.
        print(f"peers_bench: {name}: cdi generate", file=sys.stderr)
        # As test/peers/cdi_test.sh: both load the host root's libnvidia-ml (the simulated NVML), inside
        # a namespace that shows the node's /proc/driver (nvidia-ctk reads the MIG capabilities there).
        ns = [os.path.join(ROOT, "test", "peers", "plugin_ns.sh"), root, "--"]
        nvml = os.path.join(root, "usr", "lib", "x86_64-linux-gnu", "libnvidia-ml.so.1")
        res["cdi_nvidia"] = timed_in(
            ns, [os.path.join(peers, "nvidia-ctk"), "cdi", "generate", "--driver-root", root, "--dev-root", root,
                 "--nvidia-cdi-hook-path", "/usr/bin/nvidia-cdi-hook", "--format", "json", "--output",
                 out + ".json"], env, a.oneshot_runs)
        res["cdi_gpunode"] = timed_in(
            ns, [gpunode, "--nvml-library", nvml, "cdi", "generate", "-q", "--driver-root", root, "--dev-root", root,
                 "--hook-path", "/usr/bin/gpunode", "--format", "json", "--output", out + ".json"], env,
            a.oneshot_runs)
        doc["profiles"][name] = res
    text = json.dumps(doc, indent=1)
    print(text)
    if a.json:
        open(a.json, "w").write(text + "\n")
    if a.markdown:
        open(a.markdown, "w").write(markdown(doc))
    subprocess.run(["rm", "-rf", work])


def markdown(doc):
    rows = []

    def ratio(n, g):
        return f"{n / g:.1f}×" if g else "–"

    for name, r in doc["profiles"].items():
        pn, pg = r["plugin_nvidia"], r["plugin_gpunode"]

        def add(what, n, g, unit="ms"):
            rows.append(f"| {name} | {what} | {n:.3f} {unit} | {g:.3f} {unit} | {ratio(n, g)} |")

        add("plugin start → registered", pn["start_to_registered_ms"], pg["start_to_registered_ms"])
        for k, label in (("allocate", "Allocate"), ("preferred_allocation", "GetPreferredAllocation")):
            add(f"{label} p50", pn[k]["median_ms"], pg[k]["median_ms"])
            add(f"{label} p99", pn[k]["p99_ms"], pg[k]["p99_ms"])
        if "xid_to_unhealthy" in pn and "xid_to_unhealthy" in pg:
            add("XID 79 → Unhealthy p50", pn["xid_to_unhealthy"]["median_ms"], pg["xid_to_unhealthy"]["median_ms"])
            if "xid_floor" in r:
                f = r["xid_floor"]["median_ms"]
                rows.append(f"| {name} | ↳ of which the simulated driver's own delivery (no plugin) | {f:.3f} ms | "
                            f"{f:.3f} ms | |")
        add("plugin idle RSS", pn["idle"]["VmRSS_kB"] / 1024, pg["idle"]["VmRSS_kB"] / 1024, "MiB")
        add("↳ anonymous (heap, stacks)", pn["idle"]["RssAnon_kB"] / 1024, pg["idle"]["RssAnon_kB"] / 1024, "MiB")
        add(f"plugin idle CPU ({pg['idle']['window_s']:.0f} s)", pn["idle"]["cpu_percent"],
            pg["idle"]["cpu_percent"], "%")
        add("labels one-shot p50", r["labels_nvidia"]["median_ms"], r["labels_gpunode"]["median_ms"])
        add("cdi generate p50", r["cdi_nvidia"]["median_ms"], r["cdi_gpunode"]["median_ms"])
    head = (f"NVIDIA device plugin/GFD {doc['nvidia']['device_plugin']}, nvidia-ctk "
            f"{doc['nvidia']['container_toolkit']} vs {doc['gpunode'].splitlines()[0]}; {doc['machine']}, {doc['cpus']} CPUs, "
            f"{doc['date']}\n\n| node | measure | NVIDIA | gpunode | NVIDIA / gpunode |\n|---|---|---|---|---|\n")
    return head + "\n".join(rows) + "\n"


if __name__ == "__main__":
    main()
