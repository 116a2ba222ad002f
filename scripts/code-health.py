#!/usr/bin/env python3
"""Measures what the code-health issue (#17) tracks: the longest files and functions.

  scripts/code-health.py [--top N] [--json] [DIR ...]      (default: src sim test benchmarks)

Files: lines of every .cc/.h. Functions: universal-ctags' start and end line of every C++ function
definition (end - start + 1), so a lambda counts with the function that holds it. Needs ctags
(Debian's universal-ctags); exits 2 naming what is missing.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys


def sources(dirs):
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in files:
                if f.endswith((".cc", ".h")):
                    yield os.path.join(root, f)


def functions(paths):
    out = subprocess.run(
        ["ctags", "--output-format=json", "--fields=+ne", "--kinds-C++=f", "--language-force=C++",
         "-o", "-", *paths], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        t = json.loads(line)
        if t.get("_type") != "tag" or "end" not in t:
            continue
        scope = t.get("scope", "")
        name = (scope.split("::")[-1] + "::" if t.get("scopeKind") in ("class", "struct") else "") + t["name"]
        yield t["path"], t["line"], t["end"] - t["line"] + 1, name


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", default=["src", "sim", "test", "benchmarks"])
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not shutil.which("ctags"):
        print("code-health: ctags not found (apt-get install universal-ctags)", file=sys.stderr)
        return 2
    for d in a.dirs:
        if not os.path.isdir(d):
            print(f"code-health: {d}: not a folder", file=sys.stderr)
            return 2
    paths = sorted(p for p in sources(a.dirs) if not p.endswith(".inc"))
    files = sorted(((sum(1 for _ in open(p, encoding="utf-8", errors="replace")), p) for p in paths),
                   reverse=True)
    funcs = sorted(((n, p, l, name) for p, l, n, name in functions(paths)), reverse=True)
    over_file = [f for f in files if f[0] > 700]
    over_func = [f for f in funcs if f[0] > 120]
    if a.json:
        json.dump({"files": len(files), "lines": sum(n for n, _ in files),
                   "files_over_700": [{"path": p, "lines": n} for n, p in over_file],
                   "functions_over_120": [{"path": p, "line": l, "name": nm, "lines": n}
                                          for n, p, l, nm in over_func],
                   "longest_file": {"path": files[0][1], "lines": files[0][0]},
                   "longest_function": {"path": funcs[0][1], "line": funcs[0][2], "name": funcs[0][3],
                                        "lines": funcs[0][0]}}, sys.stdout, indent=1)
        print()
        return 0
    print(f"{len(files)} files, {sum(n for n, _ in files)} lines, {len(funcs)} functions")
    print(f"files over 700 lines: {len(over_file)}; functions over 120 lines: {len(over_func)}")
    print(f"\nlongest files:")
    for n, p in files[:a.top]:
        print(f"  {n:6d}  {p}")
    print(f"\nlongest functions:")
    for n, p, l, nm in funcs[:a.top]:
        print(f"  {n:6d}  {p}:{l}  {nm}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
