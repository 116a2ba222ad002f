// LoadBuiltin: the built-in data set, copied out of the tables generated at build time
// (builtin_tables.h) — no text is parsed at run time.
#include <optional>
#include <string>
#include <vector>

#include "src/compat/builtin_tables.h"
#include "src/compat/dataset.h"

namespace gpunode::compat {
namespace {

using builtin::kTables;

Version V(const builtin::Ver& v) { return Version::Prevalidated(v.parts, v.count, v.text); }

std::optional<Version> OptV(const builtin::Ver& v) {
  if (v.count == 0) return std::nullopt;
  return V(v);
}

std::optional<int> OptI(int64_t i) {
  if (i == builtin::kNoInt) return std::nullopt;
  return static_cast<int>(i);
}

Provenance P(const builtin::Prov& p) {
  return Provenance{p.source, static_cast<Confidence>(p.confidence), p.note};
}

std::vector<std::string> Strings(builtin::Span s) {
  return std::vector<std::string>(kTables.strings.rows + s.first, kTables.strings.rows + s.first + s.count);
}

std::vector<Version> Versions(builtin::Span s) {
  std::vector<Version> out;
  out.reserve(s.count);
  for (uint32_t i = 0; i < s.count; ++i) out.push_back(V(kTables.versions.rows[s.first + i]));
  return out;
}

// Each row of `table` through `fn` into `out`.
template <typename Row, typename T, typename Fn>
void Copy(const builtin::Table<Row>& table, std::vector<T>* out, Fn fn) {
  out->reserve(table.size);
  for (size_t i = 0; i < table.size; ++i) out->push_back(fn(table.rows[i]));
}

void LoadCudaTables(CompatData& d) {
  Copy(kTables.toolkits, &d.toolkits, [](const builtin::ToolkitRow& r) {
    return Toolkit{V(r.cuda), r.release, OptV(r.driver), OptI(r.paired_branch), P(r.prov)};
  });
  Copy(kTables.minor_compat, &d.minor_compat, [](const builtin::MinorCompatRow& r) {
    return MinorCompat{static_cast<int>(r.cuda_major), OptV(r.floor), OptI(r.min_branch), P(r.prov)};
  });
  Copy(kTables.branches, &d.branches, [](const builtin::BranchRow& r) {
    return DriverBranch{static_cast<int>(r.branch), OptV(r.max_cuda), OptI(r.max_cuda_major), r.type, r.eol,
                        P(r.prov)};
  });
  ForwardCompat& fc = d.forward_compat;
  fc.eligible_segments = Strings(kTables.fc_eligible_segments);
  for (uint32_t i = 0; i < kTables.fc_columns.count; ++i) {
    fc.columns.push_back(static_cast<int>(kTables.ints.rows[kTables.fc_columns.first + i]));
  }
  Copy(kTables.fc_packages, &fc.packages, [](const builtin::FcPackageRow& r) {
    FcPackage p{r.package, V(r.cuda), {}};
    for (uint32_t i = 0; i < r.support.count; ++i) {
      p.support.push_back(static_cast<FcCell>(kTables.cells.rows[r.support.first + i]));
    }
    return p;
  });
  fc.provenance = P(kTables.fc_prov);
}

void LoadHardware(CompatData& d) {
  Copy(kTables.architectures, &d.architectures, [](const builtin::ArchitectureRow& r) {
    return Architecture{r.name, Versions(r.cc), V(r.first_cuda), OptI(r.last_cuda_major),
                        OptI(r.first_branch), OptI(r.last_branch), P(r.prov)};
  });
  Copy(kTables.gpus, &d.gpus, [](const builtin::GpuRow& r) {
    const uint16_t* ids = kTables.pci_ids.rows + r.pci_ids.first;
    return GpuModel{r.name, r.arch, V(r.cc), r.segment, std::vector<uint16_t>(ids, ids + r.pci_ids.count),
                    Strings(r.aliases), P(r.prov)};
  });
}

void LoadFrameworks(CompatData& d) {
  Copy(kTables.torch_releases, &d.torch_releases, [](const builtin::TorchReleaseRow& r) {
    return TorchRelease{V(r.torch), Strings(r.wheels), r.pypi_default, P(r.prov)};
  });
  Copy(kTables.torch_arch_lists, &d.torch_arch_lists, [](const builtin::TorchArchListRow& r) {
    return TorchArchList{Versions(r.torch), r.wheel, OptV(r.sass_min), OptV(r.sass_max),
                         Versions(r.sass), Versions(r.ptx), P(r.prov)};
  });
  Copy(kTables.torch_gpu_floors, &d.torch_gpu_floors, [](const builtin::TorchGpuFloorRow& r) {
    return TorchGpuFloor{Versions(r.cc), V(r.min_torch), V(r.min_cuda), P(r.prov)};
  });
  Copy(kTables.tensorflow, &d.tensorflow, [](const builtin::TensorflowRow& r) {
    return TensorflowBuild{Versions(r.tf), V(r.cuda), r.cudnn, P(r.prov)};
  });
  Copy(kTables.jax, &d.jax, [](const builtin::JaxRow& r) {
    return JaxBuild{r.extra, V(r.cuda), V(r.min_cc), P(r.prov)};
  });
  d.vllm_min_cc = OptV(kTables.vllm_min_cc);
  d.vllm_min_cc_source = kTables.vllm_min_cc_source;
  Copy(kTables.vllm_images, &d.vllm_images, [](const builtin::VllmImageRow& r) {
    return VllmImage{r.tag, V(r.cuda), P(r.prov)};
  });
}

void LoadImages(CompatData& d) {
  Copy(kTables.image_families, &d.image_families, [](const builtin::ImageFamilyRow& r) {
    return ImageFamily{r.family, Strings(r.repositories), r.parser, r.ships_cuda_compat, r.label, P(r.prov)};
  });
  auto month = [](const builtin::MonthCudaRow& r) { return MonthCuda{r.variant, Strings(r.tags), V(r.cuda), P(r.prov)}; };
  Copy(kTables.ngc_pytorch, &d.ngc_pytorch, month);
  Copy(kTables.tritonserver, &d.tritonserver, month);
  Copy(kTables.image_releases, &d.image_releases, [](const builtin::ImageReleaseRow& r) {
    return ImageRelease{r.family, r.variant, Strings(r.tags), V(r.cuda), r.min_driver,
                        Strings(r.forward_compat), P(r.prov)};
  });
}

}  // namespace

StatusOr<CompatData> LoadBuiltin(Sections sections) {
  CompatData d;
  d.origin = "built-in data set (data/compat.yaml)";
  d.updated = kTables.updated;
  if (Has(sections, Sections::kSources)) {
    for (size_t i = 0; i < kTables.sources.size; ++i) {
      d.sources.emplace_hint(d.sources.end(), kTables.sources.rows[i].id, kTables.sources.rows[i].text);
    }
  }
  if (Has(sections, Sections::kCudaTables)) LoadCudaTables(d);
  if (Has(sections, Sections::kHardware)) LoadHardware(d);
  if (Has(sections, Sections::kFrameworks)) LoadFrameworks(d);
  if (Has(sections, Sections::kImages)) LoadImages(d);
  return d;
}

}  // namespace gpunode::compat
