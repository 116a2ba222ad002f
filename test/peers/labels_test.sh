#!/usr/bin/env bash
# Labels conformance: NVIDIA's gpu-feature-discovery (one-shot) and `gpunode labels --print` on the
# same simulated node must give the same nvidia.com/ labels, except the differences listed in
# test/peers/labels_differences.txt (each one explained in docs/labels.md, "Compared with
# gpu-feature-discovery v0.19.0").
#
#   test/peers/labels_test.sh <gpunode-release-build-dir>
#
# Cases: every built-in profile (data/profiles/*.yaml) that GFD labels (not broken-no-driver,
# broken-mismatch, broken-fallen-gpu: GFD exits 1 on them), with the default MIG strategy (none),
# and a100-mig also with --mig-strategy single and mixed; a case is named
# PROFILE or PROFILE:STRATEGY. LABELS_TEST_CASES="dgx-h200 a100-mig:mixed" runs only those.
#
# The node: both read the simulated NVML (libgpunode-simnvml.so, GPUNODE_SIM_PROFILE) and the
# fixture host root of the profile (`gpunode sim hostroot`). gpunode reads that root through
# --host-root; GFD reads /sys itself, so it runs in a private mount namespace (unshare -m) where
# the fixture's sys/ is bind-mounted on /sys. Both read the machine type from the same file,
# /sys/class/dmi/id/product_name of that root. GFD writes the features file, as gpunode does:
# since v0.19.0 its default is to publish NodeFeature objects through the API server instead
# (--use-node-feature-api), which this suite turns off.
#
# Exit: 0 pass, 1 fail (a difference not listed, a listed one that no longer occurs, a peer that
# did not run), 77 skip (no Go, no Release build, or no mount namespace for GFD).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=test/peers/common.sh
source "$here/common.sh"
[ $# -eq 1 ] || { echo "usage: $0 <gpunode-release-build-dir>" >&2; exit 2; }
peers_setup "$1"

GFD=$PEERS_BIN/gpu-feature-discovery
EXPECTED=$here/labels_differences.txt
[ -x "$GFD" ] || { echo "FAIL: $GFD was not built" >&2; exit 1; }
[ -f "$EXPECTED" ] || { echo "FAIL: $EXPECTED is missing" >&2; exit 1; }

# GFD needs the fixture's sysfs at /sys: a private mount namespace gives it that without touching
# this machine's /sys.
if ! unshare -m sh -c "mount --bind '$WORK' /mnt" 2>/dev/null; then
  peers_skip "no private mount namespace (unshare -m + mount --bind needs CAP_SYS_ADMIN): GFD cannot be shown the simulated node's /sys"
fi

# The machine type written where the fixture has none: blanks and parentheses exercise both
# sides' sanitising.
MACHINE_TYPE="ProLiant DL380a Gen11 (simulated)"

# The fixture host root has what GFD's PCI readers need (each function's `config` and `resource`,
# sim/support/host_root.cc); only a machine type is added where the profile has none.
complete_sysfs() {
  local root=$1
  local dmi=$root/sys/class/dmi/id
  mkdir -p "$dmi"
  [ -e "$dmi/product_name" ] || echo "$MACHINE_TYPE" >"$dmi/product_name"
}

# key=value lines of the nvidia.com/ labels, sorted.
normalise() { grep -E '^nvidia\.com/[^=]*=' "$1" | LC_ALL=C sort -u; }

if [ -n "${LABELS_TEST_CASES:-}" ]; then
  read -r -a cases <<<"$LABELS_TEST_CASES"
else
  cases=()
  for f in "$repo"/data/profiles/*.yaml; do
    name=$(basename "$f" .yaml)
    # GFD refuses these nodes (exit 1): NVML does not start (no driver, driver/library mismatch),
    # or one GPU's handle says "GPU is lost" and go-nvlib's device walk fails as a whole.
    case $name in broken-no-driver|broken-mismatch|broken-fallen-gpu) continue ;; esac
    cases+=("$name")
  done
  cases+=("a100-mig:single" "a100-mig:mixed")
fi

failed=0
: >"$WORK/found"
for c in "${cases[@]}"; do
  profile=${c%%:*}
  strategy=none
  [ "$profile" = "$c" ] || strategy=${c#*:}
  dir=$WORK/case-${c//:/-}
  mkdir -p "$dir"
  # A copy: the simulator may keep MIG state in the profile file it reads.
  cp "$repo/data/profiles/$profile.yaml" "$dir/profile.yaml"
  if ! "$GPUNODE" sim hostroot "$dir/profile.yaml" "$dir/root" >"$dir/hostroot.log" 2>&1; then
    cat "$dir/hostroot.log" >&2; echo "FAIL [$c]: gpunode sim hostroot" >&2; failed=1; continue
  fi
  complete_sysfs "$dir/root"

  rc=0
  GPUNODE_SIM_PROFILE=$dir/profile.yaml LD_LIBRARY_PATH=$SIM_LIBDIR \
    timeout 60 unshare -m sh -c 'mount --bind "$1/sys" /sys && shift && exec "$@"' sh "$dir/root" \
    "$GFD" --oneshot --no-timestamp --use-node-feature-api=false --output-file="$dir/gfd.out" \
    --machine-type-file=/sys/class/dmi/id/product_name --mig-strategy="$strategy" \
    >"$dir/gfd.log" 2>&1 || rc=$?
  if [ "$rc" != 0 ] || [ ! -f "$dir/gfd.out" ]; then
    tail -20 "$dir/gfd.log" >&2; echo "FAIL [$c]: gpu-feature-discovery exited $rc" >&2; failed=1; continue
  fi

  rc=0
  GPUNODE_SIM_PROFILE=$dir/profile.yaml GPUNODE_NVML_LIBRARY=$SIM_LIB \
    timeout 60 "$GPUNODE" --host-root "$dir/root" labels --print --no-timestamp \
    --machine-type-file=/sys/class/dmi/id/product_name --mig-strategy="$strategy" \
    >"$dir/gpunode.out" 2>"$dir/gpunode.log" || rc=$?
  if [ "$rc" != 0 ]; then
    cat "$dir/gpunode.log" >&2; echo "FAIL [$c]: gpunode labels exited $rc" >&2; failed=1; continue
  fi

  normalise "$dir/gfd.out" >"$dir/gfd.labels"
  normalise "$dir/gpunode.out" >"$dir/gpunode.labels"
  # One line per differing key: KEY CASE GFD-VALUE GPUNODE-VALUE ("-" where the label is absent).
  python3 - "$dir/gfd.labels" "$dir/gpunode.labels" "$c" >>"$WORK/found" <<'EOF'
import sys
def load(p):
    return dict(l.rstrip("\n").split("=", 1) for l in open(p) if "=" in l)
gfd, ours, case = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3]
for k in sorted(set(gfd) | set(ours)):
    a, b = gfd.get(k), ours.get(k)
    if a != b:
        print(f"{k}\t{case}\t{'-' if a is None else a}\t{'-' if b is None else b}")
EOF
  n_gfd=$(wc -l <"$dir/gfd.labels"); n_ours=$(wc -l <"$dir/gpunode.labels")
  n_diff=$(awk -F'\t' -v c="$c" '$2 == c' "$WORK/found" | wc -l)
  echo "[$c] GFD $n_gfd labels, gpunode $n_ours labels, $n_diff differing"
done

# Expected differences: `KEY CASE REASON...` per line (KEY may hold * wildcards; CASE: a case
# name, or * for every case where it occurs); # comments and blank lines are ignored.
python3 - "$EXPECTED" "$WORK/found" "${cases[*]}" <<'EOF' || failed=1
import fnmatch, sys
expected_path, found_path, cases = sys.argv[1], sys.argv[2], sys.argv[3].split()
expected = []
for n, line in enumerate(open(expected_path), 1):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    parts = line.split(None, 2)
    if len(parts) < 3:
        print(f"FAIL: {expected_path}:{n}: want KEY CASE REASON, got {line!r}")
        sys.exit(1)
    expected.append((parts[0], parts[1], parts[2], n))
found = [l.rstrip("\n").split("\t") for l in open(found_path) if l.strip()]
used = set()
bad = []
for key, case, gfd, ours in found:
    match = [e for e in expected
             if fnmatch.fnmatchcase(key, e[0]) and (e[1] == case or e[1] == "*")]
    if match:
        used.update(e[3] for e in match)
    else:
        bad.append(f"  {key}  [{case}]\n      gpu-feature-discovery: {gfd}\n      gpunode:               {ours}")
stale = [e for e in expected if e[3] not in used and (e[1] == "*" or e[1] in cases)]
ok = True
if bad:
    ok = False
    print("FAIL: differences from gpu-feature-discovery that labels_differences.txt does not list:")
    print("\n".join(bad))
if stale:
    ok = False
    print("FAIL: listed differences that no longer occur (remove them from labels_differences.txt"
          " and docs/labels.md):")
    for key, case, reason, n in stale:
        print(f"  line {n}: {key} [{case}]")
listed = len(found) - len(bad)
print(f"labels conformance: {len(cases)} cases, {listed} listed differences, {len(bad)} unlisted,"
      f" {len(stale)} stale")
sys.exit(0 if ok else 1)
EOF

if [ "$failed" != 0 ]; then echo "FAIL: labels conformance (work files were in $WORK)" >&2; exit 1; fi
echo "PASS: labels conformance with gpu-feature-discovery"
exit 0
