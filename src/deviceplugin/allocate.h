// The kubelet's Allocate answer for one container (v1beta1): BuildAllocateResponse() turns device
// IDs of a devices::Resource into the response for the configured device-list strategies (env var,
// volume mounts, CDI annotations, CDI devices, device specs), plus MPS's pipe and limits for an
// MPS-shared resource. Facts: shared/reference/device-plugin.md §1.3-§1.5, §1.8.
#ifndef GPUNODE_DEVICEPLUGIN_ALLOCATE_H_
#define GPUNODE_DEVICEPLUGIN_ALLOCATE_H_

#include <string>
#include <vector>

#include "deviceplugin/v1beta1/api.pb.h"
#include "src/base/status.h"
#include "src/devices/config.h"
#include "src/devices/devices.h"

namespace gpunode::deviceplugin {

// The kubelet's health words in ListAndWatch.
inline constexpr char kHealthy[] = "Healthy";
inline constexpr char kUnhealthy[] = "Unhealthy";

// One container's response. Unknown IDs are InvalidArgument naming them and what this resource
// offers; more than one replica with failRequestsGreaterThanOne is InvalidArgument with NVIDIA's
// wording. `control_nodes` are the host's /dev/nvidiactl, /dev/nvidia-uvm... that exist (for
// passDeviceSpecs). An MPS-shared resource adds, whatever the device-list strategy (as NVIDIA's
// plugin does): env CUDA_MPS_PIPE_DIRECTORY=/mps/<resource>/pipe, mounts of the host's
// <mpsRoot>/<resource>/pipe there and of <mpsRoot>/shm at /dev/shm; and, beyond NVIDIA, the
// per-replica limits the daemon also has as defaults: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (100 /
// replicas) and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT ("0=71680M,1=...": memory / replicas in MiB,
// per device in the order of the response, GPUs of unknown memory left out).
StatusOr<v1beta1::ContainerAllocateResponse> BuildAllocateResponse(
    const devices::Resource& resource, const devices::PluginConfig& config, const std::vector<std::string>& ids,
    const std::vector<std::string>& control_nodes);

}  // namespace gpunode::deviceplugin

#endif  // GPUNODE_DEVICEPLUGIN_ALLOCATE_H_
