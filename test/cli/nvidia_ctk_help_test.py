#!/usr/bin/env python3
"""Every command and flag of NVIDIA's nvidia-ctk v1.18.2, read from its own --help texts
(test/data/nvidia-ctk-1.18/, made by regen.sh there), against gpunode installed as nvidia-ctk.

  nvidia_ctk_help_test.py <gpunode binary> <help-text folder>

For every command: `nvidia-ctk PATH --help` works and gpunode's help names the same flags (none
invented). For every flag and each of its names: `nvidia-ctk --explain PATH --flag[=VALUE]` either
maps (exit 0, gpunode's command line or what gpunode runs itself on stdout) or prints its one
"does not apply to gpunode" line (exit 3, or exit 0 with the line as a note). A value flag is tried
with each value NVIDIA's help lists ("one of [...]"), else its default, else a placeholder; a value
flag given without a value and a flag NVIDIA does not have both fail (exit 3, not "does not apply").
Exit 0 pass, 1 fail.
"""
import os
import re
import subprocess
import sys
import tempfile

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, file=sys.stderr)


def parse_help(text):
    """-> (commands, flags): commands [[name, alias...]], flags [{names, value, choices, default}]"""
    commands, flags = [], []
    section = None
    for line in text.splitlines():
        if re.match(r"^[A-Z][A-Z ]*:", line):
            section = line.split(":")[0]
            continue
        if section == "COMMANDS" and line.strip():
            names = re.split(r"\s{2,}", line.strip())[0]
            commands.append([n.strip() for n in names.split(",")])
        elif section in ("OPTIONS", "GLOBAL OPTIONS") and re.match(r"^\s+-", line):
            parts = re.split(r"\s{2,}", line.strip(), maxsplit=1)
            left, usage = parts[0], parts[1] if len(parts) > 1 else ""
            left = re.sub(r"\[.*\]", "", left).strip()
            names, value, placeholder = [], False, None
            for part in left.split(","):
                words = part.split()
                if not words:
                    continue
                names.append(words[0])
                if len(words) > 1:
                    value = True
                    placeholder = words[1]
            choices = []
            m = re.search(r"[oO]ne of \[([^\]]+)\]", usage) or re.search(r"\[(\w+ \| \w+)\]", usage)
            if m:
                choices = [c.strip() for c in re.split(r"[|,]", m.group(1)) if c.strip()]
            d = re.search(r'\(default: "([^"]*)"', usage)
            flags.append({"names": names, "value": value, "choices": choices,
                          "default": d.group(1) if d else None, "placeholder": placeholder,
                          "global": section == "GLOBAL OPTIONS"})
    return commands, flags


# Values NVIDIA's help does not list, from its source (v1.18.2: pkg/nvcdi/api.go's feature flags,
# internal/discover's hook names).
KNOWN_VALUES = {
    "--disable-hook": ["create-symlinks", "chmod", "all"], "--disable-hooks": ["update-ldcache"],
    "--enable-hook": ["enable-cuda-compat", "disable-device-node-modification"],
    "--enable-hooks": ["create-symlinks"],
    "--feature-flag": ["disable-nvsandboxutils", "enable-explicit-driver-libraries", "enable-coherent-annotations"],
    "--feature-flags": ["disable-nvsandboxutils"],
}
# Flags that NVIDIA's nvidia-ctk itself refuses with a command's defaults: tried in a context where
# it takes them (docker has no drop-in config).
CONTEXT = {("runtime", "configure", "--drop-in-config"): ["--runtime=crio"]}


