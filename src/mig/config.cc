#include "src/mig/config.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/host_fs.h"
#include "src/base/yaml.h"
#include "src/base/yaml_reader.h"

namespace gpunode::mig {
namespace {

// Reads digits at `*pos`; false when there are none or the number is absurd.
bool ReadNumber(absl::string_view s, size_t* pos, unsigned* out) {
  size_t start = *pos;
  unsigned v = 0;
  while (*pos < s.size() && std::isdigit(static_cast<unsigned char>(s[*pos]))) {
    v = v * 10 + static_cast<unsigned>(s[*pos] - '0');
    if (v > 100000) return false;
    ++*pos;
  }
  *out = v;
  return *pos > start && !(s[start] == '0' && *pos - start > 1);
}

bool Consume(absl::string_view s, size_t* pos, absl::string_view token) {
  if (s.substr(*pos, token.size()) != token) return false;
  *pos += token.size();
  return true;
}

// Error collection with the file, line and key path of the first problem.
class Reader {
 public:
  explicit Reader(std::string origin) : origin_(std::move(origin)) {}
  bool ok() const { return error_.empty(); }
  Status status() const {
    return ok() ? absl::OkStatus() : absl::InvalidArgumentError(error_);
  }
  // The first problem wins; worded by src/base/yaml_reader.h (file, line, key path, what).
  void Fail(const YAML::Node& n, const std::string& path, const std::string& why) {
    if (!ok()) return;
    error_ = std::string(YamlValue(n, origin_, path).Error(why).message());
  }
  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
  std::string error_;
};

// The key node of `key` in `map` (for its line), else the map.
YAML::Node KeyNode(const YAML::Node& map, const std::string& key) {
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) return it->first;
  }
  return map;
}

std::string Quoted(absl::string_view key) {
  for (char c : key) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'))
      return absl::StrCat("\"", key, "\"");
  }
  return std::string(key);
}

std::string ScalarText(const YAML::Node& n) { return YamlDescribe(n); }

// Map keys in order; duplicate keys are an error.
bool Keys(Reader& r, const YAML::Node& map, const std::string& path,
          std::vector<std::pair<std::string, YAML::Node>>* out) {
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!it->first.IsScalar()) {
      r.Fail(it->first, path, "keys must be strings");
      return false;
    }
    std::string key = it->first.Scalar();
    if (!seen.insert(key).second) {
      r.Fail(it->first, path.empty() ? Quoted(key) : absl::StrCat(path, ".", Quoted(key)),
             "duplicate key");
      return false;
    }
    out->emplace_back(key, it->second);
  }
  return true;
}

bool ParseBool(const YAML::Node& n, bool* out) {
  if (!n.IsScalar() || n.Tag() == "!") return false;  // a quoted "true" is a string
  const std::string& s = n.Scalar();
  if (s == "true" || s == "True" || s == "TRUE") {
    *out = true;
    return true;
  }
  if (s == "false" || s == "False" || s == "FALSE") {
    *out = false;
    return true;
  }
  return false;
}

bool ParseInt(const YAML::Node& n, long long* out) {
  if (!n.IsScalar() || n.Tag() == "!") return false;
  return absl::SimpleAtoi(n.Scalar(), out);
}

bool ParseDeviceId(absl::string_view s, uint32_t* out) {
  if (s.size() < 3 || s.size() > 10 || (s.substr(0, 2) != "0x" && s.substr(0, 2) != "0X"))
    return false;
  uint32_t v = 0;
  for (char c : s.substr(2)) {
    int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
            : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
            : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                        : -1;
    if (d < 0) return false;
    v = (v << 4) | static_cast<uint32_t>(d);
  }
  *out = v;
  return true;
}

