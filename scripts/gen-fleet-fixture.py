#!/usr/bin/env python3
"""Writes test/fixtures/fleet/nodes-200.json: what GET /api/v1/nodes returns for a 200-node GPU
fleet with skew, as the API server formats it (a NodeList of real Node objects: metadata with
labels and annotations, spec, status with capacity, allocatable, conditions, addresses, nodeInfo).

Deterministic (seeded): running it again writes the same bytes. The labels are those gpunode's
agent sets (src/labels/labels.cc: GFD's nvidia.com/* set plus gpunode.io/*), the GpuStackReady
condition is the agent's validation gate, nvidia.com/* resources are the device plugin's.

The fleet: 8 CPU-only nodes and 192 GPU nodes of 4 products (H100, A100, L40S, H200) with several
driver versions and branches per product, two gpunode agent versions, 3 GPU nodes without agent
(GFD + NVIDIA's device plugin only), and nodes below capacity for different reasons (unhealthy
GPUs, failing validation, device plugin not registered, NotReady, devices the plugin marked
Unhealthy, MIG mixed strategy), cordoned nodes and time-sliced nodes.

Usage: scripts/gen-fleet-fixture.py [OUT]   (default test/fixtures/fleet/nodes-200.json)
"""
import json
import os
import random
import sys
import uuid

SEED = 13
RNG = random.Random(SEED)

PRODUCTS = {
    # product label, family, cc, memory MiB, GPUs per node, instance type, kernel module
    "h100": ("NVIDIA-H100-80GB-HBM3", "hopper", (9, 0), 81559, 8, "p5.48xlarge", "open"),
    "a100": ("NVIDIA-A100-SXM4-80GB", "ampere", (8, 0), 81920, 8, "p4de.24xlarge", "proprietary"),
    "l40s": ("NVIDIA-L40S", "ada-lovelace", (8, 9), 46068, 4, "g6e.12xlarge", "open"),
    "h200": ("NVIDIA-H200", "hopper", (9, 0), 143771, 8, "p5e.48xlarge", "open"),
}
# (product, driver, count)
LAYOUT = [
    ("h100", "580.95.05", 50), ("h100", "570.172.08", 16), ("h100", "550.163.01", 6),
    ("a100", "535.261.03", 40), ("a100", "570.172.08", 16),
    ("l40s", "570.172.08", 38), ("l40s", "575.64.05", 2),
    ("h200", "580.95.05", 24),
]
CUDA_OF_BRANCH = {"535": "12.2", "550": "12.4", "570": "12.8", "575": "12.9", "580": "13.0"}
CUDA_MAJORS_OF_BRANCH = {"535": (10, 11, 12), "550": (10, 11, 12), "570": (10, 11, 12),
                         "575": (10, 11, 12), "580": (10, 11, 12, 13)}
BASE_TIME = 1790000000  # 2026-09-21


