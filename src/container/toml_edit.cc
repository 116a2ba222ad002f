#include "src/container/toml_edit.h"

#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace gpunode::container::toml_edit {
namespace {

// The TOML text of the wrapped value ("true", "\"x\"", "[ 1, 2 ]").
std::string RenderValue(const toml::table& wrapped) {
  std::ostringstream os;
  os << toml::toml_formatter{wrapped, toml::format_flags::none};
  std::string s = os.str();
  size_t eq = s.find('=');
  std::string v = eq == std::string::npos ? s : s.substr(eq + 1);
  return std::string(absl::StripAsciiWhitespace(v));
}

bool IsBareKey(const std::string& k) {
  if (k.empty()) return false;
  for (char c : k) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

std::string QuoteKey(const std::string& k) {
  if (IsBareKey(k)) return k;
  std::string out = "\"";
  for (char c : k) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string JoinKey(const Path& p, size_t from = 0) {
  std::string out;
  for (size_t i = from; i < p.size(); ++i) {
    if (i > from) out += '.';
    out += QuoteKey(p[i]);
  }
  return out;
}

Status TomlParseError(const toml::parse_error& e, absl::string_view source_name) {
  return absl::InvalidArgumentError(absl::StrCat(
      "parse ", source_name, ": line ", e.source().begin.line, ", column ",
      e.source().begin.column, ": ", Sv(e.description())));
}

// Debian's toml++ 3.3.0 reaches an "unreachable" point (undefined behaviour: a trap under UBSan,
// anything in a release build) when its whitespace test meets U+00A1-U+0499, U+2C8E-U+3087 or
// U+FC26-U+FEFE outside a string or comment: é in a bare key, or after a malformed value (found by
// fuzz_runtime_config; the inputs are seeds). So toml++ first parses a copy in which every non-ASCII
// character is replaced by one of the same UTF-8 length that it handles (U+0500, U+4E00, U+10000):
// the same structure, no UB. Only if that copy is valid TOML (so every non-ASCII character sits in
// a string or comment, where toml++ never asks whether it is whitespace) is the real text parsed.
std::string SafeForTomlpp(absl::string_view text) {
  std::string out(text);
  for (size_t i = 0; i < out.size();) {
    const auto c = static_cast<unsigned char>(out[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + len > out.size()) len = 1;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(out[i + k]) & 0xC0) != 0x80) len = 1;
    }
    if (len == 2) out.replace(i, 2, "\xD4\x80");               // U+0500
    if (len == 3) out.replace(i, 3, "\xE4\xB8\x80");           // U+4E00
    if (len == 4) out.replace(i, 4, "\xF0\x90\x80\x80");       // U+10000
    i += len;  // invalid UTF-8 stays: toml++'s reader refuses it before classifying characters
  }
  return out;
}

// Sets path = value in `root`, creating tables; fails when a component is not a table.
Status SetInTree(toml::table& root, const Path& path, const toml::table& wrapped) {
  toml::table* t = &root;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    toml::node* n = t->get(path[i]);
    if (n == nullptr) {
      t->insert(path[i], toml::table{});
      n = t->get(path[i]);
    }
    t = n->as_table();
    if (t == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot set ", JoinKey(path), ": ", JoinKey(Path(path.begin(), path.begin() + i + 1)),
          " is not a table"));
    }
  }
  wrapped.get("v")->visit([&](auto&& n) { t->insert_or_assign(path.back(), n); });
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// A line scanner of TOML text: table headers and key/value lines (with the lines they span).

struct Section {
  Path path;
  bool array = false;   // [[array of tables]]
  size_t header = 0;    // line index; SIZE_MAX for the root section
  size_t last_kv = 0;   // last line of the last key/value in the section; == header when none
  bool has_kv = false;
};

struct KeyLine {
  Path full_path;
  size_t section = 0;  // index into sections
  size_t first = 0, last = 0;
  size_t eq = 0;        // column of '=' on the first line
  std::string comment;  // trailing comment of a one-line value
};

struct Scan {
  std::vector<std::string> lines;
  bool trailing_newline = true;
  std::vector<Section> sections;  // [0] is the root
  std::vector<KeyLine> keys;
};

