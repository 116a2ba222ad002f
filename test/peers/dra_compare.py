#!/usr/bin/env python3
"""Compares the ResourceSlices of two DRA drivers for the same node (test/peers/dra_test.sh).

  dra_compare.py GPUNODE-SLICES.json NVIDIA-SLICES.json > found.tsv

Each input is a ResourceSliceList (kubectl get resourceslices -o json). Prints one difference per
line, "slice<TAB>ASPECT<TAB>details" (the format of expect_differences.py): the device names, each
attribute and capacity (ASPECT "attribute NAME" / "capacity NAME", details: the first device where
they differ and both values), each other device field and each slice field outside the devices.
"""
import json
import sys


def load(path):
    items = json.load(open(path))["items"]
    devices, spec = {}, {}
    for s in items:
        for d in s["spec"].get("devices", []):
            devices[d["name"]] = d
        rest = {k: v for k, v in s["spec"].items() if k != "devices"}
        spec.update(rest)
    return devices, spec


def value(v):
    if isinstance(v, dict) and len(v) == 1:
        return json.dumps(next(iter(v.values())))
    return json.dumps(v, sort_keys=True)


def main():
    ours, our_spec = load(sys.argv[1])
    theirs, their_spec = load(sys.argv[2])
    out = []
    only_ours, only_theirs = sorted(set(ours) - set(theirs)), sorted(set(theirs) - set(ours))
    if only_ours or only_theirs:
        out.append(("devices", f"only gpunode: {only_ours}; only NVIDIA: {only_theirs}"))
    common = sorted(set(ours) & set(theirs))
    for field in ("attributes", "capacity"):
        keys = sorted({k for n in common for k in ours[n].get(field, {})} |
                      {k for n in common for k in theirs[n].get(field, {})})
        for k in keys:
            for n in common:
                a, b = ours[n].get(field, {}).get(k), theirs[n].get(field, {}).get(k)
                if a != b:
                    what = "attribute" if field == "attributes" else "capacity"
                    shown = lambda v: "(none)" if v is None else value(v)
                    out.append((f"{what} {k}", f"{n}: gpunode {shown(a)}, NVIDIA {shown(b)}"))
                    break
    others = sorted({k for n in common for k in ours[n]} | {k for n in common for k in theirs[n]})
    for k in others:
        if k in ("name", "attributes", "capacity"):
            continue
        for n in common:
            a, b = ours[n].get(k), theirs[n].get(k)
            if a != b:
                out.append((f"device {k}", f"{n}: gpunode {json.dumps(a)}, NVIDIA {json.dumps(b)}"))
                break
    for k in sorted(set(our_spec) | set(their_spec)):
        a, b = our_spec.get(k), their_spec.get(k)
        if k == "pool":  # the generation counts each driver's own writes
            a = {x: y for x, y in (a or {}).items() if x != "generation"}
            b = {x: y for x, y in (b or {}).items() if x != "generation"}
        if a != b:
            out.append((f"slice {k}", f"gpunode {json.dumps(a)}, NVIDIA {json.dumps(b)}"))
    if not common:
        sys.exit(f"no device in both: gpunode {sorted(ours)}, NVIDIA {sorted(theirs)}")
    attrs = {k for n in common for k in ours[n].get("attributes", {})}
    caps = {k for n in common for k in ours[n].get("capacity", {})}
    print(f"compared {len(common)} devices, {len(attrs)} attributes and {len(caps)} capacities each: "
          f"{len(out)} difference(s)", file=sys.stderr)
    for aspect, details in out:
        print(f"slice\t{aspect}\t{details}")


if __name__ == "__main__":
    main()
