// UnifiedDiff (runtime_config.h): what `gpunode runtime configure` shows before it writes.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/container/runtime_config.h"

namespace gpunode::container {

// LCS over lines; config files are small.
std::string UnifiedDiff(absl::string_view old_text, absl::string_view new_text,
                        absl::string_view old_name, absl::string_view new_name) {
  if (old_text == new_text) return "";
  auto split = [](absl::string_view t) {
    std::vector<std::string> v = absl::StrSplit(t, '\n');
    if (!t.empty() && t.back() == '\n') v.pop_back();
    if (t.empty()) v.clear();
    return v;
  };
  std::vector<std::string> a = split(old_text), b = split(new_text);
  size_t n = a.size(), m = b.size();
  // ops: ' ' keep, '-' old line, '+' new line, with line indices.
  struct Op {
    char kind;
    size_t ai, bi;
  };
  std::vector<Op> seq;
  if (n * m <= 16u * 1024 * 1024) {
    std::vector<std::vector<uint32_t>> lcs(n + 1, std::vector<uint32_t>(m + 1, 0));
    for (size_t i = n; i-- > 0;) {
      for (size_t j = m; j-- > 0;) {
        lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
      }
    }
    size_t i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[i] == b[j]) {
        seq.push_back({' ', i++, j++});
      } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
        seq.push_back({'-', i++, j});
      } else {
        seq.push_back({'+', i, j++});
      }
    }
  } else {
    for (size_t i = 0; i < n; ++i) seq.push_back({'-', i, 0});
    for (size_t j = 0; j < m; ++j) seq.push_back({'+', n, j});
  }
  std::string out = absl::StrCat("--- ", old_name, "\n+++ ", new_name, "\n");
  constexpr size_t kContext = 3;
  size_t k = 0;
  while (k < seq.size()) {
    // Next change.
    size_t c = k;
    while (c < seq.size() && seq[c].kind == ' ') ++c;
    if (c == seq.size()) break;
    size_t start = c >= kContext ? c - kContext : 0;
    start = std::max(start, k);
    // Extend the hunk while changes are within 2*context of each other.
    size_t end = c;
    while (true) {
      while (end < seq.size() && seq[end].kind != ' ') ++end;
      size_t next = end;
      while (next < seq.size() && seq[next].kind == ' ') ++next;
      if (next < seq.size() && next - end <= 2 * kContext) {
        end = next;
        continue;
      }
      end = std::min(seq.size(), end + kContext);
      break;
    }
    size_t a_start = seq[start].ai, b_start = seq[start].bi, a_len = 0, b_len = 0;
    std::string body;
    for (size_t x = start; x < end; ++x) {
      const Op& op = seq[x];
      if (op.kind == ' ') {
        ++a_len;
        ++b_len;
        absl::StrAppend(&body, " ", a[op.ai], "\n");
      } else if (op.kind == '-') {
        ++a_len;
        absl::StrAppend(&body, "-", a[op.ai], "\n");
      } else {
        ++b_len;
        absl::StrAppend(&body, "+", b[op.bi], "\n");
      }
    }
    absl::StrAppend(&out, "@@ -", a_len == 0 ? a_start : a_start + 1, ",", a_len, " +",
                    b_len == 0 ? b_start : b_start + 1, ",", b_len, " @@\n", body);
    k = end;
  }
  return out;
}

}  // namespace gpunode::container
