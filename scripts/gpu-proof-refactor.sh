#!/usr/bin/env bash
# On the GPU machine, for a change that must not change behaviour (issue 17): runs the bundle's
# gpunode (this tree) and an older gpunode (.gpubundle/old/gpunode, built from the commit before)
# side by side on the real GPU and compares what they say. Live values (temperatures, power, clocks,
# utilisation, timings, bench numbers) differ from one read to the next and are left out of the
# comparison; everything else must be equal. Also runs the NVML ABI check against the real driver.
#   scripts/gpu-proof-refactor.sh OUT_DIR
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: gpu-proof-refactor.sh OUT_DIR}
mkdir -p "$OUT"
# PROOF_GLOBAL: global flags for both (e.g. "--simulate dgx-h200" to try the script without a GPU).
NEW=(.gpubundle/run gpunode ${PROOF_GLOBAL:-})
OLD=(.gpubundle/run-old gpunode ${PROOF_GLOBAL:-})
FAILED=0
say() { echo "== $*" | tee -a "$OUT/summary.txt"; }

# Drops the keys whose values are live readings or timings, at any depth, and prints sorted JSON.
norm() {
  python3 -c '
import json, re, sys
LIVE = re.compile(r"(temp|power|clock|util|_ms$|^ms$|seconds|elapsed|timing|duration|fan|energy|used|free|timestamp|pstate|throttle|rate|bandwidth|tflops|gbps|gb_s|value|samples|generatedAt|time)", re.I)
def walk(x):
    if isinstance(x, dict):
        return {k: walk(v) for k, v in x.items() if not LIVE.search(k)}
    if isinstance(x, list):
        return [walk(v) for v in x]
    return x
print(json.dumps(walk(json.load(sys.stdin)), indent=1, sort_keys=True))'
}

# What differs by construction: the program's own path (CDI hooks name it) and a simulated node's
# temporary folder.
same_paths() { sed -i -E 's#\.gpubundle/old/gpunode#.gpubundle/bin/gpunode#g; s#gpunode-sim-[A-Za-z0-9]{6}#gpunode-sim-XXXXXX#g' "$@"; }

compare() {  # name, then the arguments of gpunode
  local name=$1; shift
  "${NEW[@]}" "$@" > "$OUT/$name.new" 2> "$OUT/$name.new.err"; local rn=$?
  "${OLD[@]}" "$@" > "$OUT/$name.old" 2> "$OUT/$name.old.err"; local ro=$?
  same_paths "$OUT/$name.old" "$OUT/$name.new"
  if [ "$rn" != "$ro" ]; then say "$name: exit $rn (new) vs $ro (old): DIFFERENT"; FAILED=1; return; fi
  if diff -u "$OUT/$name.old" "$OUT/$name.new" > "$OUT/$name.diff"; then
    say "$name: exit $rn, equal ($(wc -l < "$OUT/$name.new") lines)"
  else
    say "$name: exit $rn, DIFFERENT (see $name.diff)"; FAILED=1
  fi
}

compare_json() {  # name, then the arguments of gpunode (with -o json)
  local name=$1; shift
  "${NEW[@]}" "$@" 2> "$OUT/$name.new.err" | tee "$OUT/$name.new.raw.json" | norm > "$OUT/$name.new"; local rn=${PIPESTATUS[0]}
  "${OLD[@]}" "$@" 2> "$OUT/$name.old.err" | tee "$OUT/$name.old.raw.json" | norm > "$OUT/$name.old"; local ro=${PIPESTATUS[0]}
  same_paths "$OUT/$name.old" "$OUT/$name.new"
  if [ "$rn" != "$ro" ]; then say "$name: exit $rn (new) vs $ro (old): DIFFERENT"; FAILED=1; return; fi
  if diff -u "$OUT/$name.old" "$OUT/$name.new" > "$OUT/$name.diff"; then
    say "$name: exit $rn, equal without live readings ($(wc -l < "$OUT/$name.new") lines of JSON)"
  else
    say "$name: exit $rn, DIFFERENT (see $name.diff)"; FAILED=1
  fi
}

