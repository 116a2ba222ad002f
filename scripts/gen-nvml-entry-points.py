#!/usr/bin/env python3
"""Writes sim/nvml/nvml_entry_points.inc: every entry point an nvml.h declares (and the few more a
real driver exports, sim/nvml/driver_entry_points.txt), as an X-macro.

The simulated NVML (libgpunode-simnvml.so) must export every NVML entry point, because NVIDIA's
Go components (device plugin, gpu-feature-discovery, nvidia-ctk) load libnvidia-ml.so.1 with lazy
binding and die with "symbol lookup error" on the first one it lacks. sim/nvml/not_supported.cc
expands this list into weak stubs that answer NVML_ERROR_NOT_SUPPORTED; the simulator's real
implementations (strong definitions) override them at link time.

One line per entry point, deduplicated and sorted by name:
    GPUNODE_NVML_ENTRY(KIND, nvmlName)
KIND says what the function returns:
    status   nvmlReturn_t (all but a few)
    string   const char* (nvmlErrorString)
Any other return type in the header is an error here: teach this script and not_supported.cc.

"Every entry point" means every `DECLDIR nvmlXxx(` declaration outside comments, including the
legacy unversioned ones the header declares only under NVML_NO_UNVERSIONED_FUNC_DEFS (nvmlInit,
nvmlDeviceGetCount, nvmlDeviceGetPciInfo_v2, ...): old binaries still link against those names.
Nothing of the header is copied: only the names and the kind of their return value.

The header used is CUDA 13.0's nvml.h as vendored by the go-nvml release pinned in
test/peers/versions.env (GO_NVML_VERSION):
    go mod download -json github.com/NVIDIA/go-nvml@$GO_NVML_VERSION   -> Dir/pkg/nvml/nvml.h

Usage:
    scripts/gen-nvml-entry-points.py [--check] [--output FILE] [NVML_H]
NVML_H defaults to the go-nvml module's nvml.h (found with `go mod download`). --check writes
nothing: it exits 1 naming the differences when FILE (default sim/nvml/nvml_entry_points.inc) is
not what the header gives, 0 when it is. Bad input (no header, no version line, no entry points,
an unknown return type) exits 2 with a message.
"""
import argparse
import json
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUTPUT = os.path.join(REPO, "sim", "nvml", "nvml_entry_points.inc")
VERSIONS_ENV = os.path.join(REPO, "test", "peers", "versions.env")
DRIVER_EXTRA = os.path.join(REPO, "sim", "nvml", "driver_entry_points.txt")
GENERATOR = "scripts/gen-nvml-entry-points.py"

# Return type (whitespace-normalised, `DECLDIR` and `DEPRECATED(x)` removed) -> KIND.
KINDS = {
    "nvmlReturn_t": "status",
    "const char*": "string",
}

DECL = re.compile(
    r"(?P<ret>[A-Za-z_][A-Za-z0-9_\s\*]*?\bDECLDIR\b[A-Za-z0-9_\s\*]*?)"
    r"\b(?P<name>nvml[A-Za-z0-9_]+)\s*\(")
VERSION_LINE = re.compile(r"^/\*+\s*(NVML VERSION:\s*[^*]+?)\s*\*+/\s*$", re.M)


class InputError(Exception):
    pass


def strip_comments(text):
    """Removes /* */ and // comments (outside string literals), keeping line structure."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise InputError("unterminated /* comment at offset %d" % i)
            out.append("\n" * text.count("\n", i, j + 2) or " ")
            i = j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def normalise_type(ret):
    ret = re.sub(r"\bDEPRECATED\s*\([^)]*\)", " ", ret)
    ret = re.sub(r"\bDECLDIR\b", " ", ret)
    ret = re.sub(r"\s*\*\s*", "*", ret)
    return " ".join(ret.split())


def parse_header(path):
    """Returns (version line, {name: kind}) of the nvml.h at `path`."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        raise InputError("cannot read the NVML header %s: %s" % (path, e.strerror))
    m = VERSION_LINE.search(text)
    if not m:
        raise InputError("%s: no '/*** NVML VERSION: ... ***/' line: is this NVIDIA's nvml.h?" % path)
    version = " ".join(m.group(1).split())
    code = strip_comments(text)
    # Declarations only: skip preprocessor lines (the DECLDIR definitions themselves).
    code = "\n".join("" if line.lstrip().startswith("#") else line for line in code.split("\n"))
    entries = {}
    for d in DECL.finditer(code):
        # The return type starts after the previous statement/declaration.
        ret = re.split(r"[;{}()]", d.group("ret"))[-1]
        ret = normalise_type(ret)
        name = d.group("name")
        kind = KINDS.get(ret)
        if kind is None:
            line = code.count("\n", 0, d.start("name")) + 1
            raise InputError("%s:%d: %s returns '%s', which this generator does not know: add it "
                             "to KINDS here and to sim/nvml/not_supported.cc" % (path, line, name, ret))
        if entries.get(name, kind) != kind:
            raise InputError("%s: %s is declared with two return types" % (path, name))
        entries[name] = kind
    if not entries:
        raise InputError("%s: no `DECLDIR nvml...(` declarations found" % path)
    return version, entries


