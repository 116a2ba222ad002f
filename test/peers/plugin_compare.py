#!/usr/bin/env python3
"""Compares what NVIDIA's device plugin and gpunode's answered to the same kubelet questions
(plugin_probe's JSON, test/peers/plugin_run.sh), on the same simulated node and config.

  plugin_compare.py CASE NVIDIA.json GPUNODE.json --sim-lib LIB --profile FILE [--roots A B]

Prints one line per difference, "CASE<TAB>ASPECT<TAB>nvidia=...<TAB>gpunode=...", and nothing
for answers that are equal after normalising what carries no meaning:
  * order of lists the kubelet treats as sets (devices, env lists of ids, mounts, device specs);
  * the host root's folder (each plugin's simulated node lives in its own temporary folder);
  * GetPreferredAllocation choices that differ but are equally good: the same size, the same
    NUMA nodes and the same sum of NVML topology levels between every pair of GPUs (NVML's
    nvmlDeviceGetTopologyCommonAncestor, asked of the simulated NVML itself), i.e. a tie broken
    another way; for time-sliced replicas, the same number of distinct GPUs. Such ties are
    counted and printed on stderr, not reported as differences.
"""
import argparse
import ctypes
import json
import os
import re
import sys


class Topology:
    """Pairwise NVML topology levels of the simulated node, by GPU UUID."""

    def __init__(self, lib_path, profile):
        os.environ["GPUNODE_SIM_PROFILE"] = profile
        self.lib = ctypes.CDLL(lib_path)
        if self.lib.nvmlInit_v2() != 0:
            raise SystemExit(f"plugin_compare: nvmlInit_v2 of {lib_path} failed")
        self.cache = {}

    def handle(self, uuid):
        h = ctypes.c_void_p()
        if self.lib.nvmlDeviceGetHandleByUUID(uuid.encode(), ctypes.byref(h)) != 0:
            return None
        return h

    def level(self, a, b):
        key = (a, b)
        if key not in self.cache:
            ha, hb = self.handle(a), self.handle(b)
            lvl = ctypes.c_int(-1)
            if ha is None or hb is None or self.lib.nvmlDeviceGetTopologyCommonAncestor(ha, hb, ctypes.byref(lvl)) != 0:
                self.cache[key] = None
            else:
                self.cache[key] = lvl.value
        return self.cache[key]


def parent(device_id):
    """The GPU behind a device id: "GPU-x::2" (a time-sliced replica) -> "GPU-x"."""
    return device_id.split("::")[0]


def strip_root(path, roots):
    for r in roots:
        if r and path.startswith(r.rstrip("/") + "/"):
            return path[len(r.rstrip("/")):]
    # gpunode --simulate writes its node to a temporary folder of its own.
    m = re.match(r"^/tmp/[^/]*gpunode[^/]*(/.*)$", path)
    return m.group(1) if m else path


def norm_env_value(v):
    if "," in v or v.startswith("GPU-") or v.startswith("MIG-"):
        return ",".join(sorted(v.split(",")))
    return v


