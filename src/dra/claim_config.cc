#include "src/dra/claim_config.h"

#include <algorithm>
#include <initializer_list>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/json.h"
#include "src/base/terminal.h"

namespace gpunode::dra {
namespace {

using json = nlohmann::json;
__extension__ typedef __int128 Int128;  // a quantity's digits times its scale, before the int64 check

// Foreign text in our messages: escaped and cut.
std::string Shown(absl::string_view s) {
  std::string cut(s.substr(0, 64));
  if (s.size() > 64) cut += "...";
  return absl::StrCat("\"", TerminalSafe(cut), "\"");
}

const char* TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::object: return "object";
    case json::value_t::array: return "array";
    case json::value_t::string: return "string";
    case json::value_t::boolean: return "boolean";
    case json::value_t::null: return "null";
    default: return "number";
  }
}

// One JSON value and where it is: "<what>: <path>: <message>".
class View {
 public:
  View(const json& v, std::string what, std::string path) : v_(&v), what_(std::move(what)), path_(std::move(path)) {}

  const json& value() const { return *v_; }
  const std::string& path() const { return path_; }
  Status Error(absl::string_view message) const {
    return absl::InvalidArgumentError(path_.empty() ? absl::StrCat(what_, ": ", message)
                                                    : absl::StrCat(what_, ": ", path_, ": ", message));
  }
  View Child(const std::string& key, const json& v) const {
    return View(v, what_, path_.empty() ? key : absl::StrCat(path_, ".", key));
  }
  // A member; absent or null: none (Go's json leaves the pointer nil for both).
  std::optional<View> Member(const std::string& key) const {
    auto it = v_->find(key);
    if (it == v_->end() || it->is_null()) return std::nullopt;
    return Child(key, *it);
  }
  Status ExpectObject() const {
    return v_->is_object() ? absl::OkStatus() : Error(absl::StrCat("expected an object, got ", TypeName(*v_)));
  }
  // Every member is one of `known` (names are case-sensitive, as NVIDIA's strict decoder has them).
  Status KnownFieldsOnly(std::initializer_list<const char*> known) const {
    for (const auto& [key, unused] : v_->items()) {
      if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; })) {
        return Child(TerminalSafe(key.substr(0, 64)), *v_)
            .Error(absl::StrCat("unknown field (known here: ", absl::StrJoin(known, ", "), ")"));
      }
    }
    return absl::OkStatus();
  }
  StatusOr<std::string> AsString() const {
    if (!v_->is_string()) return Error(absl::StrCat("expected a string, got ", TypeName(*v_)));
    return v_->get<std::string>();
  }

 private:
  const json* v_;
  std::string what_;
  std::string path_;
};

// Size of a value as JSON, stopping early past `limit` (bounded before anything walks it).
size_t JsonSize(const json& v, size_t limit, int depth = 0) {
  if (depth > 16) return limit + 1;
  size_t n = 2;
  if (v.is_object()) {
    for (const auto& [k, e] : v.items()) {
      n += k.size() + 4 + JsonSize(e, limit, depth + 1);
      if (n > limit) return n;
    }
  } else if (v.is_array()) {
    for (const json& e : v) {
      n += 1 + JsonSize(e, limit, depth + 1);
      if (n > limit) return n;
    }
  } else if (v.is_string()) {
    n += v.get_ref<const std::string&>().size();
  } else {
    n += 24;
  }
  return n;
}

StatusOr<Quantity> QuantityOf(const View& v) {
  std::string text;
  if (v.value().is_string()) {
    text = v.value().get<std::string>();
  } else if (v.value().is_number()) {
    text = DumpJson(v.value());  // resource.Quantity takes a bare JSON number too
  } else {
    return v.Error(absl::StrCat("expected a quantity (a string such as \"10Gi\"), got ", TypeName(v.value())));
  }
  StatusOr<Quantity> q = ParseQuantity(text);
  if (!q.ok()) return v.Error(q.status().message());
  return q;
}

