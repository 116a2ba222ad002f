// Pure parsers of the kernel's and driver's text files. They take the text, never a path, so
// they are unit-tested and fuzzed without a host.
#ifndef GPUNODE_NODE_TEXT_PARSERS_H_
#define GPUNODE_NODE_TEXT_PARSERS_H_

#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "src/base/status.h"
#include "src/base/version.h"
#include "src/node/inventory.h"

namespace gpunode::node {

// "0x10de" / "10de" -> 0x10de.
std::optional<uint32_t> ParseHex(absl::string_view text);

// sysfs link speed ("32.0 GT/s PCIe", "8 GT/s", "2.5 GT/s") -> PCIe generation 1..6.
std::optional<unsigned> PcieGenFromSpeed(absl::string_view speed);

// Module names from /proc/modules, in order.
std::vector<std::string> ParseProcModules(absl::string_view text);

struct NvrmVersion {
  Version version;
  ModuleFlavor flavor = ModuleFlavor::kUnknown;
  std::string line;
};
// /proc/driver/nvidia/version: "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64
// 580.95.05  Release Build ..." (open) or "NVRM version: NVIDIA UNIX x86_64 Kernel Module
// 535.183.01  Sun May 12 ..." (proprietary). Truncated or foreign text -> kDataLoss naming the file.
StatusOr<NvrmVersion> ParseNvrmVersion(absl::string_view text);

// /proc/driver/nvidia/gpus/<bus>/information ("Model: \t\t NVIDIA H200" ...).
ProcGpu ParseProcGpuInformation(absl::string_view text);

// "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05" -> 580.95.05, for libcuda / libnvidia-* only.
std::optional<Version> DriverVersionFromLibraryPath(absl::string_view path);

// cuda.h's "#define CUDA_VERSION 12040" -> 12.4.
std::optional<Version> CudaVersionFromHeader(absl::string_view header);

}  // namespace gpunode::node

#endif  // GPUNODE_NODE_TEXT_PARSERS_H_
