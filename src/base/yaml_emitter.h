// JSON documents written as YAML (`--output yaml`, CDI specs in YAML): one emitter, so every
// YAML we print quotes strings and spells booleans and nulls the same way.
#ifndef GPUNODE_BASE_YAML_EMITTER_H_
#define GPUNODE_BASE_YAML_EMITTER_H_

#include <string>

#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace gpunode {

// Writes `doc` into `out`: objects as block maps in their order, arrays as sequences, strings
// double-quoted (so "true" or "1.0" stay strings), booleans true/false, null as ~, numbers as
// JSON writes them.
void EmitJsonAsYaml(YAML::Emitter& out, const nlohmann::ordered_json& doc);

// The YAML text of `doc`, without a trailing newline.
std::string JsonToYaml(const nlohmann::ordered_json& doc);

}  // namespace gpunode

#endif  // GPUNODE_BASE_YAML_EMITTER_H_
