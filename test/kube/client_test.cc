// The Kubernetes client's connection settings: kubeconfig files and a pod's service account.
// Requests themselves are tested against the real API server of the test cluster
// (api_server_test.cc, ctest kube_api_k8s).
#include "src/kube/client.h"

#include <stdlib.h>

#include <filesystem>
#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "gtest/gtest.h"
#include "test/testing/fake_api_server.h"
#include "test/testing/status_matchers.h"

namespace gpunode::kube {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gpunode-kube-test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string p = path_ + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream(p) << text;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

constexpr char kCa[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

TEST(ParseServer, HostsPortsAndSchemes) {
  Connection c;
  ASSERT_OK(ParseServer("https://127.0.0.1:6443", &c));
  EXPECT_EQ(c.scheme, "https");
  EXPECT_EQ(c.host, "127.0.0.1");
  EXPECT_EQ(c.port, 6443);
  ASSERT_OK(ParseServer("https://api.example.com", &c));
  EXPECT_EQ(c.host, "api.example.com");
  EXPECT_EQ(c.port, 443);
  ASSERT_OK(ParseServer("https://[fd00::1]:8443/", &c));
  EXPECT_EQ(c.host, "fd00::1");
  EXPECT_EQ(c.port, 8443);
  ASSERT_OK(ParseServer("http://localhost:8080", &c));
  EXPECT_EQ(c.scheme, "http");
  EXPECT_EQ(c.port, 8080);
  auto bad = ParseServer("127.0.0.1:6443", &c);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("not an https:// or http:// URL"), std::string::npos) << bad;
  EXPECT_FALSE(ParseServer("https://host:99999", &c).ok());
  EXPECT_FALSE(ParseServer("https://:443", &c).ok());
}

TEST(LoadKubeconfig, CurrentContextWithFilesRelativeToTheKubeconfig) {
  TempDir d;
  d.Write("pki/ca.crt", kCa);
  d.Write("pki/admin.crt", "CERT");
  d.Write("pki/admin.key", "KEY");
  const std::string kc = d.Write("kc", R"(apiVersion: v1
kind: Config
current-context: b
clusters:
- name: c1
  cluster: {server: "https://10.0.0.1:6443", certificate-authority: pki/ca.crt}
contexts:
- name: a
  context: {cluster: nowhere, user: u1}
- name: b
  context: {cluster: c1, user: u1, namespace: gpu}
users:
- name: u1
  user: {client-certificate: pki/admin.crt, client-key: pki/admin.key}
)");
  auto c = LoadKubeconfig(kc);
  ASSERT_OK(c) << c.status();
  EXPECT_EQ(c->host, "10.0.0.1");
  EXPECT_EQ(c->port, 6443);
  EXPECT_EQ(c->ca_pem, kCa);
  EXPECT_EQ(c->client_cert_pem, "CERT");
  EXPECT_EQ(c->client_key_pem, "KEY");
  EXPECT_EQ(c->ns, "gpu");
  EXPECT_NE(c->source.find("context b"), std::string::npos);

  auto other = LoadKubeconfig(kc, "a");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("cluster \"nowhere\", which is not there"), std::string::npos)
      << other.status();
  auto missing = LoadKubeconfig(kc, "zzz");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no context \"zzz\""), std::string::npos);
}

TEST(LoadKubeconfig, Base64DataAndTokens) {
  TempDir d;
  const std::string kc = d.Write("kc", R"(current-context: x
clusters:
- name: c
  cluster: {server: "https://k:1", certificate-authority-data: "aGVsbG8="}
contexts:
- name: x
  context: {cluster: c, user: u}
users:
- name: u
  user: {token: abc}
)");
  auto c = LoadKubeconfig(kc);
  ASSERT_OK(c) << c.status();
  EXPECT_EQ(c->ca_pem, "hello");
  EXPECT_EQ(c->token, "abc");
  EXPECT_EQ(c->ns, "default");
}

