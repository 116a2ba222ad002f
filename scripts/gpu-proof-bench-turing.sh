#!/usr/bin/env bash
# Issue 33's proof of bench's Turing path on the real H200 (through the device tool): the T4's
# kernels (the committed compute_75 PTX, JIT-compiled by the driver for sm_90) forced with
# `--ptx compute_75`, beside the normal path (compute_80 + the sm_90a GEMM), each as text and JSON,
# our kernels alone (--gemm-library gpunode: what a T4 node with only the driver runs), then the
# forced path once more beside cuBLASLt (--gemm-library auto). Checked here:
#   - the forced run loaded compute_75 (gpus[].ptxTarget), the native one compute_80;
#   - every Turing test ran and reported a number: gemm fp16 (gpunode-wmma-sm75) and fp32
#     (gpunode-simt) result-checked, hbm copy/triad, pcie h2d/d2h, memtest; bf16 is "skipped" with
#     supported: false and says why (not in the compute_75 PTX), and the run is not an error for it;
#   - fp16 on the forced path is below the native one (WMMA/mma.sync m16n8k8 through registers vs
#     the wgmma/TMA kernel);
#   - every judged result names its ceiling (value, kind, source, pass fraction).
# Verdicts are recorded, not required to pass: the forced kernel is judged by the H200's ceilings
# with the uncalibrated 0.15 floor (docs/bench.md).
#
#   bash scripts/gpu-proof-bench-turing.sh   on the GPU machine, as root, from the repo root, with
#                                            .gpubundle/ from scripts/bundle-gpu.sh (build/ Release)
# Output under $OUT (default /tmp/gpunode-out): bench-turing-{forced,native}.{txt,json},
# bench-turing-forced-auto.json, bench-turing-checks.txt, bench-turing-transcript.txt and
# bench-turing-proof.tgz: what docs/examples/h200/bench-turing-33/ keeps.
PROOF_NAME=bench-turing
. "$(dirname "$0")/gpu-proof-lib.sh"

if [ "$SIM" = 1 ]; then
  # No CUDA driver under simulation: only the flag's handling can be shown.
  run gpunode "${G[@]}" bench --ptx compute_75 2>&1 | add
  run gpunode bench --ptx sm_75 2>&1 | add
  say "bench needs a real GPU: run this on the GPU machine"
  exit 77
fi

nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv 2>&1 | add
common=(--tests gemm,hbm,pcie,memtest --gemm-library gpunode --duration 2 -q)
bench() {  # NAME ARGS...: text, then JSON (each from an idle GPU), exit codes in the transcript
  local name=$1; shift
  run gpunode bench "${common[@]}" "$@" > "$FINAL/bench-turing-$name.txt" 2>&1
  say "$name text: exit $?"
  run gpunode bench "${common[@]}" "$@" -o json > "$FINAL/bench-turing-$name.json" 2> "$L/$name-json.stderr"
  say "$name json: exit $?"
  add < "$FINAL/bench-turing-$name.txt"
}
bench forced --ptx compute_75
bench native
run gpunode bench --tests gemm --duration 2 -q --ptx compute_75 -o json > "$FINAL/bench-turing-forced-auto.json" \
  2> "$L/forced-auto.stderr"
say "forced beside cuBLASLt json: exit $?"

python3 - "$FINAL" <<'PY' 2>&1 | tee "$FINAL/bench-turing-checks.txt" | add
import json, sys
out = sys.argv[1]
load = lambda n: json.load(open(f"{out}/bench-turing-{n}.json"))
forced, native, auto = load("forced"), load("native"), load("forced-auto")
bad = []
def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        bad.append(what)
def results(doc):
    g = [g for g in doc["gpus"] if "skipReason" not in g]
    check(bool(g), "a GPU ran")
    return g[0] if g else {"tests": []}, {(t["test"], r["name"]): r for g in doc["gpus"] if "skipReason" not in g
                                           for t in g["tests"] for r in t["results"]}
fg, f = results(forced)
ng, n = results(native)
check(fg.get("ptxTarget") == "compute_75", f"forced run loaded compute_75 (got {fg.get('ptxTarget')})")
check(ng.get("ptxTarget") == "compute_80", f"native run loaded compute_80 (got {ng.get('ptxTarget')})")
for key in [("gemm", "fp16"), ("gemm", "fp32"), ("hbm", "copy"), ("hbm", "triad"), ("pcie", "h2d"),
            ("pcie", "d2h"), ("memtest", "patterns")]:
    r = f.get(key)
    check(r is not None and r["value"] > 0 and r["verdict"] != "error",
          f"forced {key[0]} {key[1]}: {r and r['value']} {r and r['unit']} ({r and r['verdict']}, {r and r['backend']})")
check(f[("gemm", "fp16")]["backend"] == "gpunode-wmma-sm75", "forced fp16 ran gpunode-wmma-sm75")
for d in ("fp16", "fp32"):
    check(f[("gemm", d)].get("check", {}).get("ok") is True, f"forced {d} result check ok")
b = f.get(("gemm", "bf16"), {})
check(b.get("supported") is False and b.get("verdict") == "skipped", f"forced bf16 reported as unsupported: {b.get('detail')}")
gemm_verdict = [t["verdict"] for t in fg["tests"] if t["test"] == "gemm"]
check(gemm_verdict and gemm_verdict[0] != "skipped", f"forced gemm test verdict {gemm_verdict} (bf16 not counted)")
fv, nv = f[("gemm", "fp16")]["value"], n[("gemm", "fp16")]["value"]
check(fv < nv, f"fp16 forced {fv:.1f} < native {nv:.1f} TFLOP/s ({n[('gemm', 'fp16')]['backend']}), ratio {fv / nv:.2f}")
for name, res in (("forced", f), ("native", n)):
    for key, r in res.items():
        if r.get("supported") is False or key[0] == "memtest":
            continue
        c = r.get("ceiling")
        check(c is not None and c["kind"] and c["source"] and c["passFraction"] > 0,
              f"{name} {key[0]} {key[1]}: {r['verdict']} against {c and c['value']} {c and c['kind']} x {c and c['passFraction']}"
              f" (source: {c and c['source'][:70]})")
ag, _ = results(auto)
rows = [r for t in ag["tests"] for r in t["results"]]
own = [r for r in rows if r["backend"] == "gpunode-wmma-sm75"]
check(len(own) == 1 and own[0]["name"] == "fp16", f"forced, default library: our kernel is the fp16 Turing one ({[(r['name'], r['value']) for r in own]})")
if auto.get("gemmLibrary"):
    lt = [r for r in rows if r["backend"].startswith("cublasLt") and r["name"] == "bf16"]
    check(len(lt) == 1 and lt[0]["value"] > 0 and lt[0]["verdict"] != "error",
          f"forced beside cuBLASLt: cuBLASLt's own bf16 still ran ({lt and lt[0]['value']})")
else:
    print("note: no cuBLASLt on this machine (" + auto.get("gemmLibraryNote", "") + "): its rows were not checked")
print("RESULT:", "all checks passed" if not bad else f"{len(bad)} failed")
sys.exit(1 if bad else 0)
PY
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || fail "checks (see bench-turing-checks.txt)"
cp "$FINAL"/bench-turing-*.{txt,json} "$L/" 2>/dev/null
say "done: $([ "$FAILED" = 0 ] && echo all checks passed || echo FAILED)"
exit "$FAILED"
