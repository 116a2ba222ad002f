// The claim preparer on a simulated node (generated host root, real probes, simulated NVML),
// against the fake API server serving ResourceClaims over real HTTP, writing real files under the
// node's temp root (its /var/run/cdi and /var/lib/kubelet are there, never the machine's).
#include "src/dra/cdi_preparer.h"

#include <filesystem>
#include <fstream>
#include <regex>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/dra/sim_node.h"
#include "test/testing/fake_api_server.h"
#include "test/testing/status_matchers.h"

namespace gpunode::dra {
namespace {

using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kNode[] = "node-1";
constexpr char kDriver[] = "gpu.nvidia.com";

std::string Uid(int i) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "6f1c2a3b-0000-4000-8000-%012d", i);
  return buf;
}

std::string ClaimPath(const std::string& ns, const std::string& name) {
  return absl::StrCat("/apis/resource.k8s.io/v1/namespaces/", ns, "/resourceclaims/", name);
}

json Result(const std::string& request, const std::string& device, const std::string& pool = kNode,
            const std::string& driver = kDriver) {
  return {{"request", request}, {"driver", driver}, {"pool", pool}, {"device", device}};
}

// A ResourceClaim as the API server holds it once the scheduler allocated it.
json Claim(const std::string& ns, const std::string& name, const std::string& uid, json results,
           json configs = json::array()) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}}},
          {"spec",
           {{"devices", {{"requests", json::array({{{"name", "gpu"}, {"exactly", {{"deviceClassName", kDriver}}}}})}}}}},
          {"status",
           {{"allocation",
             {{"devices", {{"results", results}, {"config", configs}}},
              {"nodeSelector", {{"nodeSelectorTerms", json::array()}}}}}}}};
}

// Records what a sharing applier is asked; its edits mark the devices it covers.
class RecordingApplier final : public SharingApplier {
 public:
  StatusOr<cdi::ContainerEdits> Apply(absl::string_view uid, const SharingRecord& r) override {
    applied.push_back(absl::StrCat(uid, " ", SharingStrategyName(r.config.sharing->strategy)));
    cdi::ContainerEdits e;
    e.env.push_back("SHARED_BY_TEST=1");
    return e;
  }
  Status Revert(absl::string_view uid, const SharingRecord& r) override {
    reverted.push_back(absl::StrCat(uid, " ", SharingStrategyName(r.config.sharing->strategy)));
    return absl::OkStatus();
  }
  std::vector<std::string> applied, reverted;
};

class CdiPreparerTest : public ::testing::Test {
 protected:
  explicit CdiPreparerTest(const char* profile = "dgx-h200") : node_(profile) {
    kube::Connection c;
    EXPECT_OK(kube::ParseServer(api_.url(), &c));
    kube::ClientOptions o;
    o.qps = 0;  // the fake API server needs no rate limit
    client_ = std::make_unique<kube::Client>(c, o);
    std::filesystem::create_directories(node_.root() / "proc/sys/kernel/random");
    SetBootId("boot-1");
  }

  void SetBootId(const std::string& id) {
    std::ofstream(node_.root() / "proc/sys/kernel/random/boot_id", std::ios::trunc) << id << "\n";
  }

  CdiPreparerOptions Options() {
    CdiPreparerOptions o;
    o.node_name = kNode;
    o.hook_path = "/usr/bin/gpunode";
    o.devices = [this] { return node_.Devices(); };
    o.inventory = [this]() -> StatusOr<std::shared_ptr<const node::NodeInventory>> { return node_.inventory(); };
    o.client = client_.get();
    o.sharing = applier_;
    return o;
  }
  std::unique_ptr<CdiPreparer> NewPreparer() {
    auto p = CdiPreparer::Create(node_.fs(), Options());
    EXPECT_OK(p);
    return p.ok() ? std::move(*p) : nullptr;
  }

  void Serve(const std::string& ns, const std::string& name, const std::string& uid, json results,
             json configs = json::array()) {
    api_.PutObject(ClaimPath(ns, name), Claim(ns, name, uid, std::move(results), std::move(configs)));
  }

