// The built-in tables (generated at build time from data/compat.yaml) against the YAML read by
// the run-time loader: the same data set, field by field and text by text; the parts a command
// loads; the generator's refusal of a bad data set.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/compat/builtin_emit.h"
#include "src/compat/dataset.h"
#include "src/compat/engine.h"
#include "src/compat/image_ref.h"

namespace gpunode::compat {
namespace {

using ::testing::HasSubstr;

constexpr char kOrigin[] = "built-in data set (data/compat.yaml)";

std::string ReadSource(const std::string& rel) {
  std::ifstream in(std::string(GPUNODE_SOURCE_DIR) + "/" + rel, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// data/compat.yaml as it is in the source tree now, through the YAML loader.
const CompatData& FromYaml() {
  static const CompatData* d = [] {
    auto parsed = ParseCompatData(ReadSource("data/compat.yaml"), kOrigin);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return new CompatData(parsed.ok() ? *std::move(parsed) : CompatData());
  }();
  return *d;
}

TEST(Builtin, AgreesWithTheYamlFieldByField) {
  auto builtin = LoadBuiltin();
  ASSERT_TRUE(builtin.ok()) << builtin.status();
  ASSERT_FALSE(FromYaml().toolkits.empty());
  // Every field of every struct (defaulted ==), versions numerically ...
  EXPECT_TRUE(*builtin == FromYaml());
  // ... and as written: the generated text of both is the same, so a version keeps its spelling
  // ("580.65.06", "12.4" vs "12.4.0") and every string its bytes.
  EXPECT_EQ(EmitBuiltinTables(*builtin, "x"), EmitBuiltinTables(FromYaml(), "x"));
  EXPECT_EQ(builtin->origin, kOrigin);
  EXPECT_EQ(builtin->FindMinorCompat(13)->floor->ToString(), "580.65.06");
}

TEST(Builtin, EqualityIsNotVacuous) {
  // A change in a deep field (a note of a provenance, a PCI id, a cell) makes them differ.
  CompatData d = FromYaml();
  ASSERT_FALSE(d.gpus.empty());
  d.gpus.back().provenance.note += "x";
  EXPECT_FALSE(d == FromYaml());
  d = FromYaml();
  d.gpus.front().pci_ids.push_back(1);
  EXPECT_FALSE(d == FromYaml());
  d = FromYaml();
  ASSERT_FALSE(d.forward_compat.packages.empty());
  FcCell& cell = d.forward_compat.packages.front().support.front();
  cell = cell == FcCell::kPaired ? FcCell::kSupported : FcCell::kPaired;
  EXPECT_FALSE(d == FromYaml());
  d = FromYaml();
  d.sources.begin()->second += "x";
  EXPECT_FALSE(d == FromYaml());
}

// What each part holds: the full data set with everything else emptied.
CompatData OnlySections(const CompatData& full, Sections s) {
  CompatData d;
  d.origin = full.origin;
  d.updated = full.updated;
  if (Has(s, Sections::kSources)) d.sources = full.sources;
  if (Has(s, Sections::kCudaTables)) {
    d.toolkits = full.toolkits;
    d.minor_compat = full.minor_compat;
    d.branches = full.branches;
    d.forward_compat = full.forward_compat;
  }
  if (Has(s, Sections::kHardware)) {
    d.architectures = full.architectures;
    d.gpus = full.gpus;
  }
  if (Has(s, Sections::kFrameworks)) {
    d.torch_releases = full.torch_releases;
    d.torch_arch_lists = full.torch_arch_lists;
    d.torch_gpu_floors = full.torch_gpu_floors;
    d.tensorflow = full.tensorflow;
    d.jax = full.jax;
    d.vllm_min_cc = full.vllm_min_cc;
    d.vllm_min_cc_source = full.vllm_min_cc_source;
    d.vllm_images = full.vllm_images;
  }
  if (Has(s, Sections::kImages)) {
    d.image_families = full.image_families;
    d.ngc_pytorch = full.ngc_pytorch;
    d.tritonserver = full.tritonserver;
    d.image_releases = full.image_releases;
  }
  return d;
}

TEST(Builtin, LoadsOnlyTheSectionsAsked) {
  for (Sections s : {Sections::kSources, Sections::kCudaTables, Sections::kHardware, Sections::kFrameworks,
                     Sections::kImages, Sections::kCudaTables | Sections::kSources}) {
    auto part = LoadBuiltin(s);
    ASSERT_TRUE(part.ok());
    EXPECT_TRUE(*part == OnlySections(FromYaml(), s)) << static_cast<unsigned>(s);
  }
  auto cuda = LoadBuiltin(Sections::kCudaTables);
  EXPECT_TRUE(cuda->gpus.empty());
  EXPECT_TRUE(cuda->sources.empty());
  EXPECT_TRUE(cuda->image_families.empty());
  EXPECT_FALSE(cuda->branches.empty());
}

// `gpunode labels` loads kCudaTables only: its driver.cuda-N verdicts (a bare CUDA major, no GPU)
// and the branch's CUDA version must be those of the whole data set.
TEST(Builtin, CudaTablesGiveTheLabelsVerdictsOfTheWholeDataSet) {
  auto cuda = LoadBuiltin(Sections::kCudaTables);
  ASSERT_TRUE(cuda.ok());
  const CompatData& full = FromYaml();
  int checked = 0;
  for (const char* driver : {"390.157", "418.87.01", "450.80.02", "470.256.02", "525.60.13", "535.104.05",
                             "550.54.15", "570.86.10", "580.95.05", "590.44.01", "999.1"}) {
    NodeTarget target;
    target.driver = *Version::Parse(driver);
    target.origin = "this node";
    EXPECT_EQ(MaxCudaOfDriver(*cuda, *target.driver), MaxCudaOfDriver(full, *target.driver)) << driver;
    for (int major = 8; major <= 14; ++major) {
      auto w = WorkloadFromCuda(std::to_string(major) + ".0");
      ASSERT_TRUE(w.ok());
      const CompatReport a = Check(*cuda, *w, target);
      const CompatReport b = Check(full, *w, target);
      EXPECT_EQ(a.verdict, b.verdict) << driver << " cuda " << major;
      EXPECT_EQ(a.findings.size(), b.findings.size()) << driver << " cuda " << major;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 11 * 7);
}

// The generator runs the strict loader: a data set it refuses fails the build with the loader's
// message, and no tables are written.
TEST(Builtin, GeneratorRefusesABadDataSet) {
  const std::string dir = ::testing::TempDir();
  const std::string in = dir + "/bad-compat.yaml", out = dir + "/bad-tables.cc";
  std::string text = ReadSource("data/compat.yaml");
  const size_t at = text.find("{cuda: \"12.4.1\", release:");
  ASSERT_NE(at, std::string::npos);
  text.insert(at + 1, "relaese: x, ");
  std::ofstream(in) << text;
  std::remove(out.c_str());
  const std::string cmd = std::string(GPUNODE_BIN_DIR) + "/gpunode_compat_gen " + in + " " + out + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string output;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, p)) output.append(buf, n);
  const int status = pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << output;
  EXPECT_THAT(output, HasSubstr("bad-compat.yaml:"));
  EXPECT_THAT(output, HasSubstr("unknown key \"relaese\""));
  EXPECT_FALSE(std::ifstream(out).good());
}

}  // namespace
}  // namespace gpunode::compat
