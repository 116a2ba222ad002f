#include "src/base/terminal.h"

#include <cstdint>

namespace gpunode {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void AppendHexByte(std::string& out, unsigned char c) {
  out += "\\x";
  out.push_back(kHex[c >> 4]);
  out.push_back(kHex[c & 15]);
}

void AppendCodePoint(std::string& out, uint32_t cp) {
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out.push_back(kHex[(cp >> shift) & 15]);
}

// The length of the valid UTF-8 sequence at text[i] and its code point; 0 when invalid.
size_t DecodeUtf8(std::string_view text, size_t i, uint32_t* cp) {
  const auto c = static_cast<unsigned char>(text[i]);
  size_t len;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    *cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    *cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    *cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto cc = static_cast<unsigned char>(text[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (cc & 0x3F);
  }
  if ((len == 3 && *cp < 0x800) || (len == 4 && (*cp < 0x10000 || *cp > 0x10FFFF)) ||
      (*cp >= 0xD800 && *cp <= 0xDFFF)) {
    return 0;
  }
  return len;
}

bool IsBidiControl(uint32_t cp) { return (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069); }

// The length of an SGR sequence (ESC [ digits/semicolons m) at text[i], 0 when there is none.
size_t SgrLength(std::string_view text, size_t i) {
  if (i + 2 >= text.size() || text[i + 1] != '[') return 0;
  for (size_t j = i + 2; j < text.size() && j < i + 64; ++j) {
    const char c = text[j];
    if (c == 'm') return j - i + 1;
    if (!((c >= '0' && c <= '9') || c == ';')) return 0;
  }
  return 0;
}

std::string Escape(std::string_view text, bool keep_lines, bool keep_colors) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t len = DecodeUtf8(text, i, &cp);
    if (len == 0) {
      AppendHexByte(out, static_cast<unsigned char>(text[i]));
      ++i;
      continue;
    }
    if (cp < 0x20 || cp == 0x7F) {
      if (keep_lines && (cp == '\n' || cp == '\t')) {
        out.push_back(static_cast<char>(cp));
      } else if (cp == 0x1B && keep_colors && SgrLength(text, i) > 0) {
        const size_t n = SgrLength(text, i);
        out.append(text.substr(i, n));
        i += n;
        continue;
      } else if (cp == '\n') {
        out += "\\n";
      } else if (cp == '\t') {
        out += "\\t";
      } else if (cp == '\r') {
        out += "\\r";
      } else {
        AppendHexByte(out, static_cast<unsigned char>(cp));
      }
    } else if ((cp >= 0x80 && cp <= 0x9F) || IsBidiControl(cp)) {
      AppendCodePoint(out, cp);
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

}  // namespace

std::string TerminalSafe(std::string_view text) { return Escape(text, false, false); }

std::string TerminalSafeText(std::string_view text, bool keep_colors) { return Escape(text, true, keep_colors); }

}  // namespace gpunode