  std::filesystem::path SpecFile(const std::string& uid) const {
    return node_.root() / "var/run/cdi" / ("k8s.gpu.nvidia.com-claim_" + uid + ".yaml");
  }
  std::vector<std::string> CdiFiles() const {
    std::vector<std::string> out;
    const auto dir = node_.root() / "var/run/cdi";
    if (!std::filesystem::exists(dir)) return out;
    for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
    return out;
  }
  cdi::Spec ReadSpec(const std::string& uid) const {
    std::ifstream in(SpecFile(uid));
    std::string text((std::istreambuf_iterator<char>(in)), {});
    auto spec = cdi::ParseSpec(text, SpecFile(uid).string());
    EXPECT_OK(spec);
    EXPECT_OK(cdi::ValidateSpec(*spec, "claim spec"));
    return spec.ok() ? *spec : cdi::Spec{};
  }
  static std::vector<std::string> Nodes(const cdi::ContainerEdits& e) {
    std::vector<std::string> out;
    for (const cdi::DeviceNode& n : e.device_nodes) out.push_back(n.path);
    return out;
  }
  int Gets(const std::string& ns, const std::string& name) { return api_.Count("GET " + ClaimPath(ns, name)); }

  SimNode node_;
  testing::FakeApiServer api_;
  std::unique_ptr<kube::Client> client_;
  SharingApplier* applier_ = nullptr;
};

TEST_F(CdiPreparerTest, AOneGpuClaimGetsOneSpecFileWithThatGpusDeviceNodeOnly) {
  const DraDevice gpu = node_.Devices()[3];
  Serve("team-a", "train", Uid(1), json::array({Result("gpu", gpu.name)}));
  auto p = NewPreparer();
  auto r = p->Prepare({{Uid(1), "team-a", "train"}});
  ASSERT_OK(r);
  ASSERT_OK(r->at(Uid(1)));
  const std::vector<PreparedDevice>& devices = *r->at(Uid(1));
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_THAT(devices[0].request_names, ElementsAre("gpu"));
  EXPECT_EQ(devices[0].pool_name, kNode);
  EXPECT_EQ(devices[0].device_name, gpu.name);
  EXPECT_THAT(devices[0].cdi_device_ids, ElementsAre("k8s.gpu.nvidia.com/claim=" + Uid(1) + "-" + gpu.name));
  EXPECT_FALSE(devices[0].share_id);

  EXPECT_THAT(CdiFiles(), ElementsAre("k8s.gpu.nvidia.com-claim_" + Uid(1) + ".yaml"));
  cdi::Spec spec = ReadSpec(Uid(1));
  EXPECT_EQ(spec.kind, "k8s.gpu.nvidia.com/claim");
  ASSERT_EQ(spec.devices.size(), 1u);
  EXPECT_EQ(spec.devices[0].name, Uid(1) + "-" + gpu.name);
  EXPECT_THAT(Nodes(spec.devices[0].edits), ElementsAre("/dev/nvidia" + std::to_string(gpu.minor)));
  // The common edits: control nodes and driver files, no GPU's own node.
  const std::vector<std::string> common = Nodes(spec.edits);
  EXPECT_THAT(common, ::testing::Contains("/dev/nvidiactl"));
  for (const std::string& n : common) EXPECT_FALSE(std::regex_match(n, std::regex("/dev/nvidia[0-9]+"))) << n;
  EXPECT_THAT(spec.edits.env, ::testing::Contains("NVIDIA_VISIBLE_DEVICES=void"));
  EXPECT_FALSE(spec.edits.mounts.empty());

  Checkpoint cp = p->checkpoint();
  ASSERT_EQ(cp.claims.count(Uid(1)), 1u);
  EXPECT_EQ(cp.claims[Uid(1)].ns, "team-a");
  EXPECT_EQ(cp.claims[Uid(1)].cdi_spec, "/var/run/cdi/k8s.gpu.nvidia.com-claim_" + Uid(1) + ".yaml");
  EXPECT_EQ(cp.boot_id, "boot-1");
}

