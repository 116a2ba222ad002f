// The DRA node service over real gRPC, both API versions, against the kubelet's DRA emulator and a
// table-driven ClaimPreparer: answers per claim (devices, errors, missing answers), the whole call's
// errors, v1's share_id and v1beta1 without it, and the bounds: malformed claims, too many claims,
// an oversized request, calls one at a time, a call that cannot wait past its deadline.
#include "src/dra/node_service.h"

#include <future>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/dra/dra_fixture.h"
#include "test/testing/status_matchers.h"

namespace gpunode::dra {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using namespace std::chrono_literals;
using testing::DraClaim;
using testing::DraClaimResult;
using testing::KubeletDraEmulator;

class NodeServiceTest : public DraTest {
 protected:
  void SetUp() override {
    DraTest::SetUp();
    ASSERT_TRUE(StartKubelet());
    StartPlugin();
    ASSERT_TRUE(kubelet_->WaitForRegistrations(1, 10s)) << Log();
  }
};

const DraClaim kA{"7f3c1c1e-0000-4000-8000-00000000000a", "team-a", "claim-a", {"gpu"}};
const DraClaim kB{"7f3c1c1e-0000-4000-8000-00000000000b", "team-b", "claim-b", {"big", "small"}};

TEST_F(NodeServiceTest, BothVersionsAnswerTheSameDevices) {
  PreparedDevice shared = Gpu("node-a", 2, {"gpu"});
  shared.share_id = "share-1";
  preparer_.prepare_table[kA.uid] = std::vector<PreparedDevice>{shared};
  for (const std::string service : {KubeletDraEmulator::kV1, KubeletDraEmulator::kV1Beta1}) {
    SCOPED_TRACE(service);
    std::map<std::string, DraClaimResult> out;
    ASSERT_TRUE(kubelet_->Prepare(kDriver, {kA}, &out, service).ok());
    EXPECT_EQ(KubeletDraEmulator::KubeletVerdict({kA}, out), "");
    ASSERT_EQ(out[kA.uid].devices.size(), 1u);
    const auto& d = out[kA.uid].devices[0];
    EXPECT_THAT(d.request_names, ElementsAre("gpu"));
    EXPECT_EQ(d.pool_name, "node-a");
    EXPECT_EQ(d.device_name, "gpu-2");
    EXPECT_THAT(d.cdi_device_ids, ElementsAre("k8s.gpu.nvidia.com/device=gpu-2"));
    // share_id exists in v1 only.
    EXPECT_EQ(d.share_id, service == std::string(KubeletDraEmulator::kV1) ? std::optional<std::string>("share-1")
                                                                         : std::nullopt);
    std::map<std::string, std::string> errors;
    ASSERT_TRUE(kubelet_->Unprepare(kDriver, {kA}, &errors, service).ok());
    EXPECT_THAT(errors, ElementsAre(std::pair<const std::string, std::string>(kA.uid, "")));
  }
  // The preparer saw our types, the same for both versions.
  auto calls = preparer_.calls();
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[0].first, "prepare");
  EXPECT_THAT(calls[0].second, ElementsAre(ClaimRef{kA.uid, "team-a", "claim-a"}));
  EXPECT_EQ(calls[0].second, calls[2].second);
}

