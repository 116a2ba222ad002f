// containerd's and Docker's stores against sockets that are missing, that are not sockets, and that
// never answer (the deadline), and Docker's against a stand-in Engine API on a Unix socket (its
// answers as Docker 20.10 gives them). The real daemons are in test/image/stores_e2e_test.sh.
#include <httplib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/image/store_containerd.h"
#include "src/image/store_docker.h"
#include "test/testing/temp_dir_test.h"

namespace gpunode::image {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A Unix socket that is listening but never accepts nor answers.
int SilentSocket(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::listen(fd, 16), 0);
  return fd;
}

TEST(Containerd, NamespacesInGpunodesOrder) {
  EXPECT_THAT(OrderNamespaces({"zeta", "default", "buildkit", "k8s.io", "moby"}),
              ElementsAre("k8s.io", "moby", "default", "buildkit", "zeta"));
  EXPECT_THAT(OrderNamespaces({"default"}), ElementsAre("default"));
  EXPECT_TRUE(OrderNamespaces({}).empty());
}

class SocketStoreTest : public gpunode::testing::TempDirTest {
 protected:
  StoreOptions Fast() {
    StoreOptions s;
    s.timeout = absl::Milliseconds(300);
    return s;
  }
  const compat::ImageRef ref_ = *compat::ParseImageRef("nvidia/cuda:12.8.1-base-ubuntu24.04");
};

TEST_F(SocketStoreTest, NoSocketIsUnavailableAndNamed) {
  auto fs = *HostFs::Open(dir_.string());
  auto c = NewContainerdStore(fs, {"/run/containerd/containerd.sock", "", Fast()})->Find(ref_);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(c.status().message(), HasSubstr("containerd /run/containerd/containerd.sock: no socket at " +
                                              Path("run/containerd/containerd.sock")));
  auto d = NewDockerStore(fs, {"/var/run/docker.sock", Fast()})->List();
  EXPECT_EQ(d.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(d.status().message(), HasSubstr("docker /var/run/docker.sock: no socket at"));
  std::ofstream(Path("file.sock")) << "x";
  auto f = NewDockerStore(fs, {"/file.sock", Fast()})->List();
  EXPECT_THAT(f.status().message(), HasSubstr("is not a socket"));
}

TEST_F(SocketStoreTest, ASocketThatNeverAnswersMeetsTheDeadline) {
  const int fd = SilentSocket(Path("silent.sock"));
  auto fs = *HostFs::Open(dir_.string());
  for (int which = 0; which < 2; ++which) {
    const auto start = std::chrono::steady_clock::now();
    StatusOr<ImageConfig> c = which == 0 ? NewContainerdStore(fs, {"/silent.sock", "", Fast()})->Find(ref_)
                                         : NewDockerStore(fs, {"/silent.sock", Fast()})->Find(ref_);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
    EXPECT_THAT(c.status().message(), HasSubstr("no answer within 300ms"));
    EXPECT_LT(s, 3.0) << c.status();
  }
  ::close(fd);
}

// Docker's Engine API as Docker answers it, for the paths the store asks.
class DockerStandIn : public SocketStoreTest {
 protected:
  void SetUp() override {
    SocketStoreTest::SetUp();
    server_.set_address_family(AF_UNIX);
    server_.Get(R"(/images/json)", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"([{"Id":"sha256:)" + std::string(64, '1') +
                          R"(","RepoTags":["nvidia/cuda:12.8.1-base-ubuntu24.04"],"RepoDigests":["nvidia/cuda@sha256:)" +
                          std::string(64, '2') + R"("]},{"Id":"sha256:)" + std::string(64, '3') +
                          R"(","RepoTags":["<none>:<none>"],"RepoDigests":[]}])",
                      "application/json");
    });
    server_.Get(R"(/images/(.+)/json)", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string name = req.matches[1];
      asked_.push_back(name);
      if (name == "docker.io/nvidia/cuda:12.8.1-base-ubuntu24.04" || name == "sha256:" + std::string(64, '1')) {
        res.set_content(R"({"Id":"sha256:)" + std::string(64, '1') +
                            R"(","RepoTags":["nvidia/cuda:12.8.1-base-ubuntu24.04"],"RepoDigests":["nvidia/cuda@sha256:)" +
                            std::string(64, '2') +
                            R"("],"Os":"linux","Architecture":"amd64","Config":{"Env":["CUDA_VERSION=12.8.1","NVIDIA_REQUIRE_CUDA=cuda>=12.8"],"Labels":{"maintainer":"NVIDIA CORPORATION <cudatools@nvidia.com>"}},"RootFS":{"Type":"layers"}})",
                        "application/json");
      } else if (name == "sha256:" + std::string(64, '3')) {
        res.set_content(R"({"Id":"x","Config":{"Env":"oops"}})", "application/json");
      } else if (name == "docker.io/library/huge:1") {
        res.set_content(std::string(kMaxDockerInspectBytes + 10, ' '), "application/json");
      } else {
        res.status = 404;
        res.set_content(R"({"message":"No such image: )" + name + R"("})", "application/json");
      }
    });
    thread_ = std::thread([this] { server_.listen(Path("docker.sock"), 80); });
    for (int i = 0; i < 500 && !server_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    fs_ = *HostFs::Open(dir_.string());
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
    SocketStoreTest::TearDown();
  }
  httplib::Server server_;
  std::thread thread_;
  std::vector<std::string> asked_;
  std::optional<HostFs> fs_;
};

