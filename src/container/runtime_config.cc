#include "src/container/runtime_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "src/base/json.h"
#include "src/node/probe.h"

// toml++ is used header-only, without exceptions: parse() returns a parse_result.
#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

namespace gpunode::container {
namespace {

using Path = std::vector<std::string>;

std::string Sv(std::string_view s) { return std::string(s); }

// ---------------------------------------------------------------------------------------------
// TOML values: a one-key table {"v": value} stands for any value (copyable and comparable).

toml::table Wrap(const toml::node& node) {
  toml::table t;
  node.visit([&](auto&& n) { t.insert("v", n); });
  return t;
}
template <typename T>
toml::table WrapValue(T v) {
  toml::table t;
  t.insert("v", std::move(v));
  return t;
}

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

struct SetOp {
  Path path;
  toml::table value;  // wrapped
};

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

// ---------------------------------------------------------------------------------------------

std::string RuntimePath(const RuntimeConfigOptions& o) {
  return o.runtime_path.empty() ? DefaultRuntimePath(o.kind) : o.runtime_path;
}

}  // namespace

StatusOr<RuntimeKind> ParseRuntimeKind(absl::string_view name) {
  if (name == "docker") return RuntimeKind::kDocker;
  if (name == "containerd") return RuntimeKind::kContainerd;
  if (name == "crio" || name == "cri-o") return RuntimeKind::kCrio;
  return absl::InvalidArgumentError(
      absl::StrCat("runtime \"", name, "\": not one of docker, containerd, crio"));
}

std::string RuntimeKindName(RuntimeKind kind) {
  switch (kind) {
    case RuntimeKind::kDocker: return "docker";
    case RuntimeKind::kContainerd: return "containerd";
    case RuntimeKind::kCrio: return "crio";
  }
  return "?";
}

std::string DefaultConfigPath(RuntimeKind kind) {
  switch (kind) {
    case RuntimeKind::kDocker: return kDockerConfigPath;
    case RuntimeKind::kContainerd: return kContainerdConfigPath;
    case RuntimeKind::kCrio: return kCrioDropInPath;
  }
  return "";
}

std::string DefaultRuntimePath(RuntimeKind kind) {
  return kind == RuntimeKind::kDocker ? "nvidia-container-runtime"
                                      : "/usr/bin/nvidia-container-runtime";
}

// ---------------------------------------------------------------------------------------------
// Docker

StatusOr<EditResult> EditDockerConfig(absl::string_view text, const RuntimeConfigOptions& options,
                                      absl::string_view source_name) {
  using Json = nlohmann::ordered_json;
  EditResult result;
  Json doc = Json::object();
  if (!absl::StripAsciiWhitespace(text).empty()) {
    // Linear in the size of the file (100 000 keys: milliseconds), nesting limited, no exception.
    GPUNODE_ASSIGN_OR_RETURN(doc, ParseOrderedJson(text, absl::StrCat("parse ", source_name)));
    if (!doc.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat("parse ", source_name, ": not a JSON object"));
    }
  }
  const Json before = doc;
  Json& runtimes = doc["runtimes"];
  if (runtimes.is_null()) runtimes = Json::object();
  if (!runtimes.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": \"runtimes\" is not an object"));
  }
  Json& rt = runtimes[options.runtime_name];
  if (!rt.is_object()) rt = Json::object();
  if (!rt.contains("args")) rt["args"] = Json::array();
  rt["path"] = RuntimePath(options);
  if (options.set_as_default) doc["default-runtime"] = options.runtime_name;
  if (options.enable_cdi) {
    Json& features = doc["features"];
    if (features.is_null()) features = Json::object();
    if (!features.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_name, ": \"features\" is not an object"));
    }
    features["cdi"] = true;  // merged: other feature flags stay
  }
  if (doc == before) {
    result.text = std::string(text);
    return result;
  }
  // Keep the file's indentation (first indented line), else 4 spaces as nvidia-ctk writes.
  int indent = 4;
  char indent_char = ' ';
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    size_t n = 0;
    while (n < line.size() && (line[n] == ' ' || line[n] == '\t')) ++n;
    if (n > 0 && n < line.size()) {
      indent_char = line[0];
      indent = static_cast<int>(n);
      break;
    }
  }
  result.text = DumpJson(doc, indent, indent_char) + "\n";
  return result;
}

