#!/usr/bin/env python3
"""Memory footprint of gpunode's long-running services, by mapping, next to a Python NVML exporter.

Starts each service, lets it reach its steady state (the exporter is scraped a few times), then
reads /proc/PID/status (VmRSS, RssAnon, RssFile, Threads) and /proc/PID/smaps (Rss per mapping,
grouped: libcuda, libnvidia-ml, gRPC/protobuf, OpenSSL, the C++ runtime, gpunode's own binary,
[heap], anonymous, stacks, other files), and whether libcuda is mapped at all.

  benchmarks/footprint.py --gpunode build-rel/bin/gpunode --simulate dgx-h200 [--peer] [--json OUT]
  benchmarks/footprint.py --gpunode .gpubundle/run-gpunode --peer            # a real GPU node

Services: `exporter -c 1000` (scraped 3 times), `plugin` (its kubelet directory a temporary
folder with no kubelet: it serves its socket and waits to register), `labels --sleep-interval
60s` (one round written), and `agent` with every component on (cdi and validator as child steps,
plugin, labels to a features file, exporter at 1 s; no Kubernetes API) — the one process that
replaces the three. With --cpu-window S, each service's CPU (its own and its reaped children's:
the agent's validator runs doctor as a child) is also measured over S seconds after it settled. The peer is benchmarks/peers/pynvml_exporter.py (prometheus_client +
pynvml), when --peer is given and pynvml imports.
"""
import argparse
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))

