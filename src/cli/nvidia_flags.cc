#include "src/cli/nvidia_flags.h"

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/go_bool.h"

namespace gpunode::cli {

CLI::Option* NvidiaFlags::Add(CLI::App* cmd, NvidiaSetting setting) {
  Entry& e = entries_.emplace_back();
  e.setting = std::move(setting);
  std::vector<std::string> names = absl::StrSplit(e.setting.names, ',');
  for (const std::string& n : names) {
    if (e.key.empty() && absl::StartsWith(n, "--")) e.key = n.substr(2);
  }
  std::string help = e.setting.help;
  if (!e.setting.env.empty()) absl::StrAppend(&help, " [env ", absl::StrJoin(e.setting.env, ", "), "]");
  if (!e.setting.not_applicable.empty()) {
    absl::StrAppend(&help, " (", origin_, "'s; does not apply: ", e.setting.not_applicable, ")");
  }
  switch (e.setting.kind) {
    case NvidiaKind::kBool:
      // Bare, CLI11 stores "true"; --flag=VALUE is read by Check() as Go reads it.
      e.option = cmd->add_flag(e.setting.names, e.value, help);
      break;
    case NvidiaKind::kStringList:
      e.option = cmd->add_option(e.setting.names, e.list, help);
      break;
    default:
      e.option = cmd->add_option(e.setting.names, e.value, help)
                     ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
      if (e.setting.kind == NvidiaKind::kInt) e.option->type_name("INT");
      if (e.setting.kind == NvidiaKind::kFloat) e.option->type_name("NUMBER");
  }
  return e.option;
}

const NvidiaFlags::Entry* NvidiaFlags::Find(const std::string& key) const {
  for (const Entry& e : entries_) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

std::optional<std::string> NvidiaFlags::Value(const std::string& key, std::string* source) const {
  const Entry* e = Find(key);
  if (e == nullptr) return std::nullopt;
  if (e->option->count() > 0) {
    if (source != nullptr) *source = "--" + e->key;
    if (e->setting.kind == NvidiaKind::kStringList) return absl::StrJoin(e->list, ",");
    return e->value;
  }
  for (const std::string& name : e->setting.env) {
    const char* v = std::getenv(name.c_str());
    if (v != nullptr && *v != '\0') {
      if (source != nullptr) *source = name;
      return std::string(v);
    }
  }
  return std::nullopt;
}

StatusOr<std::optional<bool>> NvidiaFlags::Bool(const std::string& key) const {
  std::string source;
  std::optional<std::string> v = Value(key, &source);
  if (!v) return std::optional<bool>();
  GPUNODE_ASSIGN_OR_RETURN(bool b, ParseGoBool(source, *v));
  return std::optional<bool>(b);
}

std::string NvidiaFlags::Describe(const Entry& e) const {
  std::string source;
  const std::string value = Value(e.key, &source).value_or("");
  if (absl::StartsWith(source, "--")) return absl::StrCat(source, "=", value);
  return absl::StrCat(source, "=\"", value, "\" (--", e.key, ")");
}

std::string NvidiaFlags::Note(const std::string& key, const std::string& why) const {
  const Entry* e = Find(key);
  if (e == nullptr) return absl::StrCat("--", key, " does not apply: ", why, "; ignored");
  return absl::StrCat(Describe(*e), " does not apply: ", why, "; ignored");
}

StatusOr<std::vector<std::string>> NvidiaFlags::Check() const {
  std::vector<std::string> notes;
  for (const Entry& e : entries_) {
    std::string source;
    const std::optional<std::string> v = Value(e.key, &source);
    if (!v) continue;
    const bool flag = absl::StartsWith(source, "--");
    const std::string shown = flag ? absl::StrCat(source, "=", *v) : absl::StrCat(source, "=\"", *v, "\"");
    switch (e.setting.kind) {
      case NvidiaKind::kBool: {
        GPUNODE_ASSIGN_OR_RETURN(const bool on, ParseGoBool(source, *v));
        if (!on) continue;  // false asks for nothing gpunode would have to do
        break;
      }
      case NvidiaKind::kInt: {
        int64_t n = 0;
        if (!absl::SimpleAtoi(*v, &n)) return absl::InvalidArgumentError(shown + ": not an integer");
        break;
      }
      case NvidiaKind::kFloat: {
        double d = 0;
        if (!absl::SimpleAtod(*v, &d)) return absl::InvalidArgumentError(shown + ": not a number");
        break;
      }
      default:
        break;
    }
    if (!e.setting.not_applicable.empty()) notes.push_back(Note(e.key, e.setting.not_applicable));
  }
  return notes;
}

}  // namespace gpunode::cli