def ts(offset):
    import datetime
    t = datetime.datetime.fromtimestamp(BASE_TIME + offset, datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def uid():
    return str(uuid.UUID(int=RNG.getrandbits(128), version=4))


def base_labels(name, arch="amd64", itype="m6i.4xlarge", zone="us-east-1a"):
    return {
        "beta.kubernetes.io/arch": arch,
        "beta.kubernetes.io/instance-type": itype,
        "beta.kubernetes.io/os": "linux",
        "failure-domain.beta.kubernetes.io/region": "us-east-1",
        "failure-domain.beta.kubernetes.io/zone": zone,
        "kubernetes.io/arch": arch,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": itype,
        "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": zone,
    }


def gpu_labels(key, driver, agent, healthy, unhealthy, doctor_status="ok", first=None,
               replicas=1, sharing="none", mig=None):
    product, family, cc, mem, count, _, module = PRODUCTS[key]
    major, minor, rev = driver.split(".")
    cuda = CUDA_OF_BRANCH[major]
    l = {
        "nvidia.com/cuda.driver-version.full": driver,
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev,
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        "nvidia.com/cuda.runtime-version.full": cuda,
        "nvidia.com/cuda.runtime-version.major": cuda.split(".")[0],
        "nvidia.com/cuda.runtime-version.minor": cuda.split(".")[1],
        "nvidia.com/cuda.runtime.major": cuda.split(".")[0],
        "nvidia.com/cuda.runtime.minor": cuda.split(".")[1],
        "nvidia.com/gpu.compute.major": str(cc[0]),
        "nvidia.com/gpu.compute.minor": str(cc[1]),
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/gpu.family": family,
        "nvidia.com/gpu.machine": PRODUCTS[key][5].replace(".", "-"),
        "nvidia.com/gpu.memory": str(mem),
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product + ("-SHARED" if replicas > 1 else ""),
        "nvidia.com/gpu.replicas": str(replicas),
        "nvidia.com/gpu.sharing-strategy": sharing,
        "nvidia.com/mig.capable": "true" if key in ("h100", "a100", "h200") else "false",
        "nvidia.com/mps.capable": "false",
    }
    if mig:
        l["nvidia.com/mig.strategy"] = mig
    if agent is None:
        return l
    l.update({
        "gpunode.io/agent.version": agent,
        "gpunode.io/doctor.status": doctor_status,
        "gpunode.io/driver.branch": major,
        "gpunode.io/driver.kernel-module": module,
        "gpunode.io/gpu.healthy-count": str(healthy),
        "gpunode.io/gpu.unhealthy-count": str(unhealthy),
    })
    for m in (10, 11, 12, 13):
        l["gpunode.io/driver.cuda-%d" % m] = "true" if m in CUDA_MAJORS_OF_BRANCH[major] else "false"
    if first:
        l["gpunode.io/doctor.first-finding"] = first
    return l


def condition(ctype, status, reason, message, heartbeat, transition):
    return {"type": ctype, "status": status, "lastHeartbeatTime": ts(heartbeat),
            "lastTransitionTime": ts(transition), "reason": reason, "message": message}


def node(i, name, labels, gpu_cap, gpu_alloc, ready=("True", "KubeletReady", "kubelet is posting ready status"),
         stack=None, unschedulable=False, cpus=96, mem_gi=768, extra_res=None, agent=True):
    created = 86400 * RNG.randint(1, 60)
    now = 86400 * 70
    conds = [
        condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available", now, created),
        condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", now, created),
        condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", now, created),
        condition("Ready", ready[0], ready[1], ready[2], now if ready[0] == "True" else now - 900, created + 60),
    ]
    if ready[0] == "Unknown":
        for c in conds[:3]:
            c.update(status="Unknown", reason="NodeStatusUnknown", message="Kubelet stopped posting node status.")
    if stack is not None:
        conds.append(condition("GpuStackReady", stack[0], stack[1], stack[2], now, created + 120))
    mem_ki = mem_gi * 1024 * 1024
    capacity = {"cpu": str(cpus), "ephemeral-storage": "1932735284Ki", "hugepages-1Gi": "0",
                "hugepages-2Mi": "0", "memory": "%dKi" % mem_ki, "pods": "110"}
    allocatable = {"cpu": "%dm" % (cpus * 1000 - 190), "ephemeral-storage": "1781200000000",
                   "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": "%dKi" % (mem_ki - 1024 * 1024), "pods": "110"}
    if gpu_cap is not None:
        capacity["nvidia.com/gpu"] = str(gpu_cap)
        allocatable["nvidia.com/gpu"] = str(gpu_alloc)
    for k, (c, a) in (extra_res or {}).items():
        capacity[k] = str(c)
        allocatable[k] = str(a)
    ip = "10.%d.%d.%d" % (20 + i // 250, (i * 7) % 250, 10 + i % 240)
    annotations = {
        "alpha.kubernetes.io/provided-node-ip": ip,
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    }
    owned = sorted(k for k in labels if k.startswith("gpunode.io/") or k.startswith("nvidia.com/"))
    if agent and owned:
        annotations["gpunode.io/managed-labels"] = ",".join(owned)
    spec = {"podCIDR": "100.64.%d.0/24" % i, "podCIDRs": ["100.64.%d.0/24" % i],
            "providerID": "aws:///us-east-1a/i-%017x" % RNG.getrandbits(68)}
    if unschedulable:
        spec["taints"] = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": ts(now - 3600)}]
        spec["unschedulable"] = True
    elif ready[0] != "True":
        spec["taints"] = [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": ts(now - 900)},
                          {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": ts(now - 880)}]
    return {
        "metadata": {"name": name, "uid": uid(), "resourceVersion": str(4000000 + RNG.randint(0, 999999)),
                     "creationTimestamp": ts(created), "labels": dict(sorted(labels.items())),
                     "annotations": annotations},
        "spec": spec,
        "status": {
            "capacity": capacity, "allocatable": allocatable, "conditions": conds,
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "%032x" % RNG.getrandbits(128), "systemUUID": uid().upper(), "bootID": uid(),
                         "kernelVersion": "6.8.0-1021-aws", "osImage": "Ubuntu 24.04.1 LTS",
                         "containerRuntimeVersion": "containerd://1.7.24", "kubeletVersion": "v1.31.4",
                         "kubeProxyVersion": "v1.31.4", "operatingSystem": "linux", "architecture": "amd64"},
        },
    }


READY_STACK = ("True", "Validated", "driver, NVML and CUDA layers pass gpunode doctor")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "test", "fixtures", "fleet", "nodes-200.json")
    plan = []  # (key, driver, index within the product)
    for key, driver, n in LAYOUT:
        plan.extend((key, driver) for _ in range(n))
    # Problems on chosen GPU nodes (seeded choice, fixed order).
    idx = list(range(len(plan)))
    RNG.shuffle(idx)
    problems = {}
    for kind, n in [("unhealthy", 3), ("validation", 2), ("no-plugin", 2), ("not-ready", 2), ("cordoned", 2),
                    ("plugin-unhealthy", 1), ("old-agent", 14), ("no-agent", 3)]:
        for _ in range(n):
            problems.setdefault(idx.pop(), []).append(kind)
    # MIG mixed on two A100 nodes, time-slicing (4 replicas) on two L40S nodes: not problems.
    a100 = [i for i, (k, _) in enumerate(plan) if k == "a100" and i not in problems]
    l40s = [i for i, (k, _) in enumerate(plan) if k == "l40s" and i not in problems]
    for i in a100[:2]:
        problems[i] = ["mig-mixed"]
    for i in l40s[:2]:
        problems[i] = ["time-slicing"]

    items = []
    counters = {}
    for i, (key, driver) in enumerate(plan):
        counters[key] = counters.get(key, 0) + 1
        name = "gpu-%s-%03d" % (key, counters[key])
        p = problems.get(i, [])
        count = PRODUCTS[key][4]
        agent = "0.8.2" if "old-agent" in p else "0.9.0"
        if "no-agent" in p:
            agent = None
        unhealthy = RNG.randint(1, 2) if "unhealthy" in p else 0
        doctor, first, stack = "ok", None, READY_STACK
        cap, alloc = count, count - unhealthy
        extra = None
        replicas, sharing, mig = 1, "none", None
        if "unhealthy" in p:
            doctor, first = "fail", RNG.choice(["driver.gpu-lost", "hardware.row-remap-failure"])
        if "validation" in p:
            doctor = "fail"
            first, reason, msg = RNG.choice([
                ("driver.version-mismatch", "DriverVersionMismatch",
                 "the kernel module and the user-space driver differ: reboot the node (or reload nvidia.ko) to load the installed driver"),
                ("cuda.system-driver-mismatch", "CudaSystemDriverMismatch",
                 "libcuda does not match the kernel module: remove the stale libcuda.so from the image path or reinstall the driver"),
            ])
            stack = ("False", reason, msg)
            alloc = 0
        if "no-plugin" in p:
            cap = alloc = None
        if "plugin-unhealthy" in p:
            alloc = count - 1
        if "mig-mixed" in p:
            mig = "mixed"
            cap = alloc = 0
            extra = {"nvidia.com/mig-1g.10gb": (7 * count, 7 * count)}
        if "time-slicing" in p:
            replicas, sharing = 4, "time-slicing"
            cap, alloc = count * 4, count * 4
        labels = base_labels(name, itype=PRODUCTS[key][5], zone=RNG.choice(["us-east-1a", "us-east-1b", "us-east-1c"]))
        labels.update(gpu_labels(key, driver, agent, count - unhealthy, unhealthy, doctor, first, replicas, sharing, mig))
        labels["feature.node.kubernetes.io/pci-10de.present"] = "true"
        ready = ("True", "KubeletReady", "kubelet is posting ready status")
        if "not-ready" in p:
            ready = ("Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
        if agent is None:
            stack = None
        items.append(node(i + 1, name, labels, cap, alloc, ready=ready, stack=stack,
                          unschedulable="cordoned" in p, cpus=192, mem_gi=2048, extra_res=extra, agent=agent is not None))
    for j in range(8):
        name = "cpu-%03d" % (j + 1)
        items.append(node(200 + j, name, base_labels(name, itype="m7i.8xlarge", zone="us-east-1a"), None, None,
                          cpus=32, mem_gi=128))
    items.sort(key=lambda n: n["metadata"]["name"])
    head = {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "4999999"}}
    text = json.dumps(head, separators=(",", ":"))[:-1] + ',"items":[\n'
    text += ",\n".join(json.dumps(n, separators=(",", ":")) for n in items) + "\n]}\n"
    with open(out, "w") as f:
        f.write(text)
    print("wrote %s: %d nodes, %d bytes" % (out, len(items), len(text)), file=sys.stderr)


if __name__ == "__main__":
    main()
