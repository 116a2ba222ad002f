// libgpunode-simnvml.so exports every entry point nvml.h declares (sim/nvml/nvml_entry_points.inc):
// those the simulator implements answer from the profile, every other one is a weak stub of
// sim/nvml/not_supported.cc that says NVML_ERROR_NOT_SUPPORTED (NVML_ERROR_UNINITIALIZED before
// nvmlInit_v2). The library's own ELF dynamic symbol table tells the two apart: stubs are weak.
#include <dlfcn.h>
#include <elf.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/gpu/nvml_abi.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::sim {
namespace {

struct Entry {
  const char* kind;  // "status" (nvmlReturn_t) or "string" (const char*)
  const char* name;
};

constexpr Entry kEntries[] = {
#define GPUNODE_NVML_ENTRY(kind, name) {#kind, #name},
#include "sim/nvml/nvml_entry_points.inc"
#undef GPUNODE_NVML_ENTRY
};

// The entry points gpunode itself calls (src/gpu/nvml_abi.h): the simulator implements them all.
const std::vector<std::string>& AbiNames() {
  static const std::vector<std::string> names = {
#define GPUNODE_TEST_NAME(ret, name, params) #name,
      GPUNODE_NVML_FUNCTIONS(GPUNODE_TEST_NAME)
#undef GPUNODE_TEST_NAME
  };
  return names;
}

// Defined dynamic symbols of an ELF64 shared library -> their binding (STB_GLOBAL, STB_WEAK).
std::map<std::string, unsigned> DynamicSymbols(const std::string& path, std::string* error) {
  std::map<std::string, unsigned> out;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::string data(in ? static_cast<size_t>(in.tellg()) : 0, '\0');
  in.seekg(0);
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  if (data.size() < sizeof(Elf64_Ehdr) || std::memcmp(data.data(), ELFMAG, SELFMAG) != 0 ||
      data[EI_CLASS] != ELFCLASS64) {
    *error = path + ": not an ELF64 file";
    return out;
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, data.data(), sizeof eh);
  auto section = [&](size_t i) {
    Elf64_Shdr sh{};
    size_t off = eh.e_shoff + i * sizeof(Elf64_Shdr);
    if (off + sizeof sh <= data.size()) std::memcpy(&sh, data.data() + off, sizeof sh);
    return sh;
  };
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh = section(i);
    if (sh.sh_type != SHT_DYNSYM) continue;
    Elf64_Shdr strtab = section(sh.sh_link);
    for (size_t off = sh.sh_offset; off + sizeof(Elf64_Sym) <= sh.sh_offset + sh.sh_size; off += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      std::memcpy(&sym, data.data() + off, sizeof sym);
      if (sym.st_shndx == SHN_UNDEF || strtab.sh_offset + sym.st_name >= data.size()) continue;
      out[data.c_str() + strtab.sh_offset + sym.st_name] = ELF64_ST_BIND(sym.st_info);
    }
  }
  if (out.empty()) *error = path + ": no defined dynamic symbols";
  return out;
}

class SimNvmlExportsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Loaded once and never closed, as NVML's users do (the library's state outlives the tests).
    static void* const handle = dlopen(testing::SimLibrary().c_str(), RTLD_NOW | RTLD_LOCAL);
    handle_ = handle;
    ASSERT_NE(handle_, nullptr) << dlerror();
    init_ = reinterpret_cast<nvmlReturn_t (*)()>(dlsym(handle_, "nvmlInit_v2"));
    shutdown_ = reinterpret_cast<nvmlReturn_t (*)()>(dlsym(handle_, "nvmlShutdown"));
    ASSERT_NE(init_, nullptr);
    ASSERT_NE(shutdown_, nullptr);
    setenv("GPUNODE_SIM_PROFILE", profile_path_.c_str(), 1);
    static std::string error;
    static const std::map<std::string, unsigned> symbols = DynamicSymbols(testing::SimLibrary(), &error);
    ASSERT_TRUE(error.empty()) << error;
    symbols_ = &symbols;
  }
  void TearDown() override {
    if (shutdown_ != nullptr) {
      while (shutdown_() == NVML_SUCCESS) {
      }
    }
  }
  // The entry points of the .inc that are only stubs (weak in the library).
  std::vector<Entry> Stubs() const {
    std::vector<Entry> stubs;
    for (const Entry& e : kEntries) {
      auto it = symbols_->find(e.name);
      if (it != symbols_->end() && it->second == STB_WEAK) stubs.push_back(e);
    }
    return stubs;
  }

  const std::string profile_path_ = std::string(GPUNODE_SOURCE_DIR) + "/data/profiles/dgx-h200.yaml";
  void* handle_ = nullptr;
  nvmlReturn_t (*init_)() = nullptr;
  nvmlReturn_t (*shutdown_)() = nullptr;
  const std::map<std::string, unsigned>* symbols_ = nullptr;
};

