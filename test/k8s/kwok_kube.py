#!/usr/bin/env python3
"""A small Kubernetes API client for the KWOK fleet tools (Python 3 stdlib only), and the fake GPU
nodes themselves.

Library (imported by kwok_agent.py and kwok_watch.py):
  Client(kubeconfig)            HTTPS to the API server with the client certificate of a kubeconfig
                                as test/k8s/cluster.sh writes it (<state>/admin.kubeconfig: one cluster
                                `server:` + `certificate-authority-data:`, one user
                                `client-certificate-data:` + `client-key-data:`; file-path variants of
                                the three are read too). One keep-alive connection per thread.
  Client.request(...)           one request, JSON answer; errors name the request and the server's reason
  Client.list_watch(...)        list (paged) then watch (bookmarks, resumes, relists on 410 Gone)

Commands (test/k8s/kwok.sh runs them):
  kwok_kube.py create-nodes --count N --pools P [--driver-version V] [--parallel 8]
  kwok_kube.py wait-ready --count N [--timeout 300]
  kwok_kube.py delete-nodes          one DELETE of the collection (label gpunode-test/kwok=true)

The API server is not trusted: answers are capped (64 MiB a body, 16 MiB a watch event), fields are
checked for their type, and every error names the request or object and field.
"""
import argparse
import base64
import http.client
import json
import os
import re
import socket
import ssl
import sys
import tempfile
import threading
import time
import urllib.parse

MAX_BODY = 64 << 20
MAX_EVENT = 16 << 20
FAKE_ANNOTATION = "kwok.x-k8s.io/node"
FAKE_LABEL = "gpunode-test/kwok"
POOL_LABEL = "gpunode-test/pool"
TAINT_KEY = "kwok.x-k8s.io/node"
DRIVER_LABEL = "nvidia.com/cuda.driver-version.full"
GPU_STACK = "GpuStackReady"
# name: (product label, family, memory MiB, compute major, minor)
POOLS = [
    ("h100", "NVIDIA-H100-80GB-HBM3", "hopper", "81559", "9", "0"),
    ("a100", "NVIDIA-A100-SXM4-80GB", "ampere", "81920", "8", "0"),
    ("l40s", "NVIDIA-L40S", "ada-lovelace", "46068", "8", "9"),
    ("h200", "NVIDIA-H200", "hopper", "143771", "9", "0"),
]
VERSION_RE = re.compile(r"^[0-9]{1,4}(\.[0-9]{1,4}){1,3}$")
NODE_IP = "10.244.0.1"  # kwok.sh's --node-ip: the real node's (the API server's kubelet calls get a "no such pod")
KWOK_INFO = "kwok-0.8.0"  # what kwok's node-initialize stage writes into nodeInfo


class KubeError(Exception):
    def __init__(self, message, status=0, reason=""):
        super().__init__(message)
        self.status = status
        self.reason = reason


def log(prog, msg):
    sys.stderr.write(f"{prog}: {msg}\n")
    sys.stderr.flush()


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def default_kubeconfig():
    return os.environ.get("KUBECONFIG") or os.path.join(
        os.environ.get("GPUNODE_K8S_STATE", "/tmp/gpunode-k8s"), "admin.kubeconfig")


def read_kubeconfig(path):
    """server, CA PEM, cert PEM, key PEM from the kubeconfig cluster.sh writes (no YAML library)."""
    try:
        with open(path, "rb") as f:
            text = f.read(1 << 20).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise KubeError(f"kubeconfig {path}: {e}")
    found = {}
    for line in text.splitlines():
        m = re.match(r"^\s*-?\s*([a-z-]+):\s*(\S+)\s*$", line)
        if m and m.group(1) not in found:
            found[m.group(1)] = m.group(2).strip("'\"")
    base = os.path.dirname(os.path.abspath(path))

    def pem(key):
        if key + "-data" in found:
            try:
                return base64.b64decode(found[key + "-data"], validate=True)
            except ValueError as e:
                raise KubeError(f"kubeconfig {path}: {key}-data: not base64 ({e})")
        if key in found:
            p = os.path.join(base, found[key])
            try:
                with open(p, "rb") as f:
                    return f.read(1 << 20)
            except OSError as e:
                raise KubeError(f"kubeconfig {path}: {key}: {e}")
        raise KubeError(f"kubeconfig {path}: no {key}-data or {key} (a client certificate is needed)")

    server = found.get("server", "")
    u = urllib.parse.urlsplit(server)
    if u.scheme != "https" or not u.hostname:
        raise KubeError(f"kubeconfig {path}: server: expected https://HOST[:PORT], got {server!r}")
    return server, pem("certificate-authority"), pem("client-certificate"), pem("client-key")