def values_for(flag, name):
    if not flag["value"]:
        return [None]
    if name in KNOWN_VALUES:
        return KNOWN_VALUES[name]
    if flag["choices"]:
        return flag["choices"]
    if flag["default"] not in (None, "", "RUNTIME_SPECIFIC_DEFAULT"):
        return [flag["default"]]
    if flag["placeholder"] and flag["placeholder"].startswith("/"):
        return [flag["placeholder"]]
    name = flag["names"][0]
    if re.search(r"path|root|dir|file|output|config|input|folder|from|to$", name):
        return ["/tmp/gpunode-ctk-test/x"]
    return ["x"]


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 1
    gpunode, data = os.path.abspath(sys.argv[1]), sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="gpunode-ctk-help.")
    ctk = os.path.join(tmp, "nvidia-ctk")
    os.symlink(gpunode, ctk)
    # NVIDIA's variables would count as flags: none of them set.
    env = {k: v for k, v in os.environ.items()
           if not re.match(r"^(NVIDIA_|GPUNODE_|DRY_RUN$|ROOT$|DRIVER_ROOT$|DEV_ROOT$|DEV_CHAR_PATH$|CREATE_)", k)}

    def run(*args):
        p = subprocess.run([ctk, *args], capture_output=True, text=True, env=env, timeout=60)
        return p.returncode, p.stdout, p.stderr

    files = sorted(f for f in os.listdir(data) if f.startswith("nvidia-ctk") and f.endswith(".txt"))
    if len(files) < 10:
        fail(f"only {len(files)} help texts in {data}")
    checked = 0
    for f in files:
        path = f[: -len(".txt")].split("_")[1:]
        with open(os.path.join(data, f)) as fh:
            commands, flags = parse_help(fh.read())
        label = " ".join(["nvidia-ctk", *path])
        rc, out, err = run(*path, "--help")
        if rc != 0 or label not in out:
            fail(f"`{label} --help`: exit {rc}, {err.strip()[:200]}")
            continue
        # gpunode's help names NVIDIA's flags and no others (gpunode's own globals aside)
        ours_text = out.split("GPUNODE OPTIONS")[0]
        _, ours = parse_help(ours_text.replace("\n        ", "  "))
        theirs_names = {n for fl in flags for n in fl["names"]}
        ours_names = {n for fl in ours for n in fl["names"]}
        if theirs_names != ours_names:
            fail(f"{label}: flags in NVIDIA's help only {sorted(theirs_names - ours_names)}, "
                 f"in gpunode's only {sorted(ours_names - theirs_names)}")
        for names in commands:
            if names[0] in ("help", "h"):
                continue
            sub = "nvidia-ctk_" + "_".join([*path, names[0]]) + ".txt"
            if sub not in files:
                fail(f"{label}: command {names[0]} has no help text {sub} (run regen.sh)")
            for alias in names[1:]:
                rc, out, err = run(*path, alias, "--help")
                if rc != 0:
                    fail(f"`{label} {alias} --help` (an alias): exit {rc}")
        if not path or (commands and all(fl["names"][0] == "--help" for fl in flags)):
            continue  # the root and plain groups: their flags are checked with their commands
        for flag in flags:
            if flag["names"][0] in ("--help", "--version"):
                continue
            for name in flag["names"]:
                for value in values_for(flag, name):
                    args = [name] if value is None else [f"{name}={value}"] if name.startswith("--") else [name, value]
                    args = CONTEXT.get((*path, name), []) + args
                    rc, out, err = run("--explain", *path, *args)
                    checked += 1
                    what = f"`{label} {' '.join(args)}`"
                    if rc == 0 and out.strip():
                        continue  # maps (a note on stderr may say what does not apply)
                    if rc == 3 and "does not apply to gpunode" in err and len(err.strip().splitlines()) == 1:
                        continue
                    fail(f"{what}: exit {rc}, stdout {out.strip()[:120]!r}, stderr {err.strip()[:300]!r}")
                if value is not None:
                    rc, _, err = run("--explain", *path, name)
                    if rc != 3 or "does not apply" in err:
                        fail(f"`{label} {name}` without its value: exit {rc} (want 3), {err.strip()[:200]!r}")
                elif not flag["global"]:
                    rc, out, err = run("--explain", *path, f"{name}=false")
                    if rc != 0:
                        fail(f"`{label} {name}=false`: exit {rc}, {err.strip()[:200]!r}")
        # a flag nvidia-ctk does not have is refused, not taken as "does not apply"
        rc, _, err = run("--explain", *path, "--no-such-nvidia-flag")
        if rc != 3 or "not defined" not in err:
            fail(f"`{label} --no-such-nvidia-flag`: exit {rc}, {err.strip()[:200]!r}")
    rc, out, _ = run("--version")
    if rc != 0 or "v1.18" not in out:
        fail(f"nvidia-ctk --version: exit {rc}, {out!r}")
    rc, _, err = run("no-such-command")
    if rc != 3 or "unknown command" not in err:
        fail(f"nvidia-ctk no-such-command: exit {rc}, {err!r}")
    print(f"{len(files)} commands, {checked} flag command lines checked; {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
