// The Kubernetes client against a real API server (test/k8s/cluster.sh; run by
// test/k8s/kube_api_test.sh, ctest kube_api_k8s): Node labels with gpunode's ownership rules,
// the errors a user meets (404, 401, 403, 409, a server certificate that does not verify), a
// token file that rotates, and a DaemonSet's deletion as the uninstall signal.
// Skipped unless GPUNODE_TEST_KUBECONFIG names the test cluster's admin kubeconfig.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gtest/gtest.h"
#include "src/kube/client.h"
#include "src/kube/node.h"

namespace gpunode::kube {
namespace {

class ApiServer : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* kc = std::getenv("GPUNODE_TEST_KUBECONFIG");
    if (kc == nullptr || *kc == '\0') GTEST_SKIP() << "GPUNODE_TEST_KUBECONFIG is not set (test/k8s/kube_api_test.sh sets it)";
    auto c = LoadKubeconfig(kc);
    ASSERT_TRUE(c.ok()) << c.status();
    admin_conn_ = *c;
    admin_ = std::make_unique<Client>(admin_conn_);
    auto nodes = admin_->Get("/api/v1/nodes");
    ASSERT_TRUE(nodes.ok()) << nodes.status();
    ASSERT_FALSE((*nodes)["items"].empty());
    node_ = (*nodes)["items"][0]["metadata"]["name"].get<std::string>();
  }

  nlohmann::json Labels() {
    auto n = admin_->Get("/api/v1/nodes/" + node_);
    EXPECT_TRUE(n.ok()) << n.status();
    return (*n)["metadata"].value("labels", nlohmann::json::object());
  }
  std::string Annotation() {
    auto n = admin_->Get("/api/v1/nodes/" + node_);
    EXPECT_TRUE(n.ok()) << n.status();
    return (*n)["metadata"].value("annotations", nlohmann::json::object()).value(kManagedLabelsAnnotation, "");
  }

  // A service account with no roles, and a token for it (TokenRequest API).
  std::string NobodyToken() {
    const std::string base = "/api/v1/namespaces/default/serviceaccounts";
    auto made = admin_->Post(base, {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "gpunode-test-nobody"}}}});
    EXPECT_TRUE(made.ok() || absl::IsAborted(made.status())) << made.status();
    auto tr = admin_->Post(base + "/gpunode-test-nobody/token", {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenRequest"}, {"spec", nlohmann::json::object()}});
    EXPECT_TRUE(tr.ok()) << tr.status();
    return tr.ok() ? (*tr)["status"]["token"].get<std::string>() : "";
  }

  Connection admin_conn_;
  std::unique_ptr<Client> admin_;
  std::string node_;
};

TEST_F(ApiServer, NodeLabelsClaimOnlyWhatGpunodeSetAndRemoveOnlyThat) {
  ASSERT_TRUE(admin_->MergePatch("/api/v1/nodes/" + node_, {{"metadata", {{"labels", {{"example.com/pre", "1"}}}}}}).ok());
  auto first = ApplyNodeLabels(*admin_, node_, {{"example.com/pre", "1"}, {"gpunode.io/test-a", "x"}, {"gpunode.io/test-b", "y"}});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->patched);
  EXPECT_EQ(first->set, (std::vector<std::string>{"gpunode.io/test-a", "gpunode.io/test-b"}));
  EXPECT_EQ(Annotation(), "gpunode.io/test-a,gpunode.io/test-b");  // example.com/pre was there: not claimed
  EXPECT_EQ(Labels()["gpunode.io/test-b"], "y");

  auto again = ApplyNodeLabels(*admin_, node_, {{"example.com/pre", "1"}, {"gpunode.io/test-a", "x"}, {"gpunode.io/test-b", "y"}});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->patched) << "an unchanged label set must not write the Node";

  auto changed = ApplyNodeLabels(*admin_, node_, {{"gpunode.io/test-a", "x2"}});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(changed->set, (std::vector<std::string>{"gpunode.io/test-a"}));
  EXPECT_EQ(changed->removed, (std::vector<std::string>{"gpunode.io/test-b"}));
  EXPECT_FALSE(Labels().contains("gpunode.io/test-b"));
  EXPECT_EQ(Labels()["example.com/pre"], "1") << "a label gpunode never set is not removed";

  auto removed = RemoveNodeLabels(*admin_, node_);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->removed, (std::vector<std::string>{"gpunode.io/test-a"}));
  EXPECT_FALSE(Labels().contains("gpunode.io/test-a"));
  EXPECT_EQ(Labels()["example.com/pre"], "1");
  EXPECT_EQ(Annotation(), "");
  auto nothing = RemoveNodeLabels(*admin_, node_);
  ASSERT_TRUE(nothing.ok());
  EXPECT_FALSE(nothing->patched);
  ASSERT_TRUE(admin_->MergePatch("/api/v1/nodes/" + node_, {{"metadata", {{"labels", {{"example.com/pre", nullptr}}}}}}).ok());
}