void ParseFilterValue(Reader& r, const YAML::Node& n, const std::string& path, MigConfigEntry* e) {
  if (!n.IsScalar() || n.Scalar().empty()) {
    r.Fail(n, path, absl::StrCat("expected a PCI device id such as \"0x233510DE\" or a product "
                                 "name, got ", ScalarText(n)));
    return;
  }
  uint32_t id = 0;
  const std::string& s = n.Scalar();
  if (s.size() > 1 && (s.substr(0, 2) == "0x" || s.substr(0, 2) == "0X")) {
    if (!ParseDeviceId(s, &id)) {
      r.Fail(n, path, absl::StrCat("expected a PCI device id (0x + up to 8 hex digits), got ", ScalarText(n)));
      return;
    }
    e->filter_ids.push_back(id);
  } else {
    e->filter_names.push_back(s);
  }
}

void ParseEntry(Reader& r, const YAML::Node& n, const std::string& path, MigConfigEntry* e) {
  e->line = n.Mark().line + 1;
  if (!n.IsMap()) {
    r.Fail(n, path, absl::StrCat("expected a map with devices and mig-enabled, got ", ScalarText(n)));
    return;
  }
  std::vector<std::pair<std::string, YAML::Node>> keys;
  if (!Keys(r, n, path, &keys)) return;
  bool has_devices = false, has_enabled = false;
  YAML::Node devices_node;
  std::optional<YAML::Node> mig_devices;
  for (auto& [key, v] : keys) {
    const std::string kp = absl::StrCat(path, ".", key);
    if (key == "device-filter") {
      if (v.IsSequence()) {
        if (v.size() == 0) r.Fail(v, kp, "an empty list selects no GPU; leave the key out to select all");
        for (size_t i = 0; i < v.size() && r.ok(); ++i)
          ParseFilterValue(r, v[i], absl::StrCat(kp, "[", i, "]"), e);
      } else {
        ParseFilterValue(r, v, kp, e);
      }
    } else if (key == "devices") {
      has_devices = true;
      devices_node = v;
      if (v.IsScalar() && v.Scalar() == "all") {
        e->all_devices = true;
      } else if (v.IsSequence()) {
        std::set<long long> seen;
        for (size_t i = 0; i < v.size() && r.ok(); ++i) {
          long long idx = 0;
          if (!ParseInt(v[i], &idx) || idx < 0 || idx > 1023) {
            r.Fail(v[i], absl::StrCat(kp, "[", i, "]"),
                   absl::StrCat("expected a GPU index (0, 1, ...), got ", ScalarText(v[i])));
          } else if (!seen.insert(idx).second) {
            r.Fail(v[i], absl::StrCat(kp, "[", i, "]"), absl::StrCat("GPU ", idx, " is listed twice"));
          } else {
            e->devices.push_back(static_cast<unsigned>(idx));
          }
        }
      } else {
        r.Fail(v, kp, absl::StrCat("expected \"all\" or a list of GPU indexes, got ", ScalarText(v)));
      }
    } else if (key == "mig-enabled") {
      has_enabled = true;
      if (!ParseBool(v, &e->mig_enabled))
        r.Fail(v, kp, absl::StrCat("expected true or false, got ", ScalarText(v)));
    } else if (key == "mig-devices") {
      mig_devices = v;
    } else {
      r.Fail(KeyNode(n, key), path,
             absl::StrCat("unknown key ", YamlQuote(key),
                          " (known: device-filter, devices, mig-enabled, mig-devices)"));
    }
    if (!r.ok()) return;
  }
  if (!has_devices) r.Fail(n, path + ".devices", "expected \"all\" or a list of GPU indexes, got nothing");
  if (!has_enabled) r.Fail(n, path + ".mig-enabled", "expected true or false, got nothing");
  if (!r.ok()) return;
  const std::string mp = absl::StrCat(path, ".mig-devices");
  if (mig_devices) {
    const YAML::Node& m = *mig_devices;
    if (m.IsNull() || (m.IsScalar() && m.Scalar().empty())) {
      // "mig-devices:" with nothing: as {}.
    } else if (!m.IsMap()) {
      r.Fail(m, mp, absl::StrCat("expected a map of MIG device names to counts, got ", ScalarText(m)));
      return;
    } else {
      std::vector<std::pair<std::string, YAML::Node>> devs;
      if (!Keys(r, m, mp, &devs)) return;
      std::set<std::string> canonical;
      for (auto& [name, count] : devs) {
        const std::string dp = absl::StrCat(mp, ".", Quoted(name));
        auto parsed = ParseMigProfileName(name);
        if (!parsed.ok()) {
          r.Fail(count, dp, std::string(parsed.status().message()));
          return;
        }
        if (!canonical.insert(parsed->ToString()).second) {
          r.Fail(count, dp, absl::StrCat("names the same MIG device as another key (", parsed->ToString(), ")"));
          return;
        }
        long long c = 0;
        if (!ParseInt(count, &c) || c < 0 || c > 64) {
          r.Fail(count, dp, absl::StrCat("expected a count 0-64, got ", ScalarText(count)));
          return;
        }
        e->mig_devices.emplace_back(*parsed, static_cast<unsigned>(c));
      }
    }
    if (!e->mig_enabled && !e->mig_devices.empty()) {
      r.Fail(m, mp, "MIG devices are listed but mig-enabled is false");
      return;
    }
  } else if (e->mig_enabled) {
    r.Fail(n, path, "mig-enabled is true but mig-devices is missing (use {} for MIG on without devices)");
  }
}

}  // namespace

