// The exporter server's configuration alone: the listen address parser (dcgm-exporter's forms) and
// the web config file (exporter-toolkit's format), its bcrypt checks and the basic-auth verdict
// cache. Served end to end in server_test.cc.
#include <crypt.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/exporter/http_server.h"
#include "src/exporter/web_config.h"
#include "test/testing/status_matchers.h"

namespace gpunode::exporter {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr char kHash[] = "$2b$04$poPUGKew3QHMXlGSzwquB.NCuec6TvozQB.DfHFqU5dbzKw/Gah8u";  // "s3cret"

TEST(ListenAddressTest, ParsesDcgmExporterForms) {
  auto a = ParseListenAddress(":9400");
  ASSERT_OK(a);
  EXPECT_EQ(a->host, "::");
  EXPECT_EQ(a->port, 9400);
  a = ParseListenAddress("127.0.0.1:0");
  ASSERT_OK(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 0);
  a = ParseListenAddress("[::1]:9400");
  ASSERT_OK(a);
  EXPECT_EQ(a->host, "::1");
  for (const char* bad : {"9400", "host:", ":99999", "::1:9400", "[::1]9400", ":http"}) {
    auto b = ParseListenAddress(bad);
    EXPECT_FALSE(b.ok()) << bad;
    if (!b.ok()) {
      EXPECT_THAT(std::string(b.status().message()), HasSubstr(bad));
    }
  }
}

TEST(WebConfigTest, ParsesTheExporterToolkitFormat) {
  auto c = ParseWebConfig(
      "tls_server_config:\n  cert_file: /etc/tls/tls.crt\n  key_file: tls.key\n  min_version: TLS13\n"
      "http_server_config:\n  http2: true\n  headers:\n    Strict-Transport-Security: max-age=31536000\n"
      "basic_auth_users:\n  alice: $2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi\n",
      "web.yml", "/etc/gpunode");
  ASSERT_OK(c) << c.status();
  ASSERT_TRUE(c->tls.has_value());
  EXPECT_EQ(c->tls->cert_file, "/etc/tls/tls.crt");
  EXPECT_EQ(c->tls->key_file, "/etc/gpunode/tls.key");
  EXPECT_EQ(c->tls->min_version, "TLS13");
  EXPECT_EQ(c->tls->client_auth_type, "NoClientCert");
  EXPECT_EQ(c->headers.at("Strict-Transport-Security"), "max-age=31536000");
  EXPECT_EQ(c->basic_auth_users.size(), 1u);
  auto empty = ParseWebConfig("", "web.yml");
  ASSERT_OK(empty);
  EXPECT_FALSE(empty->tls.has_value());
}

TEST(WebConfigTest, RejectsWhatItCannotHonourNamingTheProblem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"tls_server_config: {cert_file: a\n", "not valid YAML"},
      {"- a\n", "web.yml:1: expected a map, got a list"},
      {"tls_config: {}\n", "web.yml:1: unknown key \"tls_config\" (known: tls_server_config, "},
      {"tls_server_config: {cert_file: a.crt}\n", "needs both cert_file and key_file"},
      {"tls_server_config: {cert_file: a, key_file: b, cipher_suites: [x]}\n",
       "tls_server_config.cipher_suites: is not supported by gpunode"},
      {"tls_server_config: {cert_file: a, key_file: b, client_auth_type: Always}\n", "tls_server_config.client_auth_type: expected one of NoClientCert"},
      {"tls_server_config: {cert_file: a, key_file: b, client_auth_type: RequireAndVerifyClientCert}\n",
       "needs client_ca_file"},
      {"tls_server_config: {cert_file: a, key_file: b, min_version: SSL3}\n", "\"SSL3\""},
      {"basic_auth_users: {bob: plaintext}\n", "web.yml:1: basic_auth_users.bob: expected a bcrypt hash"},
      {"rate_limit: {interval: 1s}\n", "web.yml:1: rate_limit: is not supported"},
      // Found by fuzz_exporter_input: keys that are not strings threw out of the parser.
      {"? [a, b]\n: 1\n", "web.yml:1: expected a plain string as key, got a list"},
      {"tls_server_config: {? {a: b} : c}\n", "tls_server_config: expected a plain string as key, got a map"},
      {"basic_auth_users: {? [u] : x}\n", "basic_auth_users: expected a plain string as key, got a list"},
      {"http_server_config: {headers: {? [h] : v}}\n", "http_server_config.headers: expected a plain string as key, got a list"},
  };
  for (const auto& [yaml, want] : cases) {
    auto c = ParseWebConfig(yaml, "web.yml");
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(want)) << yaml;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("web.yml")) << yaml;
  }
  auto missing = LoadWebConfig("/nonexistent/web.yml");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/web.yml"));
}