TEST_F(CdiPreparerTest, TwoClaimsInOneCallGetTwoFiles) {
  Serve("ns", "a", Uid(1), json::array({Result("gpu", "gpu-0")}));
  Serve("ns", "b", Uid(2), json::array({Result("gpu", "gpu-1"), Result("gpu", "gpu-2")}));
  auto p = NewPreparer();
  auto r = p->Prepare({{Uid(1), "ns", "a"}, {Uid(2), "ns", "b"}});
  ASSERT_OK(r);
  ASSERT_OK(r->at(Uid(1)));
  ASSERT_OK(r->at(Uid(2)));
  EXPECT_EQ(r->at(Uid(2))->size(), 2u);
  EXPECT_EQ(CdiFiles().size(), 2u);
  cdi::Spec b = ReadSpec(Uid(2));
  ASSERT_EQ(b.devices.size(), 2u);
  EXPECT_THAT(Nodes(b.devices[0].edits), ElementsAre("/dev/nvidia1"));
  EXPECT_THAT(Nodes(b.devices[1].edits), ElementsAre("/dev/nvidia2"));
}

TEST_F(CdiPreparerTest, DevicesOfOtherDriversAreIgnoredAndAnotherNodesPoolIsAnError) {
  Serve("ns", "mixed", Uid(1), json::array({Result("nic", "eth0", kNode, "net.example.com"), Result("gpu", "gpu-0")}));
  Serve("ns", "nic-only", Uid(2), json::array({Result("nic", "eth0", kNode, "net.example.com")}));
  Serve("ns", "elsewhere", Uid(3), json::array({Result("gpu", "gpu-0", "node-2")}));
  Serve("ns", "unknown", Uid(4), json::array({Result("gpu", "gpu-42")}));
  auto p = NewPreparer();
  auto r = p->Prepare({{Uid(1), "ns", "mixed"}, {Uid(2), "ns", "nic-only"}, {Uid(3), "ns", "elsewhere"},
                       {Uid(4), "ns", "unknown"}});
  ASSERT_OK(r);
  ASSERT_OK(r->at(Uid(1)));
  ASSERT_EQ(r->at(Uid(1))->size(), 1u);
  EXPECT_EQ(ReadSpec(Uid(1)).devices.size(), 1u);
  ASSERT_OK(r->at(Uid(2)));
  EXPECT_THAT(*r->at(Uid(2)), IsEmpty());
  EXPECT_FALSE(std::filesystem::exists(SpecFile(Uid(2))));
  EXPECT_THAT(r->at(Uid(3)).status().message(),
              HasSubstr("ResourceClaim ns/elsewhere: status.allocation.devices.results[0].pool: \"node-2\" is not this "
                        "node's pool \"node-1\""));
  EXPECT_THAT(r->at(Uid(4)).status().message(),
              HasSubstr("results[0].device: \"gpu-42\" is not a device of this node (it has: gpu-0, gpu-1"));
  EXPECT_FALSE(std::filesystem::exists(SpecFile(Uid(3))));
  EXPECT_EQ(p->checkpoint().claims.size(), 2u);
}

TEST_F(CdiPreparerTest, AUidMismatchIsAnErrorNamingBoth) {
  Serve("ns", "c", Uid(9), json::array({Result("gpu", "gpu-0")}));
  auto p = NewPreparer();
  auto r = p->Prepare({{Uid(1), "ns", "c"}});
  ASSERT_OK(r);
  const Status& s = r->at(Uid(1)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("ResourceClaim ns/c: metadata.uid is \"" + Uid(9) +
                                     "\" but the kubelet asked for UID \"" + Uid(1) + "\""));
  EXPECT_THAT(CdiFiles(), IsEmpty());
  EXPECT_TRUE(p->checkpoint().claims.empty());
}

