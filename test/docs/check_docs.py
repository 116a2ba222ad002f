#!/usr/bin/env python3
"""The user docs and --help tell the truth about the repository (issue #14):

- every relative Markdown link in README.md, docs/*.md, deploy/**/README.md points at a file or
  folder that exists (anchors are not checked);
- every repository path those docs name in backticks (`src/...`, `docs/...`, `test/...`,
  `benchmarks/...`, `scripts/...`, `deploy/...`, `kernels/...`, `data/...`, `sim/...`) exists
  (a path with a glob or a placeholder like <x> is skipped);
- no internal tracker references ("issue #13", "(#14)") in user docs;
- every docs/... or repository path named in `gpunode [COMMAND...] --help` exists.

Usage: check_docs.py SOURCE_DIR [GPUNODE]
"""
import os
import re
import subprocess
import sys

src = os.path.abspath(sys.argv[1])
gpunode = sys.argv[2] if len(sys.argv) > 2 else None
problems = []

PATH_RE = re.compile(r"`((?:src|docs|test|benchmarks|scripts|deploy|kernels|data|sim|proto|fuzz|cmake|shared)/[^`\s]*)`")
LINK_RE = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
TRACKER_RE = re.compile(r"(?:\bissue #\d+|\(#\d+\)|\bissues? #\d+)", re.I)


def exists(rel, base):
    rel = rel.split("#", 1)[0].rstrip("/.,;:")
    if not rel:
        return True
    for root in (base, src):
        if os.path.exists(os.path.join(root, rel)):
            return True
    return False


def skip(p):
    return any(c in p for c in "*<>{}$|") or p.endswith("...") or "…" in p


docs = [os.path.join(src, "README.md")]
docs += sorted(os.path.join(src, "docs", f) for f in os.listdir(os.path.join(src, "docs")) if f.endswith(".md"))
for dirpath, _, files in os.walk(os.path.join(src, "deploy")):
    docs += [os.path.join(dirpath, f) for f in files if f == "README.md"]

for doc in docs:
    rel_doc = os.path.relpath(doc, src)
    base = os.path.dirname(doc)
    in_code = False
    for n, line in enumerate(open(doc, encoding="utf-8"), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        for target in LINK_RE.findall(line):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            if not exists(target, base):
                problems.append(f"{rel_doc}:{n}: link to {target}: no such file")
        if re.search(r"\.\./shared/", line):
            problems.append(f"{rel_doc}:{n}: names ../shared/, which is outside the repository")
        if in_code:
            continue
        for p in PATH_RE.findall(line):
            if skip(p):
                continue
            if not exists(p, src):
                problems.append(f"{rel_doc}:{n}: names {p}: no such file in the repository")
        for m in TRACKER_RE.finditer(line):
            # "NVIDIA/dcgm-exporter issue #176" names another project's tracker: fine.
            if re.search(r"[\w-]+/[\w.-]+ (?:PR #?\d+, )?$", line[: m.start()]):
                continue
            problems.append(f"{rel_doc}:{n}: internal tracker reference '{m.group(0)}' in user docs")


def helps(args):
    out = subprocess.run([gpunode] + args + ["--help"], capture_output=True, text=True, timeout=30).stdout
    yield args, out
    in_subs = False
    for line in out.splitlines():
        if re.match(r"^Subcommands:", line):
            in_subs = True
            continue
        if in_subs:
            m = re.match(r"^  (\S+)", line)
            if m:
                yield from helps(args + [m.group(1)])
            elif line.strip() == "" or not line.startswith(" "):
                in_subs = False


if gpunode:
    seen = set()
    for args, text in helps([]):
        for p in re.findall(r"\b((?:docs|deploy|scripts|benchmarks)/[A-Za-z0-9_./-]+[A-Za-z0-9_])", text):
            if skip(p) or (tuple(args), p) in seen:
                continue
            seen.add((tuple(args), p))
            if not exists(p, src):
                problems.append(f"gpunode {' '.join(args)} --help: names {p}: no such file in the repository")

for p in problems:
    print(p)
print(f"{len(docs)} documents checked" + (", every --help page" if gpunode else "") + f": {len(problems)} problems")
sys.exit(1 if problems else 0)
