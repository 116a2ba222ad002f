#!/usr/bin/env bash
# Issue 5's proof on the real GPU machine (through the device tool): a container started by the
# real runc, through `gpunode oci-runtime`, from a spec made by `gpunode cdi generate` on the host,
# runs `nvidia-smi -L` and lists the GPU(s) it asked for, and only those.
#
# Expects .gpubundle/ from `scripts/bundle-gpu.sh --with-runc` (gpunode, runc and its libseccomp,
# a static busybox). The GPU machine has no container engine; the rootfs is busybox plus the glibc
# that nvidia-smi links against, copied from the machine itself (a CUDA image would bring its own).
# Everything worth keeping goes into $OUT/containers.tgz (the device tool returns few files).
set -uo pipefail
FINAL=${OUT:-/tmp/gpunode-out}
mkdir -p "$FINAL"
OUT=$(mktemp -d)
trap 'tar -C "$OUT" -czf "$FINAL/containers.tgz" . ; ls -la "$OUT"' EXIT
HERE=$(pwd)
B=$HERE/.gpubundle
W=$(mktemp -d /tmp/gpunode-ctr-XXXXXX)

# The hooks of the spec are run by runc with the spec's env only: give them a wrapper that finds
# the bundle's libraries (on a real install gpunode is a plain binary on the host).
cat > "$B/gpunode-hook" <<EOF
#!/bin/sh
LD_LIBRARY_PATH=$B/lib exec $B/bin/gpunode "\$@"
EOF
chmod +x "$B/gpunode-hook"
export PATH=$B/bin:$PATH   # runc
export LD_LIBRARY_PATH=$B/lib

{
  echo "== gpunode cdi generate (real host)"
  "$B/bin/gpunode" cdi generate --output "$W/cdi/nvidia.yaml" --hook-path "$B/gpunode-hook"; echo "exit $?"
  "$B/bin/gpunode" cdi list "$W/cdi/nvidia.yaml"
  "$B/bin/gpunode" cdi validate "$W/cdi/nvidia.yaml"
} > "$OUT/generate.txt" 2>&1
cp "$W/cdi/nvidia.yaml" "$OUT/nvidia.yaml"
nvidia-smi -L > "$OUT/host-nvidia-smi-L.txt" 2>&1

# busybox rootfs + nvidia-smi's glibc
R=$W/rootfs
mkdir -p "$R"/{bin,dev,proc,sys,tmp,etc,usr/bin,run}
cp "$B/bin/busybox" "$R/bin/busybox"
for a in sh ls cat echo grep stat head; do ln -sf busybox "$R/bin/$a"; done
for lib in $(ldd "$(command -v nvidia-smi)" | awk '/=>/ {print $3} /ld-linux/ {print $1}'); do
  mkdir -p "$R$(dirname "$lib")"; cp -L "$lib" "$R$lib"
done
echo "root:x:0:0:root:/root:/bin/sh" > "$R/etc/passwd"

bundle() {  # bundle DIR VISIBLE COMMAND
  local dir=$1 visible=$2 cmd=$3
  mkdir -p "$dir"
  rm -rf "$dir/rootfs"; cp -a "$R" "$dir/rootfs"   # each container its own root: the hooks write into it
  (cd "$dir" && runc spec)
  python3 - "$dir/config.json" "$dir/rootfs" "$visible" "$cmd" <<'PY'
import json, sys
path, rootfs, visible, cmd = sys.argv[1:]
c = json.load(open(path))
c["root"] = {"path": rootfs, "readonly": False}
c["process"]["terminal"] = False
c["process"]["args"] = ["/bin/sh", "-c", cmd]
env = [e for e in c["process"]["env"] if not e.startswith("NVIDIA_")]
if visible != "-":
    env.append("NVIDIA_VISIBLE_DEVICES=" + visible)
c["process"]["env"] = env
# CAP_SYS_ADMIN in the bounding set: the shim believes NVIDIA_VISIBLE_DEVICES only in a privileged
# container (or with Docker's --gpus hook, or accept-nvidia-visible-devices-envvar-when-unprivileged).
c["process"]["capabilities"]["bounding"].append("CAP_SYS_ADMIN")
c["linux"].pop("uidMappings", None); c["linux"].pop("gidMappings", None)
json.dump(c, open(path, "w"), indent=1)
PY
}

