// The DRA checkpoint: a round trip through a real file (atomic, 0600), and every way a file can be
// wrong reported with the file named, never trusted.
#include "src/dra/checkpoint.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir_test.h"

namespace gpunode::dra {
namespace {

using ::testing::HasSubstr;

constexpr char kPath[] = "/var/lib/kubelet/plugins/gpu.nvidia.com/gpunode-checkpoint.json";

Checkpoint Sample() {
  Checkpoint c;
  c.boot_id = "0f6e4c8e-2d1b-4bbd-9d43-5b8f0f8f6a11";
  PreparedClaim a;
  a.ns = "team-a";
  a.name = "train";
  a.cdi_spec = "/var/run/cdi/k8s.gpu.nvidia.com-claim_uid-a.yaml";
  PreparedDevice d;
  d.request_names = {"gpu"};
  d.pool_name = "node-1";
  d.device_name = "gpu-0";
  d.cdi_device_ids = {"k8s.gpu.nvidia.com/claim=uid-a-gpu-0"};
  a.devices.push_back(d);
  d.device_name = "gpu-1";
  d.request_names = {"gpu/small"};
  d.share_id = "7b0c1c3e-5a3e-4c3b-9d7e-2b6f8f0c9a11";
  d.cdi_device_ids = {"k8s.gpu.nvidia.com/claim=uid-a-gpu-1"};
  a.devices.push_back(d);
  SharingRecord s;
  s.devices = {"gpu-0"};
  s.uuids = {"GPU-aaaa"};
  s.config.kind = ConfigKind::kGpu;
  s.config.sharing = Sharing{SharingStrategy::kMps, std::nullopt, MpsConfig{50, Quantity{"1Gi", 1 << 30}, {}}};
  s.pinned_memory_limits = {{"GPU-aaaa", "1024M"}};
  a.sharing.push_back(s);
  a.exclusive_devices = {"gpu-0"};
  c.claims["uid-a"] = a;
  PreparedClaim b;
  b.ns = "team-b";
  b.name = "other-driver-only";
  c.claims["uid-b"] = b;
  return c;
}

void ExpectSame(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.boot_id, b.boot_id);
  ASSERT_EQ(a.claims.size(), b.claims.size());
  for (const auto& [uid, claim] : a.claims) {
    ASSERT_TRUE(b.claims.count(uid)) << uid;
    const PreparedClaim& other = b.claims.at(uid);
    EXPECT_EQ(claim.ns, other.ns);
    EXPECT_EQ(claim.name, other.name);
    EXPECT_EQ(claim.cdi_spec, other.cdi_spec);
    EXPECT_TRUE(SameDevices(claim.devices, other.devices)) << uid;
    EXPECT_EQ(claim.sharing, other.sharing) << uid;
    EXPECT_EQ(claim.exclusive_devices, other.exclusive_devices) << uid;
  }
}

class CheckpointTest : public testing::TempDirTest {
 protected:
  HostFs Fs() { return *HostFs::Open(dir_.string()); }
  std::filesystem::path File() const { return dir_ / std::string(kPath).substr(1); }
  std::string Text() const {
    std::ifstream in(File());
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void Write(const std::string& text) const { std::ofstream(File(), std::ios::trunc) << text; }
};

TEST_F(CheckpointTest, RoundTripsThroughAFileWrittenAtomicallyWithMode0600) {
  HostFs fs = Fs();
  ASSERT_OK(SaveCheckpoint(fs, kPath, Sample()));
  struct stat st {};
  ASSERT_EQ(::stat(File().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto back = LoadCheckpoint(fs, kPath);
  ASSERT_OK(back);
  ExpectSame(Sample(), *back);
  EXPECT_THAT(Text(), HasSubstr("\"version\": 1"));
  EXPECT_THAT(Text(), HasSubstr("\"checksum\": \"fnv1a64:"));
  // No temp file left beside it.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(File().parent_path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST_F(CheckpointTest, AMissingFileIsAnEmptyCheckpoint) {
  auto c = LoadCheckpoint(Fs(), kPath);
  ASSERT_OK(c);
  EXPECT_TRUE(c->claims.empty());
  EXPECT_EQ(c->boot_id, "");
}

TEST_F(CheckpointTest, AChangedByteIsDetectedAndNotTrusted) {
  HostFs fs = Fs();
  ASSERT_OK(SaveCheckpoint(fs, kPath, Sample()));
  Write(absl::StrReplaceAll(Text(), {{"\"gpu-1\"", "\"gpu-7\""}}));
  auto c = LoadCheckpoint(fs, kPath);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(c.status().message(), HasSubstr(std::string("checkpoint ") + kPath + ": checksum mismatch"));
  EXPECT_THAT(c.status().message(), HasSubstr("not trusted"));
}

TEST_F(CheckpointTest, TruncatedOrGarbageIsAClearError) {
  HostFs fs = Fs();
  ASSERT_OK(SaveCheckpoint(fs, kPath, Sample()));
  const std::string text = Text();
  Write(text.substr(0, text.size() / 2));
  auto half = LoadCheckpoint(fs, kPath);
  ASSERT_FALSE(half.ok());
  EXPECT_THAT(std::string(half.status().message()), HasSubstr(std::string("checkpoint ") + kPath + ": line "));
  Write(std::string("\0\0\0\0", 4));
  EXPECT_FALSE(LoadCheckpoint(fs, kPath).ok());
  Write("[]");
  EXPECT_THAT(LoadCheckpoint(fs, kPath).status().message(), HasSubstr("expected an object"));
  Write(R"({"kind": "Other", "version": 1})");
  EXPECT_THAT(LoadCheckpoint(fs, kPath).status().message(), HasSubstr("not a checkpoint of gpunode's DRA driver"));
  // NVIDIA's checkpoint.json is not ours.
  Write(R"({"checksum": 1234, "v2": {"preparedClaims": {}}})");
  EXPECT_FALSE(LoadCheckpoint(fs, kPath).ok());
}

TEST_F(CheckpointTest, AnotherVersionIsRefusedSayingSo) {
  HostFs fs = Fs();
  ASSERT_OK(SaveCheckpoint(fs, kPath, Sample()));
  Write(absl::StrReplaceAll(Text(), {{"\"version\": 1", "\"version\": 2"}}));
  auto c = LoadCheckpoint(fs, kPath);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(), HasSubstr("version 2 is not 1"));
}

// The file format's checksum, computed here from its description (checkpoint.h): FNV-1a 64 over
// the compact JSON of `data`.
std::string Fnv(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[40];
  std::snprintf(buf, sizeof(buf), "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return buf;
}

TEST_F(CheckpointTest, WrongTypesUnderAValidChecksumAreNamed) {
  HostFs fs = Fs();
  ASSERT_OK(SaveCheckpoint(fs, kPath, Sample()));
  nlohmann::json doc = nlohmann::json::parse(Text());
  EXPECT_EQ(doc["checksum"], Fnv(doc["data"].dump()));  // the format is what the header says
  doc["data"]["claims"]["uid-a"]["devices"][1]["device"] = 7;
  doc["checksum"] = Fnv(doc["data"].dump());
  Write(doc.dump());
  auto c = LoadCheckpoint(fs, kPath);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(),
              HasSubstr("data.claims.uid-a.devices[1].device: expected a string, got number"));
  // A sharing config that NVIDIA's format refuses is refused here too.
  doc = nlohmann::json::parse(Text().empty() ? "{}" : Text());
  ASSERT_OK(SaveCheckpoint(fs, kPath, Sample()));
  doc = nlohmann::json::parse(Text());
  doc["data"]["claims"]["uid-a"]["sharing"][0]["config"]["sharing"]["strategy"] = "Exclusive";
  doc["checksum"] = Fnv(doc["data"].dump());
  Write(doc.dump());
  c = LoadCheckpoint(fs, kPath);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("sharing[0].config.sharing.strategy: unknown GPU sharing strategy"));
}

}  // namespace
}  // namespace gpunode::dra