TEST_F(NodeServiceTest, ErrorsPerClaimAreCarriedBack) {
  preparer_.prepare_table[kA.uid] = std::vector<PreparedDevice>{Gpu("node-a", 0, {"gpu"})};
  preparer_.prepare_table[kB.uid] = absl::FailedPreconditionError("GpuConfig: unknown field \"sharing.foo\"");
  const DraClaim c{"7f3c1c1e-0000-4000-8000-00000000000c", "team-c", "claim-c", {}};  // no answer from the driver
  std::map<std::string, DraClaimResult> out;
  ASSERT_TRUE(kubelet_->Prepare(kDriver, {kA, kB, c}, &out).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[kA.uid].error, "");
  EXPECT_EQ(out[kA.uid].devices.size(), 1u);
  EXPECT_EQ(out[kB.uid].error, "GpuConfig: unknown field \"sharing.foo\"");
  EXPECT_THAT(out[kB.uid].devices, IsEmpty());
  EXPECT_THAT(out[c.uid].error, HasSubstr("claim team-c/claim-c (" + c.uid + "): the driver gave no answer"));
  EXPECT_EQ(KubeletDraEmulator::KubeletVerdict({kA, kB, c}, out),
            "NodePrepareResources failed for ResourceClaim claim-b: GpuConfig: unknown field \"sharing.foo\"");
  EXPECT_THAT(Log(), HasSubstr("team-b/claim-b"));

  preparer_.unprepare_table[kB.uid] = absl::InternalError("remove CDI spec: Permission denied");
  std::map<std::string, std::string> errors;
  ASSERT_TRUE(kubelet_->Unprepare(kDriver, {kA, kB}, &errors).ok());
  EXPECT_EQ(errors[kA.uid], "");
  EXPECT_EQ(errors[kB.uid], "remove CDI spec: Permission denied");
}

TEST_F(NodeServiceTest, ADeviceWithoutPoolOrNameFailsItsClaim) {
  PreparedDevice bad = Gpu("", 0);
  preparer_.prepare_table[kA.uid] = std::vector<PreparedDevice>{bad};
  std::map<std::string, DraClaimResult> out;
  ASSERT_TRUE(kubelet_->Prepare(kDriver, {kA}, &out).ok());
  EXPECT_THAT(out[kA.uid].error, HasSubstr("a device without pool or name"));
  EXPECT_THAT(out[kA.uid].devices, IsEmpty());
}

