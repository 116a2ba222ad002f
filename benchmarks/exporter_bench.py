#!/usr/bin/env python3
"""Exporter speed and footprint, side by side with the peers' methods (issue 4).

For each target: start it, wait until /metrics answers 200, then
  1. steady state: one scrape per second for --steady seconds (what Prometheus does at a 1 s
     scrape interval; gpunode also samples every second, -c 1000): CPU of the process and its
     children in % of one core (utime+stime+cutime+cstime from /proc), RSS (VmRSS) at the end;
  2. paced: --concurrency scrapers each scraping --paced-rate times a second (spread over the
     period), burst: the same in step (all at once every period), and
     load: --concurrency scrapers in a closed loop (saturation), one request per connection, for
     --load-seconds each (benchmarks/exporter_load.cc; Accept-Encoding: gzip as Prometheus
     sends): requests, errors, latency p50/p90/p99/max;
  3. RSS after the load and the peak (VmHWM).
Targets:
  gpunode         gpunode [--simulate PROFILE] exporter -c 1000, with pod labels from a
                  pod-resources emulator (every GPU allocated to a pod) when --emulator is given
  nvidia-smi      benchmarks/peers/smi_exporter.py: nvidia-smi --query-gpu per scrape
                  (nvidia_gpu_exporter's method); only with --peers (needs a real GPU)
  python-pynvml   benchmarks/peers/pynvml_exporter.py: prometheus_client + pynvml per scrape;
                  only with --peers
  with --from-dir (privilege separation, docs/exporter.md), two more, same sampling:
  agent-live      gpunode agent, exporter only, serving its port and publishing into a folder
                  (publishDir): the live server of the agent
  front-from-dir  gpunode exporter --from-dir FOLDER, the agent publishing in the background: the
                  same page read from the published files (CPU and RSS are the front's alone)
Writes one JSON document (stdout, and --out FILE).

  benchmarks/exporter_bench.py --gpunode build/bin/gpunode --load build/bin/exporter_load \\
      --emulator build/bin/podresources_emulator --simulate dgx-h200
"""
import argparse
import json
import shlex
import shutil
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # after the command: state(0) ... utime(11) stime(12) cutime(13) cstime(14)
    return sum(int(x) for x in fields[11:15])


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def wait_ready(port, proc, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"target exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                if r.status == 200:
                    return len(r.read())
        except Exception:
            time.sleep(0.2)
    raise RuntimeError("target did not answer /metrics")


def load(loader, port, concurrency, seconds, rate=0, stagger=False):
    out = subprocess.run(shlex.split(loader) + ["--port", str(port), "--concurrency", str(concurrency),
                          "--seconds", str(seconds), "--rate", str(rate), "--gzip", "1",
                          "--stagger", "1" if stagger else "0"],
                         capture_output=True, text=True, check=False)
    return json.loads(out.stdout) if out.stdout.strip() else {"error": out.stderr.strip()}


def measure(name, argv, port, args, env=None, helper=None):
    """`helper`: a command started first and stopped last (the agent behind the front)."""
    helper_proc = None
    if helper:
        helper_proc = subprocess.Popen(helper, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                       start_new_session=True)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    result = {"target": name, "command": " ".join(argv)}
    if helper:
        result["helper"] = " ".join(helper)
    try:
        result["bytes_per_scrape"] = wait_ready(port, proc)
        time.sleep(args.warmup)
        t0, c0 = time.time(), cpu_ticks(proc.pid)
        steady = load(args.load, port, 1, args.steady, rate=1)
        t1, c1 = time.time(), cpu_ticks(proc.pid)
        result["steady_1hz"] = {
            "seconds": round(t1 - t0, 2),
            "scrapes": steady.get("requests"),
            "cpu_percent_of_one_core": round(100.0 * (c1 - c0) / TICK / (t1 - t0), 3),
            "scrape_latency_ms": steady.get("latency_ms"),
            "rss_mib": round(status_kib(proc.pid, "VmRSS") / 1024, 2),
        }
        # 50 scrapers, each scraping 10 times a second (500 scrapes/s: far above any real
        # Prometheus fleet, but not saturating): the latency a scraper sees under concurrency.
        # "paced": independent scrapers (spread over the period); "burst": all 50 in step, 50
        # requests arriving at the same instant every period.
        result["paced"] = load(args.load, port, args.concurrency, args.load_seconds, rate=args.paced_rate,
                               stagger=True)
        result["burst"] = load(args.load, port, args.concurrency, args.load_seconds, rate=args.paced_rate)
        # 50 scrapers in a closed loop (each sends the next request when the last one is answered):
        # saturation throughput; latency there is concurrency / throughput (Little's law).
        result["load"] = load(args.load, port, args.concurrency, args.load_seconds)
        result["rss_after_load_mib"] = round(status_kib(proc.pid, "VmRSS") / 1024, 2)
        result["rss_peak_mib"] = round(status_kib(proc.pid, "VmHWM") / 1024, 2)
        result["threads"] = status_kib(proc.pid, "Threads")
    except Exception as e:  # noqa: BLE001 - reported in the document
        result["error"] = str(e)
        try:
            result["stderr"] = proc.stderr.read(4000).decode(errors="replace") if proc.poll() is not None else ""
        except Exception:
            pass
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if helper_proc:
            os.killpg(helper_proc.pid, signal.SIGTERM)
            helper_proc.wait()
    print(json.dumps(result), file=sys.stderr)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpunode", required=True, help="gpunode command, e.g. build/bin/gpunode or '.gpubundle/run gpunode'")
    ap.add_argument("--load", required=True, help="exporter_load command")
    ap.add_argument("--emulator", help="podresources_emulator command: adds pod labels for every GPU")
    ap.add_argument("--simulate", help="profile for gpunode (omit on a real GPU node)")
    ap.add_argument("--peers", action="store_true", help="also the nvidia-smi and pynvml peers (real GPU)")
    ap.add_argument("--from-dir", action="store_true",
                    help="also the agent's live exporter and the front serving its published files")
    ap.add_argument("--only-from-dir", action="store_true", help="only the two --from-dir targets")
    ap.add_argument("--steady", type=float, default=20)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--load-seconds", type=float, default=10)
    ap.add_argument("--paced-rate", type=float, default=10, help="scrapes per second per scraper in the paced phase")
    ap.add_argument("--out")
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="gpn-bench-")
    results = []
    gpunode = shlex.split(args.gpunode) + (["--simulate", args.simulate] if args.simulate else [])
    env = dict(os.environ)
    emu = None
    pod_args = []
    if args.emulator:
        with open(f"{tmp}/temp.csv", "w") as f:
            f.write("DCGM_FI_DEV_GPU_TEMP, gauge, t.\n")
        out = subprocess.run(gpunode + ["exporter", "--once", "-f", f"{tmp}/temp.csv"],
                             capture_output=True, text=True).stdout
        gpus = sorted({l.split('UUID="')[1].split('"')[0] for l in out.splitlines() if 'UUID="' in l})
        pods = [{"namespace": "ml", "pod": f"train-{i}", "container": "main", "resource": "nvidia.com/gpu",
                 "devices": [u]} for i, u in enumerate(gpus)]
        with open(f"{tmp}/pods.json", "w") as f:
            json.dump(pods, f)
        sock = f"{tmp}/kubelet.sock"
        emu = subprocess.Popen(shlex.split(args.emulator) + ["--socket", sock, "--pods", f"{tmp}/pods.json"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        pod_args = ["--pod-resources-socket", sock]
    try:
        if not args.only_from_dir:
            port = free_port()
            results.append(measure("gpunode", gpunode + ["exporter", "-c", "1000", "--listen", f"127.0.0.1:{port}"] + pod_args,
                                   port, args, env))
        if args.from_dir or args.only_from_dir:
            published = f"{tmp}/published"
            live_port, front_port = free_port(), free_port()
            with open(f"{tmp}/agent.yaml", "w") as f:
                f.write("kubernetes: {enabled: false}\nhealthListen: \"\"\n"
                        f"publishDir: {published}\n"
                        "plugin: {enabled: false}\nlabels: {enabled: false}\nvalidator: {enabled: false}\n"
                        f"exporter: {{listen: \"127.0.0.1:{live_port}\", collectInterval: 1000"
                        + (f", kubernetes: true, podResourcesSocket: {pod_args[1]}" if pod_args else "") + "}\n")
            agent = gpunode + ["agent", "--config", f"{tmp}/agent.yaml"]
            results.append(measure("agent-live", agent, live_port, args, env))
            shutil.rmtree(published, ignore_errors=True)
            front = shlex.split(args.gpunode) + ["exporter", "--from-dir", published,
                                                 "--listen", f"127.0.0.1:{front_port}"]
            results.append(measure("front-from-dir", front, front_port, args, env, helper=agent))
        if args.peers:
            port = free_port()
            results.append(measure("nvidia-smi per scrape", [sys.executable, f"{HERE}/peers/smi_exporter.py", str(port)],
                                   port, args))
            port = free_port()
            results.append(measure("python prometheus_client + pynvml",
                                   [sys.executable, f"{HERE}/peers/pynvml_exporter.py", str(port)], port, args))
    finally:
        if emu:
            emu.terminate()
            emu.wait()
    doc = {"benchmark": "exporter", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "host": socket.gethostname(), "cpus": os.cpu_count(), "simulate": args.simulate,
           "pod_labels": bool(args.emulator), "concurrency": args.concurrency, "results": results}
    text = json.dumps(doc, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