TEST_F(CdiPreparerTest, MissingUnallocatedAndMalformedClaimsAreErrors) {
  api_.PutObject(ClaimPath("ns", "pending"), {{"metadata", {{"name", "pending"}, {"namespace", "ns"}, {"uid", Uid(2)}}},
                                              {"status", json::object()}});
  Serve("ns", "bad", Uid(3), json::array({Result("gpu", "gpu-0")}),
        json::array({{{"source", "FromClaim"},
                      {"opaque", {{"driver", kDriver},
                                  {"parameters", {{"apiVersion", "resource.nvidia.com/v1beta1"}, {"kind", "GpuConfig"},
                                                  {"sharing", {{"strategy", "MPS"}, {"mpsConfig", {{"foo", 1}}}}}}}}}}}));
  auto p = NewPreparer();
  auto r = p->Prepare({{Uid(1), "ns", "gone"}, {Uid(2), "ns", "pending"}, {Uid(3), "ns", "bad"}});
  ASSERT_OK(r);
  EXPECT_EQ(r->at(Uid(1)).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r->at(Uid(1)).status().message(), HasSubstr("ResourceClaim ns/gone: "));
  EXPECT_THAT(r->at(Uid(2)).status().message(), HasSubstr("ResourceClaim ns/pending: not allocated yet"));
  EXPECT_THAT(r->at(Uid(3)).status().message(),
              HasSubstr("ResourceClaim ns/bad: status.allocation.devices.config[0].opaque.parameters.sharing.mpsConfig."
                        "foo: unknown field"));
  EXPECT_THAT(CdiFiles(), IsEmpty());
  // Claims the node service would refuse are refused here too.
  auto bad = p->Prepare({{"../x", "ns", "c"}, {Uid(4), "NS", "c"}});
  ASSERT_OK(bad);
  EXPECT_THAT(bad->at("../x").status().message(), HasSubstr("not a UID"));
  EXPECT_THAT(bad->at(Uid(4)).status().message(), HasSubstr("not a DNS label"));
}

TEST_F(CdiPreparerTest, PreparingTwiceGivesTheSameAnswerAndOneFileWithoutAskingAgain) {
  Serve("ns", "c", Uid(1), json::array({Result("gpu", "gpu-0")}));
  auto p = NewPreparer();
  auto first = p->Prepare({{Uid(1), "ns", "c"}});
  ASSERT_OK(first);
  auto second = p->Prepare({{Uid(1), "ns", "c"}});
  ASSERT_OK(second);
  ASSERT_OK(second->at(Uid(1)));
  EXPECT_TRUE(SameDevices(*first->at(Uid(1)), *second->at(Uid(1))));
  EXPECT_EQ(CdiFiles().size(), 1u);
  EXPECT_EQ(Gets("ns", "c"), 1);
  // The same UID under another name is not the same claim.
  auto renamed = p->Prepare({{Uid(1), "ns", "other"}});
  ASSERT_OK(renamed);
  EXPECT_THAT(renamed->at(Uid(1)).status().message(), HasSubstr("was prepared as ResourceClaim ns/c"));
}

TEST_F(CdiPreparerTest, ASpecFileThatDisappearedIsWrittenAgain) {
  Serve("ns", "c", Uid(1), json::array({Result("gpu", "gpu-0")}));
  auto p = NewPreparer();
  ASSERT_OK(p->Prepare({{Uid(1), "ns", "c"}}));
  std::filesystem::remove(SpecFile(Uid(1)));
  auto again = p->Prepare({{Uid(1), "ns", "c"}});
  ASSERT_OK(again);
  ASSERT_OK(again->at(Uid(1)));
  EXPECT_TRUE(std::filesystem::exists(SpecFile(Uid(1))));
  EXPECT_EQ(Gets("ns", "c"), 2);
}

TEST_F(CdiPreparerTest, UnprepareRemovesTheFileAndTheEntryAndAnUnknownClaimIsFine) {
  Serve("ns", "c", Uid(1), json::array({Result("gpu", "gpu-0")}));
  auto p = NewPreparer();
  ASSERT_OK(p->Prepare({{Uid(1), "ns", "c"}}));
  auto u = p->Unprepare({{Uid(1), "ns", "c"}, {Uid(2), "ns", "never-prepared"}});
  ASSERT_OK(u);
  EXPECT_OK(u->at(Uid(1)));
  EXPECT_OK(u->at(Uid(2)));
  EXPECT_THAT(CdiFiles(), IsEmpty());
  EXPECT_TRUE(p->checkpoint().claims.empty());
  auto again = p->Unprepare({{Uid(1), "ns", "c"}});
  ASSERT_OK(again);
  EXPECT_OK(again->at(Uid(1)));
  // What is on disk agrees.
  auto cp = LoadCheckpoint(node_.fs(), kDefaultCheckpointPath);
  ASSERT_OK(cp);
  EXPECT_TRUE(cp->claims.empty());
}

