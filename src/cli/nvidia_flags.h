// NVIDIA's command-line flags and environment variables on gpunode's commands, so that a
// DaemonSet written for NVIDIA's k8s-device-plugin, gpu-feature-discovery or dcgm-exporter starts
// unchanged with gpunode's image (docs/nvidia-flags.md lists every one and what it maps to).
//
// NVIDIA's programs parse with urfave/cli v2: a flag may have several names and several
// environment variables (the first one that is set wins, the flag wins over all of them), and a
// boolean is bare (`--flag`) or takes its value after '=' (`--flag=false`), read as Go's
// strconv.ParseBool reads it. NvidiaFlags registers such settings on a CLI11 command with the
// same names, resolves flag-then-environment after parsing, checks the syntax of booleans and
// numbers, and, for settings gpunode has nothing to do with, produces one "does not apply" note
// each that the command logs once at start.
#ifndef GPUNODE_CLI_NVIDIA_FLAGS_H_
#define GPUNODE_CLI_NVIDIA_FLAGS_H_

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "src/base/status.h"

namespace gpunode::cli {

enum class NvidiaKind {
  kBool,        // bare or --flag=VALUE; Go's ParseBool
  kString,      // --flag VALUE or --flag=VALUE
  kInt,         // an integer (Go's strconv.Atoi)
  kFloat,       // a number (Go's ParseFloat)
  kStringList,  // repeatable; the environment's value is comma-separated (urfave's StringSlice)
};

struct NvidiaSetting {
  // CLI11 names, as NVIDIA spells them: "-x,--xid-count-window-size". The first long name is the
  // setting's key for Value().
  std::string names;
  std::vector<std::string> env;  // NVIDIA's EnvVars, in their order of precedence
  NvidiaKind kind = NvidiaKind::kString;
  std::string help;
  // Empty: the command wires the setting itself (Value()). Otherwise why it does not apply to
  // gpunode; given on the command line or in the environment, it is noted once and ignored.
  std::string not_applicable;
};

class NvidiaFlags {
 public:
  // `origin` names NVIDIA's program in help texts: "dcgm-exporter".
  explicit NvidiaFlags(std::string origin) : origin_(std::move(origin)) {}
  NvidiaFlags(const NvidiaFlags&) = delete;
  NvidiaFlags& operator=(const NvidiaFlags&) = delete;

  // Registers the option on `cmd`; its help text names the variables.
  CLI::Option* Add(CLI::App* cmd, NvidiaSetting setting);

  // After parsing. The value of setting `key` (its first long name without dashes): the flag's,
  // else the first of its variables that is set and not empty, else nullopt. A list's values are
  // joined with ','. `source` (if not null) gets "--name" or the variable's name.
  std::optional<std::string> Value(const std::string& key, std::string* source = nullptr) const;
  // The same read as a boolean (Go's ParseBool); an invalid value is InvalidArgument naming it.
  StatusOr<std::optional<bool>> Bool(const std::string& key) const;

  // Checks the syntax of every setting that has a value (booleans, integers, numbers) and
  // returns one note per not-applicable setting that was given (a boolean only when true: false
  // asks for nothing), in registration order:
  //   "--fake-gpus=true does not apply: <why>; ignored"
  //   "NAMESPACE=\"gpu-operator\" (--namespace) does not apply: <why>; ignored"
  StatusOr<std::vector<std::string>> Check() const;

  // A note for a setting the command found not to apply by its value (e.g. a discovery strategy
  // other than NVML), in the same words.
  std::string Note(const std::string& key, const std::string& why) const;

 private:
  struct Entry {
    NvidiaSetting setting;
    std::string key;
    std::string value;
    std::vector<std::string> list;
    CLI::Option* option = nullptr;
  };
  const Entry* Find(const std::string& key) const;
  std::string Describe(const Entry& e) const;

  std::string origin_;
  std::deque<Entry> entries_;  // stable addresses: CLI11 writes into them
};

}  // namespace gpunode::cli

#endif  // GPUNODE_CLI_NVIDIA_FLAGS_H_
