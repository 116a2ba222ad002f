// The DRA driver's name: NVIDIA's (`gpu.nvidia.com`), which DeviceClasses and claims written for
// NVIDIA's DRA driver select on; gpunode's default (configurable).
#ifndef GPUNODE_DRA_DRIVER_NAME_H_
#define GPUNODE_DRA_DRIVER_NAME_H_

namespace gpunode::dra {

inline constexpr char kDefaultDriverName[] = "gpu.nvidia.com";

}  // namespace gpunode::dra

#endif  // GPUNODE_DRA_DRIVER_NAME_H_
