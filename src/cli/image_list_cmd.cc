// gpunode image list [REF...]: the images in the node's own stores — containerd (its API on the
// socket, every namespace), Docker (its API on the socket), containers-storage (podman/CRI-O's
// files) — with each image's platform, CUDA_VERSION and NVIDIA_REQUIRE_CUDA from its config
// (src/image/store_*.h). With references, only those, each looked up in every store asked.
// Sockets and folders are host paths, read through --host-root. User doc: docs/images.md.
#include <unistd.h>

#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/terminal.h"
#include "src/cli/common.h"
#include "src/cli/image_source.h"
#include "src/compat/image_ref.h"
#include "src/image/store_containerd.h"
#include "src/image/store_containers_storage.h"
#include "src/image/store_docker.h"

namespace gpunode::cli {

void AddImageListCommand(CLI::App& app, GlobalOptions& global, int* exit_code);

namespace {

struct ImageListFlags {
  std::vector<std::string> refs;
  std::string store;  // "" = all three
  std::string containerd_socket = image::kContainerdSocket;
  std::string containerd_namespace;
  std::string docker_socket = image::kDockerSocket;
  std::string storage_root;
  std::string platform = "linux/amd64";
  double timeout_s = 2;
};

// One store's answer.
struct StoreAnswer {
  std::string kind;
  std::string name;
  Status status;  // the store's own error (List, or the first Find that failed for the store)
  std::vector<image::StoredImage> images;
  std::vector<std::string> not_found;  // references it lacks (their messages)
};

std::string PlatformOf(const image::ImageConfig& c) {
  std::string p = absl::StrCat(c.os.empty() ? "?" : c.os, "/", c.architecture.empty() ? "?" : c.architecture);
  if (!c.variant.empty()) absl::StrAppend(&p, "/", c.variant);
  return p;
}

nlohmann::ordered_json ImageJson(const image::StoredImage& si) {
  nlohmann::ordered_json j;
  j["names"] = si.names;
  if (!si.id.empty()) j["id"] = si.id;
  if (!si.namespace_name.empty()) j["namespace"] = si.namespace_name;
  if (!si.error.empty()) {
    j["error"] = si.error;
    return j;
  }
  const image::ImageConfig& c = si.config;
  j["reference"] = c.reference;
  j["digest"] = c.digest;
  j["configDigest"] = c.config_digest;
  j["platform"] = PlatformOf(c);
  j["source"] = c.source;
  j["env"] = c.env;
  j["labels"] = c.labels;
  return j;
}

std::string Shown(std::string s, size_t width) {
  s = TerminalSafe(s);
  if (s.size() > width) s = s.substr(0, width - 3) + "...";
  return s;
}

void PrintTable(const std::vector<StoreAnswer>& answers) {
  std::cout << std::left << std::setw(20) << "STORE" << " " << std::setw(56) << "IMAGE" << " " << std::setw(14)
            << "PLATFORM" << " " << std::setw(13) << "CUDA_VERSION" << " "
            << "NVIDIA_REQUIRE_CUDA\n";
  for (const StoreAnswer& a : answers) {
    for (const image::StoredImage& si : a.images) {
      std::string store = a.kind;
      if (!si.namespace_name.empty()) store += " (" + si.namespace_name + ")";
      std::string name = si.names.empty() ? si.id : si.names.front();
      if (!si.config.reference.empty()) name = si.config.reference;
      std::cout << std::setw(20) << Shown(store, 20) << " " << std::setw(56) << Shown(name, 56) << " ";
      if (!si.error.empty()) {
        std::cout << "error: " << TerminalSafe(si.error) << "\n";
        continue;
      }
      std::cout << std::setw(14) << Shown(PlatformOf(si.config), 14) << " " << std::setw(13)
                << Shown(image::EnvValue(si.config, "CUDA_VERSION").value_or("-"), 13) << " "
                << Shown(image::EnvValue(si.config, "NVIDIA_REQUIRE_CUDA").value_or("-"), 200) << "\n";
    }
  }
  for (const StoreAnswer& a : answers) {
    if (!a.status.ok()) std::cout << TerminalSafe(std::string(a.status.message())) << "\n";
    for (const std::string& m : a.not_found) std::cout << TerminalSafe(m) << "\n";
  }
}

std::vector<std::unique_ptr<image::ImageStore>> OpenStores(const HostFs& fs, const ImageListFlags& f,
                                                           const image::StoreOptions& so, Status* error) {
  StoreFlags sf{f.store, f.containerd_socket, f.containerd_namespace, f.docker_socket, f.storage_root};
  auto stores = OpenNodeStores(fs, sf, so);
  if (!stores.ok()) {
    *error = stores.status();
    return {};
  }
  return *std::move(stores);
}

int Run(const GlobalOptions& global, const ImageListFlags& f) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  auto platform = image::ParsePlatform(f.platform);
  if (!platform.ok()) {
    PrintError(platform.status());
    return kExitUsage;
  }
  if (!(f.timeout_s > 0 && f.timeout_s <= 600)) {
    PrintError("--timeout: expected seconds in (0, 600]");
    return kExitUsage;
  }
  std::vector<compat::ImageRef> refs;
  for (const std::string& r : f.refs) {
    auto ref = compat::ParseImageRef(r);
    if (!ref.ok()) {
      PrintError(ref.status());
      return kExitUsage;
    }
    refs.push_back(*ref);
  }
  auto fs = HostFs::Open(global.host_root);
  if (!fs.ok()) {
    PrintError(fs.status());
    return kExitUsage;
  }
  image::StoreOptions so;
  so.platform = *platform;
  so.timeout = absl::Milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  Status open_error;
  auto stores = OpenStores(*fs, f, so, &open_error);
  if (!open_error.ok()) {
    PrintError(open_error);
    return kExitUsage;
  }

