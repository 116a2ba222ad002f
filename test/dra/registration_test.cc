// The DRA kubelet plugin's registration and sockets over real gRPC, against the kubelet's DRA
// emulator (test/testing/kubelet_dra_emulator.h): what GetInfo says, both API versions chosen as
// the kubelet chooses, the kubelet's refusal reported, registration again after the registry is
// wiped or a socket replaced, and the sockets' safety (mode 0600, stale sockets and symlinks
// replaced, other files refused, a successor's socket never removed).
#include "src/dra/registration.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/dra/dra_fixture.h"
#include "test/testing/status_matchers.h"

namespace gpunode::dra {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::chrono_literals;
using testing::DraClaim;
using testing::DraClaimResult;
using testing::KubeletDraEmulator;

mode_t ModeOf(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

// A socket file nobody listens on (what a crashed plugin leaves behind).
void MakeStaleSocket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof addr.sun_path);
  std::copy(path.begin(), path.end(), addr.sun_path);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ::close(fd);
}

TEST_F(DraTest, RegistersWithTheKubeletAsADraPlugin) {
  ASSERT_TRUE(StartKubelet());
  StartPlugin();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, 10s)) << Log();
  auto info = kubelet_->Plugin(kDriver);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->type, "DRAPlugin");
  EXPECT_EQ(info->name, "gpu.nvidia.com");
  EXPECT_EQ(info->socket, RegSocket());
  EXPECT_EQ(info->endpoint, Endpoint());
  EXPECT_THAT(info->versions, ElementsAre("v1.DRAPlugin", "v1beta1.DRAPlugin"));
  EXPECT_EQ(info->service, "v1.DRAPlugin");  // the plugin's first the kubelet knows
  // The plugin heard the kubelet's verdict.
  for (int i = 0; i < 100 && (plugin_->registrations() < 1 || plugin_->registration_serves() < 1); ++i) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(plugin_->registrations(), 1);
  EXPECT_EQ(plugin_->registration_serves(), 1);
  // Sockets only for their owner; the node service's folder made 0750; no temporary left.
  EXPECT_EQ(ModeOf(RegSocket()), 0600u);
  EXPECT_EQ(ModeOf(Endpoint()), 0600u);
  EXPECT_EQ(ModeOf(options_.plugins_dir + "/gpu.nvidia.com"), 0750u);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(options_.registrar_dir)) names.push_back(e.path().filename());
  EXPECT_THAT(names, ElementsAre("gpu.nvidia.com-reg.sock"));
  EXPECT_TRUE(kubelet_->errors().empty());
  // And it answers through the chosen service.
  preparer_.prepare_table["uid-1"] = std::vector<PreparedDevice>{Gpu("node-a", 0)};
  std::map<std::string, DraClaimResult> out;
  ASSERT_TRUE(kubelet_->Prepare(kDriver, {{"uid-1", "default", "claim-a", {"gpu"}}}, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out["uid-1"].devices.at(0).device_name, "gpu-0");
}

TEST_F(DraTest, AnOlderKubeletPicksV1beta1) {
  ASSERT_TRUE(StartKubelet({KubeletDraEmulator::kV1Beta1}));
  StartPlugin();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, 10s)) << Log();
  EXPECT_EQ(kubelet_->Plugin(kDriver)->service, "v1beta1.DRAPlugin");
  preparer_.prepare_table["uid-1"] = std::vector<PreparedDevice>{Gpu("node-a", 3)};
  std::map<std::string, DraClaimResult> out;
  ASSERT_TRUE(kubelet_->Prepare(kDriver, {{"uid-1", "default", "claim-a", {}}}, &out).ok());
  EXPECT_EQ(out["uid-1"].devices.at(0).device_name, "gpu-3");
}

TEST_F(DraTest, TheKubeletsRefusalIsReported) {
  options_.on_verdict = [this](const RegistrationVerdict& v) {
    std::lock_guard<std::mutex> l(log_mu_);
    log_.push_back(std::string("verdict: ") + (v.registered ? "yes" : "no: " + v.error));
  };
  ASSERT_TRUE(StartKubelet({"v2.DRAPlugin"}));  // a kubelet that knows neither of ours
  StartPlugin();
  ASSERT_TRUE(kubelet_->WaitForErrors(1, 10s)) << Log();
  EXPECT_THAT(kubelet_->errors()[0], HasSubstr("none of services supported by the plugin"));
  EXPECT_FALSE(kubelet_->Plugin(kDriver).has_value());
  for (int i = 0; i < 100 && Log().find("verdict") == std::string::npos; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_THAT(Log(), HasSubstr("verdict: no: RegisterPlugin error -- plugin validation failed"));
  EXPECT_THAT(Log(), HasSubstr("the kubelet refused DRA driver gpu.nvidia.com"));
  EXPECT_EQ(plugin_->registrations(), 0);
}

TEST_F(DraTest, RegistersAgainAfterTheKubeletWipesTheRegistry) {
  ASSERT_TRUE(StartKubelet());
  StartPlugin();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, 10s)) << Log();
  // The sockets in the registry removed, then the whole folder.
  ASSERT_TRUE(kubelet_->Wipe(/*remove_folder=*/false));
  ASSERT_TRUE(kubelet_->WaitForRegistrations(2, 10s)) << Log();
  ASSERT_TRUE(kubelet_->Wipe(/*remove_folder=*/true));
  ASSERT_TRUE(kubelet_->WaitForRegistrations(3, 10s)) << Log();
  EXPECT_THAT(Log(), HasSubstr("was removed or replaced: serving again"));
  // (counted after the socket answered, which may be after the kubelet registered it)
  for (int i = 0; i < 100 && plugin_->registration_serves() < 3; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(plugin_->registration_serves(), 3) << Log();
  EXPECT_TRUE(kubelet_->errors().empty());
  std::map<std::string, DraClaimResult> out;
  preparer_.prepare_table["uid-1"] = std::vector<PreparedDevice>{Gpu("node-a", 1)};
  EXPECT_TRUE(kubelet_->Prepare(kDriver, {{"uid-1", "default", "claim-a", {}}}, &out).ok());
}

