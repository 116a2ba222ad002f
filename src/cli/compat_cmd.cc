// gpunode compat: will this image / CUDA / framework run on this node (or on driver X with
// GPU Y), and if not, what is the smallest fix. The rules live in src/compat; this file only
// turns flags into inputs, reads the node when --driver/--gpu are missing, and prints.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/cli/common.h"
#include "src/compat/coverage.h"
#include "src/compat/dataset.h"
#include "src/compat/engine.h"
#include "src/compat/gpu_catalog.h"
#include "src/compat/image_ref.h"

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
  }
  if (need_gpus) {
    compat::GpuCatalog catalog(data);
    // One entry per distinct model: eight H200s answer like one.
    for (const gpu::GpuInfo& g : inv->driver.gpus) {
      compat::GpuRef ref = catalog.FromNode(g.name, g.pci_device_id, g.cc_major, g.cc_minor);
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
  if (!o.image.empty()) workload = compat::WorkloadFromImage(*data, o.image);
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
                    "Container image: nvidia/cuda, pytorch/pytorch, nvcr.io/nvidia/{pytorch,\n"
                    "tritonserver,tensorflow,jax,nemo,sglang,tensorrt-llm/release}, vllm/vllm-openai,\n"
                    "lmsysorg/sglang, ghcr.io/huggingface/text-generation-inference,\n"
                    "tensorflow/tensorflow tags (gpunode compat data lists what is covered)");
  check->add_option("--cuda", check_opts->cuda, "CUDA version the workload was built with, X.Y[.Z]");
  check->add_option("--torch", check_opts->torch,
                    "PyTorch wheel, X.Y.Z+cuXYZ (also 'torch==X.Y.Z+cuXYZ')");
  check->add_option("--driver", check_opts->driver,
                    "NVIDIA driver version to check against, e.g. 535.104.05 (default: this node's)");
  check->add_option("--gpu", check_opts->gpus,
                    "GPU: a name (H100, Tesla T4, RTX 4090, A100 80GB) or PCI device id (0x2335);\n"
                    "repeatable (default: this node's GPUs)");
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
      "An image gpunode cannot map: docker inspect --format '{{range .Config.Env}}{{println .}}{{end}}'\n"
      "IMAGE | grep CUDA_VERSION, then pass --cuda X.Y.");
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
  data_cmd->footer(
      "Exit codes: 0 ok, 3 bad input (unreadable or invalid --data file).\n"
      "Examples:\n"
      "  gpunode compat data\n"
      "  gpunode compat data -o json     # kind: CompatDataCoverage");
  data_cmd->callback([&global, data_opts, exit_code] { *exit_code = RunData(global, *data_opts); });
}

}  // namespace gpunode::cli
