// The OCI runtime shim's reading of a bundle's config.json: what it asks for, then the edits of a
// small fixed spec applied to it. Any JSON is handled or refused with a Status, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/base/json.h"
#include "src/container/oci_inject.h"

namespace {

gpunode::container::SpecRegistry Registry() {
  gpunode::container::SpecRegistry r;
  auto spec = gpunode::cdi::ParseSpec(R"(cdiVersion: "0.5.0"
kind: "nvidia.com/gpu"
devices:
  - name: "0"
    containerEdits:
      deviceNodes:
        - {path: "/dev/nvidia0", type: "c", major: 195, minor: 0}
containerEdits:
  env: ["NVIDIA_VISIBLE_DEVICES=void"]
  mounts:
    - {hostPath: "/usr/lib/libcuda.so.1", containerPath: "/usr/lib/libcuda.so.1", options: ["ro"]}
  hooks:
    - {hookName: "createContainer", path: "/usr/bin/gpunode", args: ["gpunode"]}
)",
                                      "fuzz-spec.yaml");
  if (spec.ok()) r.Add(*spec, "fuzz-spec.yaml");
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gpunode::container::SpecRegistry registry = Registry();
  // As the shim reads it: nesting limit, linear time, no exceptions.
  auto parsed = gpunode::ParseOrderedJson(
      absl::string_view(reinterpret_cast<const char*>(data), size), "config.json");
  if (!parsed.ok()) return 0;
  nlohmann::ordered_json config = *std::move(parsed);
  // Both request policies: the default (the variable ignored for unprivileged containers) and
  // NVIDIA's opt-in that believes it, chosen by the input's length.
  gpunode::container::RequestPolicy policy;
  policy.accept_envvar_when_unprivileged = size % 2 == 0;
  auto request = gpunode::container::RequestedDevices(config, "nvidia.com/gpu", policy);
  if (!request.ok()) return 0;
  auto no_stat = [](const std::string& path) -> gpunode::StatusOr<gpunode::container::HostNodeInfo> {
    return absl::NotFoundError(path);
  };
  (void)gpunode::container::InjectDevices(config, registry, *request, "nvidia.com/gpu", no_stat);
  (void)gpunode::DumpJson(config);
  return 0;
}