class Client:
    def __init__(self, kubeconfig, timeout=30.0):
        server, ca, cert, key = read_kubeconfig(kubeconfig)
        u = urllib.parse.urlsplit(server)
        self.host, self.port, self.timeout = u.hostname, u.port or 443, timeout
        self.ctx = ssl.create_default_context(cadata=ca.decode("ascii", "replace"))
        # load_cert_chain reads files: a private temp dir, removed as soon as they are loaded
        d = tempfile.mkdtemp(prefix="kwok-kube-")
        try:
            for name, data in (("c", cert), ("k", key)):
                fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
            self.ctx.load_cert_chain(os.path.join(d, "c"), os.path.join(d, "k"))
        except (ssl.SSLError, OSError) as e:
            raise KubeError(f"kubeconfig {kubeconfig}: client certificate/key: {e}")
        finally:
            for name in ("c", "k"):
                try:
                    os.unlink(os.path.join(d, name))
                except OSError:
                    pass
            os.rmdir(d)
        self.local = threading.local()

    def _conn(self, timeout=None):
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx,
                                           timeout=timeout or self.timeout)

    def request(self, method, path, body=None, content_type="application/json", ok=(200, 201, 202)):
        """One request on this thread's keep-alive connection; returns (status, parsed JSON).
        A status outside `ok` raises KubeError naming the request and the server's message."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        headers = {"Accept": "application/json", "User-Agent": "gpunode-kwok-tools"}
        if data is not None:
            headers["Content-Type"] = content_type
        what = f"{method} {path}"
        for attempt in (0, 1):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = self._conn()
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read(MAX_BODY + 1)
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError,
                    http.client.CannotSendRequest, http.client.ResponseNotReady) as e:
                conn.close()
                self.local.conn = None
                if attempt == 1:  # a stale keep-alive connection is retried once, on a new one
                    raise KubeError(f"{what}: {e.__class__.__name__}: {e}")
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                self.local.conn = None
                raise KubeError(f"{what}: {e.__class__.__name__}: {e}")
        if len(raw) > MAX_BODY:
            conn.close()
            self.local.conn = None
            raise KubeError(f"{what}: answer larger than {MAX_BODY} bytes")
        try:
            obj = json.loads(raw) if raw else {}
        except ValueError as e:
            raise KubeError(f"{what}: HTTP {resp.status}: answer is not JSON ({e}): {raw[:200]!r}", resp.status)
        if resp.status not in ok:
            msg = obj.get("message", "") if isinstance(obj, dict) else ""
            reason = obj.get("reason", "") if isinstance(obj, dict) else ""
            raise KubeError(f"{what}: HTTP {resp.status}: {msg or raw[:200]!r}", resp.status, reason)
        if not isinstance(obj, dict):
            raise KubeError(f"{what}: expected a JSON object, got {type(obj).__name__}")
        return resp.status, obj

    def list(self, path, params=None):
        """Every item of a list (pages of 500), and the list's resourceVersion."""
        params = dict(params or {})
        params["limit"] = "500"
        items = []
        while True:
            _, obj = self.request("GET", path + "?" + urllib.parse.urlencode(params))
            page = obj.get("items")
            if page is None:
                page = []
            if not isinstance(page, list):
                raise KubeError(f"GET {path}: items: expected an array, got {type(page).__name__}")
            for i, it in enumerate(page):
                if not isinstance(it, dict) or not isinstance(it.get("metadata"), dict):
                    raise KubeError(f"GET {path}: items[{len(items) + i}]: expected an object with metadata")
            items.extend(page)
            meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
            cont = meta.get("continue") or ""
            if not cont:
                rv = meta.get("resourceVersion", "")
                if not isinstance(rv, str):
                    raise KubeError(f"GET {path}: metadata.resourceVersion: expected a string")
                return items, rv
            params["continue"] = cont

    def watch(self, path, params, rv, stop, timeout_s=300):
        """Watch events (type, object) from resourceVersion rv until the server ends the stream.
        Raises KubeError with status 410 when rv is too old. `stop` (threading.Event) ends it: the
        socket is closed from stop_watches()."""
        q = dict(params or {})
        q.update({"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true",
                  "timeoutSeconds": str(timeout_s)})
        full = path + "?" + urllib.parse.urlencode(q)
        conn = self._conn(timeout=timeout_s + 90)
        with _watch_lock:
            _watches.add(conn)
        try:
            try:
                conn.request("GET", full, headers={"Accept": "application/json"})
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                raise KubeError(f"GET {full}: {e.__class__.__name__}: {e}")
            if resp.status != 200:
                raw = resp.read(1 << 16)
                raise KubeError(f"GET {full}: HTTP {resp.status}: {raw[:300]!r}", resp.status)
            while not stop.is_set():
                try:
                    line = resp.readline(MAX_EVENT + 1)
                except (OSError, http.client.HTTPException, ValueError) as e:
                    if stop.is_set():
                        return
                    raise KubeError(f"watch {path}: {e.__class__.__name__}: {e}")
                if not line:
                    return
                if len(line) > MAX_EVENT:
                    raise KubeError(f"watch {path}: an event larger than {MAX_EVENT} bytes")
                try:
                    ev = json.loads(line)
                except ValueError as e:
                    raise KubeError(f"watch {path}: an event that is not JSON ({e}): {line[:200]!r}")
                if not isinstance(ev, dict) or not isinstance(ev.get("object"), dict):
                    raise KubeError(f"watch {path}: an event without an object: {line[:200]!r}")
                typ, obj = ev.get("type"), ev["object"]
                if typ == "ERROR":
                    code = obj.get("code", 0)
                    raise KubeError(f"watch {path}: ERROR {code}: {obj.get('message', '')}",
                                    code if isinstance(code, int) else 0)
                if not isinstance(obj.get("metadata"), dict):
                    raise KubeError(f"watch {path}: {typ} event: object.metadata: expected an object")
                yield typ, obj
        finally:
            with _watch_lock:
                _watches.discard(conn)
            conn.close()

    def list_watch(self, path, params, stop, on_sync, on_event, prog="kwok"):
        """Informer-like: on_sync(items) after each (re)list, on_event(type, obj) for each change,
        until stop is set. Watch errors are retried with a backoff of 1..30 s (each logged)."""
        backoff = 1.0
        rv = None
        while not stop.is_set():
            try:
                if rv is None:
                    items, rv = self.list(path, params)
                    on_sync(items)
                for typ, obj in self.watch(path, params, rv, stop):
                    backoff = 1.0
                    nrv = obj["metadata"].get("resourceVersion")
                    if isinstance(nrv, str) and nrv:
                        rv = nrv
                    if typ != "BOOKMARK":
                        on_event(typ, obj)
            except KubeError as e:
                if stop.is_set():
                    return
                if e.status == 410:
                    log(prog, f"{e} (relisting)")
                    rv = None
                    continue
                log(prog, f"{e} (retrying in {backoff:.0f} s)")
                stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)


