#!/usr/bin/env python3
"""A typical Python GPU exporter: prometheus_client + pynvml, reading NVML on every scrape
(a custom collector), served by prometheus_client's own HTTP server. Used only as a peer in
benchmarks/exporter_bench.py. Usage: pynvml_exporter.py PORT"""
import sys
import time

import pynvml
from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, REGISTRY


class NvmlCollector:
    def __init__(self):
        pynvml.nvmlInit()
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        self.ids = []
        for i, h in enumerate(self.handles):
            uuid = pynvml.nvmlDeviceGetUUID(h)
            name = pynvml.nvmlDeviceGetName(h)
            self.ids.append([str(i), uuid if isinstance(uuid, str) else uuid.decode(),
                             name if isinstance(name, str) else name.decode()])

    def collect(self):
        labels = ["gpu", "UUID", "modelName"]
        fams = {
            "temp": GaugeMetricFamily("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", labels=labels),
            "power": GaugeMetricFamily("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", labels=labels),
            "util": GaugeMetricFamily("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", labels=labels),
            "memutil": GaugeMetricFamily("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", labels=labels),
            "used": GaugeMetricFamily("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", labels=labels),
            "free": GaugeMetricFamily("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", labels=labels),
            "sm": GaugeMetricFamily("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", labels=labels),
            "mem": GaugeMetricFamily("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", labels=labels),
            "energy": CounterMetricFamily("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                                          "Total energy consumption since boot (in mJ).", labels=labels),
        }
        for h, ids in zip(self.handles, self.ids):
            fams["temp"].add_metric(ids, pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU))
            fams["power"].add_metric(ids, pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0)
            u = pynvml.nvmlDeviceGetUtilizationRates(h)
            fams["util"].add_metric(ids, u.gpu)
            fams["memutil"].add_metric(ids, u.memory)
            m = pynvml.nvmlDeviceGetMemoryInfo(h)
            fams["used"].add_metric(ids, m.used // (1024 * 1024))
            fams["free"].add_metric(ids, m.free // (1024 * 1024))
            fams["sm"].add_metric(ids, pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
            fams["mem"].add_metric(ids, pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM))
            fams["energy"].add_metric(ids, pynvml.nvmlDeviceGetTotalEnergyConsumption(h))
        yield from fams.values()


if __name__ == "__main__":
    REGISTRY.register(NvmlCollector())
    start_http_server(int(sys.argv[1]), addr="127.0.0.1")
    while True:
        time.sleep(3600)
