#include "src/compat/builtin_emit.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace gpunode::compat {
namespace {

// A C++ string literal of `s`: printable ASCII as is, everything else (UTF-8 included) as
// three-digit octal escapes, which cannot run into the next character.
std::string Lit(absl::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      absl::StrAppendFormat(&out, "\\%03o", c);
    }
  }
  out += '"';
  return out;
}

class Emitter {
 public:
  std::string Run(const CompatData& d, absl::string_view source) {
    std::string rows;
    auto table = [&](absl::string_view type, absl::string_view name, const std::vector<std::string>& items) {
      if (items.empty()) return std::string("{nullptr, 0}");
      absl::StrAppend(&rows, "const ", type, " ", name, "[] = {\n");
      for (const std::string& i : items) absl::StrAppend(&rows, "    ", i, ",\n");
      absl::StrAppend(&rows, "};\n");
      return absl::StrCat("{", name, ", ", items.size(), "}");
    };
    std::vector<std::string> fields;  // kTables, in the order of builtin::Tables
    std::vector<std::string> sources;
    for (const auto& [id, text] : d.sources) sources.push_back(absl::StrCat("{", Lit(id), ", ", Lit(text), "}"));

    std::vector<std::string> toolkits;
    for (const Toolkit& x : d.toolkits) {
      toolkits.push_back(absl::StrCat("{", V(x.cuda), ", ", Lit(x.release), ", ", V(x.driver), ", ",
                                      I(x.paired_branch), ", ", P(x.provenance), "}"));
    }
    std::vector<std::string> minor;
    for (const MinorCompat& x : d.minor_compat) {
      minor.push_back(absl::StrCat("{", x.cuda_major, ", ", V(x.floor), ", ", I(x.min_branch), ", ",
                                   P(x.provenance), "}"));
    }
    std::vector<std::string> branches;
    for (const DriverBranch& x : d.branches) {
      branches.push_back(absl::StrCat("{", x.branch, ", ", V(x.max_cuda), ", ", I(x.max_cuda_major), ", ",
                                      Lit(x.type), ", ", Lit(x.eol), ", ", P(x.provenance), "}"));
    }
    const std::string fc_segments = Strings(d.forward_compat.eligible_segments);
    std::vector<int64_t> columns(d.forward_compat.columns.begin(), d.forward_compat.columns.end());
    const std::string fc_columns = Ints(columns);
    std::vector<std::string> packages;
    for (const FcPackage& x : d.forward_compat.packages) {
      Span cells{cells_.size(), x.support.size()};
      for (FcCell c : x.support) cells_.push_back(static_cast<int>(c));
      packages.push_back(absl::StrCat("{", Lit(x.package), ", ", V(x.cuda), ", ", S(cells), "}"));
    }
    std::vector<std::string> archs;
    for (const Architecture& x : d.architectures) {
      archs.push_back(absl::StrCat("{", Lit(x.name), ", ", Versions(x.cc), ", ", V(x.first_cuda), ", ",
                                   I(x.last_cuda_major), ", ", I(x.first_branch), ", ", I(x.last_branch), ", ",
                                   P(x.provenance), "}"));
    }
    std::vector<std::string> gpus;
    for (const GpuModel& x : d.gpus) {
      Span ids{pci_.size(), x.pci_ids.size()};
      pci_.insert(pci_.end(), x.pci_ids.begin(), x.pci_ids.end());
      gpus.push_back(absl::StrCat("{", Lit(x.name), ", ", Lit(x.arch), ", ", V(x.cc), ", ", Lit(x.segment), ", ",
                                  S(ids), ", ", Strings(x.aliases), ", ", P(x.provenance), "}"));
    }
    std::vector<std::string> torch;
    for (const TorchRelease& x : d.torch_releases) {
      torch.push_back(absl::StrCat("{", V(x.torch), ", ", Strings(x.wheels), ", ", Lit(x.pypi_default), ", ",
                                   P(x.provenance), "}"));
    }
    std::vector<std::string> arch_lists;
    for (const TorchArchList& x : d.torch_arch_lists) {
      arch_lists.push_back(absl::StrCat("{", Versions(x.torch), ", ", Lit(x.wheel), ", ", V(x.sass_min), ", ",
                                        V(x.sass_max), ", ", Versions(x.sass), ", ", Versions(x.ptx), ", ",
                                        P(x.provenance), "}"));
    }
    std::vector<std::string> floors;
    for (const TorchGpuFloor& x : d.torch_gpu_floors) {
      floors.push_back(absl::StrCat("{", Versions(x.cc), ", ", V(x.min_torch), ", ", V(x.min_cuda), ", ",
                                    P(x.provenance), "}"));
    }
    std::vector<std::string> tf;
    for (const TensorflowBuild& x : d.tensorflow) {
      tf.push_back(absl::StrCat("{", Versions(x.tf), ", ", V(x.cuda), ", ", Lit(x.cudnn), ", ", P(x.provenance), "}"));
    }
    std::vector<std::string> jax;
    for (const JaxBuild& x : d.jax) {
      jax.push_back(absl::StrCat("{", Lit(x.extra), ", ", V(x.cuda), ", ", V(x.min_cc), ", ", P(x.provenance), "}"));
    }
    std::vector<std::string> vllm;
    for (const VllmImage& x : d.vllm_images) {
      vllm.push_back(absl::StrCat("{", Lit(x.tag), ", ", V(x.cuda), ", ", P(x.provenance), "}"));
    }
    std::vector<std::string> families;
    for (const ImageFamily& x : d.image_families) {
      families.push_back(absl::StrCat("{", Lit(x.family), ", ", Strings(x.repositories), ", ", Lit(x.parser), ", ",
                                      x.ships_cuda_compat ? "true" : "false", ", ", Lit(x.label), ", ",
                                      P(x.provenance), "}"));
    }
    auto months = [&](const std::vector<MonthCuda>& list) {
      std::vector<std::string> out;
      for (const MonthCuda& x : list) {
        out.push_back(absl::StrCat("{", Lit(x.variant), ", ", Strings(x.tags), ", ", V(x.cuda), ", ",
                                   P(x.provenance), "}"));
      }
      return out;
    };
    const std::vector<std::string> ngc = months(d.ngc_pytorch);
    const std::vector<std::string> triton = months(d.tritonserver);
    std::vector<std::string> releases;
    for (const ImageRelease& x : d.image_releases) {
      releases.push_back(absl::StrCat("{", Lit(x.family), ", ", Lit(x.variant), ", ", Strings(x.tags), ", ",
                                      V(x.cuda), ", ", Lit(x.min_driver), ", ", Strings(x.forward_compat), ", ",
                                      P(x.provenance), "}"));
    }

    // The pools are complete now; the tables come after them.
    std::vector<std::string> ints, pci, cells;
    for (int64_t i : ints_) ints.push_back(absl::StrCat(i));
    for (uint16_t i : pci_) pci.push_back(absl::StrFormat("0x%04x", i));
    for (uint8_t c : cells_) cells.push_back(absl::StrCat(static_cast<int>(c)));
    fields.push_back(Lit(d.updated));
    fields.push_back(table("char* const", "kStrings", strings_));
    fields.push_back(table("Ver", "kVersions", versions_));
    fields.push_back(table("int64_t", "kInts", ints));
    fields.push_back(table("uint16_t", "kPciIds", pci));
    fields.push_back(table("uint8_t", "kCells", cells));
    fields.push_back(table("SourceRow", "kSources", sources));
    fields.push_back(table("ToolkitRow", "kToolkits", toolkits));
    fields.push_back(table("MinorCompatRow", "kMinorCompat", minor));
    fields.push_back(table("BranchRow", "kBranches", branches));
    fields.push_back(fc_segments);
    fields.push_back(fc_columns);
    fields.push_back(table("FcPackageRow", "kFcPackages", packages));
    fields.push_back(P(d.forward_compat.provenance));
    fields.push_back(table("ArchitectureRow", "kArchitectures", archs));
    fields.push_back(table("GpuRow", "kGpus", gpus));
    fields.push_back(table("TorchReleaseRow", "kTorchReleases", torch));
    fields.push_back(table("TorchArchListRow", "kTorchArchLists", arch_lists));
    fields.push_back(table("TorchGpuFloorRow", "kTorchGpuFloors", floors));
    fields.push_back(table("TensorflowRow", "kTensorflow", tf));
    fields.push_back(table("JaxRow", "kJax", jax));
    fields.push_back(V(d.vllm_min_cc));
    fields.push_back(Lit(d.vllm_min_cc_source));
    fields.push_back(table("VllmImageRow", "kVllmImages", vllm));
    fields.push_back(table("ImageFamilyRow", "kImageFamilies", families));
    fields.push_back(table("MonthCudaRow", "kNgcPytorch", ngc));
    fields.push_back(table("MonthCudaRow", "kTritonserver", triton));
    fields.push_back(table("ImageReleaseRow", "kImageReleases", releases));

    std::string out = absl::StrCat(
        "// Generated by src/compat/gen/compat_gen.cc from ", source,
        " (read and checked by ParseCompatData). Do not edit: edit the YAML.\n"
        "#include \"src/compat/builtin_tables.h\"\n\n"
        "namespace gpunode::compat::builtin {\nnamespace {\n\n",
        rows, "\n}  // namespace\n\nconst Tables kTables = {\n");
    for (const std::string& f : fields) absl::StrAppend(&out, "    ", f, ",\n");
    absl::StrAppend(&out, "};\n\n}  // namespace gpunode::compat::builtin\n");
    return out;
  }