// ---------------------------------------------------------------------------------------------
// containerd

StatusOr<int> ContainerdConfigVersion(absl::string_view text, absl::string_view source_name) {
  GPUNODE_ASSIGN_OR_RETURN(toml::table tree, ParseToml(text, source_name));
  if (const toml::node* v = tree.get("version")) {
    // Only a TOML integer: toml++'s value<int64_t>() casts a float to int64, undefined behaviour
    // for 2.5e115 (found by fuzz_runtime_config).
    std::optional<int64_t> n;
    if (const toml::value<int64_t>* i = v->as_integer()) n = i->get();
    if (!n || *n < 1 || *n > 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_name, ": unsupported containerd config version (want 1, 2 or 3)"));
    }
    return static_cast<int>(*n);
  }
  return tree.empty() ? 2 : 1;
}

StatusOr<EditResult> EditContainerdConfig(absl::string_view text,
                                          const RuntimeConfigOptions& options,
                                          absl::string_view source_name) {
  GPUNODE_ASSIGN_OR_RETURN(toml::table tree, ParseToml(text, source_name));
  GPUNODE_ASSIGN_OR_RETURN(int version, ContainerdConfigVersion(text, source_name));
  Path cri = version == 1   ? Path{"plugins", "cri"}
             : version == 2 ? Path{"plugins", "io.containerd.grpc.v1.cri"}
                            : Path{"plugins", "io.containerd.cri.v1.runtime"};
  Path containerd = cri;
  containerd.push_back("containerd");
  Path runtimes = containerd;
  runtimes.push_back("runtimes");
  Path nvidia = runtimes;
  nvidia.push_back(options.runtime_name);
  auto at = [](Path p, std::initializer_list<std::string> more) {
    p.insert(p.end(), more);
    return p;
  };

  std::vector<SetOp> ops;
  if (tree.empty() && !tree.contains("version")) {
    ops.push_back({{"version"}, WrapValue<int64_t>(2)});
  }
  // The runtime whose options we copy: the default (unless it is an nvidia one), runc, crun.
  const toml::table* source = nullptr;
  std::vector<std::string> candidates;
  if (const toml::node* d = Find(tree, at(containerd, {"default_runtime_name"}))) {
    if (auto name = d->value<std::string>(); name && !absl::StartsWith(*name, "nvidia")) {
      candidates.push_back(*name);
    }
  }
  candidates.push_back("runc");
  candidates.push_back("crun");
  for (const std::string& c : candidates) {
    if (const toml::node* n = Find(tree, at(runtimes, {c})); n != nullptr && n->is_table()) {
      source = n->as_table();
      break;
    }
  }
  const std::string path = RuntimePath(options);
  if (source != nullptr) {
    for (auto&& [key, value] : *source) {
      if (value.is_table()) continue;
      ops.push_back({at(nvidia, {Sv(key.str())}), Wrap(value)});
    }
    if (const toml::table* opts = source->get_as<toml::table>("options")) {
      for (auto&& [key, value] : *opts) {
        if (value.is_table() || key.str() == "BinaryName") continue;
        ops.push_back({at(nvidia, {"options", Sv(key.str())}), Wrap(value)});
      }
    }
  }
  if (source == nullptr) {
    ops.push_back({at(nvidia, {"privileged_without_host_devices"}), WrapValue(false)});
    ops.push_back({at(nvidia, {"runtime_engine"}), WrapValue(std::string())});
    ops.push_back({at(nvidia, {"runtime_root"}), WrapValue(std::string())});
  }
  if (source == nullptr || !source->contains("runtime_type")) {
    ops.push_back({at(nvidia, {"runtime_type"}), WrapValue(std::string("io.containerd.runc.v2"))});
  }
  ops.push_back({at(nvidia, {"options", "BinaryName"}), WrapValue(path)});
  if (version == 1) ops.push_back({at(nvidia, {"options", "Runtime"}), WrapValue(path)});
  if (options.set_as_default) {
    ops.push_back({at(containerd, {"default_runtime_name"}), WrapValue(options.runtime_name)});
  }
  if (options.enable_cdi) ops.push_back({at(cri, {"enable_cdi"}), WrapValue(true)});

  EditResult result;
  GPUNODE_ASSIGN_OR_RETURN(result.text, ApplyTomlOps(text, tree, ops, source_name));
  return result;
}

