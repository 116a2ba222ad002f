// NodeSharingApplier (src/dra/sharing.h) behind the claim preparer on a simulated node: the host
// root carries the simulated driver's nvidia-smi and nvidia-cuda-mps-control (real processes),
// claims come from the fake API server, and what the GPUs were set to is read back through the
// simulated nvidia-smi, as on a real node.
#include "src/dra/sharing.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/devices/mps.h"
#include "test/dra/sim_node.h"
#include "test/testing/fake_api_server.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::dra {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

constexpr char kNode[] = "node-1";
constexpr char kDriver[] = "gpu.nvidia.com";

std::string Uid(int i) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "5e1c2a3b-0000-4000-8000-%012d", i);
  return buf;
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json Result(const std::string& request, const std::string& device) {
  return {{"request", request}, {"driver", kDriver}, {"pool", kNode}, {"device", device}};
}

json Config(const char* kind, json sharing) {
  return {{"source", "FromClaim"},
          {"opaque", {{"driver", kDriver},
                      {"parameters", {{"apiVersion", "resource.nvidia.com/v1beta1"}, {"kind", kind},
                                      {"sharing", sharing}}}}}};
}

json Claim(const std::string& name, const std::string& uid, json results, json configs) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", "ns"}, {"uid", uid}}},
          {"spec", {{"devices", {{"requests", json::array({{{"name", "gpu"}}})}}}}},
          {"status", {{"allocation", {{"devices", {{"results", results}, {"config", configs}}}}}}}};
}

// The environment the simulated programs need, set before the node is generated: the host-root
// generator finds them beside the simulated library, and the ASan build's nvidia-smi runs with
// that library preloaded (NVIDIA's LD_PRELOAD), which ASan accepts only this way.
struct SimEnv {
  SimEnv() {
    ::setenv("GPUNODE_SIM_LIBRARY", testing::SimLibrary().c_str(), 0);
    const char* asan = std::getenv("ASAN_OPTIONS");
    const std::string value = absl::StrCat(asan != nullptr && *asan != '\0' ? absl::StrCat(asan, ":") : "",
                                           "verify_asan_link_order=0:detect_leaks=0");
    ::setenv("ASAN_OPTIONS", value.c_str(), 1);
  }
};

class SharingTest : public ::testing::Test {
 protected:
  explicit SharingTest(const char* profile = "dgx-h200") : node_(profile) {
    kube::Connection c;
    EXPECT_OK(kube::ParseServer(api_.url(), &c));
    kube::ClientOptions o;
    o.qps = 0;
    client_ = std::make_unique<kube::Client>(c, o);
    MakeManager();
  }
  ~SharingTest() override {
    preparer_.reset();
    applier_.reset();
    mps_.reset();
  }

  void MakeManager() {
    preparer_.reset();
    applier_.reset();
    mps_.reset();
    devices::MpsOptions mo;
    const bool root_user = ::geteuid() == 0;
    mo.chroot = root_user ? devices::MpsOptions::Chroot::kAuto : devices::MpsOptions::Chroot::kNever;
    mo.isolate_shm = root_user;
    mo.command_timeout = 5s;
    mo.quit_timeout = 3s;
    mps_ = std::make_unique<devices::MpsManager>(node_.fs(), mo, [this](const std::string& m) { log_ += m + "\n"; });
    NodeSharingOptions so;
    so.node_fs = node_.fs();
    so.mps = mps_.get();
    so.log = [this](const std::string& m) { log_ += m + "\n"; };
    applier_ = std::make_unique<NodeSharingApplier>(so);
    CdiPreparerOptions po;
    po.node_name = kNode;
    po.hook_path = "/usr/bin/gpunode";
    po.devices = [this] { return node_.Devices(); };
    po.inventory = [this]() -> StatusOr<std::shared_ptr<const node::NodeInventory>> { return node_.inventory(); };
    po.client = client_.get();
    po.sharing = applier_.get();
    auto p = CdiPreparer::Create(node_.fs(), po);
    EXPECT_OK(p);
    if (p.ok()) preparer_ = std::move(*p);
  }