TEST_F(CdiPreparerTest, ARestartedPreparerAnswersFromTheCheckpointAndUnprepares) {
  Serve("ns", "c", Uid(1), json::array({Result("gpu", "gpu-5")}));
  std::vector<PreparedDevice> before;
  {
    auto p = NewPreparer();
    auto r = p->Prepare({{Uid(1), "ns", "c"}});
    ASSERT_OK(r);
    before = *r->at(Uid(1));
  }
  auto p = NewPreparer();
  auto r = p->Prepare({{Uid(1), "ns", "c"}});
  ASSERT_OK(r);
  ASSERT_OK(r->at(Uid(1)));
  EXPECT_TRUE(SameDevices(before, *r->at(Uid(1))));
  EXPECT_EQ(Gets("ns", "c"), 1);
  auto u = NewPreparer()->Unprepare({{Uid(1), "ns", "c"}});
  ASSERT_OK(u);
  EXPECT_OK(u->at(Uid(1)));
  EXPECT_THAT(CdiFiles(), IsEmpty());
}

TEST_F(CdiPreparerTest, AHundredClaimsPreparedAndUnpreparedLeaveNoFile) {
  std::vector<ClaimRef> claims;
  for (int i = 0; i < 100; ++i) {
    const std::string name = "c" + std::to_string(i);
    // Admin access: a GPU in several claims (an exclusive one would be refused after the first).
    json result = Result("gpu", "gpu-" + std::to_string(i % 8));
    result["adminAccess"] = true;
    Serve("ns", name, Uid(i), json::array({result}));
    claims.push_back({Uid(i), "ns", name});
  }
  auto p = NewPreparer();
  for (size_t start = 0; start < claims.size(); start += 25) {
    auto r = p->Prepare(std::vector<ClaimRef>(claims.begin() + start, claims.begin() + start + 25));
    ASSERT_OK(r);
    for (const auto& [uid, devices] : *r) ASSERT_OK(devices) << uid;
  }
  EXPECT_EQ(CdiFiles().size(), 100u);
  EXPECT_EQ(p->checkpoint().claims.size(), 100u);
  auto u = p->Unprepare(claims);
  ASSERT_OK(u);
  for (const auto& [uid, s] : *u) EXPECT_OK(s) << uid;
  EXPECT_THAT(CdiFiles(), IsEmpty());
  EXPECT_TRUE(p->checkpoint().claims.empty());
}

TEST_F(CdiPreparerTest, AGpuHeldByAnotherClaimIsRefused) {
  Serve("ns", "a", Uid(1), json::array({Result("gpu", "gpu-0")}));
  Serve("ns", "b", Uid(2), json::array({Result("gpu", "gpu-0")}));
  auto p = NewPreparer();
  ASSERT_OK(p->Prepare({{Uid(1), "ns", "a"}}));
  auto r = p->Prepare({{Uid(2), "ns", "b"}});
  ASSERT_OK(r);
  EXPECT_THAT(r->at(Uid(2)).status().message(),
              HasSubstr("device gpu-0 is already prepared for claim " + Uid(1) + " (ns/a)"));
  ASSERT_OK(p->Unprepare({{Uid(1), "ns", "a"}}));
  auto later = p->Prepare({{Uid(2), "ns", "b"}});
  ASSERT_OK(later);
  EXPECT_OK(later->at(Uid(2)));
}

TEST_F(CdiPreparerTest, ACorruptedCheckpointStopsTheStartWithAClearError) {
  Serve("ns", "c", Uid(1), json::array({Result("gpu", "gpu-0")}));
  ASSERT_OK(NewPreparer()->Prepare({{Uid(1), "ns", "c"}}));
  const auto file = node_.root() / std::string(kDefaultCheckpointPath).substr(1);
  std::string text;
  {
    std::ifstream in(file);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  text.replace(text.find("gpu-0"), 5, "gpu-1");
  std::ofstream(file, std::ios::trunc) << text;
  auto p = CdiPreparer::Create(node_.fs(), Options());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr(std::string("checkpoint ") + kDefaultCheckpointPath + ": checksum mismatch"));
}

