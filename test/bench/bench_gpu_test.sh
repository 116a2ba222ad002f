#!/usr/bin/env bash
# ctest label "gpu": runs `gpunode bench -o json` on a real GPU and checks the document's shape.
# Usage: bench_gpu_test.sh PATH/TO/gpunode
set -euo pipefail
bin=${1:?usage: $0 gpunode}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
set +e
"$bin" bench -q --duration 0.5 -o json > "$out"
rc=$?
set -e
[ "$rc" -le 2 ] || { echo "gpunode bench exited $rc"; cat "$out"; exit 1; }
python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["apiVersion"] == "gpunode/v1" and d["kind"] == "BenchReport", d.get("kind")
assert d["gpus"], "no GPU in the report"
for g in d["gpus"]:
    if "skipReason" in g:
        continue
    tests = {t["test"]: t for t in g["tests"]}
    assert set(tests) >= {"gemm", "hbm", "pcie", "memtest"}, tests.keys()
    for t in tests.values():
        for r in t["results"]:
            # "skipped" only for what the GPU has no unit for (bf16 on Turing), marked supported: false
            assert r["verdict"] in ("pass", "fail", "no-ceiling", "error") or r.get("supported") is False, r
            assert r["unit"] in ("TFLOP/s", "GB/s"), r
    for r in tests["gemm"]["results"]:
        assert r.get("supported", True) is False or r.get("check", {}).get("ok") is True, r
    assert g["telemetry"]["samples"] > 0, g["telemetry"]
print("ok:", d["verdict"], [(g["index"], g["verdict"]) for g in d["gpus"]])
PY
# Our kernels alone (a node with only the driver): every GEMM dtype result-checked, and on Hopper
# (compute 9.0) bf16/fp16 come from the wgmma/TMA kernel.
set +e
"$bin" bench -q --tests gemm --gemm-library gpunode --duration 0.5 -o json > "$out"
rc=$?
set -e
[ "$rc" -le 2 ] || { echo "gpunode bench --gemm-library gpunode exited $rc"; cat "$out"; exit 1; }
python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for g in d["gpus"]:
    if "skipReason" in g:
        continue
    gemm = [t for t in g["tests"] if t["test"] == "gemm"][0]["results"]
    for r in gemm:
        if r.get("supported") is False:  # bf16 on Turing
            continue
        assert r["backend"].startswith("gpunode-"), r
        assert r.get("check", {}).get("ok") is True, r
        if g.get("computeCapability") == "9.0" and r["name"] in ("bf16", "fp16"):
            assert r["backend"] == "gpunode-wgmma-sm90", r
print("ok: own kernels", [(r["name"], r["backend"], r["value"]) for g in d["gpus"] if "skipReason" not in g
                          for t in g["tests"] if t["test"] == "gemm" for r in t["results"]])
PY
# The Turing kernels (compute_75 PTX), forced on whatever GPU this is (the driver JIT-compiles them
# for newer GPUs): fp16 from the register-staged WMMA kernel, result-checked; bf16 not in that PTX.
set +e
"$bin" bench -q --tests gemm --gemm-library gpunode --ptx compute_75 --duration 0.5 -o json > "$out"
rc=$?
set -e
[ "$rc" -le 2 ] || { echo "gpunode bench --ptx compute_75 exited $rc"; cat "$out"; exit 1; }
python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for g in d["gpus"]:
    if "skipReason" in g:
        continue
    assert g["ptxTarget"] == "compute_75", g.get("ptxTarget")
    gemm = {r["name"]: r for t in g["tests"] if t["test"] == "gemm" for r in t["results"]}
    assert gemm["bf16"].get("supported") is False and gemm["bf16"]["verdict"] == "skipped", gemm["bf16"]
    assert gemm["fp16"]["backend"] == "gpunode-wmma-sm75" and gemm["fp16"]["value"] > 0, gemm["fp16"]
    assert gemm["fp16"]["check"]["ok"] is True and gemm["fp32"]["check"]["ok"] is True, gemm
print("ok: compute_75", [(r["name"], r["backend"], r["value"]) for g in d["gpus"] if "skipReason" not in g
                         for t in g["tests"] if t["test"] == "gemm" for r in t["results"]])
PY