TEST(WebConfigTest, ChecksBcryptPasswords) {
  EXPECT_TRUE(CheckPassword("s3cret", kHash));
  EXPECT_FALSE(CheckPassword("s3cret ", kHash));
  EXPECT_FALSE(CheckPassword("s3cret", "$2b$04$notahash"));
  BasicAuthenticator auth(std::map<std::string, std::string>{{"prom", kHash}});
  EXPECT_TRUE(auth.Allow("Basic cHJvbTpzM2NyZXQ="));   // prom:s3cret
  EXPECT_TRUE(auth.Allow("Basic cHJvbTpzM2NyZXQ="));   // remembered
  EXPECT_FALSE(auth.Allow("Basic cHJvbTp3cm9uZw=="));  // prom:wrong
  EXPECT_FALSE(auth.Allow("Bearer abc"));
  EXPECT_FALSE(auth.Allow("Basic !!!"));
  EXPECT_FALSE(auth.Allow(""));
}

TEST(ExporterBasicAuthTest, RemembersVerdictsByKeyedHashAndBoundsBcryptPerSource) {
  AuthLimits limits;
  limits.threads = 1;
  limits.max_pending_per_source = 1;
  limits.max_pending = 2;
  // "slow": a cost-11 hash (~0.1 s a check), so that a check of it is still running below.
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  ASSERT_NE(crypt_gensalt_rn("$2b$", 11, nullptr, 0, salt, sizeof salt), nullptr);
  auto cd = std::make_unique<crypt_data>();
  const std::string slow_hash = crypt_r("x", salt, cd.get());
  BasicAuthenticator auth(std::map<std::string, std::string>{{"prom", kHash}, {"slow", slow_hash}}, limits);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<BasicAuthenticator::Verdict> done;
  auto record = [&](BasicAuthenticator::Verdict v) {
    std::lock_guard<std::mutex> lock(mu);
    done.push_back(v);
    cv.notify_all();
  };
  auto wait_for = [&](size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, 5s, [&] { return done.size() >= n; });
  };
  using V = BasicAuthenticator::Verdict;
  const std::string right = "Basic cHJvbTpzM2NyZXQ=";  // prom:s3cret
  const std::string wrong = "Basic cHJvbTp3cm9uZw==";  // prom:wrong
  EXPECT_EQ(auth.Check(right, "10.0.0.1", record), V::kPending);
  ASSERT_TRUE(wait_for(1));
  EXPECT_EQ(done[0], V::kAllowed);
  EXPECT_EQ(auth.Check(right, "10.0.0.9", record), V::kAllowed);  // remembered, any address
  EXPECT_EQ(auth.Check(wrong, "10.0.0.1", record), V::kPending);
  ASSERT_TRUE(wait_for(2));
  EXPECT_EQ(done[1], V::kDenied);
  EXPECT_EQ(auth.Check(wrong, "10.0.0.2", record), V::kDenied);  // remembered wrong pair: no bcrypt
  EXPECT_EQ(auth.stats().bcrypt_runs, 2u);
  EXPECT_EQ(auth.stats().cached_allowed, 1u);
  EXPECT_EQ(auth.stats().cached_denied, 1u);
  // Refused before bcrypt: no credentials, NUL, longer than bcrypt reads, not base64, no colon.
  for (const std::string& h : {std::string(), std::string("Basic ") + absl::Base64Escape(std::string("prom:s3cret\0x", 13)),
                               "Basic " + absl::Base64Escape("prom:" + std::string(73, 'a')), std::string("Basic %%%"),
                               "Basic " + absl::Base64Escape("prom")}) {
    EXPECT_EQ(auth.Check(h, "10.0.0.1", record), V::kDenied) << h;
  }
  EXPECT_EQ(auth.stats().bcrypt_runs, 2u);
  // One check pending per address: a second from the same address is refused at once, another
  // address still gets its turn, and the total is bounded too.
  EXPECT_EQ(auth.Check("Basic " + absl::Base64Escape("slow:w1"), "10.0.0.1", record), V::kPending);
  EXPECT_EQ(auth.Check("Basic " + absl::Base64Escape("prom:w2"), "10.0.0.1", record), V::kBusy);
  EXPECT_EQ(auth.Check("Basic " + absl::Base64Escape("nobody:w3"), "10.0.0.2", record), V::kPending);
  EXPECT_EQ(auth.Check("Basic " + absl::Base64Escape("prom:w4"), "10.0.0.3", record), V::kBusy);
  ASSERT_TRUE(wait_for(4));
  EXPECT_EQ(done[2], V::kDenied);
  EXPECT_EQ(done[3], V::kDenied);  // an unknown user: bcrypt all the same, then no
  EXPECT_EQ(auth.stats().busy, 2u);
  // The limits are free again.
  EXPECT_EQ(auth.Check("Basic " + absl::Base64Escape("prom:w5"), "10.0.0.1", record), V::kPending);
  ASSERT_TRUE(wait_for(5));
}

}  // namespace
}  // namespace gpunode::exporter
