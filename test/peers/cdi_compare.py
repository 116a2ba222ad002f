#!/usr/bin/env python3
"""Compares CDI specs written by `nvidia-ctk cdi generate` and `gpunode cdi generate` on the same
host root (test/peers/cdi_test.sh), against the expected differences in cdi_differences.txt.

    cdi_compare.py --differences FILE RUN...      RUN = LABEL=NVIDIA_CTK_JSON,GPUNODE_JSON,ROOT

Each spec is reduced to a set of facts, one line each, with the root in host paths written as $ROOT:

    cdiVersion 0.5.0
    device <name>                                  a device the spec offers
    device <name> node <path> host=$ROOT/<path>    a device node of that device
    device <name> node <path> <field>=<value>      its other fields (major, minor, type, ...)
    common node|mount|env|hook ...                 the same for the spec-level edits
    common mount <containerPath> host=$ROOT/<path> options=<o1,o2,...>
    common hook <hookName> <subcommand> <arg>      one fact per argument; create-symlinks gives one
                                                   `link TARGET::LINK` fact per link, so links split
                                                   over several hooks compare equal
    common hook <hookName> <subcommand> env <VAR=value>

The hook program is not compared (nvidia-cdi-hook vs `gpunode cdi hook`): what the hook does is.

The differences file lists, one a line, `SIDE GLOB` (fnmatch) with SIDE `nvidia-ctk-only` or
`gpunode-only`, optionally scoped `SIDE GLOB @ RUNGLOB` to runs whose label matches RUNGLOB
(labels are PROFILE/STRATEGY); `#` starts a comment. A fact on one side only that no line
matches is an unexpected difference; a line that matches no fact in any run is stale. Either
fails (exit 1) with the facts or lines printed.
"""
import argparse
import fnmatch
import json
import sys


def rel(path, root):
    """A host path with the root written as $ROOT, so a path outside the root still differs."""
    if root and (path == root or path.startswith(root + "/")):
        return "$ROOT" + path[len(root):]
    return path


def hook_facts(prefix, hook):
    """What a hook does: its subcommand and arguments, whichever program runs it."""
    args = list(hook.get("args") or [])
    if args[:3] == ["gpunode", "cdi", "hook"]:
        args = args[3:]
    elif args and args[0] == "nvidia-cdi-hook":
        args = args[1:]
    elif args and args[0] == "nvidia-ctk" and args[1:2] == ["hook"]:
        args = args[2:]
    sub = args[0] if args else "<none>"
    head = "%s hook %s %s" % (prefix, hook.get("hookName", "?"), sub)
    facts = set()
    rest = args[1:]
    i = 0
    pending = []
    while i < len(rest):
        a = rest[i]
        if a.startswith("--") and "=" not in a and i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            facts.add("%s %s %s" % (head, a.lstrip("-"), rest[i + 1]))
            i += 2
            continue
        pending.append(a)
        i += 1
    for a in pending:
        facts.add("%s %s" % (head, a.lstrip("-") if a.startswith("--") else a))
    if not rest:
        facts.add(head)
    for e in hook.get("env") or []:
        facts.add("%s env %s" % (head, e))
    if hook.get("timeout") is not None:
        facts.add("%s timeout %s" % (head, hook["timeout"]))
    return facts


def edit_facts(prefix, edits, root):
    facts = set()
    for n in edits.get("deviceNodes") or []:
        path = n.get("path", "?")
        facts.add("%s node %s host=%s" % (prefix, path, rel(n.get("hostPath") or path, root)))
        for key in sorted(n):
            if key not in ("path", "hostPath"):
                facts.add("%s node %s %s=%s" % (prefix, path, key, n[key]))
    for m in edits.get("mounts") or []:
        facts.add("%s mount %s host=%s options=%s" % (prefix, m.get("containerPath", "?"),
                                                      rel(m.get("hostPath", "?"), root),
                                                      ",".join(m.get("options") or [])))
        if m.get("type"):
            facts.add("%s mount %s type=%s" % (prefix, m.get("containerPath", "?"), m["type"]))
    for e in edits.get("env") or []:
        facts.add("%s env %s" % (prefix, e))
    for h in edits.get("hooks") or []:
        facts |= hook_facts(prefix, h)
    for g in edits.get("additionalGids") or []:
        facts.add("%s additionalGid %s" % (prefix, g))
    for key in sorted(edits):
        if key not in ("deviceNodes", "mounts", "env", "hooks", "additionalGids"):
            facts.add("%s %s=%s" % (prefix, key, json.dumps(edits[key], sort_keys=True)))
    return facts


