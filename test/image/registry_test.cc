// FetchFromRegistry against a registry stand-in on loopback (cpp-httplib, plain HTTP): the
// distribution API's answers, auth flows, redirects and hostile answers. test/image/
// e2e_registry_test.sh runs the same client against Debian's docker-registry over TLS.
#include "src/image/registry.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace gpunode::image {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::string ConfigBlob(const std::string& arch, const std::string& env) {
  return absl::StrCat(R"({"architecture":")", arch, R"(","os":"linux","config":{"Env":[")", env,
                      R"("],"Labels":{"maintainer":"test"}}})");
}

std::string Manifest(const std::string& config) {
  return absl::StrCat(R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)",
                      R"("config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":")",
                      Sha256Digest(config), R"(","size":)", config.size(), R"(},"layers":[]})");
}

// A registry: manifests and blobs by path, optional auth, counters of what was asked.
class TestRegistry {
 public:
  TestRegistry() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    server_.Get(R"(/v2/(.+)/manifests/(.+))", [this](const httplib::Request& q, httplib::Response& r) {
      Serve(q, r, absl::StrCat(q.matches[1].str(), "@", q.matches[2].str()));
    });
    server_.Get(R"(/v2/(.+)/blobs/(.+))", [this](const httplib::Request& q, httplib::Response& r) {
      if (!blob_redirect_.empty()) {
        r.status = 307;
        r.set_header("Location", blob_redirect_ + q.matches[2].str());
        return;
      }
      Serve(q, r, q.matches[2].str());
    });
    server_.Get(R"(/storage/(.+))", [this](const httplib::Request& q, httplib::Response& r) {
      storage_saw_auth_ = q.has_header("Authorization");
      Serve(q, r, q.matches[1].str(), /*check_auth=*/false);
    });
    server_.Get("/token", [this](const httplib::Request& q, httplib::Response& r) {
      ++token_requests_;
      if (!basic_.empty() && q.get_header_value("Authorization") != "Basic " + absl::Base64Escape(basic_)) {
        r.status = 401;
        return;
      }
      last_scope_ = q.get_param_value("scope");
      r.set_content(R"({"token":"tok-123","expires_in":300})", "application/json");
    });
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~TestRegistry() {
    server_.stop();
    thread_.join();
  }

  std::string Host() const { return absl::StrCat("127.0.0.1:", port_); }
  std::string Ref(const std::string& rest) const { return absl::StrCat(Host(), "/", rest); }

  void Put(const std::string& key, std::string body, std::string type = "") {
    std::lock_guard<std::mutex> l(mu_);
    content_[key] = {std::move(body), std::move(type)};
  }
  // An image: config + manifest under repo:tag and repo@digest; returns the manifest's digest.
  std::string PutImage(const std::string& repo, const std::string& tag, const std::string& config) {
    const std::string m = Manifest(config);
    Put(Sha256Digest(config), config);
    Put(absl::StrCat(repo, "@", tag), m, "application/vnd.oci.image.manifest.v1+json");
    Put(absl::StrCat(repo, "@", Sha256Digest(m)), m, "application/vnd.oci.image.manifest.v1+json");
    return Sha256Digest(m);
  }

  httplib::Server server_;
  int port_ = 0;
  std::string auth_mode_;  // "", "bearer", "basic"
  std::string basic_;      // user:password the token endpoint or the registry wants
  std::string blob_redirect_;
  std::atomic<bool> storage_saw_auth_{false};
  std::atomic<int> token_requests_{0};
  std::string last_scope_;
  std::function<bool(const httplib::Request&, httplib::Response&)> override_;

 private:
  void Serve(const httplib::Request& q, httplib::Response& r, const std::string& key, bool check_auth = true) {
    if (override_ && override_(q, r)) return;
    if (check_auth && auth_mode_ == "bearer" && q.get_header_value("Authorization") != "Bearer tok-123") {
      r.status = 401;
      r.set_header("WWW-Authenticate", absl::StrCat("Bearer realm=\"http://", Host(),
                                                    "/token\",service=\"test\",scope=\"repository:x:pull\""));
      return;
    }
    if (check_auth && auth_mode_ == "basic" &&
        q.get_header_value("Authorization") != "Basic " + absl::Base64Escape(basic_)) {
      r.status = 401;
      r.set_header("WWW-Authenticate", "Basic realm=\"test\"");
      r.set_content(R"({"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]})", "application/json");
      return;
    }
    std::lock_guard<std::mutex> l(mu_);
    auto it = content_.find(key);
    if (it == content_.end()) {
      r.status = 404;
      r.set_content(R"({"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]})", "application/json");
      return;
    }
    r.set_content(it->second.first, it->second.second.empty() ? "application/octet-stream" : it->second.second);
  }

  std::mutex mu_;
  std::map<std::string, std::pair<std::string, std::string>> content_;
  std::thread thread_;
};

