#!/usr/bin/env python3
"""Checks the differences a side-by-side suite found against the ones it expects.

  expect_differences.py EXPECTED.txt FOUND.tsv [--cases CASE...]

FOUND: one difference per line, "CASE<TAB>ASPECT<TAB>details...". EXPECTED: lines
"CASE<TAB>ASPECT<TAB>reason" ('#' comments and blank lines ignored); CASE and ASPECT may hold
fnmatch wildcards: CASE '*' is every case where it occurs, ASPECT '* allocate * env X' every
resource and request size (each line must match at least one difference). Fails (exit 1) on a
found difference that is not expected, and on an expected one that did not occur (stale: the
list must stay true). With --cases, only expectations of those cases are checked for staleness.
"""
import argparse
import fnmatch
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("expected")
    ap.add_argument("found")
    ap.add_argument("--cases", nargs="*")
    a = ap.parse_args()
    expected = {}
    for n, line in enumerate(open(a.expected), 1):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) < 3 or not parts[2].strip():
            sys.exit(f"{a.expected}:{n}: want CASE<TAB>ASPECT<TAB>reason, got {line!r}")
        expected[(parts[0], parts[1])] = parts[2]
    found = [l.rstrip("\n").split("\t") for l in open(a.found) if l.strip()]
    used = set()
    bad = []
    for f in found:
        match = [k for k in expected if fnmatch.fnmatchcase(f[0], k[0]) and fnmatch.fnmatchcase(f[1], k[1])]
        if match:
            used.update(match)
        else:
            bad.append(f)
    cases = set(a.cases) if a.cases else None
    stale = [k for k in expected
             if k not in used and (cases is None or any(fnmatch.fnmatchcase(c, k[0]) for c in cases))]
    for f in bad:
        print("UNEXPLAINED DIFFERENCE: " + " | ".join(f))
    for k in stale:
        print(f"STALE (listed, did not occur): {k[0]}\t{k[1]}\t{expected[k]}")
    print(f"{len(found)} difference(s) found, {len(found) - len(bad)} explained, {len(bad)} unexplained, {len(stale)} stale")
    sys.exit(1 if bad or stale else 0)


if __name__ == "__main__":
    main()
