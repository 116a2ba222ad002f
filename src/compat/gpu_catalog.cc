#include "src/compat/gpu_catalog.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace gpunode::compat {
namespace {

struct Key {
  std::vector<std::string> tokens;
  std::string joined;
};

// Lower-case alphanumeric tokens without the brand words.
Key Normalize(absl::string_view text) {
  static const std::set<std::string> kNoise = {"nvidia", "tesla", "geforce", "quadro"};
  Key k;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty() && !kNoise.count(cur)) {
      k.joined += cur;
      k.tokens.push_back(cur);
    }
    cur.clear();
  };
  for (char c : text) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      cur.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
    } else {
      flush();
    }
  }
  flush();
  return k;
}

std::vector<Key> KeysOf(const GpuModel& m) {
  std::vector<Key> keys = {Normalize(m.name)};
  for (const std::string& a : m.aliases) keys.push_back(Normalize(a));
  return keys;
}

bool SameForRules(const GpuModel& a, const GpuModel& b) {
  return a.arch == b.arch && a.cc == b.cc && a.segment == b.segment;
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string Describe(const GpuModel& m) {
  return absl::StrCat(m.name, " (", m.arch, ", cc ", m.cc.ToString(), ")");
}

}  // namespace

std::optional<uint16_t> ParsePciDeviceId(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  std::string lower = absl::AsciiStrToLower(t);
  absl::string_view s = lower;
  if (!absl::ConsumePrefix(&s, "0x")) absl::ConsumePrefix(&s, "10de:");
  if (s.size() != 4) return std::nullopt;
  uint16_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    v = static_cast<uint16_t>(v * 16 + d);
  }
  return v;
}

GpuRef GpuCatalog::Ref(const GpuModel& m, absl::string_view matched_from) const {
  GpuRef r;
  r.name = m.name;
  r.arch = m.arch;
  r.cc = m.cc;
  r.segment = m.segment;
  if (!m.pci_ids.empty()) r.pci_device_id = m.pci_ids.front();
  r.matched_from = std::string(matched_from);
  r.in_data_set = true;
  return r;
}

std::vector<const GpuModel*> GpuCatalog::Match(absl::string_view text, bool loose) const {
  Key q = Normalize(text);
  std::vector<const GpuModel*> out;
  if (q.tokens.empty()) return out;
  // 1. The whole name (or an alias) with separators and brand words ignored.
  for (const GpuModel& m : data_.gpus) {
    for (const Key& k : KeysOf(m)) {
      if (k.joined == q.joined) {
        out.push_back(&m);
        break;
      }
    }
  }
  if (!out.empty()) return out;
  // 2. Every typed word appears in the model's name or aliases ("A100 80GB").
  for (const GpuModel& m : data_.gpus) {
    std::set<std::string> words;
    for (const Key& k : KeysOf(m)) words.insert(k.tokens.begin(), k.tokens.end());
    if (std::all_of(q.tokens.begin(), q.tokens.end(),
                    [&](const std::string& t) { return words.count(t) > 0; })) {
      out.push_back(&m);
    }
  }
  if (!out.empty()) return out;
  if (!loose) return out;
  // 3. NVML names with extra words: the model's name is contained in the input; the longest wins.
  std::set<std::string> typed(q.tokens.begin(), q.tokens.end());
  size_t best = 0;
  for (const GpuModel& m : data_.gpus) {
    for (const Key& k : KeysOf(m)) {
      if (k.tokens.empty()) continue;
      bool all = std::all_of(k.tokens.begin(), k.tokens.end(),
                             [&](const std::string& t) { return typed.count(t) > 0; });
      if (!all) continue;
      if (k.tokens.size() > best) {
        best = k.tokens.size();
        out.clear();
      }
      if (k.tokens.size() == best &&
          std::find(out.begin(), out.end(), &m) == out.end()) {
        out.push_back(&m);
      }
    }
  }
  return out;
}

std::optional<GpuRef> GpuCatalog::LookupByPciId(uint16_t device_id) const {
  for (const GpuModel& m : data_.gpus) {
    if (std::find(m.pci_ids.begin(), m.pci_ids.end(), device_id) != m.pci_ids.end()) {
      GpuRef r = Ref(m, absl::StrFormat("0x%04x", device_id));
      r.pci_device_id = device_id;
      return r;
    }
  }
  return std::nullopt;
}

