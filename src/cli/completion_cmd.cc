// gpunode completion bash|zsh|fish, gpunode man: shell completion scripts and the man page, built
// at run time by walking the CLI11 command tree, so they always list the commands and options this
// binary has. Written by hand: CLI11 has no generator of its own.
//
// The walk (CommandModel) takes every visible subcommand (CLI11 hides those with an empty group)
// and every visible option: its names, whether it takes a value, its choices when CLI11 checks
// them with IsMember (read from the validator's description, "{a,b,c}"), and a hint for values that
// are files or folders (CLI11's ExistingFile/ExistingDirectory, else the option's name). A few
// options whose values CLI11 does not check have their choices listed in kValueOverrides.
#include <algorithm>
#include <cctype>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/support/profile.h"
#include "src/cli/common.h"

namespace gpunode::cli {
namespace {

enum class ValueHint { kNone, kFile, kDir };

struct OptionModel {
  std::vector<std::string> names;  // "-o", "--output"; a positional: its name ("FILE")
  std::string description;
  std::string value_name;  // "TEXT", "INT"; empty for a flag
  std::vector<std::string> choices;
  ValueHint hint = ValueHint::kNone;
  std::string envname;
  bool positional = false;
};

struct CommandModel {
  std::string path;  // "" for gpunode itself, "cdi generate"
  std::string description;
  std::string footer;
  std::vector<std::pair<std::string, std::string>> subcommands;  // name, description
  std::vector<OptionModel> options;                               // flags and options
  std::vector<OptionModel> positionals;
};

struct ValueOverride {
  const char* path;
  const char* option;
  std::vector<std::string> choices;
  ValueHint hint;
};

// Values CLI11 does not check (the commands parse them), listed for completion.
const std::vector<ValueOverride>& Overrides() {
  static const std::vector<ValueOverride> kValueOverrides = {
      {"", "--output", {"table", "json", "yaml"}, ValueHint::kNone},
      {"cdi generate", "--format", {"yaml", "json"}, ValueHint::kNone},
      {"cdi generate", "--device-name-strategy", {"index", "uuid", "both"}, ValueHint::kNone},
      {"cdi generate", "--disable-hook", {"create-symlinks", "update-ldcache", "all"}, ValueHint::kNone},
      {"completion", "SHELL", {"bash", "zsh", "fish"}, ValueHint::kNone},
  };
  return kValueOverrides;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Files or folders, from CLI11's validators, else from the option's name.
ValueHint HintOf(const std::string& name, const std::string& type_name) {
  if (Contains(type_name, ":DIR")) return ValueHint::kDir;
  if (Contains(type_name, ":FILE") || Contains(type_name, ":PATH")) return ValueHint::kFile;
  const std::string n = Lower(name);
  if (Contains(n, "dir") || Contains(n, "root")) return ValueHint::kDir;
  for (const char* part : {"file", "config", "path", "output", "log", "library", "cert", "key", "socket", "profile"}) {
    if (Contains(n, part)) return ValueHint::kFile;
  }
  return ValueHint::kNone;
}

// The choices of an IsMember check: "TEXT:{docker,containerd,crio}" -> docker, containerd, crio.
std::vector<std::string> ChoicesOf(const std::string& type_name) {
  std::vector<std::string> out;
  const size_t open = type_name.find(":{");
  if (open == std::string::npos) return out;
  const size_t close = type_name.find('}', open);
  if (close == std::string::npos) return out;
  std::stringstream items(type_name.substr(open + 2, close - open - 2));
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty() || Contains(item, "->") || Contains(item, " ")) return {};  // a map: not plain choices
    out.push_back(item);
  }
  return out;
}

OptionModel ModelOption(const std::string& path, const CLI::Option* opt) {
  OptionModel m;
  m.description = opt->get_description();
  m.envname = opt->get_envname();
  m.positional = opt->get_positional() && opt->get_snames().empty() && opt->get_lnames().empty();
  const std::string type_name = opt->get_type_name();
  std::string key;
  if (m.positional) {
    m.names.push_back(opt->get_name(true, false));
    key = m.names.front();
  } else {
    for (const std::string& s : opt->get_snames()) m.names.push_back("-" + s);
    for (const std::string& l : opt->get_lnames()) m.names.push_back("--" + l);
    key = opt->get_lnames().empty() ? m.names.front() : "--" + opt->get_lnames().front();
  }
  if (m.positional || opt->get_expected_min() > 0) {
    m.value_name = type_name.substr(0, type_name.find(':'));
    if (m.value_name.empty()) m.value_name = "VALUE";
    m.choices = ChoicesOf(type_name);
    if (m.choices.empty()) m.hint = HintOf(key, type_name);
  }
  for (const ValueOverride& o : Overrides()) {
    if (path == o.path && key == o.option) {
      m.choices = o.choices;
      m.hint = o.hint;
    }
  }
  return m;
}

void Walk(const CLI::App* app, const std::string& path, std::vector<CommandModel>* out) {
  CommandModel cmd;
  cmd.path = path;
  cmd.description = app->get_description();
  cmd.footer = app->get_footer();
  for (const CLI::Option* opt : app->get_options()) {
    if (opt->get_group().empty()) continue;  // hidden
    OptionModel m = ModelOption(path, opt);
    (m.positional ? cmd.positionals : cmd.options).push_back(std::move(m));
  }
  std::vector<const CLI::App*> subs =
      app->get_subcommands([](const CLI::App* s) { return !s->get_name().empty() && !s->get_group().empty(); });
  for (const CLI::App* sub : subs) cmd.subcommands.emplace_back(sub->get_name(), sub->get_description());
  out->push_back(std::move(cmd));
  for (const CLI::App* sub : subs) Walk(sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), out);
}

