#!/usr/bin/env python3
"""Where the anonymous memory that nvmlInit brings comes from, and whether malloc_trim gives it back.

Prints the anonymous mappings of at least 1 MiB Rss before nvmlInit, after it, and after glibc's
malloc_trim(0); and the same for the [heap]. Run on a real GPU node:  python3 benchmarks/nvml_anon_probe.py
"""
import ctypes
import re

import pynvml as N


def anon():
    rows, cur = [], None
    with open("/proc/self/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split(None, 5)
                a, b = (int(x, 16) for x in parts[0].split("-"))
                cur = {"range": parts[0], "sizeMiB": round((b - a) / 2**20, 1), "path": parts[5].strip() if len(parts) > 5 else "",
                       "perms": parts[1]}
                rows.append(cur)
            elif line.startswith("Rss:") and cur is not None:
                cur["rssMiB"] = round(int(line.split()[1]) / 1024, 2)
    return [r for r in rows if r["path"] in ("", "[heap]") and r.get("rssMiB", 0) >= 1.0]


def total(rows):
    return round(sum(r.get("rssMiB", 0) for r in rows), 1)


def show(title, rows):
    print(f"== {title}: {total(rows)} MiB in {len(rows)} anonymous/heap mappings of >= 1 MiB Rss")
    for r in rows:
        print(f"   {r['range']} {r['perms']} size {r['sizeMiB']:8} MiB  rss {r['rssMiB']:6} MiB  {r['path'] or '(anonymous)'}")


show("before nvmlInit", anon())
N.nvmlInit()
show("after nvmlInit (libnvidia-ml has loaded libcuda)", anon())
libc = ctypes.CDLL("libc.so.6")
libc.malloc_trim(0)
show("after malloc_trim(0)", anon())
N.nvmlShutdown()
libc.malloc_trim(0)
show("after nvmlShutdown + malloc_trim(0)", anon())
