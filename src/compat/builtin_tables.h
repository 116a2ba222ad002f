// The built-in compat data set as static tables: the shapes of the rows that
// src/compat/gen/compat_gen.cc writes (from data/compat.yaml, read by ParseCompatData at build
// time) into the build's compat_builtin_tables.cc, and that LoadBuiltin (builtin.cc) copies into a
// CompatData. Internal to src/compat.
//
// Why generated C++ and not a binary blob: the compiler checks every row against these types, the
// tables sit in read-only data with nothing to parse or bounds-check at run time (no reader to
// fuzz), and loading is plain copies. Lists inside a row (a GPU's PCI ids, an architecture's
// compute capabilities, ...) are spans of shared pools, so every row has a fixed size.
#ifndef GPUNODE_COMPAT_BUILTIN_TABLES_H_
#define GPUNODE_COMPAT_BUILTIN_TABLES_H_

#include <cstddef>
#include <cstdint>

namespace gpunode::compat::builtin {

// A run of `count` entries of one pool, from `first`.
struct Span {
  uint32_t first = 0;
  uint32_t count = 0;
};

// A version as Version::Parse made it; count 0 = absent (an unset optional).
struct Ver {
  uint32_t parts[5] = {0, 0, 0, 0, 0};
  uint8_t count = 0;
  const char* text = "";
};

// An optional whole number: kNoInt = absent.
constexpr int64_t kNoInt = -1;

struct Prov {
  const char* source = "";
  uint8_t confidence = 0;  // Confidence
  const char* note = "";
};

struct SourceRow { const char* id; const char* text; };
struct ToolkitRow { Ver cuda; const char* release; Ver driver; int64_t paired_branch; Prov prov; };
struct MinorCompatRow { int64_t cuda_major; Ver floor; int64_t min_branch; Prov prov; };
struct BranchRow {
  int64_t branch; Ver max_cuda; int64_t max_cuda_major; const char* type; const char* eol; Prov prov;
};
struct FcPackageRow { const char* package; Ver cuda; Span support; /* cells */ };
struct ArchitectureRow {
  const char* name; Span cc; /* versions */ Ver first_cuda; int64_t last_cuda_major;
  int64_t first_branch; int64_t last_branch; Prov prov;
};
struct GpuRow {
  const char* name; const char* arch; Ver cc; const char* segment; Span pci_ids; Span aliases; /* strings */
  Prov prov;
};
struct TorchReleaseRow { Ver torch; Span wheels; /* strings */ const char* pypi_default; Prov prov; };
struct TorchArchListRow {
  Span torch; /* versions */ const char* wheel; Ver sass_min; Ver sass_max; Span sass; Span ptx; Prov prov;
};
struct TorchGpuFloorRow { Span cc; /* versions */ Ver min_torch; Ver min_cuda; Prov prov; };
struct TensorflowRow { Span tf; /* versions */ Ver cuda; const char* cudnn; Prov prov; };
struct JaxRow { const char* extra; Ver cuda; Ver min_cc; Prov prov; };
struct VllmImageRow { const char* tag; Ver cuda; Prov prov; };
struct ImageFamilyRow {
  const char* family; Span repositories; /* strings */ const char* parser; bool ships_cuda_compat;
  const char* label; Prov prov;
};
struct MonthCudaRow { const char* variant; Span tags; /* strings */ Ver cuda; Prov prov; };
struct ImageReleaseRow {
  const char* family; const char* variant; Span tags; Ver cuda; const char* min_driver;
  Span forward_compat; /* strings */ Prov prov;
};

// A table: its rows and their number.
template <typename Row>
struct Table {
  const Row* rows;
  size_t size;
};

struct Tables {
  const char* updated;
  // Pools the spans point into.
  Table<const char*> strings;
  Table<Ver> versions;
  Table<int64_t> ints;
  Table<uint16_t> pci_ids;
  Table<uint8_t> cells;  // FcCell
  // Sections::kSources
  Table<SourceRow> sources;
  // Sections::kCudaTables
  Table<ToolkitRow> toolkits;
  Table<MinorCompatRow> minor_compat;
  Table<BranchRow> branches;
  Span fc_eligible_segments;  // strings
  Span fc_columns;            // ints
  Table<FcPackageRow> fc_packages;
  Prov fc_prov;
  // Sections::kHardware
  Table<ArchitectureRow> architectures;
  Table<GpuRow> gpus;
  // Sections::kFrameworks
  Table<TorchReleaseRow> torch_releases;
  Table<TorchArchListRow> torch_arch_lists;
  Table<TorchGpuFloorRow> torch_gpu_floors;
  Table<TensorflowRow> tensorflow;
  Table<JaxRow> jax;
  Ver vllm_min_cc;
  const char* vllm_min_cc_source;
  Table<VllmImageRow> vllm_images;
  // Sections::kImages
  Table<ImageFamilyRow> image_families;
  Table<MonthCudaRow> ngc_pytorch;
  Table<MonthCudaRow> tritonserver;
  Table<ImageReleaseRow> image_releases;
};

// Defined in the generated compat_builtin_tables.cc.
extern const Tables kTables;

}  // namespace gpunode::compat::builtin

#endif  // GPUNODE_COMPAT_BUILTIN_TABLES_H_
