// The requirement language (requirement.h). Sources: NVIDIA/libnvidia-container src/cli/dsl.c
// (parsing, dsl_compare_version, dsl_compare_string), src/cli/configure.c (the rules cuda, driver,
// arch, brand; per-device evaluation); NVIDIA/nvidia-container-toolkit
// internal/config/image/cuda_image.go (which variables, the legacy rule, NVIDIA_DISABLE_REQUIRE).
#include "src/compat/requirement.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/go_bool.h"
#include "src/base/version.h"

namespace gpunode::compat {
namespace {

constexpr absl::string_view kRequirePrefix = "NVIDIA_REQUIRE_";
constexpr absl::string_view kJetpackPrefix = "NVIDIA_REQUIRE_JETPACK";

struct OpName {
  absl::string_view text;
  ReqOp op;
  absl::string_view words;  // "at least"
};
constexpr OpName kOps[] = {
    {"=", ReqOp::kEqual, "exactly"},         {"!=", ReqOp::kNotEqual, "other than"},
    {"<", ReqOp::kLess, "below"},            {"<=", ReqOp::kLessEqual, "at most"},
    {">", ReqOp::kGreater, "above"},         {">=", ReqOp::kGreaterEqual, "at least"},
};

absl::string_view OpWords(ReqOp op) {
  for (const OpName& o : kOps) {
    if (o.op == op) return o.words;
  }
  return "?";
}

bool DigitsAndDots(absl::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789.") == absl::string_view::npos &&
         s.find_first_of("0123456789") != absl::string_view::npos;
}

// A term as dsl.c's evaluate_rule reads it: the key up to the first of "<>=!", the operator as the
// whole run of those characters (it must be one of the six), the rest the value.
StatusOr<ReqTerm> ParseTerm(absl::string_view name, absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": invalid expression \"", text, "\": ", why));
  };
  const size_t key_end = text.find_first_of("<>=!");
  if (key_end == 0 || key_end == absl::string_view::npos) {
    return bad("expected KEY OP VALUE, e.g. cuda>=12.4 (keys: cuda, driver, arch, brand)");
  }
  size_t op_end = text.find_first_not_of("<>=!", key_end);
  if (op_end == absl::string_view::npos) op_end = text.size();
  const absl::string_view key = text.substr(0, key_end);
  const absl::string_view op = text.substr(key_end, op_end - key_end);
  const absl::string_view value = text.substr(op_end);
  ReqTerm t;
  t.text = std::string(text);
  t.value = std::string(value);
  const std::string k = absl::AsciiStrToLower(key);
  if (k == "cuda") {
    t.key = ReqKey::kCuda;
  } else if (k == "driver") {
    t.key = ReqKey::kDriver;
  } else if (k == "arch") {
    t.key = ReqKey::kArch;
  } else if (k == "brand") {
    t.key = ReqKey::kBrand;
  } else {
    return bad(absl::StrCat("unknown key \"", key, "\" (keys: cuda, driver, arch, brand)"));
  }
  bool found = false;
  for (const OpName& o : kOps) {
    if (o.text == op) {
      t.op = o.op;
      found = true;
    }
  }
  if (!found) return bad(absl::StrCat("unknown operator \"", op, "\" (=, !=, <, <=, >, >=)"));
  if (value.empty()) return bad("no value after the operator");
  if (t.key == ReqKey::kBrand) {
    if (t.op != ReqOp::kEqual && t.op != ReqOp::kNotEqual) {
      return bad("brand compares with = or != only");
    }
  } else if (!DigitsAndDots(value)) {
    return bad(absl::StrCat("\"", value, "\" is not a version (digits and dots)"));
  }
  return t;
}

bool Compare(int cmp, ReqOp op) {
  switch (op) {
    case ReqOp::kEqual: return cmp == 0;
    case ReqOp::kNotEqual: return cmp != 0;
    case ReqOp::kLess: return cmp < 0;
    case ReqOp::kLessEqual: return cmp <= 0;
    case ReqOp::kGreater: return cmp > 0;
    case ReqOp::kGreaterEqual: return cmp >= 0;
  }
  return false;
}

