// Kubernetes' name shapes, as the API server checks them (k8s.io/apimachinery validation):
// a DNS label (RFC 1123: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63), a DNS subdomain (such labels
// joined by dots, at most 253), and a UID as the API server makes them (letters, digits, dashes).
// The DRA driver checks what it reads from the kubelet and the API server against them before a
// name goes into a file name, a CDI device name or a message.
#ifndef GPUNODE_DRA_K8S_NAMES_H_
#define GPUNODE_DRA_K8S_NAMES_H_

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace gpunode::dra {

inline bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

inline bool IsDnsLabel(std::string_view s, size_t max = 63) {
  if (s.empty() || s.size() > max || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

inline bool IsDnsSubdomain(std::string_view s, size_t max = 253) {
  if (s.empty() || s.size() > max) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    if (!IsDnsLabel(s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start))) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

inline bool IsUid(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  });
}

}  // namespace gpunode::dra

#endif  // GPUNODE_DRA_K8S_NAMES_H_
