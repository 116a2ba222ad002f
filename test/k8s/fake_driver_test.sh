#!/usr/bin/env bash
# The test cluster's fake NVIDIA driver container (test/k8s/fake_driver.sh, the entrypoint of
# gpunode.test/fake-driver:<version>) against temporary host roots, no cluster: run with busybox's
# applets alone on PATH, as in the image.
#  1. hand-written roots (the profile's flow and block forms): the versions it writes (profile
#     driver.version/nvml_version and host.module.version, sys/module, /proc/driver/nvidia/version),
#     the ready file, SIGTERM (exit 0, ready file gone), the root put back after a rewrite, refusals;
#  2. with GPUNODE (argument 1) and the simulated NVML (GPUNODE_SIM_LIBRARY, else beside GPUNODE): a
#     root from `gpunode sim hostroot dgx-h200`, then `gpunode doctor -o json` as the agent runs it:
#     the good image gives driver <version> and no failing finding; the broken one
#     driver.version-mismatch (the agent's GpuStackReady reason DriverVersionMismatch).
# Usage: test/k8s/fake_driver_test.sh [GPUNODE]    Exit 0 passed, 1 failed, 77 skipped (no busybox or
# python3-yaml). Without GPUNODE (or the library) part 2 is skipped, saying so.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
SCRIPT=$here/fake_driver.sh
GPUNODE=${1:-}
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok:   $*"; }
BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] || { echo "skip: busybox not found (Debian: busybox-static)"; exit 77; }
python3 -c 'import yaml' 2>/dev/null || { echo "skip: python3 with PyYAML not found"; exit 77; }

W=$(mktemp -d)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/bin"
for a in $("$BUSYBOX" --list); do ln -s "$BUSYBOX" "$W/bin/$a"; done

# fake ROOT VERSION [ENV=VALUE...]: the entrypoint in the background (busybox only); sets $fake_pid
fake() {
  local root=$1 version=$2
  shift 2
  env -i PATH="$W/bin" GPUNODE_FAKE_DRIVER_VERSION="$version" GPUNODE_FAKE_DRIVER_READY_DIR="$root.ready" \
    GPUNODE_FAKE_DRIVER_RECHECK=1 "$@" "$W/bin/sh" "$SCRIPT" init "$root" > "$root.log" 2>&1 &
  fake_pid=$!
  pids+=("$fake_pid")
}
# wait_ready ROOT: the ready file within 10 s
wait_ready() {
  local i
  for i in $(seq 100); do
    [ -e "$1.ready/.driver-ctr-ready" ] && return 0
    kill -0 "$fake_pid" 2>/dev/null || { cat "$1.log"; fail "the fake driver exited before it was ready"; }
    sleep 0.1
  done
  cat "$1.log"; fail "no $1.ready/.driver-ctr-ready after 10 s"
}
stop() {  # stop ROOT: SIGTERM -> exit 0 and the ready file gone
  local rc=0
  kill -TERM "$fake_pid"
  wait "$fake_pid" || rc=$?
  [ "$rc" = 0 ] || { cat "$1.log"; fail "exit $rc after SIGTERM"; }
  [ ! -e "$1.ready/.driver-ctr-ready" ] || fail "the ready file stayed after SIGTERM"
}
# versions ROOT: "nvml module nvml_version sys proc" as written
versions() {
  python3 - "$1" <<'PY'
import re, sys, yaml
root = sys.argv[1]
p = yaml.safe_load(open(root + "/profile.yaml"))
m = (p.get("host") or {}).get("module") or {}
assert m.get("loaded", True) is True, m
proc = open(root + "/proc/driver/nvidia/version").readline()
v = re.search(r"Kernel Module(?: for \S+)?\s+(\S+)", proc)
print(p["driver"]["version"], m.get("version", p["driver"]["version"]), p["driver"].get("nvml_version", "-"),
      open(root + "/sys/module/nvidia/version").read().strip(), v.group(1) if v else "-")
PY
}

