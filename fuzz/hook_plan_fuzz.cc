// The parts of `nvidia-container-runtime-hook prestart` (src/container/hook_inject.h) that read
// what a container or the kernel hands over: the OCI state, the plan from a config (the input as
// the config before, and as the one after the shim's edits of a small spec), /proc/PID/cgroup and
// mountinfo text, and the input's bytes as an attached device filter's instructions to prepend our
// rules to. Everything is handled or refused with a Status, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "src/base/json.h"
#include "src/container/hook_inject.h"
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
  mounts:
    - {hostPath: "/usr/lib/libcuda.so.1", containerPath: "/usr/lib/libcuda.so.1", options: ["ro", "bind"]}
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
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  (void)gpunode::container::ParseHookState(text);
  (void)gpunode::container::ParseProcCgroup(text);
  if (auto m = gpunode::container::FindMount(text, "cgroup2"); m.ok()) {
    (void)gpunode::container::CgroupDirectory(*m, "/system.slice/docker-x.scope");
  }
  (void)gpunode::container::FindMount(text, "cgroup", "devices");

  std::vector<gpunode::container::BpfInsn> insns(size / sizeof(gpunode::container::BpfInsn));
  if (!insns.empty()) std::memcpy(insns.data(), data, insns.size() * sizeof(gpunode::container::BpfInsn));
  (void)gpunode::container::PrependDeviceRules({{.type = 'c', .major = 195, .minor = 0, .access = "rwm"}}, insns);

  auto parsed = gpunode::ParseOrderedJson(text, "config.json");
  if (!parsed.ok()) return 0;
  const nlohmann::ordered_json before = *std::move(parsed);
  (void)gpunode::container::PlanFromConfigs(nlohmann::ordered_json::object(), before);
  (void)gpunode::container::BundleRootPath(before, "/run/bundle");
  nlohmann::ordered_json after = before;
  gpunode::container::DeviceRequest request;
  request.devices = {"nvidia.com/gpu=0"};
  auto no_stat = [](const std::string& path) -> gpunode::StatusOr<gpunode::container::HostNodeInfo> {
    return absl::NotFoundError(path);
  };
  if (gpunode::container::InjectDevices(after, registry, request, "nvidia.com/gpu", no_stat).ok()) {
    (void)gpunode::container::PlanFromConfigs(before, after);
  }
  return 0;
}