CMD='export PATH=$PATH:/usr/local/nvidia/bin; echo "--- nvidia-smi -L"; nvidia-smi -L; echo "--- /dev/nvidia*"; ls -l /dev/nvidia* 2>&1; echo "--- env"; env | grep ^NVIDIA_ | sort; echo "--- libcuda"; ls -l /usr/local/nvidia/lib64/libcuda.so* /usr/lib/x86_64-linux-gnu/libcuda.so* 2>/dev/null'
n=0
for visible in all 0 1 none void; do
  n=$((n+1))
  bundle "$W/b$n" "$visible" "$CMD"
  {
    echo "== NVIDIA_VISIBLE_DEVICES=$visible: gpunode oci-runtime --runtime-path runc --spec-dir $W/cdi run --bundle b$n ctr$n"
    GPUNODE_OCI_LOG=$OUT/shim.log "$B/bin/gpunode" oci-runtime --runtime-path runc --spec-dir "$W/cdi" \
      run --bundle "$W/b$n" "gpunode-proof-$n"
    echo "exit $?"
  } > "$OUT/container-$visible.txt" 2>&1
  runc delete -f "gpunode-proof-$n" >/dev/null 2>&1
done
cp "$W/b2/config.json" "$OUT/config-after-shim-gpu0.json" 2>/dev/null

# A GPU the spec does not have: refused before runc, with the reason.
bundle "$W/bad" 7 "true"
{ "$B/bin/gpunode" oci-runtime --runtime-path runc --spec-dir "$W/cdi" run --bundle "$W/bad" gpunode-bad; echo "exit $?"; } \
  > "$OUT/container-unknown-gpu.txt" 2>&1

# Speed: generate on the real host, and the shim's cost on a container start.
python3 benchmarks/cdi_bench.py --host --runs 30 --gpunode "$B/bin/gpunode" --json "$OUT/cdi-bench.json" \
  > "$OUT/cdi-bench.txt" 2>&1
python3 benchmarks/cdi_bench.py --simulate dgx-h200 --runs 30 --gpunode "$B/bin/gpunode" \
  --json "$OUT/cdi-bench-sim-dgx-h200.json" > "$OUT/cdi-bench-sim.txt" 2>&1
bundle "$W/tpl" 0 "true"
python3 - "$W" "$B" "$OUT/container-start.json" <<'PY' > "$OUT/container-start.txt" 2>&1
# Whole `runc run` of a container that runs `true`: plain runc, vs through the shim asking for GPU 0.
import json, os, shutil, statistics, subprocess, sys, time
w, b, out = sys.argv[1:]
def run(cmd):
    s = time.perf_counter(); p = subprocess.run(cmd, capture_output=True, text=True)
    ms = (time.perf_counter() - s) * 1000
    if p.returncode: sys.exit(f"{cmd}: {p.stdout}{p.stderr}")
    return ms
res = {}
for label, shim in (("runc", False), ("gpunode-oci-runtime+runc", True)):
    times = []
    for i in range(15):
        d = f"{w}/t-{label}-{i}"
        shutil.rmtree(d, ignore_errors=True); shutil.copytree(f"{w}/tpl/rootfs", f"{d}/rootfs", symlinks=True)
        c = json.load(open(f"{w}/tpl/config.json")); c["root"]["path"] = f"{d}/rootfs"
        json.dump(c, open(f"{d}/config.json", "w"))
        cmd = ["runc", "run", "--bundle", d, f"t{i}"]
        if shim:
            cmd = [f"{b}/bin/gpunode", "oci-runtime", "--runtime-path", "runc", "--spec-dir", f"{w}/cdi"] + cmd[1:]
        times.append(run(cmd))
        subprocess.run(["runc", "delete", "-f", f"t{i}"], capture_output=True)
    res[label] = {"median_ms": round(statistics.median(times), 1), "min_ms": round(min(times), 1),
                  "max_ms": round(max(times), 1), "runs": len(times)}
print(json.dumps(res, indent=1)); json.dump(res, open(out, "w"), indent=1)
PY
cat "$OUT"/container-*.txt "$OUT/cdi-bench.txt" "$OUT/cdi-bench-sim.txt" "$OUT/container-start.txt"
