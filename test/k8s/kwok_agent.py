#!/usr/bin/env python3
"""kwok_agent.py: the stand-in for gpunode's agent on every KWOK fake node (test/k8s/kwok.sh), one
process for all of them.

One list+watch of the pods labelled gpunode.io/nvidia-driver (all namespaces). When such a pod is
Running (and not being deleted) on a fake node (annotation kwok.x-k8s.io/node=fake), after a delay
drawn for that node (--delay MIN-MAX; --slow-delay for nodes labelled gpunode-test/slow=true) it plays
the agent's validation gate, as upgrade-contract.md says:
  - pass: label nvidia.com/cuda.driver-version.full (and GFD's .major/.minor/.revision) = the pod's
    annotation gpunode.io/driver-version, then condition GpuStackReady True, reason ChecksPassed,
    message "all checks passed (gpunode doctor) on driver <version>";
  - fail (the node is named by --fail, or labelled gpunode-test/fail-validation=true): condition
    GpuStackReady False, reason DriverVersionMismatch, naming the pod's version and the node's
    label (left as it was: the old driver is still the one loaded).
Once per pod (its uid): a driver pod that restarts in place is not validated again; a new pod is.
While no Running driver pod is on a node it does nothing to it. The real node (no kwok annotation)
is never touched.

  kwok_agent.py [--kubeconfig F] [--delay 0.5-2] [--slow-delay 8-12] [--fail NODE[,NODE]...]
                [--workers 4] [--stats FILE] [-v]

SIGTERM/SIGINT: stops (watch closed, pending validations dropped), writes --stats, exit 0.
Exit 2: the kubeconfig cannot be used or the API server does not answer at start.
Every pod and node from the API server is untrusted: fields are checked (type, length, a version's
shape) and an error names the object and field; errors are logged and the object skipped, never a crash.
"""
import argparse
import heapq
import json
import os
import random
import re
import signal
import sys
import threading
import time
import urllib.parse

sys.dont_write_bytecode = True  # no __pycache__ in the repository
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwok_kube as kk  # noqa: E402

PROG = "kwok_agent"
POD_LABEL = "gpunode.io/nvidia-driver"
VERSION_ANNOTATION = "gpunode.io/driver-version"
FAIL_LABEL = "gpunode-test/fail-validation"
SLOW_LABEL = "gpunode-test/slow"
MAX_PODS = 100000  # driver pods tracked at most (one per node); past it a pod is an error, not tracked
RETRIES = 5  # attempts of each step (a failed request is retried after 1, 2, 4, 8 s)
VERSION_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._-]{0,62}$")  # a label value, as the agent writes it


def parse_range(s, name):
    m = re.match(r"^\s*([0-9.]+)\s*(?:[-:]\s*([0-9.]+))?\s*$", s)
    try:
        lo = float(m.group(1))
        hi = float(m.group(2)) if m.group(2) else lo
    except (AttributeError, ValueError):
        raise argparse.ArgumentTypeError(f"{name}: expected SECONDS or MIN-MAX, got {s!r}")
    if not 0 <= lo <= hi <= 3600:
        raise argparse.ArgumentTypeError(f"{name}: expected 0 <= MIN <= MAX <= 3600, got {s!r}")
    return lo, hi


def field(obj, *path):
    """obj[path...] or None when absent or not of the expected shape."""
    for p in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(p)
    return obj


