// gpunode doctor: check every layer of the GPU stack, print the baseline card.
#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "src/base/terminal.h"
#include "src/cli/common.h"
#include "src/cli/image_source.h"
#include "src/compat/engine.h"
#include "src/compat/gpu_catalog.h"
#include "src/compat/image_facts.h"
#include "src/compat/requirement.h"
#include "src/doctor/doctor.h"

namespace gpunode::cli {
namespace {

struct DoctorOptions {
  bool no_cuda = false;
  bool with_bench = false;
  bool images = false;
};

// --images: the node's stored images that carry CUDA facts, checked against this node's driver
// and GPUs with compat's rules (the same as `compat check --image --image-source node`).
struct ImageVerdict {
  std::string name;
  std::string cuda;
  compat::CompatReport report;
};
struct ImagesSection {
  int listed = 0;
  int gpu_images = 0;
  std::vector<ImageVerdict> cannot_run;
  std::vector<std::string> problems;  // stores that could not be read
};

ImagesSection CheckStoredImages(const GlobalOptions& global, const node::NodeInventory& inv) {
  ImagesSection out;
  auto data = compat::LoadBuiltin();
  auto fs = HostFs::Open(global.host_root);
  if (!data.ok() || !fs.ok()) {
    out.problems.push_back(std::string((!data.ok() ? data.status() : fs.status()).message()));
    return out;
  }
  compat::NodeTarget target;
  target.origin = "this node";
  target.driver = inv.driver.driver_version;
  target.cuda_driver = inv.driver.cuda_version;
  compat::GpuCatalog catalog(*data);
  for (const gpu::GpuInfo& g : inv.driver.gpus) {
    compat::GpuRef ref = catalog.FromNode(g.name, g.pci_device_id, g.cc_major, g.cc_minor);
    if (g.brand) ref.brand = compat::BrandName(*g.brand);
    target.gpus.push_back(std::move(ref));
  }
  auto stores = OpenNodeStores(*fs, StoreFlags{}, image::StoreOptions{});
  if (!stores.ok()) {
    out.problems.push_back(std::string(stores.status().message()));
    return out;
  }
  for (const auto& store : *stores) {
    auto listed = store->List();
    if (!listed.ok()) {
      if (!absl::IsUnavailable(listed.status())) out.problems.push_back(std::string(listed.status().message()));
      continue;
    }
    for (const image::StoredImage& si : *listed) {
      ++out.listed;
      if (!si.error.empty() || si.names.empty()) continue;
      compat::ImageCudaFacts facts = compat::ReadImageCudaFacts(si.config.env, si.config.labels);
      if (!facts.cuda && facts.requirements.empty()) continue;
      ++out.gpu_images;
      auto w = compat::WorkloadFromImageConfig(*data, si.names[0], facts, si.config.source);
      if (!w.ok() || !target.driver) continue;
      compat::CompatReport r = compat::Check(*data, *w, target);
      if (r.verdict == compat::Verdict::kIncompatible) {
        out.cannot_run.push_back({si.names[0], facts.cuda ? facts.cuda->ToString() : "-", std::move(r)});
      }
    }
  }
  return out;
}

int RunDoctor(const GlobalOptions& global, const DoctorOptions& opts) {
  auto format = ParseOutputFormat(global.output);
  if (!format.ok()) {
    PrintError(format.status());
    return kExitUsage;
  }
  auto session = NodeSession::Open(global);
  if (!session.ok()) {
    PrintError(session.status());
    return kExitUsage;
  }
  (*session)->probe_options().init_cuda = !opts.no_cuda;
  (*session)->probe_options().live_metrics = false;  // no check reads them; ~5 ms per GPU
  auto inv = (*session)->Inventory();
  if (!inv.ok()) {
    PrintError(inv.status());
    return kExitUsage;
  }
  doctor::DoctorReport report = doctor::RunDoctor(*inv);
  std::optional<ImagesSection> images;
  if (opts.images) images = CheckStoredImages(global, *inv);
  const int doctor_code = doctor::ExitCode(report);
  int code = doctor_code;
  // --with-bench: the default bench, merged into the baseline card (JSON: baseline.bench).
  std::optional<StatusOr<bench::BenchReport>> bench_report;
  if (opts.with_bench) {
    bench::BenchOptions bench_options;
    bench_options.tests.assign(std::begin(bench::kAllTests), std::end(bench::kAllTests));
    bench_report = RunBenchOnSession(**session, bench_options, *format == OutputFormat::kTable);
    if (!bench_report->ok()) {
      code = std::max(code, 2);
    } else {
      code = std::max(code, bench::ExitCode(**bench_report));
    }
  }
  if (*format == OutputFormat::kTable) {
    // Host files and driver strings inside: escape sequences shown, only our colours kept.
    std::cout << TerminalSafeText(doctor::RenderText(report, UseColor(global)), UseColor(global));
    if (bench_report) {
      std::cout << "\nBench (baseline card)\n";
      if (bench_report->ok()) {
        std::cout << bench::RenderText(**bench_report, UseColor(global));
      } else {
        std::cout << "  bench could not run: " << bench_report->status().message() << "\n";
      }
      // One truth: when the bench changes the outcome, the last line says so (and the exit code).
      if (code != doctor_code) {
        std::cout << "\nOverall: " << (code >= 2 ? "FAIL" : "WARN") << " (exit " << code << "): the checks "
                  << (doctor_code == 0 ? "passed" : "warned") << ", the bench "
                  << (bench_report->ok() ? "missed its ceilings" : "could not run") << "\n";
      }
    }
    if (images) {
      std::cout << "\nImages on this node: " << images->listed << " listed, " << images->gpu_images
                << " with CUDA facts, " << images->cannot_run.size() << " this driver cannot run\n";
      for (const ImageVerdict& v : images->cannot_run) {
        std::cout << "  " << TerminalSafe(v.name) << " (CUDA " << v.cuda << "): " << v.report.decision.rule << ": "
                  << TerminalSafe(v.report.decision.sentence) << "\n";
      }
      for (const std::string& p : images->problems) std::cout << "  (" << TerminalSafe(p) << ")\n";
    }
  } else {
    nlohmann::ordered_json doc = doctor::ToJson(report);
    if (images) {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const ImageVerdict& v : images->cannot_run) {
        list.push_back({{"image", v.name}, {"cuda", v.cuda}, {"rule", v.report.decision.rule},
                        {"sentence", v.report.decision.sentence}});
      }
      doc["images"] = {{"listed", images->listed}, {"withCudaFacts", images->gpu_images}, {"cannotRun", list},
                       {"problems", images->problems}};
    }
    if (bench_report) {
      doc["baseline"]["bench"] = bench_report->ok()
                                     ? bench::CardSummary(**bench_report)
                                     : nlohmann::ordered_json{{"verdict", "error"},
                                                              {"error", std::string(bench_report->status().message())}};
      // One truth: the summary carries the exit code the process returns, bench included.
      doc["summary"]["exitCode"] = code;
      if (code != doctor_code) doc["summary"]["status"] = code >= 2 ? "fail" : "warn";
      doc["summary"]["checksExitCode"] = doctor_code;
    }
    PrintDocument(doc, *format);
  }
  return code;
}

}  // namespace

void AddDoctorCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto opts = std::make_shared<DoctorOptions>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "Check every layer of the GPU stack (PCI, kernel module, NVML/libcuda, toolkit, container runtime,\n"
      "kubelet), print the node's baseline card, and say which layer is broken and what to do first.");
  cmd->add_flag("--no-cuda", opts->no_cuda, "Skip cuInit (the slowest step); libcuda's version is still read");
  cmd->add_flag("--images", opts->images,
                "Also list the images in the node's stores (containerd, Docker, containers-storage) that this "
                "driver cannot run, by their own CUDA_VERSION / NVIDIA_REQUIRE_*");
  cmd->add_flag("--with-bench", opts->with_bench,
                "Also run `gpunode bench` (default tests) and add its results to the baseline card");
  cmd->footer(
      "Each layer is ok, warn, fail or skip (a layer this node does not have, e.g. no kubelet).\n"
      "Exit codes: 0 all ok, 1 a warning, 2 a failure, 3 usage error.\n"
      "Examples:\n"
      "  gpunode doctor\n"
      "  gpunode doctor -o json                     # apiVersion gpunode/v1, kind DoctorReport\n"
      "  gpunode doctor --images                    # and the stored images this driver cannot run\n"
      "  gpunode --host-root /host doctor           # from a container with the host at /host\n"
      "  gpunode --simulate broken-mismatch doctor  # see a diagnosis without a broken machine");
  cmd->callback([&global, opts, exit_code] { *exit_code = RunDoctor(global, *opts); });
}

}  // namespace gpunode::cli