// Whether a term holds for these facts (device may be null); `why` gets the sentence when not.
bool TermHolds(const ReqTerm& t, const ReqFacts& facts, const ReqDevice* dev, std::string* why) {
  const std::string who = dev ? dev->label : std::string("this node");
  switch (t.key) {
    case ReqKey::kCuda: {
      if (facts.cuda.empty()) return true;
      auto c = CompareDotted(facts.cuda, t.value);
      if (c && Compare(*c, t.op)) return true;
      *why = t.op == ReqOp::kGreaterEqual || t.op == ReqOp::kGreater
                 ? absl::StrCat(t.text, " needs a driver that runs CUDA ", t.value,
                                t.op == ReqOp::kGreater ? " or a later release" : "",
                                "; this node's driver runs CUDA ", facts.cuda)
                 : absl::StrCat(t.text, " needs a driver whose CUDA version is ", OpWords(t.op),
                                " ", t.value, "; this node's driver runs CUDA ", facts.cuda);
      return false;
    }
    case ReqKey::kDriver: {
      if (facts.driver.empty()) return true;
      auto c = CompareDotted(facts.driver, t.value);
      if (c && Compare(*c, t.op)) return true;
      *why = absl::StrCat(t.text, " needs a driver version ", OpWords(t.op), " ", t.value,
                          "; this node has driver ", facts.driver);
      return false;
    }
    case ReqKey::kArch: {
      if (!dev || dev->arch.empty()) return true;
      auto c = CompareDotted(dev->arch, t.value);
      if (c && Compare(*c, t.op)) return true;
      *why = absl::StrCat(t.text, " needs compute capability ", OpWords(t.op), " ", t.value, "; ",
                          who, " has ", dev->arch);
      return false;
    }
    case ReqKey::kBrand: {
      if (!dev || dev->brand.empty()) return true;
      const bool same = absl::EqualsIgnoreCase(dev->brand, t.value);
      if (t.op == ReqOp::kEqual ? same : !same) return true;
      *why = absl::StrCat(t.text, " needs a GPU of brand ", t.op == ReqOp::kEqual ? "" : "other than ",
                          t.value, "; ", who, " is ", dev->brand);
      return false;
    }
  }
  return false;
}

// Evaluates one requirement for one device (or none). Returns true when a group holds, with
// `held` set to it; else fills `failure`.
bool Holds(const Requirement& r, const ReqFacts& facts, const ReqDevice* dev, std::string* held,
           RequirementFailure* failure) {
  if (r.groups.empty()) return true;
  failure->requirement = r.name;
  failure->device = dev ? dev->label : "";
  for (const ReqGroup& g : r.groups) {
    bool ok = true;
    GroupFailure gf;
    gf.group = g.text;
    bool brand_ok = true;
    for (const ReqTerm& t : g.terms) {
      std::string why;
      if (!TermHolds(t, facts, dev, &why)) {
        ok = false;
        gf.term = t.text;
        gf.sentence = why;
        if (t.key == ReqKey::kBrand) brand_ok = false;
        break;
      }
    }
    if (ok) {
      *held = g.text;
      return true;
    }
    gf.brand_matched = brand_ok;
    failure->groups.push_back(std::move(gf));
  }
  return false;
}

}  // namespace

std::optional<int> CompareDotted(absl::string_view a, absl::string_view b) {
  if (!DigitsAndDots(a) || !DigitsAndDots(b)) return std::nullopt;
  std::vector<absl::string_view> pa = absl::StrSplit(a, '.', absl::SkipEmpty());
  std::vector<absl::string_view> pb = absl::StrSplit(b, '.', absl::SkipEmpty());
  const size_t n = std::max(pa.size(), pb.size());
  for (size_t i = 0; i < n; ++i) {
    absl::string_view x = i < pa.size() ? pa[i] : "0";
    absl::string_view y = i < pb.size() ? pb[i] : "0";
    // As numbers: leading zeros do not count ("05" == "5"), any length.
    while (x.size() > 1 && x[0] == '0') x.remove_prefix(1);
    while (y.size() > 1 && y[0] == '0') y.remove_prefix(1);
    if (x.size() != y.size()) return x.size() < y.size() ? -1 : 1;
    if (int c = x.compare(y); c != 0) return c < 0 ? -1 : 1;
  }
  return 0;
}

std::string BrandName(unsigned nvml_brand) {
  static const char* const kNames[] = {"unknown",     "quadro",    "tesla",     "nvs",
                                       "grid",        "geforce",   "titan",     "vapps",
                                       "vpc",         "vcs",       "vws",       "cloudgaming",
                                       "quadrortx",   "nvidiartx", "nvidia",    "geforcertx",
                                       "titanrtx"};
  return nvml_brand < sizeof(kNames) / sizeof(kNames[0]) ? kNames[nvml_brand] : "unknown";
}

StatusOr<Requirement> ParseRequirement(absl::string_view name, absl::string_view text) {
  if (text.size() > kMaxRequirementLength) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", text.size(),
                                                   " characters; at most ", kMaxRequirementLength,
                                                   " are read"));
  }
  Requirement r;
  r.name = std::string(name);
  r.text = std::string(text);
  size_t terms = 0;
  for (absl::string_view group : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    ReqGroup g;
    g.text = std::string(group);
    for (absl::string_view term : absl::StrSplit(group, ',', absl::SkipEmpty())) {
      if (++terms > kMaxRequirementTerms) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": more than ", kMaxRequirementTerms, " terms"));
      }
      GPUNODE_ASSIGN_OR_RETURN(ReqTerm t, ParseTerm(name, term));
      g.terms.push_back(std::move(t));
    }
    if (!g.terms.empty()) r.groups.push_back(std::move(g));
  }
  return r;
}