  void Serve(const std::string& name, const std::string& uid, json results, json configs) {
    api_.PutObject(absl::StrCat("/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/", name),
                   Claim(name, uid, std::move(results), std::move(configs)));
  }
  Status Prepare(const std::string& uid, const std::string& name) {
    auto r = preparer_->Prepare({{uid, "ns", name}});
    if (!r.ok()) return r.status();
    return r->at(uid).status();
  }
  Status Unprepare(const std::string& uid, const std::string& name) {
    auto r = preparer_->Unprepare({{uid, "ns", name}});
    if (!r.ok()) return r.status();
    return r->at(uid);
  }

  // The simulated nvidia-smi of the node, as an admin runs it.
  std::string Smi(const std::string& args) {
    const std::string root = node_.root().string();
    const std::string cmd = "LD_PRELOAD=" + root + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 " + root +
                            "/usr/bin/nvidia-smi " + args + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
    return out;
  }
  std::string Uuid(size_t i) const { return node_.Devices().at(i).uuid; }
  fs::path MpsDir(const std::string& id) const {
    return node_.root() / "var/lib/kubelet/plugins/gpu.nvidia.com/mps" / id;
  }
  cdi::Spec Spec(const std::string& uid) const {
    const fs::path file = node_.root() / "var/run/cdi" / ("k8s.gpu.nvidia.com-claim_" + uid + ".yaml");
    auto spec = cdi::ParseSpec(ReadAll(file), file.string());
    EXPECT_OK(spec);
    return spec.ok() ? *spec : cdi::Spec{};
  }

  SimEnv env_;
  SimNode node_;
  testing::FakeApiServer api_;
  std::unique_ptr<kube::Client> client_;
  std::string log_;
  std::unique_ptr<devices::MpsManager> mps_;
  std::unique_ptr<NodeSharingApplier> applier_;
  std::unique_ptr<CdiPreparer> preparer_;
};