TEST_F(CdiPreparerTest, AfterARebootTheCheckpointsClaimsAreForgottenAndTheirFilesRemoved) {
  Serve("ns", "c", Uid(1), json::array({Result("gpu", "gpu-0")}));
  ASSERT_OK(NewPreparer()->Prepare({{Uid(1), "ns", "c"}}));
  SetBootId("boot-2");
  auto p = NewPreparer();
  EXPECT_TRUE(p->checkpoint().claims.empty());
  EXPECT_EQ(p->checkpoint().boot_id, "boot-2");
  ASSERT_EQ(p->start_notes().size(), 1u);
  EXPECT_THAT(p->start_notes()[0], HasSubstr("the node rebooted"));
  EXPECT_THAT(CdiFiles(), IsEmpty());
  auto r = p->Prepare({{Uid(1), "ns", "c"}});
  ASSERT_OK(r);
  EXPECT_OK(r->at(Uid(1)));
  EXPECT_EQ(Gets("ns", "c"), 2);
}

json GpuSharing(const std::vector<std::string>& requests, json sharing) {
  json c = {{"source", "FromClaim"},
            {"opaque", {{"driver", kDriver},
                        {"parameters", {{"apiVersion", "resource.nvidia.com/v1beta1"}, {"kind", "GpuConfig"},
                                        {"sharing", sharing}}}}}};
  if (!requests.empty()) c["requests"] = requests;
  return c;
}