// ---------------------------------------------------------------------------------------------
// CRI-O

StatusOr<EditResult> EditCrioConfig(absl::string_view text, const RuntimeConfigOptions& options,
                                    absl::string_view source_name) {
  GPUNODE_ASSIGN_OR_RETURN(toml::table tree, ParseToml(text, source_name));
  Path nvidia = {"crio", "runtime", "runtimes", options.runtime_name};
  std::vector<SetOp> ops;
  ops.push_back({{"crio", "runtime", "runtimes", options.runtime_name, "runtime_path"},
                 WrapValue(RuntimePath(options))});
  ops.push_back({{"crio", "runtime", "runtimes", options.runtime_name, "runtime_type"},
                 WrapValue(std::string("oci"))});
  if (options.set_as_default) {
    ops.push_back({{"crio", "runtime", "default_runtime"}, WrapValue(options.runtime_name)});
  }
  EditResult result;
  if (options.enable_cdi) {
    result.warnings.push_back("--cdi is ignored for CRI-O: CRI-O enables CDI by default");
  }
  GPUNODE_ASSIGN_OR_RETURN(result.text, ApplyTomlOps(text, tree, ops, source_name));
  return result;
}

StatusOr<EditResult> EditRuntimeConfig(absl::string_view text, const RuntimeConfigOptions& options,
                                       absl::string_view source_name) {
  switch (options.kind) {
    case RuntimeKind::kDocker: return EditDockerConfig(text, options, source_name);
    case RuntimeKind::kContainerd: return EditContainerdConfig(text, options, source_name);
    case RuntimeKind::kCrio: return EditCrioConfig(text, options, source_name);
  }
  return absl::InvalidArgumentError("unknown runtime");
}

// ---------------------------------------------------------------------------------------------
// Unified diff (LCS over lines; config files are small).

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

// ---------------------------------------------------------------------------------------------
// The file applier.

namespace {

std::string BackupTime() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  ::gmtime_r(&ts.tv_sec, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d%02d%02dT%02d%02d%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
  return buf;
}

std::string TimeOf(int64_t sec) {
  struct tm tm;
  const time_t t = static_cast<time_t>(sec);
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d%02d%02dT%02d%02d%02d.000000Z", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buf;
}

// <backup_dir>/<config path> (the config's real path keeps backups of different files apart).
std::string BackupStem(const std::string& real_host_path, const std::string& backup_dir) {
  return absl::StrCat(backup_dir, real_host_path);
}

// Writes a backup of one version of the config; returns its local path.
StatusOr<std::string> WriteBackup(const std::string& stem, const std::string& time, bool exists,
                                  absl::string_view text, uint32_t mode) {
  const HostFs local = HostFs::Local();
  WriteOptions o;
  o.mode = exists ? mode : 0644;
  o.keep_mode = false;
  const std::string path = absl::StrCat(stem, ".", time, exists ? "" : ".absent");
  GPUNODE_RETURN_IF_ERROR(local.WriteFileAtomically(path, exists ? text : absl::string_view(), o).status());
  return path;
}

// gpunode < 0.2 kept "<file>.gpunode.bak" beside the file: in a drop-in folder CRI-O loads it.
Status MigrateOldBackup(const HostFs& fs, const std::string& target, const std::string& stem) {
  const std::string old = target + ".gpunode.bak";
  auto info = fs.Stat(old);
  if (!info.ok() || info->type != FileType::kRegular) return absl::OkStatus();
  GPUNODE_ASSIGN_OR_RETURN(std::string text, fs.ReadFile(old, 16 << 20));
  GPUNODE_RETURN_IF_ERROR(WriteBackup(stem, TimeOf(info->mtime_sec), true, text, info->mode).status());
  return fs.RemoveFile(old);
}

}  // namespace

