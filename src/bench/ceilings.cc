#include "src/bench/ceilings.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "src/base/embedded.h"
#include "yaml-cpp/yaml.h"

namespace gpunode::bench {
namespace {

std::string Key(absl::string_view name) {
  return absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
}

Status ReadValue(const YAML::Node& parent, const char* field, const std::string& model,
                 std::optional<SourcedValue>* out) {
  const YAML::Node n = parent[field];
  if (!n || n.IsNull()) return absl::OkStatus();
  const std::string where = absl::StrCat("gpu-ceilings.yaml: model ", model, ": ", field);
  if (!n.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected {value, source, confidence}"));
  SourcedValue v;
  if (!n["value"]) return absl::InvalidArgumentError(absl::StrCat(where, ": missing value"));
  v.value = n["value"].as<double>();
  v.source = n["source"] ? n["source"].as<std::string>() : "";
  v.confidence = n["confidence"] ? n["confidence"].as<std::string>() : "";
  if (v.source.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": missing source"));
  if (v.confidence != "high" && v.confidence != "medium" && v.confidence != "low") {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": confidence must be high, medium or low (got '", v.confidence, "')"));
  }
  if (!(v.value > 0)) return absl::InvalidArgumentError(absl::StrCat(where, ": value must be > 0"));
  *out = v;
  return absl::OkStatus();
}

StatusOr<CeilingsTable> ParseImpl(absl::string_view text) {
  YAML::Node root = YAML::Load(std::string(text));
  if (!root["models"] || !root["models"].IsSequence()) {
    return absl::InvalidArgumentError("gpu-ceilings.yaml: missing the `models` list");
  }
  CeilingsTable table;
  std::set<std::string> ids, names;
  for (const YAML::Node& m : root["models"]) {
    ModelCeilings mc;
    mc.id = m["id"] ? m["id"].as<std::string>() : "";
    if (mc.id.empty()) return absl::InvalidArgumentError("gpu-ceilings.yaml: a model without id");
    if (!ids.insert(mc.id).second) {
      return absl::InvalidArgumentError(absl::StrCat("gpu-ceilings.yaml: duplicate model id ", mc.id));
    }
    mc.title = m["title"] ? m["title"].as<std::string>() : mc.id;
    if (!m["names"] || !m["names"].IsSequence() || m["names"].size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("gpu-ceilings.yaml: model ", mc.id, ": no NVML names"));
    }
    for (const YAML::Node& n : m["names"]) {
      std::string name = n.as<std::string>();
      if (!names.insert(Key(name)).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("gpu-ceilings.yaml: model ", mc.id, ": name '", name, "' belongs to two models"));
      }
      mc.names.push_back(name);
    }
    GPUNODE_RETURN_IF_ERROR(ReadValue(m, "bf16_tflops", mc.id, &mc.bf16_tflops));
    GPUNODE_RETURN_IF_ERROR(ReadValue(m, "fp16_tflops", mc.id, &mc.fp16_tflops));
    GPUNODE_RETURN_IF_ERROR(ReadValue(m, "fp32_tflops", mc.id, &mc.fp32_tflops));
    GPUNODE_RETURN_IF_ERROR(ReadValue(m, "memory_gbps", mc.id, &mc.memory_gbps));
    GPUNODE_RETURN_IF_ERROR(ReadValue(m, "pcie_gen", mc.id, &mc.pcie_gen));
    GPUNODE_RETURN_IF_ERROR(ReadValue(m, "pcie_width", mc.id, &mc.pcie_width));
    if (const YAML::Node meas = m["measured"]; meas && meas.IsMap()) {
      GPUNODE_RETURN_IF_ERROR(ReadValue(meas, "bf16_tflops", mc.id, &mc.measured_bf16_tflops));
      GPUNODE_RETURN_IF_ERROR(ReadValue(meas, "fp16_tflops", mc.id, &mc.measured_fp16_tflops));
      GPUNODE_RETURN_IF_ERROR(ReadValue(meas, "fp32_tflops", mc.id, &mc.measured_fp32_tflops));
      GPUNODE_RETURN_IF_ERROR(ReadValue(meas, "copy_gbps", mc.id, &mc.measured_copy_gbps));
    }
    table.models.push_back(std::move(mc));
  }
  return table;
}

}  // namespace

const ModelCeilings* CeilingsTable::Find(absl::string_view nvml_name) const {
  const std::string key = Key(nvml_name);
  for (const ModelCeilings& m : models) {
    for (const std::string& n : m.names) {
      if (Key(n) == key) return &m;
    }
  }
  return nullptr;
}

StatusOr<CeilingsTable> ParseCeilings(absl::string_view yaml_text) {
  try {
    return ParseImpl(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("gpu-ceilings.yaml: ", e.what()));
  }
}

StatusOr<CeilingsTable> BuiltinCeilings() {
  static const StatusOr<CeilingsTable>* table = [] {
    std::optional<std::string_view> text = FindEmbedded("bench", "gpu-ceilings.yaml");
    if (!text) {
      return new StatusOr<CeilingsTable>(
          absl::InternalError("gpu-ceilings.yaml is not embedded in this binary"));
    }
    return new StatusOr<CeilingsTable>(ParseCeilings(absl::string_view(text->data(), text->size())));
  }();
  return *table;
}

}  // namespace gpunode::bench
