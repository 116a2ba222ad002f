// `gpunode completion bash|zsh|fish` and `gpunode man` (the real binary): generated from the
// command tree, so every command and option that `gpunode ... --help` lists is in the bash
// completion and in the man page; the scripts are valid for their shells and complete for real.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/run_gpunode.h"
#include "test/testing/temp_dir_test.h"

namespace {

using ::gpunode::testing::Result;
using ::gpunode::testing::RunGpunode;
using ::gpunode::testing::RunShell;
using ::testing::HasSubstr;
using ::testing::Not;

struct HelpCommand {
  std::string path;                  // "" for gpunode, "cdi generate"
  std::vector<std::string> options;  // "-o", "--output", ...
  std::vector<std::string> subcommands;
};

// What `gpunode PATH --help` lists: option names (lines "  -x,--long TYPE  ...") and subcommand
// names (the "Subcommands:" section's "  name  ..." lines).
HelpCommand ParseHelp(const std::string& path, const std::string& text) {
  HelpCommand cmd;
  cmd.path = path;
  std::istringstream in(text);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty()) section.clear();  // a blank line ends a section (the footer follows the last)
    if (!line.empty() && line[0] != ' ' && line.back() == ':') {
      section = line;
      continue;
    }
    if (line.size() < 3 || line.compare(0, 2, "  ") != 0 || line[2] == ' ') continue;
    const std::string first = line.substr(2, line.find(' ', 2) - 2);
    if (section == "Subcommands:") {
      cmd.subcommands.push_back(first);
    } else if (section != "Positionals:" && first[0] == '-') {
      std::istringstream names(first);
      std::string n;
      while (std::getline(names, n, ',')) cmd.options.push_back(n.substr(0, n.find('{')));  // --flag{true}
    }
  }
  return cmd;
}

// Every command reachable from `gpunode --help` (oci-runtime's help is the shim's own, not CLI11's).
std::vector<HelpCommand> AllHelp() {
  std::vector<HelpCommand> out;
  std::vector<std::string> todo = {""};
  while (!todo.empty()) {
    const std::string path = todo.back();
    todo.pop_back();
    Result r = RunGpunode(path + " --help");
    EXPECT_EQ(r.exit_code, 0) << path << ": " << r.out;
    HelpCommand cmd = ParseHelp(path, r.out);
    for (const std::string& sub : cmd.subcommands) {
      if (path.empty() && sub == "oci-runtime") continue;
      todo.push_back(path.empty() ? sub : path + " " + sub);
    }
    out.push_back(std::move(cmd));
  }
  return out;
}

class CliCompletionTest : public ::gpunode::testing::TempDirTest {
 protected:
  // The script of `shell`, written to a file.
  std::string Script(const std::string& shell) {
    Result r = RunGpunode("completion " + shell + " > " + Path("gpunode." + shell) + " 2>" + Path("err"));
    EXPECT_EQ(r.exit_code, 0) << Read("err");
    EXPECT_EQ(Read("err"), "");
    return Path("gpunode." + shell);
  }
  // Runs `_gpunode` in bash on the words of a command line (the last one being completed).
  std::string BashComplete(const std::string& script, const std::string& words) {
    std::ofstream(Path("drive.sh")) << "source " << script << "\nCOMP_WORDS=(" << words
                                    << ")\nCOMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n_gpunode\n"
                                       "printf '%s\\n' \"${COMPREPLY[@]}\"\n";
    Result r = RunShell("bash " + Path("drive.sh"));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return r.out;
  }
  static bool Have(const std::string& program) {
    return RunShell("command -v " + program + " >/dev/null").exit_code == 0;
  }
};