echo "== fake NVIDIA driver container ($SCRIPT)"
# A profile in the flow form (as data/profiles/*.yaml) and one in the block form.
mkdir -p "$W/flow/proc/driver/nvidia/gpus/0000:18:00.0" "$W/flow/sys/module/nvidia" "$W/flow/lib/firmware/nvidia/580.95.05"
cat > "$W/flow/profile.yaml" <<'EOF'
apiVersion: gpunode/v1
kind: NodeProfile
name: flow
host:
  hostname: a
  module: {loaded: true, flavor: open, version: "580.95.05"}
driver:
  version: "580.95.05"
  nvml_version: "13.580.95.05"
  cuda_version: "13.0"
gpus:
  - {name: NVIDIA H200}
EOF
printf 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (x)\nGCC version:  gcc\n' \
  > "$W/flow/proc/driver/nvidia/version"
printf 'Model: \t\t NVIDIA H200\nGPU Firmware: \t 580.95.05\n' > "$W/flow/proc/driver/nvidia/gpus/0000:18:00.0/information"
echo 580.95.05 > "$W/flow/sys/module/nvidia/version"
cp -a "$W/flow" "$W/flow0"

fake "$W/flow" 580.105.08
wait_ready "$W/flow"
[ "$(versions "$W/flow")" = "580.105.08 580.105.08 13.580.105.08 580.105.08 580.105.08" ] ||
  fail "flow profile: $(versions "$W/flow")"
grep -q "GPU Firmware: .*580.105.08" "$W/flow/proc/driver/nvidia/gpus/0000:18:00.0/information" || fail "GPU firmware line"
[ -d "$W/flow/lib/firmware/nvidia/580.105.08" ] && [ ! -e "$W/flow/lib/firmware/nvidia/580.95.05" ] || fail "firmware folder"
grep -qx "GDS_ENABLED: false" "$W/flow.ready/.driver-ctr-ready" || fail "ready file: $(cat "$W/flow.ready/.driver-ctr-ready")"
ok "flow profile: NVML, kernel module, /proc, sys, firmware at 580.105.08; ready file written"
# Something rewrites the node (the chart's sim-hostroot init container, when the agent restarts).
cp "$W/flow0/profile.yaml" "$W/flow/profile.yaml"
echo 580.95.05 > "$W/flow/sys/module/nvidia/version"
for _ in $(seq 50); do
  [ "$(versions "$W/flow")" = "580.105.08 580.105.08 13.580.105.08 580.105.08 580.105.08" ] && break
  sleep 0.1
done
[ "$(versions "$W/flow")" = "580.105.08 580.105.08 13.580.105.08 580.105.08 580.105.08" ] ||
  fail "not installed again after a rewrite: $(versions "$W/flow")"
grep -q "installing 580.105.08 again" "$W/flow.log" || fail "no log line about the rewrite: $(cat "$W/flow.log")"
ok "rewritten root put back within 5 s"
stop "$W/flow"
ok "SIGTERM: exit 0, ready file removed"

# The broken image: NVML moves, the kernel module stays where it was.
cp -a "$W/flow0" "$W/broken"
fake "$W/broken" 580.105.08 GPUNODE_FAKE_DRIVER_BROKEN=1
wait_ready "$W/broken"
[ "$(versions "$W/broken")" = "580.105.08 580.95.05 13.580.105.08 580.95.05 580.95.05" ] ||
  fail "broken: $(versions "$W/broken")"
stop "$W/broken"
ok "broken: NVML 580.105.08, kernel module left at 580.95.05"

# Block form, no module version given (it defaults to the driver's), no nvml_version, no /proc yet.
mkdir -p "$W/block"
cat > "$W/block/profile.yaml" <<'EOF'
apiVersion: gpunode/v1
kind: NodeProfile
name: block
host:
  hostname: b
  module:
    loaded: false
    flavor: proprietary
driver:
  version: 550.127.05
  cuda_version: "12.4"
EOF
fake "$W/block" 550.163.01 GPUNODE_FAKE_DRIVER_BROKEN=1 GPUNODE_FAKE_DRIVER_MODULE_VERSION=550.127.05
wait_ready "$W/block"
[ "$(versions "$W/block")" = "550.163.01 550.127.05 - 550.127.05 550.127.05" ] || fail "block profile: $(versions "$W/block")"
stop "$W/block"
ok "block profile: module loaded and versioned, NVML 550.163.01"

