// ResourceSlice objects of the device model: names, validation, JSON (the publisher is in
// slice_publisher.cc).
#include "src/dra/k8s_names.h"
#include "src/dra/resource_slices.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace gpunode::dra {
namespace {

using nlohmann::json;

constexpr size_t kMaxDriverName = 63;
constexpr size_t kMaxSubdomain = 253;
constexpr size_t kMaxLabel = 63;
constexpr size_t kMaxAttributesAndCapacities = 32;
constexpr size_t kMaxTaints = 16;

// FNV-1a (32 bits): a hash that stays the same from one run and build to the next.
uint32_t StableHash(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

bool ValidEffect(const std::string& e) { return e == "NoSchedule" || e == "NoExecute" || e == "None"; }

// A label name: an optional DNS subdomain prefix and '/', then 1-63 of [A-Za-z0-9-_.] starting
// and ending alphanumeric.
bool IsLabelName(const std::string& key) {
  std::string name = key;
  if (const size_t slash = key.find('/'); slash != std::string::npos) {
    if (!IsDnsSubdomain(key.substr(0, slash))) return false;
    name = key.substr(slash + 1);
  }
  if (name.empty() || name.size() > 63) return false;
  auto alnum = [](char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

bool IsLabelValue(const std::string& v) { return v.empty() || IsLabelName(v); }

bool AnyTaints(const std::vector<DraDevice>& devices, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    if (!devices[i].taints.empty()) return true;
  }
  return false;
}

}  // namespace

const char* ApiVersionOf(SliceApi api) {
  switch (api) {
    case SliceApi::kV1: return "resource.k8s.io/v1";
    case SliceApi::kV1beta2: return "resource.k8s.io/v1beta2";
    case SliceApi::kV1beta1: return "resource.k8s.io/v1beta1";
  }
  return "resource.k8s.io/v1";
}

std::string SlicesPath(SliceApi api) { return absl::StrCat("/apis/", ApiVersionOf(api), "/resourceslices"); }

std::string SliceName(const std::string& node, const std::string& driver, size_t index) {
  const std::string suffix = absl::StrCat("-", absl::StrReplaceAll(driver, {{".", "-"}}), "-", index);
  if (node.size() + suffix.size() <= kMaxSubdomain) return node + suffix;
  // Cut the node's name, end it on a letter or digit, and add a hash of the whole name.
  const std::string hash = absl::StrFormat("-%08x", StableHash(node));
  std::string prefix = node.substr(0, kMaxSubdomain - suffix.size() - hash.size());
  while (!prefix.empty() && (prefix.back() == '-' || prefix.back() == '.')) prefix.pop_back();
  return prefix + hash + suffix;
}

Status ValidateSlices(const SliceSpec& spec, const std::vector<DraDevice>& devices) {
  if (!IsDnsSubdomain(spec.driver, kMaxDriverName)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DRA driver name \"", spec.driver, "\": must be a lower-case DNS subdomain of at most 63 characters"));
  }
  if (!IsDnsSubdomain(spec.node)) {
    return absl::InvalidArgumentError(
        absl::StrCat("node name \"", spec.node, "\": must be a lower-case DNS subdomain (the pool is named after it)"));
  }
  std::set<std::string> names;
  for (const DraDevice& d : devices) {
    if (!IsDnsLabel(d.name)) {
      return absl::InvalidArgumentError(absl::StrCat("device name \"", d.name, "\": must be a DNS label"));
    }
    if (!names.insert(d.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("device name \"", d.name, "\": two devices of this name"));
    }
    if (d.attributes.size() + d.capacity.size() > kMaxAttributesAndCapacities) {
      return absl::InvalidArgumentError(absl::StrCat("device ", d.name, ": ", d.attributes.size() + d.capacity.size(),
                                                     " attributes and capacities, the API allows 32"));
    }
    if (d.taints.size() > kMaxTaints) {
      return absl::InvalidArgumentError(
          absl::StrCat("device ", d.name, ": ", d.taints.size(), " taints, the API allows 16"));
    }
    for (const DraTaint& t : d.taints) {
      if (!IsLabelName(t.key) || !IsLabelValue(t.value) || !ValidEffect(t.effect)) {
        return absl::InvalidArgumentError(absl::StrCat("device ", d.name, ": taint ", t.key, "=", t.value, ":", t.effect,
                                                       ": needs a label name, a label value and the effect "
                                                       "NoSchedule, NoExecute or None"));
      }
    }
  }
  return absl::OkStatus();
}

json DeviceJson(const DraDevice& d, SliceApi api) {
  json body = json::object();
  if (!d.attributes.empty()) body["attributes"] = json(d.attributes);
  if (!d.capacity.empty()) {
    json capacity = json::object();
    for (const auto& [name, value] : d.capacity) capacity[name] = {{"value", value}};
    body["capacity"] = std::move(capacity);
  }
  if (!d.taints.empty()) {
    json taints = json::array();
    for (const DraTaint& t : d.taints) {
      json taint = {{"key", t.key}, {"effect", t.effect}};
      if (!t.value.empty()) taint["value"] = t.value;
      if (!t.time_added.empty()) taint["timeAdded"] = t.time_added;
      taints.push_back(std::move(taint));
    }
    body["taints"] = std::move(taints);
  }
  if (api == SliceApi::kV1beta1) return {{"name", d.name}, {"basic", std::move(body)}};
  body["name"] = d.name;
  return body;
}

std::vector<json> BuildResourceSlices(const std::vector<DraDevice>& devices, const SliceSpec& spec, SliceApi api) {
  // Split: at most 128 devices a slice, 64 in a slice that holds a tainted device.
  std::vector<std::pair<size_t, size_t>> ranges;
  for (size_t from = 0; from < devices.size();) {
    size_t to = std::min(devices.size(), from + kMaxDevicesPerSlice);
    if (AnyTaints(devices, from, to)) to = std::min(to, from + kMaxDevicesPerSliceWithTaints);
    ranges.emplace_back(from, to);
    from = to;
  }
  if (ranges.empty()) ranges.emplace_back(0, 0);
  std::vector<json> out;
  for (size_t i = 0; i < ranges.size(); ++i) {
    json metadata = {{"name", SliceName(spec.node, spec.driver, i)}};
    if (!spec.node_uid.empty()) {
      metadata["ownerReferences"] = json::array({{{"apiVersion", "v1"},
                                                  {"kind", "Node"},
                                                  {"name", spec.node},
                                                  {"uid", spec.node_uid},
                                                  {"controller", true}}});
    }
    json list = json::array();
    for (size_t k = ranges[i].first; k < ranges[i].second; ++k) list.push_back(DeviceJson(devices[k], api));
    json slice_spec = {{"driver", spec.driver},
                       {"nodeName", spec.node},
                       {"pool",
                        {{"name", spec.node},
                         {"generation", spec.generation},
                         {"resourceSliceCount", static_cast<int64_t>(ranges.size())}}}};
    if (!list.empty()) slice_spec["devices"] = std::move(list);
    out.push_back({{"apiVersion", ApiVersionOf(api)},
                   {"kind", "ResourceSlice"},
                   {"metadata", std::move(metadata)},
                   {"spec", std::move(slice_spec)}});
  }
  return out;
}

}  // namespace gpunode::dra
