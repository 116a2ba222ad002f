// Fuzzes the parsers of kernel and driver text files (src/node/text_parsers.h) and Version::Parse.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "src/base/version.h"
#include "src/node/text_parsers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)gpunode::node::ParseNvrmVersion(absl::string_view(text.data(), text.size()));
  (void)gpunode::node::ParseProcGpuInformation(absl::string_view(text.data(), text.size()));
  (void)gpunode::node::ParseProcModules(absl::string_view(text.data(), text.size()));
  (void)gpunode::node::PcieGenFromSpeed(absl::string_view(text.data(), text.size()));
  (void)gpunode::node::ParseHex(absl::string_view(text.data(), text.size()));
  (void)gpunode::node::DriverVersionFromLibraryPath(absl::string_view(text.data(), text.size()));
  auto v = gpunode::Version::Parse(text);
  if (v.ok()) {
    auto again = gpunode::Version::Parse(v->ToString());
    if (!again.ok() || !(*again == *v)) __builtin_trap();  // ToString must round-trip
  }
  return 0;
}
