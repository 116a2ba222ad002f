// libFuzzer target: ParseLdCache must never crash, read out of bounds or allocate without bound,
// whatever the bytes; a successful parse must hold only strings that lie inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "src/container/ldcache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto cache = gpunode::container::ParseLdCache(bytes, "fuzz");
  if (cache.ok()) {
    for (const auto& e : cache->entries) {
      if (e.name.size() > size || e.path.size() > size) std::abort();
      (void)e.Is64Bit();
      (void)e.ArchName();
    }
    // What we parsed re-encodes and parses back to the same entries.
    auto again = gpunode::container::ParseLdCache(gpunode::container::EncodeLdCache(cache->entries), "re");
    if (!again.ok() || again->entries.size() != cache->entries.size()) std::abort();
  }
  return 0;
}