StatusOr<ApplyResult> ApplyRuntimeConfig(const HostFs& fs, const std::string& host_path,
                                         const RuntimeConfigOptions& options, const ApplyOptions& apply) {
  ApplyResult result;
  GPUNODE_ASSIGN_OR_RETURN(const std::string target,
                           fs.RealPath(host_path, /*follow_last=*/true, /*strict=*/true));
  result.path = target;
  FileLock lock;
  if (!apply.dry_run) {
    GPUNODE_ASSIGN_OR_RETURN(lock, fs.Lock(target));
  }
  const std::string stem = BackupStem(target, apply.backup_dir);
  for (int attempt = 1;; ++attempt) {
    result.attempts = attempt;
    GPUNODE_ASSIGN_OR_RETURN(HostFs::Versioned current, fs.ReadVersioned(target));
    const bool exists = current.identity.exists;
    GPUNODE_ASSIGN_OR_RETURN(EditResult edit, EditRuntimeConfig(current.text, options, target));
    result.warnings = edit.warnings;
    result.created = !exists;
    result.changed = !exists || edit.text != current.text;
    if (!result.changed) return result;
    result.diff = UnifiedDiff(current.text, edit.text, exists ? target : "/dev/null", target);
    if (apply.dry_run) return result;

    if (apply.backup_dir.empty()) return absl::InvalidArgumentError("no backup folder given");
    GPUNODE_RETURN_IF_ERROR(MigrateOldBackup(fs, target, stem));
    GPUNODE_ASSIGN_OR_RETURN(result.backup_path,
                             WriteBackup(stem, BackupTime(), exists, current.text, current.mode));
    WriteOptions w;
    w.mode = 0644;
    w.expect = current.identity;
    w.held = &lock;
    w.test_hook = apply.test_hook;
    auto written = fs.WriteFileAtomically(target, edit.text, w);
    if (written.ok()) return result;
    if (absl::IsAborted(written.status()) && attempt < 2) continue;  // changed under us: once more
    if (absl::IsAborted(written.status())) {
      return absl::AbortedError(absl::StrCat(written.status().message(),
                                             " (twice; run again when the other program is done)"));
    }
    return written.status();
  }
}

StatusOr<std::vector<BackupEntry>> ListBackups(const HostFs& fs, const std::string& host_path,
                                               const std::string& backup_dir) {
  GPUNODE_ASSIGN_OR_RETURN(const std::string target,
                           fs.RealPath(host_path, /*follow_last=*/true, /*strict=*/true));
  const std::string stem = BackupStem(target, backup_dir);
  const size_t slash = stem.rfind('/');
  const std::string dir = stem.substr(0, slash);
  const std::string prefix = stem.substr(slash + 1) + ".";
  std::vector<BackupEntry> out;
  auto names = HostFs::Local().ListDir(dir);
  if (!names.ok()) {
    if (absl::IsNotFound(names.status())) return out;
    return names.status();
  }
  for (const std::string& name : *names) {
    if (!absl::StartsWith(name, prefix)) continue;
    std::string rest = name.substr(prefix.size());
    BackupEntry e;
    e.path = absl::StrCat(dir, "/", name);
    if (absl::EndsWith(rest, ".absent")) {
      e.absent = true;
      rest.resize(rest.size() - 7);
    }
    // 20261201T081500.123456Z
    if (rest.size() != 23 || rest[8] != 'T' || rest.back() != 'Z') continue;
    e.time = rest;
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const BackupEntry& a, const BackupEntry& b) { return a.time < b.time; });
  return out;
}