 private:
  struct Span {
    size_t first, count;
  };
  static std::string S(Span s) { return absl::StrCat("{", s.first, ", ", s.count, "}"); }

  static std::string VerLit(const Version& v) {
    std::vector<uint32_t> parts = v.parts();
    parts.resize(5, 0);
    return absl::StrCat("{{", absl::StrJoin(parts, ", "), "}, ", v.parts().size(), ", ", Lit(v.ToString()), "}");
  }
  static std::string V(const Version& v) { return VerLit(v); }
  static std::string V(const std::optional<Version>& v) { return v ? VerLit(*v) : std::string("{}"); }
  static std::string I(const std::optional<int>& i) { return i ? absl::StrCat(*i) : std::string("kNoInt"); }
  static std::string P(const Provenance& p) {
    return absl::StrCat("{", Lit(p.source), ", ", static_cast<int>(p.confidence), ", ", Lit(p.note), "}");
  }
  std::string Strings(const std::vector<std::string>& list) {
    Span s{strings_.size(), list.size()};
    for (const std::string& x : list) strings_.push_back(Lit(x));
    return S(s);
  }
  std::string Versions(const std::vector<Version>& list) {
    Span s{versions_.size(), list.size()};
    for (const Version& v : list) versions_.push_back(VerLit(v));
    return S(s);
  }
  std::string Ints(const std::vector<int64_t>& list) {
    Span s{ints_.size(), list.size()};
    ints_.insert(ints_.end(), list.begin(), list.end());
    return S(s);
  }

  std::vector<std::string> strings_;
  std::vector<std::string> versions_;
  std::vector<int64_t> ints_;
  std::vector<uint16_t> pci_;
  std::vector<uint8_t> cells_;
};

}  // namespace

std::string EmitBuiltinTables(const CompatData& data, absl::string_view source) {
  return Emitter().Run(data, source);
}

}  // namespace gpunode::compat
