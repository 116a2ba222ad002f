#!/usr/bin/env bash
# Packs build/bin/gpunode with its non-base shared libraries into .gpubundle/ for the GPU machine
# (see DESIGN.md, "Running on the GPU machine"); run there as `.gpubundle/run gpunode doctor`.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpubundle
progs=(build/bin/gpunode)
# --with-runc: also Debian's runc (+ libseccomp) and a static busybox, for the container proof
# (scripts/gpu-proof-containers.sh); the GPU machine has no container runtime.
if [ "${1:-}" = "--with-runc" ]; then
  progs+=("$(command -v runc)")
fi
[ -x build/bin/nvml_call_costs ] && progs+=(build/bin/nvml_call_costs)
[ -x build/bin/kubelet_emulator ] && progs+=(build/bin/kubelet_emulator)
[ -x build/bin/dra_kubelet ] && progs+=(build/bin/dra_kubelet)
[ -x build/bin/plugin_probe ] && progs+=(build/bin/plugin_probe)
[ -x build/bin/plugin_bench ] && progs+=(build/bin/plugin_bench)
[ -x build/bin/exporter_load ] && progs+=(build/bin/exporter_load)
[ -x build/bin/podresources_emulator ] && progs+=(build/bin/podresources_emulator)
# The simulated NVML, so benchmarks of simulated nodes can run on the GPU machine's CPU too.
[ -f build/bin/libgpunode-simnvml.so ] && progs+=(build/bin/libgpunode-simnvml.so)
../shared/tools/bundle-for-gpu.sh .gpubundle "${progs[@]}"
strip .gpubundle/bin/*
if [ "${1:-}" = "--with-runc" ]; then
  file -L /bin/busybox | grep -q 'statically linked' || { echo "need busybox-static" >&2; exit 2; }
  cp -L /bin/busybox .gpubundle/bin/busybox
fi
