#!/usr/bin/env bash
# HostFs below a host root on the real GPU machine (openat2 RESOLVE_IN_ROOT, issue 32 follow-up):
# the machine's own root bind-mounted at $W/host, as the DaemonSet mounts the node at /host, and
# gpunode run once with --host-root / and once with --host-root $W/host. The labels must be the
# same, doctor's check verdicts the same; the time of each (20 runs, median) and, where strace
# exists, the system calls of one labels run are recorded.
#
#   bash scripts/gpu-proof-hostfs.sh     on the GPU machine, as root, from the repo root, with .gpubundle/
# (real GPU only: a simulated node brings its own host root, which --host-root cannot replace; the
# same comparison on hostile roots is test/base/host_fs_test.cc's ReadsAnswerTheSameWithAndWithoutOpenat2)
# Output: $OUT/hostfs-proof.tgz and $OUT/hostfs-transcript.txt (default /tmp/gpunode-out).
PROOF_NAME=hostfs
. "$(dirname "$0")/gpu-proof-lib.sh"

if [ "$SIM" = 1 ]; then
  fail "real GPU only (a simulated node brings its own host root)"
  exit 2
fi
host=$W/host
mkdir -p "$host"
# Recursive, as the DaemonSet's hostPath / is (/proc, /sys and /dev are mounts of their own), and a
# slave, so taking it down again never reaches the machine's own mounts.
if ! mount --rbind / "$host" 2>"$L/mount.err" || ! mount --make-rslave "$host" 2>>"$L/mount.err"; then
  fail "mount --rbind / $host: $(cat "$L/mount.err")"
  exit 1
fi
trap 'umount -R -l "$host" 2>/dev/null; proof_cleanup' EXIT
pass "the machine's root bind-mounted at $host"
say "kernel $(uname -r)"

labels() { run gpunode "${G[@]}" --host-root "$1" labels --oneshot --no-timestamp --output-file "$2" > /dev/null 2>> "$L/labels.err"; }
labels / "$L/labels-root.txt" || fail "labels with --host-root /: $(tail -3 "$L/labels.err")"
labels "$host" "$L/labels-host.txt" || fail "labels with --host-root $host: $(tail -3 "$L/labels.err")"
say "labels: $(grep -c . "$L/labels-root.txt") with --host-root /, $(grep -c . "$L/labels-host.txt") with --host-root $host"
if diff "$L/labels-root.txt" "$L/labels-host.txt" > "$L/labels.diff"; then
  pass "the same labels both ways"
else
  fail "the labels differ: $(head -20 "$L/labels.diff")"
fi
grep -E 'nvidia.com/(gpu.product|gpu.count|cuda.driver-version.full)|gpunode.io/driver.branch' "$L/labels-host.txt" | add

verdicts() { run gpunode "${G[@]}" --host-root "$1" -o json doctor 2>/dev/null |
  python3 -c 'import json,sys; d=json.load(sys.stdin); [print(c.get("layer"), c.get("status"), " ".join(sorted(f.get("id", "") for f in c.get("findings", [])))) for c in d.get("checks", [])]'; }
verdicts / > "$L/doctor-root.txt"
verdicts "$host" > "$L/doctor-host.txt"
if [ -s "$L/doctor-root.txt" ] && diff "$L/doctor-root.txt" "$L/doctor-host.txt" > "$L/doctor.diff"; then
  pass "doctor's $(grep -c . "$L/doctor-root.txt") checks give the same verdicts both ways"
else
  fail "doctor differs (or printed no checks): $(head -20 "$L/doctor.diff")"
fi

median_ms() {  # median wall time of 20 labels runs with --host-root $1
  for _ in $(seq 20); do
    s=$(date +%s%N); labels "$1" "$L/t.txt"; e=$(date +%s%N); echo $(((e - s) / 1000))
  done | sort -n | awk '{a[NR]=$1} END {printf "%.1f", (a[10]+a[11])/2/1000}'
}
say "labels --oneshot, median of 20: --host-root / $(median_ms /) ms, --host-root $host $(median_ms "$host") ms"

if command -v strace > /dev/null; then
  strace -f -c -o "$L/strace-host.txt" "$(run_path gpunode)" "${G[@]}" --host-root "$host" labels --oneshot \
    --no-timestamp --output-file "$L/t.txt" > /dev/null 2>&1
  grep -E 'openat2|newfstatat|readlink|total' "$L/strace-host.txt" | add
else
  say "no strace on this machine: system calls not counted"
fi
[ "$FAILED" = 0 ] && say "PASS" || say "FAILED"
exit "$FAILED"
