#!/usr/bin/env bash
# Runs COMMAND in a private mount namespace shaped like a GPU node's plugin container, so that
# NVIDIA's device plugin can run beside gpunode's on a simulated node without touching the machine:
#   /var/lib/kubelet/device-plugins  empty tmpfs (NVIDIA's plugin serves its socket there, fixed)
#   /var/run/cdi                     empty tmpfs (where it writes CDI specs; the host's with
#                                    PLUGIN_NS_HOST_CDI=1)
#   /sys, /proc/driver               the simulated node's (PCI devices, NUMA nodes, MIG caps)
#   /dev                             tmpfs: null, zero, full, random, urandom, tty bound from the
#                                    real /dev, plus the node's nvidia* entries (NVIDIA's plugin
#                                    stats /dev/nvidiactl, nvidia-uvm... in its own container,
#                                    not under its dev root)
#
#   plugin_ns.sh HOSTROOT -- COMMAND [ARGS...]
# Needs root (unshare -m, mount). Work files go beside HOSTROOT.
set -euo pipefail
root=$1
shift
[ "${1:-}" = -- ] && shift
if [ "${PLUGIN_NS_INNER:-}" != 1 ]; then
  exec env PLUGIN_NS_INNER=1 unshare -m --propagation private "$0" "$root" -- "$@"
fi
unset PLUGIN_NS_INNER
mkdir -p /var/lib/kubelet/device-plugins /var/run/cdi
mount -t tmpfs gpunode-peers /var/lib/kubelet/device-plugins
# PLUGIN_NS_HOST_CDI=1: the host's /var/run/cdi (a plugin beside a real kubelet and containerd,
# whose containers must find the claims' specs there: test/peers/dra_test.sh).
[ "${PLUGIN_NS_HOST_CDI:-}" = 1 ] || mount -t tmpfs gpunode-peers /var/run/cdi
mount --bind "$root/sys" /sys
# /proc/driver too: NVIDIA's components read the MIG capability minors from
# /proc/driver/nvidia-caps of the machine they run on, not under their driver root.
if [ -d "$root/proc/driver" ] && [ -d /proc/driver ]; then mount --bind "$root/proc/driver" /proc/driver; fi
dev=$(mktemp -d "$(dirname "$root")/dev.XXXXXX")
mount -t tmpfs gpunode-peers "$dev"
for n in null zero full random urandom tty; do
  if [ -e "/dev/$n" ]; then touch "$dev/$n" && mount --bind "/dev/$n" "$dev/$n"; fi
done
ln -s /proc/self/fd "$dev/fd"
cp -a "$root"/dev/nvidia* "$dev"/ 2>/dev/null || true
mount --bind "$dev" /dev
exec "$@"