std::string MigProfileName::GpuInstanceName() const {
  return absl::StrCat(gpu_slices, "g.", memory_gb, "gb", attributes);
}

std::string MigProfileName::ToString() const {
  std::string gi = GpuInstanceName();
  return compute_slices != gpu_slices ? absl::StrCat(compute_slices, "c.", gi) : gi;
}

StatusOr<MigProfileName> ParseMigProfileName(absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" is not a MIG device name such as 1g.18gb, 1c.3g.71gb or 1g.18gb+me: ", why));
  };
  MigProfileName p;
  size_t pos = 0;
  unsigned first = 0;
  if (!ReadNumber(text, &pos, &first) || first == 0) return bad("it must start with a slice count");
  if (Consume(text, &pos, "c.")) {
    p.compute_slices = first;
    if (!ReadNumber(text, &pos, &p.gpu_slices) || p.gpu_slices == 0 || !Consume(text, &pos, "g."))
      return bad("expected <g>g. after the compute slices");
  } else if (Consume(text, &pos, "g.")) {
    p.gpu_slices = first;
    p.compute_slices = first;
  } else {
    return bad("expected <g>g. or <c>c.<g>g.");
  }
  if (!ReadNumber(text, &pos, &p.memory_gb) || p.memory_gb == 0 || !Consume(text, &pos, "gb"))
    return bad("expected the memory as <m>gb");
  absl::string_view rest = text.substr(pos);
  if (!rest.empty() && rest != "+me" && rest != "+me.all" && rest != "-me" && rest != "+gfx")
    return bad(absl::StrCat("unknown attribute \"", rest, "\" (known: +me, +me.all, -me, +gfx)"));
  p.attributes = std::string(rest);
  if (p.compute_slices > p.gpu_slices) return bad("more compute slices than GPU slices");
  if (p.gpu_slices > 8) return bad("more than 8 GPU slices");
  return p;
}

bool MigConfigEntry::Selects(unsigned index, uint32_t pci_id, absl::string_view name) const {
  if (!filter_ids.empty() || !filter_names.empty()) {
    bool match = std::find(filter_ids.begin(), filter_ids.end(), pci_id) != filter_ids.end();
    for (const std::string& n : filter_names) match = match || absl::EqualsIgnoreCase(n, name);
    if (!match) return false;
  }
  return all_devices || std::find(devices.begin(), devices.end(), index) != devices.end();
}

