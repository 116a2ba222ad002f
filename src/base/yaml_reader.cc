#include "src/base/yaml_reader.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace gpunode {
namespace {

int LineOf(const YAML::Node& n, int fallback) {
  // Mark() throws on an invalid (zombie) node; IsDefined() does not.
  if (!n.IsDefined()) return fallback;
  const YAML::Mark mark = n.Mark();
  return mark.line >= 0 ? mark.line + 1 : fallback;
}


bool OneOf(const std::string& s, std::initializer_list<const char*> words) {
  return std::any_of(words.begin(), words.end(), [&](const char* w) { return s == w; });
}

template <typename Known>
Status CheckKeys(const YamlValue& v, const Known& known, bool any) {
  if (!v.IsMap()) return v.Expected("a map");
  // A key given twice is refused, as Go's YAML decoders do ("already set in map"): yaml-cpp keeps
  // one of the two silently, which would drop, say, one of two passwords for a user.
  std::set<std::string> seen;
  for (auto it = v.node().begin(); it != v.node().end(); ++it) {
    const YamlValue key(it->first, v.source(), v.path(), LineOf(it->first, v.line()));
    if (!it->first.IsScalar()) return key.Expected("a plain string as key");
    const std::string& k = it->first.Scalar();
    if (!seen.insert(k).second) return key.Error(absl::StrCat("key ", YamlQuote(k), " given twice"));
    if (any) continue;
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      return key.Error(absl::StrCat("unknown key ", YamlQuote(k), " (known: ", absl::StrJoin(known, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool ParseInteger(absl::string_view t, int64_t* out) {
  bool neg = false;
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) {
    neg = t[0] == '-';
    t.remove_prefix(1);
  }
  int base = 10;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    base = 16;
    t.remove_prefix(2);
  }
  if (t.empty()) return false;
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v, base);
  if (ec != std::errc() || ptr != t.data() + t.size()) return false;
  if (neg ? v > static_cast<uint64_t>(INT64_MAX) + 1 : v > static_cast<uint64_t>(INT64_MAX)) return false;
  *out = neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}

std::string YamlQuote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, 60)) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\x%02x", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  if (s.size() > 60) out += "...";
  return out + "\"";
}

std::string YamlDescribe(const YAML::Node& n) {
  if (!n.IsDefined()) return "nothing";
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return YamlQuote(n.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    default:
      return "nothing";
  }
}

YamlValue::YamlValue(YAML::Node node, std::string source, std::string path, int fallback_line)
    : node_(std::move(node)), source_(std::move(source)), path_(std::move(path)) {
  line_ = LineOf(node_, fallback_line);
}

std::string YamlValue::JoinPath(absl::string_view key) const {
  return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
}

int YamlValue::KeyLine(const YAML::Node& key) const { return LineOf(key, line_); }

YamlValue YamlValue::Child(absl::string_view key) const {
  if (node_.IsMap()) {
    const YAML::Node& map = node_;  // const: a lookup must not insert the key
    YAML::Node child = map[std::string(key)];
    // A missing key gives an invalid ("zombie") node that throws on most calls: use a plain
    // undefined one instead.
    if (child.IsDefined()) return YamlValue(child, source_, JoinPath(key), line_);
  }
  return YamlValue(YAML::Node(YAML::NodeType::Undefined), source_, JoinPath(key), line_);
}

YamlValue YamlValue::Item(size_t i) const {
  std::string path = absl::StrCat(path_, "[", i, "]");
  if (node_.IsSequence() && i < node_.size()) {
    const YAML::Node& seq = node_;
    YAML::Node item = seq[i];
    if (item.IsDefined()) return YamlValue(item, source_, std::move(path), line_);
  }
  return YamlValue(YAML::Node(YAML::NodeType::Undefined), source_, std::move(path), line_);
}