// --simulate takes a built-in profile name or a profile file.
void AddProfileNames(std::vector<CommandModel>* model) {
  std::vector<std::string> names;
  for (const std::string& n : sim::BuiltinProfileNames()) names.push_back(n);
  for (CommandModel& cmd : *model) {
    for (OptionModel& o : cmd.options) {
      if (std::find(o.names.begin(), o.names.end(), "--simulate") != o.names.end()) {
        o.choices = names;
        o.hint = ValueHint::kFile;
      }
    }
    if (cmd.path == "sim hostroot" && !cmd.positionals.empty()) {
      cmd.positionals.front().choices = names;
      cmd.positionals.front().hint = ValueHint::kFile;
    }
  }
}

std::vector<CommandModel> Model(const CLI::App& root) {
  std::vector<CommandModel> model;
  Walk(&root, "", &model);
  AddProfileNames(&model);
  return model;
}

// The first line of a description, for one-line listings.
std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// 'text' for sh, zsh and fish (fish also treats \ specially inside single quotes).
std::string Quote(const std::string& s, bool fish = false) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += fish ? "\\'" : "'\\''";
    } else if (c == '\\' && fish) {
      out += "\\\\";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string Join(const std::vector<std::string>& v, const char* sep = " ") {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The value completion of an option or positional, as the scripts' helper reads it:
// "w WORDS" (these words), "wf WORDS" (these words and files), "f" (files), "d" (folders).
std::string ValueSpec(const OptionModel& o) {
  if (!o.choices.empty()) return (o.hint == ValueHint::kFile ? "wf " : "w ") + Join(o.choices);
  if (o.hint == ValueHint::kFile) return "f";
  if (o.hint == ValueHint::kDir) return "d";
  return "";
}

// The data functions shared by the bash and zsh scripts (both read this sh syntax):
// _gpunode_subcommands PATH, _gpunode_options PATH, _gpunode_value_options PATH, _gpunode_value PATH OPT.
std::string ShellDataFunctions(const std::vector<CommandModel>& model) {
  std::ostringstream subs, opts, valued, values;
  for (const CommandModel& cmd : model) {
    const std::string key = "\"" + cmd.path + "\"";
    std::vector<std::string> names, all, with_value;
    for (const auto& s : cmd.subcommands) names.push_back(s.first);
    if (!names.empty()) subs << "    " << key << ") echo " << Quote(Join(names)) << " ;;\n";
    for (const OptionModel& o : cmd.options) {
      all.insert(all.end(), o.names.begin(), o.names.end());
      if (!o.value_name.empty()) with_value.insert(with_value.end(), o.names.begin(), o.names.end());
      if (std::string spec = ValueSpec(o); !o.value_name.empty() && !spec.empty()) {
        for (const std::string& n : o.names) {
          values << "    \"" << cmd.path << "|" << n << "\") echo " << Quote(spec) << " ;;\n";
        }
      }
    }
    if (!cmd.positionals.empty()) {
      if (std::string spec = ValueSpec(cmd.positionals.front()); !spec.empty()) {
        values << "    \"" << cmd.path << "|\") echo " << Quote(spec) << " ;;\n";
      }
    }
    if (!all.empty()) opts << "    " << key << ") echo " << Quote(Join(all)) << " ;;\n";
    if (!with_value.empty()) valued << "    " << key << ") echo " << Quote(Join(with_value)) << " ;;\n";
  }
  std::ostringstream out;
  out << "_gpunode_subcommands() {\n  case \"$1\" in\n" << subs.str() << "  esac\n}\n"
      << "_gpunode_options() {\n  case \"$1\" in\n" << opts.str() << "  esac\n}\n"
      << "_gpunode_value_options() {\n  case \"$1\" in\n" << valued.str() << "  esac\n}\n"
      << "_gpunode_value() {\n  case \"$1|$2\" in\n" << values.str() << "  esac\n}\n"
      // Global options (gpunode's own) are taken after any command too.
      << "_gpunode_takes_value() {\n"
         "  [[ \" $(_gpunode_value_options \"$1\") $(_gpunode_value_options \"\") \" == *\" $2 \"* ]]\n"
         "}\n"
      // The command path of words 1..N-1 (options and their values skipped), and whether the
      // word being completed is an option's value: sets cmdpath, skip and opt.
      << "_gpunode_walk() {\n"
         "  local w i\n"
         "  cmdpath=\"\" skip=0 opt=\"\"\n"
         "  for w in \"$@\"; do\n"
         "    if ((skip)); then skip=0; continue; fi\n"
         "    case \"$w\" in\n"
         "      --) break ;;\n"
         "      -*=*) continue ;;\n"
         "      -*) if _gpunode_takes_value \"$cmdpath\" \"$w\"; then skip=1; opt=\"$w\"; fi; continue ;;\n"
         "    esac\n"
         "    if [[ -z \"$cmdpath\" && \"$w\" == help ]]; then continue; fi\n"
         "    if [[ \" $(_gpunode_subcommands \"$cmdpath\") \" == *\" $w \"* ]]; then\n"
         "      cmdpath=\"${cmdpath:+$cmdpath }$w\"\n"
         "    fi\n"
         "  done\n"
         "}\n";
  return out.str();
}

std::string BashScript(const std::vector<CommandModel>& model) {
  std::ostringstream out;
  out << "# bash completion for gpunode, generated by `gpunode completion bash` from its command tree.\n"
         "# Install: gpunode completion bash > /etc/bash_completion.d/gpunode\n"
         "#      or: source <(gpunode completion bash)   (in ~/.bashrc)\n"
      << ShellDataFunctions(model)
      << "_gpunode_complete_value() {  # $1: value spec, $2: the word so far\n"
         "  local kind=\"${1%% *}\" words=\"\"\n"
         "  [[ \"$1\" == *\" \"* ]] && words=\"${1#* }\"\n"
         "  case \"$kind\" in\n"
         "    w) COMPREPLY=($(compgen -W \"$words\" -- \"$2\")) ;;\n"
         "    wf) COMPREPLY=($(compgen -W \"$words\" -- \"$2\") $(compgen -f -- \"$2\")); compopt -o filenames 2>/dev/null ;;\n"
         "    f) COMPREPLY=($(compgen -f -- \"$2\")); compopt -o filenames 2>/dev/null ;;\n"
         "    d) COMPREPLY=($(compgen -d -- \"$2\")); compopt -o filenames 2>/dev/null ;;\n"
         "  esac\n"
         "  return 0\n"
         "}\n"
         "_gpunode() {\n"
         "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" cmdpath skip opt spec\n"
         "  COMPREPLY=()\n"
         "  local -a before=(\"${COMP_WORDS[@]:1:COMP_CWORD-1}\")\n"
         "  # --opt=value: bash splits it at '=' (COMP_WORDBREAKS)\n"
         "  if [[ \"$cur\" == = ]]; then cur=\"\"; before+=(\"=\"); fi\n"
         "  if ((${#before[@]} >= 2)) && [[ \"${before[-1]}\" == = ]]; then\n"
         "    unset 'before[-1]'\n"
         "  fi\n"
         "  _gpunode_walk \"${before[@]}\"\n"
         "  if ((skip)); then\n"
         "    spec=\"$(_gpunode_value \"$cmdpath\" \"$opt\")\"\n"
         "    [[ -z \"$spec\" ]] && spec=\"$(_gpunode_value \"\" \"$opt\")\"\n"
         "    _gpunode_complete_value \"$spec\" \"$cur\"\n"
         "    return 0\n"
         "  fi\n"
         "  if [[ \"$cur\" == -* ]]; then\n"
         "    local all=\"$(_gpunode_options \"$cmdpath\")\"\n"
         "    [[ -n \"$cmdpath\" ]] && all=\"$all $(_gpunode_options \"\")\"\n"
         "    COMPREPLY=($(compgen -W \"$all\" -- \"$cur\"))\n"
         "    return 0\n"
         "  fi\n"
         "  local subs=\"$(_gpunode_subcommands \"$cmdpath\")\"\n"
         "  if [[ -n \"$subs\" ]]; then\n"
         "    [[ -z \"$cmdpath\" ]] && subs=\"$subs help\"\n"
         "    COMPREPLY=($(compgen -W \"$subs\" -- \"$cur\"))\n"
         "    return 0\n"
         "  fi\n"
         "  _gpunode_complete_value \"$(_gpunode_value \"$cmdpath\" \"\")\" \"$cur\"\n"
         "}\n"
         "complete -F _gpunode gpunode\n";
  return out.str();
}

// zsh: 'name:description' entries for _describe (a ':' in the name is escaped).
std::string ZshDescribe(const std::string& name, const std::string& description) {
  std::string n;
  for (char c : name) n += c == ':' ? std::string("\\:") : std::string(1, c);
  return Quote(n + ":" + FirstLine(description));
}

std::string ZshScript(const std::vector<CommandModel>& model) {
  std::ostringstream descs;
  for (const CommandModel& cmd : model) {
    std::vector<std::string> cmds, opts;
    for (const auto& [name, d] : cmd.subcommands) cmds.push_back(ZshDescribe(name, d));
    if (cmd.path.empty()) cmds.push_back(ZshDescribe("help", "Help about any command"));
    for (const OptionModel& o : cmd.options) {
      for (const std::string& n : o.names) opts.push_back(ZshDescribe(n, o.description));
    }
    if (!cmds.empty()) descs << "    \"c|" << cmd.path << "\") reply=(" << Join(cmds) << ") ;;\n";
    if (!opts.empty()) descs << "    \"o|" << cmd.path << "\") reply=(" << Join(opts) << ") ;;\n";
  }
  std::ostringstream out;
  out << "#compdef gpunode\n"
         "# zsh completion for gpunode, generated by `gpunode completion zsh` from its command tree.\n"
         "# Install: gpunode completion zsh > \"${fpath[1]}/_gpunode\"   (then start a new shell)\n"
         "#      or: source <(gpunode completion zsh)   (in ~/.zshrc, after compinit)\n"
      << ShellDataFunctions(model)
      << "_gpunode_descriptions() {  # $1: c (commands) or o (options), $2: command path\n"
         "  reply=()\n"
         "  case \"$1|$2\" in\n"
      << descs.str()
      << "  esac\n"
         "}\n"
         "_gpunode_complete_value() {  # $1: value spec\n"
         "  local kind=\"${1%% *}\" words=\"\"\n"
         "  [[ \"$1\" == *\" \"* ]] && words=\"${1#* }\"\n"
         "  case \"$kind\" in\n"
         "    w) compadd -- ${=words} ;;\n"
         "    wf) compadd -- ${=words}; _files ;;\n"
         "    f) _files ;;\n"
         "    d) _files -/ ;;\n"
         "    *) _message 'value' ;;\n"
         "  esac\n"
         "}\n"
         "_gpunode() {\n"
         "  local cur=\"${words[CURRENT]}\" cmdpath skip opt spec\n"
         "  local -a reply before\n"
         "  before=(\"${(@)words[2,CURRENT-1]}\")\n"
         "  if [[ \"$cur\" == --*=* ]]; then\n"
         "    before+=(\"${cur%%=*}\"); compset -P '*='; cur=\"${cur#*=}\"\n"
         "  fi\n"
         "  _gpunode_walk \"${(@)before}\"\n"
         "  if ((skip)); then\n"
         "    spec=\"$(_gpunode_value \"$cmdpath\" \"$opt\")\"\n"
         "    [[ -z \"$spec\" ]] && spec=\"$(_gpunode_value \"\" \"$opt\")\"\n"
         "    _gpunode_complete_value \"$spec\"\n"
         "    return\n"
         "  fi\n"
         "  if [[ \"$cur\" == -* ]]; then\n"
         "    local -a opts\n"
         "    _gpunode_descriptions o \"$cmdpath\"; opts=(\"${(@)reply}\")\n"
         "    if [[ -n \"$cmdpath\" ]]; then _gpunode_descriptions o \"\"; opts+=(\"${(@)reply}\"); fi\n"
         "    _describe -t options 'option' opts\n"
         "    return\n"
         "  fi\n"
         "  if [[ -n \"$(_gpunode_subcommands \"$cmdpath\")\" ]]; then\n"
         "    local -a cmds\n"
         "    _gpunode_descriptions c \"$cmdpath\"; cmds=(\"${(@)reply}\")\n"
         "    _describe -t commands 'command' cmds\n"
         "    return\n"
         "  fi\n"
         "  spec=\"$(_gpunode_value \"$cmdpath\" \"\")\"\n"
         "  [[ -n \"$spec\" ]] && _gpunode_complete_value \"$spec\"\n"
         "}\n"
         "if [[ \"${zsh_eval_context[-1]}\" == loadautofunc ]]; then\n"
         "  _gpunode \"$@\"\n"
         "else\n"
         "  compdef _gpunode gpunode\n"
         "fi\n";
  return out.str();
}

std::string FishScript(const std::vector<CommandModel>& model) {
  std::ostringstream subs, valued, completes;
  for (const CommandModel& cmd : model) {
    std::vector<std::string> names, with_value;
    for (const auto& s : cmd.subcommands) names.push_back(s.first);
    if (!names.empty()) subs << "    case " << Quote(cmd.path, true) << "\n        printf '%s\\n' " << Join(names) << "\n";
    const std::string cond = " -n " + Quote("__gpunode_is " + Quote(cmd.path, true), true);
    for (const auto& [name, d] : cmd.subcommands) {
      completes << "complete -c gpunode" << cond << " -a " << Quote(name, true) << " -d "
                << Quote(FirstLine(d), true) << "\n";
    }
    if (cmd.path.empty()) completes << "complete -c gpunode" << cond << " -a help -d 'Help about any command'\n";
    for (const OptionModel& o : cmd.options) {
      // Global options are taken after any command: no condition.
      completes << "complete -c gpunode" << (cmd.path.empty() ? "" : cond);
      for (const std::string& n : o.names) {
        if (n.rfind("--", 0) == 0) {
          completes << " -l " << Quote(n.substr(2), true);
        } else {
          completes << " -s " << Quote(n.substr(1), true);
        }
        if (!o.value_name.empty()) with_value.push_back(n);
      }
      if (!o.value_name.empty()) {
        completes << (o.hint == ValueHint::kNone ? " -x" : " -r -F");
        if (!o.choices.empty()) completes << " -a " << Quote(Join(o.choices), true);
        if (o.hint == ValueHint::kDir) completes << " -a '(__fish_complete_directories)'";
      }
      completes << " -d " << Quote(FirstLine(o.description), true) << "\n";
    }
    if (!cmd.positionals.empty() && cmd.subcommands.empty()) {
      const OptionModel& p = cmd.positionals.front();
      if (!p.choices.empty()) {
        completes << "complete -c gpunode" << cond << " -a " << Quote(Join(p.choices), true) << "\n";
      }
      if (p.hint != ValueHint::kNone) completes << "complete -c gpunode" << cond << " -F\n";
    }
    if (!with_value.empty()) {
      valued << "    case " << Quote(cmd.path, true) << "\n        printf '%s\\n' " << Join(with_value) << "\n";
    }
  }
  std::ostringstream out;
  out << "# fish completion for gpunode, generated by `gpunode completion fish` from its command tree.\n"
         "# Install: gpunode completion fish > ~/.config/fish/completions/gpunode.fish\n"
         "function __gpunode_subcommands\n    switch $argv[1]\n"
      << subs.str()
      << "    end\nend\n"
         "function __gpunode_value_options\n    switch $argv[1]\n"
      << valued.str()
      << "    end\nend\n"
         "# The command path of the words before the cursor (options and their values skipped).\n"
         "function __gpunode_path\n"
         "    set -l toks (commandline -opc)\n"
         "    set -e toks[1]\n"
         "    set -l path ''\n"
         "    set -l skip 0\n"
         "    for w in $toks\n"
         "        if test $skip = 1\n"
         "            set skip 0\n"
         "            continue\n"
         "        end\n"
         "        switch $w\n"
         "            case '--'\n"
         "                break\n"
         "            case '-*=*'\n"
         "                continue\n"
         "            case '-*'\n"
         "                if contains -- $w (__gpunode_value_options $path) (__gpunode_value_options '')\n"
         "                    set skip 1\n"
         "                end\n"
         "                continue\n"
         "        end\n"
         "        if test -z \"$path\" -a \"$w\" = help\n"
         "            continue\n"
         "        end\n"
         "        if contains -- $w (__gpunode_subcommands $path)\n"
         "            set path (string trim -- \"$path $w\")\n"
         "        end\n"
         "    end\n"
         "    echo $path\n"
         "end\n"
         "function __gpunode_is\n"
         "    set -l p (__gpunode_path)\n"
         "    test \"$p\" = \"$argv[1]\"\n"
         "end\n"
         "complete -c gpunode -f\n"
      << completes.str();
  return out.str();
}

// roff: a backslash, and a '.' or '\'' at the start of a line, must not be read as requests.
std::string Roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}

void ManOptions(std::ostream& out, const std::vector<OptionModel>& options) {
  for (const OptionModel& o : options) {
    out << ".TP\n";
    std::vector<std::string> names;
    for (const std::string& n : o.names) names.push_back((o.positional ? "\\fI" : "\\fB") + Roff(n) + "\\fR");
    out << Join(names, ", ");
    if (!o.value_name.empty() && !o.positional) {
      const bool listed = !o.choices.empty() && o.hint == ValueHint::kNone;  // --simulate: names or a file
      out << " \\fI" << Roff(listed ? Join(o.choices, "|") : o.value_name) << "\\fR";
    }
    out << "\n" << Roff(o.description);
    if (!o.envname.empty()) out << " (environment: \\fB" << Roff(o.envname) << "\\fR)";
    out << "\n";
  }
}

std::string ManPage(const std::vector<CommandModel>& model) {
  const CommandModel& root = model.front();
  std::string summary = FirstLine(root.description);
  if (summary.rfind("gpunode: ", 0) == 0) summary = summary.substr(9);
  if (!summary.empty() && summary.back() == '.') summary.pop_back();
  std::ostringstream out;
  out << ".\\\" The gpunode man page, generated by `gpunode man` from its command tree.\n"
      << ".TH GPUNODE 1 \"\" \"gpunode " << GPUNODE_VERSION << "\" \"User Commands\"\n"
      << ".SH NAME\ngpunode \\- " << Roff(summary) << "\n"
      << ".SH SYNOPSIS\n.B gpunode\n[\\fIGLOBAL OPTIONS\\fR] \\fICOMMAND\\fR [\\fISUBCOMMAND\\fR] "
         "[\\fIOPTIONS\\fR] [\\fIARGUMENTS\\fR]\n"
      << ".br\n.B gpunode help\n[\\fICOMMAND\\fR...]\n"
      << ".SH DESCRIPTION\n" << Roff(root.description) << "\n"
      << ".PP\nGlobal options may also follow the command. Every command that prints a report prints it as "
         "a table, or as JSON or YAML with \\fB\\-o json\\fR or \\fB\\-o yaml\\fR.\n"
      << ".SH GLOBAL OPTIONS\n";
  ManOptions(out, root.options);
  out << ".SH COMMANDS\n";
  for (size_t i = 1; i < model.size(); ++i) {
    const CommandModel& cmd = model[i];
    out << ".SS \"gpunode " << Roff(cmd.path) << "\"\n" << Roff(cmd.description) << "\n";
    if (!cmd.subcommands.empty()) {
      std::vector<std::string> names;
      for (const auto& s : cmd.subcommands) names.push_back("\\fB" + Roff(s.first) + "\\fR");
      out << ".PP\nSubcommands: " << Join(names, ", ") << ".\n";
    }
    std::vector<OptionModel> all = cmd.positionals;
    all.insert(all.end(), cmd.options.begin(), cmd.options.end());
    if (!all.empty()) out << ".PP\nArguments and options:\n";
    ManOptions(out, all);
    if (!cmd.footer.empty()) out << ".PP\n.nf\n" << Roff(cmd.footer) << "\n.fi\n";
  }
  out << ".SH ENVIRONMENT\n";
  for (const OptionModel& o : root.options) {
    if (o.envname.empty()) continue;
    out << ".TP\n\\fB" << Roff(o.envname) << "\\fR\nThe default of \\fB" << Roff(o.names.back()) << "\\fR.\n";
  }
  out << ".TP\n\\fBGPUNODE_SIM_LIBRARY\\fR\nThe simulated NVML library for \\fB\\-\\-simulate\\fR (default: "
         "libgpunode\\-simnvml.so beside the binary, else ../lib/gpunode/).\n"
      << ".SH EXIT STATUS\n"
      << ".TP\n\\fB0\\fR\nOK.\n"
      << ".TP\n\\fB1\\fR\nWarnings (doctor), incompatible (compat).\n"
      << ".TP\n\\fB2\\fR\nFailures (doctor), unknown (compat), or the operation failed (I/O, a server, a "
         "conflicting writer).\n"
      << ".TP\n\\fB3\\fR\nUsage or input errors: bad flags, malformed input, unusable or refused files.\n";
  if (!root.footer.empty()) out << ".SH EXAMPLES\n.nf\n" << Roff(root.footer) << "\n.fi\n";
  out << ".SH SEE ALSO\n\\fBnvidia\\-smi\\fR(1), \\fBnvidia\\-ctk\\fR(1), \\fBpodman\\fR(1); the documentation "
         "in the gpunode source tree (docs/).\n";
  return out.str();
}

}  // namespace