class Agent:
    def __init__(self, client, args):
        self.c = client
        self.args = args
        self.fail = set(args.fail)
        self.stop = threading.Event()
        self.lock = threading.Condition()
        self.pods = {}          # uid -> (namespace/name, node, version or error, running)
        self.done = {}          # node -> uid of the pod it was last validated for (or is planned)
        self.heap = []          # (due, seq, uid, node)
        self.seq = 0
        self.skip_nodes = set()  # real nodes (no kwok annotation): never touched
        self.stats = {"validated": 0, "failed": 0, "skipped_not_fake": 0, "errors": 0, "pod_errors": 0}

    def err(self, msg):
        with self.lock:
            self.stats["errors"] += 1
        kk.log(PROG, msg)

    # ------------------------------------------------------------ pods (watch thread)

    def pod_info(self, pod):
        meta = pod["metadata"]
        ns, name, uid = meta.get("namespace"), meta.get("name"), meta.get("uid")
        if not all(isinstance(x, str) and 0 < len(x) <= 253 for x in (ns, name, uid)):
            return None
        node = field(pod, "spec", "nodeName")
        phase = field(pod, "status", "phase")
        running = (isinstance(node, str) and 0 < len(node) <= 253 and phase == "Running"
                   and meta.get("deletionTimestamp") is None)
        ann = meta.get("annotations")
        ver = ann.get(VERSION_ANNOTATION) if isinstance(ann, dict) else None
        if not isinstance(ver, str) or not VERSION_RE.match(ver):
            ver = ValueError(f"pod {ns}/{name}: metadata.annotations[{VERSION_ANNOTATION}]: "
                             + ("missing" if ver is None else f"not a version: {str(ver)[:80]!r}"))
        return uid, f"{ns}/{name}", node if isinstance(node, str) else "", ver, running

    def on_sync(self, items):
        with self.lock:
            self.pods.clear()
            for p in items:
                self._update(p)
            self.lock.notify_all()

    def on_event(self, typ, pod):
        with self.lock:
            if typ == "DELETED":
                uid = pod["metadata"].get("uid")
                self.pods.pop(uid, None)
            else:
                self._update(pod)
            self.lock.notify_all()

    def _update(self, pod):
        info = self.pod_info(pod)
        if info is None:
            self.stats["pod_errors"] += 1
            kk.log(PROG, f"a pod without a valid metadata.namespace/name/uid: {str(pod['metadata'])[:200]}")
            return
        uid, key, node, ver, running = info
        if uid not in self.pods and len(self.pods) >= MAX_PODS:
            self.stats["pod_errors"] += 1
            kk.log(PROG, f"pod {key}: more than {MAX_PODS} driver pods: not tracked")
            return
        self.pods[uid] = (key, node, ver, running)
        if not running or node in self.skip_nodes or self.done.get(node) == uid:
            return
        self.done[node] = uid
        # first a "plan" step right away (reads the node: fake? slow? failing?), then the validation
        self.seq += 1
        heapq.heappush(self.heap, (time.monotonic(), self.seq, uid, node, None, 0))

    # ------------------------------------------------------------ workers

    def worker(self):
        while not self.stop.is_set():
            with self.lock:
                while not self.stop.is_set() and (not self.heap or self.heap[0][0] > time.monotonic()):
                    self.lock.wait(None if not self.heap else max(0.0, self.heap[0][0] - time.monotonic()))
                if self.stop.is_set():
                    return
                _, _, uid, node, plan, attempt = heapq.heappop(self.heap)
                pod = self.pods.get(uid)
                current = pod is not None and pod[3] and pod[1] == node and self.done.get(node) == uid
            if not current:
                if self.args.verbose:
                    kk.log(PROG, f"node {node}: driver pod {uid} no longer Running there: nothing done")
                continue
            try:
                if plan is None:
                    self.plan(uid, node, pod)
                else:
                    self.validate(node, pod, plan)
            except kk.KubeError as e:
                if attempt + 1 >= RETRIES:
                    self.err(f"node {node}: {e} (given up after {RETRIES} attempts)")
                    continue
                self.err(f"node {node}: {e} (retrying in {2 ** attempt} s)")
                with self.lock:
                    self.seq += 1
                    heapq.heappush(self.heap, (time.monotonic() + 2 ** attempt, self.seq, uid, node, plan, attempt + 1))
                    self.lock.notify_all()

    def plan(self, uid, node, pod):
        t0 = time.monotonic()
        _, n = self.c.request("GET", f"/api/v1/nodes/{urllib.parse.quote(node)}")
        ann = field(n, "metadata", "annotations")
        if not isinstance(ann, dict) or ann.get(kk.FAKE_ANNOTATION) != "fake":
            with self.lock:
                self.skip_nodes.add(node)
                self.stats["skipped_not_fake"] += 1
            kk.log(PROG, f"node {node}: not a fake node (no annotation {kk.FAKE_ANNOTATION}=fake): never touched")
            return
        labels = field(n, "metadata", "labels")
        labels = labels if isinstance(labels, dict) else {}
        slow = labels.get(SLOW_LABEL) == "true"
        failing = node in self.fail or labels.get(FAIL_LABEL) == "true"
        lo, hi = self.args.slow_delay if slow else self.args.delay
        due = t0 + random.uniform(lo, hi)
        with self.lock:
            self.seq += 1
            heapq.heappush(self.heap, (due, self.seq, uid, node,
                                       {"fail": failing, "slow": slow, "old": str(labels.get(kk.DRIVER_LABEL, ""))[:63]}, 0))
            self.lock.notify_all()

    def validate(self, node, pod, plan):
        key, _, ver, _ = pod
        path = f"/api/v1/nodes/{urllib.parse.quote(node)}"
        if isinstance(ver, Exception):
            self.err(f"node {node}: {ver}: not validated")
            return
        now = kk.now_rfc3339()
        smp = "application/strategic-merge-patch+json"
        if plan["fail"]:
            cond = {"type": kk.GPU_STACK, "status": "False", "reason": "DriverVersionMismatch",
                    "message": f"driver version mismatch: driver pod {key} installs {ver} but the loaded "
                               f"driver is {plan['old'] or 'unknown'} (gpunode doctor; kwok stand-in)",
                    "lastHeartbeatTime": now, "lastTransitionTime": now}
        else:
            labels = {kk.DRIVER_LABEL: ver}
            labels.update(kk.driver_labels(ver))
            self.c.request("PATCH", path, {"metadata": {"labels": labels}}, smp)
            cond = {"type": kk.GPU_STACK, "status": "True", "reason": "ChecksPassed",
                    "message": f"all checks passed (gpunode doctor) on driver {ver}",
                    "lastHeartbeatTime": now, "lastTransitionTime": now}
        self.c.request("PATCH", path + "/status", {"status": {"conditions": [cond]}}, smp)
        with self.lock:
            self.stats["failed" if plan["fail"] else "validated"] += 1
        if self.args.verbose:
            kk.log(PROG, f"node {node}: GpuStackReady {cond['status']} on driver {ver} (pod {key}"
                         f"{', slow' if plan['slow'] else ''})")

    # ------------------------------------------------------------ run

    def run(self):
        threads = [threading.Thread(target=self.worker, daemon=True) for _ in range(self.args.workers)]
        for t in threads:
            t.start()
        self.c.list_watch("/api/v1/pods", {"labelSelector": POD_LABEL}, self.stop, self.on_sync, self.on_event, PROG)
        with self.lock:
            self.lock.notify_all()
        for t in threads:
            t.join(timeout=5)

    def shutdown(self, *_):
        self.stop.set()
        kk.stop_watches()