def spec_facts(path, root):
    with open(path) as f:
        spec = json.load(f)
    facts = {"kind %s" % spec.get("kind"), "cdiVersion %s" % spec.get("cdiVersion")}
    for d in spec.get("devices") or []:
        name = d.get("name", "?")
        facts.add("device %s" % name)
        facts |= edit_facts("device %s" % name, d.get("containerEdits") or {}, root)
        for key in sorted(d):
            if key not in ("name", "containerEdits"):
                facts.add("device %s %s=%s" % (name, key, json.dumps(d[key], sort_keys=True)))
    facts |= edit_facts("common", spec.get("containerEdits") or {}, root)
    return facts


def read_differences(path):
    rules = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            scope = "*"
            if " @ " in line:
                line, scope = (s.strip() for s in line.rsplit(" @ ", 1))
            side, _, glob = line.partition(" ")
            if side not in ("nvidia-ctk-only", "gpunode-only") or not glob.strip():
                sys.exit("%s:%d: expected 'nvidia-ctk-only|gpunode-only GLOB [@ RUNGLOB]'" % (path, lineno))
            rules.append({"line": lineno, "side": side, "glob": glob.strip(), "scope": scope, "used": 0})
    return rules


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--differences", required=True)
    ap.add_argument("--verbose", action="store_true", help="print every fact on one side only")
    ap.add_argument("runs", nargs="+")
    args = ap.parse_args()
    rules = read_differences(args.differences)
    failed = False
    for run in args.runs:
        label, _, files = run.partition("=")
        ctk_json, gpunode_json, root = files.split(",")
        root = root.rstrip("/")
        ctk = spec_facts(ctk_json, root)
        ours = spec_facts(gpunode_json, root)
        unexpected = []
        listed = 0
        for side, only in (("nvidia-ctk-only", ctk - ours), ("gpunode-only", ours - ctk)):
            for fact in sorted(only):
                hit = [r for r in rules if r["side"] == side and fnmatch.fnmatchcase(label, r["scope"])
                       and fnmatch.fnmatchcase(fact, r["glob"])]
                for r in hit:
                    r["used"] += 1
                if hit:
                    listed += 1
                    if args.verbose:
                        print("  listed  %s: %s" % (side, fact))
                else:
                    unexpected.append("%s: %s" % (side, fact))
        devices = sorted(f[len("device "):] for f in ctk & ours if f.startswith("device ") and f.count(" ") == 1)
        status = "equal" if not (ctk ^ ours) else ("listed differences only" if not unexpected else "UNEXPECTED")
        print("%-24s %3d facts in common (%d devices), %d listed differences: %s"
              % (label, len(ctk & ours), len(devices), listed, status))
        if unexpected:
            failed = True
            print("  differences not in %s (add a line there and to docs/cdi.md, or fix gpunode):"
                  % args.differences)
            for u in unexpected:
                print("    " + u)
    stale = [r for r in rules if r["used"] == 0]
    if stale:
        failed = True
        print("stale lines in %s (the difference no longer occurs: remove them and their row in docs/cdi.md):"
              % args.differences)
        for r in stale:
            print("  line %d: %s %s%s" % (r["line"], r["side"], r["glob"],
                                          "" if r["scope"] == "*" else " @ " + r["scope"]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