  int rc = kExitOk;
  std::vector<StoreAnswer> answers;
  std::vector<bool> found(refs.size(), false);
  for (auto& store : stores) {
    StoreAnswer a;
    a.kind = store->Kind();
    a.name = store->Name();
    if (refs.empty()) {
      auto list = store->List();
      if (list.ok()) {
        a.images = std::move(*list);
      } else {
        a.status = list.status();
      }
    } else {
      for (size_t i = 0; i < refs.size(); ++i) {
        auto c = store->Find(refs[i]);
        if (c.ok()) {
          image::StoredImage si;
          si.names.push_back(c->reference);
          // containerd's namespace, as the store names it in the source ("image config (containerd, k8s.io)").
          const std::string prefix = "image config (containerd, ";
          if (c->source.rfind(prefix, 0) == 0) si.namespace_name = c->source.substr(prefix.size(), c->source.size() - prefix.size() - 1);
          si.config = std::move(*c);
          a.images.push_back(std::move(si));
          found[i] = true;
        } else if (absl::IsNotFound(c.status())) {
          a.not_found.push_back(std::string(c.status().message()));
        } else {
          a.status = c.status();
          break;  // the store itself failed: the next references would fail the same way
        }
      }
    }
    // A store that is not on this node is a note when all were asked, a failure when named.
    if (!a.status.ok() && (!f.store.empty() || !absl::IsUnavailable(a.status))) rc = kExitFailed;
    answers.push_back(std::move(a));
  }
  std::vector<std::string> missing;
  for (size_t i = 0; i < refs.size(); ++i) {
    if (!found[i]) missing.push_back(f.refs[i]);
  }
  if (!missing.empty()) rc = kExitFailed;

  if (*format == OutputFormat::kTable) {
    PrintTable(answers);
  } else {
    nlohmann::ordered_json doc;
    doc["apiVersion"] = "gpunode/v1";
    doc["kind"] = "ImageList";
    doc["platform"] = platform->ToString();
    doc["stores"] = nlohmann::ordered_json::array();
    for (const StoreAnswer& a : answers) {
      nlohmann::ordered_json s;
      s["store"] = a.kind;
      s["name"] = a.name;
      if (!a.status.ok()) {
        s["error"] = std::string(a.status.message());
        s["code"] = absl::StatusCodeToString(a.status.code());
      }
      s["images"] = nlohmann::ordered_json::array();
      for (const image::StoredImage& si : a.images) s["images"].push_back(ImageJson(si));
      if (!refs.empty()) s["notFound"] = a.not_found;
      doc["stores"].push_back(std::move(s));
    }
    if (!refs.empty()) doc["missing"] = missing;
    PrintDocument(doc, *format);
  }
  for (const std::string& m : missing) {
    PrintError(absl::StrCat("image ", m, ": in none of the stores asked (",
                            absl::StrJoin(answers, ", ", [](std::string* out, const StoreAnswer& a) { out->append(a.name); }),
                            ")"));
  }
  return rc;
}

}  // namespace

// `image` is the parent of `image list` and of `image config` (the registry's, image_cmd.cc):
// whichever registers first makes it.
void AddImageListCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto existing = app.get_subcommands([](CLI::App* a) { return a->get_name() == "image"; });
  CLI::App* parent = existing.empty() ? nullptr : existing.front();
  if (parent == nullptr) {
    parent = app.add_subcommand("image", "Container images' configs (env, labels, platform) from the node's stores");
    parent->require_subcommand(1);
  }
  auto f = std::make_shared<ImageListFlags>();
  CLI::App* cmd = parent->add_subcommand(
      "list", "The images in this node's containerd, Docker and podman/CRI-O stores, with their CUDA facts");
  cmd->add_option("REF", f->refs, "Only these images (e.g. nvcr.io/nvidia/pytorch:25.08-py3), looked up in each store");
  cmd->add_option("--store", f->store, "Only this store (default: all three)")
      ->check(CLI::IsMember({"containerd", "docker", "containers-storage"}));
  cmd->add_option("--containerd-socket", f->containerd_socket,
                  "containerd's socket (k3s and RKE2: /run/k3s/containerd/containerd.sock)")
      ->capture_default_str();
  cmd->add_option("--containerd-namespace", f->containerd_namespace,
                  "Only this containerd namespace (default: k8s.io, moby, default, then the others)");
  cmd->add_option("--docker-socket", f->docker_socket, "Docker's socket")->capture_default_str();
  cmd->add_option("--storage-root", f->storage_root,
                  "containers-storage graph root (default: storage.conf's graphroot, else /var/lib/containers/storage)");
  cmd->add_option("--platform", f->platform, "The image of this platform from a multi-platform index (OS/ARCH[/VARIANT])")
      ->capture_default_str();
  cmd->add_option("--timeout", f->timeout_s, "Seconds to wait for each answer of a store's socket")->capture_default_str();
  cmd->footer(
      "Exit codes: 0 ok; 2 a store failed, a store named by --store is not there, or a REF is in none of the\n"
      "stores; 3 usage errors. A store that is not on this node is a note when all are asked.\n"
      "Docs: docs/images.md");
  cmd->callback([&global, f, exit_code] { *exit_code = Run(global, *f); });
}

}  // namespace gpunode::cli