def norm_response(resp, roots):
    out = {}
    crs = resp.get("container_responses", [])
    if len(crs) != 1:
        return {"container_responses": len(crs)}
    c = crs[0]
    out["envs"] = {k: norm_env_value(v) for k, v in sorted(c.get("envs", {}).items())}
    out["mounts"] = sorted(
        (m.get("container_path", ""), strip_root(m.get("host_path", ""), roots), bool(m.get("read_only", False)))
        for m in c.get("mounts", []))
    out["devices"] = sorted(
        (d.get("container_path", ""), strip_root(d.get("host_path", ""), roots), d.get("permissions", ""))
        for d in c.get("devices", []))
    # CDI device names "KIND=NAME": the names are compared here, the kinds (and the annotation
    # keys, "<prefix>/<plugin>_<unique id>") as aspects of their own, so that a different kind is
    # one listed difference rather than one per request.
    kinds = set()

    def names(values):
        out_names = []
        for v in values:
            kind, _, name = v.partition("=")
            kinds.add(kind)
            out_names.append(name)
        return sorted(out_names)

    out["annotations"] = {}
    keys = set()
    for k, v in c.get("annotations", {}).items():
        prefix, _, unique = k.rpartition("_")
        keys.add(prefix + "_" + ("<uuid>" if re.match(r"^(GPU|MIG)-", unique) else "<random>"))
        out["annotations"].setdefault(prefix.split("/")[0], []).extend(names(v.split(",")))
    out["annotations"] = {k: sorted(v) for k, v in out["annotations"].items()}
    out["cdi_devices"] = names(d.get("name", "") for d in c.get("cdi_devices", []))
    out["cdi kind"] = sorted(kinds)
    out["annotation key"] = sorted(keys)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("nvidia")
    ap.add_argument("gpunode")
    ap.add_argument("--sim-lib", required=True)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--roots", nargs="*", default=[])
    a = ap.parse_args()
    n = json.load(open(a.nvidia))
    g = json.load(open(a.gpunode))
    topo = Topology(a.sim_lib, a.profile)
    diffs = []
    ties = 0

    def diff(aspect, nv, gv):
        diffs.append(f"{a.case}\t{aspect}\tnvidia={json.dumps(nv, sort_keys=True)}\tgpunode={json.dumps(gv, sort_keys=True)}")

    if "start_error" in n or "start_error" in g:
        # Both refusing the configuration is agreement; the texts differ by design (each its own).
        if ("start_error" in n) != ("start_error" in g):
            diff("start", n.get("start_error", "started"), g.get("start_error", "started"))
        for d in diffs:
            print(d)
        print(f"plugin_compare: {a.case}: both refused to start: nvidia: {n.get('start_error', '')[-200:]!r}; "
              f"gpunode: {g.get('start_error', '')[-200:]!r}" if not diffs else
              f"plugin_compare: {a.case}: {len(diffs)} difference(s)", file=sys.stderr)
        return
    nres, gres = n.get("resources", {}), g.get("resources", {})
    if sorted(nres) != sorted(gres):
        diff("resources", sorted(nres), sorted(gres))
    for res in sorted(set(nres) & set(gres)):
        nr, gr = nres[res], gres[res]
        if nr.get("options") != gr.get("options"):
            diff(f"{res} options", nr.get("options"), gr.get("options"))
        ndev = {d["id"]: d for d in nr.get("devices", [])}
        gdev = {d["id"]: d for d in gr.get("devices", [])}
        if sorted(ndev) != sorted(gdev):
            diff(f"{res} device ids", sorted(ndev), sorted(gdev))
        for aspect in ("health", "numa"):
            nv = {i: d.get(aspect) for i, d in ndev.items() if i in gdev}
            gv = {i: d.get(aspect) for i, d in gdev.items() if i in ndev}
            if nv != gv:
                diff(f"{res} device {aspect}", nv, gv)
        numa = {i: tuple(d.get("numa", [])) for i, d in ndev.items()}

        def quality(ids):
            gpus = [parent(i) for i in ids]
            if any("::" in i for i in ids):
                # Shared (time-sliced) replicas: NVIDIA's plugin spreads them over the GPUs with the
                # fewest allocated replicas and ignores topology (ties fall to Go's map order, so
                # its choice varies run to run); what both must do is spread.
                return (len(ids), len(set(gpus)))
            levels = 0
            for x in range(len(gpus)):
                for y in range(x + 1, len(gpus)):
                    if gpus[x] == gpus[y]:
                        continue
                    lvl = topo.level(gpus[x], gpus[y])
                    levels += 1000 if lvl is None else lvl
            return (len(ids), len(set(gpus)), sorted({numa.get(i, ()) for i in ids}), levels)

        npref = {p["request"]: p for p in nr.get("preferred", [])}
        gpref = {p["request"]: p for p in gr.get("preferred", [])}
        for req in sorted(set(npref) | set(gpref)):
            np_, gp = npref.get(req, {}), gpref.get(req, {})
            if "error" in np_ or "error" in gp:
                ne, ge = np_.get("error", {}).get("code"), gp.get("error", {}).get("code")
                if ne != ge:
                    diff(f"{res} preferred [{req}]", np_.get("error", "ok"), gp.get("error", "ok"))
                continue
            nset, gset = sorted(np_.get("devices", [])), sorted(gp.get("devices", []))
            if nset == gset:
                continue
            if quality(nset) == quality(gset):
                ties += 1
                continue
            diff(f"{res} preferred [{req}]", {"devices": nset, "quality": quality(nset)},
                 {"devices": gset, "quality": quality(gset)})
        nal = {tuple(x["ids"]): x for x in nr.get("allocate", [])}
        gal = {tuple(x["ids"]): x for x in gr.get("allocate", [])}
        for ids in sorted(set(nal) | set(gal), key=len):
            na, ga = nal.get(ids, {}), gal.get(ids, {})
            size = f"{res} allocate {len(ids)}"
            if "error" in na or "error" in ga or not na or not ga:
                if na.get("error", {}).get("code") != ga.get("error", {}).get("code") or not na or not ga:
                    diff(f"{size} status", na.get("error", "ok"), ga.get("error", "ok"))
                continue
            nn = norm_response(na["response"], a.roots)
            gn = norm_response(ga["response"], a.roots)
            for part in sorted(set(nn) | set(gn)):
                if part == "envs":
                    # One aspect per variable, so that a variable one side sets by design is one
                    # listed difference and any other variable still has to agree.
                    ne, ge = nn.get(part, {}), gn.get(part, {})
                    for var in sorted(set(ne) | set(ge)):
                        if ne.get(var) != ge.get(var):
                            diff(f"{size} env {var}", ne.get(var), ge.get(var))
                    continue
                if nn.get(part) != gn.get(part):
                    # Kinds and annotation keys: once per resource, not once per request size.
                    aspect = f"{res} {part}" if part in ("cdi kind", "annotation key") else f"{size} {part}"
                    if not any(d.split("\t")[1] == aspect for d in diffs):
                        diff(aspect, nn.get(part), gn.get(part))
    for d in diffs:
        print(d)
    print(f"plugin_compare: {a.case}: {len(diffs)} difference(s), {ties} preferred-allocation tie(s) broken differently", file=sys.stderr)


if __name__ == "__main__":
    main()
