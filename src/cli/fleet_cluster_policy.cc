#include "src/cli/fleet_cluster_policy.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/terminal.h"
#include "src/upgrade/cluster_policy_sync.h"
#include "src/upgrade/planner.h"

namespace gpunode::cli {
namespace {

std::string Text(const nlohmann::json& o, const char* key) {
  return o.is_object() && o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : "";
}

bool NvidiaDriverDefault(const std::vector<nlohmann::json>& drivers, std::string* name) {
  for (const nlohmann::json& d : drivers) {
    const nlohmann::json spec = d.value("spec", nlohmann::json::object());
    *name = Text(d.value("metadata", nlohmann::json::object()), "name");
    if ((spec.is_object() && spec.value("default", false) == true) || *name == upgrade::kClusterPolicyDriverName) {
      return true;
    }
  }
  return false;
}

}  // namespace

ClusterPolicyStatus ReadClusterPolicyStatus(kube::Client& client, const std::vector<nlohmann::json>& drivers) {
  ClusterPolicyStatus out;
  auto view = upgrade::ReadClusterPolicyView(client);
  if (!view.ok()) {
    out.text = absl::StrCat("\nClusterPolicy: not read: ", TerminalSafe(std::string(view.status().message())), "\n");
    return out;
  }
  if (!view->has_value()) return out;
  const upgrade::ClusterPolicyView& v = **view;
  nlohmann::ordered_json doc = {{"name", v.name}};
  std::string text = absl::StrCat("\nCLUSTERPOLICY ", TerminalSafe(v.name));
  // The controller's word on it (its GpunodeApplied condition), else not applied yet.
  if (v.applied.is_object()) {
    doc["controller"] = {{"status", Text(v.applied, "status")}, {"reason", Text(v.applied, "reason")},
                         {"message", Text(v.applied, "message")}};
    absl::StrAppend(&text, ": ", TerminalSafe(Text(v.applied, "reason")), " (the controller's condition ",
                    upgrade::kConditionApplied, ")\n");
  } else {
    doc["controller"] = nullptr;
    absl::StrAppend(&text, ": not applied by the controller yet (no ", upgrade::kConditionApplied, " condition)\n");
  }
  if (!v.translation) {
    doc["error"] = v.error;
    absl::StrAppend(&text, "  invalid: ", TerminalSafe(v.error), "\n");
  } else {
    const upgrade::PolicyTranslation& t = *v.translation;
    std::string by;
    if (!t.default_driver) {
      doc["driver"] = nullptr;
      absl::StrAppend(&text, "  driver: none from it (",
                      t.use_nvidia_driver_crd ? "driver.useNvidiaDriverCRD: the NVIDIADrivers rule"
                                              : "driver.enabled false, or no image",
                      ")\n");
    } else if (NvidiaDriverDefault(drivers, &by)) {
      doc["driver"] = nullptr;
      absl::StrAppend(&text, "  driver: not applied: NVIDIADriver ", TerminalSafe(by), " is the default pool\n");
    } else {
      const upgrade::DriverSpec& d = *t.default_driver;
      doc["driver"] = {{"pool", upgrade::kClusterPolicyDriverName}, {"image", d.ImageFor("")}};
      absl::StrAppend(&text, "  driver: the default pool ", upgrade::kClusterPolicyDriverName, ", ",
                      TerminalSafe(d.ImageFor("")), "\n");
      nlohmann::json annotations = nlohmann::json::object();
      if (v.paused) annotations[upgrade::kAnnoPaused] = "true";
      out.pool = nlohmann::json{{"metadata", {{"name", upgrade::kClusterPolicyDriverName}, {"annotations", annotations}}},
                                {"spec", {{"version", d.version}}},
                                {"status", {{"ignoredFields", d.ignored}}}};
    }
    nlohmann::ordered_json fields = nlohmann::ordered_json::array();
    for (const upgrade::UnappliedField& u : t.unapplied) {
      fields.push_back({{"path", u.path}, {"value", u.value}, {"why", u.why}});
    }
    doc["notApplied"] = fields;
    if (!t.unapplied.empty()) {
      absl::StrAppend(&text, "  not applied (", t.unapplied.size(), " fields): ",
                      TerminalSafe(upgrade::UnappliedSummary(t, 2000)), "\n");
    }
  }
  doc["pool"] = v.pool.is_object() ? nlohmann::ordered_json(v.pool) : nlohmann::ordered_json(nullptr);
  doc["ignored"] = v.ignored;
  if (!v.ignored.empty()) {
    absl::StrAppend(&text, "  ignored (only the oldest applies): ", TerminalSafe(absl::StrJoin(v.ignored, ", ")), "\n");
  }
  out.doc = std::move(doc);
  out.text = std::move(text);
  return out;
}

}  // namespace gpunode::cli