TEST_F(DockerStandIn, FindsListsAndNamesWhatIsMissing) {
  auto store = NewDockerStore(*fs_, {"/docker.sock", Fast()});
  auto c = store->Find(ref_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(EnvValue(*c, "NVIDIA_REQUIRE_CUDA"), "cuda>=12.8");
  EXPECT_EQ(c->labels.at("maintainer"), "NVIDIA CORPORATION <cudatools@nvidia.com>");
  EXPECT_EQ(c->digest, "sha256:" + std::string(64, '2'));
  EXPECT_EQ(c->config_digest, "sha256:" + std::string(64, '1'));
  EXPECT_EQ(c->source, "image config (docker)");
  EXPECT_EQ(c->os + "/" + c->architecture, "linux/amd64");

  // Pinned to another digest than the one Docker knows: not this image.
  auto pinned = store->Find(*compat::ParseImageRef("nvidia/cuda:12.8.1-base-ubuntu24.04@sha256:" + std::string(64, '9')));
  EXPECT_EQ(pinned.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(pinned.status().message(), HasSubstr("is sha256:2222"));

  auto missing = store->Find(*compat::ParseImageRef("nothing:1"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "docker /docker.sock: image docker.io/library/nothing:1 not found");

  auto huge = store->Find(*compat::ParseImageRef("huge:1"));
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(huge.status().message(), HasSubstr("larger than the 8388608 bytes gpunode reads"));

  auto list = store->List();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_THAT((*list)[0].names, ElementsAre("nvidia/cuda:12.8.1-base-ubuntu24.04", "nvidia/cuda@sha256:" + std::string(64, '2')));
  EXPECT_EQ(EnvValue((*list)[0].config, "CUDA_VERSION"), "12.8.1");
  EXPECT_TRUE((*list)[1].names.empty());
  EXPECT_THAT((*list)[1].error, HasSubstr("config.Env is not a list"));
}

TEST(DockerInspect, RefusesWrongShapes) {
  EXPECT_FALSE(ConfigFromDockerInspect("[]", "", "w").ok());
  EXPECT_THAT(ConfigFromDockerInspect(R"({"Config":"x"})", "", "w").status().message(), HasSubstr("Config is not an object"));
  EXPECT_THAT(ConfigFromDockerInspect(R"({"Os":1})", "", "w").status().message(), HasSubstr("os is not a string"));
  auto ok = ConfigFromDockerInspect(R"({"Config":null,"RepoDigests":["a@sha256:1","b"]})", "", "w");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->digest, "sha256:1");
}

}  // namespace
}  // namespace gpunode::image
