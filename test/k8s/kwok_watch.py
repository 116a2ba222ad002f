#!/usr/bin/env python3
"""kwok_watch.py: proves (or refutes) the driver-upgrade controller's maxUnavailable limit, from a
watch of every Node (list + watch; resumes, relists on 410 Gone).

Pools: the label nvidia.com/gpu-operator.driver.owner (one NVIDIADriver = one pool); nodes without it
are in no pool. At every event the node's two flags are updated and its pool's counts with them:
  unavailable  spec.unschedulable, or Ready not True, or upgrade state (label
               nvidia.com/gpu-driver-upgrade-state) in cordon-required .. uncordon-required
               (upgrade-contract.md's definition of what maxUnavailable counts)
  in progress  an upgrade state other than upgrade-required and upgrade-done (NVIDIA's
               GetUpgradesInProgress: upgrade-failed counts, as it holds its slot)
The maximum of each per pool over time is recorded (with the time and the event that reached it).

  kwok_watch.py [--kubeconfig F] [--max-unavailable POOL=N]... [--max-in-progress POOL=N]...
                [--until-all-state upgrade-done[,upgrade-failed]] [--timeout SECS] [--fail-fast]
                [--output FILE] [--pool-label KEY] [-v]

--max-unavailable POOL=N (POOL `*`: every pool): a count above N is a violation, reported when an
event makes one more node count while the pool is above N: printed on stderr with that event (type,
node, resourceVersion, its state and why it is unavailable, seconds since the start) and the pool's
nodes that count then. --max-in-progress the same for in-progress nodes. It ends on SIGTERM/SIGINT, or once every node in a pool has one of the
--until-all-state states (checked at each event, at least one pool node needed), or at --timeout.
Then it writes the JSON summary (--output, default stdout): per pool its nodes, the maxima and when,
the final state counts, the violations; the number of events.
Exit: 0 no violation; 1 a violation; 2 bad arguments, or the API server cannot be read at start;
3 --timeout reached before --until-all-state held.
"""
import argparse
import json
import os
import signal
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the repository
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwok_kube as kk  # noqa: E402

PROG = "kwok_watch"
STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
OWNER_LABEL = "nvidia.com/gpu-operator.driver.owner"
STATES = ["upgrade-required", "cordon-required", "wait-for-jobs-required", "pod-deletion-required",
          "drain-required", "pod-restart-required", "validation-required", "uncordon-required",
          "upgrade-done", "upgrade-failed"]
UNAVAILABLE_STATES = set(STATES[STATES.index("cordon-required"):STATES.index("uncordon-required") + 1])
IDLE_STATES = {"", "upgrade-required", "upgrade-done"}
MAX_VIOLATIONS_KEPT = 100
MAX_NODES = 100000  # nodes tracked at most; past it a new node is counted in "untracked", not in its pool


def limits(values, flag):
    out = {}
    for v in values:
        pool, sep, n = v.rpartition("=")
        if not sep or not pool or not n.isdigit():
            kk.log(PROG, f"{flag} {v!r}: expected POOL=N (POOL * for every pool)")
            sys.exit(2)
        out[pool] = int(n)
    return out


