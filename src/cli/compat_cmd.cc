// gpunode compat: will this image / CUDA / framework run on this node (or on driver X with
// GPU Y), and if not, what is the smallest fix. The rules live in src/compat; this file only
// turns flags into inputs, reads the node when --driver/--gpu are missing, and prints.
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "src/base/terminal.h"
#include "src/cli/common.h"
#include "src/cli/image_source.h"
#include "src/compat/coverage.h"
#include "src/compat/dataset.h"
#include "src/compat/engine.h"
#include "src/compat/gpu_catalog.h"
#include "src/compat/image_facts.h"
#include "src/compat/refresh.h"
#include "src/compat/image_ref.h"
#include "src/compat/requirement.h"

namespace gpunode::cli {
namespace {

constexpr int kExitIncompatible = 1;

struct CompatOptions {
  std::string image;
  std::string cuda;
  std::string torch;
  std::string driver;
  std::vector<std::string> gpus;
  std::string data;
  ImageSourceFlags image_source;
  std::string refresh_from;  // compat data --refresh-from-images FILE
};

StatusOr<compat::CompatData> LoadData(const std::string& path) {
  if (path.empty()) return compat::LoadBuiltin();
  auto data = compat::LoadFile(path);
  if (!data.ok() && data.status().code() == absl::StatusCode::kInvalidArgument) {
    return Annotate(data.status(), "--data");
  }
  return data;
}

// Fills the missing parts of `target` (driver and/or GPUs) from this node or the simulated one.
// A missing driver is an error (the command cannot decide without one); missing GPUs are not.
Status FillFromNode(const GlobalOptions& global, const compat::CompatData& data,
                    bool need_driver, bool need_gpus, compat::NodeTarget& target) {
  auto session = NodeSession::Open(global);
  if (!session.ok()) {
    if (need_driver) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot read this node (", session.status().message(),
          "); pass the driver with --driver VERSION (and the GPU with --gpu NAME)"));
    }
    return absl::OkStatus();
  }
  (*session)->probe_options().init_cuda = false;
  auto inv = (*session)->Inventory();
  if (!inv.ok()) {
    if (need_driver) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot read this node (", inv.status().message(),
                       "); pass the driver with --driver VERSION"));
    }
    return absl::OkStatus();
  }
  target.origin = (*session)->simulated()
                      ? absl::StrCat("simulated node ", *(*session)->simulated())
                      : std::string("this node");
  if (need_driver) {
    if (!inv->driver.driver_version) {
      std::string why = inv->driver.status.ok() ? std::string("NVML reported no driver version")
                                                : std::string(inv->driver.status.message());
      return absl::FailedPreconditionError(absl::StrCat(
          "this node has no usable NVIDIA driver (", why,
          "); pass the driver to check against with --driver VERSION, e.g. --driver 535.104.05"));
    }
    target.driver = inv->driver.driver_version;
    target.cuda_driver = inv->driver.cuda_version;
  }
  if (need_gpus) {
    compat::GpuCatalog catalog(data);
    // One entry per distinct model: eight H200s answer like one.
    for (const gpu::GpuInfo& g : inv->driver.gpus) {
      compat::GpuRef ref = catalog.FromNode(g.name, g.pci_device_id, g.cc_major, g.cc_minor);
      if (g.brand) ref.brand = compat::BrandName(*g.brand);
      bool seen = false;
      for (const compat::GpuRef& r : target.gpus) {
        seen = seen || (r.name == ref.name && r.pci_device_id == ref.pci_device_id && r.cc == ref.cc);
      }
      if (!seen) target.gpus.push_back(std::move(ref));
    }
  }
  return absl::OkStatus();
}

// Builds the target from --driver/--gpu, reading the node for what is missing.
// Returns an exit code other than -1 on error (already printed).
int BuildTarget(const GlobalOptions& global, const CompatOptions& o,
                const compat::CompatData& data, compat::NodeTarget& target) {
  target.origin = "--driver/--gpu";
  if (!o.driver.empty()) {
    auto v = Version::Parse(o.driver, "--driver");
    if (!v.ok()) {
      PrintError(v.status());
      return kExitUsage;
    }
    target.driver = *v;
  }
  compat::GpuCatalog catalog(data);
  for (const std::string& g : o.gpus) {
    auto ref = catalog.Lookup(g);
    if (!ref.ok()) {
      PrintError(ref.status());
      return kExitUsage;
    }
    target.gpus.push_back(*ref);
  }
  bool need_driver = o.driver.empty();
  bool need_gpus = o.gpus.empty();
  if (need_driver || need_gpus) {
    const std::string given_origin = target.origin;
    Status s = FillFromNode(global, data, need_driver, need_gpus, target);
    if (!s.ok()) {
      PrintError(s);
      return kExitUsage;
    }
    if ((!need_driver || !need_gpus) && target.origin != given_origin) {
      target.origin = absl::StrCat(need_driver ? "--gpu" : "--driver", " + ", target.origin);
    }
  }
  return -1;
}

}  // namespace

