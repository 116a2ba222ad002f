#include "src/kube/list_stream.h"

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/base/json.h"
#include "src/kube/json_fields.h"

namespace gpunode::kube::internal {
namespace {

using Json = nlohmann::json;

// SAX events of one List answer. Depth 1 is the answer's object; its "items" array is depth 2; an
// item (or "metadata") is built into a document of its own while its container is open.
class PageReader {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  PageReader(const std::string& what, const std::function<Status(const Json&)>& on_metadata,
             const std::function<Status(Json&, size_t)>& on_item)
      : what_(what), on_metadata_(on_metadata), on_item_(on_item) {}

  bool null() { return Value(Json(nullptr)); }
  bool boolean(bool v) { return Value(Json(v)); }
  bool number_integer(number_integer_t v) { return Value(Json(v)); }
  bool number_unsigned(number_unsigned_t v) { return Value(Json(v)); }
  bool number_float(number_float_t v, const string_t&) { return Value(Json(v)); }
  bool string(string_t& v) { return Value(Json(std::move(v))); }
  bool binary(binary_t& v) { return Value(Json::binary(std::move(v))); }
  bool start_object(std::size_t) { return Open(Json::object()); }
  bool start_array(std::size_t) { return Open(Json::array()); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(string_t& k) {
    if (capture_ == Capture::kBuild && !frames_.empty()) {
      frames_.back().key = std::move(k);
    } else if (depth_ == 1) {
      top_key_ = std::move(k);
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
    if (error_.ok()) {
      std::string why = ex.what();
      if (const size_t close = why.find("] "); absl::StartsWith(why, "[json.exception.") && close != std::string::npos) {
        why = why.substr(close + 2);
      }
      error_ = absl::InvalidArgumentError(absl::StrCat(what_, ": the answer is not valid JSON: ", why));
    }
    return false;
  }

  const Status& error() const { return error_; }
  ListPageHead& head() { return head_; }
  bool saw_root() const { return saw_root_; }

 private:
  enum class Capture { kNone, kBuild, kSkip };
  enum class Target { kItem, kMetadata, kOther };
  struct Frame {
    Json value;
    string_t key;
  };

  bool Fail(Status st) {
    if (error_.ok()) error_ = std::move(st);
    return false;
  }
  Status TypeError(const std::string& path, const char* expected, const Json& got) const {
    return absl::InvalidArgumentError(absl::StrCat(what_, ": ", path, ": expected ", expected, ", got ", JsonTypeName(got)));
  }

  // A scalar, or a finished container.
  bool Value(Json&& v) {
    if (capture_ == Capture::kBuild) return Put(std::move(v));
    if (capture_ == Capture::kSkip) return true;
    if (depth_ == 0) {
      saw_root_ = true;
      return Fail(absl::InvalidArgumentError(absl::StrCat(what_, ": the answer is a ", JsonTypeName(v), ", not a List object")));
    }
    if (depth_ == 1) {
      if (top_key_ == "items" && !v.is_null()) return Fail(TypeError("items", "an array", v));
      if (top_key_ == "metadata" && !v.is_null()) return Fail(TypeError("metadata", "an object", v));
      if (top_key_ == "kind") {
        if (!v.is_string()) return Fail(TypeError("kind", "a string", v));
        head_.kind = v.get<std::string>();
      }
      return true;
    }
    if (depth_ == 2 && in_items_) return Deliver(std::move(v));  // an item that is not an object
    return true;
  }

  bool Open(Json container) {
    if (depth_ >= kMaxJsonDepth) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(what_, ": JSON nested deeper than ", kMaxJsonDepth, " levels (refused)")));
    }
    if (capture_ == Capture::kBuild) {
      frames_.push_back(Frame{std::move(container), {}});
    } else if (capture_ == Capture::kNone) {
      if (depth_ == 0) {
        saw_root_ = true;
        if (!container.is_object()) {
          return Fail(absl::InvalidArgumentError(absl::StrCat(what_, ": the answer is an array, not a List object")));
        }
      } else if (depth_ == 1 && top_key_ == "items") {
        if (!container.is_array()) return Fail(TypeError("items", "an array", container));
        in_items_ = true;
      } else if (depth_ == 1 && top_key_ == "metadata") {
        if (!container.is_object()) return Fail(TypeError("metadata", "an object", container));
        Begin(Target::kMetadata, std::move(container));
      } else if (depth_ == 1) {
        capture_ = Capture::kSkip;  // other members (apiVersion is a string; anything else is ignored)
        capture_depth_ = depth_;
      } else if (depth_ == 2 && in_items_) {
        Begin(Target::kItem, std::move(container));
      }
    }
    ++depth_;
    return true;
  }

  void Begin(Target target, Json container) {
    capture_ = Capture::kBuild;
    target_ = target;
    capture_depth_ = depth_;
    frames_.push_back(Frame{std::move(container), {}});
  }

  bool Close() {
    --depth_;
    if (capture_ == Capture::kSkip) {
      if (depth_ == capture_depth_) capture_ = Capture::kNone;
      return true;
    }
    if (capture_ == Capture::kBuild) {
      Json value = std::move(frames_.back().value);
      frames_.pop_back();
      if (!frames_.empty()) return Put(std::move(value));
      capture_ = Capture::kNone;
      if (target_ == Target::kMetadata) {
        head_.metadata = std::move(value);
        if (Status st = on_metadata_(head_.metadata); !st.ok()) return Fail(std::move(st));
        return true;
      }
      return Deliver(std::move(value));
    }
    if (depth_ == 1 && in_items_) in_items_ = false;
    return true;
  }

  bool Put(Json&& v) {
    Frame& f = frames_.back();
    if (f.value.is_array()) {
      f.value.get_ref<Json::array_t&>().push_back(std::move(v));
    } else {
      f.value.get_ref<Json::object_t&>()[std::move(f.key)] = std::move(v);  // the last duplicate wins
    }
    return true;
  }

  bool Deliver(Json&& item) {
    Status st = on_item_(item, head_.items);
    ++head_.items;
    if (!st.ok()) return Fail(std::move(st));
    return true;
  }

  const std::string& what_;
  const std::function<Status(const Json&)>& on_metadata_;
  const std::function<Status(Json&, size_t)>& on_item_;
  Status error_;
  ListPageHead head_;
  int depth_ = 0;
  bool saw_root_ = false;
  bool in_items_ = false;
  std::string top_key_;
  Capture capture_ = Capture::kNone;
  Target target_ = Target::kOther;
  int capture_depth_ = 0;
  std::vector<Frame> frames_;
};

}  // namespace

StatusOr<ListPageHead> ParseListPage(absl::string_view body, const std::string& what,
                                     const std::function<Status(const nlohmann::json& metadata)>& on_metadata,
                                     const std::function<Status(nlohmann::json& item, size_t index)>& on_item) {
  PageReader reader(what, on_metadata, on_item);
  const bool ok = Json::sax_parse(body.begin(), body.end(), &reader, nlohmann::detail::input_format_t::json,
                                  /*strict=*/true);
  if (!reader.error().ok()) return reader.error();
  if (!ok || !reader.saw_root()) return absl::InvalidArgumentError(absl::StrCat(what, ": the answer is not a JSON object"));
  return std::move(reader.head());
}

}  // namespace gpunode::kube::internal
