#include "src/base/json.h"

#include <memory>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpunode {
namespace {

// Builds a document from nlohmann's SAX events (its parser is iterative), enforcing the depth
// limit, with an index of each large object's keys so that inserting stays O(1).
template <typename Json>
class Builder {
 public:
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using string_t = typename Json::string_t;
  using binary_t = typename Json::binary_t;

  explicit Builder(int max_depth) : max_depth_(max_depth) {}

  bool null() { return Put(Json(nullptr)); }
  bool boolean(bool v) { return Put(Json(v)); }
  bool number_integer(number_integer_t v) { return Put(Json(v)); }
  bool number_unsigned(number_unsigned_t v) { return Put(Json(v)); }
  bool number_float(number_float_t v, const string_t&) { return Put(Json(v)); }
  bool string(string_t& v) { return Put(Json(std::move(v))); }
  bool binary(binary_t& v) { return Put(Json::binary(std::move(v))); }
  bool start_object(std::size_t) { return Open(Json::object()); }
  bool key(string_t& k) {
    frames_.back().key = std::move(k);
    return true;
  }
  bool end_object() { return Close(); }
  bool start_array(std::size_t) { return Open(Json::array()); }
  bool end_array() { return Close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
    error_ = ex.what();
    return false;
  }

  bool too_deep() const { return too_deep_; }
  const std::string& error() const { return error_; }
  Json Take() { return std::move(root_); }

 private:
  struct Frame {
    Json value;
    string_t key;
    std::unique_ptr<std::unordered_map<string_t, size_t>> index;  // built past kIndexFrom keys
  };
  static constexpr size_t kIndexFrom = 16;

  bool Open(Json value) {
    if (static_cast<int>(frames_.size()) >= max_depth_) {
      too_deep_ = true;
      return false;
    }
    frames_.push_back(Frame{std::move(value), {}, nullptr});
    return true;
  }
  bool Close() {
    Json value = std::move(frames_.back().value);
    frames_.pop_back();
    return Put(std::move(value));
  }
  bool Put(Json&& value) {
    if (frames_.empty()) {
      root_ = std::move(value);
      return true;
    }
    Frame& f = frames_.back();
    if (f.value.is_array()) {
      f.value.template get_ref<typename Json::array_t&>().push_back(std::move(value));
      return true;
    }
    auto& object = f.value.template get_ref<typename Json::object_t&>();
    if constexpr (std::is_same_v<Json, nlohmann::ordered_json>) {
      // nlohmann's ordered_map is a vector of pairs whose emplace searches linearly.
      auto& items = static_cast<typename Json::object_t::Container&>(object);
      if (!f.index && items.size() >= kIndexFrom) {
        f.index = std::make_unique<std::unordered_map<string_t, size_t>>();
        for (size_t i = 0; i < items.size(); ++i) f.index->emplace(items[i].first, i);
      }
      if (f.index) {
        auto [it, inserted] = f.index->emplace(f.key, items.size());
        if (!inserted) {
          items[it->second].second = std::move(value);
          return true;
        }
      } else {
        for (auto& item : items) {
          if (item.first == f.key) {
            item.second = std::move(value);
            return true;
          }
        }
      }
      items.emplace_back(std::move(f.key), std::move(value));
    } else {
      object[std::move(f.key)] = std::move(value);
    }
    return true;
  }

  int max_depth_;
  std::vector<Frame> frames_;
  Json root_;
  bool too_deep_ = false;
  std::string error_;
};

template <typename Json>
StatusOr<Json> Parse(absl::string_view text, absl::string_view source, int max_depth) {
  Builder<Json> builder(max_depth);
  const bool ok = Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::detail::input_format_t::json,
                                  /*strict=*/true);
  if (builder.too_deep()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": JSON nested deeper than ", max_depth, " levels (refused)"));
  }
  if (!ok) {
    std::string why = builder.error();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ..."
    if (absl::StartsWith(why, "[json.exception.")) {
      if (const size_t close = why.find("] "); close != std::string::npos) why = why.substr(close + 2);
    }
    if (absl::StartsWith(why, "parse error at ")) {
      why = why.substr(15);  // "line 3, column 0: syntax error while parsing value - ..."
      if (const size_t colon = why.find(": "); colon != std::string::npos && absl::StartsWith(why, "line ")) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": ", why.substr(0, colon), ": not valid JSON: ", why.substr(colon + 2)));
      }
    }
    if (why.empty()) why = "not a complete JSON document";
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON: ", why));
  }
  return builder.Take();
}

template <typename Json>
std::string Dump(const Json& doc, int indent, char indent_char) {
  try {
    return doc.dump(indent, indent_char, /*ensure_ascii=*/false, nlohmann::detail::error_handler_t::replace);
  } catch (const std::exception&) {  // out of memory; nothing else is thrown with `replace`
    return absl::StrCat("null");
  }
}

}  // namespace

StatusOr<nlohmann::json> ParseJson(absl::string_view text, absl::string_view source, int max_depth) {
  return Parse<nlohmann::json>(text, source, max_depth);
}

StatusOr<nlohmann::ordered_json> ParseOrderedJson(absl::string_view text, absl::string_view source,
                                                  int max_depth) {
  return Parse<nlohmann::ordered_json>(text, source, max_depth);
}

std::string DumpJson(const nlohmann::json& doc, int indent, char indent_char) {
  return Dump(doc, indent, indent_char);
}

std::string DumpJson(const nlohmann::ordered_json& doc, int indent, char indent_char) {
  return Dump(doc, indent, indent_char);
}

bool IsValidUtf8(absl::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

}  // namespace gpunode
