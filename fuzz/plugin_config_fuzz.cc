// The device plugin's config file parser (NVIDIA's v1 format, YAML or JSON) and its validation:
// any input is parsed or refused with a Status, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/devices/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = gpunode::devices::ParseConfig(text, "fuzz.yaml");
  if (config.ok()) {
    (void)gpunode::devices::ValidateConfig(*config);
    (void)config->sharing.ReplicasOf("nvidia.com/gpu");
  }
  return 0;
}