Status YamlValue::Error(absl::string_view what) const {
  std::string where = source_;
  if (line_ > 0) absl::StrAppend(&where, ":", line_);
  if (!path_.empty()) absl::StrAppend(&where, ": ", path_);
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

Status YamlValue::Expected(absl::string_view what) const {
  return Error(absl::StrCat("expected ", what, ", got ", YamlDescribe(node_)));
}

Status YamlValue::ExpectMap(std::initializer_list<absl::string_view> known) const {
  return CheckKeys(*this, known, false);
}
Status YamlValue::ExpectMap(const std::vector<std::string>& known) const { return CheckKeys(*this, known, false); }
Status YamlValue::ExpectMap() const { return CheckKeys(*this, std::vector<std::string>(), true); }

Status YamlValue::ExpectList(size_t max_items) const {
  if (!IsList()) return Expected("a list");
  if (node_.size() > max_items) {
    return Error(absl::StrCat("expected at most ", max_items, " items, got ", node_.size()));
  }
  return absl::OkStatus();
}

StatusOr<std::string> YamlValue::String() const {
  if (!IsScalar()) return Expected("a string");
  return node_.Scalar();
}

StatusOr<bool> YamlValue::Bool(YamlBool style) const {
  if (IsScalar()) {
    const std::string& s = node_.Scalar();
    switch (style) {
      case YamlBool::kGo:
        if (OneOf(s, {"1", "t", "T", "TRUE", "true", "True"})) return true;
        if (OneOf(s, {"0", "f", "F", "FALSE", "false", "False"})) return false;
        break;
      case YamlBool::kYaml11: {
        bool b = false;
        if (YAML::convert<bool>::decode(node_, b)) return b;
        break;
      }
      case YamlBool::kStrict:
        if (s == "true") return true;
        if (s == "false") return false;
        break;
    }
  }
  return Expected("true or false");
}

StatusOr<int64_t> YamlValue::Int(int64_t min, int64_t max) const {
  int64_t v = 0;
  if (!IsScalar() || !ParseInteger(node_.Scalar(), &v) || v < min || v > max) {
    if (min == std::numeric_limits<int64_t>::min() && max == std::numeric_limits<int64_t>::max()) {
      return Expected("an integer");
    }
    return Expected(absl::StrCat("an integer ", min, "-", max));
  }
  return v;
}

StatusOr<double> YamlValue::Double(double min, double max) const {
  double v = 0;
  bool good = IsScalar();
  if (good) {
    const std::string& s = node_.Scalar();
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    good = !s.empty() && ec == std::errc() && ptr == s.data() + s.size() && v >= min && v <= max;
  }
  if (!good) {
    if (min == -std::numeric_limits<double>::max() && max == std::numeric_limits<double>::max()) {
      return Expected("a number");
    }
    return Expected(absl::StrCat("a number ", min, "-", max));
  }
  return v;
}

StatusOr<std::vector<std::string>> YamlValue::Strings() const {
  std::vector<std::string> out;
  if (!IsSet()) return out;
  if (!IsList()) return Expected("a list of strings");
  for (size_t i = 0; i < node_.size(); ++i) {
    GPUNODE_ASSIGN_OR_RETURN(std::string s, Item(i).String());
    out.push_back(std::move(s));
  }
  return out;
}

Status YamlValue::Get(absl::string_view key, std::string* out) const {
  const YamlValue v = Child(key);
  if (!v.IsSet()) return absl::OkStatus();
  GPUNODE_ASSIGN_OR_RETURN(*out, v.String());
  return absl::OkStatus();
}

Status YamlValue::Get(absl::string_view key, bool* out, YamlBool style) const {
  const YamlValue v = Child(key);
  if (!v.IsSet()) return absl::OkStatus();
  GPUNODE_ASSIGN_OR_RETURN(*out, v.Bool(style));
  return absl::OkStatus();
}

Status YamlValue::Get(absl::string_view key, std::vector<std::string>* out) const {
  const YamlValue v = Child(key);
  if (!v.IsSet()) return absl::OkStatus();
  GPUNODE_ASSIGN_OR_RETURN(*out, v.Strings());
  return absl::OkStatus();
}

Status YamlValue::GetDouble(absl::string_view key, double* out, double min, double max) const {
  const YamlValue v = Child(key);
  if (!v.IsSet()) return absl::OkStatus();
  GPUNODE_ASSIGN_OR_RETURN(*out, v.Double(min, max));
  return absl::OkStatus();
}

}  // namespace gpunode