StatusOr<MpsConfig> ParseMps(const View& v) {
  GPUNODE_RETURN_IF_ERROR(v.ExpectObject());
  GPUNODE_RETURN_IF_ERROR(v.KnownFieldsOnly(
      {"defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit", "defaultPerDevicePinnedMemoryLimit"}));
  MpsConfig mps;
  if (auto p = v.Member("defaultActiveThreadPercentage")) {
    // A Go *int: a JSON integer, nothing else (50.0 and "50" are refused).
    if (!p->value().is_number_integer()) {
      return p->Error(absl::StrCat("expected an integer, got ",
                                   p->value().is_number() ? "a fraction" : TypeName(p->value())));
    }
    if (p->value().is_number_unsigned() && p->value().get<uint64_t>() > 100) {
      return p->Error("active thread percentage must not be greater than 100");
    }
    const int64_t pct = p->value().get<int64_t>();
    if (pct < 0) return p->Error("active thread percentage must not be negative");
    if (pct > 100) return p->Error("active thread percentage must not be greater than 100");
    mps.default_active_thread_percentage = pct;
  }
  if (auto p = v.Member("defaultPinnedDeviceMemoryLimit")) {
    GPUNODE_ASSIGN_OR_RETURN(mps.default_pinned_device_memory_limit, QuantityOf(*p));
  }
  if (auto p = v.Member("defaultPerDevicePinnedMemoryLimit")) {
    GPUNODE_RETURN_IF_ERROR(p->ExpectObject());
    for (const auto& [key, value] : p->value().items()) {
      if (key.empty() || key.size() > 128) {
        return p->Error(absl::StrCat("key ", Shown(key), ": expected a device index or UUID"));
      }
      GPUNODE_ASSIGN_OR_RETURN(Quantity q, QuantityOf(p->Child(absl::StrCat("[", Shown(key), "]"), value)));
      mps.default_per_device_pinned_memory_limit.emplace(key, std::move(q));
    }
  }
  return mps;
}

StatusOr<Sharing> ParseSharing(const View& v, ConfigKind kind) {
  GPUNODE_RETURN_IF_ERROR(v.ExpectObject());
  // NVIDIA's MigDeviceSharing has no timeSlicingConfig: a MIG device's time slice is its GPU's.
  if (kind == ConfigKind::kGpu) {
    GPUNODE_RETURN_IF_ERROR(v.KnownFieldsOnly({"strategy", "timeSlicingConfig", "mpsConfig"}));
  } else {
    GPUNODE_RETURN_IF_ERROR(v.KnownFieldsOnly({"strategy", "mpsConfig"}));
  }
  Sharing s;
  std::string strategy;
  if (auto p = v.Member("strategy")) {
    GPUNODE_ASSIGN_OR_RETURN(strategy, p->AsString());
  }
  if (strategy == "TimeSlicing") {
    s.strategy = SharingStrategy::kTimeSlicing;
  } else if (strategy == "MPS") {
    s.strategy = SharingStrategy::kMps;
  } else {
    return v.Child("strategy", v.value()).Error(
        absl::StrCat("unknown GPU sharing strategy: ", Shown(strategy),
                     ", supported GPU sharing strategies: TimeSlicing, MPS"));
  }
  std::optional<View> ts = v.Member("timeSlicingConfig");
  std::optional<View> mps = v.Member("mpsConfig");
  if (s.strategy == SharingStrategy::kTimeSlicing) {
    if (kind == ConfigKind::kGpu) {
      // NVIDIA's GetTimeSlicingConfig refuses an mpsConfig beside the TimeSlicing strategy.
      if (mps) return mps->Error("cannot use MpsConfig with the \"TimeSlicing\" strategy");
      s.interval = TimeSliceInterval::kDefault;
      if (ts) {
        GPUNODE_RETURN_IF_ERROR(ts->ExpectObject());
        GPUNODE_RETURN_IF_ERROR(ts->KnownFieldsOnly({"interval"}));
        if (auto iv = ts->Member("interval")) {
          GPUNODE_ASSIGN_OR_RETURN(std::string name, iv->AsString());
          bool found = false;
          for (TimeSliceInterval t : {TimeSliceInterval::kDefault, TimeSliceInterval::kShort,
                                      TimeSliceInterval::kMedium, TimeSliceInterval::kLong}) {
            if (name == TimeSliceIntervalName(t)) {
              s.interval = t;
              found = true;
            }
          }
          if (!found) {
            return iv->Error(absl::StrCat("unknown time-slice interval: ", Shown(name),
                                          ", supported time-slice intervals: Default, Short, Medium, Long"));
          }
        }
      }
    } else if (mps) {
      // NVIDIA reads a MIG device's mpsConfig only with the MPS strategy: checked, then unused.
      GPUNODE_RETURN_IF_ERROR(ParseMps(*mps).status());
    }
    return s;
  }
  if (ts) return ts->Error("cannot use TimeSlicingConfig with the \"MPS\" strategy");
  if (mps) {
    GPUNODE_ASSIGN_OR_RETURN(s.mps, ParseMps(*mps));
  } else {
    s.mps = MpsConfig{};
  }
  return s;
}

json QuantityToJson(const Quantity& q) { return q.text; }

}  // namespace

const char* ConfigKindName(ConfigKind k) { return k == ConfigKind::kGpu ? kGpuConfigKind : kMigDeviceConfigKind; }