RegistryOptions Plain() {
  RegistryOptions o;
  o.plain_http = true;
  o.use_docker_config = false;
  o.timeout = 10s;
  return o;
}

StatusOr<ImageConfig> Fetch(const std::string& ref, const RegistryOptions& o) {
  auto r = compat::ParseImageRef(ref);
  if (!r.ok()) return r.status();
  return FetchFromRegistry(*r, o);
}

TEST(RegistryPieces, PlatformParsing) {
  auto p = ParsePlatform("linux/aarch64/v8");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->ToString(), "linux/arm64/v8");
  EXPECT_EQ(ParsePlatform("linux/x86_64")->ToString(), "linux/amd64");
  EXPECT_FALSE(ParsePlatform("linux").ok());
  EXPECT_FALSE(ParsePlatform("linux/amd64/").ok());
  EXPECT_FALSE(ParsePlatform("linux/am d64").ok());
  EXPECT_EQ(RegistryEndpointHost("docker.io"), "registry-1.docker.io");
  EXPECT_EQ(RegistryEndpointHost("nvcr.io"), "nvcr.io");
}

TEST(RegistryPieces, ChoosePlatform) {
  const std::string d1(64, '1'), d2(64, '2'), d3(64, '3');
  auto index = nlohmann::json::parse(absl::StrCat(R"({"manifests":[
    {"digest":"sha256:)", d1, R"(","platform":{"os":"linux","architecture":"amd64"}},
    {"digest":"sha256:)", d2, R"(","platform":{"os":"linux","architecture":"arm64","variant":"v8"}},
    {"digest":"sha256:)", d3, R"(","platform":{"os":"unknown","architecture":"unknown"}}]})"));
  EXPECT_EQ(ChoosePlatform(index, *ParsePlatform("linux/amd64"), "i")->digest, "sha256:" + d1);
  EXPECT_EQ(ChoosePlatform(index, *ParsePlatform("linux/arm64"), "i")->digest, "sha256:" + d2);
  EXPECT_EQ(ChoosePlatform(index, *ParsePlatform("linux/arm64/v8"), "i")->digest, "sha256:" + d2);
  auto none = ChoosePlatform(index, *ParsePlatform("linux/arm64/v9"), "idx");
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()),
              HasSubstr("idx: no image for platform linux/arm64/v9; the index has linux/amd64, linux/arm64/v8"));
  none = ChoosePlatform(index, *ParsePlatform("windows/amd64"), "idx");
  ASSERT_FALSE(none.ok());
}

TEST(RegistryPieces, Digests) {
  EXPECT_TRUE(VerifyDigest("abc", Sha256Digest("abc"), "x").ok());
  EXPECT_EQ(Sha256Digest("abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto bad = VerifyDigest("abd", Sha256Digest("abc"), "blob");
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("blob: bad digest"));
  EXPECT_EQ(VerifyDigest("abc", "md5:900150983cd24fb0d6963f7d28e17f72", "x").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(VerifyDigest("abc", "sha256:../../etc", "x").code(), absl::StatusCode::kInvalidArgument);
}

TEST(Registry, ManifestByTagAndByDigest) {
  TestRegistry reg;
  const std::string cfg = ConfigBlob("amd64", "CUDA_VERSION=12.8.1");
  const std::string digest = reg.PutImage("nvidia/cuda", "12.8.1", cfg);
  auto c = Fetch(reg.Ref("nvidia/cuda:12.8.1"), Plain());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(EnvValue(*c, "CUDA_VERSION"), "12.8.1");
  EXPECT_EQ(c->digest, digest);
  EXPECT_EQ(c->config_digest, Sha256Digest(cfg));
  EXPECT_EQ(c->source, "registry " + reg.Host());
  EXPECT_EQ(c->source_kind, "registry");
  c = Fetch(reg.Ref("nvidia/cuda@" + digest), Plain());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->digest, digest);
}

TEST(Registry, TamperedManifestOrBlobIsRefused) {
  TestRegistry reg;
  const std::string cfg = ConfigBlob("amd64", "A=1");
  const std::string digest = reg.PutImage("x", "t", cfg);
  // The registry serves other bytes under the digest asked.
  reg.Put("x@" + digest, Manifest(ConfigBlob("amd64", "A=2")), "application/vnd.oci.image.manifest.v1+json");
  auto c = Fetch(reg.Ref("x@" + digest), Plain());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("registry " + reg.Host() + ", repository x: manifest: bad digest"));
  // A blob of the same size that hashes to something else.
  reg.Put(Sha256Digest(cfg), ConfigBlob("amd64", "A=3"));
  c = Fetch(reg.Ref("x:t"), Plain());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("config blob: bad digest"));
}