GROUPS = [
    ("libcuda", re.compile(r"/libcuda\.so")),
    ("libnvidia-ml", re.compile(r"/libnvidia-ml\.so|libgpunode-simnvml")),
    ("grpc+protobuf", re.compile(r"/lib(grpc|gpr|upb|protobuf|absl_|re2|cares|address_sorting)")),
    ("openssl", re.compile(r"/lib(ssl|crypto)\.so")),
    ("c++ runtime+libc", re.compile(r"/(libstdc\+\+|libc\.so|libm\.so|libgcc_s|ld-linux|libpthread|libdl)")),
    ("gpunode binary", re.compile(r"/gpunode$")),
    ("python", re.compile(r"python|\.cpython-|/lib-dynload/")),
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def smaps(pid):
    groups, libcuda = {}, False
    current = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split(None, 5)
                path = parts[5].strip() if len(parts) > 5 else ""
                if "/libcuda.so" in path:
                    libcuda = True
                if path == "[heap]":
                    current = "[heap]"
                elif path.startswith("[stack"):
                    current = "stacks"
                elif path.startswith("["):
                    current = "other"
                elif path == "":
                    current = "anonymous (malloc arenas, thread stacks)"
                else:
                    current = next((g for g, rx in GROUPS if rx.search(path)), "other files")
            elif line.startswith("Rss:") and current:
                groups[current] = groups.get(current, 0) + int(line.split()[1])
    return {k: round(v / 1024, 1) for k, v in sorted(groups.items(), key=lambda kv: -kv[1])}, libcuda


def status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[k] = round(int(v.split()[0]) / 1024, 1)
            elif k == "Threads":
                out[k] = int(v)
    return out


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime, stime, cutime, cstime (children waited for: the agent's child steps)
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def measure(name, argv, env, settle, scrape_port=None, cpu_window=0.0):
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + settle
        scrapes = 0
        while time.time() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited {proc.returncode}: {proc.stderr.read().decode()[-500:]}")
            if scrape_port and scrapes < 3:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{scrape_port}/metrics", timeout=2).read()
                    scrapes += 1
                except OSError:
                    pass
            time.sleep(0.5)
        if scrape_port and scrapes == 0:
            raise RuntimeError(f"{name}: no scrape answered on port {scrape_port}")
        st = status(proc.pid)
        groups, libcuda = smaps(proc.pid)
        cpu = cpu_seconds(proc.pid)
        out = {"service": name, "argv": " ".join(argv), **st, "libcudaMapped": libcuda, "cpuSeconds": round(cpu, 2),
               "rssMiBByMapping": groups}
        if cpu_window > 0:
            time.sleep(cpu_window)
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited {proc.returncode} during the CPU window")
            out["cpuPercentOfACore"] = round((cpu_seconds(proc.pid) - cpu) / cpu_window * 100, 2)
            out["cpuWindowSeconds"] = cpu_window
            st2 = status(proc.pid)
            out["VmRSSAfterWindow"] = st2.get("VmRSS")
        return out
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpunode", default="build-rel/bin/gpunode", help="gpunode command (may include a wrapper)")
    ap.add_argument("--simulate", help="a built-in profile; omit on a real GPU node")
    ap.add_argument("--sim-library", help="the simulated NVML (default: next to gpunode)")
    ap.add_argument("--settle", type=float, default=6.0, help="seconds each service runs before it is measured")
    ap.add_argument("--peer", action="store_true", help="also the Python NVML exporter (benchmarks/peers/pynvml_exporter.py)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--cpu-window", type=float, default=0.0, help="also measure CPU over this many seconds")
    ap.add_argument("--only", help="comma-separated services to run (exporter,plugin,labels,agent)")
    args = ap.parse_args()

    gp = shlex.split(args.gpunode)
    env = dict(os.environ)
    if args.simulate:
        lib = args.sim_library or os.path.join(os.path.dirname(os.path.abspath(gp[-1])), "libgpunode-simnvml.so")
        gp += ["--simulate", args.simulate]
        env["GPUNODE_SIM_LIBRARY"] = lib
    tmp = tempfile.mkdtemp(prefix="gpunode-footprint-")
    results = []
    port = free_port()
    aport, hport = free_port(), free_port()
    os.makedirs(f"{tmp}/agent-dp", exist_ok=True)
    with open(f"{tmp}/agent.yaml", "w") as f:
        f.write(f"""kubernetes: {{enabled: false}}
healthListen: 127.0.0.1:{hport}
cdi: {{enabled: true, args: [cdi, generate, --output, {tmp}/nvidia.yaml]}}
plugin: {{kubeletDir: {tmp}/agent-dp}}
labels: {{nodeLabels: false, featuresFile: {tmp}/agent-features}}
exporter: {{listen: "127.0.0.1:{aport}", collectInterval: 1000}}
""")
    runs = [
        ("exporter", gp + ["exporter", "--listen", f"127.0.0.1:{port}", "--collect-interval", "1000"], port),
        ("plugin", gp + ["plugin", "--kubelet-dir", tmp], None),
        ("labels", gp + ["labels", "--output", f"{tmp}/features", "--sleep-interval", "60s"], None),
        ("agent", gp + ["agent", "--config", f"{tmp}/agent.yaml"], aport),
    ]
    only = set(args.only.split(",")) if args.only else None
    for name, argv, scrape in runs:
        if only and name not in only:
            continue
        results.append(measure(name, argv, env, args.settle, scrape, args.cpu_window))
    if args.peer:
        try:
            import pynvml  # noqa: F401
            pport = free_port()
            results.append(measure("peer: pynvml_exporter.py",
                                   [sys.executable, os.path.join(HERE, "peers", "pynvml_exporter.py"), str(pport)],
                                   env, args.settle, pport))
        except ImportError:
            print("peer skipped: pynvml is not installed", file=sys.stderr)
    doc = {"host": socket.gethostname(), "simulate": args.simulate, "settleSeconds": args.settle,
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "results": results}
    print(f"{'service':28} {'VmRSS':>7} {'anon':>7} {'file':>7} {'thr':>4} {'cpu%':>6}  libcuda  largest mappings (MiB)")
    for r in results:
        top = ", ".join(f"{k} {v}" for k, v in list(r["rssMiBByMapping"].items())[:5])
        cpu = r.get("cpuPercentOfACore", "-")
        print(f"{r['service']:28} {r.get('VmRSS', 0):7} {r.get('RssAnon', 0):7} {r.get('RssFile', 0):7} "
              f"{r.get('Threads', 0):4} {cpu:>6}  {'yes' if r['libcudaMapped'] else 'no ':7}  {top}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
