#include "src/image/image_config.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/base/json.h"

namespace gpunode::image {

namespace {

Status WrongType(absl::string_view source, absl::string_view key, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": image config: ", key, " is not ", want));
}

}  // namespace

StatusOr<ImageConfig> ParseImageConfig(absl::string_view json, absl::string_view source) {
  if (json.size() > kMaxConfigBytes) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": image config is ", json.size(),
                                             " bytes, more than the ", kMaxConfigBytes,
                                             " gpunode reads"));
  }
  GPUNODE_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(json, source));
  if (!doc.is_object()) return WrongType(source, "the document", "an object");
  ImageConfig c;
  for (const char* key : {"os", "architecture", "variant"}) {
    auto it = doc.find(key);
    if (it == doc.end() || it->is_null()) continue;
    if (!it->is_string()) return WrongType(source, key, "a string");
    std::string& dst = key[0] == 'o' ? c.os : key[0] == 'a' ? c.architecture : c.variant;
    dst = it->get<std::string>();
  }
  auto cfg = doc.find("config");
  if (cfg == doc.end() || cfg->is_null()) return c;
  if (!cfg->is_object()) return WrongType(source, "config", "an object");
  if (auto env = cfg->find("Env"); env != cfg->end() && !env->is_null()) {
    if (!env->is_array()) return WrongType(source, "config.Env", "a list");
    if (env->size() > kMaxEnvEntries) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": image config: config.Env has ",
                                               env->size(), " entries, more than ",
                                               kMaxEnvEntries));
    }
    for (size_t i = 0; i < env->size(); ++i) {
      const auto& e = (*env)[i];
      if (!e.is_string()) return WrongType(source, absl::StrCat("config.Env[", i, "]"), "a string");
      c.env.push_back(e.get<std::string>());
    }
  }
  if (auto labels = cfg->find("Labels"); labels != cfg->end() && !labels->is_null()) {
    if (!labels->is_object()) return WrongType(source, "config.Labels", "an object");
    if (labels->size() > kMaxLabels) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": image config: config.Labels has ",
                                               labels->size(), " entries, more than ", kMaxLabels));
    }
    for (const auto& [k, v] : labels->items()) {
      if (!v.is_string()) return WrongType(source, absl::StrCat("config.Labels[\"", k, "\"]"), "a string");
      c.labels[k] = v.get<std::string>();
    }
  }
  return c;
}

std::optional<std::string> EnvValue(const ImageConfig& c, absl::string_view key) {
  std::optional<std::string> out;
  for (const std::string& e : c.env) {
    if (e.size() > key.size() && e[key.size()] == '=' && absl::StartsWith(e, key)) {
      out = e.substr(key.size() + 1);
    } else if (e == key) {
      out = std::string();
    }
  }
  return out;
}

}  // namespace gpunode::image
