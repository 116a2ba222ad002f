// What `gpunode exporter` reads from users: the counters CSV (-f), the exporter-toolkit web config
// (--web-config-file) and the listen address. Any input is parsed or refused with a Status, never
// a crash. The first byte picks the parser.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/exporter/counters.h"
#include "src/exporter/http_server.h"
#include "src/exporter/web_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      (void)gpunode::exporter::ParseCounters(text, "fuzz.csv");
      break;
    case 1:
      (void)gpunode::exporter::ParseWebConfig(text, "fuzz.yml", "/etc");
      break;
    default:
      (void)gpunode::exporter::ParseListenAddress(text);
  }
  return 0;
}
