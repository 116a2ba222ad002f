// The profile reader's helpers (see profile_internal.h).
#include <cctype>

#include "sim/support/profile_internal.h"

namespace gpunode::sim::profile_internal {

std::string Join(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return str::Cat(path, ".", key);
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}



YAML::Node Merge(const YAML::Node& base, const YAML::Node& overlay, int depth) {
  if (!base.IsMap() || !overlay.IsMap() || depth > 8) return YAML::Clone(overlay);
  YAML::Node out = YAML::Clone(base);
  for (auto it = overlay.begin(); it != overlay.end(); ++it) {
    if (!it->first.IsScalar()) continue;  // reported by the strict reader on the overlay itself
    const std::string key = it->first.Scalar();
    YAML::Node prev = out[key];
    out[key] = prev.IsDefined() ? Merge(prev, it->second, depth + 1) : YAML::Clone(it->second);
  }
  return out;
}

namespace {
uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

std::string GeneratedUuid(const std::string& prefix, std::string_view seed) {
  uint64_t a = Fnv1a(seed);
  uint64_t b = Fnv1a(str::Cat(seed, "#2"));
  return absl::StrFormat("%s-%08x-%04x-%04x-%04x-%012x", prefix, a >> 32, (a >> 16) & 0xffff,
                         a & 0xffff, b >> 48, b & 0xffffffffffffull);
}

bool ValidUuid(std::string_view uuid, std::string_view prefix) {
  if (uuid.size() < prefix.size() + 2 || uuid.substr(0, prefix.size()) != prefix ||
      uuid[prefix.size()] != '-')
    return false;
  for (char c : uuid.substr(prefix.size() + 1)) {
    if (!std::isxdigit(static_cast<unsigned char>(c)) && c != '-') return false;
  }
  return true;
}

}  // namespace gpunode::sim::profile_internal
