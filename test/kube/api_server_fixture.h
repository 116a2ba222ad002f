// The fixture of the tests against the real API server (ctest kube_api_k8s, which runs
// test/k8s/kube_api_test.sh): an admin client from GPUNODE_TEST_KUBECONFIG and the cluster's node.
#ifndef GPUNODE_TEST_KUBE_API_SERVER_FIXTURE_H_
#define GPUNODE_TEST_KUBE_API_SERVER_FIXTURE_H_

#include <cstdlib>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "src/kube/client.h"
#include "src/kube/node.h"
#include "test/testing/status_matchers.h"

namespace gpunode::kube {

class ApiServer : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* kc = std::getenv("GPUNODE_TEST_KUBECONFIG");
    if (kc == nullptr || *kc == '\0') GTEST_SKIP() << "GPUNODE_TEST_KUBECONFIG is not set (test/k8s/kube_api_test.sh sets it)";
    auto c = LoadKubeconfig(kc);
    ASSERT_OK(c) << c.status();
    admin_conn_ = *c;
    ClientOptions o;  // a test makes calls back to back: kubectl's rate, not the agent's
    o.qps = 50;
    o.burst = 100;
    admin_ = std::make_unique<Client>(admin_conn_, o);
    auto nodes = admin_->Get("/api/v1/nodes");
    ASSERT_OK(nodes) << nodes.status();
    ASSERT_FALSE((*nodes)["items"].empty());
    for (const auto& n : (*nodes)["items"]) {  // the cluster's own node, not one a scale test made
      if (!n["metadata"].value("labels", nlohmann::json::object()).contains("gpunode.io/scale")) {
        node_ = n["metadata"]["name"].get<std::string>();
        break;
      }
    }
    ASSERT_FALSE(node_.empty());
  }

  nlohmann::json Labels() {
    auto n = admin_->Get("/api/v1/nodes/" + node_);
    EXPECT_OK(n) << n.status();
    return (*n)["metadata"].value("labels", nlohmann::json::object());
  }
  std::string Annotation() {
    auto n = admin_->Get("/api/v1/nodes/" + node_);
    EXPECT_OK(n) << n.status();
    return (*n)["metadata"].value("annotations", nlohmann::json::object()).value(kManagedLabelsAnnotation, "");
  }

  // A service account with no roles, and a token for it (TokenRequest API).
  std::string NobodyToken() {
    const std::string base = "/api/v1/namespaces/default/serviceaccounts";
    auto made = admin_->Post(base, {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "gpunode-test-nobody"}}}});
    EXPECT_TRUE(made.ok() || absl::IsAborted(made.status())) << made.status();
    auto tr = admin_->Post(base + "/gpunode-test-nobody/token", {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenRequest"}, {"spec", nlohmann::json::object()}});
    EXPECT_OK(tr) << tr.status();
    return tr.ok() ? (*tr)["status"]["token"].get<std::string>() : "";
  }

  Connection admin_conn_;
  std::unique_ptr<Client> admin_;
  std::string node_;
};


}  // namespace gpunode::kube

#endif  // GPUNODE_TEST_KUBE_API_SERVER_FIXTURE_H_