const char* SharingStrategyName(SharingStrategy s) { return s == SharingStrategy::kMps ? "MPS" : "TimeSlicing"; }

const char* TimeSliceIntervalName(TimeSliceInterval t) {
  switch (t) {
    case TimeSliceInterval::kShort: return "Short";
    case TimeSliceInterval::kMedium: return "Medium";
    case TimeSliceInterval::kLong: return "Long";
    default: return "Default";
  }
}

StatusOr<Quantity> ParseQuantity(absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("quantity ", Shown(text), ": ", why));
  };
  if (text.empty()) return bad("empty");
  if (text.size() > 64) return bad("longer than 64 characters");
  size_t i = 0;
  bool negative = false;
  if (text[0] == '+' || text[0] == '-') {
    negative = text[0] == '-';
    ++i;
  }
  std::string digits;
  int exp10 = 0;
  bool any_digit = false;
  bool dot = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      digits.push_back(c);
      any_digit = true;
      if (dot) --exp10;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (!any_digit) return bad("not a number");
  const absl::string_view suffix = text.substr(i);
  int exp2 = 0;
  static const std::pair<const char*, int> kDecimal[] = {{"n", -9}, {"u", -6}, {"m", -3}, {"", 0},  {"k", 3},
                                                         {"M", 6},  {"G", 9},  {"T", 12}, {"P", 15}, {"E", 18}};
  static const std::pair<const char*, int> kBinary[] = {{"Ki", 10}, {"Mi", 20}, {"Gi", 30},
                                                        {"Ti", 40}, {"Pi", 50}, {"Ei", 60}};
  bool known = false;
  for (const auto& [name, e] : kDecimal) {
    if (suffix == name) exp10 += e, known = true;
  }
  for (const auto& [name, e] : kBinary) {
    if (suffix == name) exp2 = e, known = true;
  }
  if (!known && suffix.size() >= 2 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    int e = 0;
    absl::string_view rest = suffix.substr(1);
    const bool sign = rest[0] == '+' || rest[0] == '-';
    if (rest.size() - sign >= 1 && rest.size() - sign <= 3 &&
        std::all_of(rest.begin() + sign, rest.end(),
                    [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) &&
        absl::SimpleAtoi(rest, &e)) {
      exp10 += e;
      known = true;
    }
  }
  if (!known) return bad("unknown suffix (Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E or an exponent e<n>)");
  // The digits as a whole number, without leading or trailing zeros (those go to the exponent).
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  while (!digits.empty() && digits.back() == '0') {
    digits.pop_back();
    ++exp10;
  }
  Quantity q{std::string(text), 0};
  if (digits.empty()) return q;
  if (digits.size() > 19) return bad("more than 19 significant digits");
  constexpr Int128 kMax = std::numeric_limits<int64_t>::max();
  Int128 n = 0;
  for (char c : digits) n = n * 10 + (c - '0');
  n <<= exp2;  // < 10^19 * 2^60 < 2^124
  Int128 magnitude = 0;
  if (exp10 >= 0) {
    for (int k = 0; k < exp10; ++k) {
      n *= 10;
      if (n > kMax) return bad("too large");
    }
    magnitude = n;
  } else if (-exp10 > 38) {
    magnitude = 1;  // under 1, rounded up (away from zero, as Quantity.Value())
  } else {
    Int128 den = 1;
    for (int k = 0; k < -exp10; ++k) den *= 10;
    magnitude = (n + den - 1) / den;
  }
  if (magnitude > kMax) return bad("too large");
  q.value = static_cast<int64_t>(negative ? -magnitude : magnitude);
  return q;
}

