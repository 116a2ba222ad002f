// The pieces every store shares: platforms, the names a reference is stored under, digests, and the
// walk from an index or manifest to the config blob (over an in-memory content store).
#include "src/image/store_common.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpunode::image {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Platform, ParsesAndPrints) {
  auto p = ParsePlatform("linux/arm64/v8");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->os, "linux");
  EXPECT_EQ(p->architecture, "arm64");
  EXPECT_EQ(p->variant, "v8");
  EXPECT_EQ(p->ToString(), "linux/arm64/v8");
  EXPECT_EQ(ParsePlatform("linux/amd64")->ToString(), "linux/amd64");
  EXPECT_EQ(ParsePlatform("Linux/x86_64")->ToString(), "linux/amd64");  // case and aliases, as Docker's
  for (const char* bad : {"", "linux", "linux/", "linux/amd64/v8/x", "linux/amd 64"}) {
    auto b = ParsePlatform(bad);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(b.status().message(), HasSubstr("OS/ARCH[/VARIANT]")) << bad;
  }
}

TEST(Platform, Arm64WithoutVariantIsV8) {
  Platform v8 = *ParsePlatform("linux/arm64/v8");
  EXPECT_TRUE(PlatformMatches(v8, "linux", "arm64", ""));
  EXPECT_TRUE(PlatformMatches(v8, "linux", "arm64", "v8"));
  EXPECT_FALSE(PlatformMatches(*ParsePlatform("linux/arm/v7"), "linux", "arm", "v6"));
  EXPECT_TRUE(PlatformMatches(Platform{}, "linux", "amd64", ""));
  EXPECT_FALSE(PlatformMatches(Platform{}, "windows", "amd64", ""));
}

TEST(CandidateNames, FullNamesMostSpecificFirst) {
  EXPECT_THAT(CandidateNames(*compat::ParseImageRef("ubuntu")), ElementsAre("docker.io/library/ubuntu:latest"));
  EXPECT_THAT(CandidateNames(*compat::ParseImageRef("nvcr.io/nvidia/pytorch:25.08-py3")),
              ElementsAre("nvcr.io/nvidia/pytorch:25.08-py3"));
  const std::string d = "sha256:" + std::string(64, 'a');
  EXPECT_THAT(CandidateNames(*compat::ParseImageRef("ubuntu:22.04@" + d)),
              ElementsAre("docker.io/library/ubuntu:22.04@" + d, "docker.io/library/ubuntu@" + d,
                          "docker.io/library/ubuntu:22.04"));
  EXPECT_THAT(CandidateNames(*compat::ParseImageRef("localhost/x@" + d)), ElementsAre("localhost/x@" + d));
  EXPECT_EQ(RepositoryOf("ubuntu:22.04"), "docker.io/library/ubuntu");
  EXPECT_EQ(RepositoryOf("NOT A NAME"), "");
}

TEST(Digest, Sha256AndChecks) {
  EXPECT_EQ(Sha256Digest(""), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_TRUE(VerifyDigest("", Sha256Digest(""), "blob").ok());
  auto bad = VerifyDigest("x", Sha256Digest(""), "blob");
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad.message(), HasSubstr("blob: bad digest: the content hashes to sha256:2d71"));
  for (const char* d : {"sha256:../../etc/passwd", "md5:abc", "sha256:ABC", ""}) {
    EXPECT_EQ(CheckDigest(d, "x").code(), absl::StatusCode::kInvalidArgument) << d;
  }
}

// An in-memory content store: blobs by digest, and the reads it was asked for.
struct Blobs {
  std::map<std::string, std::string> by_digest;
  std::vector<std::string> asked;
  std::string Add(const std::string& data) {
    const std::string d = Sha256Digest(data);
    by_digest[d] = data;
    return d;
  }
  BlobReader Reader() {
    return [this](const Descriptor& d, size_t max) -> StatusOr<std::string> {
      asked.push_back(d.digest);
      auto it = by_digest.find(d.digest);
      if (it == by_digest.end()) return absl::NotFoundError("blob " + d.digest + " absent");
      if (it->second.size() > max) return absl::InvalidArgumentError("too big");
      GPUNODE_RETURN_IF_ERROR(VerifyDigest(it->second, d.digest, "blob"));
      return it->second;
    };
  }
};

std::string Manifest(const std::string& config_digest, size_t size, const char* type = "application/vnd.oci.image.manifest.v1+json") {
  nlohmann::json m = {{"schemaVersion", 2},
                      {"mediaType", type},
                      {"config", {{"mediaType", "application/vnd.oci.image.config.v1+json"}, {"digest", config_digest}, {"size", size}}},
                      {"layers", nlohmann::json::array()}};
  return m.dump();
}

nlohmann::json Entry(const std::string& digest, const std::string& os, const std::string& arch, const std::string& variant = "") {
  nlohmann::json p = {{"os", os}, {"architecture", arch}};
  if (!variant.empty()) p["variant"] = variant;
  return {{"mediaType", "application/vnd.oci.image.manifest.v1+json"}, {"digest", digest}, {"size", 100}, {"platform", p}};
}