void AddCompletionCommands(CLI::App& app, int* exit_code) {
  auto shell = std::make_shared<std::string>();
  CLI::App* completion = app.add_subcommand(
      "completion", "Print a shell completion script: bash, zsh or fish (docs/completion.md)");
  completion->add_option("SHELL", *shell, "bash, zsh or fish")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh", "fish"}));
  completion->footer(
      "Examples:\n"
      "  source <(gpunode completion bash)                          this shell\n"
      "  gpunode completion bash > /etc/bash_completion.d/gpunode   every bash\n"
      "  gpunode completion zsh > \"${fpath[1]}/_gpunode\"\n"
      "  gpunode completion fish > ~/.config/fish/completions/gpunode.fish");
  completion->callback([&app, shell, exit_code] {
    const std::vector<CommandModel> model = Model(app);
    std::cout << (*shell == "zsh" ? ZshScript(model) : *shell == "fish" ? FishScript(model) : BashScript(model));
    *exit_code = kExitOk;
  });
  CLI::App* man = app.add_subcommand("man", "Print the man page (roff, section 1)");
  man->footer("Example:\n  gpunode man > /usr/local/share/man/man1/gpunode.1 && man gpunode");
  man->callback([&app, exit_code] {
    std::cout << ManPage(Model(app));
    *exit_code = kExitOk;
  });
}

}  // namespace gpunode::cli
