#include "src/container/runtime_config.h"

// The config editors (Docker JSON, containerd and CRI-O TOML). The TOML line editor is in
// toml_edit.cc, the diff in runtime_diff.cc, the file applier and backups in runtime_apply.cc.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "src/base/json.h"
#include "src/container/toml_edit.h"

namespace gpunode::container {
namespace {

using toml_edit::ApplyTomlOps;
using toml_edit::Find;
using toml_edit::ParseToml;
using toml_edit::Path;
using toml_edit::SetOp;
using toml_edit::Sv;
using toml_edit::Wrap;
using toml_edit::WrapValue;

std::string RuntimePath(const RuntimeConfigOptions& o) {
  return o.runtime_path.empty() ? DefaultRuntimePath(o.kind) : o.runtime_path;
}

}  // namespace

StatusOr<RuntimeKind> ParseRuntimeKind(absl::string_view name) {
  if (name == "docker") return RuntimeKind::kDocker;
  if (name == "containerd") return RuntimeKind::kContainerd;
  if (name == "crio" || name == "cri-o") return RuntimeKind::kCrio;
  return absl::InvalidArgumentError(
      absl::StrCat("runtime \"", name, "\": not one of docker, containerd, crio"));
}

std::string RuntimeKindName(RuntimeKind kind) {
  switch (kind) {
    case RuntimeKind::kDocker: return "docker";
    case RuntimeKind::kContainerd: return "containerd";
    case RuntimeKind::kCrio: return "crio";
  }
  return "?";
}

std::string DefaultConfigPath(RuntimeKind kind) {
  switch (kind) {
    case RuntimeKind::kDocker: return kDockerConfigPath;
    case RuntimeKind::kContainerd: return kContainerdConfigPath;
    case RuntimeKind::kCrio: return kCrioDropInPath;
  }
  return "";
}

std::string DefaultRuntimePath(RuntimeKind kind) {
  return kind == RuntimeKind::kDocker ? "nvidia-container-runtime"
                                      : "/usr/bin/nvidia-container-runtime";
}

// ---------------------------------------------------------------------------------------------
// Docker

StatusOr<EditResult> EditDockerConfig(absl::string_view text, const RuntimeConfigOptions& options,
                                      absl::string_view source_name) {
  using Json = nlohmann::ordered_json;
  EditResult result;
  Json doc = Json::object();
  if (!absl::StripAsciiWhitespace(text).empty()) {
    // Linear in the size of the file (100 000 keys: milliseconds), nesting limited, no exception.
    GPUNODE_ASSIGN_OR_RETURN(doc, ParseOrderedJson(text, absl::StrCat("parse ", source_name)));
    if (!doc.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat("parse ", source_name, ": not a JSON object"));
    }
  }
  const Json before = doc;
  Json& runtimes = doc["runtimes"];
  if (runtimes.is_null()) runtimes = Json::object();
  if (!runtimes.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": \"runtimes\" is not an object"));
  }
  Json& rt = runtimes[options.runtime_name];
  if (!rt.is_object()) rt = Json::object();
  if (!rt.contains("args")) rt["args"] = Json::array();
  rt["path"] = RuntimePath(options);
  if (options.set_as_default) doc["default-runtime"] = options.runtime_name;
  if (options.enable_cdi) {
    Json& features = doc["features"];
    if (features.is_null()) features = Json::object();
    if (!features.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_name, ": \"features\" is not an object"));
    }
    features["cdi"] = true;  // merged: other feature flags stay
  }
  if (doc == before) {
    result.text = std::string(text);
    return result;
  }
  // Keep the file's indentation (first indented line), else 4 spaces as nvidia-ctk writes.
  int indent = 4;
  char indent_char = ' ';
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    size_t n = 0;
    while (n < line.size() && (line[n] == ' ' || line[n] == '\t')) ++n;
    if (n > 0 && n < line.size()) {
      indent_char = line[0];
      indent = static_cast<int>(n);
      break;
    }
  }
  result.text = DumpJson(doc, indent, indent_char) + "\n";
  return result;
}

// ---------------------------------------------------------------------------------------------
// containerd

StatusOr<int> ContainerdConfigVersion(absl::string_view text, absl::string_view source_name) {
  GPUNODE_ASSIGN_OR_RETURN(toml::table tree, ParseToml(text, source_name));
  if (const toml::node* v = tree.get("version")) {
    // Only a TOML integer: toml++'s value<int64_t>() casts a float to int64, undefined behaviour
    // for 2.5e115 (found by fuzz_runtime_config).
    std::optional<int64_t> n;
    if (const toml::value<int64_t>* i = v->as_integer()) n = i->get();
    if (!n || *n < 1 || *n > 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_name, ": unsupported containerd config version (want 1, 2 or 3)"));
    }
    return static_cast<int>(*n);
  }
  return tree.empty() ? 2 : 1;
}

