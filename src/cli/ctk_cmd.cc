// gpunode as NVIDIA's `nvidia-ctk`: NVIDIA Container Toolkit v1.18's command lines (commands, flags
// with their aliases and environment variables, urfave/cli's syntax) read here and run as gpunode's
// own commands, or by gpunode itself (ctk_native.cc), or answered with one "does not apply" line.
// The command and flag list follows nvidia-ctk v1.18.2's --help (kept in test/data/nvidia-ctk-1.18/,
// checked by test/cli/nvidia_ctk_help_test.py) and its source (cmd/nvidia-ctk/ of
// github.com/NVIDIA/nvidia-container-toolkit@v1.18.2). What each does: docs/nvidia-ctk.md.
#include "src/cli/ctk_cmd.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/cli/common.h"
#include "src/cli/ctk_internal.h"

namespace gpunode::cli {
namespace {

using ctk::Call;
using ctk::CommandSpec;
using ctk::FlagSpec;
using ctk::Plan;

constexpr char kNvidiaVersion[] = "v1.18.2";

// NVIDIA's global flags, accepted before and after the command words (urfave/cli v3).
const std::vector<FlagSpec>& GlobalFlags() {
  static const std::vector<FlagSpec> flags = {
      {{"debug", "d"}, false, false, {"NVIDIA_CTK_DEBUG"},
       "prints the gpunode command line it runs on stderr (gpunode has no debug log level)"},
      {{"quiet"}, false, false, {"NVIDIA_CTK_QUIET"},
       "-q of runtime configure and cdi generate (other commands print only their result)"},
      {{"config"}, true, false, {"NVIDIA_CTK_CONFIG"},
       "the toolkit config file of `nvidia-ctk config`; other commands read none (see their help)"},
      {{"help", "h"}, false, false, {}, "this help"},
      {{"version", "v"}, false, false, {}, "gpunode's version"},
  };
  return flags;
}

// gpunode's own global flags, taken before the first command word only.
const std::vector<FlagSpec>& GpunodeFlags() {
  static const std::vector<FlagSpec> flags = {
      {{"host-root"}, true, false, {}, "gpunode --host-root (also GPUNODE_HOST_ROOT)"},
      {{"simulate"}, true, false, {}, "gpunode --simulate PROFILE (also GPUNODE_SIMULATE)"},
      {{"output", "o"}, true, false, {}, "gpunode -o table|json|yaml, for the commands that print a report"},
      {{"color"}, true, false, {}, "gpunode --color auto|always|never"},
      {{"nvml-library"}, true, false, {}, "gpunode --nvml-library (also GPUNODE_NVML_LIBRARY)"},
      {{"cuda-library"}, true, false, {}, "gpunode --cuda-library (also GPUNODE_CUDA_LIBRARY)"},
      {{"explain"}, false, false, {}, "print the gpunode command line (or the \"does not apply\" line) and run nothing"},
  };
  return flags;
}

// Command words as typed -> the spec's path ("help"/"h" handled by the parser).
const CommandSpec* FindCommand(const std::string& path) {
  for (const CommandSpec& c : ctk::Commands()) {
    if (c.path == path) return &c;
    for (const std::string& alias : c.aliases) {
      if (alias == path) return &c;
    }
  }
  return nullptr;
}

std::vector<const CommandSpec*> Children(const std::string& path) {
  std::vector<const CommandSpec*> out;
  for (const CommandSpec& c : ctk::Commands()) {
    const std::string parent = c.path.find(' ') == std::string::npos ? "" : c.path.substr(0, c.path.rfind(' '));
    if (parent == path && !c.path.empty()) out.push_back(&c);
  }
  return out;
}

std::string Dashed(const std::string& name) { return (name.size() == 1 ? "-" : "--") + name; }

std::string FlagNames(const FlagSpec& f) {
  std::vector<std::string> names;
  for (const std::string& n : f.names) names.push_back(Dashed(n));
  return absl::StrJoin(names, ", ") + (f.value ? " VALUE" : "");
}

void PrintHelp(const std::string& path) {
  const CommandSpec* c = FindCommand(path);
  const std::string full = path.empty() ? "nvidia-ctk" : "nvidia-ctk " + path;
  std::cout << full << " - gpunode answering to NVIDIA Container Toolkit " << kNvidiaVersion
            << "'s command line (docs/nvidia-ctk.md)\n\n";
  if (c != nullptr && !c->summary.empty()) std::cout << c->summary << "\n";
  const auto children = Children(path);
  if (!children.empty()) {
    std::cout << "\nCOMMANDS:\n";
    for (const CommandSpec* child : children) {
      std::cout << "   " << child->path.substr(path.empty() ? 0 : path.size() + 1);
      for (const std::string& a : child->aliases) std::cout << ", " << a.substr(a.rfind(' ') + 1);
      std::cout << "\n        " << child->summary << "\n";
    }
  }
  auto print_flags = [](const char* title, const std::vector<FlagSpec>& flags) {
    if (flags.empty()) return;
    std::cout << "\n" << title << ":\n";
    for (const FlagSpec& f : flags) {
      std::cout << "   " << FlagNames(f);
      if (!f.env.empty()) std::cout << " [$" << absl::StrJoin(f.env, ", $") << "]";
      std::cout << "\n        "
                << (f.kind == ctk::FlagKind::kRefused ? "does not apply (exit 3): "
                    : f.kind == ctk::FlagKind::kNoop  ? "does not apply (a note; the command runs): "
                                                       : "")
                << f.meaning << "\n";
    }
  };
  // As nvidia-ctk's help: the root lists the global flags; a group only --help; a command its
  // flags and --help, then the global flags but --help and --version.
  const std::vector<FlagSpec>& globals = GlobalFlags();
  const std::vector<FlagSpec> help_only(globals.begin() + 3, globals.begin() + 4);
  if (path.empty()) {
    print_flags("GLOBAL OPTIONS", globals);
  } else if (!children.empty()) {  // a group; `config` has flags of its own (it runs too)
    std::vector<FlagSpec> own = c != nullptr ? c->flags : std::vector<FlagSpec>{};
    own.push_back(help_only.front());
    print_flags("OPTIONS", own);
  } else {
    std::vector<FlagSpec> own = c != nullptr ? c->flags : std::vector<FlagSpec>{};
    own.push_back(help_only.front());
    print_flags("OPTIONS", own);
    print_flags("GLOBAL OPTIONS", std::vector<FlagSpec>(globals.begin(), globals.begin() + 3));
  }
  if (path.empty()) {
    print_flags("GPUNODE OPTIONS (before the command)", GpunodeFlags());
    std::cout << "\nAlso as `gpunode ctk ARGS`. A flag or command gpunode has no such behaviour for prints one\n"
                 "\"does not apply\" line: exit 3 when what it asks for is not done, exit 0 (the command runs)\n"
                 "when it changes nothing gpunode does. Other exit codes: gpunode's (0 ok, 2 failed, 3 usage).\n";
  }
}

// The flag named `name` (no dashes) among `flags`, or nullptr.
const FlagSpec* FindFlag(const std::vector<FlagSpec>& flags, const std::string& name) {
  for (const FlagSpec& f : flags) {
    for (const std::string& n : f.names) {
      if (n == name) return &f;
    }
  }
  return nullptr;
}

// Splits a list value the way urfave/cli does (commas), keeping empty input as no element.
void AddValues(std::vector<std::string>& to, const std::string& value, bool list) {
  if (!list) {
    to.push_back(value);
    return;
  }
  for (absl::string_view v : absl::StrSplit(value, ',', absl::SkipEmpty())) to.emplace_back(v);
}

Status Usage(const std::string& message) { return absl::InvalidArgumentError(message); }

}  // namespace

namespace ctk {

std::string DoesNotApply(const std::string& path, const std::string& what, const std::string& why) {
  return absl::StrCat("nvidia-ctk ", path, what.empty() ? "" : " ", what, " does not apply to gpunode: ", why);
}

bool Call::Has(const std::string& name) const { return flags.count(name) > 0; }

std::string Call::Value(const std::string& name, const std::string& fallback) const {
  auto it = flags.find(name);
  return it == flags.end() || it->second.empty() ? fallback : it->second.back();
}

std::vector<std::string> Call::Values(const std::string& name) const {
  auto it = flags.find(name);
  return it == flags.end() ? std::vector<std::string>{} : it->second;
}

StatusOr<bool> Call::Bool(const std::string& name) const {
  if (!Has(name)) return false;
  return ParseGoBool(Dashed(name), Value(name, "true"));
}

}  // namespace ctk

namespace {

// Reads one level of flags from args[i...] until a word that is not a flag. Flags of `own` first,
// then NVIDIA's globals (and gpunode's at the top level). Writes values into `call`.
Status ReadFlags(const std::vector<std::string>& args, size_t& i, const std::vector<FlagSpec>& own, bool top,
                 const std::string& path, Call& call) {
  while (i < args.size()) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      return absl::OkStatus();
    }
    if (a.size() < 2 || a[0] != '-') return absl::OkStatus();
    std::string body = a.substr(a[1] == '-' ? 2 : 1);  // urfave/cli (Go's flag) takes -name as --name
    std::optional<std::string> inline_value;
    if (const size_t eq = body.find('='); eq != std::string::npos) {
      inline_value = body.substr(eq + 1);
      body = body.substr(0, eq);
    }
    const FlagSpec* f = FindFlag(own, body);
    bool global = false, ours = false;
    if (f == nullptr) {
      f = FindFlag(GlobalFlags(), body);
      global = f != nullptr;
    }
    if (f == nullptr && top) {
      f = FindFlag(GpunodeFlags(), body);
      ours = f != nullptr;
    }
    if (f == nullptr) {
      return Usage(absl::StrCat("nvidia-ctk", path.empty() ? "" : " ", path, ": flag provided but not defined: ", a,
                                " (not a flag of NVIDIA Container Toolkit ", kNvidiaVersion,
                                "; run 'nvidia-ctk ", path, path.empty() ? "" : " ", "--help')"));
    }
    std::string value;
    if (f->value) {
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return Usage(absl::StrCat("nvidia-ctk ", path, ": flag needs an argument: ", a));
      }
    } else {
      value = inline_value.value_or("true");
      if (!ParseGoBool(a, value).ok()) {
        return Usage(absl::StrCat("nvidia-ctk ", path, ": invalid boolean value \"", value, "\" for flag ", a));
      }
    }
    const std::string key = f->names.front();
    if (ours) {
      call.gpunode[key] = value;
    } else if (global) {
      call.globals[key].push_back(value);
    } else {
      AddValues(call.flags[key], value, f->list);
    }
    ++i;
  }
  return absl::OkStatus();
}