// Parses a (dotted) key starting at `pos`; stops at `stop` (after whitespace). False on garbage.
bool ParseKey(const std::string& s, size_t& pos, char stop, Path& out) {
  auto skip_ws = [&] {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t')) ++pos;
  };
  while (true) {
    skip_ws();
    if (pos >= s.size()) return false;
    std::string part;
    if (s[pos] == '"') {
      ++pos;
      while (pos < s.size() && s[pos] != '"') {
        if (s[pos] == '\\' && pos + 1 < s.size()) {
          char e = s[++pos];
          switch (e) {
            case 'n': part += '\n'; break;
            case 't': part += '\t'; break;
            default: part += e;
          }
        } else {
          part += s[pos];
        }
        ++pos;
      }
      if (pos >= s.size()) return false;
      ++pos;
    } else if (s[pos] == '\'') {
      size_t end = s.find('\'', pos + 1);
      if (end == std::string::npos) return false;
      part = s.substr(pos + 1, end - pos - 1);
      pos = end + 1;
    } else {
      size_t start = pos;
      while (pos < s.size() && (absl::ascii_isalnum(static_cast<unsigned char>(s[pos])) ||
                                s[pos] == '_' || s[pos] == '-')) {
        ++pos;
      }
      if (pos == start) return false;
      part = s.substr(start, pos - start);
    }
    out.push_back(std::move(part));
    skip_ws();
    if (pos < s.size() && s[pos] == '.') {
      ++pos;
      continue;
    }
    return pos < s.size() && s[pos] == stop;
  }
}

struct ValueState {
  int depth = 0;
  bool ml_basic = false;
  bool ml_literal = false;
  bool neutral() const { return depth == 0 && !ml_basic && !ml_literal; }
};

// Scans s[pos..] as value text; returns the column of a trailing comment or npos.
size_t ScanValue(const std::string& s, size_t pos, ValueState& st) {
  while (pos < s.size()) {
    if (st.ml_basic) {
      if (s[pos] == '\\') {
        pos += 2;
        continue;
      }
      if (s.compare(pos, 3, "\"\"\"") == 0) {
        st.ml_basic = false;
        pos += 3;
        while (pos < s.size() && s[pos] == '"') ++pos;
        continue;
      }
      ++pos;
      continue;
    }
    if (st.ml_literal) {
      if (s.compare(pos, 3, "'''") == 0) {
        st.ml_literal = false;
        pos += 3;
        while (pos < s.size() && s[pos] == '\'') ++pos;
        continue;
      }
      ++pos;
      continue;
    }
    char c = s[pos];
    if (c == '#') return pos;
    if (c == '"') {
      if (s.compare(pos, 3, "\"\"\"") == 0) {
        st.ml_basic = true;
        pos += 3;
        continue;
      }
      ++pos;
      while (pos < s.size() && s[pos] != '"') pos += (s[pos] == '\\') ? 2 : 1;
      ++pos;
      continue;
    }
    if (c == '\'') {
      if (s.compare(pos, 3, "'''") == 0) {
        st.ml_literal = true;
        pos += 3;
        continue;
      }
      size_t end = s.find('\'', pos + 1);
      pos = end == std::string::npos ? s.size() : end + 1;
      continue;
    }
    if (c == '[' || c == '{') ++st.depth;
    if (c == ']' || c == '}') --st.depth;
    ++pos;
  }
  return std::string::npos;
}