_watches = set()
_watch_lock = threading.Lock()


def stop_watches():
    """Close the sockets of open watches (from a signal handler or another thread)."""
    with _watch_lock:
        conns = list(_watches)
    for c in conns:
        try:
            if c.sock is not None:
                c.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def condition(node, ctype):
    conds = node.get("status", {}).get("conditions") if isinstance(node.get("status"), dict) else None
    if not isinstance(conds, list):
        return None
    for c in conds:
        if isinstance(c, dict) and c.get("type") == ctype:
            return c
    return None


# ------------------------------------------------------------------ the fake GPU nodes

def node_body(name, pool_index, version, agent_version):
    pool, product, family, memory, major, minor = POOLS[pool_index % len(POOLS)]
    if pool_index >= len(POOLS):
        pool = f"{pool}-{pool_index // len(POOLS)}"
    now = now_rfc3339()
    labels = {
        FAKE_LABEL: "true", POOL_LABEL: pool,
        "type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        # the node lifecycle controller would add these itself: one PATCH a node less for it
        "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product, "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": memory, "nvidia.com/gpu.family": family,
        "nvidia.com/gpu.compute.major": major, "nvidia.com/gpu.compute.minor": minor,
        "nvidia.com/gpu.machine": "kwok-fake", "nvidia.com/mig.capable": "false",
        DRIVER_LABEL: version,
    }
    labels.update(driver_labels(version))
    if agent_version:
        labels["gpunode.io/agent.version"] = agent_version
    res = {"cpu": "64", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {FAKE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"}},
        # podCIDR inside the controller manager's only /24 (cluster.sh's 10.244.0.0/24): its range
        # allocator then just marks it used, instead of failing (CIDRNotAvailable) and retrying for
        # every fake node forever. kwok hands the fake pods addresses from it (nothing routes them).
        "spec": {"taints": [{"key": TAINT_KEY, "value": "fake", "effect": "NoSchedule"}],
                 "podCIDR": "10.244.0.240/28", "podCIDRs": ["10.244.0.240/28"]},
        # Created Ready, as kwok's node-initialize stage would make it (same conditions, address,
        # nodeInfo, phase): the node lifecycle controller then never taints it not-ready (a taint
        # added and removed again per node, at the controller manager's 20 requests/s, held new
        # DaemonSet pods back for minutes with 1000 nodes). kwok renews its Lease from the start.
        "status": {
            "capacity": res, "allocatable": res, "phase": "Running",
            "addresses": [{"type": "InternalIP", "address": NODE_IP}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "bootID": "", "machineID": "",
                         "systemUUID": "", "osImage": "", "kernelVersion": KWOK_INFO,
                         "containerRuntimeVersion": KWOK_INFO, "kubeletVersion": KWOK_INFO,
                         "kubeProxyVersion": KWOK_INFO},
            "conditions": [
                cond("Ready", "True", "KubeletReady", "kubelet is posting ready status", now),
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available", now),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", now),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", now),
                cond("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route", now),
                cond(GPU_STACK, "True", "ChecksPassed", f"all checks passed (gpunode doctor) on driver {version}", now),
            ],
        },
    }