def driver_entries(path):
    """Names a real driver exports beyond the header (sim/nvml/driver_entry_points.txt), all status."""
    out = {}
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.rstrip("\n")
                if not line.strip() or line.startswith("#"):
                    continue
                name = line.split("\t", 1)[0].strip()
                if not re.match(r"^nvml\w+$", name) or "\t" not in line:
                    raise InputError("%s:%d: want NAME<TAB>reason, got %r" % (path, n, line))
                out[name] = "status"
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror))
    return out


def render(version, entries, extra=0):
    lines = [
        "// generated by %s from nvml.h %s; do not edit" % (GENERATOR, version),
        "// Every entry point that nvml.h declares (%d), legacy unversioned ones included, as"
        % (len(entries) - extra),
        "// GPUNODE_NVML_ENTRY(kind, name); kind: status (returns nvmlReturn_t) or string (const char*).",
        "// Expanded by sim/nvml/not_supported.cc into weak NOT_SUPPORTED stubs.",
    ]
    if extra:
        lines.insert(4, "// Plus %d that a real driver exports beyond the header (sim/nvml/driver_entry_points.txt)." % extra)
    for name in sorted(entries):
        lines.append("GPUNODE_NVML_ENTRY(%s, %s)" % (entries[name], name))
    return "\n".join(lines) + "\n"


def parse_inc(text):
    """Returns (first line, {name: kind}) of a committed .inc."""
    first = text.split("\n", 1)[0]
    entries = {}
    for m in re.finditer(r"^GPUNODE_NVML_ENTRY\((\w+), (\w+)\)$", text, re.M):
        entries[m.group(2)] = m.group(1)
    return first, entries


def go_nvml_header():
    version = None
    try:
        with open(VERSIONS_ENV) as f:
            for line in f:
                if line.startswith("GO_NVML_VERSION="):
                    version = line.split("=", 1)[1].strip()
    except OSError as e:
        raise InputError("cannot read %s: %s" % (VERSIONS_ENV, e.strerror))
    if not version:
        raise InputError("%s has no GO_NVML_VERSION line" % VERSIONS_ENV)
    try:
        out = subprocess.run(["go", "mod", "download", "-json", "github.com/NVIDIA/go-nvml@" + version],
                             check=True, capture_output=True, text=True, cwd="/").stdout
    except FileNotFoundError:
        raise InputError("no NVML_H given and Go is not installed (it finds go-nvml's nvml.h)")
    except subprocess.CalledProcessError as e:
        raise InputError("go mod download github.com/NVIDIA/go-nvml@%s failed: %s"
                         % (version, (e.stdout + e.stderr).strip()))
    return os.path.join(json.loads(out)["Dir"], "pkg", "nvml", "nvml.h")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("header", nargs="?", help="nvml.h (default: go-nvml's, via `go mod download`)")
    ap.add_argument("--output", default=DEFAULT_OUTPUT, help="the .inc (default: %(default)s)")
    ap.add_argument("--check", action="store_true",
                    help="compare the .inc with the header instead of writing it")
    args = ap.parse_args()
    try:
        header = args.header or go_nvml_header()
        version, entries = parse_header(header)
        extra = {k: v for k, v in driver_entries(DRIVER_EXTRA).items() if k not in entries}
        entries.update(extra)
    except InputError as e:
        print("gen-nvml-entry-points: error: %s" % e, file=sys.stderr)
        return 2
    want = render(version, entries, len(extra))
    if not args.check:
        with open(args.output, "w") as f:
            f.write(want)
        print("wrote %s: %d entry points (%s)" % (args.output, len(entries), version))
        return 0
    try:
        with open(args.output) as f:
            have = f.read()
    except OSError as e:
        print("FAIL: cannot read %s: %s" % (args.output, e.strerror))
        return 1
    if have == want:
        print("ok: %s is current: %d entry points from %s (%s)" % (args.output, len(entries), header, version))
        return 0
    first, committed = parse_inc(have)
    want_first = want.split("\n", 1)[0]
    print("FAIL: %s is not what %s gives; regenerate it: %s %s" % (args.output, header, GENERATOR, header))
    if first != want_first:
        print("  first line: committed '%s'\n              header gives '%s'" % (first, want_first))
    for name in sorted(set(entries) - set(committed)):
        print("  missing from the .inc: %s (%s)" % (name, entries[name]))
    for name in sorted(set(committed) - set(entries)):
        print("  not in the header:     %s" % name)
    for name in sorted(set(entries) & set(committed)):
        if entries[name] != committed[name]:
            print("  kind of %s: committed %s, header gives %s" % (name, committed[name], entries[name]))
    if set(entries) == set(committed) and first == want_first:
        print("  (same names and kinds: the layout differs; regenerate)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