Scan ScanToml(absl::string_view text) {
  Scan sc;
  sc.lines = absl::StrSplit(text, '\n');
  sc.trailing_newline = !text.empty() && text.back() == '\n';
  if (sc.trailing_newline || text.empty()) sc.lines.pop_back();
  Section root;
  root.header = SIZE_MAX;
  root.last_kv = SIZE_MAX;
  sc.sections.push_back(root);
  ValueState st;
  for (size_t i = 0; i < sc.lines.size(); ++i) {
    std::string& line = sc.lines[i];
    if (!st.neutral()) {
      ScanValue(line, 0, st);
      if (st.neutral()) {
        sc.keys.back().last = i;
        sc.sections.back().last_kv = i;
      }
      continue;
    }
    size_t p = line.find_first_not_of(" \t\r");
    if (p == std::string::npos || line[p] == '#') continue;
    if (line[p] == '[') {
      Section s;
      s.header = i;
      s.last_kv = i;
      s.array = line.compare(p, 2, "[[") == 0;
      size_t pos = p + (s.array ? 2 : 1);
      if (!ParseKey(line, pos, ']', s.path)) s.path = {"\x01unparsed"};
      sc.sections.push_back(std::move(s));
      continue;
    }
    KeyLine k;
    size_t pos = p;
    Path rel;
    if (!ParseKey(line, pos, '=', rel)) continue;  // toml++ has accepted the file; be lenient
    k.full_path = sc.sections.back().path;
    k.full_path.insert(k.full_path.end(), rel.begin(), rel.end());
    k.section = sc.sections.size() - 1;
    k.first = k.last = i;
    k.eq = pos;
    size_t comment = ScanValue(line, pos + 1, st);
    if (st.neutral() && comment != std::string::npos) {
      k.comment = std::string(absl::StripTrailingAsciiWhitespace(line.substr(comment)));
    }
    sc.keys.push_back(std::move(k));
    sc.sections.back().has_kv = true;
    sc.sections.back().last_kv = i;
  }
  return sc;
}

std::string JoinLines(const Scan& sc) {
  std::string out = absl::StrJoin(sc.lines, "\n");
  if (sc.trailing_newline || !sc.lines.empty()) out += '\n';
  return out;
}

std::string IndentOf(const std::string& line) {
  return line.substr(0, line.find_first_not_of(" \t"));
}

// Indentation for a key added to `sec`: that of its last key, else its header's.
std::string KeyIndent(const Scan& sc, const Section& sec) {
  if (sec.header == SIZE_MAX) return "";
  if (sec.has_kv) {
    for (size_t i = sc.keys.size(); i-- > 0;) {
      if (&sc.sections[sc.keys[i].section] == &sec) return IndentOf(sc.lines[sc.keys[i].first]);
    }
  }
  return IndentOf(sc.lines[sec.header]);
}

bool StartsWith(const Path& p, const Path& prefix) {
  return p.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), p.begin());
}

// Sets one key in the text, keeping every other line. The caller verifies the result.
std::string SetInText(absl::string_view text, const Path& path, const std::string& value) {
  Scan sc = ScanToml(text);
  Path parent(path.begin(), path.end() - 1);
  auto in_array = [&](const KeyLine& k) { return sc.sections[k.section].array; };
  // 1. The key exists: replace its value.
  for (const KeyLine& k : sc.keys) {
    if (k.full_path != path || in_array(k)) continue;
    std::string prefix = sc.lines[k.first].substr(0, k.eq);
    std::string line = absl::StrCat(prefix, "= ", value);
    if (k.first == k.last && !k.comment.empty()) absl::StrAppend(&line, " ", k.comment);
    sc.lines.erase(sc.lines.begin() + k.first, sc.lines.begin() + k.last + 1);
    sc.lines.insert(sc.lines.begin() + k.first, line);
    return JoinLines(sc);
  }
  // 2. The parent table has a header (or is the root): add the key after its last key.
  for (size_t s = 0; s < sc.sections.size(); ++s) {
    const Section& sec = sc.sections[s];
    if (sec.array || sec.path != parent) continue;
    std::string line = absl::StrCat(KeyIndent(sc, sec), QuoteKey(path.back()), " = ", value);
    size_t at = sec.header == SIZE_MAX ? (sec.has_kv ? sec.last_kv + 1 : 0) : sec.last_kv + 1;
    sc.lines.insert(sc.lines.begin() + at, line);
    return JoinLines(sc);
  }
  // 3. The parent is defined by dotted keys in an enclosing section: add a dotted key there.
  for (size_t i = sc.keys.size(); i-- > 0;) {
    const KeyLine& k = sc.keys[i];
    const Section& sec = sc.sections[k.section];
    if (in_array(k) || !StartsWith(k.full_path, parent) || k.full_path.size() <= parent.size() ||
        !StartsWith(parent, sec.path)) {
      continue;
    }
    std::string line = absl::StrCat(IndentOf(sc.lines[k.first]), JoinKey(path, sec.path.size()),
                                    " = ", value);
    sc.lines.insert(sc.lines.begin() + k.last + 1, line);
    return JoinLines(sc);
  }
  // 4. A new table, after the section closest to it in the tree (else at the end).
  size_t best = SIZE_MAX, best_len = 0;
  for (size_t s = 1; s < sc.sections.size(); ++s) {
    const Section& sec = sc.sections[s];
    size_t n = 0;
    while (n < sec.path.size() && n < parent.size() && sec.path[n] == parent[n]) ++n;
    if (n > 0 && n >= best_len) {
      best = s;
      best_len = n;
    }
  }
  std::string header_indent, key_indent;
  if (best != SIZE_MAX) {
    header_indent = IndentOf(sc.lines[sc.sections[best].header]);
    key_indent = KeyIndent(sc, sc.sections[best]);
  }
  std::vector<std::string> add = {
      "", absl::StrCat(header_indent, "[", JoinKey(parent), "]"),
      absl::StrCat(key_indent, QuoteKey(path.back()), " = ", value)};
  size_t at = best == SIZE_MAX ? sc.lines.size() : sc.sections[best].last_kv + 1;
  if (at == 0 || (at <= sc.lines.size() && at > 0 &&
                  absl::StripAsciiWhitespace(sc.lines[at - 1]).empty())) {
    add.erase(add.begin());  // no blank line at the top, nor after a blank line
  }
  if (at < sc.lines.size() && !absl::StripAsciiWhitespace(sc.lines[at]).empty()) add.push_back("");
  sc.lines.insert(sc.lines.begin() + at, add.begin(), add.end());
  return JoinLines(sc);
}

}  // namespace

