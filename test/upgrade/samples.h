// NVIDIA's ClusterPolicy samples (test/upgrade/data) as the API server serves them: the YAML read
// into JSON as kubectl converts it.
#ifndef GPUNODE_TEST_UPGRADE_SAMPLES_H_
#define GPUNODE_TEST_UPGRADE_SAMPLES_H_

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/base/yaml.h"
#include "test/testing/status_matchers.h"

namespace gpunode::upgrade::samples {

inline std::string ReadData(const std::string& name) {
  std::ifstream in(std::string(GPUNODE_SOURCE_DIR) + "/test/upgrade/data/" + name, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// YAML as the API server stores it (kubectl's conversion, YAML 1.2 core schema): quoted scalars are
// strings; plain ones are null, booleans, integers or strings.
inline nlohmann::json ToJson(const YAML::Node& n) {
  if (n.IsMap()) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& kv : n) o[kv.first.Scalar()] = ToJson(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& item : n) a.push_back(ToJson(item));
    return a;
  }
  if (!n.IsScalar()) return nullptr;
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted
  if (s.empty() || s == "null" || s == "~") return nullptr;
  if (s == "true") return true;
  if (s == "false") return false;
  int64_t i = 0;
  if (absl::SimpleAtoi(s, &i)) return i;
  return s;
}

inline nlohmann::json Sample(const std::string& name) {
  const std::string text = ReadData(name);
  if (absl::EndsWith(name, ".json")) return nlohmann::json::parse(text);
  auto node = LoadYaml(text, name);
  EXPECT_OK(node);
  return node.ok() ? ToJson(*node) : nlohmann::json();
}

}  // namespace gpunode::upgrade::samples

#endif  // GPUNODE_TEST_UPGRADE_SAMPLES_H_
