#include "src/container/oci_require.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpunode::container {

StatusOr<compat::ImageRequirements> ContainerRequirements(const nlohmann::ordered_json& config) {
  std::vector<std::string> env;
  if (auto p = config.find("process"); p != config.end() && p->is_object()) {
    if (auto e = p->find("env"); e != p->end() && e->is_array()) {
      for (const auto& v : *e) {
        if (v.is_string()) env.push_back(v.get<std::string>());
      }
    }
  }
  return compat::RequirementsFromEnv(env);
}

compat::ReqFacts FactsForDevices(const node::NodeInventory& inv, const std::vector<std::string>& injected) {
  compat::ReqFacts facts;
  if (inv.driver.driver_version) facts.driver = inv.driver.driver_version->ToString();
  if (inv.driver.cuda_version) {
    facts.cuda = absl::StrCat(inv.driver.cuda_version->major(), ".", inv.driver.cuda_version->minor());
  }
  const auto& gpus = inv.driver.gpus;
  std::set<size_t> picked;
  for (const std::string& qualified : injected) {
    const size_t eq = qualified.find('=');
    const std::string name = eq == std::string::npos ? qualified : qualified.substr(eq + 1);
    for (size_t i = 0; i < gpus.size(); ++i) {
      bool match = name == "all" || name == std::to_string(gpus[i].index) ||
                   absl::EqualsIgnoreCase(name, gpus[i].uuid) ||
                   absl::StartsWith(name, absl::StrCat(gpus[i].index, ":"));
      for (const gpu::MigDevice& m : gpus[i].mig_devices) match |= absl::EqualsIgnoreCase(name, m.uuid);
      if (match) picked.insert(i);
    }
  }
  for (size_t i : picked) {
    const gpu::GpuInfo& g = gpus[i];
    compat::ReqDevice d;
    d.label = absl::StrCat("GPU ", g.index, " (", g.name, ")");
    if (g.brand) d.brand = compat::BrandName(*g.brand);
    if (g.cc_major && g.cc_minor) d.arch = absl::StrCat(*g.cc_major, ".", *g.cc_minor);
    facts.devices.push_back(std::move(d));
  }
  return facts;
}

Status CheckRequirements(const compat::ImageRequirements& reqs, const compat::ReqFacts& facts) {
  if (reqs.disabled || reqs.requirements.empty()) return absl::OkStatus();
  const compat::RequirementOutcome o = compat::EvaluateRequirements(reqs.requirements, facts);
  if (o.satisfied) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "requirement error: ", o.Message(),
      "; the container was not started (upgrade the driver, use an image built for an older CUDA, or set "
      "NVIDIA_DISABLE_REQUIRE=true in its environment to start it anyway)"));
}

}  // namespace gpunode::container
