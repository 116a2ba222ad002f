// The CDI generator against simulated nodes (real probes, real simulated NVML, generated host
// roots), hand-written host roots for the driver root and IPC, the atomic writer, and the hooks.
//
// Golden file: test/fixtures/cdi/dgx-h200.yaml is the exact output for the simulated dgx-h200 with
// --hook-path /usr/bin/gpunode. After an intended change, regenerate it with
//   GPUNODE_UPDATE_GOLDEN=1 build/bin/container_tests --gtest_filter='*Golden*'
// (or: build/bin/gpunode --simulate dgx-h200 cdi generate --hook-path /usr/bin/gpunode --output -)
// and review the diff.
#include "src/container/cdi.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/container/hooks.h"
#include "src/container/ldcache.h"
#include "src/node/probe.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::container {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

using ::gpunode::testing::SimLibrary;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path TempDir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("gpunode-cdi-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A simulated node: its generated host root and the inventory the real probes read from it.
class SimNode {
 public:
  explicit SimNode(const std::string& profile_name) : dir_(TempDir(profile_name)) {
    auto source = sim::ResolveProfile(profile_name);
    EXPECT_OK(source) << source.status();
    const std::string profile_path = (dir_ / "profile.yaml").string();
    std::ofstream(profile_path) << source->text;
    auto profile = sim::ParseProfile(source->text, profile_name);
    EXPECT_OK(profile) << profile.status();
    Status st = sim::WriteHostRoot(*profile, (dir_ / "root").string());
    EXPECT_OK(st) << st;
    ::setenv("GPUNODE_SIM_PROFILE", profile_path.c_str(), 1);
    auto host = HostFs::Open((dir_ / "root").string());
    EXPECT_OK(host) << host.status();
    fs_.emplace(*host);
    node::ProbeOptions options;
    options.nvml_library = options.cuda_library = SimLibrary();
    options.init_cuda = false;
    auto inv = node::ProbeNode(*fs_, options);
    EXPECT_OK(inv) << inv.status();
    inv_ = *inv;
  }
  ~SimNode() { fs::remove_all(dir_); }

  StatusOr<BuildResult> Build(NameStrategy names = NameStrategy::kBoth) {
    GPUNODE_ASSIGN_OR_RETURN(files_, DiscoverDriverFiles(*fs_, inv_, {}));
    BuildOptions options;
    options.names = names;
    options.hook_path = "/usr/bin/gpunode";
    return BuildSpec(inv_, files_, options);
  }
  const DriverFiles& files() const { return files_; }
  node::NodeInventory& inventory() { return inv_; }
  fs::path root() const { return dir_ / "root"; }

 private:
  fs::path dir_;
  std::optional<HostFs> fs_;
  node::NodeInventory inv_;
  DriverFiles files_;
};

std::vector<std::string> DeviceNames(const cdi::Spec& spec) {
  std::vector<std::string> out;
  for (const cdi::Device& d : spec.devices) out.push_back(d.name);
  return out;
}

std::vector<std::string> NodePaths(const cdi::ContainerEdits& e) {
  std::vector<std::string> out;
  for (const cdi::DeviceNode& n : e.device_nodes) out.push_back(n.path);
  return out;
}

TEST(CdiGenerateTest, TheSimulatedDgxH200MatchesTheGoldenSpecByteForByte) {
  SimNode node("dgx-h200");
  auto built = node.Build();
  ASSERT_OK(built) << built.status();
  EXPECT_THAT(built->warnings, ::testing::IsEmpty());
  const std::string yaml = cdi::RenderSpecYaml(built->spec);
  const fs::path golden = fs::path(GPUNODE_SOURCE_DIR) / "test/fixtures/cdi/dgx-h200.yaml";
  if (std::getenv("GPUNODE_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(golden, std::ios::binary) << yaml;
  }
  EXPECT_EQ(yaml, ReadAll(golden)) << "regenerate: see the comment at the top of this file";
}

// Found on the H200 beside nvidia-ctk (docs/examples/h200/peers/real/): a driver whose firmware is
// where firmware_class's custom path says (/usr/local/nvidia/firmware there) had none mounted.
TEST(CdiGenerateTest, GspFirmwareIsFoundInTheKernelsFirmwareSearchPathAsNvidiaCtkFindsIt) {
  SimNode node("dgx-h200");
  const fs::path custom = node.root() / "usr/local/nvidia/firmware/nvidia/580.95.05";
  fs::create_directories(custom);
  std::ofstream(custom / "gsp_gh100.bin") << "firmware";
  std::ofstream(custom / "gsp_ga10x.bin") << "the same name as in /lib/firmware: this one wins";
  fs::create_directories(node.root() / "sys/module/firmware_class/parameters");
  std::ofstream(node.root() / "sys/module/firmware_class/parameters/path") << "/usr/local/nvidia/firmware\n";
  auto built = node.Build();
  ASSERT_OK(built) << built.status();
  std::vector<std::string> firmware;
  for (const cdi::Mount& m : built->spec.edits.mounts) {
    if (absl::StrContains(m.container_path, "firmware")) firmware.push_back(m.container_path);
  }
  EXPECT_THAT(firmware, ElementsAre("/usr/local/nvidia/firmware/nvidia/580.95.05/gsp_ga10x.bin",
                                    "/usr/local/nvidia/firmware/nvidia/580.95.05/gsp_gh100.bin",
                                    "/lib/firmware/nvidia/580.95.05/gsp_tu10x.bin"));
}

TEST(CdiGenerateTest, TheDgxH200SpecNamesEveryGpuTwiceAndMountsTheDriverOfItsVersion) {
  SimNode node("dgx-h200");
  auto built = node.Build();
  ASSERT_OK(built) << built.status();
  const cdi::Spec& spec = built->spec;
  EXPECT_EQ(spec.cdi_version, "0.5.0");
  EXPECT_EQ(spec.kind, "nvidia.com/gpu");
  ASSERT_EQ(spec.devices.size(), 17u);
  EXPECT_EQ(spec.devices[0].name, "0");
  EXPECT_EQ(spec.devices[1].name, node.inventory().driver.gpus[0].uuid);
  EXPECT_EQ(spec.devices.back().name, "all");
  EXPECT_EQ(spec.devices.back().edits.device_nodes.size(), 8u);
  EXPECT_THAT(NodePaths(spec.edits),
              ElementsAre("/dev/nvidia-modeset", "/dev/nvidia-uvm-tools", "/dev/nvidia-uvm", "/dev/nvidiactl"));
  std::vector<std::string> mounts;
  for (const cdi::Mount& m : spec.edits.mounts) mounts.push_back(m.container_path);
  EXPECT_THAT(mounts, Contains("/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05"));
  EXPECT_THAT(mounts, Contains("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05"));
  EXPECT_THAT(mounts, Contains("/usr/lib/x86_64-linux-gnu/vdpau/libvdpau_nvidia.so.580.95.05"));
  EXPECT_THAT(mounts, Contains("/usr/bin/nvidia-smi"));
  EXPECT_THAT(mounts, Contains("/lib/firmware/nvidia/580.95.05/gsp_ga10x.bin"));
  EXPECT_THAT(mounts, Not(Contains("/usr/lib/i386-linux-gnu/libcuda.so.1")));  // 32-bit entry skipped
  ASSERT_EQ(spec.edits.hooks.size(), 3u);
  EXPECT_THAT(spec.edits.hooks[0].args, Contains("libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so"));
  EXPECT_THAT(spec.edits.hooks[1].args,
              ElementsAre("gpunode", "cdi", "hook", "enable-cuda-compat", "--host-driver-version=580.95.05"));
  EXPECT_THAT(spec.edits.hooks[2].args,
              ElementsAre("gpunode", "cdi", "hook", "update-ldcache", "--folder", "/usr/lib/x86_64-linux-gnu",
                          "--folder", "/usr/lib/x86_64-linux-gnu/vdpau"));
}

TEST(CdiGenerateTest, MigGpusAreOfferedAsTheirMigDevicesWithCapabilityNodes) {
  SimNode node("a100-mig");
  auto built = node.Build();
  ASSERT_OK(built) << built.status();
  const cdi::Spec& spec = built->spec;
  EXPECT_THAT(DeviceNames(spec),
              ElementsAre("0:0", "MIG-3566fd0d-6599-4b29-a558-a0b80cee56ab", "0:1",
                          "MIG-e14bc570-a58b-467a-b377-bfae0b8deff0", "0:2",
                          "MIG-37092878-2181-452f-8a43-4aaff500902a", "all"));
  // gpu0/gi2/access and gpu0/gi2/ci0/access are caps 3 and 4 in the generated mig-minors.
  EXPECT_THAT(NodePaths(spec.devices[0].edits),
              ElementsAre("/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap3", "/dev/nvidia-caps/nvidia-cap4"));
  EXPECT_THAT(NodePaths(spec.devices.back().edits), Contains("/dev/nvidia-caps/nvidia-cap8"));
  EXPECT_THAT(NodePaths(spec.devices.back().edits), Not(Contains("/dev/nvidia-caps/nvidia-cap1")));
  EXPECT_OK(cdi::ValidateSpec(spec, "a100-mig"));
}

TEST(CdiGenerateTest, MigMinorsOfADriverRootWhenTheHostHasNone) {
  // The chart's simulated nodes: the host root is "/" (the spec must name host paths) and the
  // simulated root is the driver root, /proc/driver/nvidia-caps beside its /dev.
  SimNode node("a100-mig");
  DiscoverOptions options;
  options.driver_root = node.root().string();
  auto files = DiscoverDriverFiles(HostFs::Local(), node.inventory(), options);
  ASSERT_OK(files) << files.status();
  EXPECT_EQ(files->mig_minors.at("gpu0/gi2/access"), 3u);
  BuildOptions build;
  build.hook_path = "/usr/bin/gpunode";
  auto built = BuildSpec(node.inventory(), *files, build);
  ASSERT_OK(built) << built.status();
  EXPECT_THAT(NodePaths(built->spec.devices[0].edits),
              Contains("/dev/nvidia-caps/nvidia-cap3"));
}

TEST(CdiGenerateTest, TheIndexStrategyNamesDevicesByIndexOnly) {
  SimNode node("pcie-l40s-4");
  auto built = node.Build(NameStrategy::kIndex);
  ASSERT_OK(built) << built.status();
  EXPECT_THAT(DeviceNames(built->spec), ElementsAre("0", "1", "2", "3", "all"));
  EXPECT_EQ(built->spec.cdi_version, "0.5.0");
}

TEST(CdiGenerateTest, TheUuidStrategyNeedsOnlyCdi030) {
  SimNode node("t4-cloud");
  auto built = node.Build(NameStrategy::kUuid);
  ASSERT_OK(built) << built.status();
  ASSERT_EQ(built->spec.devices.size(), 2u);
  EXPECT_THAT(built->spec.devices[0].name, HasSubstr("GPU-"));
  EXPECT_EQ(built->spec.cdi_version, "0.3.0");
}

TEST(CdiGenerateTest, AGpuWhoseDeviceNodeIsMissingIsLeftOutWithAWarning) {
  SimNode node("pcie-l40s-4");
  auto files = DriverFiles{};
  files.version = "550.127.05";
  files.gpu_nodes[0] = {"/dev/nvidia0", true, 195, 0};
  BuildOptions options;
  options.hook_path = "/usr/bin/gpunode";
  auto built = BuildSpec(node.inventory(), files, options);
  ASSERT_OK(built) << built.status();
  EXPECT_EQ(built->spec.devices.size(), 3u);  // 0, its UUID, all
  EXPECT_THAT(built->warnings, Contains(HasSubstr("/dev/nvidia1 is missing; left out")));
  // A real character device carries its numbers.
  EXPECT_EQ(built->spec.devices[0].edits.device_nodes[0].major, 195);
  EXPECT_EQ(built->spec.devices[0].edits.device_nodes[0].minor, 0);
}

TEST(CdiGenerateTest, ANodeWithoutAnyDeviceNodeCannotBeDescribed) {
  node::NodeInventory inv;
  BuildOptions options;
  options.hook_path = "/usr/bin/gpunode";
  auto built = BuildSpec(inv, DriverFiles{}, options);
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(built.status().message(), HasSubstr("no GPU"));
  options.hook_path = "gpunode";
  EXPECT_EQ(BuildSpec(inv, DriverFiles{}, options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CdiGenerateTest, ADriverRootPrefixesHostPathsButNotContainerPaths) {
  fs::path dir = TempDir("driver-root");
  const fs::path droot = dir / "run/nvidia/driver";
  const std::string lib = "/usr/lib64";
  fs::create_directories(droot / "usr/lib64");
  fs::create_directories(droot / "etc");
  fs::create_directories(droot / "run/nvidia-persistenced");
  fs::create_directories(droot / "tmp/nvidia-mps");
  fs::create_directories(droot / "usr/bin");
  fs::create_directories(dir / "dev");
  std::ofstream(droot / "usr/lib64/libcuda.so.570.10.01") << "x";
  std::ofstream(droot / "usr/lib64/libnvidia-ml.so.570.10.01") << "x";
  std::ofstream(droot / "usr/lib64/libnvidia-ml.so.535.1.1") << "old";  // another version: ignored
  fs::create_symlink("libcuda.so.570.10.01", droot / "usr/lib64/libcuda.so.1");
  std::ofstream(droot / "run/nvidia-persistenced/socket") << "";
  // As on the GPU machine here: /usr/bin/nvidia-smi is a script that execs the real binary.
  fs::create_directories(droot / "usr/local/nvidia/bin");
  std::ofstream(droot / "usr/bin/nvidia-smi") << "#!/bin/sh\nexec /usr/local/nvidia/bin/nvidia-smi \"$@\"\n";
  std::ofstream(droot / "usr/local/nvidia/bin/nvidia-smi") << "\x7f" "ELF-real";
  std::ofstream(droot / "usr/bin/nvidia-debugdump") << "#!/bin/sh\n";  // only a script: taken, with a warning
  std::ofstream(dir / "dev/nvidia0") << "";
  std::ofstream(dir / "dev/nvidiactl") << "";
  constexpr int32_t kFlags = kLdFlagX8664Lib64 | kLdFlagElfLibc6;
  std::ofstream(droot / "etc/ld.so.cache", std::ios::binary)
      << EncodeLdCache({{"libcuda.so.1", kFlags, lib + "/libcuda.so.1", 0}}, LdCacheFormat::kCompat);

  auto host = HostFs::Open(dir.string());
  ASSERT_OK(host);
  node::NodeInventory inv;
  node::ProcGpu gpu;
  gpu.uuid = "GPU-11111111-2222-3333-4444-555555555555";
  gpu.minor = 0;
  inv.kernel.gpus.push_back(gpu);  // no NVML: the GPUs come from /proc
  auto files = DiscoverDriverFiles(*host, inv, {"/run/nvidia/driver"});
  ASSERT_OK(files) << files.status();
  EXPECT_EQ(files->version, "570.10.01");  // from libcuda.so.<version>: no NVML, no /proc version
  EXPECT_THAT(files->libraries,
              ElementsAre("/usr/lib64/libcuda.so.570.10.01", "/usr/lib64/libnvidia-ml.so.570.10.01"));
  EXPECT_THAT(files->ipc, ElementsAre("/run/nvidia-persistenced/socket", "/tmp/nvidia-mps"));
  EXPECT_THAT(files->binaries, ElementsAre("/usr/local/nvidia/bin/nvidia-smi", "/usr/bin/nvidia-debugdump"));
  EXPECT_THAT(files->warnings, Contains(HasSubstr("/usr/bin/nvidia-debugdump is not an ELF binary")));
  BuildOptions options;
  options.hook_path = "/opt/gpunode/bin/gpunode";
  auto built = BuildSpec(inv, *files, options);
  ASSERT_OK(built) << built.status();
  const cdi::Spec& spec = built->spec;
  EXPECT_THAT(DeviceNames(spec), ElementsAre("0", "GPU-11111111-2222-3333-4444-555555555555", "all"));
  ASSERT_GE(spec.edits.mounts.size(), 1u);
  EXPECT_EQ(spec.edits.mounts[0].host_path, "/run/nvidia/driver/usr/lib64/libcuda.so.570.10.01");
  EXPECT_EQ(spec.edits.mounts[0].container_path, "/usr/lib64/libcuda.so.570.10.01");
  EXPECT_EQ(spec.edits.mounts.back().container_path, "/tmp/nvidia-mps");
  EXPECT_THAT(spec.edits.mounts.back().options, Contains("noexec"));
  EXPECT_EQ(spec.edits.hooks[0].path, "/opt/gpunode/bin/gpunode");
  EXPECT_EQ(spec.edits.hooks[0].args[0], "gpunode");
  EXPECT_THAT(built->warnings, Contains(HasSubstr("NVML gave no GPUs")));
  fs::remove_all(dir);
}

TEST(CdiGenerateTest, NoDriverAtAllIsAFailedPrecondition) {
  fs::path dir = TempDir("no-driver");
  auto host = HostFs::Open(dir.string());
  ASSERT_OK(host);
  auto files = DiscoverDriverFiles(*host, node::NodeInventory{}, {});
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(files.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(files.status().message(), HasSubstr("no NVIDIA driver"));
  EXPECT_EQ(DiscoverDriverFiles(*host, node::NodeInventory{}, {"/missing"}).status().code(), absl::StatusCode::kNotFound);
  fs::remove_all(dir);
}

class HookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("hook");
    fs::create_directories(dir_ / "bundle/rootfs");
    std::ofstream(dir_ / "bundle/config.json") << R"({"ociVersion": "1.0.2", "root": {"path": "rootfs"}})";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string State() const { return R"({"ociVersion":"1.0.2","id":"c1","bundle":")" + (dir_ / "bundle").string() + "\"}"; }
  fs::path dir_;
};

TEST_F(HookTest, TheContainerRootComesFromTheBundleOfTheOciState) {
  auto root = ContainerRootFromState(State());
  ASSERT_OK(root) << root.status();
  EXPECT_EQ(*root, (dir_ / "bundle/rootfs").string());
  EXPECT_FALSE(ContainerRootFromState("not json").ok());
  EXPECT_FALSE(ContainerRootFromState(R"({"bundle": "/nonexistent-bundle"})").ok());
}

TEST_F(HookTest, CreateSymlinksMakesTheLinksInsideTheRootAndRefusesToEscape) {
  const std::string root = (dir_ / "bundle/rootfs").string();
  ASSERT_OK(CreateSymlinks(root, {"libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so"}));
  EXPECT_EQ(fs::read_symlink(dir_ / "bundle/rootfs/usr/lib/x86_64-linux-gnu/libcuda.so"), "libcuda.so.1");
  EXPECT_OK(CreateSymlinks(root, {"other::/usr/lib/x86_64-linux-gnu/libcuda.so"}));  // kept as is
  EXPECT_EQ(fs::read_symlink(dir_ / "bundle/rootfs/usr/lib/x86_64-linux-gnu/libcuda.so"), "libcuda.so.1");
  EXPECT_FALSE(CreateSymlinks(root, {"x::/../../etc/evil"}).ok());
  EXPECT_FALSE(CreateSymlinks(root, {"no-separator"}).ok());
  EXPECT_FALSE(fs::exists(dir_ / "etc/evil"));
}

TEST_F(HookTest, AnImagesAbsoluteSymlinksAreFollowedInsideTheRootNeverIntoTheHost) {
  // The hooks run before pivot_root: an image whose /usr/lib/x86_64-linux-gnu or /etc/ld.so.conf.d
  // is an absolute symlink must not make them write into the host's folder of that name.
  const fs::path rootfs = dir_ / "bundle/rootfs";
  const fs::path host_lib = dir_ / "host-lib";  // stands for the host's /usr/lib/x86_64-linux-gnu
  fs::create_directories(host_lib);
  fs::create_directories(rootfs / "usr/lib");
  fs::create_directories(rootfs / "lib/x86_64-linux-gnu");
  // In the image: /usr/lib/x86_64-linux-gnu -> /lib/x86_64-linux-gnu (absolute, as merged-/usr
  // images have); seen from the host that name would be the host's folder.
  fs::create_symlink("/lib/x86_64-linux-gnu", rootfs / "usr/lib/x86_64-linux-gnu");
  fs::create_symlink(host_lib, rootfs / "usr/lib/escape");  // an absolute link to a host path
  ASSERT_TRUE(CreateSymlinks(rootfs.string(), {"libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so",
                                               "libcuda.so.1::/usr/lib/escape/libcuda.so"})
                  .ok());
  EXPECT_EQ(fs::read_symlink(rootfs / "lib/x86_64-linux-gnu/libcuda.so"), "libcuda.so.1");
  EXPECT_TRUE(fs::is_empty(host_lib)) << "a hook wrote into the host";
  // host_lib's absolute path, taken inside the root, is created there instead.
  EXPECT_TRUE(fs::is_symlink(rootfs / host_lib.relative_path() / "libcuda.so"));

  fs::create_directories(dir_ / "host-etc");
  fs::create_directories(rootfs / "etc");
  fs::create_symlink(dir_ / "host-etc", rootfs / "etc/ld.so.conf.d");
  const fs::path fake = dir_ / "ldconfig";
  std::ofstream(fake) << "#!/bin/sh\nexit 0\n";
  fs::permissions(fake, fs::perms::owner_all);
  ASSERT_OK(UpdateLdCache(rootfs.string(), {"/usr/lib/x86_64-linux-gnu"}, fake.string()));
  EXPECT_TRUE(fs::is_empty(dir_ / "host-etc")) << "update-ldcache wrote into the host";
}

TEST_F(HookTest, UpdateLdCacheListsTheFoldersAndRunsLdconfigInTheRoot) {
  const std::string root = (dir_ / "bundle/rootfs").string();
  const fs::path fake = dir_ / "ldconfig";
  std::ofstream(fake) << "#!/bin/sh\necho \"$@\" > " << (dir_ / "args").string() << "\n";
  fs::permissions(fake, fs::perms::owner_all);
  ASSERT_OK(UpdateLdCache(root, {"/usr/lib/x86_64-linux-gnu"}, fake.string()));
  EXPECT_THAT(ReadAll(dir_ / "bundle/rootfs/etc/ld.so.conf.d/00-gpunode-cdi.conf"),
              HasSubstr("\n/usr/lib/x86_64-linux-gnu\n"));
  EXPECT_EQ(ReadAll(dir_ / "bundle/rootfs/etc/ld.so.conf"), "include /etc/ld.so.conf.d/*.conf\n");
  EXPECT_EQ(ReadAll(dir_ / "args"), "-r " + root + " -f /etc/ld.so.conf -C /etc/ld.so.cache\n");
  std::ofstream(fake) << "#!/bin/sh\nexit 1\n";
  EXPECT_THAT(UpdateLdCache(root, {"/usr/lib"}, fake.string()).message(), HasSubstr("failed (exit 1)"));
  EXPECT_FALSE(UpdateLdCache(root, {"relative"}, fake.string()).ok());
}

// enable-cuda-compat: only where forward compatibility can work (every GPU datacenter-branded),
// and --disable-hook names it.
TEST(CdiGenerateTest, TheCudaCompatHookIsLeftOutOnANodeWithAConsumerGpu) {
  SimNode node("t4-cloud");  // Tesla T4: NVML brand Tesla
  auto built = node.Build();
  ASSERT_OK(built) << built.status();
  ASSERT_EQ(built->spec.edits.hooks.size(), 3u);
  EXPECT_THAT(built->spec.edits.hooks[1].args, Contains("--host-driver-version=535.183.01"));
  node.inventory().driver.gpus[0].brand = 5;  // GeForce
  built = node.Build();
  ASSERT_OK(built) << built.status();
  ASSERT_EQ(built->spec.edits.hooks.size(), 2u);
  EXPECT_THAT(built->spec.edits.hooks[1].args, Contains("update-ldcache"));
}

// The real ldconfig on a root laid out as nvidia/cuda images are (/usr/local/cuda -> cuda-12.8,
// the cuda-compat package's libcuda.so.<version> in compat/) with the driver's libcuda mounted:
// after enable-cuda-compat and update-ldcache the cache resolves libcuda.so.1 to the compat library
// when its major is above the driver's, and to the driver's otherwise.
TEST_F(HookTest, EnableCudaCompatPutsTheImagesNewerCompatLibraryFirstInTheLdCache) {
  if (!fs::exists("/sbin/ldconfig")) GTEST_SKIP() << "no /sbin/ldconfig";
  SimNode node("t4-cloud");  // its libcuda.so.535.183.01: an ELF object whose SONAME is libcuda.so.1
  const fs::path elf = node.root() / "usr/lib/x86_64-linux-gnu/libcuda.so.535.183.01";
  ASSERT_TRUE(fs::exists(elf));
  auto lay_out = [&](const fs::path& rootfs, const std::string& compat_version) {
    fs::create_directories(rootfs / "usr/lib/x86_64-linux-gnu");
    fs::copy_file(elf, rootfs / "usr/lib/x86_64-linux-gnu/libcuda.so.535.183.01");
    fs::create_directories(rootfs / "usr/local/cuda-12.8/compat");
    fs::copy_file(elf, rootfs / ("usr/local/cuda-12.8/compat/libcuda.so." + compat_version));
    fs::create_symlink("cuda-12.8", rootfs / "usr/local/cuda");
  };
  auto resolved = [&](const fs::path& rootfs) {
    std::string cmd = "/sbin/ldconfig -p -C " + (rootfs / "etc/ld.so.cache").string() + " | grep -m1 'libcuda.so.1 '";
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[512];
      while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
      ::pclose(p);
    }
    return out;
  };
  const fs::path newer = dir_ / "newer";
  lay_out(newer, "575.51.03");
  auto did = EnableCudaCompat(newer.string(), "535.183.01");
  ASSERT_OK(did) << did.status();
  EXPECT_TRUE(*did);
  EXPECT_EQ(ReadAll(newer / "etc/ld.so.conf.d/00-compat-gpunode.conf"), "/usr/local/cuda/compat\n");
  ASSERT_OK(UpdateLdCache(newer.string(), {"/usr/lib/x86_64-linux-gnu"}));
  EXPECT_THAT(resolved(newer), HasSubstr("=> /usr/local/cuda/compat/libcuda.so.1"));

  const fs::path older = dir_ / "older";  // the driver (580) is newer than the compat package
  lay_out(older, "575.51.03");
  did = EnableCudaCompat(older.string(), "580.95.05");
  ASSERT_OK(did) << did.status();
  EXPECT_FALSE(*did);
  EXPECT_FALSE(fs::exists(older / "etc/ld.so.conf.d/00-compat-gpunode.conf"));
  ASSERT_OK(UpdateLdCache(older.string(), {"/usr/lib/x86_64-linux-gnu"}));
  EXPECT_THAT(resolved(older), HasSubstr("=> /usr/lib/x86_64-linux-gnu/libcuda.so.1"));
}

TEST_F(HookTest, EnableCudaCompatNeedsExactlyOneCompatLibraryAndAVersion) {
  const fs::path rootfs = dir_ / "bundle/rootfs";
  auto did = EnableCudaCompat(rootfs.string(), "535.183.01");  // no compat folder
  ASSERT_OK(did);
  EXPECT_FALSE(*did);
  fs::create_directories(rootfs / "usr/local/cuda/compat");
  std::ofstream(rootfs / "usr/local/cuda/compat/libcuda.so.575.51.03") << "x";
  std::ofstream(rootfs / "usr/local/cuda/compat/libcuda.so.570.86.10") << "x";
  did = EnableCudaCompat(rootfs.string(), "535.183.01");  // two: NVIDIA's hook does nothing either
  ASSERT_OK(did);
  EXPECT_FALSE(*did);
  EXPECT_THAT(EnableCudaCompat(rootfs.string(), "latest").status().message(), HasSubstr("not a driver version"));
  EXPECT_FALSE(EnableCudaCompat(rootfs.string(), "535", "relative/compat").ok());
}

}  // namespace
}  // namespace gpunode::container