StatusOr<compat::WorkloadSpec> WorkloadOfImage(const GlobalOptions& global, const compat::CompatData& data,
                                               const std::string& image, const ImageSourceFlags& flags,
                                               bool node_stores) {
  auto ref = compat::ParseImageRef(image);
  if (!ref.ok()) return ref.status();
  if (flags.source == "data") return compat::WorkloadFromImage(data, image);
  auto fs = HostFs::Open(global.host_root);
  if (!fs.ok()) return fs.status();
  GPUNODE_ASSIGN_OR_RETURN(image::LookupPlan plan, MakeLookupPlan(*fs, flags, node_stores && global.simulate.empty()));
  image::LookupResult found = image::LookUpImageConfig(*ref, plan);
  if (!found.config) {
    GPUNODE_ASSIGN_OR_RETURN(compat::WorkloadSpec spec, compat::WorkloadFromImage(data, image));
    spec.sources_tried = found.tried;
    return spec;
  }
  std::vector<std::string> problems;
  compat::ImageCudaFacts facts = compat::ReadImageCudaFacts(found.config->env, found.config->labels, &problems);
  GPUNODE_ASSIGN_OR_RETURN(compat::WorkloadSpec spec,
                           compat::WorkloadFromImageConfig(data, image, facts, found.config->source));
  spec.image_digest = found.config->digest;
  spec.sources_tried = found.tried;
  for (const std::string& p : problems) spec.sources_tried.push_back(absl::StrCat(found.config->source, ": ", p));
  return spec;
}

namespace {

int RunCheck(const GlobalOptions& global, const CompatOptions& o) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  int given = !o.image.empty() + !o.cuda.empty() + !o.torch.empty();
  if (given != 1) {
    PrintError("compat check needs exactly one of --image REF, --cuda X.Y[.Z] or --torch "
               "X.Y.Z+cuXYZ (see gpunode compat check --help)");
    return kExitUsage;
  }
  auto data = LoadData(o.data);
  if (!data.ok()) {
    PrintError(data.status());
    return kExitUsage;
  }
  StatusOr<compat::WorkloadSpec> workload = absl::UnknownError("unset");
  if (!o.image.empty()) workload = WorkloadOfImage(global, *data, o.image, o.image_source, /*node_stores=*/true);
  if (!o.cuda.empty()) workload = compat::WorkloadFromCuda(o.cuda);
  if (!o.torch.empty()) {
    workload = compat::WorkloadFromPip(*data, o.torch);
    if (!workload.ok()) workload = Annotate(workload.status(), "--torch");
  }
  if (!workload.ok()) {
    PrintError(workload.status());
    return kExitUsage;
  }
  compat::NodeTarget target;
  if (int rc = BuildTarget(global, o, *data, target); rc != -1) return rc;
  compat::CompatReport report = compat::Check(*data, *workload, target);
  if (*format == OutputFormat::kTable) {
    std::cout << compat::RenderText(report, UseColor(global));
  } else {
    PrintDocument(compat::ToJson(report), *format);
  }
  return compat::VerdictExitCode(report.verdict);
}

int RunDriverFor(const GlobalOptions& global, const CompatOptions& o) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  auto cuda = Version::Parse(o.cuda, "--cuda");
  if (!cuda.ok()) {
    PrintError(cuda.status());
    return kExitUsage;
  }
  if (cuda->parts().size() < 2 || cuda->parts().size() > 3) {
    PrintError(absl::StrCat("--cuda \"", o.cuda, "\" is not a CUDA version: expected X.Y or X.Y.Z"));
    return kExitUsage;
  }
  auto data = LoadData(o.data);
  if (!data.ok()) {
    PrintError(data.status());
    return kExitUsage;
  }
  std::vector<compat::GpuRef> gpus;
  compat::GpuCatalog catalog(*data);
  for (const std::string& g : o.gpus) {
    auto ref = catalog.Lookup(g);
    if (!ref.ok()) {
      PrintError(ref.status());
      return kExitUsage;
    }
    gpus.push_back(*ref);
  }
  compat::DriverForReport report = compat::DriverFor(*data, *cuda, gpus);
  if (*format == OutputFormat::kTable) {
    std::cout << compat::RenderText(report, UseColor(global));
  } else {
    PrintDocument(compat::ToJson(report), *format);
  }
  if (!report.known) return 2;
  for (const std::string& w : report.warnings) {
    if (w.find("no driver that runs") != std::string::npos ||
        w.find("does not support") != std::string::npos) {
      return kExitIncompatible;
    }
  }
  return kExitOk;
}

