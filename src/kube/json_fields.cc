#include "src/kube/json_fields.h"

#include "absl/strings/str_cat.h"
#include "src/base/terminal.h"

namespace gpunode::kube {

const char* JsonTypeName(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::object: return "object";
    case nlohmann::json::value_t::array: return "array";
    case nlohmann::json::value_t::string: return "string";
    case nlohmann::json::value_t::boolean: return "boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float: return "number";
    case nlohmann::json::value_t::binary: return "binary";
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded: return "null";
  }
  return "null";
}

namespace {
const nlohmann::json& Null() {
  static const nlohmann::json* null = new nlohmann::json(nullptr);
  return *null;
}
}  // namespace

StatusOr<Fields> Fields::Root(const nlohmann::json& doc, std::string what) {
  Fields f(&doc, std::move(what), "");
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(f.what_, ": expected an object, got ", JsonTypeName(doc)));
  }
  return f;
}

const nlohmann::json& Fields::json() const { return v_ == nullptr ? Null() : *v_; }

const nlohmann::json* Fields::Member(absl::string_view key) const {
  if (v_ == nullptr || !v_->is_object()) return nullptr;
  auto it = v_->find(key);
  return it == v_->end() || it->is_null() ? nullptr : &*it;
}

std::string Fields::ChildPath(absl::string_view key) const {
  return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
}

Status Fields::Error(absl::string_view message) const {
  return absl::InvalidArgumentError(
      path_.empty() ? absl::StrCat(what_, ": ", message) : absl::StrCat(what_, ": ", path_, ": ", message));
}

Status Fields::TypeError(absl::string_view key, const char* expected, const nlohmann::json& got) const {
  return TypeErrorAt(key.empty() ? path_ : ChildPath(key), expected, got);
}

Status Fields::TypeErrorAt(const std::string& path, const char* expected, const nlohmann::json& got) const {
  return absl::InvalidArgumentError(absl::StrCat(what_, path.empty() ? "" : ": ", path, ": expected ", expected,
                                                 ", got ", JsonTypeName(got)));
}

StatusOr<Fields> Fields::Object(absl::string_view key) const {
  const nlohmann::json* m = Member(key);
  if (m != nullptr && !m->is_object()) return TypeError(key, "an object", *m);
  return Fields(m, what_, ChildPath(key));
}

StatusOr<Fields> Fields::Array(absl::string_view key) const {
  const nlohmann::json* m = Member(key);
  if (m != nullptr && !m->is_array()) return TypeError(key, "an array", *m);
  return Fields(m, what_, ChildPath(key));
}

StatusOr<std::string> Fields::String(absl::string_view key) const {
  const nlohmann::json* m = Member(key);
  if (m == nullptr) return std::string();
  if (!m->is_string()) return TypeError(key, "a string", *m);
  return m->get_ref<const std::string&>();
}

StatusOr<std::optional<int64_t>> Fields::Int(absl::string_view key) const {
  const nlohmann::json* m = Member(key);
  if (m == nullptr) return std::optional<int64_t>();
  if (m->is_number_integer()) return std::optional<int64_t>(m->get<int64_t>());
  if (m->is_number_unsigned()) {
    const uint64_t u = m->get<uint64_t>();
    if (u <= static_cast<uint64_t>(INT64_MAX)) return std::optional<int64_t>(static_cast<int64_t>(u));
  }
  return TypeError(key, "a whole number", *m);
}

StatusOr<bool> Fields::Bool(absl::string_view key) const {
  const nlohmann::json* m = Member(key);
  if (m == nullptr) return false;
  if (!m->is_boolean()) return TypeError(key, "true or false", *m);
  return m->get<bool>();
}

StatusOr<std::map<std::string, std::string>> Fields::StringMap(absl::string_view key) const {
  GPUNODE_ASSIGN_OR_RETURN(Fields obj, Object(key));
  std::map<std::string, std::string> out;
  if (!obj.present()) return out;
  for (auto it = obj.v_->begin(); it != obj.v_->end(); ++it) {
    if (!it.value().is_string()) {
      return TypeErrorAt(absl::StrCat(obj.path_, "[\"", TerminalSafe(it.key()), "\"]"), "a string", it.value());
    }
    out.emplace(it.key(), it.value().get<std::string>());
  }
  return out;
}

std::vector<Fields> Fields::Elements() const {
  std::vector<Fields> out;
  if (v_ == nullptr || !v_->is_array()) return out;
  out.reserve(v_->size());
  for (size_t i = 0; i < v_->size(); ++i) out.push_back(Fields(&(*v_)[i], what_, absl::StrCat(path_, "[", i, "]")));
  return out;
}

StatusOr<Fields> Fields::AsObject() const {
  if (v_ == nullptr || !v_->is_object()) return TypeErrorAt(path_, "an object", json());
  return *this;
}

}  // namespace gpunode::kube
