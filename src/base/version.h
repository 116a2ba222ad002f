// Dotted numeric versions as NVIDIA writes them: drivers ("580.65.06", "570.26"),
// CUDA ("12.4", "12.4.1", "13.0.2.006"), NVML ("13.580.95.05").
// Comparison is numeric per component; missing trailing components count as 0,
// so "12.4" == "12.4.0" and "580.65.06" < "580.95.05".
#ifndef GPUNODE_BASE_VERSION_H_
#define GPUNODE_BASE_VERSION_H_

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include <vector>

#include "src/base/status.h"

namespace gpunode {

class Version {
 public:
  Version() = default;

  // Accepts 1 to 5 dot-separated components of 1 to 9 decimal digits each, nothing else
  // (no spaces, no "v" prefix, no "x"). `what` names the input in the error message, e.g.
  // "--driver". Errors are InvalidArgument and quote the text.
  static StatusOr<Version> Parse(std::string_view text, std::string_view what = "version");
  static StatusOr<Version> Parse(absl::string_view text, absl::string_view what = "version") {
    return Parse(std::string_view(text.data(), text.size()), std::string_view(what.data(), what.size()));
  }
  static StatusOr<Version> Parse(const std::string& text, const char* what = "version") {
    return Parse(std::string_view(text), std::string_view(what));
  }
  static StatusOr<Version> Parse(const char* text, const char* what = "version") {
    return Parse(std::string_view(text), std::string_view(what));
  }

  // cuDriverGetVersion / nvmlSystemGetCudaDriverVersion encode 1000*major + 10*minor.
  static Version FromCudaInt(int encoded);

  // Builds from components; ToString() then prints them without leading zeros.
  static Version Of(std::initializer_list<uint32_t> parts);
  // A version parsed before (the compat data set's build-time tables, src/compat/builtin.cc):
  // `text` and `parts` as Parse made them, taken without checking.
  static Version Prevalidated(const uint32_t* parts, size_t count, std::string_view text);

  const std::vector<uint32_t>& parts() const { return parts_; }
  uint32_t major() const { return Part(0); }
  uint32_t minor() const { return Part(1); }
  uint32_t patch() const { return Part(2); }
  uint32_t Part(size_t i) const { return i < parts_.size() ? parts_[i] : 0; }
  bool empty() const { return parts_.empty(); }

  // The text as parsed (keeps "580.65.06"'s leading zero), or the components joined by dots.
  const std::string& ToString() const { return text_; }
  // First `n` components, e.g. Truncate(2) of 12.4.1 is 12.4.
  Version Truncate(size_t n) const;

  friend std::strong_ordering operator<=>(const Version& a, const Version& b);
  friend bool operator==(const Version& a, const Version& b) { return (a <=> b) == 0; }

 private:
  std::vector<uint32_t> parts_;
  std::string text_;
};

}  // namespace gpunode

#endif  // GPUNODE_BASE_VERSION_H_
