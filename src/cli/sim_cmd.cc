// gpunode sim: the simulated nodes (list the built-in profiles, write a fixture host root).
#include <iostream>

#include "absl/strings/str_format.h"
#include "sim/support/profile.h"
#include "src/cli/common.h"

namespace gpunode::cli {
namespace {

int RunList(const GlobalOptions& global) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  nlohmann::json items = nlohmann::json::array();
  std::string table;
  for (const std::string& name : sim::BuiltinProfileNames()) {
    auto source = sim::ResolveProfile(name);
    if (!source.ok()) continue;
    auto profile = sim::ParseProfile(source->text, name + " (built-in)");
    if (!profile.ok()) {
      PrintError(profile.status());
      return kExitUsage;
    }
    items.push_back({{"name", name}, {"description", profile->description}, {"gpus", profile->gpus.size()}});
    table += absl::StrFormat("  %-22s %2d GPU%s  %s\n", name, profile->gpus.size(),
                             profile->gpus.size() == 1 ? " " : "s", profile->description);
  }
  if (*format == OutputFormat::kTable) {
    std::cout << "Built-in simulated nodes (use with --simulate NAME, or give a profile file):\n" << table;
  } else {
    PrintDocument({{"apiVersion", "gpunode/v1"}, {"kind", "ProfileList"}, {"items", items}}, *format);
  }
  return kExitOk;
}

int RunHostRoot(const std::string& ref, const std::string& dir) {
  auto source = sim::ResolveProfile(ref);
  if (!source.ok()) {
    PrintError(source.status());
    return kExitUsage;
  }
  auto profile = sim::ParseProfile(source->text, source->file_path.empty() ? source->name : source->file_path);
  if (!profile.ok()) {
    PrintError(profile.status());
    return kExitUsage;
  }
  if (Status st = sim::WriteHostRoot(*profile, dir); !st.ok()) {
    PrintError(st);
    return kExitUsage;
  }
  std::cout << "wrote the host root of " << source->name << " to " << dir << "\n";
  return kExitOk;
}

}  // namespace

void AddSimCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("sim", "Simulated GPU nodes: list the built-in profiles, write host roots");
  cmd->require_subcommand(1);
  cmd->footer(
      "Any command runs against a simulated node with --simulate PROFILE, e.g.\n"
      "  gpunode --simulate broken-fallen-gpu doctor\n"
      "Profiles are documented in docs/profiles.md.");
  CLI::App* list = cmd->add_subcommand("list", "List the built-in node profiles");
  list->callback([&global, exit_code] { *exit_code = RunList(global); });
  auto ref = std::make_shared<std::string>();
  auto dir = std::make_shared<std::string>();
  CLI::App* root = cmd->add_subcommand(
      "hostroot", "Write the fixture host root of a profile (proc, sys, dev as plain files) for --host-root");
  root->add_option("PROFILE", *ref, "Built-in profile name or profile file")->required();
  root->add_option("DIR", *dir, "Directory to write (created)")->required();
  root->callback([ref, dir, exit_code] { *exit_code = RunHostRoot(*ref, *dir); });
}

}  // namespace gpunode::cli
