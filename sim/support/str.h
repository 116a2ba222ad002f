// Small string helpers for sim/: concatenation and joining that accept std::string_view (the
// Debian build of abseil has its own absl::string_view, so absl::StrCat does not).
#ifndef GPUNODE_SIM_SUPPORT_STR_H_
#define GPUNODE_SIM_SUPPORT_STR_H_

#include <string>
#include <string_view>
#include <type_traits>

#include "fmt/format.h"

namespace gpunode::sim::str {

inline void AppendOne(std::string& out, std::string_view s) { out.append(s); }
inline void AppendOne(std::string& out, const char* s) { out.append(s); }
template <typename T>
requires std::is_arithmetic_v<T>
void AppendOne(std::string& out, T v) { out += fmt::to_string(v); }

// Concatenates strings and numbers.
template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (AppendOne(out, args), ...);
  return out;
}

template <typename... Args>
void Append(std::string* out, const Args&... args) {
  (AppendOne(*out, args), ...);
}

// Joins the elements of `items` (anything convertible to std::string_view) with `sep`.
template <typename Range>
std::string Join(const Range& items, std::string_view sep) {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out.append(sep);
    first = false;
    out.append(std::string_view(item));
  }
  return out;
}

}  // namespace gpunode::sim::str

#endif  // GPUNODE_SIM_SUPPORT_STR_H_