TEST(ResolveConfig, ManifestToConfig) {
  Blobs b;
  const std::string cfg = R"({"os":"linux","architecture":"amd64","config":{"Env":["CUDA_VERSION=12.8.1"]}})";
  const std::string cd = b.Add(cfg);
  const std::string man = Manifest(cd, cfg.size());
  Descriptor top{"application/vnd.oci.image.manifest.v1+json", Sha256Digest(man), -1};
  auto r = ResolveConfig(man, top, Platform{}, b.Reader(), "test");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->manifest_digest, top.digest);
  EXPECT_EQ(r->config.digest, cd);
  EXPECT_EQ(r->config_json, cfg);
  auto c = ConfigFromResolved(*r, "x:1", top.digest, "image config (test)", "test", "test");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(EnvValue(*c, "CUDA_VERSION"), "12.8.1");
  EXPECT_EQ(c->digest, top.digest);
  EXPECT_EQ(c->config_digest, cd);
  EXPECT_EQ(c->source, "image config (test)");
}

TEST(ResolveConfig, IndexPicksThePlatformAndSkipsAttestations) {
  Blobs b;
  const std::string amd = R"({"os":"linux","architecture":"amd64","config":{"Env":["A=amd"]}})";
  const std::string arm = R"({"os":"linux","architecture":"arm64","variant":"v8","config":{"Env":["A=arm"]}})";
  const std::string m_amd = Manifest(b.Add(amd), amd.size());
  const std::string m_arm = Manifest(b.Add(arm), arm.size());
  const std::string d_amd = b.Add(m_amd), d_arm = b.Add(m_arm);
  nlohmann::json index = {{"schemaVersion", 2},
                          {"mediaType", "application/vnd.oci.image.index.v1+json"},
                          {"manifests", {Entry(d_arm, "linux", "arm64", "v8"), Entry(std::string("sha256:") + std::string(64, '0'), "unknown", "unknown"),
                                         Entry(d_amd, "linux", "amd64")}}};
  const std::string idx = index.dump();
  Descriptor top{"", Sha256Digest(idx), -1};
  auto r = ResolveConfig(idx, top, Platform{}, b.Reader(), "t");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->manifest_digest, d_amd);
  EXPECT_THAT(r->config_json, HasSubstr("A=amd"));
  auto r2 = ResolveConfig(idx, top, *ParsePlatform("linux/arm64"), b.Reader(), "t");
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_THAT(r2->config_json, HasSubstr("A=arm"));
  auto none = ResolveConfig(idx, top, *ParsePlatform("linux/ppc64le"), b.Reader(), "store: image x");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr("no image for linux/ppc64le (the index has: linux/arm64/v8, linux/amd64)"));
  EXPECT_THAT(none.status().message(), HasSubstr("store: image x"));
}

TEST(ResolveConfig, ABlobNotPresentLocallyIsNotFound) {
  Blobs b;
  nlohmann::json index = {{"manifests", {Entry(std::string("sha256:") + std::string(64, 'b'), "linux", "amd64")}}};
  const std::string idx = index.dump();
  auto r = ResolveConfig(idx, Descriptor{"", Sha256Digest(idx), -1}, Platform{}, b.Reader(), "t");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("absent"));
}

TEST(ResolveConfig, RefusesWhatIsTooBigDeepOrMalformed) {
  Blobs b;
  // A config announced larger than the bound is not read at all.
  const std::string huge = Manifest(std::string("sha256:") + std::string(64, 'c'), kMaxConfigBytes + 1);
  auto r = ResolveConfig(huge, Descriptor{"", Sha256Digest(huge), -1}, Platform{}, b.Reader(), "t");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("more than the 4194304 gpunode reads"));
  EXPECT_TRUE(b.asked.empty());
  // A digest that is not one (a path) is refused before any read.
  const std::string path_like = R"({"config":{"digest":"sha256:../../../etc/shadow","size":1}})";
  r = ResolveConfig(path_like, Descriptor{"", Sha256Digest(path_like), -1}, Platform{}, b.Reader(), "t");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("is not a sha256 digest"));
  EXPECT_TRUE(b.asked.empty());
  // Indexes of indexes of indexes.
  nlohmann::json inner = {{"mediaType", "application/vnd.oci.image.index.v1+json"}, {"manifests", nlohmann::json::array()}};
  std::string level = inner.dump();
  for (int i = 0; i < 3; ++i) {
    nlohmann::json e = Entry(b.Add(level), "linux", "amd64");
    e["mediaType"] = "application/vnd.oci.image.index.v1+json";
    level = nlohmann::json{{"mediaType", "application/vnd.oci.image.index.v1+json"}, {"manifests", {e}}}.dump();
  }
  r = ResolveConfig(level, Descriptor{"", Sha256Digest(level), -1}, Platform{}, b.Reader(), "t");
  EXPECT_THAT(r.status().message(), HasSubstr("nested more than 2 deep"));
  // Neither an index nor a manifest; not JSON; JSON too deep.
  r = ResolveConfig(R"({"layers":[]})", Descriptor{}, Platform{}, b.Reader(), "t");
  EXPECT_THAT(r.status().message(), HasSubstr("neither an index"));
  r = ResolveConfig("{\"config\":", Descriptor{}, Platform{}, b.Reader(), "t");
  EXPECT_FALSE(r.ok());
  r = ResolveConfig(std::string(1000, '[') + std::string(1000, ']'), Descriptor{}, Platform{}, b.Reader(), "t");
  EXPECT_FALSE(r.ok());
}

TEST(ResolveConfig, AConfigOfAnotherDigestIsRefused) {
  Blobs b;
  const std::string cfg = R"({"config":{}})";
  const std::string real = b.Add(cfg);
  const std::string wrong = "sha256:" + std::string(64, 'd');
  b.by_digest[wrong] = cfg;  // stored under a digest it does not have
  const std::string man = Manifest(wrong, cfg.size());
  auto r = ResolveConfig(man, Descriptor{}, Platform{}, b.Reader(), "t");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr(real));
}

}  // namespace
}  // namespace gpunode::image