TEST(LoadKubeconfig, RefusesWhatItCannotDoWithAClearMessage) {
  TempDir d;
  auto exec = LoadKubeconfig(d.Write("exec", R"(current-context: x
clusters: [{name: c, cluster: {server: "https://k"}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
users: [{name: u, user: {exec: {command: aws}}}]
)"));
  ASSERT_FALSE(exec.ok());
  EXPECT_NE(exec.status().message().find("exec and auth-provider credentials are not supported"), std::string::npos);

  auto bad64 = LoadKubeconfig(d.Write("b64", R"(current-context: x
clusters: [{name: c, cluster: {server: "https://k", certificate-authority-data: "***"}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
)"));
  ASSERT_FALSE(bad64.ok());
  EXPECT_NE(bad64.status().message().find("certificate-authority-data is not base64"), std::string::npos);

  auto half = LoadKubeconfig(d.Write("half", R"(current-context: x
clusters: [{name: c, cluster: {server: "https://k"}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
users: [{name: u, user: {client-certificate-data: "aGVsbG8="}}]
)"));
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("needs its key"), std::string::npos);

  auto malformed = LoadKubeconfig(d.Write("bad", "clusters: [\n"));
  EXPECT_FALSE(malformed.ok());
  auto none = LoadKubeconfig(d.path() + "/nope");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("kubeconfig"), std::string::npos);
  auto no_ctx = LoadKubeconfig(d.Write("noctx", "clusters: []\n"));
  ASSERT_FALSE(no_ctx.ok());
  EXPECT_NE(no_ctx.status().message().find("no current-context"), std::string::npos);
}

TEST(InClusterConnection, ServiceAccountFilesAndEnvironment) {
  TempDir d;
  d.Write("sa/token", "tok\n");
  d.Write("sa/ca.crt", kCa);
  d.Write("sa/namespace", "gpunode\n");
  unsetenv("KUBERNETES_SERVICE_HOST");
  auto outside = InClusterConnection(d.path() + "/sa");
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("not in a pod"), std::string::npos);

  setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto c = InClusterConnection(d.path() + "/sa");
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_OK(c) << c.status();
  EXPECT_EQ(c->host, "fd00::1");
  EXPECT_EQ(c->port, 443);
  EXPECT_EQ(c->ns, "gpunode");
  EXPECT_EQ(c->ca_pem, kCa);
  EXPECT_EQ(c->token_file, d.path() + "/sa/token");
}

TEST(Client, ConnectionRefusedNamesTheServer) {
  Connection c;
  ASSERT_OK(ParseServer("http://127.0.0.1:1", &c));
  Client client(c);
  client.set_timeout(std::chrono::milliseconds(500));
  auto r = client.Get("/api/v1/nodes");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("GET /api/v1/nodes: http://127.0.0.1:1"), std::string::npos) << r.status();
}

TEST(Client, GarbageCaIsRefusedBeforeAnyRequest) {
  Connection c;
  ASSERT_OK(ParseServer("https://127.0.0.1:1", &c));
  c.ca_pem = "not a certificate";
  c.source = "test";
  Client client(c);
  auto r = client.Get("/api");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the CA data holds no PEM certificate"), std::string::npos) << r.status();
}

TEST(UrlEscape, PathSegments) {
  EXPECT_EQ(UrlEscape("node-1.example"), "node-1.example");
  EXPECT_EQ(UrlEscape("a/b c"), "a%2Fb%20c");
}

}  // namespace
}  // namespace gpunode::kube

namespace gpunode::kube {
namespace {

// Regression: a watch with no events blocked in its read until the server's timeout (300 s), so
// the agent's stop (a pod's SIGTERM, 30 s grace) waited past its grace period and was killed
// before it could clean up at uninstall.
TEST(Client, WatchWithoutEventsReturnsPromptlyWhenStopped) {
  // Never an event: the connection only stays open (as a quiet watch does).
  testing::FakeApiServer api;
  api.On("GET", "/api/v1/nodes", {testing::FakeApiServer::WatchEvents({}, /*hold_open=*/true)});
  Connection c;
  ASSERT_OK(ParseServer(api.url(), &c));
  Client client(c);
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop = true;
  });
  const auto start = std::chrono::steady_clock::now();
  Status st = client.Watch("/api/v1/nodes", "", 300, [](const std::string&, const nlohmann::json&) { return true; },
                           &stop);
  const auto took = std::chrono::steady_clock::now() - start;
  stopper.join();
  EXPECT_OK(st) << st;
  EXPECT_LT(took, std::chrono::seconds(3));
}

}  // namespace
}  // namespace gpunode::kube
