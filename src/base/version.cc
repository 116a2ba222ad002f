#include "src/base/version.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpunode {

StatusOr<Version> Version::Parse(std::string_view text_in, std::string_view what_in) {
  absl::string_view text(text_in.data(), text_in.size());
  absl::string_view what(what_in.data(), what_in.size());
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", text, "\" is not a version: ", why,
                     " (expected dotted numbers such as 580.65.06 or 12.4)"));
  };
  if (text.empty()) return bad("it is empty");
  if (text.size() > 64) return bad("it is too long");
  Version v;
  size_t i = 0;
  while (true) {
    size_t start = i;
    uint64_t value = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      value = value * 10 + static_cast<uint64_t>(text[i] - '0');
      ++i;
      if (i - start > 9) return bad("a component has more than 9 digits");
    }
    if (i == start) {
      if (i < text.size()) {
        return bad(absl::StrCat("unexpected character '", text.substr(i, 1), "' at position ",
                                i + 1));
      }
      return bad("it ends with a dot");
    }
    v.parts_.push_back(static_cast<uint32_t>(value));
    if (v.parts_.size() > 5) return bad("more than 5 components");
    if (i == text.size()) break;
    if (text[i] != '.') {
      return bad(
          absl::StrCat("unexpected character '", text.substr(i, 1), "' at position ", i + 1));
    }
    ++i;
  }
  v.text_ = std::string(text_in);
  return v;
}

Version Version::FromCudaInt(int encoded) {
  if (encoded < 0) encoded = 0;
  return Of({static_cast<uint32_t>(encoded / 1000), static_cast<uint32_t>((encoded % 1000) / 10)});
}

Version Version::Of(std::initializer_list<uint32_t> parts) {
  Version v;
  v.parts_.assign(parts.begin(), parts.end());
  v.text_ = absl::StrJoin(v.parts_, ".");
  return v;
}

Version Version::Prevalidated(const uint32_t* parts, size_t count, std::string_view text) {
  Version v;
  v.parts_.assign(parts, parts + count);
  v.text_ = std::string(text);
  return v;
}

Version Version::Truncate(size_t n) const {
  Version v;
  for (size_t i = 0; i < n && i < parts_.size(); ++i) v.parts_.push_back(parts_[i]);
  v.text_ = absl::StrJoin(v.parts_, ".");
  return v;
}

std::strong_ordering operator<=>(const Version& a, const Version& b) {
  size_t n = std::max(a.parts_.size(), b.parts_.size());
  for (size_t i = 0; i < n; ++i) {
    if (auto c = a.Part(i) <=> b.Part(i); c != 0) return c;
  }
  return std::strong_ordering::equal;
}

}  // namespace gpunode
