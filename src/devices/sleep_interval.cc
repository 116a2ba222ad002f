#include "src/devices/sleep_interval.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gpunode::devices {

StatusOr<int> ParseSleepInterval(absl::string_view text) {
  const std::string t(absl::StripAsciiWhitespace(text));
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("sleep interval \"", text,
                     "\": not a duration of whole seconds such as 60s, 5m, "
                     "1h30m, or infinite"));
  };
  if (t == "infinite") return -1;
  if (t.empty()) return bad();
  int64_t seconds = 0;
  if (std::all_of(t.begin(), t.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    if (t.size() > 9 || !absl::SimpleAtoi(t, &seconds)) return bad();
  } else {
    int64_t ms = 0;
    size_t i = 0;
    while (i < t.size()) {
      size_t j = i;
      while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) ++j;
      if (j == i || j - i > 9) return bad();
      int64_t n = 0;
      if (!absl::SimpleAtoi(absl::string_view(t).substr(i, j - i), &n)) return bad();
      size_t k = j;
      while (k < t.size() && std::isalpha(static_cast<unsigned char>(t[k]))) ++k;
      const std::string unit = t.substr(j, k - j);
      if (unit == "h")
        ms += n * 3600000;
      else if (unit == "m")
        ms += n * 60000;
      else if (unit == "s")
        ms += n * 1000;
      else if (unit == "ms")
        ms += n;
      else
        return bad();
      if (ms > int64_t{1} << 40) return bad();
      i = k;
    }
    if (ms % 1000 != 0) return bad();
    seconds = ms / 1000;
  }
  if (seconds <= 0 || seconds > 365LL * 24 * 3600) {
    return absl::InvalidArgumentError(
        absl::StrCat("sleep interval \"", text, "\": must be between 1s and a year (or infinite)"));
  }
  return static_cast<int>(seconds);
}

}  // namespace gpunode::devices