StatusOr<EditResult> EditContainerdConfig(absl::string_view text,
                                          const RuntimeConfigOptions& options,
                                          absl::string_view source_name) {
  GPUNODE_ASSIGN_OR_RETURN(toml::table tree, ParseToml(text, source_name));
  GPUNODE_ASSIGN_OR_RETURN(int version, ContainerdConfigVersion(text, source_name));
  Path cri = version == 1   ? Path{"plugins", "cri"}
             : version == 2 ? Path{"plugins", "io.containerd.grpc.v1.cri"}
                            : Path{"plugins", "io.containerd.cri.v1.runtime"};
  Path containerd = cri;
  containerd.push_back("containerd");
  Path runtimes = containerd;
  runtimes.push_back("runtimes");
  Path nvidia = runtimes;
  nvidia.push_back(options.runtime_name);
  auto at = [](Path p, std::initializer_list<std::string> more) {
    p.insert(p.end(), more);
    return p;
  };

  std::vector<SetOp> ops;
  if (tree.empty() && !tree.contains("version")) {
    ops.push_back({{"version"}, WrapValue<int64_t>(2)});
  }
  // The runtime whose options we copy: the default (unless it is an nvidia one), runc, crun.
  const toml::table* source = nullptr;
  std::vector<std::string> candidates;
  if (const toml::node* d = Find(tree, at(containerd, {"default_runtime_name"}))) {
    if (auto name = d->value<std::string>(); name && !absl::StartsWith(*name, "nvidia")) {
      candidates.push_back(*name);
    }
  }
  candidates.push_back("runc");
  candidates.push_back("crun");
  for (const std::string& c : candidates) {
    if (const toml::node* n = Find(tree, at(runtimes, {c})); n != nullptr && n->is_table()) {
      source = n->as_table();
      break;
    }
  }
  const std::string path = RuntimePath(options);
  if (source != nullptr) {
    for (auto&& [key, value] : *source) {
      if (value.is_table()) continue;
      ops.push_back({at(nvidia, {Sv(key.str())}), Wrap(value)});
    }
    if (const toml::table* opts = source->get_as<toml::table>("options")) {
      for (auto&& [key, value] : *opts) {
        if (value.is_table() || key.str() == "BinaryName") continue;
        ops.push_back({at(nvidia, {"options", Sv(key.str())}), Wrap(value)});
      }
    }
  }
  if (source == nullptr) {
    ops.push_back({at(nvidia, {"privileged_without_host_devices"}), WrapValue(false)});
    ops.push_back({at(nvidia, {"runtime_engine"}), WrapValue(std::string())});
    ops.push_back({at(nvidia, {"runtime_root"}), WrapValue(std::string())});
  }
  if (source == nullptr || !source->contains("runtime_type")) {
    ops.push_back({at(nvidia, {"runtime_type"}), WrapValue(std::string("io.containerd.runc.v2"))});
  }
  ops.push_back({at(nvidia, {"options", "BinaryName"}), WrapValue(path)});
  if (version == 1) ops.push_back({at(nvidia, {"options", "Runtime"}), WrapValue(path)});
  if (options.set_as_default) {
    ops.push_back({at(containerd, {"default_runtime_name"}), WrapValue(options.runtime_name)});
  }
  if (options.enable_cdi) ops.push_back({at(cri, {"enable_cdi"}), WrapValue(true)});

  EditResult result;
  GPUNODE_ASSIGN_OR_RETURN(result.text, ApplyTomlOps(text, tree, ops, source_name));
  return result;
}

// ---------------------------------------------------------------------------------------------
// CRI-O

StatusOr<EditResult> EditCrioConfig(absl::string_view text, const RuntimeConfigOptions& options,
                                    absl::string_view source_name) {
  GPUNODE_ASSIGN_OR_RETURN(toml::table tree, ParseToml(text, source_name));
  Path nvidia = {"crio", "runtime", "runtimes", options.runtime_name};
  std::vector<SetOp> ops;
  ops.push_back({{"crio", "runtime", "runtimes", options.runtime_name, "runtime_path"},
                 WrapValue(RuntimePath(options))});
  ops.push_back({{"crio", "runtime", "runtimes", options.runtime_name, "runtime_type"},
                 WrapValue(std::string("oci"))});
  if (options.set_as_default) {
    ops.push_back({{"crio", "runtime", "default_runtime"}, WrapValue(options.runtime_name)});
  }
  EditResult result;
  if (options.enable_cdi) {
    result.warnings.push_back("--cdi is ignored for CRI-O: CRI-O enables CDI by default");
  }
  GPUNODE_ASSIGN_OR_RETURN(result.text, ApplyTomlOps(text, tree, ops, source_name));
  return result;
}

StatusOr<EditResult> EditRuntimeConfig(absl::string_view text, const RuntimeConfigOptions& options,
                                       absl::string_view source_name) {
  switch (options.kind) {
    case RuntimeKind::kDocker: return EditDockerConfig(text, options, source_name);
    case RuntimeKind::kContainerd: return EditContainerdConfig(text, options, source_name);
    case RuntimeKind::kCrio: return EditCrioConfig(text, options, source_name);
  }
  return absl::InvalidArgumentError("unknown runtime");
}

}  // namespace gpunode::container
