// The OCI runtime shim's two inputs together, as it reads them: a bundle's config.json and a CDI
// spec file from /etc/cdi or /var/run/cdi (any vendor's). The input is "<config.json>\n--\n<spec>".
// Whatever the bytes (deep nesting, invalid UTF-8, aliases, huge objects), each step returns a
// Status and the result can be written back: never an exception, abort or crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "src/base/json.h"
#include "src/container/cdi_spec.h"
#include "src/container/oci_inject.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t sep = input.find("\n--\n");
  if (sep == absl::string_view::npos) return 0;
  const absl::string_view config_text = input.substr(0, sep);
  const absl::string_view spec_text = input.substr(sep + 4);

  gpunode::container::SpecRegistry registry;
  auto spec = gpunode::cdi::ParseSpec(spec_text, "/etc/cdi/fuzz.yaml");
  if (spec.ok() && gpunode::cdi::ValidateSpec(*spec, "/etc/cdi/fuzz.yaml").ok()) {
    (void)gpunode::cdi::RenderSpecJson(*spec);
    (void)gpunode::cdi::RenderSpecYaml(*spec);
    registry.Add(*std::move(spec), "/etc/cdi/fuzz.yaml");
  }
  auto parsed = gpunode::ParseOrderedJson(config_text, "config.json");
  if (!parsed.ok()) return 0;
  nlohmann::ordered_json config = *std::move(parsed);
  // Both request policies: the default (the variable ignored for unprivileged containers) and
  // NVIDIA's opt-in that believes it, chosen by the input's length.
  gpunode::container::RequestPolicy policy;
  policy.accept_envvar_when_unprivileged = size % 2 == 0;
  auto request = gpunode::container::RequestedDevices(config, "nvidia.com/gpu", policy);
  if (!request.ok()) return 0;
  auto no_stat = [](const std::string& path) -> gpunode::StatusOr<gpunode::container::HostNodeInfo> {
    gpunode::container::HostNodeInfo info;
    info.type = "c";
    info.major = 195;
    info.minor = static_cast<int64_t>(path.size() % 8);
    info.file_mode = 0666;
    return info;
  };
  auto injected = gpunode::container::InjectDevices(config, registry, *request, "nvidia.com/gpu", no_stat);
  (void)gpunode::DumpJson(config);
  if (injected.ok()) {
    // A second pass (the shim run twice on one bundle) must work on the first one's output.
    (void)gpunode::container::InjectDevices(config, registry, *request, "nvidia.com/gpu", no_stat);
  }
  return 0;
}
