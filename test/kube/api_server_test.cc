// The Kubernetes client against a real API server (test/k8s/cluster.sh; run by
// test/k8s/kube_api_test.sh, ctest kube_api_k8s): Node labels with gpunode's ownership rules,
// the errors a user meets (404, 401, 403, 409, a server certificate that does not verify), a
// token file that rotates, and a DaemonSet's deletion as the uninstall signal.
// Skipped unless GPUNODE_TEST_KUBECONFIG names the test cluster's admin kubeconfig.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "src/kube/client.h"
#include "src/kube/node.h"
#include "test/kube/api_server_fixture.h"
#include "test/testing/status_matchers.h"

namespace gpunode::kube {
namespace {

TEST_F(ApiServer, NodeLabelsAppliedByFieldManagerGpunodeRemoveOnlyWhatNobodyElseOwns) {
  ASSERT_OK(admin_->MergePatch("/api/v1/nodes/" + node_, {{"metadata", {{"labels", {{"example.com/pre", "1"}}}}}}));
  auto first = ApplyNodeLabels(*admin_, node_, {{"example.com/pre", "1"}, {"gpunode.io/test-a", "x"}, {"gpunode.io/test-b", "y"}});
  ASSERT_OK(first) << first.status();
  EXPECT_TRUE(first->patched);
  EXPECT_EQ(first->set, (std::vector<std::string>{"gpunode.io/test-a", "gpunode.io/test-b"}));
  EXPECT_EQ(first->ignored, (std::vector<std::string>{"example.com/pre"}));
  EXPECT_EQ(Annotation(), "") << "the API server's managedFields record what is gpunode's";
  EXPECT_EQ(Labels()["gpunode.io/test-b"], "y");

  auto again = ApplyNodeLabels(*admin_, node_, {{"example.com/pre", "1"}, {"gpunode.io/test-a", "x"}, {"gpunode.io/test-b", "y"}});
  ASSERT_OK(again) << again.status();
  EXPECT_FALSE(again->patched) << "an unchanged label set must not write the Node";

  auto changed = ApplyNodeLabels(*admin_, node_, {{"gpunode.io/test-a", "x2"}});
  ASSERT_OK(changed) << changed.status();
  EXPECT_EQ(changed->set, (std::vector<std::string>{"gpunode.io/test-a"}));
  EXPECT_EQ(changed->removed, (std::vector<std::string>{"gpunode.io/test-b"}));
  EXPECT_FALSE(Labels().contains("gpunode.io/test-b")) << "no longer applied, owned by nobody else: gone";
  EXPECT_EQ(Labels()["example.com/pre"], "1") << "a label gpunode never set is not removed";

  auto removed = RemoveNodeLabels(*admin_, node_);
  ASSERT_OK(removed) << removed.status();
  EXPECT_EQ(removed->removed, (std::vector<std::string>{"gpunode.io/test-a"}));
  EXPECT_FALSE(Labels().contains("gpunode.io/test-a"));
  EXPECT_EQ(Labels()["example.com/pre"], "1");
  auto nothing = RemoveNodeLabels(*admin_, node_);
  ASSERT_OK(nothing);
  EXPECT_FALSE(nothing->patched);
  ASSERT_OK(admin_->MergePatch("/api/v1/nodes/" + node_, {{"metadata", {{"labels", {{"example.com/pre", nullptr}}}}}}));
}

// A Node an earlier agent labelled (merge patch with the User-Agent gpunode/..., so the field
// manager "gpunode" with operation Update, and the annotation): the JSON patch of the migration
// (managedFields rewritten, conditional on the resourceVersion) is accepted by the API server,
// the kept key is gpunode's Apply alone (dropping it removes it), the stale one and the annotation go.
TEST_F(ApiServer, AnEarlierAgentsMergePatchLabelsAreMigratedToServerSideApply) {
  const std::string path = "/api/v1/nodes/" + node_;
  ASSERT_OK(admin_->MergePatch(path, {{"metadata", {{"labels", {{"gpunode.io/mig-keep", "1"}, {"gpunode.io/mig-stale", "1"}}},
                                                    {"annotations", {{kManagedLabelsAnnotation, "gpunode.io/mig-keep,gpunode.io/mig-stale"}}}}}}));
  auto r = ApplyNodeLabels(*admin_, node_, {{"gpunode.io/mig-keep", "2"}});
  ASSERT_OK(r) << r.status();
  EXPECT_TRUE(r->conflicts.empty()) << "no conflict with the old merge patches' manager";
  EXPECT_EQ(r->removed, (std::vector<std::string>{"gpunode.io/mig-stale"}));
  EXPECT_EQ(Labels()["gpunode.io/mig-keep"], "2");
  EXPECT_FALSE(Labels().contains("gpunode.io/mig-stale"));
  EXPECT_EQ(Annotation(), "");
  auto n = admin_->Get(path);
  ASSERT_OK(n);
  bool update_owns = false;
  for (const auto& e : (*n)["metadata"]["managedFields"]) {
    if (e.value("manager", "") == "gpunode" && e.value("operation", "") == "Update") {
      update_owns = update_owns || e["fieldsV1"]["f:metadata"].value("f:labels", nlohmann::json::object()).contains("f:gpunode.io/mig-keep");
    }
  }
  EXPECT_FALSE(update_owns) << (*n)["metadata"]["managedFields"].dump();
  auto gone = RemoveNodeLabels(*admin_, node_);
  ASSERT_OK(gone) << gone.status();
  EXPECT_FALSE(Labels().contains("gpunode.io/mig-keep"));
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
  EXPECT_EQ(ReasonOf(twice.status()), "AlreadyExists") << "not a Conflict: reading again would not help";
  EXPECT_NE(twice.status().message().find("already exists"), std::string::npos) << twice.status();

  Connection wrong_ca = admin_conn_;
  wrong_ca.ca_pem = admin_conn_.client_cert_pem;  // a certificate, but not the server's CA
  auto untrusted = Client(wrong_ca).Get("/api");
  ASSERT_FALSE(untrusted.ok());
  EXPECT_TRUE(absl::IsUnavailable(untrusted.status())) << untrusted.status();
  EXPECT_NE(untrusted.status().message().find("the server's certificate was not accepted"), std::string::npos)
      << untrusted.status();
  ASSERT_OK(admin_->Delete("/api/v1/namespaces/default/serviceaccounts/gpunode-test-nobody"));
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
  EXPECT_OK(after) << after.status();
  std::filesystem::remove_all(dir);
  (void)admin_->Delete("/api/v1/namespaces/default/serviceaccounts/gpunode-test-nobody");
}

TEST_F(ApiServer, ADaemonSetBeingDeletedMeansUninstall) {
  const std::string ns = "default", name = "gpunode-test-ds";
  const std::string path = "/apis/apps/v1/namespaces/default/daemonsets/" + name;
  auto gone = DaemonSetDeleting(*admin_, ns, name);
  ASSERT_OK(gone) << gone.status();
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
  ASSERT_OK(made) << made.status();
  auto running = DaemonSetDeleting(*admin_, ns, name);
  ASSERT_OK(running) << running.status();
  EXPECT_FALSE(*running);
  ASSERT_OK(admin_->Delete(path, {{"propagationPolicy", "Foreground"}}));
  auto deleting = DaemonSetDeleting(*admin_, ns, name);
  ASSERT_OK(deleting) << deleting.status();
  EXPECT_TRUE(*deleting) << "deletionTimestamp set: an uninstall";
  ASSERT_OK(admin_->MergePatch(path, {{"metadata", {{"finalizers", nullptr}}}}));
}

TEST_F(ApiServer, AConditionTransitionsOnlyWhenItsStatusChanges) {
  auto condition = [&]() {
    auto n = admin_->Get("/api/v1/nodes/" + node_);
    EXPECT_OK(n) << n.status();
    for (const auto& c : (*n)["status"]["conditions"]) {
      if (c["type"] == "GpuStackReady") return c;
    }
    return nlohmann::json();
  };
  auto first = SetNodeCondition(*admin_, node_, {"GpuStackReady", "False", "DriverMismatch", "first action"});
  ASSERT_OK(first) << first.status();
  const nlohmann::json c1 = condition();
  ASSERT_FALSE(c1.is_null());
  EXPECT_EQ(c1["status"], "False");
  EXPECT_EQ(c1["reason"], "DriverMismatch");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the times have a 1 s resolution
  auto same = SetNodeCondition(*admin_, node_, {"GpuStackReady", "False", "DriverMismatch", "still"});
  ASSERT_OK(same) << same.status();
  EXPECT_FALSE(*same);
  const nlohmann::json c2 = condition();
  EXPECT_EQ(c2["lastTransitionTime"], c1["lastTransitionTime"]) << "no transition: the same status";
  EXPECT_NE(c2["lastHeartbeatTime"], c1["lastHeartbeatTime"]);
  EXPECT_EQ(c2["message"], "still");
  auto ready = SetNodeCondition(*admin_, node_, {"GpuStackReady", "True", "Passed", "every layer passed"});
  ASSERT_OK(ready) << ready.status();
  EXPECT_TRUE(*ready);
  EXPECT_NE(condition()["lastTransitionTime"], c1["lastTransitionTime"]);
  // Another writer's condition under its own field manager (the driver-upgrade controller's) leaves
  // this one: under the same manager its apply would own, and drop, GpuStackReady.
  auto other = SetNodeCondition(*admin_, node_, {"GpuDriverUpgrade", "True", "UpgradeDone", "driver validated"}, nullptr,
                                std::chrono::minutes(30), "gpunode-driver-manager");
  ASSERT_OK(other) << other.status();
  EXPECT_EQ(condition()["status"], "True") << "GpuStackReady removed by another manager's apply";
  // The kubelet's own conditions are untouched (strategic merge by type).
  auto n = admin_->Get("/api/v1/nodes/" + node_);
  bool kubelet_ready = false;
  for (const auto& c : (*n)["status"]["conditions"]) kubelet_ready |= c["type"] == "Ready";
  EXPECT_TRUE(kubelet_ready);
}

TEST_F(ApiServer, AnEventIsRecordedOnTheNode) {
  ASSERT_OK(CreateNodeEvent(*admin_, node_, "Warning", "GpuStackNotReady", "kernel.module-mismatch: reboot"));
  auto list = admin_->Get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D" + node_ +
                          ",reason%3DGpuStackNotReady");
  ASSERT_OK(list) << list.status();
  ASSERT_FALSE((*list)["items"].empty());
  const auto& ev = (*list)["items"].back();
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_EQ(ev["involvedObject"]["kind"], "Node");
  EXPECT_EQ(ev["source"]["component"], "gpunode");
  EXPECT_EQ(ev["message"], "kernel.module-mismatch: reboot");
}

TEST_F(ApiServer, AConflictingWriteIsReadAndAppliedAgain) {
  const std::string path = "/api/v1/nodes/" + node_;
  auto attempts = UpdateWithRetry(*admin_, path, [&](nlohmann::json& n, int attempt) {
    if (attempt == 1) {  // someone else writes between our read and our write
      EXPECT_OK(admin_->MergePatch(path, {{"metadata", {{"annotations", {{"example.com/other", "1"}}}}}}));
    }
    n["metadata"]["annotations"]["gpunode.io/test-retry"] = std::to_string(attempt);
    return true;
  });
  ASSERT_OK(attempts) << attempts.status();
  EXPECT_EQ(*attempts, 2) << "the first PUT carried a stale resourceVersion: 409, read again";
  auto n = admin_->Get(path);
  EXPECT_EQ((*n)["metadata"]["annotations"]["gpunode.io/test-retry"], "2");
  EXPECT_EQ((*n)["metadata"]["annotations"]["example.com/other"], "1") << "the other writer's change is kept";
  ASSERT_TRUE(admin_->MergePatch(path, {{"metadata", {{"annotations", {{"example.com/other", nullptr},
                                                                       {"gpunode.io/test-retry", nullptr}}}}}}).ok());
}

TEST_F(ApiServer, AStalePutIsAConflictByReason) {
  const std::string path = "/api/v1/nodes/" + node_;
  auto n = admin_->Get(path);
  ASSERT_OK(n) << n.status();
  ASSERT_OK(admin_->MergePatch(path, {{"metadata", {{"annotations", {{"gpunode.io/test-stale", "1"}}}}}}));
  auto stale = admin_->Put(path, *n);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(ReasonOf(stale.status()), "Conflict") << stale.status();
  ASSERT_OK(admin_->MergePatch(path, {{"metadata", {{"annotations", {{"gpunode.io/test-stale", nullptr}}}}}}));
}

TEST_F(ApiServer, NodesListedPageByPageFromTheWatchCache) {
  size_t items = 0;
  ListOptions lo;
  lo.limit = 1;
  lo.resource_version = "0";
  auto r = admin_->List("/api/v1/nodes", lo, [&](nlohmann::json& item) {
    EXPECT_TRUE(item["metadata"]["name"].is_string());
    ++items;
    return absl::OkStatus();
  });
  ASSERT_OK(r) << r.status();
  EXPECT_GE(items, 1u);
  EXPECT_FALSE(r->resource_version.empty());
  lo.resource_version.clear();  // a consistent list, one Node per page
  size_t consistent = 0;
  auto c = admin_->List("/api/v1/nodes", lo, [&](nlohmann::json&) {
    ++consistent;
    return absl::OkStatus();
  });
  ASSERT_OK(c) << c.status();
  EXPECT_EQ(consistent, items);
  EXPECT_EQ(c->pages, static_cast<int>(items) + (items > 0 ? 0 : 1)) << "limit=1: a page per Node";
}

TEST_F(ApiServer, AWatchSeesChangesAndSurvivesAnApiServerRestart) {
  std::stop_source stop;
  std::mutex mu;
  std::vector<std::string> seen;  // the label's value in every Node the watch delivered
  std::vector<std::string> logs;
  WatchNodeOptions options;
  options.timeout_seconds = 30;
  options.backoff = std::chrono::milliseconds(200);
  options.log = [&](const std::string& m) {
    std::lock_guard<std::mutex> l(mu);
    logs.push_back(m);
  };
  const std::string path = "/api/v1/nodes/" + node_;
  ASSERT_OK(admin_->MergePatch(path, {{"metadata", {{"labels", {{"gpunode.io/test-watch", nullptr}}}}}}));
  Client watcher(admin_conn_);
  Status result;
  struct Joiner {  // an ASSERT below must not leave the watch thread running
    std::stop_source& stop;
    std::thread& t;
    ~Joiner() {
      stop.request_stop();
      if (t.joinable()) t.join();
    }
  };
  std::thread t;
  Joiner joiner{stop, t};
  t = std::thread([&] {
    result = WatchNode(watcher, node_, [&](const nlohmann::json& n) {
      std::lock_guard<std::mutex> l(mu);
      seen.push_back(n["metadata"].value("labels", nlohmann::json::object()).value("gpunode.io/test-watch", "-"));
      return true;
    }, stop.get_token(), options);
  });
  auto wait_for = [&](const std::string& value, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard<std::mutex> l(mu);
        if (std::find(seen.begin(), seen.end(), value) != seen.end()) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  ASSERT_TRUE(wait_for("-", std::chrono::seconds(5))) << "no first read";
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_OK(admin_->MergePatch(path, {{"metadata", {{"labels", {{"gpunode.io/test-watch", "1"}}}}}}));
  EXPECT_TRUE(wait_for("1", std::chrono::seconds(3))) << "the change did not arrive";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  if (const char* cluster = std::getenv("GPUNODE_TEST_CLUSTER_SH"); cluster != nullptr && *cluster != '\0') {
    const std::string log = "/tmp/gpunode-kube-test-restart.log";
    const int rc = std::system((std::string(cluster) + " restart-apiserver >" + log + " 2>&1").c_str());
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_EQ(rc, 0) << text;
    ASSERT_OK(admin_->MergePatch(path, {{"metadata", {{"labels", {{"gpunode.io/test-watch", "2"}}}}}}));
    EXPECT_TRUE(wait_for("2", std::chrono::seconds(20))) << "no event after the API server restart";
    std::lock_guard<std::mutex> l(mu);
    EXPECT_FALSE(logs.empty()) << "the broken watch should have been noticed and logged";
  }
  stop.request_stop();
  if (t.joinable()) t.join();
  EXPECT_OK(result) << result;
  ASSERT_OK(admin_->MergePatch(path, {{"metadata", {{"labels", {{"gpunode.io/test-watch", nullptr}}}}}}));
}

}  // namespace
}  // namespace gpunode::kube