std::optional<GpuRef> GpuCatalog::LookupByName(absl::string_view nvml_name) const {
  std::vector<const GpuModel*> c = Match(nvml_name, /*loose=*/true);
  if (c.empty()) return std::nullopt;
  for (const GpuModel* m : c) {
    if (!SameForRules(*m, *c.front())) return std::nullopt;
  }
  return Ref(*c.front(), nvml_name);
}

StatusOr<GpuRef> GpuCatalog::Lookup(absl::string_view typed) const {
  absl::string_view text = absl::StripAsciiWhitespace(typed);
  auto err = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu \"", typed.substr(0, 100), "\" ", why));
  };
  if (text.empty()) return err("is empty: give a GPU name (H100, T4, RTX 4090) or a PCI id");
  if (text.size() > 100) return err("is too long");
  std::string lower = absl::AsciiStrToLower(text);
  bool explicit_pci = absl::StartsWith(lower, "0x") || absl::StartsWith(lower, "10de:");
  std::optional<uint16_t> pci = ParsePciDeviceId(text);
  if (explicit_pci) {
    if (!pci) return err("is not a PCI device id (expected 4 hex digits: 0x2335, 10de:2335)");
    if (auto r = LookupByPciId(*pci)) return *r;
    return err(absl::StrFormat(
        "is not in the data set: no GPU has PCI device id 0x%04x (pass --gpu with its name "
        "instead, or add it to a --data file)",
        *pci));
  }
  std::vector<const GpuModel*> c = Match(text, /*loose=*/false);
  if (c.empty() && pci) {
    if (auto r = LookupByPciId(*pci)) return *r;
  }
  if (c.empty()) {
    Key q = Normalize(text);
    std::vector<std::pair<size_t, const GpuModel*>> near;
    for (const GpuModel& m : data_.gpus) {
      size_t best = SIZE_MAX;
      for (const Key& k : KeysOf(m)) {
        best = std::min(best, EditDistance(q.joined, k.joined));
        if (!q.joined.empty() && absl::StrContains(k.joined, q.joined)) best = std::min<size_t>(best, 1);
      }
      if (best <= std::max<size_t>(2, q.joined.size() / 3)) near.push_back({best, &m});
    }
    std::stable_sort(near.begin(), near.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> names;
    for (size_t i = 0; i < near.size() && names.size() < 5; ++i) names.push_back(near[i].second->name);
    if (names.empty()) {
      return err("is not a GPU in the data set (try a name such as H100, A100 80GB, T4, "
                 "RTX 4090, or a PCI device id such as 0x2335)");
    }
    return err(absl::StrCat("is not a GPU in the data set; close matches: ",
                            absl::StrJoin(names, ", ")));
  }
  std::vector<std::string> differing;
  for (const GpuModel* m : c) {
    if (!SameForRules(*m, *c.front())) {
      for (const GpuModel* n : c) differing.push_back(Describe(*n));
      return err(absl::StrCat("is ambiguous: it matches ", absl::StrJoin(differing, ", "),
                              "; type more of the name or give the PCI device id"));
    }
  }
  return Ref(*c.front(), text);
}

GpuRef GpuCatalog::FromNode(absl::string_view nvml_name, uint16_t pci_device_id,
                            std::optional<int> cc_major, std::optional<int> cc_minor) const {
  std::optional<GpuRef> r;
  if (pci_device_id != 0) r = LookupByPciId(pci_device_id);
  if (!r && !nvml_name.empty()) r = LookupByName(nvml_name);
  if (r) {
    r->name = std::string(nvml_name.empty() ? r->name : nvml_name);
    if (pci_device_id != 0) r->pci_device_id = pci_device_id;
    if (cc_major && cc_minor && *cc_major >= 0 && *cc_minor >= 0) {
      r->cc = Version::Of({static_cast<uint32_t>(*cc_major), static_cast<uint32_t>(*cc_minor)});
    }
    return *r;
  }
  GpuRef g;
  g.name = std::string(nvml_name);
  g.matched_from = std::string(nvml_name);
  if (pci_device_id != 0) g.pci_device_id = pci_device_id;
  if (cc_major && cc_minor && *cc_major >= 0 && *cc_minor >= 0) {
    g.cc = Version::Of({static_cast<uint32_t>(*cc_major), static_cast<uint32_t>(*cc_minor)});
    if (const Architecture* a = data_.FindArchitecture(*g.cc)) g.arch = a->name;
  }
  return g;
}

}  // namespace gpunode::compat
