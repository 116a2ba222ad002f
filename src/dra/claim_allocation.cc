#include "src/dra/k8s_names.h"
#include "src/dra/claim_allocation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "src/base/terminal.h"
#include "src/kube/json_fields.h"

namespace gpunode::dra {
namespace {

std::string Shown(absl::string_view s) {
  std::string cut(s.substr(0, 64));
  if (s.size() > 64) cut += "...";
  return absl::StrCat("\"", TerminalSafe(cut), "\"");
}

// A required string of at most `max` bytes.
StatusOr<std::string> Required(const kube::Fields& f, absl::string_view key, size_t max) {
  GPUNODE_ASSIGN_OR_RETURN(std::string s, f.String(key));
  if (s.empty()) return f.Error(absl::StrCat(key, ": required"));
  if (s.size() > max) return f.Error(absl::StrCat(key, ": longer than ", max, " bytes"));
  return s;
}

StatusOr<AllocatedDevice> ReadResult(const kube::Fields& e) {
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields r, e.AsObject());
  AllocatedDevice d;
  d.path = r.path();
  GPUNODE_ASSIGN_OR_RETURN(d.request, Required(r, "request", 127));
  GPUNODE_ASSIGN_OR_RETURN(d.pool, Required(r, "pool", 253));
  GPUNODE_ASSIGN_OR_RETURN(d.device, Required(r, "device", 63));
  // The device name goes into CDI device names and file contents: a DNS label, as the API has it.
  if (!IsDnsLabel(d.device)) return r.Error(absl::StrCat("device: ", Shown(d.device), " is not a DNS label"));
  GPUNODE_ASSIGN_OR_RETURN(d.admin_access, r.Bool("adminAccess"));
  GPUNODE_ASSIGN_OR_RETURN(std::string share, r.String("shareID"));
  if (share.size() > 128) return r.Error("shareID: longer than 128 bytes");
  if (!share.empty()) d.share_id = share;
  return d;
}

StatusOr<std::optional<AllocationConfig>> ReadConfig(const kube::Fields& e, absl::string_view driver) {
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields c, e.AsObject());
  AllocationConfig out;
  out.path = c.path();
  GPUNODE_ASSIGN_OR_RETURN(std::string source, c.String("source"));
  if (source == "FromClass") {
    out.from_class = true;
  } else if (source != "FromClaim") {
    return c.Error(absl::StrCat("source: invalid config source ", Shown(source), " (FromClass or FromClaim)"));
  }
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields requests, c.Array("requests"));
  if (requests.json().size() > kMaxConfigRequests) {
    return requests.Error(absl::StrCat("more than ", kMaxConfigRequests, " requests"));
  }
  for (const kube::Fields& r : requests.Elements()) {
    if (!r.json().is_string() || r.json().get_ref<const std::string&>().empty()) {
      return r.Error("expected a request name");
    }
    out.requests.push_back(r.json().get<std::string>());
  }
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields opaque, c.Object("opaque"));
  // A configuration of a kind this API version does not have: the driver needs an update.
  if (!opaque.present()) return c.Error("only opaque parameters are supported by this driver");
  GPUNODE_ASSIGN_OR_RETURN(std::string config_driver, opaque.String("driver"));
  // A request can be served by several drivers: each reads only its own configs.
  if (config_driver != driver) return std::optional<AllocationConfig>();
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields parameters, opaque.Object("parameters"));
  if (!parameters.present()) return opaque.Error("parameters: required");
  GPUNODE_ASSIGN_OR_RETURN(out.config, ParseDeviceConfig(parameters.json(), parameters.what(), parameters.path()));
  return std::optional<AllocationConfig>(std::move(out));
}

// "gpu" names request "gpu" and its subrequests "gpu/<sub>".
bool Names(const std::vector<std::string>& requests, const std::string& request) {
  const std::string main = request.substr(0, request.find('/'));
  return std::any_of(requests.begin(), requests.end(),
                     [&](const std::string& r) { return r == request || r == main; });
}

const char* TypeOf(ConfigKind k) { return k == ConfigKind::kGpu ? "gpu" : "mig"; }

}  // namespace

StatusOr<ClaimAllocation> ReadClaimAllocation(const nlohmann::json& claim, std::string what,
                                              absl::string_view driver) {
  ClaimAllocation out;
  out.what = what;
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields root, kube::Fields::Root(claim, std::move(what)));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields meta, root.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(out.uid, meta.String("uid"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields status, root.Object("status"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields allocation, status.Object("allocation"));
  if (!allocation.present()) return out;
  out.allocated = true;
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields devices, allocation.Object("devices"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields results, devices.Array("results"));
  if (results.json().size() > kMaxAllocationResults) {
    return results.Error(absl::StrCat("more than ", kMaxAllocationResults, " devices"));
  }
  for (const kube::Fields& e : results.Elements()) {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields r, e.AsObject());
    GPUNODE_ASSIGN_OR_RETURN(std::string result_driver, r.String("driver"));
    if (result_driver != driver) continue;  // another driver's device of the same claim
    GPUNODE_ASSIGN_OR_RETURN(AllocatedDevice d, ReadResult(r));
    out.devices.push_back(std::move(d));
  }
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields configs, devices.Array("config"));
  if (configs.json().size() > kMaxAllocationConfigs) {
    return configs.Error(absl::StrCat("more than ", kMaxAllocationConfigs, " configs"));
  }
  std::vector<AllocationConfig> from_claim;
  for (const kube::Fields& e : configs.Elements()) {
    GPUNODE_ASSIGN_OR_RETURN(std::optional<AllocationConfig> c, ReadConfig(e, driver));
    if (!c) continue;
    if (c->from_class) {
      out.configs.push_back(std::move(*c));
    } else {
      from_claim.push_back(std::move(*c));
    }
  }
  for (AllocationConfig& c : from_claim) out.configs.push_back(std::move(c));
  return out;
}

Status AssignConfigs(ClaimAllocation& allocation, const std::function<std::string(const std::string&)>& type_of) {
  for (AllocatedDevice& d : allocation.devices) {
    const std::string type = type_of(d.device);
    d.config = -1;
    for (int i = static_cast<int>(allocation.configs.size()) - 1; i >= 0; --i) {
      const AllocationConfig& c = allocation.configs[i];
      const char* wants = TypeOf(c.config.kind);
      if (!c.requests.empty()) {
        if (!Names(c.requests, d.request)) continue;
        if (type != wants) {
          return absl::InvalidArgumentError(absl::StrCat(
              allocation.what, ": ", c.path, ": cannot apply ", ConfigKindName(c.config.kind), " to device ",
              Shown(d.device), " of type ", Shown(type), " (request ", Shown(d.request), ")"));
        }
        d.config = i;
        break;
      }
      if (type != wants) continue;
      d.config = i;
      break;
    }
  }
  return absl::OkStatus();
}

}  // namespace gpunode::dra