StatusOr<RestoreResult> RestoreRuntimeConfig(const HostFs& fs, const std::string& host_path,
                                             const std::string& backup_dir) {
  RestoreResult result;
  GPUNODE_ASSIGN_OR_RETURN(const std::string target,
                           fs.RealPath(host_path, /*follow_last=*/true, /*strict=*/true));
  result.path = target;
  GPUNODE_ASSIGN_OR_RETURN(FileLock lock, fs.Lock(target));
  const std::string stem = BackupStem(target, backup_dir);
  GPUNODE_RETURN_IF_ERROR(MigrateOldBackup(fs, target, stem));
  GPUNODE_ASSIGN_OR_RETURN(std::vector<BackupEntry> backups, ListBackups(fs, target, backup_dir));
  if (backups.empty()) {
    return absl::NotFoundError(absl::StrCat("no backup of ", target, " in ", backup_dir,
                                            " (gpunode has not changed this file)"));
  }
  result.restored = backups.back();
  GPUNODE_ASSIGN_OR_RETURN(HostFs::Versioned current, fs.ReadVersioned(target));
  GPUNODE_ASSIGN_OR_RETURN(result.backup_path, WriteBackup(stem, BackupTime(), current.identity.exists,
                                                           current.text, current.mode));
  if (result.restored.absent) {
    GPUNODE_RETURN_IF_ERROR(fs.RemoveFile(target));
    result.removed = true;
    return result;
  }
  GPUNODE_ASSIGN_OR_RETURN(HostFs::Versioned saved, HostFs::Local().ReadVersioned(result.restored.path));
  WriteOptions w;
  w.mode = saved.mode;
  w.keep_mode = current.identity.exists;
  w.expect = current.identity;
  w.held = &lock;
  GPUNODE_RETURN_IF_ERROR(fs.WriteFileAtomically(target, saved.text, w).status());
  return result;
}

StatusOr<std::string> InstallDockerGpusHook(const HostFs& host, const std::string& runtime_path, bool dry_run) {
  constexpr char kHook[] = "nvidia-container-runtime-hook";
  std::string target = runtime_path.empty() ? "nvidia-container-runtime" : runtime_path;
  if (target.front() != '/') target = FindHostProgram(host, target);
  if (const std::string existing = FindHostProgram(host, kHook); !existing.empty()) {
    auto a = host.RealPath(existing);
    auto b = target.empty() ? StatusOr<std::string>(absl::NotFoundError("")) : host.RealPath(target);
    if (a.ok() && b.ok() && *a == *b) return absl::StrCat(existing, " already answers for gpunode (docker run --gpus)");
    auto st = host.Stat(existing);
    if (st.ok() && st->type != FileType::kSymlink) {
      return absl::StrCat(existing, " is another program (NVIDIA Container Toolkit's hook?): left alone; with the "
                                    "nvidia runtime as Docker's runtime gpunode's shim removes it from --gpus containers");
    }
  }
  if (target.empty()) {
    return std::string("no nvidia-container-runtime on the host's PATH: install gpunode as /usr/bin/nvidia-container-runtime "
                       "(a link), then run this again so that Docker offers --gpus");
  }
  const std::string link = absl::StrCat("/usr/bin/", kHook);
  if (dry_run) return absl::StrCat("would link ", link, " -> ", target, " (Docker offers --gpus when it finds it)");
  GPUNODE_RETURN_IF_ERROR(host.Symlink(target, link));
  auto shown = host.LocalPath(link, /*follow_last=*/false);
  return absl::StrCat("linked ", shown.ok() ? *shown : link, " -> ", target, " (Docker offers --gpus when it finds it)");
}

}  // namespace gpunode::container