TEST_F(SimNvmlExportsTest, TheListIsNvmlHeaders) {
  std::set<std::string> names;
  for (const Entry& e : kEntries) {
    EXPECT_TRUE(names.insert(e.name).second) << "listed twice: " << e.name;
    EXPECT_EQ(std::string(e.name).rfind("nvml", 0), 0u) << e.name;
  }
  EXPECT_GT(names.size(), 350u);
  // The legacy unversioned names that old binaries link against are in it too.
  for (const char* legacy : {"nvmlInit", "nvmlDeviceGetCount", "nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo_v2",
                             "nvmlDeviceGetHandleByIndex", "nvmlSystemGetCudaDriverVersion", "nvmlErrorString"}) {
    EXPECT_TRUE(names.count(legacy)) << legacy;
  }
  // gpunode's own entry points are all nvml.h's.
  for (const std::string& name : AbiNames()) EXPECT_TRUE(names.count(name)) << name;
}

TEST_F(SimNvmlExportsTest, EveryEntryPointResolvesByName) {
  std::vector<std::string> missing;
  for (const Entry& e : kEntries) {
    if (dlsym(handle_, e.name) == nullptr) missing.push_back(e.name);
  }
  EXPECT_TRUE(missing.empty()) << missing.size() << " not exported, first " << missing[0];
}

