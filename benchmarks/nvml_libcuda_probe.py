#!/usr/bin/env python3
"""Which NVML call makes libnvidia-ml load libcuda into the process (#18's footprint question).

Calls, one after the other, the NVML functions gpunode's services use (through pynvml, the same C
library), and after each looks at /proc/self/maps for libcuda.so. Prints one line per call:
the call, whether it succeeded, whether libcuda is mapped now, and VmRSS. Run on a real GPU node:

  python3 benchmarks/nvml_libcuda_probe.py [--json OUT]
"""
import json
import sys

import pynvml as N


def libcuda_mapped():
    with open("/proc/self/maps") as f:
        return any("libcuda.so" in line for line in f)


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def main():
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    rows = [{"call": "(start: pynvml imported, NVML not loaded)", "ok": True, "libcuda": libcuda_mapped(), "rssMiB": rss_mib()}]
    h = {}

    def step(name, fn):
        try:
            fn()
            ok = True
        except Exception as e:  # NVMLError: not supported, ...
            ok = f"{type(e).__name__}: {e}"
        rows.append({"call": name, "ok": ok, "libcuda": libcuda_mapped(), "rssMiB": rss_mib()})

    step("nvmlInit_v2", N.nvmlInit)
    step("nvmlSystemGetDriverVersion", N.nvmlSystemGetDriverVersion)
    step("nvmlSystemGetCudaDriverVersion_v2", N.nvmlSystemGetCudaDriverVersion_v2)
    step("nvmlDeviceGetCount_v2", N.nvmlDeviceGetCount)
    step("nvmlDeviceGetHandleByIndex_v2", lambda: h.update(d=N.nvmlDeviceGetHandleByIndex(0)))
    d = lambda: h["d"]  # noqa: E731
    step("nvmlDeviceGetUUID / Name / PciInfo", lambda: (N.nvmlDeviceGetUUID(d()), N.nvmlDeviceGetName(d()), N.nvmlDeviceGetPciInfo(d())))
    step("nvmlDeviceGetMemoryInfo", lambda: N.nvmlDeviceGetMemoryInfo(d()))
    step("nvmlDeviceGetUtilizationRates", lambda: N.nvmlDeviceGetUtilizationRates(d()))
    step("nvmlDeviceGetTemperature / PowerUsage / ClockInfo", lambda: (
        N.nvmlDeviceGetTemperature(d(), N.NVML_TEMPERATURE_GPU), N.nvmlDeviceGetPowerUsage(d()),
        N.nvmlDeviceGetClockInfo(d(), N.NVML_CLOCK_SM)))
    step("nvmlDeviceGetCudaComputeCapability", lambda: N.nvmlDeviceGetCudaComputeCapability(d()))
    step("nvmlDeviceGetTotalEccErrors", lambda: N.nvmlDeviceGetTotalEccErrors(d(), N.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, N.NVML_VOLATILE_ECC))
    step("nvmlDeviceGetFieldValues (energy, retired pages, nvlink)", lambda: N.nvmlDeviceGetFieldValues(d(), [
        N.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, N.NVML_FI_DEV_RETIRED_PENDING, N.NVML_FI_DEV_NVLINK_BANDWIDTH_C0_TOTAL]))
    step("nvmlDeviceGetMigMode", lambda: N.nvmlDeviceGetMigMode(d()))
    step("nvmlDeviceGetComputeRunningProcesses", lambda: N.nvmlDeviceGetComputeRunningProcesses(d()))
    step("nvmlEventSetCreate + RegisterEvents (XID)", lambda: N.nvmlDeviceRegisterEvents(
        d(), N.nvmlEventTypeXidCriticalError, N.nvmlEventSetCreate()))
    step("nvmlDeviceGetTopologyCommonAncestor", lambda: N.nvmlDeviceGetTopologyCommonAncestor(d(), d()))
    step("nvmlGpmQueryDeviceSupport", lambda: N.nvmlGpmQueryDeviceSupport(d()))

    def gpm():
        a, b = N.nvmlGpmSampleAlloc(), N.nvmlGpmSampleAlloc()
        N.nvmlGpmSampleGet(d(), a)
        N.nvmlGpmSampleGet(d(), b)
    step("nvmlGpmSampleAlloc + nvmlGpmSampleGet x2", gpm)
    step("nvmlShutdown", N.nvmlShutdown)

    for r in rows:
        print(f"{r['call']:60} {'ok' if r['ok'] is True else r['ok'][:40]:42} libcuda {'MAPPED' if r['libcuda'] else 'no':6} "
              f"RSS {r['rssMiB']} MiB")
    first = next((r["call"] for r in rows if r["libcuda"]), None)
    print(f"libcuda first mapped after: {first or 'never'}")
    if out:
        with open(out, "w") as f:
            json.dump({"rows": rows, "libcudaFirstMappedAfter": first}, f, indent=2)


if __name__ == "__main__":
    main()
