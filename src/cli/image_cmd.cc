// `gpunode image config REF`: an image's config (env, labels, platform) read from its registry
// (src/image/registry.h; docs/images.md). A thin command: the lookup is FetchFromRegistry.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/base/terminal.h"
#include "src/cli/common.h"
#include "src/cli/image_source.h"
#include "src/compat/image_ref.h"
#include "src/image/registry.h"

namespace gpunode::cli {
namespace {

struct ImageConfigFlags {
  std::string ref;
  std::string platform = "linux/amd64";
  RegistryFlags registry;
  double timeout_s = 15;
};

nlohmann::ordered_json ConfigJson(const image::ImageConfig& c) {
  nlohmann::ordered_json j;
  j["reference"] = c.reference;
  j["digest"] = c.digest;
  j["configDigest"] = c.config_digest;
  j["os"] = c.os;
  j["architecture"] = c.architecture;
  if (!c.variant.empty()) j["variant"] = c.variant;
  j["env"] = c.env;
  j["labels"] = nlohmann::ordered_json::object();
  for (const auto& [k, v] : c.labels) j["labels"][k] = v;
  j["source"] = c.source;
  return j;
}

int RunImageConfig(const GlobalOptions& global, const ImageConfigFlags& f) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  auto ref = compat::ParseImageRef(f.ref);
  if (!ref.ok()) {
    PrintError(ref.status());
    return kExitUsage;
  }
  auto o = RegistryOptionsFrom(f.registry, f.platform, f.timeout_s);
  if (!o.ok()) {
    PrintError(o.status());
    return kExitUsage;
  }
  auto cfg = image::FetchFromRegistry(*ref, *o);
  if (!cfg.ok()) {
    PrintError(cfg.status());
    return kExitFailed;
  }
  if (*format != OutputFormat::kTable) {
    PrintDocument(ConfigJson(*cfg), *format);
    return kExitOk;
  }
  // The image's own text (env, labels, platform) is the tenant's: escapes shown, not obeyed.
  std::cout << "Reference:     " << TerminalSafe(cfg->reference) << "\n"
            << "Digest:        " << cfg->digest << "\n"
            << "Config digest: " << cfg->config_digest << "\n"
            << "Platform:      " << TerminalSafe(cfg->os) << "/" << TerminalSafe(cfg->architecture)
            << (cfg->variant.empty() ? "" : "/" + TerminalSafe(cfg->variant)) << "\n"
            << "Source:        " << TerminalSafe(cfg->source) << "\n"
            << "Env:\n";
  for (const std::string& e : cfg->env) std::cout << "  " << TerminalSafe(e) << "\n";
  std::cout << "Labels:\n";
  for (const auto& [k, v] : cfg->labels) std::cout << "  " << TerminalSafe(k) << "=" << TerminalSafe(v) << "\n";
  return kExitOk;
}

}  // namespace

void AddImageCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  CLI::App* image = app.add_subcommand("image", "Container images: read an image's config from its registry");
  image->require_subcommand(1);
  auto f = std::make_shared<ImageConfigFlags>();
  CLI::App* config = image->add_subcommand(
      "config", "Print an image's env, labels and platform, read from its registry (no layer is fetched)");
  config->add_option("REF", f->ref, "Image reference: [registry/]repository[:tag][@digest]")->required();
  config->add_option("--platform", f->platform, "The entry of a multi-platform image: os/arch[/variant]")
      ->capture_default_str();
  AddRegistryFlags(config, f->registry);
  config->add_option("--timeout", f->timeout_s, "Seconds for the whole lookup")->capture_default_str();
  config->callback([&global, f, exit_code] { *exit_code = RunImageConfig(global, *f); });
}

}  // namespace gpunode::cli