TEST_F(SharingTest, TimeSlicingLongSetsTheSliceAndDefaultModeAndUnprepareResetsIt) {
  ASSERT_THAT(Smi("-i 1 -c EXCLUSIVE_PROCESS"), HasSubstr("All done."));
  Serve("ts", Uid(1), json::array({Result("gpu", "gpu-1")}),
        json::array({Config("GpuConfig", {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", "Long"}}}})}));
  ASSERT_OK(Prepare(Uid(1), "ts")) << log_;
  EXPECT_THAT(Smi("compute-policy -i " + Uuid(1) + " -l"), HasSubstr("Timeslice 3 (LONG)"));
  EXPECT_EQ(Smi("-i " + Uuid(1) + " --query-gpu=compute_mode --format=csv,noheader"), "Default\n");
  EXPECT_THAT(Smi("compute-policy -i 0 -l"), HasSubstr("Timeslice 0 (DEFAULT)"));  // only the claim's GPU
  EXPECT_TRUE(preparer_->checkpoint().claims.at(Uid(1)).sharing.at(0).applied);
  EXPECT_TRUE(Spec(Uid(1)).devices.at(0).edits.env.empty());  // time-slicing edits nothing in the container

  ASSERT_OK(Unprepare(Uid(1), "ts"));
  EXPECT_THAT(Smi("compute-policy -i " + Uuid(1) + " -l"), HasSubstr("Timeslice 0 (DEFAULT)"));
  EXPECT_THAT(log_, HasSubstr("time slice Default (0) again on " + Uuid(1)));
}

TEST_F(SharingTest, WithoutNvidiaSmiTheClaimFailsNamingTheGpuAndNothingStays) {
  fs::remove(node_.root() / "usr/bin/nvidia-smi");
  Serve("ts", Uid(1), json::array({Result("gpu", "gpu-2")}),
        json::array({Config("GpuConfig", {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", "Short"}}}})}));
  Status s = Prepare(Uid(1), "ts");
  EXPECT_THAT(s.message(), HasSubstr("GPU " + Uuid(2) + ": nvidia-smi -i " + Uuid(2) + " -c DEFAULT"));
  EXPECT_THAT(s.message(), HasSubstr("has no nvidia-smi"));
  EXPECT_EQ(preparer_->checkpoint().claims.count(Uid(1)), 0u);
  EXPECT_FALSE(fs::exists(node_.root() / "var/run/cdi" / ("k8s.gpu.nvidia.com-claim_" + Uid(1) + ".yaml")));
}

TEST_F(SharingTest, AnMpsClaimStartsOneDaemonWithItsSettingsAndUnprepareQuitsIt) {
  Serve("mps", Uid(1), json::array({Result("gpu", "gpu-3")}),
        json::array({Config("GpuConfig", {{"strategy", "MPS"},
                                          {"mpsConfig", {{"defaultActiveThreadPercentage", 50},
                                                         {"defaultPinnedDeviceMemoryLimit", "10Gi"}}}})}));
  ASSERT_OK(Prepare(Uid(1), "mps")) << log_;
  const std::string id = MpsDaemonId(Uid(1), {Uuid(3)});
  EXPECT_THAT(id, ::testing::MatchesRegex(Uid(1) + "-[0-9a-f]{5}"));
  ASSERT_EQ(mps_->Daemons().size(), 1u);
  const devices::MpsDaemonStatus d = mps_->Daemons()[0];
  EXPECT_EQ(d.spec.id, id);
  EXPECT_EQ(d.spec.gpu_uuids, std::vector<std::string>{Uuid(3)});
  EXPECT_TRUE(d.healthy);
  const std::string control = ReadAll(MpsDir(id) / "log/control.log");
  EXPECT_THAT(control, HasSubstr("Cmd:set_default_active_thread_percentage 50"));
  EXPECT_THAT(control, HasSubstr("Cmd:set_default_device_pinned_mem_limit 0 10240M"));
  EXPECT_TRUE(fs::exists(MpsDir(id) / "pipe/control"));
  // The compute mode is left as it was (gpunode's choice; NVIDIA's driver sets EXCLUSIVE_PROCESS).
  EXPECT_EQ(Smi("-i 3 --query-gpu=compute_mode --format=csv,noheader"), "Default\n");

  // The claim's CDI device: NVIDIA's environment and mounts.
  const cdi::Spec spec = Spec(Uid(1));
  ASSERT_EQ(spec.devices.size(), 1u);
  const cdi::ContainerEdits& e = spec.devices[0].edits;
  EXPECT_THAT(e.env, ::testing::Contains("CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"));
  const std::string host = "/var/lib/kubelet/plugins/gpu.nvidia.com/mps/" + id;
  bool pipe = false, shm = false;
  for (const cdi::Mount& m : e.mounts) {
    const std::vector<std::string> opts = {"rw", "nosuid", "nodev", "bind"};
    if (m.host_path == host + "/pipe" && m.container_path == "/tmp/nvidia-mps" && m.options == opts) pipe = true;
    if (m.host_path == host + "/shm" && m.container_path == "/dev/shm" && m.options == opts) shm = true;
  }
  EXPECT_TRUE(pipe && shm) << "mounts of " << Uid(1);

  const pid_t pid = d.pid;
  ASSERT_OK(Unprepare(Uid(1), "mps"));
  EXPECT_TRUE(mps_->Daemons().empty());
  EXPECT_NE(::kill(pid, 0), 0);  // reaped: gone
  EXPECT_FALSE(fs::exists(MpsDir(id)));
}

TEST_F(SharingTest, TwoMpsClaimsTwoDaemonsAndARestartStartsThemAgain) {
  json mps = json::array({Config("GpuConfig", {{"strategy", "MPS"}})});
  Serve("a", Uid(1), json::array({Result("gpu", "gpu-4")}), mps);
  Serve("b", Uid(2), json::array({Result("gpu", "gpu-5"), Result("gpu", "gpu-6")}),
        json::array({Config("GpuConfig", {{"strategy", "MPS"},
                                          {"mpsConfig", {{"defaultPerDevicePinnedMemoryLimit",
                                                          {{"1", "2Gi"}}}}}})}));
  ASSERT_OK(Prepare(Uid(1), "a")) << log_;
  ASSERT_OK(Prepare(Uid(2), "b")) << log_;
  ASSERT_EQ(mps_->Daemons().size(), 2u);
  const std::string a = MpsDaemonId(Uid(1), {Uuid(4)});
  const std::string b = MpsDaemonId(Uid(2), {Uuid(5), Uuid(6)});
  const std::string log_b = ReadAll(MpsDir(b) / "log/control.log");
  EXPECT_THAT(log_b, HasSubstr("Cmd:set_default_device_pinned_mem_limit 1 2048M"));
  EXPECT_THAT(log_b, Not(HasSubstr("set_default_active_thread_percentage")));  // not given: not set (NVIDIA's)
  EXPECT_THAT(ReadAll(MpsDir(a) / "log/control.log"), Not(HasSubstr("pinned_mem_limit")));

  // The plugin restarts: its daemons quit with it, and come back from the checkpoint.
  MakeManager();
  ASSERT_EQ(mps_->Daemons().size(), 2u) << log_;
  EXPECT_THAT(preparer_->start_notes(), ::testing::Contains(HasSubstr("MPS settings applied again")));
  EXPECT_TRUE(fs::exists(MpsDir(a) / "pipe/control"));
  ASSERT_OK(Unprepare(Uid(1), "a"));
  ASSERT_OK(Unprepare(Uid(2), "b"));
  EXPECT_TRUE(mps_->Daemons().empty());
  EXPECT_FALSE(fs::exists(MpsDir(a)));
  EXPECT_FALSE(fs::exists(MpsDir(b)));
}

class MigSharingTest : public SharingTest {
 protected:
  MigSharingTest() : SharingTest("a100-mig") {}
};

TEST_F(MigSharingTest, TimeSlicingOnAMigDeviceIsRefusedAsNvidiaDoes) {
  const DraDevice mig = node_.Devices().at(0);
  ASSERT_EQ(mig.type, "mig");
  // NVIDIA's MigDeviceConfig has no timeSlicingConfig, and a GpuConfig does not apply to MIG devices.
  Serve("m1", Uid(1), json::array({Result("gpu", mig.name)}),
        json::array({Config("MigDeviceConfig",
                            {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", "Long"}}}})}));
  EXPECT_THAT(Prepare(Uid(1), "m1").message(), HasSubstr("sharing.timeSlicingConfig: unknown field"));
  json named = Config("GpuConfig", {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", "Long"}}}});
  named["requests"] = json::array({"gpu"});
  Serve("m2", Uid(2), json::array({Result("gpu", mig.name)}), json::array({named}));
  EXPECT_FALSE(Prepare(Uid(2), "m2").ok());
  // The applier refuses a time slice for a MIG device whatever asks it.
  SharingRecord r;
  r.devices = {mig.name};
  r.uuids = {mig.uuid};
  r.config.kind = ConfigKind::kGpu;
  r.config.sharing = Sharing{SharingStrategy::kTimeSlicing, TimeSliceInterval::kLong, std::nullopt};
  auto e = applier_->Apply(Uid(3), r);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e.status().message(), HasSubstr("MIG device " + mig.name));
  // A MigDeviceConfig with the TimeSlicing strategy alone sets nothing (NVIDIA's too) and succeeds.
  Serve("m3", Uid(4), json::array({Result("gpu", mig.name)}),
        json::array({Config("MigDeviceConfig", {{"strategy", "TimeSlicing"}})}));
  EXPECT_OK(Prepare(Uid(4), "m3"));
}

}  // namespace
}  // namespace gpunode::dra