// compat data --refresh-from-images FILE: each reference's config read as `compat check --image`
// reads it, and the data-set rows they propose printed (never written to the data set).
int RunRefresh(const GlobalOptions& global, const compat::CompatData& data, const CompatOptions& o) {
  std::ifstream in(o.refresh_from);
  if (!in) {
    PrintError(absl::StrCat("--refresh-from-images ", o.refresh_from, ": cannot be read"));
    return kExitUsage;
  }
  constexpr size_t kMaxRefs = 1000;
  std::vector<std::string> refs;
  std::string line;
  while (std::getline(in, line)) {
    line = std::string(absl::StripAsciiWhitespace(line));
    if (line.empty() || line[0] == '#') continue;
    if (refs.size() == kMaxRefs || line.size() > 512) {
      PrintError(absl::StrCat("--refresh-from-images ", o.refresh_from, ": more than ", kMaxRefs,
                              " references, or a line longer than 512 characters"));
      return kExitUsage;
    }
    refs.push_back(line);
  }
  auto fs = HostFs::Open(global.host_root);
  if (!fs.ok()) {
    PrintError(fs.status());
    return kExitUsage;
  }
  std::vector<compat::ImageObservation> seen;
  for (const std::string& r : refs) {
    compat::ImageObservation obs;
    obs.ref = r;
    auto ref = compat::ParseImageRef(r);
    auto plan = MakeLookupPlan(*fs, o.image_source, global.simulate.empty());
    if (!ref.ok() || !plan.ok()) {
      obs.error = !ref.ok() ? ref.status() : plan.status();
    } else {
      image::LookupResult found = image::LookUpImageConfig(*ref, *plan);
      if (found.config) {
        obs.digest = found.config->digest;
        obs.source = found.config->source;
        obs.facts = compat::ReadImageCudaFacts(found.config->env, found.config->labels);
      } else {
        obs.error = absl::NotFoundError(found.tried.empty() ? std::string("no source to read it from")
                                                            : absl::StrJoin(found.tried, "; "));
      }
    }
    seen.push_back(std::move(obs));
  }
  std::string today = absl::FormatTime("%Y-%m-%d", absl::Now(), absl::UTCTimeZone());
  compat::RefreshProposal p = compat::ProposeFromImages(data, seen, today);
  std::cout << TerminalSafeText(p.yaml, false);
  return kExitOk;
}

int RunData(const GlobalOptions& global, const CompatOptions& o) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  auto data = LoadData(o.data);
  if (!data.ok()) {
    PrintError(data.status());
    return kExitUsage;
  }
  if (!o.refresh_from.empty()) return RunRefresh(global, *data, o);
  compat::DataCoverage coverage = compat::Coverage(*data);
  if (*format == OutputFormat::kTable) {
    std::cout << compat::RenderText(coverage);
  } else {
    PrintDocument(compat::ToJson(coverage), *format);
  }
  return kExitOk;
}

}  // namespace

void AddCompatCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  CLI::App* compat = app.add_subcommand(
      "compat",
      "Will this image, CUDA version or framework build run on this node (or on driver X with GPU "
      "Y)? Decides from a sourced data set of NVIDIA's rules and names the smallest fix.");
  compat->require_subcommand(1);
  compat->footer("Run 'gpunode compat check --help' for examples.");

  auto check_opts = std::make_shared<CompatOptions>();
  CLI::App* check = compat->add_subcommand(
      "check",
      "Check one workload against a driver and GPU. Without --driver/--gpu it reads this node\n"
      "(or the simulated one under --simulate).");
  check->add_option("--image", check_opts->image,
                    "Container image: its config (CUDA_VERSION, NVIDIA_REQUIRE_*) is read from the node's\n"
                    "stores, else its registry (see --image-source); the data set's tag rules\n"
                    "(gpunode compat data) fill in what the config does not say, or answer offline");
  check->add_option("--cuda", check_opts->cuda, "CUDA version the workload was built with, X.Y[.Z]");
  check->add_option("--torch", check_opts->torch,
                    "PyTorch wheel, X.Y.Z+cuXYZ (also 'torch==X.Y.Z+cuXYZ')");
  check->add_option("--driver", check_opts->driver,
                    "NVIDIA driver version to check against, e.g. 535.104.05 (default: this node's)");
  check->add_option("--gpu", check_opts->gpus,
                    "GPU: a name (H100, Tesla T4, RTX 4090, A100 80GB) or PCI device id (0x2335);\n"
                    "repeatable (default: this node's GPUs)");
  AddImageSourceFlags(check, check_opts->image_source, /*node_stores=*/true);
  check->add_option("--data", check_opts->data,
                    "Use this compat data set (YAML, same schema as data/compat.yaml) instead of "
                    "the built-in one");
  check->footer(
      "Verdicts: compatible (driver >= the toolkit's own driver), compatible-with-caveats\n"
      "(minor-version or forward compatibility), incompatible (the layer at fault and the fix),\n"
      "unknown (an image we cannot map: says what we need).\n"
      "Exit codes: 0 compatible or compatible-with-caveats, 1 incompatible, 2 unknown, 3 bad input.\n"
      "Examples:\n"
      "  gpunode compat check --image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime\n"
      "  gpunode compat check --image nvidia/cuda:13.0.2-base-ubuntu24.04 --driver 535.104.05 --gpu H100\n"
      "  gpunode compat check --torch 2.6.0+cu126 --driver 570.124.06 --gpu 'RTX 5090'\n"
      "  gpunode compat check --cuda 12.4 --driver 470.82.01 --gpu K80 -o json   # kind: CompatReport\n"
      "  gpunode --simulate dgx-h200 compat check --image nvcr.io/nvidia/tritonserver:25.08-vllm-python-py3\n"
      "  gpunode compat check --image registry.example:5000/team/llm:1.4 --registry-ca ca.pem\n"
      "  gpunode compat check --image vllm/vllm-openai:v0.10.1 --image-source data   # offline\n"
      "The answer names its source: image config (containerd, k8s.io), registry docker.io, or the data set.");
  check->callback([&global, check_opts, exit_code] { *exit_code = RunCheck(global, *check_opts); });

  auto df_opts = std::make_shared<CompatOptions>();
  CLI::App* driver_for = compat->add_subcommand(
      "driver-for",
      "The minimum driver for a CUDA version: full compatibility (the toolkit's own driver) and\n"
      "minor-version compatibility, the branches that run it, forward-compatibility options, and\n"
      "warnings when the GPU's architecture is not supported by that toolkit or those branches.");
  driver_for->add_option("--cuda", df_opts->cuda, "CUDA version, X.Y[.Z]")->required();
  driver_for->add_option("--gpu", df_opts->gpus, "GPU name or PCI device id (repeatable)");
  driver_for->add_option("--data", df_opts->data, "Use this compat data set instead of the built-in one");
  driver_for->footer(
      "Exit codes: 0 ok, 1 the GPU cannot run that CUDA, 2 CUDA version unknown, 3 bad input.\n"
      "Examples:\n"
      "  gpunode compat driver-for --cuda 12.4\n"
      "  gpunode compat driver-for --cuda 13.0 --gpu V100     # warns: CUDA 13 dropped Volta\n"
      "  gpunode compat driver-for --cuda 12.8 --gpu K80 -o json");
  driver_for->callback([&global, df_opts, exit_code] { *exit_code = RunDriverFor(global, *df_opts); });

  auto data_opts = std::make_shared<CompatOptions>();
  CLI::App* data_cmd = compat->add_subcommand(
      "data",
      "What the compat data set covers: its date, and per family (CUDA toolkits, drivers,\n"
      "PyTorch wheels, NGC containers, vLLM, SGLang, TGI) the number of entries and the range.");
  data_cmd->add_option("--data", data_opts->data, "Describe this compat data set instead of the built-in one");
  data_cmd->add_option("--refresh-from-images", data_opts->refresh_from,
                       "Read the config of each image reference in FILE (one per line, # comments) and print\n"
                       "the data-set rows they propose (YAML to review; the data set is not changed)");
  AddImageSourceFlags(data_cmd, data_opts->image_source, /*node_stores=*/true);
  data_cmd->footer(
      "Exit codes: 0 ok, 3 bad input (unreadable or invalid --data file).\n"
      "Examples:\n"
      "  gpunode compat data\n"
      "  gpunode compat data -o json     # kind: CompatDataCoverage\n"
      "  gpunode compat data --refresh-from-images images.txt > proposed.yaml");
  data_cmd->callback([&global, data_opts, exit_code] { *exit_code = RunData(global, *data_opts); });
}

}  // namespace gpunode::cli