TEST_F(DraTest, ANodeServiceSocketRemovedIsServedAgainAndRegistered) {
  ASSERT_TRUE(StartKubelet());
  StartPlugin();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, 10s)) << Log();
  fs::remove_all(options_.plugins_dir + "/gpu.nvidia.com");
  ASSERT_TRUE(kubelet_->WaitForRegistrations(2, 10s)) << Log();
  std::map<std::string, DraClaimResult> out;
  preparer_.prepare_table["uid-1"] = std::vector<PreparedDevice>{Gpu("node-a", 1)};
  EXPECT_TRUE(kubelet_->Prepare(kDriver, {{"uid-1", "default", "claim-a", {}}}, &out).ok());
  EXPECT_EQ(out["uid-1"].devices.size(), 1u);
}

TEST_F(DraTest, WaitsForTheRegistryFolder) {
  StartPlugin();  // no kubelet yet: no registry folder
  for (int i = 0; i < 100 && Log().find("retrying") == std::string::npos; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_THAT(Log(), HasSubstr("plugin registry"));
  ASSERT_TRUE(StartKubelet());
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, 10s)) << Log();
}

TEST_F(DraTest, AStaleSocketOrSymlinkIsReplacedAndItsTargetKept) {
  fs::create_directories(options_.registrar_dir);
  MakeStaleSocket(RegSocket());
  fs::create_directories(options_.plugins_dir + "/gpu.nvidia.com");
  {
    std::ofstream(dir_ / "target") << "keep me";
  }
  fs::create_symlink(dir_ / "target", Endpoint());
  ASSERT_TRUE(StartKubelet());
  StartPlugin();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, 10s)) << Log();
  EXPECT_EQ(ModeOf(Endpoint()) , 0600u);
  EXPECT_TRUE(SocketAt(Endpoint()).has_value());
  std::ifstream in(dir_ / "target");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "keep me");
}

TEST_F(DraTest, AFileWhereTheSocketGoesIsRefusedNotRemoved) {
  fs::create_directories(options_.registrar_dir);
  {
    std::ofstream(RegSocket()) << "not a socket";
  }
  StartPlugin();
  runner_.join();
  EXPECT_TRUE(absl::IsFailedPrecondition(run_status_)) << run_status_;
  EXPECT_THAT(run_status_.message(), HasSubstr("is a regular file, not a socket; not removing it"));
  EXPECT_TRUE(fs::is_regular_file(RegSocket()));
  plugin_.reset();
}

TEST_F(DraTest, ASymlinkedPluginFolderIsRefused) {
  fs::create_directories(dir_ / "elsewhere");
  fs::create_directory_symlink(dir_ / "elsewhere", options_.plugins_dir + "/gpu.nvidia.com");
  StartPlugin();
  runner_.join();
  EXPECT_TRUE(absl::IsFailedPrecondition(run_status_)) << run_status_;
  EXPECT_THAT(run_status_.message(), HasSubstr("is not a folder (a symbolic link or a file)"));
  EXPECT_TRUE(fs::is_empty(dir_ / "elsewhere"));
  plugin_.reset();
}

TEST_F(DraTest, ABadDriverNameIsRefused) {
  options_.driver_name = "../evil";
  StartPlugin();
  runner_.join();
  EXPECT_TRUE(absl::IsInvalidArgument(run_status_)) << run_status_;
  EXPECT_THAT(run_status_.message(), HasSubstr("DRA driver name \"../evil\" is not valid"));
  EXPECT_FALSE(fs::exists(dir_ / "evil"));
  plugin_.reset();
}

TEST_F(DraTest, StoppingRemovesOurSocketsButNotASuccessors) {
  ASSERT_TRUE(StartKubelet());
  StartPlugin();
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, 10s)) << Log();
  StopPlugin();
  EXPECT_FALSE(fs::exists(RegSocket()));
  EXPECT_FALSE(fs::exists(Endpoint()));
  kubelet_->Stop();  // (it would dial the stand-in successor below for 10 s)
  // A successor took the registration path; stopping the old one leaves it.
  KubeletPlugin old(options_, &preparer_, nullptr);
  ASSERT_OK(old.Serve());
  const auto ours = SocketAt(RegSocket());
  ASSERT_TRUE(ours.has_value());
  fs::remove(RegSocket());
  MakeStaleSocket(RegSocket());
  const auto successor = SocketAt(RegSocket());
  old.Shutdown();
  EXPECT_EQ(SocketAt(RegSocket()), successor);
}

TEST_F(DraTest, ATooLongSocketPathIsAClearError) {
  options_.plugins_dir = (dir_ / std::string(120, 'p')).string();
  fs::create_directories(options_.plugins_dir);
  KubeletPlugin plugin(options_, &preparer_, nullptr);
  Status st = plugin.Serve();
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("a Unix socket path may have at most 107"));
}

}  // namespace
}  // namespace gpunode::dra