// A flag not on the command line but in its environment variables counts as given (as in urfave/cli).
void ReadEnv(const std::vector<FlagSpec>& flags, std::map<std::string, std::vector<std::string>>& into) {
  for (const FlagSpec& f : flags) {
    const std::string key = f.names.front();
    if (into.count(key) > 0) continue;
    for (const std::string& e : f.env) {
      const char* v = std::getenv(e.c_str());
      if (v == nullptr || *v == '\0') continue;
      AddValues(into[key], v, f.list);
      break;
    }
  }
}

std::string ShellQuote(const std::string& s) {
  if (!s.empty() && s.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;#~") == std::string::npos) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

namespace {

// Walks the command words (flags of each level, then a subcommand name) into `call` and `path`.
// Returns the exit code when that already answered the command line: help, version, a usage error.
std::optional<int> WalkCommandLine(const std::vector<std::string>& args, Call& call, std::string& path, bool& help) {
  size_t i = 0;
  for (bool top = true;; top = false) {
    const CommandSpec* here = FindCommand(path);
    if (Status st = ReadFlags(args, i, here ? here->flags : std::vector<FlagSpec>{}, top, path, call); !st.ok()) {
      PrintError(st);
      return kExitUsage;
    }
    if (call.globals.count("help")) help = true;
    if (call.globals.count("version") && path.empty()) {
      std::cout << "NVIDIA Container Toolkit CLI version " << kNvidiaVersion << " (as gpunode " << GPUNODE_VERSION
                << "; `gpunode --version` for its build)\n";
      return kExitOk;
    }
    if (help || i >= args.size()) return std::nullopt;
    const std::string& word = args[i];
    if (word == "help" || word == "h") {
      // `nvidia-ctk help cdi generate`, `nvidia-ctk cdi help generate`
      std::string target = path;
      for (size_t j = i + 1; j < args.size() && !args[j].empty() && args[j][0] != '-'; ++j) {
        target += (target.empty() ? "" : " ") + args[j];
      }
      if (FindCommand(target) == nullptr) {
        PrintError(absl::StrCat("nvidia-ctk: no help topic for '", target, "'"));
        return kExitUsage;
      }
      PrintHelp(FindCommand(target)->path);
      return kExitOk;
    }
    const auto children = Children(path);
    const CommandSpec* sub = children.empty() ? nullptr : FindCommand(path.empty() ? word : path + " " + word);
    if (sub == nullptr) {
      if (children.empty() && here != nullptr && here->takes_args) {
        call.args.assign(args.begin() + static_cast<long>(i), args.end());
        return std::nullopt;
      }
      std::string msg = absl::StrCat("nvidia-ctk", path.empty() ? "" : " " + path, ": unknown command \"", word, "\"");
      std::vector<std::string> names;
      for (const CommandSpec* c : children) names.push_back(c->path.substr(c->path.rfind(' ') + 1));
      absl::StrAppend(&msg, names.empty() ? " (it takes no arguments)" : " (commands: " + absl::StrJoin(names, ", ") + ")");
      PrintError(msg);
      return kExitUsage;
    }
    path = sub->path;
    ++i;
  }
}

// The "does not apply" notes of the flags given (kNoop), or the refusal of one (kRefused).
StatusOr<std::vector<std::string>> FlagNotes(const CommandSpec& cmd, const Call& call) {
  std::vector<std::string> notes;
  for (const FlagSpec& f : cmd.flags) {
    auto given = call.flags.find(f.names.front());
    if (given == call.flags.end() || f.kind == ctk::FlagKind::kMapped) continue;
    if (!f.value && !call.Bool(f.names.front()).value_or(true)) continue;  // --flag=false asks for nothing
    const std::string what = Dashed(f.names.front()) + (f.value ? "=" + absl::StrJoin(given->second, ",") : "");
    if (f.kind == ctk::FlagKind::kRefused) return absl::FailedPreconditionError(ctk::DoesNotApply(call.path, what, f.meaning));
    notes.push_back(ctk::DoesNotApply(call.path, what, f.meaning));
  }
  if (call.globals.count("config") && call.path != "config" && call.path != "config default") {
    notes.push_back(ctk::DoesNotApply(call.path, "--config=" + call.globals.at("config").back(),
                                      "only `nvidia-ctk config` reads the toolkit's config file; this command reads none"));
  }
  return notes;
}

// The last value of a boolean flag in `from` ("false" when not given).
StatusOr<bool> Flag(const std::map<std::string, std::vector<std::string>>& from, const std::string& name) {
  auto it = from.find(name);
  return ParseGoBool("--" + name, it == from.end() || it->second.empty() ? "false" : it->second.back());
}

}  // namespace

CtkOutcome RunNvidiaCtk(const std::vector<std::string>& args) {
  CtkOutcome out;
  Call call;
  std::string path;
  bool help = false;
  if (std::optional<int> done = WalkCommandLine(args, call, path, help)) {
    out.exit_code = *done;
    return out;
  }
  const CommandSpec* cmd = FindCommand(path);
  if (help || cmd == nullptr || !cmd->run) {
    PrintHelp(path);
    out.exit_code = kExitOk;  // a group alone shows its commands, as nvidia-ctk
    return out;
  }
  call.path = path;
  ReadEnv(cmd->flags, call.flags);
  ReadEnv(GlobalFlags(), call.globals);
  std::map<std::string, std::vector<std::string>> ours;
  if (call.gpunode.count("explain")) ours["explain"] = {call.gpunode["explain"]};
  auto debug = Flag(call.globals, "debug");
  auto quiet = Flag(call.globals, "quiet");
  auto explain = Flag(ours, "explain");
  auto notes = !debug.ok() || !quiet.ok() || !explain.ok() ? StatusOr<std::vector<std::string>>(
                                                                 !debug.ok() ? debug.status()
                                                                 : !quiet.ok() ? quiet.status()
                                                                               : explain.status())
                                                           : FlagNotes(*cmd, call);
  if (!notes.ok()) {
    PrintError(notes.status());
    out.exit_code = kExitUsage;
    return out;
  }
  call.quiet = *quiet;
  const char* env_root = std::getenv("GPUNODE_HOST_ROOT");
  call.host_root = call.gpunode.count("host-root") ? call.gpunode["host-root"] : env_root ? env_root : "/";
  call.output_format = call.gpunode.count("output") ? call.gpunode["output"] : "table";
  StatusOr<Plan> plan = cmd->run(call);
  if (!plan.ok()) {
    // Refused: a "does not apply" line (FailedPrecondition) or bad input; nothing was done.
    PrintError(plan.status());
    out.exit_code = kExitUsage;
    return out;
  }
  if (plan->native && call.output_format != "table" && path != "cdi list") {
    // as gpunode's own commands: -o only where there is a report (the others are gpunode's to refuse)
    PrintError(absl::StrCat("-o/--output ", call.output_format, ": nvidia-ctk ", path, " prints no report to format"));
    out.exit_code = kExitUsage;
    return out;
  }
  notes->insert(notes->end(), plan->notes.begin(), plan->notes.end());
  for (const std::string& note : *notes) std::cerr << "note: " << note << "\n";
  std::vector<std::string> gpunode;
  for (const char* g : {"host-root", "simulate", "output", "color", "nvml-library", "cuda-library"}) {
    if (call.gpunode.count(g)) {
      gpunode.push_back(std::string("--") + g);
      gpunode.push_back(call.gpunode[g]);
    }
  }
  gpunode.insert(gpunode.end(), plan->gpunode_args.begin(), plan->gpunode_args.end());
  std::vector<std::string> quoted;
  for (const std::string& a : gpunode) quoted.push_back(ShellQuote(a));
  const std::string line = plan->native ? plan->native_description : "gpunode " + absl::StrJoin(quoted, " ");
  if (*explain) {
    std::cout << line << "\n";
    out.exit_code = kExitOk;
  } else if (*debug) {
    std::cerr << "nvidia-ctk " << path << ": runs " << line << "\n";
  }
  if (*explain) return out;
  if (plan->native) {
    out.exit_code = plan->native();
  } else if (plan->gpunode_args.empty()) {
    out.exit_code = kExitOk;  // nothing to run: the notes said why
  } else {
    out.gpunode_args = std::move(gpunode);
  }
  return out;
}

std::optional<std::vector<std::string>> CtkArguments(const std::vector<std::string>& args) {
  static const std::set<std::string> with_value = {"--host-root", "--simulate", "-o", "--output",
                                                   "--color", "--nvml-library", "--cuda-library"};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "ctk") {
      std::vector<std::string> out(args.begin(), args.begin() + static_cast<long>(i));
      out.insert(out.end(), args.begin() + static_cast<long>(i) + 1, args.end());
      return out;
    }
    if (a.empty() || a[0] != '-') return std::nullopt;
    if (with_value.count(a)) ++i;
  }
  return std::nullopt;
}

void AddCtkHelp(CLI::App& app) {
  // Read by hand in main() before CLI11 sees the arguments; registered so `gpunode --help` lists it.
  app.add_subcommand("ctk", "NVIDIA's nvidia-ctk command lines (v1.18), as gpunode runs them (docs/nvidia-ctk.md)")
      ->allow_extras()
      ->prefix_command();
}

}  // namespace gpunode::cli
