#!/usr/bin/env python3
"""scripts/unity-clash.py ROOT FOLDER...: the names that files of one folder each define at file
scope with internal linkage (anonymous namespace or static). In a unity build (cmake/Unity.cmake)
they meet in one translation unit, where the same name is an error (redefinition) or, worse, a
silent overload. Prints "folder name file1 file2..."; exit 1 when there is any. Needs ctags; a
heuristic: a local that ctags takes for a file-scope variable (`struct stat st {}`) is listed too."""
import collections, glob, json, subprocess, sys
root = sys.argv[1]
clash = 0
for folder in sys.argv[2:]:
    files = sorted(glob.glob(f"{root}/{folder}/*.cc"))
    out = subprocess.run(["ctags", "--output-format=json", "--c++-kinds=fvcsgetu", "--fields=+sZK", "-o", "-"] + files,
                         capture_output=True, text=True, check=True).stdout
    where = collections.defaultdict(set)
    for line in out.splitlines():
        t = json.loads(line)
        scope = t.get("scope", "")
        internal = "__anon" in scope.split("::")[-1] if scope else False
        internal = internal or (t.get("file") is True and t.get("scopeKind") not in ("class", "struct", "union", "enum"))
        if internal and t.get("scopeKind") != "class":
            where[t["name"]].add(t["path"].rsplit("/", 1)[1])
    for name, fs in sorted(where.items()):
        if len(fs) > 1:
            clash += 1
            print(folder, name, " ".join(sorted(fs)))
sys.exit(1 if clash else 0)