toml::table Wrap(const toml::node& node) {
  toml::table t;
  node.visit([&](auto&& n) { t.insert("v", n); });
  return t;
}

StatusOr<toml::table> ParseToml(absl::string_view text, absl::string_view source_name) {
  const std::string safe = SafeForTomlpp(text);
  if (safe != text) {
    toml::parse_result check = toml::parse(std::string_view(safe), std::string_view(source_name.data(), source_name.size()));
    if (!check) return TomlParseError(check.error(), source_name);
  }
  toml::parse_result r = toml::parse(std::string_view(text.data(), text.size()),
                                     std::string_view(source_name.data(), source_name.size()));
  if (!r) return TomlParseError(r.error(), source_name);
  return std::move(r).table();
}

const toml::node* Find(const toml::table& root, const Path& path) {
  const toml::node* n = &root;
  for (const std::string& k : path) {
    const toml::table* t = n->as_table();
    if (t == nullptr) return nullptr;
    n = t->get(k);
    if (n == nullptr) return nullptr;
  }
  return n;
}

// Applies `ops` to the TOML text surgically and verifies the result with toml++.
StatusOr<std::string> ApplyTomlOps(absl::string_view text, const toml::table& old_tree,
                                   const std::vector<SetOp>& ops, absl::string_view source_name) {
  toml::table expected = old_tree;
  std::string out(text);
  for (const SetOp& op : ops) {
    const toml::node* have = Find(old_tree, op.path);
    if (have != nullptr && Wrap(*have) == op.value) continue;  // already as wanted
    if (Status s = SetInTree(expected, op.path, op.value); !s.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(source_name, ": ", s.message()));
    }
    out = SetInText(out, op.path, RenderValue(op.value));
  }
  if (out == text) return out;
  toml::parse_result r = toml::parse(std::string_view(out), std::string_view("edited"));
  if (!r) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot edit ", source_name, " in place (its layout defeats the line editor: ",
        Sv(r.error().description()), " at line ", r.error().source().begin.line,
        " of the result); the file was not changed"));
  }
  if (!(r.table() == expected)) {
    return absl::InternalError(absl::StrCat(
        "editing ", source_name,
        " did not give the intended document (other keys would change); the file was not changed"));
  }
  return out;
}

}  // namespace gpunode::container::toml_edit