TEST_F(ApiServer, ErrorsNameTheRequestAndTheReason) {
  auto missing = ApplyNodeLabels(*admin_, "no-such-node", {{"a", "b"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("GET /api/v1/nodes/no-such-node: HTTP 404: nodes \"no-such-node\" not found"),
            std::string::npos) << missing.status();

  Connection bad = admin_conn_;
  bad.client_cert_pem.clear();
  bad.client_key_pem.clear();
  bad.token = "not-a-token";
  auto unauth = Client(bad).Get("/api/v1/nodes");
  ASSERT_FALSE(unauth.ok());
  EXPECT_TRUE(absl::IsUnauthenticated(unauth.status())) << unauth.status();
  EXPECT_NE(unauth.status().message().find("HTTP 401"), std::string::npos) << unauth.status();

  Connection nobody = bad;
  nobody.token = NobodyToken();
  auto forbidden = Client(nobody).Get("/api/v1/nodes");
  ASSERT_FALSE(forbidden.ok());
  EXPECT_TRUE(absl::IsPermissionDenied(forbidden.status())) << forbidden.status();
  EXPECT_NE(forbidden.status().message().find("cannot list resource \"nodes\""), std::string::npos) << forbidden.status();

  auto twice = admin_->Post("/api/v1/namespaces/default/serviceaccounts",
                            {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "gpunode-test-nobody"}}}});
  ASSERT_FALSE(twice.ok());
  EXPECT_TRUE(absl::IsAborted(twice.status())) << twice.status();
  EXPECT_NE(twice.status().message().find("already exists"), std::string::npos) << twice.status();

  Connection wrong_ca = admin_conn_;
  wrong_ca.ca_pem = admin_conn_.client_cert_pem;  // a certificate, but not the server's CA
  auto untrusted = Client(wrong_ca).Get("/api");
  ASSERT_FALSE(untrusted.ok());
  EXPECT_TRUE(absl::IsUnavailable(untrusted.status())) << untrusted.status();
  EXPECT_NE(untrusted.status().message().find("the server's certificate was not accepted"), std::string::npos)
      << untrusted.status();
  ASSERT_TRUE(admin_->Delete("/api/v1/namespaces/default/serviceaccounts/gpunode-test-nobody").ok());
}

TEST_F(ApiServer, ATokenFileIsReadAgainWhenItChanges) {
  char dir[] = "/tmp/gpunode-kube-token.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/token";
  std::ofstream(file) << "stale";
  Connection c = admin_conn_;
  c.client_cert_pem.clear();
  c.client_key_pem.clear();
  c.token_file = file;
  Client client(c);
  auto before = client.Get("/api");
  ASSERT_FALSE(before.ok());
  EXPECT_TRUE(absl::IsUnauthenticated(before.status())) << before.status();
  const std::string token = NobodyToken();  // may GET /api (discovery is open to every account)
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::ofstream(file) << token << "\n";
  auto after = client.Get("/api");
  EXPECT_TRUE(after.ok()) << after.status();
  std::filesystem::remove_all(dir);
  (void)admin_->Delete("/api/v1/namespaces/default/serviceaccounts/gpunode-test-nobody");
}

TEST_F(ApiServer, ADaemonSetBeingDeletedMeansUninstall) {
  const std::string ns = "default", name = "gpunode-test-ds";
  const std::string path = "/apis/apps/v1/namespaces/default/daemonsets/" + name;
  auto gone = DaemonSetDeleting(*admin_, ns, name);
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_TRUE(*gone) << "a DaemonSet that does not exist is an uninstall";
  nlohmann::json ds = {
      {"apiVersion", "apps/v1"},
      {"kind", "DaemonSet"},
      {"metadata", {{"name", name}, {"finalizers", {"gpunode.io/test"}}}},
      {"spec",
       {{"selector", {{"matchLabels", {{"app", name}}}}},
        {"template",
         {{"metadata", {{"labels", {{"app", name}}}}},
          {"spec",
           {{"nodeSelector", {{"gpunode.io/no-such-node", "true"}}},
            {"containers", {{{"name", "c"}, {"image", "gpunode.test/busybox:1"}}}}}}}}}}};
  auto made = admin_->Post("/apis/apps/v1/namespaces/default/daemonsets", ds);
  ASSERT_TRUE(made.ok()) << made.status();
  auto running = DaemonSetDeleting(*admin_, ns, name);
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_FALSE(*running);
  ASSERT_TRUE(admin_->Delete(path, {{"propagationPolicy", "Foreground"}}).ok());
  auto deleting = DaemonSetDeleting(*admin_, ns, name);
  ASSERT_TRUE(deleting.ok()) << deleting.status();
  EXPECT_TRUE(*deleting) << "deletionTimestamp set: an uninstall";
  ASSERT_TRUE(admin_->MergePatch(path, {{"metadata", {{"finalizers", nullptr}}}}).ok());
}

}  // namespace
}  // namespace gpunode::kube
