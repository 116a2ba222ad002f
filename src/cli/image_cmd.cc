// `gpunode image config REF`: an image's config (env, labels, platform) read from its registry
// (src/image/registry.h; docs/images.md). A thin command: the lookup is FetchFromRegistry.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/base/terminal.h"
#include "src/cli/common.h"
#include "src/compat/image_ref.h"
#include "src/image/registry.h"

namespace gpunode::cli {
namespace {

struct ImageConfigFlags {
  std::string ref;
  std::string platform = "linux/amd64";
  std::string ca_file;
  std::string auth;       // USER:PASSWORD
  std::string auth_file;  // a file holding USER:PASSWORD
  std::string docker_config;
  bool insecure = false;
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
  if (!(f.timeout_s > 0 && f.timeout_s <= 600)) {
    PrintError(absl::StrCat("--timeout ", f.timeout_s, ": not between 0 and 600 seconds"));
    return kExitUsage;
  }
  image::RegistryOptions o;
  o.platform = f.platform;
  o.ca_file = f.ca_file;
  o.plain_http = f.insecure;
  o.docker_config_path = f.docker_config;
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  if (auto p = image::ParsePlatform(f.platform); !p.ok()) {
    PrintError(p.status());
    return kExitUsage;
  }
  if (!f.auth.empty() && !f.auth_file.empty()) {
    PrintError("--registry-auth and --registry-auth-file: give one of them");
    return kExitUsage;
  }
  if (!f.auth.empty()) {
    auto c = image::ParseUserPassword(f.auth, "--registry-auth");
    if (!c.ok()) {
      PrintError(c.status());
      return kExitUsage;
    }
    o.credential = *c;
  } else if (!f.auth_file.empty()) {
    std::ifstream in(f.auth_file, std::ios::binary);
    std::string text(4097, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    if (!in && !in.eof()) {
      PrintError(absl::StrCat("--registry-auth-file ", f.auth_file, ": cannot be read"));
      return kExitUsage;
    }
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > 4096) {
      PrintError(absl::StrCat("--registry-auth-file ", f.auth_file, ": larger than 4096 bytes"));
      return kExitUsage;
    }
    auto c = image::ParseUserPassword(text, absl::StrCat("--registry-auth-file ", f.auth_file));
    if (!c.ok()) {
      PrintError(c.status());
      return kExitUsage;
    }
    o.credential = *c;
  }
  auto cfg = image::FetchFromRegistry(*ref, o);
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
  config->add_option("--registry-ca", f->ca_file, "PEM CA certificates trusted besides the system's");
  config->add_option("--registry-auth", f->auth, "USER:PASSWORD for the registry (visible to ps; prefer the file)");
  config->add_option("--registry-auth-file", f->auth_file, "A file holding USER:PASSWORD for the registry");
  config->add_option("--docker-config", f->docker_config,
                     "Docker config file with auths (default $DOCKER_CONFIG/config.json, ~/.docker/config.json)");
  config->add_flag("--insecure-registry", f->insecure, "Speak plain HTTP to the registry (a local test registry)");
  config->add_option("--timeout", f->timeout_s, "Seconds for the whole lookup")->capture_default_str();
  config->callback([&global, f, exit_code] { *exit_code = RunImageConfig(global, *f); });
}

}  // namespace gpunode::cli
