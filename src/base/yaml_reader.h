// The one strict reader for our YAML inputs (node profiles, CDI specs, the device-plugin, agent,
// MIG and exporter web configs, the compat data set). yaml-cpp hands us nodes, not a schema: each
// reader says which keys a map may have and what type each value is, and every refusal reads the
// same way, naming the source, the line, the key path and what was expected:
//
//   profile.yaml:12: gpus[1].memory_mib: expected an integer 0-1048576, got "lots"
//   config.yaml:3: sharing.timeSlicing: unknown key "replica" (known: renameByDefault, resources)
//
// A YamlValue is a node plus where it is. Children of missing keys are "nothing" (not an error
// until read) and carry their parent's line, so "expected a string, got nothing" still points
// somewhere useful. Nothing here throws: yaml-cpp calls that could are guarded.
#ifndef GPUNODE_BASE_YAML_READER_H_
#define GPUNODE_BASE_YAML_READER_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"
#include "yaml-cpp/yaml.h"

namespace gpunode {

// A decimal or 0x-hex integer, optionally signed, the whole text (profiles write PCI ids in hex).
bool ParseInteger(absl::string_view text, int64_t* out);

// `text` in double quotes, with quotes, backslashes and control characters escaped and anything
// past 60 characters cut to "...": safe to put into a one-line message.
std::string YamlQuote(absl::string_view text);

// What a node is, for "got ...": a scalar quoted ("lots"), "a list", "a map", "null", "nothing".
std::string YamlDescribe(const YAML::Node& node);

// Which words a boolean may be spelled with; readers keep what they accepted before.
enum class YamlBool {
  kGo,      // strconv.ParseBool, as NVIDIA's Go components: 1 t T TRUE true True, 0 f F FALSE false False
  kYaml11,  // yaml-cpp's own: true/false, yes/no, on/off, y/n (lower, Title or UPPER case)
  kStrict,  // true or false, nothing else
};

class YamlValue {
 public:
  // The document root (path empty) or any node with its key path.
  YamlValue(YAML::Node node, std::string source, std::string path = "", int fallback_line = 0);

  const YAML::Node& node() const { return node_; }
  const std::string& source() const { return source_; }
  const std::string& path() const { return path_; }
  // 1-based line of the node, else of the nearest parent that exists; 0 when unknown.
  int line() const { return line_; }

  bool IsSet() const { return node_.IsDefined() && !node_.IsNull(); }  // present and not null
  bool IsMap() const { return node_.IsMap(); }
  bool IsList() const { return node_.IsSequence(); }
  bool IsScalar() const { return node_.IsScalar(); }
  size_t size() const { return node_.IsSequence() || node_.IsMap() ? node_.size() : 0; }

  // The value at `key` of a map (nothing when absent or when this is not a map), and item `i`
  // of a list; their paths are "path.key" and "path[i]".
  YamlValue Child(absl::string_view key) const;
  YamlValue Item(size_t i) const;
  // Has(key): the key is present with a non-null value.
  bool Has(absl::string_view key) const { return Child(key).IsSet(); }

  // The one error form: "SOURCE:LINE: PATH: WHAT" (":LINE" and "PATH: " only where known).
  Status Error(absl::string_view what) const;
  // Error("expected WHAT, got <what the node is>").
  Status Expected(absl::string_view what) const;

  // A map whose keys are all plain strings in `known` (the first other key is refused, at its own
  // line: unknown key "x" (known: a, b)). The overload without `known` accepts any keys.
  Status ExpectMap(std::initializer_list<absl::string_view> known) const;
  Status ExpectMap(const std::vector<std::string>& known) const;
  Status ExpectMap() const;
  // A list of at most `max_items` items.
  Status ExpectList(size_t max_items = std::numeric_limits<size_t>::max()) const;

  // Scalars. String: any scalar, as written. Int: decimal or 0x-hex, the whole text, in
  // [min, max]. Double: a decimal number in [min, max].
  StatusOr<std::string> String() const;
  StatusOr<bool> Bool(YamlBool style = YamlBool::kGo) const;
  StatusOr<int64_t> Int(int64_t min = std::numeric_limits<int64_t>::min(),
                        int64_t max = std::numeric_limits<int64_t>::max()) const;
  StatusOr<double> Double(double min = -std::numeric_limits<double>::max(),
                          double max = std::numeric_limits<double>::max()) const;
  // A list of strings (a missing or null value is an empty list).
  StatusOr<std::vector<std::string>> Strings() const;

  // Optional fields of this map, the common shape in one call: an absent or null `key` leaves
  // *out as it was; a present one must have the type.
  Status Get(absl::string_view key, std::string* out) const;
  Status Get(absl::string_view key, bool* out, YamlBool style = YamlBool::kGo) const;
  Status Get(absl::string_view key, std::vector<std::string>* out) const;
  Status GetDouble(absl::string_view key, double* out, double min, double max) const;
  template <typename T>
  Status GetInt(absl::string_view key, T* out, int64_t min, int64_t max) const {
    const YamlValue v = Child(key);
    if (!v.IsSet()) return absl::OkStatus();
    GPUNODE_ASSIGN_OR_RETURN(int64_t i, v.Int(min, max));
    *out = static_cast<T>(i);
    return absl::OkStatus();
  }

  // fn(const YamlValue& item) for each item of a list (ExpectList first; max_items as there).
  template <typename Fn>
  Status ForEachItem(Fn fn, size_t max_items = std::numeric_limits<size_t>::max()) const {
    GPUNODE_RETURN_IF_ERROR(ExpectList(max_items));
    for (size_t i = 0; i < node_.size(); ++i) GPUNODE_RETURN_IF_ERROR(fn(Item(i)));
    return absl::OkStatus();
  }
  // fn(const std::string& key, const YamlValue& value) for each entry of a map, in file order.
  template <typename Fn>
  Status ForEachEntry(Fn fn) const {
    GPUNODE_RETURN_IF_ERROR(ExpectMap());
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      const std::string key = it->first.Scalar();
      GPUNODE_RETURN_IF_ERROR(fn(key, YamlValue(it->second, source_, JoinPath(key), KeyLine(it->first))));
    }
    return absl::OkStatus();
  }

  // "path.key" (or "key" at the root).
  std::string JoinPath(absl::string_view key) const;

 private:
  int KeyLine(const YAML::Node& key) const;

  YAML::Node node_;
  std::string source_;
  std::string path_;
  int line_ = 0;
};

}  // namespace gpunode

#endif  // GPUNODE_BASE_YAML_READER_H_
