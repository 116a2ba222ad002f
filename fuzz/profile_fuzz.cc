// libFuzzer target: arbitrary bytes into the node-profile parser. The parser must never crash,
// throw or hang; whatever it accepts must satisfy the invariants the simulator relies on.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sim/support/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto profile = gpunode::sim::ParseProfile(text, "fuzz.yaml");
  if (!profile.ok()) return 0;
  (void)profile->EffectiveInitError();
  (void)profile->EffectiveCudaInitError();
  const unsigned n = static_cast<unsigned>(profile->gpus.size());
  for (unsigned a = 0; a < n; ++a) {
    const gpunode::sim::Gpu& g = profile->gpus[a];
    if (g.memory_used_mib + g.memory_reserved_mib > g.memory_total_mib) std::abort();
    if (g.mig.devices.size() > g.mig.max_devices) std::abort();
    if (profile->FindGpuByBusId(g.bus_id) == nullptr) std::abort();
    for (unsigned b = 0; b < n; ++b) (void)profile->CommonAncestor(a, b);
  }
  return 0;
}