"${NEW[@]}" --version > "$OUT/version.new.txt" 2>&1; "${OLD[@]}" --version > "$OUT/version.old.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader > "$OUT/gpu.txt" 2>&1
say "new: $(head -1 "$OUT/version.new.txt"); old: $(head -1 "$OUT/version.old.txt"); GPU: $(head -1 "$OUT/gpu.txt")"

compare_json doctor doctor -o json
compare_json doctor-no-cuda doctor --no-cuda -o json
compare labels labels --print --no-timestamp
compare_json labels-json labels --print --no-timestamp -o json
compare cdi cdi generate --output -
compare compat compat check --cuda 12.4
compare compat-driver-for compat driver-for --cuda 13.0 --gpu H200
compare_json mig mig show -o json
# The exporter's page: the same series (metric name and labels); values are live.
for side in new old; do
  if [ $side = new ]; then R=("${NEW[@]}"); else R=("${OLD[@]}"); fi
  "${R[@]}" exporter --once > "$OUT/exporter.$side.raw" 2> "$OUT/exporter.$side.err"
  grep -v '^#' "$OUT/exporter.$side.raw" | sed -E 's/ [^ ]+$//' | sort > "$OUT/exporter.$side"
done
if diff -u "$OUT/exporter.old" "$OUT/exporter.new" > "$OUT/exporter.diff"; then
  say "exporter --once: the same $(wc -l < "$OUT/exporter.new") series (name and labels)"
else
  say "exporter --once: DIFFERENT series (see exporter.diff)"; FAILED=1
fi
# bench: the same tests, verdicts and result checks (numbers are measured, so they differ a little).
for side in new old; do
  if [ $side = new ]; then R=("${NEW[@]}"); else R=("${OLD[@]}"); fi
  "${R[@]}" bench -q -o json > "$OUT/bench.$side.json" 2> "$OUT/bench.$side.err"; echo "exit $?" > "$OUT/bench.$side.rc"
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
def walk(x, path=""):
    if isinstance(x, dict):
        for k, v in sorted(x.items()):
            if k in ("verdict", "test", "name", "status", "check", "result_check", "precision", "library", "kernel"):
                print(path + "." + k, "=", v)
            walk(v, path + "." + k)
    elif isinstance(x, list):
        for i, v in enumerate(x): walk(v, path + "[" + str(i) + "]")
walk(d)' "$OUT/bench.$side.json" > "$OUT/bench.$side" 2>&1
done
if diff -u "$OUT/bench.old" "$OUT/bench.new" > "$OUT/bench.diff" && diff -q "$OUT/bench.old.rc" "$OUT/bench.new.rc" >/dev/null; then
  say "bench: $(cat "$OUT/bench.new.rc"), the same tests and verdicts ($(grep -c verdict "$OUT/bench.new") verdicts)"
else
  say "bench: DIFFERENT tests or verdicts (see bench.diff)"; FAILED=1
fi
python3 - "$OUT/bench.new.json" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
d = json.load(open(sys.argv[1]))
def rows(x):
    if isinstance(x, dict):
        if "verdict" in x and ("value" in x or "measured" in x):
            yield x
        for v in x.values(): yield from rows(v)
    elif isinstance(x, list):
        for v in x: yield from rows(v)
for r in rows(d):
    print("   bench (new):", {k: r[k] for k in r if k in ("test", "name", "verdict", "value", "measured", "unit", "ceiling", "fraction")})
PY
scripts/nvml-abi-check.sh > "$OUT/abi.txt" 2>&1 || FAILED=1
say "NVML ABI check: $(tail -1 "$OUT/abi.txt")"
[ $FAILED = 0 ] && say "PASS: the refactored gpunode says what the previous one said" || say "FAILED"
exit $FAILED
