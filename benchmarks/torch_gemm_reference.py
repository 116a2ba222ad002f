#!/usr/bin/env python3
"""Reference GEMM rates through PyTorch (cuBLAS), to put `gpunode bench gemm` next to the
workplace's measured ceiling: 8192^3 bf16, mean of ten products after three warm-ups, on
normal (randn) and on uniform [-1, 1) data (what gpunode's fill kernel writes), from idle and
after 3 s of load. Usage: python3 benchmarks/torch_gemm_reference.py"""
import time
import torch

n = 8192
def rate(a, b, reps=10):
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        a @ b
    e.record()
    torch.cuda.synchronize()
    return 2 * n**3 * reps / (s.elapsed_time(e) / 1e3) / 1e12

for name, make in [("randn", lambda: torch.randn(n, n, device="cuda", dtype=torch.bfloat16)),
                   ("uniform[-1,1)", lambda: (torch.rand(n, n, device="cuda", dtype=torch.float32) * 2 - 1).to(torch.bfloat16))]:
    a, b = make(), make()
    time.sleep(2)
    idle = rate(a, b)
    t0 = time.time()
    while time.time() - t0 < 3:
        a @ b
    torch.cuda.synchronize()
    hot = rate(a, b)
    print(f"bf16 {n}^3 {name:14s} from idle {idle:6.1f} TFLOP/s, after 3 s of load {hot:6.1f} TFLOP/s")