StatusOr<DeviceConfig> ParseDeviceConfig(const json& parameters, absl::string_view what, absl::string_view path) {
  View v(parameters, std::string(what), std::string(path));
  GPUNODE_RETURN_IF_ERROR(v.ExpectObject());
  if (JsonSize(parameters, kMaxConfigBytes) > kMaxConfigBytes) {
    return v.Error(absl::StrCat("larger than ", kMaxConfigBytes, " bytes (the API server's cap on opaque parameters)"));
  }
  std::string api_version, kind;
  if (auto p = v.Member("apiVersion")) {
    GPUNODE_ASSIGN_OR_RETURN(api_version, p->AsString());
  }
  if (auto p = v.Member("kind")) {
    GPUNODE_ASSIGN_OR_RETURN(kind, p->AsString());
  }
  if (api_version != kConfigApiVersion) {
    return v.Child("apiVersion", parameters)
        .Error(api_version.empty() ? absl::StrCat("required: ", kConfigApiVersion)
                                   : absl::StrCat(Shown(api_version), " is not ", kConfigApiVersion,
                                                  " (the only version of NVIDIA's config API)"));
  }
  DeviceConfig config;
  if (kind == kGpuConfigKind) {
    config.kind = ConfigKind::kGpu;
  } else if (kind == kMigDeviceConfigKind) {
    config.kind = ConfigKind::kMigDevice;
  } else {
    View k = v.Child("kind", parameters);
    if (kind.empty()) return k.Error("required: GpuConfig or MigDeviceConfig");
    if (kind == "VfioDeviceConfig") {
      return k.Error("VfioDeviceConfig is not supported: gpunode does not pass GPUs through to VMs (vfio-pci)");
    }
    if (kind.rfind("ComputeDomain", 0) == 0) {
      return k.Error(absl::StrCat(Shown(kind), " belongs to NVIDIA's compute-domain plugin, not to GPUs"));
    }
    return k.Error(absl::StrCat("unknown kind ", Shown(kind), " (known: GpuConfig, MigDeviceConfig)"));
  }
  GPUNODE_RETURN_IF_ERROR(v.KnownFieldsOnly({"apiVersion", "kind", "sharing"}));
  if (auto p = v.Member("sharing")) {
    GPUNODE_ASSIGN_OR_RETURN(config.sharing, ParseSharing(*p, config.kind));
  }
  return config;
}

json DeviceConfigToJson(const DeviceConfig& config) {
  json out = {{"apiVersion", kConfigApiVersion}, {"kind", ConfigKindName(config.kind)}};
  if (!config.sharing) return out;
  const Sharing& s = *config.sharing;
  json sharing = {{"strategy", SharingStrategyName(s.strategy)}};
  if (s.interval) sharing["timeSlicingConfig"] = {{"interval", TimeSliceIntervalName(*s.interval)}};
  if (s.mps) {
    json mps = json::object();
    if (s.mps->default_active_thread_percentage) {
      mps["defaultActiveThreadPercentage"] = *s.mps->default_active_thread_percentage;
    }
    if (s.mps->default_pinned_device_memory_limit) {
      mps["defaultPinnedDeviceMemoryLimit"] = QuantityToJson(*s.mps->default_pinned_device_memory_limit);
    }
    if (!s.mps->default_per_device_pinned_memory_limit.empty()) {
      json per = json::object();
      for (const auto& [k, q] : s.mps->default_per_device_pinned_memory_limit) per[k] = QuantityToJson(q);
      mps["defaultPerDevicePinnedMemoryLimit"] = std::move(per);
    }
    sharing["mpsConfig"] = std::move(mps);
  }
  out["sharing"] = std::move(sharing);
  return out;
}

StatusOr<std::map<std::string, std::string>> PinnedMemoryLimits(const MpsConfig& mps,
                                                                const std::vector<std::string>& uuids) {
  auto megabytes = [](const Quantity& q) -> std::optional<std::string> {
    const int64_t mib = q.value / 1024 / 1024;
    if (mib <= 0) return std::nullopt;
    return absl::StrCat(mib, "M");
  };
  std::map<std::string, std::string> limits;
  if (mps.default_pinned_device_memory_limit && !uuids.empty()) {
    std::optional<std::string> m = megabytes(*mps.default_pinned_device_memory_limit);
    if (!m) {
      return absl::InvalidArgumentError(absl::StrCat("mpsConfig.defaultPinnedDeviceMemoryLimit: invalid limit: ",
                                                     Shown(mps.default_pinned_device_memory_limit->text),
                                                     " is under 1Mi"));
    }
    for (const std::string& u : uuids) limits[u] = *m;
  }
  for (const auto& [key, q] : mps.default_per_device_pinned_memory_limit) {
    const std::string where = absl::StrCat("mpsConfig.defaultPerDevicePinnedMemoryLimit[", Shown(key), "]");
    std::string uuid;
    if (std::find(uuids.begin(), uuids.end(), key) != uuids.end()) {
      uuid = key;
    } else {
      int index = -1;
      if (!absl::SimpleAtoi(key, &index)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": invalid device: neither the UUID of a device of this config nor an index"));
      }
      if (index < 0 || static_cast<size_t>(index) >= uuids.size()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": invalid device index ", index, " (the config has ",
                                                       uuids.size(), " device(s))"));
      }
      uuid = uuids[index];
    }
    std::optional<std::string> m = megabytes(q);
    if (!m) return absl::InvalidArgumentError(absl::StrCat(where, ": invalid limit: ", Shown(q.text), " is under 1Mi"));
    limits[uuid] = *m;
  }
  return limits;
}

}  // namespace gpunode::dra