def main():
    ap = argparse.ArgumentParser(prog="kwok_agent.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeconfig", default=kk.default_kubeconfig())
    ap.add_argument("--delay", type=lambda s: parse_range(s, "--delay"), default=(0.5, 2.0),
                    help="seconds from the pod Running to the validation, drawn per node (default 0.5-2)")
    ap.add_argument("--slow-delay", type=lambda s: parse_range(s, "--slow-delay"), default=(8.0, 12.0),
                    help=f"the same for nodes labelled {SLOW_LABEL}=true (default 8-12)")
    ap.add_argument("--fail", action="append", default=[], metavar="NODE[,NODE]",
                    help=f"nodes whose validation fails (also: label {FAIL_LABEL}=true)")
    ap.add_argument("--workers", type=int, default=4, help="threads doing the requests (default 4)")
    ap.add_argument("--stats", help="write the counters as JSON here at exit")
    ap.add_argument("-v", "--verbose", action="store_true", help="log every validation")
    args = ap.parse_args()
    args.fail = [n for f in args.fail for n in f.split(",") if n]
    if not 1 <= args.workers <= 64:
        ap.error("--workers: 1..64")
    try:
        client = kk.Client(args.kubeconfig)
        client.request("GET", "/api/v1/namespaces/default")
    except kk.KubeError as e:
        kk.log(PROG, str(e))
        return 2
    agent = Agent(client, args)
    signal.signal(signal.SIGTERM, agent.shutdown)
    signal.signal(signal.SIGINT, agent.shutdown)
    kk.log(PROG, f"watching pods labelled {POD_LABEL}; delay {args.delay[0]}-{args.delay[1]} s, slow "
                 f"{args.slow_delay[0]}-{args.slow_delay[1]} s, failing: {','.join(args.fail) or '-'} and "
                 f"nodes labelled {FAIL_LABEL}=true")
    # the watch runs in a thread so that the main thread stays free for the signal handlers
    t = threading.Thread(target=agent.run, daemon=True)
    t.start()
    while t.is_alive():
        t.join(0.5)
    kk.log(PROG, "stopped: " + json.dumps(agent.stats))
    if args.stats:
        with open(args.stats, "w") as f:
            json.dump(agent.stats, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