# Refusals: a clear error, exit 1, no ready file.
mkdir -p "$W/empty"
for bad in "$W/empty|580.95.05|missing" "$W/flow0|latest|not a driver version" "$W/flow0|58a.1.2|not a driver version" \
           "$W/flow0|580|not a driver version"; do
  IFS='|' read -r root v want <<< "$bad"
  rc=0
  env -i PATH="$W/bin" GPUNODE_FAKE_DRIVER_VERSION="$v" GPUNODE_FAKE_DRIVER_READY_DIR="$W/refused" \
    "$W/bin/sh" "$SCRIPT" "$root" > "$W/refused.log" 2>&1 || rc=$?
  [ "$rc" = 1 ] && grep -q "$want" "$W/refused.log" || fail "$root $v: rc $rc: $(cat "$W/refused.log")"
  [ ! -e "$W/refused/.driver-ctr-ready" ] || fail "ready file after a refusal"
done
ok "refuses a missing profile and versions that are not driver versions"

# 2. On a simulated node as the chart writes it, judged by gpunode doctor.
if [ -z "$GPUNODE" ]; then
  echo "skip: gpunode doctor on a simulated node (no GPUNODE argument)"
  echo "== fake driver checks passed"
  exit 0
fi
LIB=${GPUNODE_SIM_LIBRARY:-$(dirname "$GPUNODE")/libgpunode-simnvml.so}
[ -x "$GPUNODE" ] && [ -f "$LIB" ] || fail "no $GPUNODE or $LIB (build the gpunode and gpunode_simnvml targets)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
doctor() {  # doctor ROOT -> "<driverVersion> <failing finding ids>"
  local rc=0
  GPUNODE_SIM_PROFILE="$1/profile.yaml" "$GPUNODE" --host-root "$1" --nvml-library "$LIB" --cuda-library "$LIB" \
    doctor -o json > "$1.doctor.json" 2> "$1.doctor.err" || rc=$?
  [ "$rc" -le 2 ] || { cat "$1.doctor.err"; fail "gpunode doctor exited $rc"; }
  python3 - "$1.doctor.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
fails = sorted({f["id"] for c in d["checks"] for f in c.get("findings", []) if f.get("status") == "fail"})
print(d.get("baseline", {}).get("node", {}).get("driverVersion", "-"), " ".join(fails) or "none")
PY
}
for kind in good broken; do
  root=$W/sim-$kind
  "$GPUNODE" sim hostroot --profile-file "$root/profile.yaml" dgx-h200 "$root" > /dev/null
  [ "$(doctor "$root")" = "580.95.05 none" ] || fail "the simulated node before: $(doctor "$root")"
  if [ "$kind" = good ]; then fake "$root" 580.105.08; else fake "$root" 580.105.08 GPUNODE_FAKE_DRIVER_BROKEN=1; fi
  wait_ready "$root"
  got=$(doctor "$root")
  if [ "$kind" = good ]; then
    [ "$got" = "580.105.08 none" ] || fail "good image: doctor says $got"
    [ "$(readlink "$root/usr/lib/x86_64-linux-gnu/libcuda.so.1")" = libcuda.so.580.105.08 ] &&
      [ -f "$root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.105.08" ] &&
      ! ls "$root"/usr/lib/x86_64-linux-gnu/*.so.580.95.05 > /dev/null 2>&1 || fail "driver libraries not moved to 580.105.08"
    ok "good image on dgx-h200: doctor passes on driver 580.105.08; libraries lib*.so.580.105.08"
  else
    [ "${got#* }" = driver.version-mismatch ] || fail "broken image: doctor says $got"
    grep -q "kernel module 580.95.05" "$root.doctor.json" || fail "the finding does not name the kernel module"
    ok "broken image on dgx-h200: doctor fails with driver.version-mismatch (kernel module 580.95.05)"
  fi
  stop "$root"
done
echo "== fake driver checks passed"