TEST(Registry, IndexChoosesThePlatform) {
  TestRegistry reg;
  const std::string amd = ConfigBlob("amd64", "NVARCH=x86_64"), arm = ConfigBlob("arm64", "NVARCH=sbsa");
  const std::string da = reg.PutImage("multi", "amd", amd), dr = reg.PutImage("multi", "arm", arm);
  const std::string index = absl::StrCat(
      R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[)",
      R"({"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":")", da, R"(","size":1,)",
      R"("platform":{"os":"linux","architecture":"amd64"}},)",
      R"({"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":")", dr, R"(","size":1,)",
      R"("platform":{"os":"linux","architecture":"arm64","variant":"v8"}}]})");
  reg.Put("multi@v1", index, "application/vnd.oci.image.index.v1+json");
  auto c = Fetch(reg.Ref("multi:v1"), Plain());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(EnvValue(*c, "NVARCH"), "x86_64");
  EXPECT_EQ(c->digest, da);
  RegistryOptions o = Plain();
  o.platform = "linux/arm64";
  c = Fetch(reg.Ref("multi:v1"), o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(EnvValue(*c, "NVARCH"), "sbsa");
  EXPECT_EQ(c->architecture, "arm64");
  o.platform = "linux/ppc64le";
  c = Fetch(reg.Ref("multi:v1"), o);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("the index has linux/amd64, linux/arm64/v8"));
}

TEST(Registry, BearerTokenFlowWithBasicCredentials) {
  TestRegistry reg;
  reg.auth_mode_ = "bearer";
  reg.basic_ = "alice:s3cret";
  reg.PutImage("private/img", "1", ConfigBlob("amd64", "A=1"));
  RegistryOptions o = Plain();
  o.credential = *ParseUserPassword("alice:s3cret", "--registry-auth");
  auto c = Fetch(reg.Ref("private/img:1"), o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(reg.token_requests_.load(), 1);  // one token serves manifest and blob
  EXPECT_EQ(reg.last_scope_, "repository:x:pull");  // the challenge's scope is used as given
  o.credential = *ParseUserPassword("alice:wrong", "--registry-auth");
  c = Fetch(reg.Ref("private/img:1"), o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("refused the credentials from --registry-auth"));
}

TEST(Registry, BasicAuthAndCredentialsFromDockerConfig) {
  TestRegistry reg;
  reg.auth_mode_ = "basic";
  reg.basic_ = "bob:pw";
  reg.PutImage("b", "1", ConfigBlob("amd64", "A=1"));
  RegistryOptions o = Plain();
  auto c = Fetch(reg.Ref("b:1"), o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("there are none"));
  o.docker_config_json = absl::StrCat(R"({"auths":{")", reg.Host(), R"(":{"auth":")",
                                      absl::Base64Escape("bob:pw"), R"("}}})");
  o.docker_config_json_source = "secret ns/pull";
  c = Fetch(reg.Ref("b:1"), o);
  ASSERT_TRUE(c.ok()) << c.status();
  o.docker_config_json = absl::StrCat(R"({"auths":{")", reg.Host(), R"(":{"auth":")",
                                      absl::Base64Escape("bob:nope"), R"("}}})");
  c = Fetch(reg.Ref("b:1"), o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("secret ns/pull (auths"));
}