class Watch:
    def __init__(self, args):
        self.args = args
        self.max_unavail = limits(args.max_unavailable, "--max-unavailable")
        self.max_progress = limits(args.max_in_progress, "--max-in-progress")
        self.until = set(args.until_all_state.split(",")) if args.until_all_state else set()
        bad = self.until - set(STATES)
        if bad:
            kk.log(PROG, f"--until-all-state: unknown state(s) {', '.join(sorted(bad))} (known: {', '.join(STATES)})")
            sys.exit(2)
        self.nodes = {}     # name -> (pool, unavailable, in_progress, state)
        self.pools = {}     # pool -> dict of counters and maxima
        self.violations = []
        self.nviolations = 0
        self.events = 0
        self.t0 = time.time()
        self.stop = threading.Event()
        self.reached = False
        self.malformed = 0
        self.untracked = 0
        self.in_until = 0  # nodes (in a pool) whose state is one of --until-all-state

    def pool(self, name):
        p = self.pools.get(name)
        if p is None:
            p = self.pools[name] = {"nodes": 0, "unavailable": 0, "inProgress": 0, "states": {},
                                    "maxUnavailable": 0, "maxUnavailableAt": None, "maxUnavailableEvent": None,
                                    "maxInProgress": 0, "maxInProgressAt": None, "violations": 0}
        return p

    def flags(self, node):
        """(pool, unavailable, in progress, state, why) of a Node; None for a node in no pool."""
        meta = node["metadata"]
        labels = meta.get("labels")
        labels = labels if isinstance(labels, dict) else {}
        pool = labels.get(self.args.pool_label)
        if not isinstance(pool, str) or not pool or len(pool) > 253:
            return None
        state = labels.get(STATE_LABEL, "")
        if not isinstance(state, str) or len(state) > 63:
            self.malformed += 1
            state = "?"
        spec = node.get("spec") if isinstance(node.get("spec"), dict) else {}
        unsched = spec.get("unschedulable") is True
        ready = kk.condition(node, "Ready")
        notready = not (isinstance(ready, dict) and ready.get("status") == "True")
        why = [w for w, on in (("unschedulable", unsched), ("NotReady", notready),
                               (f"state {state}", state in UNAVAILABLE_STATES)) if on]
        return pool, bool(why), state not in IDLE_STATES, state, why

    def apply(self, name, new, typ, rv):
        """Moves node `name` to its new flags (None: gone/in no pool), updates the pool counts, the
        maxima and the limits' verdicts."""
        old = self.nodes.pop(name, None)
        if old is not None:
            p = self.pools[old[0]]
            p["nodes"] -= 1
            p["unavailable"] -= old[1]
            p["inProgress"] -= old[2]
            p["states"][old[3]] -= 1
            self.in_until -= old[3] in self.until
        if new is None:
            return
        if len(self.nodes) >= MAX_NODES:
            self.untracked += 1
            return
        pool, unavail, prog, state, why = new
        self.nodes[name] = (pool, unavail, prog, state)
        self.in_until += state in self.until
        # a violation is reported when this event makes the node count (newly, or in another pool)
        was_unavail = old is not None and old[0] == pool and old[1]
        was_prog = old is not None and old[0] == pool and old[2]
        p = self.pool(pool)
        p["nodes"] += 1
        p["unavailable"] += unavail
        p["inProgress"] += prog
        p["states"][state] = p["states"].get(state, 0) + 1
        t = round(time.time() - self.t0, 3)
        event = {"type": typ, "node": name, "resourceVersion": rv, "state": state, "unavailable": why, "t": t}
        if p["unavailable"] > p["maxUnavailable"]:
            p.update(maxUnavailable=p["unavailable"], maxUnavailableAt=t, maxUnavailableEvent=event)
        if p["inProgress"] > p["maxInProgress"]:
            p.update(maxInProgress=p["inProgress"], maxInProgressAt=t)
        for what, lim, count in (("unavailable", self.max_unavail, p["unavailable"]),
                                 ("in progress", self.max_progress, p["inProgress"])):
            n = lim.get(pool, lim.get("*"))
            rises = (unavail and not was_unavail) if what == "unavailable" else (prog and not was_prog)
            if n is not None and count > n and rises:
                self.violation(pool, what, count, n, event)

    def violation(self, pool, what, count, limit, event):
        members = sorted(n for n, f in self.nodes.items() if f[0] == pool and (f[1] if what == "unavailable" else f[2]))
        v = {"pool": pool, "what": what, "count": count, "limit": limit, "event": event,
             "nodes": members[:50] + ([f"... {len(members) - 50} more"] if len(members) > 50 else [])}
        self.pools[pool]["violations"] += 1
        self.nviolations += 1
        if len(self.violations) < MAX_VIOLATIONS_KEPT:
            self.violations.append(v)
        kk.log(PROG, f"VIOLATION pool {pool}: {count} nodes {what} > limit {limit}, after {event['type']} of node "
                     f"{event['node']} (resourceVersion {event['resourceVersion']}, state {event['state'] or '-'}, "
                     f"{', '.join(event['unavailable']) or 'available'}) at +{event['t']} s; {what}: {', '.join(v['nodes'])}")
        if self.args.fail_fast:
            self.end()

    def check_until(self):
        if not self.until or not self.nodes:
            return
        if self.in_until == len(self.nodes):
            self.reached = True
            self.end()

    def on_sync(self, items):
        seen = set()
        for n in items:
            name = n["metadata"].get("name")
            if not isinstance(name, str):
                continue
            seen.add(name)
            self.events += 1
            self.apply(name, self.flags(n), "SYNC", n["metadata"].get("resourceVersion"))
        for name in [x for x in self.nodes if x not in seen]:
            self.apply(name, None, "SYNC-GONE", None)
        self.check_until()

    def on_event(self, typ, n):
        name = n["metadata"].get("name")
        if not isinstance(name, str):
            return
        self.events += 1
        self.apply(name, None if typ == "DELETED" else self.flags(n), typ, n["metadata"].get("resourceVersion"))
        if self.args.verbose:
            f = self.nodes.get(name)
            kk.log(PROG, f"{typ} {name}: {f}")
        self.check_until()

    def end(self, *_):
        self.stop.set()
        kk.stop_watches()

    def summary(self):
        pools = {}
        for name, p in sorted(self.pools.items()):
            lim = self.max_unavail.get(name, self.max_unavail.get("*"))
            pools[name] = {"nodes": p["nodes"], "maxUnavailable": p["maxUnavailable"],
                           "maxUnavailableAt": p["maxUnavailableAt"], "maxUnavailableEvent": p["maxUnavailableEvent"],
                           "limitUnavailable": lim,
                           "maxInProgress": p["maxInProgress"], "maxInProgressAt": p["maxInProgressAt"],
                           "limitInProgress": self.max_progress.get(name, self.max_progress.get("*")),
                           "violations": p["violations"],
                           "unavailableNow": p["unavailable"], "inProgressNow": p["inProgress"],
                           "states": {k or "(none)": v for k, v in sorted(p["states"].items()) if v}}
        return {"kind": "KwokWatchSummary", "seconds": round(time.time() - self.t0, 3), "events": self.events,
                "poolLabel": self.args.pool_label, "untilAllState": sorted(self.until) or None,
                "untilReached": self.reached if self.until else None, "violations": self.nviolations,
                "violationList": self.violations, "malformedStateLabels": self.malformed,
                "untrackedNodes": self.untracked, "pools": pools}