TEST_F(NodeServiceTest, AFailedCallIsAGrpcError) {
  preparer_.whole_call = absl::UnavailableError("the API server does not answer");
  std::map<std::string, DraClaimResult> out;
  grpc::Status st = kubelet_->Prepare(kDriver, {kA}, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(st.error_message(), "NodePrepareResources: the API server does not answer");
  std::map<std::string, std::string> errors;
  st = kubelet_->Unprepare(kDriver, {kA}, &errors, KubeletDraEmulator::kV1Beta1);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(NodeServiceTest, TheSameClaimTwiceIsPreparedOnce) {
  preparer_.prepare_table[kA.uid] = std::vector<PreparedDevice>{Gpu("node-a", 0)};
  std::map<std::string, DraClaimResult> out;
  ASSERT_TRUE(kubelet_->Prepare(kDriver, {kA, kA}, &out).ok());
  EXPECT_EQ(out.size(), 1u);
  ASSERT_EQ(preparer_.calls().size(), 1u);
  EXPECT_EQ(preparer_.calls()[0].second.size(), 1u);
  // One UID with two names is not a claim the API server can have made.
  DraClaim twin = kB;
  twin.uid = kA.uid;
  grpc::Status st = kubelet_->Prepare(kDriver, {kA, twin}, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("claims[1]: uid " + kA.uid + " is also claims[0]"));
}

TEST_F(NodeServiceTest, MalformedClaimsAreRefusedByName) {
  struct Case {
    DraClaim claim;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"", "ns", "n", {}}, "claims[0]: uid \"\" is not a UID"},
      {{"../../etc", "ns", "n", {}}, "claims[0]: uid \"../../etc\" is not a UID"},
      {{std::string(129, 'a'), "ns", "n", {}}, "is not a UID"},
      {{"u1", "", "n", {}}, "claims[0]: namespace \"\" is not a namespace"},
      {{"u1", "Team", "n", {}}, "namespace \"Team\" is not a namespace"},
      {{"u1", std::string(64, 'a'), "n", {}}, "is not a namespace"},
      {{"u1", "ns", "a/b", {}}, "claims[0]: name \"a/b\" is not a ResourceClaim name"},
      {{"u1", "ns", "x\x1b[2J", {}}, "name \"x\\x1b[2J\" is not"},
      {{"u1", "ns", std::string(254, 'a'), {}}, "is not a ResourceClaim name"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message);
    std::map<std::string, DraClaimResult> out;
    grpc::Status st = kubelet_->Prepare(kDriver, {c.claim}, &out);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(st.error_message(), HasSubstr(c.message));
    std::map<std::string, std::string> errors;
    st = kubelet_->Unprepare(kDriver, {c.claim}, &errors);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  EXPECT_THAT(preparer_.calls(), IsEmpty());
}

TEST_F(NodeServiceTest, TooManyClaimsAreRefused) {
  std::vector<DraClaim> claims;
  for (int i = 0; i < 257; ++i) claims.push_back({"uid-" + std::to_string(i), "ns", "c" + std::to_string(i), {}});
  std::map<std::string, DraClaimResult> out;
  grpc::Status st = kubelet_->Prepare(kDriver, claims, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("the request has 257 claims; at most 256"));
  claims.pop_back();
  EXPECT_TRUE(kubelet_->Prepare(kDriver, claims, &out).ok());
  EXPECT_EQ(out.size(), 256u);
}

TEST_F(NodeServiceTest, AnOversizedRequestIsRefusedAndTheServiceGoesOn) {
  // 2 MiB of claim name: over the 1 MiB the node service accepts, refused before it is parsed.
  std::map<std::string, DraClaimResult> out;
  grpc::Status st = kubelet_->Prepare(kDriver, {{"u1", "ns", std::string(2 << 20, 'a'), {}}}, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_THAT(preparer_.calls(), IsEmpty());
  preparer_.prepare_table[kA.uid] = std::vector<PreparedDevice>{Gpu("node-a", 0)};
  EXPECT_TRUE(kubelet_->Prepare(kDriver, {kA}, &out).ok());
  EXPECT_EQ(out[kA.uid].devices.size(), 1u);
}

TEST_F(NodeServiceTest, CallsReachThePreparerOneAtATime) {
  preparer_.prepare_table[kA.uid] = std::vector<PreparedDevice>{Gpu("node-a", 0)};
  preparer_.Hold();
  std::vector<std::future<grpc::Status>> calls;
  for (int i = 0; i < 4; ++i) {
    calls.push_back(std::async(std::launch::async, [this] {
      std::map<std::string, DraClaimResult> out;
      return kubelet_->Prepare(kDriver, {kA}, &out);
    }));
  }
  ASSERT_TRUE(preparer_.WaitForCalls(1, 5s));
  std::this_thread::sleep_for(200ms);  // the others would have entered by now
  EXPECT_EQ(preparer_.calls().size(), 1u);
  preparer_.Release();
  for (auto& c : calls) EXPECT_TRUE(c.get().ok());
  EXPECT_EQ(preparer_.calls().size(), 4u);
  EXPECT_EQ(preparer_.max_concurrent(), 1);
}

TEST_F(NodeServiceTest, ACallThatCannotWaitPastItsDeadlineFails) {
  preparer_.prepare_table[kA.uid] = std::vector<PreparedDevice>{Gpu("node-a", 0)};
  preparer_.Hold();
  auto first = std::async(std::launch::async, [this] {
    std::map<std::string, DraClaimResult> out;
    return kubelet_->Prepare(kDriver, {kA}, &out);
  });
  ASSERT_TRUE(preparer_.WaitForCalls(1, 5s));
  std::map<std::string, DraClaimResult> out;
  grpc::Status st = kubelet_->Prepare(kDriver, {kA}, &out, "", 300ms);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  preparer_.Release();
  EXPECT_TRUE(first.get().ok());
}

TEST(NodeServiceCheck, ClaimsAreCheckedWithoutGrpc) {
  auto ok = NodeService::CheckClaims({{"u1", "ns", "a.b-c"}, {"u2", "ns", "d"}, {"u1", "ns", "a.b-c"}}, 8);
  ASSERT_OK(ok);
  EXPECT_THAT(*ok, ElementsAre(ClaimRef{"u1", "ns", "a.b-c"}, ClaimRef{"u2", "ns", "d"}));
  EXPECT_TRUE(NodeService::CheckClaims({}, 8).ok());
  EXPECT_FALSE(NodeService::CheckClaims({{"u1", "ns", "a"}, {"u2", "ns", "b"}}, 1).ok());
}

}  // namespace
}  // namespace gpunode::dra
