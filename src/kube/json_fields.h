// Typed reads of JSON that came from the API server (or from a file we did not write): every field
// is checked for its type before it is read, so a Node whose `metadata` is a string or a watch
// event whose `type` is a number is an error that names the field, never nlohmann's type_error
// (an exception nobody catches: the process aborts, and a DaemonSet pod crash-loops).
//
//   GPUNODE_ASSIGN_OR_RETURN(Fields node, Fields::Root(doc, "Node n1"));
//   GPUNODE_ASSIGN_OR_RETURN(Fields meta, node.Object("metadata"));
//   GPUNODE_ASSIGN_OR_RETURN(auto labels, meta.StringMap("labels"));
//   // a string metadata.labels: "Node n1: metadata.labels: expected an object, got string"
//
// An absent member and a JSON null read the same (the API server writes null for empty lists):
// an absent view, "" or no value.
#ifndef GPUNODE_KUBE_JSON_FIELDS_H_
#define GPUNODE_KUBE_JSON_FIELDS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/base/status.h"

namespace gpunode::kube {

// "object", "array", "string", "number", "boolean", "null".
const char* JsonTypeName(const nlohmann::json& v);

// A read-only view of one JSON value with the name of its document and its path in it. It points
// into the document, which must outlive it. Errors are INVALID_ARGUMENT:
// "<what>: <path>: expected <kind>, got <type>".
class Fields {
 public:
  // The document itself, which must be an object ("<what>: expected an object, got array").
  static StatusOr<Fields> Root(const nlohmann::json& doc, std::string what);

  // Absent or null: no value.
  bool present() const { return v_ != nullptr && !v_->is_null(); }
  // The value (null when absent).
  const nlohmann::json& json() const;
  const std::string& what() const { return what_; }
  const std::string& path() const { return path_; }

  // A member that, when present, must be an object / an array; absent or null: an absent view.
  StatusOr<Fields> Object(absl::string_view key) const;
  StatusOr<Fields> Array(absl::string_view key) const;
  // A member that, when present, must be a string ("" when absent or null).
  StatusOr<std::string> String(absl::string_view key) const;
  // A whole number (JSON integer); absent or null: no value.
  StatusOr<std::optional<int64_t>> Int(absl::string_view key) const;
  // true/false; absent or null: false.
  StatusOr<bool> Bool(absl::string_view key) const;
  // An object of strings (labels, annotations); a value that is not a string is an error naming
  // its key (metadata.labels["k"]).
  StatusOr<std::map<std::string, std::string>> StringMap(absl::string_view key) const;

  // The elements of an array view (none when absent), each with its path (status.conditions[2]).
  std::vector<Fields> Elements() const;
  // This value as an object (itself), or the error when it is not one. For array elements.
  StatusOr<Fields> AsObject() const;

  // "<what>: <path>: <message>" (or "<what>: <message>" at the root).
  Status Error(absl::string_view message) const;

 private:
  Fields(const nlohmann::json* v, std::string what, std::string path)
      : v_(v), what_(std::move(what)), path_(std::move(path)) {}
  const nlohmann::json* Member(absl::string_view key) const;
  std::string ChildPath(absl::string_view key) const;
  Status TypeError(absl::string_view key, const char* expected, const nlohmann::json& got) const;
  Status TypeErrorAt(const std::string& path, const char* expected, const nlohmann::json& got) const;

  const nlohmann::json* v_ = nullptr;  // null: absent
  std::string what_;
  std::string path_;
};

}  // namespace gpunode::kube

#endif  // GPUNODE_KUBE_JSON_FIELDS_H_
