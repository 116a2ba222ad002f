#!/usr/bin/env python3
"""Checks that the layers of docs/ARCHITECTURE.md, the build and the code agree (ctest `layers`).

The folder map in docs/ARCHITECTURE.md has a "may depend on" column. For every folder of src/ and
sim/ this checks:
  1. includes: each `#include "src/<f>/..."` or `"sim/<f>/..."` names the folder itself or one the
     table allows (cli: "everything");
  2. build: src/CMakeLists.txt's `gpunode_library(<f> ...)` names as gpunode_* dependencies exactly
     the src folders the table allows (the ldcache library counts as container);
  3. no stale rows: every folder the table allows is included by at least one file;
  4. sides: the "Node side and cluster side" table puts every src/ folder on one side; a
     cluster-side folder may depend only on shared and cluster-side folders, a shared folder only
     on shared folders (node side: anything but cluster side).
A row whose description starts with "*to come*" names a folder that has no code yet (src/upgrade:
a README says what goes there): its row and side are checked, its includes and its
library once it has a .cc or .h file.
Exit 0 when all agree, 1 listing each disagreement, 2 when the inputs cannot be read.
  scripts/check-layers.py [REPO]
"""
import os
import re
import sys

ROW = re.compile(r"^\| `((?:src|sim)/[a-z_]+)/` \|(.*)\|\s*([^|]*?)\s*\|\s*$")
SIDE = re.compile(r"^\| (node side|cluster side|shared|front end) \|(.*)\|\s*$")
SIDE_FOLDER = re.compile(r"`(src/[a-z_]+)/`")
# What each side may depend on.
SIDE_ALLOWS = {"node side": {"node side", "shared"}, "cluster side": {"cluster side", "shared"},
               "shared": {"shared"}, "front end": {"node side", "cluster side", "shared", "front end"}}
INCLUDE = re.compile(r'^\s*#\s*include\s+"((?:src|sim)/[a-z_]+)/', re.M)
LIBRARY = re.compile(r"gpunode_library\((\w+)((?:[^()]|\([^()]*\))*)\)", re.S)


def table(repo):
    """(rows: folder -> allowed, future: folders marked *to come*, sides: folder -> side)"""
    rows, future, sides = {}, set(), {}
    with open(os.path.join(repo, "docs/ARCHITECTURE.md"), encoding="utf-8") as f:
        for line in f:
            s = SIDE.match(line)
            if s:
                for folder in SIDE_FOLDER.findall(s.group(2)):
                    sides[folder] = s.group(1)
                continue
            m = ROW.match(line)
            if not m:
                continue
            if m.group(2).strip().startswith("*to come*"):
                future.add(m.group(1))
            allowed = set()
            for item in m.group(3).split(","):
                word = item.strip().split(" ")[0]
                if not word:
                    continue
                allowed.add(word)
            rows[m.group(1)] = allowed
    return rows, future, sides


def has_code(path):
    return os.path.isdir(path) and any(n.endswith((".cc", ".h", ".inc")) for n in os.listdir(path))


def side_problems(rows, sides):
    problems = []
    for folder, allowed in sorted(rows.items()):
        if not folder.startswith("src/"):
            continue
        side = sides.get(folder)
        if side is None:
            problems.append(f"{folder}/: on no side in docs/ARCHITECTURE.md's \"Node side and cluster side\" table")
            continue
        for a in sorted(allowed):
            target = a if "/" in a else f"src/{a}"
            if target not in rows or target == folder:
                continue
            other = sides.get(target)
            if other is not None and other not in SIDE_ALLOWS[side]:
                problems.append(f"{folder}/ is {side} but may depend on {target}/ ({other}): "
                                f"{side} folders may use only {' and '.join(sorted(SIDE_ALLOWS[side]))} folders")
    for folder in sorted(set(sides) - set(rows)):
        problems.append(f"{folder}/: on a side but has no row in the folder map")
    return problems


def folder_of(dep, folders):
    """"gpu" means src/gpu, "sim/support" is written out; None for a library (abseil, proto, ...)."""
    name = dep if "/" in dep else f"src/{dep}"
    return name if name in folders else None


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    try:
        rows, future, sides = table(repo)
        cmake = open(os.path.join(repo, "src/CMakeLists.txt"), encoding="utf-8").read()
    except OSError as e:
        print(f"check-layers: {e}", file=sys.stderr)
        return 2
    if not rows:
        print("check-layers: no folder rows in docs/ARCHITECTURE.md's folder map", file=sys.stderr)
        return 2
    problems = side_problems(rows, sides)
    folders = sorted(f"{t}/{d}" for t in ("src", "sim") for d in os.listdir(os.path.join(repo, t))
                     if os.path.isdir(os.path.join(repo, t, d)))
    folders = set(folders)
    for folder in sorted(folders):
        if folder not in rows:
            problems.append(f"{folder}/: no row in docs/ARCHITECTURE.md's folder map")
    used = {}
    for folder, allowed in rows.items():
        path = os.path.join(repo, folder)
        if folder in future and not has_code(path):
            continue
        if not os.path.isdir(path):
            problems.append(f"{folder}/: in docs/ARCHITECTURE.md's folder map but not in the tree")
            continue
        everything = "everything" in allowed
        allowed_folders = {folder_of(a, folders) for a in allowed} - {None}
        for name in sorted(os.listdir(path)):
            if not name.endswith((".cc", ".h", ".inc")):
                continue
            with open(os.path.join(path, name), encoding="utf-8", errors="replace") as f:
                text = f.read()
            for m in INCLUDE.finditer(text):
                target = m.group(1)
                if target == folder:
                    continue
                used.setdefault(folder, set()).add(target)
                if not everything and target not in allowed_folders:
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append(f"{folder}/{name}:{line}: includes {target}/, which the folder map "
                                    f"does not allow ({folder}/ may depend on: {', '.join(sorted(allowed)) or 'nothing'})")
        if not everything:
            for a in sorted(allowed_folders):
                if a != "src/base" and a not in used.get(folder, set()):
                    problems.append(f"{folder}/: the folder map allows {a}/ but nothing there includes it "
                                    "(stale row)")
    libs = {m.group(1): m.group(2) for m in LIBRARY.finditer(cmake)}
    for folder, allowed in rows.items():
        if not folder.startswith("src/"):
            continue
        name = folder.split("/")[1]
        if folder in future and not has_code(os.path.join(repo, folder)):
            continue
        if name not in libs:
            if name != "cli":
                problems.append(f"src/CMakeLists.txt: no gpunode_library({name} ...) for {folder}/")
            continue
        deps = set(re.findall(r"\bgpunode_(\w+)", libs[name]))
        deps = {"container" if d == "ldcache" else d for d in deps} - {name, "proto", "tomlplusplus"}
        want = {f.split("/")[1] for f in (folder_of(a, folders) for a in allowed) if f and f.startswith("src/")}
        for d in sorted(deps - want):
            problems.append(f"src/CMakeLists.txt: gpunode_{name} links gpunode_{d}, which the folder map "
                            f"does not list for {folder}/")
        for d in sorted(want - deps):
            problems.append(f"src/CMakeLists.txt: the folder map lets {folder}/ depend on {d} but "
                            f"gpunode_{name} does not link gpunode_{d}")
    for p in problems:
        print(p)
    if problems:
        print(f"check-layers: {len(problems)} disagreement(s) between docs/ARCHITECTURE.md, "
              "src/CMakeLists.txt and the #include lines", file=sys.stderr)
        return 1
    print(f"check-layers: {len(rows)} folders ({len(future)} to come): the folder map, the sides, the build and "
          "the includes agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