TEST(Registry, ErrorsNameRegistryAndRepository) {
  TestRegistry reg;
  auto c = Fetch(reg.Ref("nothing/here:1"), Plain());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("registry " + reg.Host() + ", repository nothing/here: manifest 1: not found (HTTP 404): "
                        "manifest unknown (MANIFEST_UNKNOWN)"));
  reg.override_ = [](const httplib::Request&, httplib::Response& r) {
    r.status = 429;
    r.set_header("Retry-After", "30");
    r.set_content(R"({"errors":[{"code":"TOOMANYREQUESTS","message":"You have reached your pull rate limit."}]})",
                  "application/json");
    return true;
  };
  c = Fetch(reg.Ref("x:1"), Plain());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("rate-limited (HTTP 429): You have reached your pull rate "
                                                           "limit. (TOOMANYREQUESTS); retry after 30 s"));
  reg.override_ = [](const httplib::Request&, httplib::Response& r) {
    r.status = 403;
    return true;
  };
  c = Fetch(reg.Ref("x:1"), Plain());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kPermissionDenied);
  reg.override_ = [](const httplib::Request&, httplib::Response& r) {
    r.set_content(R"({"schemaVersion":1,"name":"x"})", "application/vnd.docker.distribution.manifest.v1+prettyjws");
    return true;
  };
  c = Fetch(reg.Ref("x:1"), Plain());
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("unknown media type"));
}

TEST(Registry, BlobRedirectToStorageGetsNoCredentials) {
  TestRegistry reg;
  reg.auth_mode_ = "basic";
  reg.basic_ = "u:p";
  reg.PutImage("r", "1", ConfigBlob("amd64", "A=1"));
  // Another host name for the same server: "localhost" is not the registry's "127.0.0.1".
  reg.blob_redirect_ = absl::StrCat("http://localhost:", reg.port_, "/storage/");
  RegistryOptions o = Plain();
  o.credential = *ParseUserPassword("u:p", "--registry-auth");
  auto c = Fetch(reg.Ref("r:1"), o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(reg.storage_saw_auth_.load());
  // A redirect loop ends.
  reg.blob_redirect_ = absl::StrCat("http://127.0.0.1:", reg.port_, "/v2/r/blobs/");
  c = Fetch(reg.Ref("r:1"), o);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("more than 5 redirects"));
}

TEST(Registry, HostileAnswersAreBounded) {
  TestRegistry reg;
  reg.override_ = [](const httplib::Request&, httplib::Response& r) {
    r.set_content(std::string(kMaxManifestBytes + 10, ' '), "application/vnd.oci.image.manifest.v1+json");
    return true;
  };
  auto c = Fetch(reg.Ref("x:1"), Plain());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  reg.override_ = [](const httplib::Request&, httplib::Response& r) {
    r.set_content(std::string(100000, '[') + std::string(100000, ']'), "application/vnd.oci.image.manifest.v1+json");
    return true;
  };
  c = Fetch(reg.Ref("x:1"), Plain());
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("nested deeper than"));
  // A trickle: a byte every 100 ms, forever. The lookup's deadline (1 s) holds.
  reg.override_ = [](const httplib::Request&, httplib::Response& r) {
    r.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink& sink) {
      std::this_thread::sleep_for(100ms);
      return sink.write(" ", 1);
    });
    return true;
  };
  RegistryOptions o = Plain();
  o.timeout = 1s;
  const auto start = std::chrono::steady_clock::now();
  c = Fetch(reg.Ref("x:1"), o);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
  EXPECT_LT(took, 2500ms);
  EXPECT_GE(took, 900ms);
}

TEST(Registry, NoNetwork) {
  // A port that was free a moment ago and that nothing listens on.
  int port = 0;
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port = ntohs(a.sin_port);
    ::close(fd);
  }
  auto c = Fetch(absl::StrCat("127.0.0.1:", port, "/x:1"), Plain());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("no network: cannot connect"));
  c = Fetch("registry.gpunode-test.invalid/x:1", Plain());
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("no network"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("registry.gpunode-test.invalid"));
}

}  // namespace
}  // namespace gpunode::image