TEST_F(CliCompletionTest, BashCompletionAndManPageListEveryCommandAndOptionOfHelp) {
  const std::vector<HelpCommand> help = AllHelp();
  ASSERT_GT(help.size(), 20u);
  const std::string script = Script("bash");
  // One bash run checks every name against the script's own tables.
  std::ostringstream check;
  check << "source " << script << "\n";
  size_t names = 0;
  for (const HelpCommand& cmd : help) {
    for (const std::string& sub : cmd.subcommands) {
      check << "[[ \" $(_gpunode_subcommands '" << cmd.path << "') \" == *' " << sub
            << " '* ]] || echo \"MISSING command '" << cmd.path << "' " << sub << "\"\n";
      ++names;
    }
    for (const std::string& opt : cmd.options) {
      check << "[[ \" $(_gpunode_options '" << cmd.path << "') \" == *' " << opt
            << " '* ]] || echo \"MISSING option '" << cmd.path << "' " << opt << "\"\n";
      ++names;
    }
  }
  ASSERT_GT(names, 100u);
  std::ofstream(Path("check.sh")) << check.str();
  Result r = RunShell("bash " + Path("check.sh"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "");

  // The man page: a section per command, holding its options (roff's \- read as -).
  Result man = RunGpunode("man");
  ASSERT_EQ(man.exit_code, 0) << man.out;
  std::string text;
  for (size_t i = 0; i < man.out.size(); ++i) {
    if (man.out.compare(i, 2, "\\-") == 0) {
      text += '-';
      ++i;
    } else if (man.out.compare(i, 2, "\\f") == 0) {
      i += 2;  // \fB, \fR, \fI
    } else {
      text += man.out[i];
    }
  }
  auto section = [&](const std::string& path) -> std::string {
    const std::string head = path.empty() ? ".SH GLOBAL OPTIONS\n" : ".SS \"gpunode " + path + "\"\n";
    const size_t at = text.find(head);
    if (at == std::string::npos) return "";
    const size_t end = text.find("\n.S", at + head.size());
    return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
  };
  for (const HelpCommand& cmd : help) {
    const std::string s = section(cmd.path);
    ASSERT_NE(s, "") << "no man page section for \"" << cmd.path << "\"";
    for (const std::string& opt : cmd.options) {
      EXPECT_THAT(s, HasSubstr(opt)) << "man page section \"" << cmd.path << "\"";
    }
  }
  for (const char* head : {".SH NAME\n", ".SH SYNOPSIS\n", ".SH DESCRIPTION\n", ".SH COMMANDS\n", ".SH EXIT STATUS\n"}) {
    EXPECT_THAT(text, HasSubstr(head));
  }
  EXPECT_THAT(text, HasSubstr(".TH GPUNODE 1 "));
}

TEST_F(CliCompletionTest, BashScriptIsValidAndCompletesCommandsOptionsAndValues) {
  const std::string script = Script("bash");
  Result syntax = RunShell("bash -n " + script);
  EXPECT_EQ(syntax.exit_code, 0) << syntax.out;
  EXPECT_EQ(BashComplete(script, "gpunode do"), "doctor\n");
  EXPECT_EQ(BashComplete(script, "gpunode help ru"), "runtime\n");
  EXPECT_EQ(BashComplete(script, "gpunode cdi gen"), "generate\n");
  EXPECT_EQ(BashComplete(script, "gpunode --simulate dgx-h200 cdi gen"), "generate\n");
  EXPECT_EQ(BashComplete(script, "gpunode cdi generate --device-name"), "--device-name-strategy\n");
  EXPECT_EQ(BashComplete(script, "gpunode cdi generate --device-name-strategy u"), "uuid\n");
  EXPECT_EQ(BashComplete(script, "gpunode runtime configure --runtime c"), "containerd\ncrio\n");
  EXPECT_EQ(BashComplete(script, "gpunode --color = a"), "auto\nalways\n");  // --color=a, split at '='
  EXPECT_THAT(BashComplete(script, "gpunode --simulate dgx"), HasSubstr("dgx-h200\n"));
  EXPECT_EQ(BashComplete(script, "gpunode completion z"), "zsh\n");
  // Global options after a command; a file argument completes files.
  EXPECT_THAT(BashComplete(script, "gpunode doctor --host"), HasSubstr("--host-root"));
  std::ofstream(Path("spec-x.yaml")) << "x";
  EXPECT_EQ(BashComplete(script, "gpunode cdi validate " + Path("spec-")), Path("spec-x.yaml") + "\n");
}

TEST_F(CliCompletionTest, ZshScriptParses) {
  if (!Have("zsh")) GTEST_SKIP() << "zsh is not installed (scripts/install-deps.sh installs it)";
  const std::string script = Script("zsh");
  Result r = RunShell("zsh -n " + script);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  // Loaded in a zsh with compinit, it registers itself for gpunode.
  Result loaded = RunShell("zsh -f -c 'autoload -U compinit && compinit -u -D && source " + script +
                           " && print -r -- ${_comps[gpunode]}'");
  EXPECT_EQ(loaded.exit_code, 0) << loaded.out;
  EXPECT_THAT(loaded.out, HasSubstr("_gpunode"));
}

TEST_F(CliCompletionTest, FishScriptParsesAndCompletes) {
  if (!Have("fish")) GTEST_SKIP() << "fish is not installed (scripts/install-deps.sh installs it)";
  const std::string script = Script("fish");
  Result r = RunShell("fish --no-execute " + script);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  auto complete = [&](const std::string& line) {
    Result c = RunShell("HOME=" + dir_.string() + " fish --no-config -c 'source " + script + "; complete -C\"" + line +
                        "\"'");
    EXPECT_EQ(c.exit_code, 0) << c.out;
    return c.out;
  };
  EXPECT_THAT(complete("gpunode do"), HasSubstr("doctor\t"));
  EXPECT_THAT(complete("gpunode cdi gen"), HasSubstr("generate\t"));
  EXPECT_THAT(complete("gpunode runtime configure --runtime c"), HasSubstr("containerd"));
  EXPECT_THAT(complete("gpunode cdi generate --device-"), HasSubstr("--device-name-strategy"));
  EXPECT_THAT(complete("gpunode cdi generate --device-"), Not(HasSubstr("--runtime-name")));
}

TEST_F(CliCompletionTest, ManPageIsCleanRoff) {
  if (!Have("groff")) GTEST_SKIP() << "groff is not installed";
  Result r = RunShell(std::string(GPUNODE_BIN_DIR) + "/gpunode man | groff -man -Tutf8 -ww -z");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "");  // no warnings
}

TEST_F(CliCompletionTest, CompletionRefusesOutputFormatAndUnknownShells) {
  Result r = RunGpunode("-o json completion bash");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("prints no report"));
  Result bad = RunGpunode("completion tcsh");
  EXPECT_EQ(bad.exit_code, 3) << bad.out;
}

}  // namespace
