// Internals of gpunode-as-nvidia-ctk, shared by ctk_cmd.cc (the command line), ctk_commands.cc (the
// command and flag table: what each maps to) and ctk_native.cc (what gpunode runs itself).
#ifndef GPUNODE_CLI_CTK_INTERNAL_H_
#define GPUNODE_CLI_CTK_INTERNAL_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "src/base/status.h"

namespace gpunode::cli::ctk {

enum class FlagKind {
  kMapped,   // read by the command's run(): maps to gpunode's flag or behaviour
  kNoop,     // changes nothing gpunode does: one "does not apply" note on stderr, the command runs
  kRefused,  // asks for something gpunode does not do: the "does not apply" line, exit 3, nothing done
};

struct FlagSpec {
  std::vector<std::string> names;  // without dashes, NVIDIA's first: {"nvidia-set-as-default", "set-as-default"}
  bool value = false;              // takes a value (string or list); false: a boolean (--flag, --flag=false)
  bool list = false;               // repeatable, and comma-separated values split (urfave/cli slices)
  std::vector<std::string> env;    // NVIDIA's environment variables for it
  std::string meaning;             // kMapped: what gpunode does with it; otherwise why it does not apply
  FlagKind kind = FlagKind::kMapped;
};

// One nvidia-ctk command line, read.
struct Call {
  std::string path;  // "runtime configure"
  std::map<std::string, std::vector<std::string>> flags;    // the command's, by first name; booleans "true"/"false"
  std::map<std::string, std::vector<std::string>> globals;  // NVIDIA's global flags
  std::map<std::string, std::string> gpunode;               // gpunode's: host-root, simulate, output, explain
  std::vector<std::string> args;                            // positional arguments
  bool quiet = false;
  std::string host_root = "/";
  std::string output_format = "table";

  bool Has(const std::string& name) const;
  std::string Value(const std::string& name, const std::string& fallback = "") const;
  std::vector<std::string> Values(const std::string& name) const;
  StatusOr<bool> Bool(const std::string& name) const;  // false when not given
};

// What a command line comes to.
struct Plan {
  std::vector<std::string> notes;         // "does not apply" notes (kNoop), printed on stderr
  std::vector<std::string> gpunode_args;  // gpunode's command line (after its global flags)
  std::function<int()> native;            // or: what gpunode runs itself, returning the exit code
  std::string native_description;         // ... described for --explain and --debug
};

struct CommandSpec {
  std::string path;                  // "cdi generate"; "" is nvidia-ctk itself
  std::vector<std::string> aliases;  // full paths: "config create-default"
  std::string summary;               // what gpunode does for it
  std::vector<FlagSpec> flags;
  // Leaf commands: the plan, or an error (FailedPrecondition: a "does not apply" line; else bad input).
  std::function<StatusOr<Plan>(const Call&)> run;
  bool takes_args = false;
};

const std::vector<CommandSpec>& Commands();  // ctk_commands.cc

// "nvidia-ctk PATH WHAT does not apply to gpunode: WHY"
std::string DoesNotApply(const std::string& path, const std::string& what, const std::string& why);

// ctk_native.cc
int CdiList(const Call& call, const std::vector<std::string>& spec_dirs);
int CreateDeviceNodes(const Call& call, const std::string& root, const std::string& dev_root, bool control,
                      bool load_modules, bool dry_run);
int CreateDevCharSymlinks(const Call& call, const std::string& driver_root, const std::string& dev_char_path,
                          bool dry_run);
// `nvidia-ctk config [--set K=V]... [--in-place | -o FILE]` and `config default`.
StatusOr<Plan> ConfigPlan(const Call& call, bool default_only);

}  // namespace gpunode::cli::ctk

#endif  // GPUNODE_CLI_CTK_INTERNAL_H_