def cond(ctype, status, reason, message, now):
    return {"type": ctype, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": now, "lastTransitionTime": now}


def driver_labels(version):
    """GFD's split of the driver version (major/minor/revision) when it parses."""
    parts = version.split(".")
    out = {}
    if VERSION_RE.match(version) and len(parts) >= 2:
        out["nvidia.com/cuda.driver-version.major"] = parts[0]
        out["nvidia.com/cuda.driver-version.minor"] = parts[1]
        out["nvidia.com/cuda.driver-version.revision"] = parts[2] if len(parts) > 2 else "0"
    return out


def node_names(count, pools, prefix):
    """(name, pool index) for count nodes spread round-robin over pools, named <prefix><pool>-<n>."""
    out = []
    for i in range(count):
        p = i % pools
        pool = POOLS[p % len(POOLS)][0] + (f"-{p // len(POOLS)}" if p >= len(POOLS) else "")
        out.append((f"{prefix}{pool}-{i // pools:04d}", p))
    return out


def cmd_create(client, args):
    if not VERSION_RE.match(args.driver_version):
        raise KubeError(f"--driver-version {args.driver_version!r}: expected a version like 570.195.03")
    todo = node_names(args.count, args.pools, args.prefix)
    errors, created, existed = [], [0], [0]
    lock = threading.Lock()
    nxt = [0]

    def worker():
        while True:
            with lock:
                if nxt[0] >= len(todo) or len(errors) >= 10:
                    return
                name, p = todo[nxt[0]]
                nxt[0] += 1
            try:
                client.request("POST", "/api/v1/nodes", node_body(name, p, args.driver_version, args.agent_version))
                with lock:
                    created[0] += 1
            except KubeError as e:
                with lock:
                    if e.status == 409:
                        existed[0] += 1
                    else:
                        errors.append(f"node {name}: {e}")

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(max(1, args.parallel))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.monotonic() - t0
    for e in errors:
        log("kwok create-nodes", e)
    print(json.dumps({"created": created[0], "existed": existed[0], "errors": len(errors),
                      "seconds": round(dt, 3), "parallel": args.parallel}))
    return 1 if errors else 0


def cmd_wait_ready(client, args):
    """Until `count` fake nodes are Ready (list + watch of the fake nodes)."""
    stop = threading.Event()
    ready = {}
    t0 = time.monotonic()

    def is_ready(n):
        c = condition(n, "Ready")
        return c is not None and c.get("status") == "True"

    def check():
        if sum(ready.values()) >= args.count:
            stop.set()
            stop_watches()

    def on_sync(items):
        ready.clear()
        for n in items:
            ready[n["metadata"].get("name")] = is_ready(n)
        check()

    def on_event(typ, n):
        name = n["metadata"].get("name")
        if typ == "DELETED":
            ready.pop(name, None)
        else:
            ready[name] = is_ready(n)
        check()

    timer = threading.Timer(args.timeout, lambda: (stop.set(), stop_watches()))
    timer.daemon = True
    timer.start()
    client.list_watch("/api/v1/nodes", {"labelSelector": f"{FAKE_LABEL}=true"}, stop, on_sync, on_event,
                      prog="kwok wait-ready")
    timer.cancel()
    n = sum(ready.values())
    ready_s = round(time.monotonic() - t0, 3)
    if n < args.count:
        log("kwok wait-ready", f"only {n} of {args.count} fake nodes Ready after {args.timeout} s")
        return 1
    # kwok manages them: each has its Lease (kube-node-lease/<node>, held by kwok's id), which keeps
    # the node lifecycle controller from marking it NotReady after its 50 s grace
    names = {k for k, v in ready.items() if v}
    while True:
        leases, _ = client.list("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")
        held = sum(1 for ls in leases if ls["metadata"].get("name") in names
                   and isinstance(ls.get("spec"), dict) and ls["spec"].get("holderIdentity") and ls["spec"].get("renewTime"))
        if held >= len(names):
            break
        if time.monotonic() - t0 > args.timeout:
            log("kwok wait-ready", f"only {held} of {len(names)} fake nodes have a Lease after {args.timeout} s (is kwok running?)")
            return 1
        time.sleep(0.5)
    print(json.dumps({"ready": n, "nodes": len(ready), "ready_s": ready_s, "leases": held,
                      "seconds": round(time.monotonic() - t0, 3)}))
    return 0


def cmd_delete(client, args):
    t0 = time.monotonic()
    client.request("DELETE", "/api/v1/nodes?" + urllib.parse.urlencode({"labelSelector": f"{FAKE_LABEL}=true"}))
    print(json.dumps({"seconds": round(time.monotonic() - t0, 3)}))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeconfig", default=default_kubeconfig())
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("create-nodes", help="create N fake GPU nodes in P pools")
    c.add_argument("--count", type=int, required=True)
    c.add_argument("--pools", type=int, default=4)
    c.add_argument("--driver-version", default="570.195.03")
    c.add_argument("--agent-version", default="", help="gpunode.io/agent.version label (none when empty)")
    c.add_argument("--prefix", default="kwok-")
    c.add_argument("--parallel", type=int, default=8, help="concurrent POSTs (each thread one keep-alive connection)")
    w = sub.add_parser("wait-ready", help="wait until N fake nodes are Ready")
    w.add_argument("--count", type=int, required=True)
    w.add_argument("--timeout", type=float, default=300)
    sub.add_parser("delete-nodes", help="delete every fake node (one deletecollection request)")
    args = ap.parse_args()
    if args.cmd == "create-nodes" and not (0 < args.count <= 100000 and 0 < args.pools <= 64):
        ap.error("--count must be 1..100000 and --pools 1..64")
    try:
        client = Client(args.kubeconfig)
        return {"create-nodes": cmd_create, "wait-ready": cmd_wait_ready, "delete-nodes": cmd_delete}[args.cmd](client, args)
    except KubeError as e:
        log("kwok " + args.cmd, str(e))
        return 2


if __name__ == "__main__":
    sys.exit(main())
