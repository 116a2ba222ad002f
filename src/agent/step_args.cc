#include "src/agent/step_args.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace gpunode::agent {
namespace {

struct FlagRule {
  const char* name;
  bool takes_value;
  bool path;    // an absolute path
  bool fixed;   // cannot change on reload (see the header)
  bool repeat;  // may be given more than once
  std::vector<std::string> values;  // the accepted values (each item of a comma list); empty: any
};

struct Command {
  std::vector<std::string> words;  // the subcommand
  std::vector<FlagRule> flags;
};

const Command* CommandOf(const std::string& step) {
  static const auto* const kCdi = new Command{
      {"cdi", "generate"},
      {{"--output", true, true, true, false, {}},
       {"--hook-path", true, true, true, false, {}},
       {"--driver-root", true, true, true, false, {}},
       {"--device-name-strategy", true, false, false, false, {"index", "uuid", "both"}},
       {"--disable-hook", true, false, false, true, {"create-symlinks", "update-ldcache", "all"}}}};
  static const auto* const kRuntime = new Command{
      {"runtime", "configure"},
      {{"--runtime", true, false, false, false, {"docker", "containerd", "crio"}},
       {"--config", true, true, true, false, {}},
       {"--set-as-default", false, false, false, false, {}},
       {"--cdi", false, false, false, false, {}}}};
  if (step == "cdi") return kCdi;
  if (step == "runtime") return kRuntime;
  return nullptr;
}

const std::vector<FlagRule>& GlobalFlags() {
  static const auto* const kGlobal = new std::vector<FlagRule>{
      {"--host-root", true, true, true, false, {}},
      {"--nvml-library", true, true, true, false, {}},
      {"--cuda-library", true, true, true, false, {}}};
  return *kGlobal;
}

std::string Names(const std::vector<FlagRule>& rules) {
  std::vector<std::string> names;
  for (const FlagRule& r : rules) names.push_back(r.name);
  return absl::StrJoin(names, ", ");
}

// One flag and its value, as given (`--flag value` or `--flag=value`).
struct Parsed {
  const FlagRule* rule;
  std::string value;
  size_t index;  // of the flag
};

// Walks `list` (named `list_name`) from `first` against `rules`; `what` names the command in
// messages. Appends what it read to `out`.
std::optional<StepArgsProblem> Walk(const std::string& list_name, const std::vector<std::string>& list, size_t first,
                                    const std::vector<FlagRule>& rules, const std::string& what,
                                    std::vector<Parsed>* out) {
  auto problem = [&](size_t i, std::string msg) { return StepArgsProblem{list_name, i, std::move(msg)}; };
  std::set<std::string> seen;
  for (size_t i = first; i < list.size(); ++i) {
    const std::string& arg = list[i];
    std::string name = arg, value;
    bool inline_value = false;
    if (absl::StartsWith(arg, "--")) {
      if (size_t eq = arg.find('='); eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        inline_value = true;
      }
    }
    const FlagRule* rule = nullptr;
    for (const FlagRule& r : rules) {
      if (name == r.name) rule = &r;
    }
    if (rule == nullptr) {
      return problem(i, absl::StrCat(absl::StartsWith(arg, "-") ? "flag" : "argument", " \"", arg,
                                     "\" is not accepted for ", what, " (accepted: ", Names(rules), ")"));
    }
    if (!rule->repeat && !seen.insert(name).second) return problem(i, absl::StrCat(name, " is given twice"));
    if (!rule->takes_value) {
      if (inline_value) return problem(i, absl::StrCat(name, " takes no value"));
      out->push_back({rule, "", i});
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= list.size()) return problem(list.size(), absl::StrCat(name, " needs a value"));
      value = list[++i];
    }
    if (value.empty() || absl::StartsWith(value, "-")) {
      return problem(i, absl::StrCat(name, " needs a value, not \"", value, "\""));
    }
    if (value.find('\0') != std::string::npos) return problem(i, absl::StrCat(name, ": a value with a NUL byte"));
    if (rule->path && (value[0] != '/' || absl::StrContains(absl::StrCat(value, "/"), "/../"))) {
      return problem(i, absl::StrCat(name, " \"", value, "\": expected an absolute path without \"..\""));
    }
    if (!rule->values.empty()) {
      for (absl::string_view one : absl::StrSplit(value, ',')) {
        bool ok = false;
        for (const std::string& v : rule->values) ok = ok || one == v;
        if (!ok) {
          return problem(i, absl::StrCat(name, " \"", value, "\": expected ", absl::StrJoin(rule->values, ", ")));
        }
      }
    }
    out->push_back({rule, value, i});
  }
  return std::nullopt;
}

std::optional<StepArgsProblem> Read(const std::string& step, const std::vector<std::string>& args,
                                    const std::vector<std::string>& global_args, std::vector<Parsed>* flags,
                                    std::vector<Parsed>* globals) {
  const Command* cmd = CommandOf(step);
  if (cmd == nullptr) return StepArgsProblem{"args", 0, absl::StrCat("no step \"", step, "\"")};
  const std::string what = absl::StrCat("gpunode ", absl::StrJoin(cmd->words, " "));
  for (size_t i = 0; i < cmd->words.size(); ++i) {
    if (i >= args.size() || args[i] != cmd->words[i]) {
      return StepArgsProblem{
          "args", std::min(i, args.size()),
          absl::StrCat(i < args.size() ? absl::StrCat("\"", args[i], "\": ") : "", "the ", step,
                       " step runs only `", what, " ...` (the agent runs it as root: no other command)")};
    }
  }
  if (auto p = Walk("args", args, cmd->words.size(), cmd->flags, what, flags)) return p;
  return Walk("globalArgs", global_args, 0, GlobalFlags(), "the steps' global options", globals);
}

}  // namespace

std::optional<StepArgsProblem> CheckStepArgs(const std::string& step, const std::vector<std::string>& args,
                                             const std::vector<std::string>& global_args) {
  std::vector<Parsed> flags, globals;
  return Read(step, args, global_args, &flags, &globals);
}

std::vector<FixedValue> FixedStepValues(const std::string& step, const std::vector<std::string>& args,
                                        const std::vector<std::string>& global_args) {
  std::vector<Parsed> flags, globals;
  std::vector<FixedValue> out;
  if (Read(step, args, global_args, &flags, &globals)) {
    out.push_back({"args", "the command line", absl::StrJoin(args, " ")});
    out.push_back({"globalArgs", "the command line", absl::StrJoin(global_args, " ")});
    return out;
  }
  auto add = [&](const char* list, const std::vector<FlagRule>& rules, const std::vector<Parsed>& given) {
    for (const FlagRule& rule : rules) {
      if (!rule.fixed) continue;
      std::string value;
      for (const Parsed& p : given) {
        if (p.rule == &rule) value = p.value;
      }
      out.push_back({list, rule.name, value});
    }
  };
  add("args", CommandOf(step)->flags, flags);
  add("globalArgs", GlobalFlags(), globals);
  return out;
}

}  // namespace gpunode::agent