const MigConfig* MigConfigFile::Find(absl::string_view name) const {
  for (const MigConfig& c : configs) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::vector<std::string> MigConfigFile::Names() const {
  std::vector<std::string> out;
  for (const MigConfig& c : configs) out.push_back(c.name);
  return out;
}

StatusOr<MigConfigFile> ParseMigConfigFile(absl::string_view text, absl::string_view origin) {
  GPUNODE_ASSIGN_OR_RETURN(YAML::Node root, LoadYaml(text, origin));
  Reader r{std::string(origin)};
  MigConfigFile file;
  file.origin = std::string(origin);
  if (!root.IsMap()) {
    r.Fail(root, "", absl::StrCat("expected a map with version and mig-configs, got ", ScalarText(root)));
    return r.status();
  }
  // A Kubernetes ConfigMap: the file is in data.
  if (root["kind"].IsDefined() && root["kind"].IsScalar() && root["kind"].Scalar() == "ConfigMap") {
    YAML::Node data = root["data"];
    if (!data.IsMap() || data.size() == 0) {
      r.Fail(root, "data", "the ConfigMap has no data");
      return r.status();
    }
    YAML::Node inner = data["config.yaml"];
    if (!inner.IsDefined()) {
      if (data.size() != 1) {
        r.Fail(data, "data", "the ConfigMap holds several files and none is config.yaml");
        return r.status();
      }
      inner = data.begin()->second;
    }
    if (!inner.IsScalar()) {
      r.Fail(inner, "data", absl::StrCat("expected the file's text, got ", ScalarText(inner)));
      return r.status();
    }
    return ParseMigConfigFile(inner.Scalar(), absl::StrCat(origin, " (ConfigMap data)"));
  }
  std::vector<std::pair<std::string, YAML::Node>> keys;
  if (!Keys(r, root, "", &keys)) return r.status();
  bool has_version = false, has_configs = false;
  YAML::Node configs;
  for (auto& [key, v] : keys) {
    if (key == "version") {
      has_version = true;
      if (!v.IsScalar() || v.Scalar() != "v1")
        r.Fail(v, "version", absl::StrCat("expected v1, got ", ScalarText(v)));
    } else if (key == "mig-configs") {
      has_configs = true;
      configs = v;
    } else {
      r.Fail(KeyNode(root, key), "", absl::StrCat("unknown key ", YamlQuote(key), " (known: version, mig-configs)"));
    }
    if (!r.ok()) return r.status();
  }
  if (!has_version) r.Fail(root, "version", "expected v1 (mig-parted's format has version: v1), got nothing");
  if (!has_configs) r.Fail(root, "mig-configs", "expected a map of config names to their entries, got nothing");
  if (!r.ok()) return r.status();
  if (!configs.IsMap() || configs.size() == 0) {
    r.Fail(configs, "mig-configs",
           absl::StrCat("expected a map of at least one config name to its entries, got ", ScalarText(configs)));
    return r.status();
  }
  std::vector<std::pair<std::string, YAML::Node>> names;
  if (!Keys(r, configs, "mig-configs", &names)) return r.status();
  for (auto& [name, entries] : names) {
    const std::string cp = absl::StrCat("mig-configs.", Quoted(name));
    if (name.empty()) {
      r.Fail(entries, cp, "empty config name");
      return r.status();
    }
    if (!entries.IsSequence() || entries.size() == 0) {
      r.Fail(entries, cp, absl::StrCat("expected a list of at least one entry, got ",
                                      entries.IsSequence() ? "an empty list" : ScalarText(entries)));
      return r.status();
    }
    MigConfig config;
    config.name = name;
    config.line = KeyNode(configs, name).Mark().line + 1;
    for (size_t i = 0; i < entries.size(); ++i) {
      MigConfigEntry e;
      ParseEntry(r, entries[i], absl::StrCat(cp, "[", i, "]"), &e);
      if (!r.ok()) return r.status();
      config.entries.push_back(std::move(e));
    }
    file.configs.push_back(std::move(config));
  }
  return file;
}

StatusOr<MigConfigFile> LoadMigConfigFile(const std::string& path) {
  GPUNODE_ASSIGN_OR_RETURN(std::string text, HostFs::Local().ReadFile(path));
  return ParseMigConfigFile(text, path);
}

}  // namespace gpunode::mig