TEST_F(SimNvmlExportsTest, ImplementedEntryPointsAreNotShadowedByStubs) {
  for (const std::string& name : AbiNames()) {
    auto it = symbols_->find(name);
    ASSERT_NE(it, symbols_->end()) << name;
    EXPECT_EQ(it->second, static_cast<unsigned>(STB_GLOBAL)) << name << " is only the NOT_SUPPORTED stub";
  }
  auto profile = LoadProfileFile(profile_path_);
  ASSERT_OK(profile);
  auto count_v2 = reinterpret_cast<nvmlReturn_t (*)(unsigned*)>(dlsym(handle_, "nvmlDeviceGetCount_v2"));
  ASSERT_NE(count_v2, nullptr);
  ASSERT_EQ(init_(), NVML_SUCCESS);
  unsigned count = 0;
  EXPECT_EQ(count_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(count, profile->gpus.size());
  EXPECT_EQ(count, 8u);
  auto error_string = reinterpret_cast<const char* (*)(nvmlReturn_t)>(dlsym(handle_, "nvmlErrorString"));
  ASSERT_NE(error_string, nullptr);
  EXPECT_STRNE(error_string(NVML_ERROR_NOT_SUPPORTED), error_string(NVML_ERROR_UNINITIALIZED));
}

// Every stub is called without arguments: they ignore theirs (see sim/nvml/not_supported.cc).
TEST_F(SimNvmlExportsTest, StubsSayUninitializedThenNotSupported) {
  std::vector<Entry> stubs = Stubs();
  ASSERT_FALSE(stubs.empty());
  EXPECT_EQ(symbols_->count("nvmlInit"), 1u);
  auto call = [&](const Entry& e) {
    return reinterpret_cast<nvmlReturn_t (*)()>(dlsym(handle_, e.name))();
  };
  for (const Entry& e : stubs) {
    if (std::strcmp(e.kind, "status") != 0) continue;
    nvmlReturn_t want = std::strncmp(e.name, "nvmlInit", 8) == 0 ? NVML_ERROR_NOT_SUPPORTED
                                                                  : NVML_ERROR_UNINITIALIZED;
    EXPECT_EQ(call(e), want) << e.name << " before nvmlInit_v2";
  }
  ASSERT_EQ(init_(), NVML_SUCCESS);
  size_t status_stubs = 0;
  for (const Entry& e : stubs) {
    if (std::strcmp(e.kind, "string") == 0) {
      EXPECT_NE(reinterpret_cast<const char* (*)()>(dlsym(handle_, e.name))(), nullptr) << e.name;
      continue;
    }
    ++status_stubs;
    EXPECT_EQ(call(e), NVML_ERROR_NOT_SUPPORTED) << e.name;
  }
  EXPECT_GT(status_stubs, 100u);
  ASSERT_EQ(shutdown_(), NVML_SUCCESS);
  for (const Entry& e : stubs) {
    if (std::strcmp(e.kind, "status") != 0 || std::strncmp(e.name, "nvmlInit", 8) == 0) continue;
    EXPECT_EQ(call(e), NVML_ERROR_UNINITIALIZED) << e.name << " after nvmlShutdown";
  }
}

// go-nvml's Init() from v0.13.1 on (NVIDIA's DRA driver) calls nvmlInitWithFlags(0): implemented,
// initialising as nvmlInit_v2 does and counted with it (one nvmlShutdown each).
TEST_F(SimNvmlExportsTest, InitWithFlagsInitialisesAsInitV2) {
  auto it = symbols_->find("nvmlInitWithFlags");
  ASSERT_NE(it, symbols_->end());
  EXPECT_EQ(it->second, static_cast<unsigned>(STB_GLOBAL)) << "nvmlInitWithFlags is only the stub";
  auto init_with_flags = reinterpret_cast<nvmlReturn_t (*)(unsigned)>(dlsym(handle_, "nvmlInitWithFlags"));
  auto count_v2 = reinterpret_cast<nvmlReturn_t (*)(unsigned*)>(dlsym(handle_, "nvmlDeviceGetCount_v2"));
  ASSERT_NE(init_with_flags, nullptr);
  ASSERT_NE(count_v2, nullptr);
  unsigned count = 0;
  EXPECT_EQ(count_v2(&count), NVML_ERROR_UNINITIALIZED);
  ASSERT_EQ(init_with_flags(0), NVML_SUCCESS);
  EXPECT_EQ(count_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 8u);
  ASSERT_EQ(init_with_flags(1 /* NVML_INIT_FLAG_NO_GPUS */), NVML_SUCCESS);
  ASSERT_EQ(shutdown_(), NVML_SUCCESS);
  EXPECT_EQ(count_v2(&count), NVML_SUCCESS);  // one init still holds
  ASSERT_EQ(shutdown_(), NVML_SUCCESS);
  EXPECT_EQ(count_v2(&count), NVML_ERROR_UNINITIALIZED);
}

// A few that NVIDIA's components probe (vGPU licensing, the versions go-nvml picks, CPU-coherent
// addressing): present, and answering NOT_SUPPORTED unless the simulator implements them.
TEST_F(SimNvmlExportsTest, SampleOfUnimplementedOnesAnswerNotSupported) {
  ASSERT_EQ(init_(), NVML_SUCCESS);
  size_t checked = 0;
  for (const char* name : {"nvmlDeviceGetGridLicensableFeatures_v4", "nvmlVgpuInstanceGetLicenseInfo_v2",
                           "nvmlDeviceGetAddressingMode", "nvmlGetVgpuVersion", "nvmlDeviceDiscoverGpus",
                           "nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlInit"}) {
    void* sym = dlsym(handle_, name);
    ASSERT_NE(sym, nullptr) << name;
    auto it = symbols_->find(name);
    ASSERT_NE(it, symbols_->end()) << name;
    if (it->second != STB_WEAK) continue;  // implemented meanwhile
    ++checked;
    EXPECT_EQ(reinterpret_cast<nvmlReturn_t (*)()>(sym)(), NVML_ERROR_NOT_SUPPORTED) << name;
  }
  EXPECT_GT(checked, 0u);
}

}  // namespace
}  // namespace gpunode::sim