TEST_F(CdiPreparerTest, SharingIsValidatedAndRecordedButNotAppliedWithoutAnApplier) {
  Serve("ns", "ts", Uid(1), json::array({Result("ts-gpu", "gpu-0"), Result("mps-gpu", "gpu-1")}),
        json::array({GpuSharing({"ts-gpu"}, {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", "Long"}}}}),
                     GpuSharing({"mps-gpu"}, {{"strategy", "MPS"},
                                              {"mpsConfig", {{"defaultActiveThreadPercentage", 50},
                                                             {"defaultPinnedDeviceMemoryLimit", "10Gi"}}}})}));
  Serve("ns", "bad-index", Uid(2), json::array({Result("gpu", "gpu-2")}),
        json::array({GpuSharing({}, {{"strategy", "MPS"},
                                     {"mpsConfig", {{"defaultPerDevicePinnedMemoryLimit", {{"3", "1Gi"}}}}}})}));
  auto p = NewPreparer();
  auto r = p->Prepare({{Uid(1), "ns", "ts"}, {Uid(2), "ns", "bad-index"}});
  ASSERT_OK(r);
  ASSERT_OK(r->at(Uid(1)));
  EXPECT_THAT(r->at(Uid(2)).status().message(),
              HasSubstr("ResourceClaim ns/bad-index: status.allocation.devices.config[0].opaque.parameters.sharing."
                        "mpsConfig.defaultPerDevicePinnedMemoryLimit[\"3\"]: invalid device index 3"));
  const PreparedClaim claim = p->checkpoint().claims.at(Uid(1));
  ASSERT_EQ(claim.sharing.size(), 2u);
  EXPECT_THAT(claim.sharing[0].devices, ElementsAre("gpu-0"));
  EXPECT_EQ(claim.sharing[0].config.sharing->interval, TimeSliceInterval::kLong);
  EXPECT_FALSE(claim.sharing[0].applied);
  EXPECT_THAT(claim.sharing[1].devices, ElementsAre("gpu-1"));
  const std::string uuid1 = node_.Devices()[1].uuid;
  EXPECT_EQ(claim.sharing[1].pinned_memory_limits, (std::map<std::string, std::string>{{uuid1, "10240M"}}));
  EXPECT_FALSE(claim.sharing[1].applied);
  // Recorded on disk too.
  auto cp = LoadCheckpoint(node_.fs(), kDefaultCheckpointPath);
  ASSERT_OK(cp);
  EXPECT_EQ(cp->claims.at(Uid(1)).sharing, claim.sharing);
}

TEST_F(CdiPreparerTest, AnApplierSetsSharingUpAndUnprepareUndoesIt) {
  RecordingApplier applier;
  applier_ = &applier;
  Serve("ns", "mps", Uid(1), json::array({Result("gpu", "gpu-0"), Result("plain", "gpu-1")}),
        json::array({GpuSharing({"gpu"}, {{"strategy", "MPS"}})}));
  auto p = NewPreparer();
  auto r = p->Prepare({{Uid(1), "ns", "mps"}});
  ASSERT_OK(r);
  ASSERT_OK(r->at(Uid(1)));
  EXPECT_THAT(applier.applied, ElementsAre(Uid(1) + " MPS"));
  cdi::Spec spec = ReadSpec(Uid(1));
  ASSERT_EQ(spec.devices.size(), 2u);
  EXPECT_THAT(spec.devices[0].edits.env, ElementsAre("SHARED_BY_TEST=1"));
  EXPECT_THAT(spec.devices[1].edits.env, IsEmpty());
  EXPECT_TRUE(p->checkpoint().claims.at(Uid(1)).sharing.at(0).applied);
  ASSERT_OK(p->Unprepare({{Uid(1), "ns", "mps"}}));
  EXPECT_THAT(applier.reverted, ElementsAre(Uid(1) + " MPS"));
  // Without an applier, sharing a checkpoint says was applied cannot be undone: said, not hidden.
  ASSERT_OK(p->Prepare({{Uid(1), "ns", "mps"}}));
  applier_ = nullptr;
  auto q = NewPreparer();
  auto u = q->Unprepare({{Uid(1), "ns", "mps"}});
  ASSERT_OK(u);
  EXPECT_THAT(u->at(Uid(1)).message(), HasSubstr("no sharing applier to undo them"));
  EXPECT_EQ(q->checkpoint().claims.count(Uid(1)), 1u);
}

TEST_F(CdiPreparerTest, OptionsAreChecked) {
  CdiPreparerOptions o = Options();
  o.node_name = "";
  EXPECT_THAT(CdiPreparer::Create(node_.fs(), o).status().message(), HasSubstr("no node name"));
  o = Options();
  o.client = nullptr;
  EXPECT_FALSE(CdiPreparer::Create(node_.fs(), o).ok());
  o = Options();
  o.cdi_root = "var/run/cdi";
  EXPECT_THAT(CdiPreparer::Create(node_.fs(), o).status().message(), HasSubstr("not an absolute path"));
}

class CdiPreparerMigTest : public CdiPreparerTest {
 protected:
  CdiPreparerMigTest() : CdiPreparerTest("a100-mig") {}
};

TEST_F(CdiPreparerMigTest, AMigDeviceGetsItsParentsNodeAndItsCapabilityNodes) {
  std::optional<DraDevice> mig;
  for (const DraDevice& d : node_.Devices()) {
    if (d.type == "mig" && !mig) mig = d;
  }
  ASSERT_TRUE(mig) << "the a100-mig profile has MIG devices";
  Serve("ns", "m", Uid(1), json::array({Result("mig", mig->name)}),
        json::array({{{"source", "FromClaim"},
                      {"opaque", {{"driver", kDriver},
                                  {"parameters", {{"apiVersion", "resource.nvidia.com/v1beta1"},
                                                  {"kind", "MigDeviceConfig"},
                                                  {"sharing", {{"strategy", "TimeSlicing"}}}}}}}}}));
  auto p = NewPreparer();
  auto r = p->Prepare({{Uid(1), "ns", "m"}});
  ASSERT_OK(r);
  ASSERT_OK(r->at(Uid(1)));
  cdi::Spec spec = ReadSpec(Uid(1));
  ASSERT_EQ(spec.devices.size(), 1u);
  const std::vector<std::string> nodes = Nodes(spec.devices[0].edits);
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0], "/dev/nvidia" + std::to_string(mig->minor));
  EXPECT_THAT(nodes[1], HasSubstr("/dev/nvidia-caps/nvidia-cap"));
  EXPECT_THAT(nodes[2], HasSubstr("/dev/nvidia-caps/nvidia-cap"));
  EXPECT_EQ(p->checkpoint().claims.at(Uid(1)).sharing.at(0).config.kind, ConfigKind::kMigDevice);
  // A GpuConfig named for a MIG device is refused, as NVIDIA refuses it.
  Serve("ns", "wrong", Uid(2), json::array({Result("mig", mig->name)}),
        json::array({GpuSharing({"mig"}, {{"strategy", "MPS"}})}));
  ASSERT_OK(p->Unprepare({{Uid(1), "ns", "m"}}));
  auto w = p->Prepare({{Uid(2), "ns", "wrong"}});
  ASSERT_OK(w);
  EXPECT_THAT(w->at(Uid(2)).status().message(), HasSubstr("cannot apply GpuConfig to device"));
}

}  // namespace
}  // namespace gpunode::dra