def main():
    ap = argparse.ArgumentParser(prog="kwok_watch.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeconfig", default=kk.default_kubeconfig())
    ap.add_argument("--max-unavailable", action="append", default=[], metavar="POOL=N")
    ap.add_argument("--max-in-progress", action="append", default=[], metavar="POOL=N")
    ap.add_argument("--until-all-state", metavar="STATE[,STATE]")
    ap.add_argument("--timeout", type=float, default=0, help="seconds; 0: none")
    ap.add_argument("--fail-fast", action="store_true", help="end at the first violation")
    ap.add_argument("--output", help="the JSON summary's file (default stdout)")
    ap.add_argument("--pool-label", default=OWNER_LABEL)
    ap.add_argument("-v", "--verbose", action="store_true", help="log every event")
    args = ap.parse_args()
    w = Watch(args)
    try:
        client = kk.Client(args.kubeconfig)
        client.request("GET", "/api/v1/nodes?limit=1")
    except kk.KubeError as e:
        kk.log(PROG, str(e))
        return 2
    signal.signal(signal.SIGTERM, w.end)
    signal.signal(signal.SIGINT, w.end)
    timed_out = []
    if args.timeout > 0:
        timer = threading.Timer(args.timeout, lambda: (timed_out.append(1), w.end()))
        timer.daemon = True
        timer.start()
    t = threading.Thread(target=client.list_watch, daemon=True,
                         args=("/api/v1/nodes", {}, w.stop, w.on_sync, w.on_event, PROG))
    t.start()
    while t.is_alive():
        t.join(0.5)
    s = w.summary()
    s["timedOut"] = bool(timed_out) and not w.reached
    text = json.dumps(s, indent=1)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    for name, p in s["pools"].items():
        kk.log(PROG, f"pool {name}: {p['nodes']} nodes, max unavailable {p['maxUnavailable']}"
                     f"{'' if p['limitUnavailable'] is None else ' (limit %d)' % p['limitUnavailable']}, "
                     f"max in progress {p['maxInProgress']}, violations {p['violations']}")
    if w.nviolations:
        return 1
    return 3 if s["timedOut"] and w.until else 0


if __name__ == "__main__":
    sys.exit(main())