StatusOr<ImageRequirements> RequirementsFromEnv(const std::vector<std::string>& env) {
  std::map<std::string, std::string> vars;  // name order; a later entry wins
  for (const std::string& e : env) {
    const size_t eq = e.find('=');
    if (eq == std::string::npos) continue;
    vars[e.substr(0, eq)] = e.substr(eq + 1);
  }
  ImageRequirements out;
  if (auto it = vars.find("NVIDIA_DISABLE_REQUIRE"); it != vars.end()) {
    out.disable_value = it->second;
    auto b = ParseGoBool("NVIDIA_DISABLE_REQUIRE", it->second);
    out.disabled = b.ok() && *b;  // `d, _ := strconv.ParseBool(disable)`: an error is false
  }
  if (out.disabled) return out;
  for (const auto& [name, value] : vars) {
    if (!absl::StartsWith(name, kRequirePrefix) || absl::StartsWith(name, kJetpackPrefix)) continue;
    GPUNODE_ASSIGN_OR_RETURN(Requirement r, ParseRequirement(name, value));
    out.requirements.push_back(std::move(r));
  }
  const auto cuda_version = vars.find("CUDA_VERSION");
  const auto require_cuda = vars.find("NVIDIA_REQUIRE_CUDA");
  if (cuda_version != vars.end() && !cuda_version->second.empty() &&
      (require_cuda == vars.end() || require_cuda->second.empty())) {
    auto v = Version::Parse(cuda_version->second, "CUDA_VERSION");
    if (!v.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CUDA_VERSION=", cuda_version->second,
          " (a legacy image: CUDA_VERSION without NVIDIA_REQUIRE_CUDA requires cuda>=MAJOR.MINOR): ",
          v.status().message()));
    }
    GPUNODE_ASSIGN_OR_RETURN(
        Requirement r,
        ParseRequirement("CUDA_VERSION (legacy image)", absl::StrCat("cuda>=", v->major(), ".", v->minor())));
    out.requirements.push_back(std::move(r));
    out.legacy = true;
  }
  return out;
}

RequirementOutcome EvaluateRequirements(const std::vector<Requirement>& requirements,
                                        const ReqFacts& facts) {
  RequirementOutcome out;
  std::vector<const ReqDevice*> devices;
  for (const ReqDevice& d : facts.devices) devices.push_back(&d);
  if (devices.empty()) devices.push_back(nullptr);
  for (const Requirement& r : requirements) {
    std::string first_held;
    bool all = true;
    for (const ReqDevice* d : devices) {
      std::string held;
      RequirementFailure f;
      if (Holds(r, facts, d, &held, &f)) {
        if (first_held.empty()) first_held = held;
      } else {
        all = false;
        out.failures.push_back(std::move(f));
      }
    }
    if (all && !first_held.empty()) out.held_by.push_back(absl::StrCat(r.name, ": ", first_held));
    if (!all) out.satisfied = false;
  }
  return out;
}

std::string RequirementFailure::Summary(size_t max_groups) const {
  if (groups.empty()) return "";
  std::vector<std::string> parts;
  std::vector<const GroupFailure*> shown;
  shown.push_back(&groups.front());
  for (const GroupFailure& g : groups) {
    if (shown.size() >= max_groups) break;
    if (&g != &groups.front() && g.brand_matched) shown.push_back(&g);
  }
  for (const GroupFailure* g : shown) {
    parts.push_back(g->group == g->term ? g->sentence
                                        : absl::StrCat(g->group, ": ", g->sentence));
  }
  std::string s = absl::StrJoin(parts, "; ");
  const size_t rest = groups.size() - shown.size();
  if (rest > 0) {
    absl::StrAppend(&s, "; and ", rest, " more alternative", rest == 1 ? "" : "s",
                    " (for other GPU brands or driver branches) that do not hold either");
  }
  return s;
}

std::string RequirementOutcome::Message() const {
  // Devices that fail the same way are named together ("GPU 0 (...), GPU 1 (...)").
  std::vector<std::pair<std::string, std::vector<std::string>>> by_reason;
  for (const RequirementFailure& f : failures) {
    const std::string first = f.groups.empty() ? std::string("?") : f.groups.front().group;
    const std::string reason = absl::StrCat(first, "\x01", f.requirement, "\x01", f.Summary());
    auto it = std::find_if(by_reason.begin(), by_reason.end(), [&](const auto& p) { return p.first == reason; });
    if (it == by_reason.end()) it = by_reason.insert(by_reason.end(), {reason, {}});
    if (!f.device.empty()) it->second.push_back(f.device);
  }
  std::vector<std::string> parts;
  for (const auto& [reason, devices] : by_reason) {
    std::vector<std::string> p = absl::StrSplit(reason, '\x01');
    parts.push_back(absl::StrCat("unsatisfied condition: ", p[0], " (", p[1],
                                 devices.empty() ? "" : ", " + absl::StrJoin(devices, ", "), "): ", p[2]));
  }
  return absl::StrJoin(parts, "\n");
}

}  // namespace gpunode::compat
