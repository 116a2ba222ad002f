#include "src/base/yaml_emitter.h"

#include "src/base/json.h"

namespace gpunode {

void EmitJsonAsYaml(YAML::Emitter& out, const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::object:
      out << YAML::BeginMap;
      for (auto it = j.begin(); it != j.end(); ++it) {
        out << YAML::Key << it.key() << YAML::Value;
        EmitJsonAsYaml(out, it.value());
      }
      out << YAML::EndMap;
      break;
    case nlohmann::ordered_json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& e : j) EmitJsonAsYaml(out, e);
      out << YAML::EndSeq;
      break;
    case nlohmann::ordered_json::value_t::string:
      out << YAML::DoubleQuoted << j.get<std::string>();
      break;
    case nlohmann::ordered_json::value_t::boolean:
      out << (j.get<bool>() ? "true" : "false");
      break;
    case nlohmann::ordered_json::value_t::null:
      out << YAML::Null;
      break;
    default:
      out << DumpJson(j);
  }
}

std::string JsonToYaml(const nlohmann::ordered_json& doc) {
  YAML::Emitter out;
  EmitJsonAsYaml(out, doc);
  return out.c_str();
}

}  // namespace gpunode
