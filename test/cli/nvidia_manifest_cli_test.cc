// NVIDIA's published DaemonSets pointed at gpunode: each container of
// test/fixtures/nvidia-manifests/*.yaml (the exact args and env of NVIDIA's static manifests and
// Helm charts, see its README.md) is started as `gpunode COMPONENT ARGS...` with exactly that
// environment, on a simulated node, and must start and serve:
//   plugin    registers with a kubelet (test/tools/kubelet_emulator over real gRPC), lists the
//             GPUs and answers an Allocate; its socket is in the kubelet's folder;
//   labels    writes its features file (GFD's loop mode, the manifests' default) and removes it on
//             SIGTERM;
//   exporter  answers /metrics with DCGM_FI_DEV_GPU_UTIL lines.
// Each logs the "does not apply" line of every setting it ignores exactly once, and no other.
//
// What a pod has that a test must stand in for (and nothing else is added or changed):
//   - the node: a simulated host root (`gpunode sim hostroot`) as GPUNODE_HOST_ROOT and the
//     simulated NVML as GPUNODE_NVML_LIBRARY / GPUNODE_SIM_PROFILE (in a pod, the container
//     toolkit injects libnvidia-ml.so.1 and the volumes give the host's files);
//   - the downward API: fieldRef spec.nodeName = sim-node-1, metadata.namespace = nvidia,
//     metadata.name = gpu-feature-discovery-x7k2p;
//   - the volumes: the kubelet's device-plugin folder is a temporary folder (--kubelet-dir), the
//     pod-resources socket a path in a temporary folder (DCGM_POD_RESOURCES_KUBELET_SOCKET), the
//     chart's counters ConfigMap a temporary file of our own with the argument pointing at it;
//     the NFD features folder is below the simulated host root already;
//   - the port: ":9400" becomes a free port, so the test runs beside anything on 9400.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <fstream>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/base/yaml.h"
#include "test/testing/run_gpunode.h"
#include "test/testing/temp_dir_test.h"
#include "test/testing/status_matchers.h"
#include "test/testing/free_port.h"

namespace gpunode {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using ::testing::HasSubstr;

constexpr char kNodeName[] = "sim-node-1";
constexpr char kNamespace[] = "nvidia";
constexpr char kPodName[] = "gpu-feature-discovery-x7k2p";

struct Manifest {
  std::string component;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> mounts;
  std::vector<std::string> does_not_apply;
};

Manifest LoadManifest(const std::string& name) {
  const fs::path path = fs::path(GPUNODE_SOURCE_DIR) / "test/fixtures/nvidia-manifests" / (name + ".yaml");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto doc = LoadYaml(text.str(), path.string());
  EXPECT_OK(doc) << doc.status();
  Manifest m;
  if (!doc.ok()) return m;
  m.component = (*doc)["component"].as<std::string>();
  for (const auto& a : (*doc)["args"]) m.args.push_back(a.as<std::string>());
  for (const auto& e : (*doc)["env"]) {
    std::string value;
    if (e["value"]) {
      value = e["value"].as<std::string>();
    } else {
      const std::string ref = e["fieldRef"].as<std::string>();
      value = ref == "spec.nodeName"       ? kNodeName
              : ref == "metadata.namespace" ? kNamespace
              : ref == "metadata.name"      ? kPodName
                                            : "";
      EXPECT_FALSE(value.empty()) << "fieldRef " << ref;
    }
    m.env.emplace_back(e["name"].as<std::string>(), value);
  }
  for (const auto& p : (*doc)["mounts"]) m.mounts.push_back(p.as<std::string>());
  for (const auto& s : (*doc)["doesNotApply"]) m.does_not_apply.push_back(s.as<std::string>());
  return m;
}

using ::gpunode::testing::FreePort;

// GET http://127.0.0.1:port/path over a plain socket (HTTP/1.0: the server closes); "" on failure.
std::string HttpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[65536];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

// A child process with its own environment (nothing inherited but the sanitizers' settings), its
// stdout and stderr in `log`.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
          const std::string& log) {
    std::vector<std::string> envs;
    for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
    envs.push_back("PATH=/usr/bin:/bin");
    for (const char* keep : {"ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS", "TMPDIR"}) {
      if (const char* v = std::getenv(keep)) envs.push_back(std::string(keep) + "=" + v);
    }
    // Made before fork(): the child may only call async-signal-safe functions until it execs.
    std::vector<char*> a, e;
    for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    for (const std::string& s : envs) e.push_back(const_cast<char*>(s.c_str()));
    e.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execve(a[0], a.data(), e.data());
      ::_exit(127);
    }
  }
  ~Process() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool Running() {
    if (exited_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      status_ = status;
    }
    return !exited_;
  }
  // Waits up to `limit` for the exit; its exit code, -1 if it did not exit or was killed by a signal.
  int Wait(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (Running() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!exited_) return -1;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
  }
  int Stop() {
    if (Running()) ::kill(pid_, SIGTERM);
    return Wait(std::chrono::seconds(20));
  }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

template <typename Pred>
bool WaitUntil(Pred pred, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pred();
}

class NvidiaManifestTest : public gpunode::testing::TempDirTest,
                           public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    const std::string bin = std::string(GPUNODE_BIN_DIR);
    sim_library_ = bin + "/libgpunode-simnvml.so";
    auto r = gpunode::testing::RunGpunode("sim hostroot dgx-h200 " + Path("root") + " --profile-file " +
                                          Path("profile.yaml"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }

  void TearDown() override {
    if (!kubelet_dir_.empty()) fs::remove_all(kubelet_dir_);
    TempDirTest::TearDown();
  }

  // The kubelet's device-plugin folder: short, for gRPC's 107-character socket paths.
  const std::string& KubeletDir() {
    if (kubelet_dir_.empty()) {
      std::string tmpl = (fs::temp_directory_path() / "dp-XXXXXX").string();
      if (::mkdtemp(tmpl.data()) != nullptr) kubelet_dir_ = tmpl;
    }
    return kubelet_dir_;
  }

  std::string Log() const { return Read("gpunode.log"); }

  // The "does not apply" lines: exactly one per expected setting, none for anything else.
  void ExpectDoesNotApplyLines(const Manifest& m) {
    const std::string log = Log();
    std::vector<std::string> lines;
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);) {
      if (line.find("does not apply") != std::string::npos) lines.push_back(line);
    }
    EXPECT_EQ(lines.size(), m.does_not_apply.size()) << log;
    for (const std::string& setting : m.does_not_apply) {
      int n = 0;
      for (const std::string& line : lines) n += line.find(setting) != std::string::npos;
      EXPECT_EQ(n, 1) << setting << " in\n" << log;
    }
  }

  std::string sim_library_;
  std::string kubelet_dir_;
};

TEST_P(NvidiaManifestTest, StartsAndServesOnASimulatedNode) {
  Manifest m = LoadManifest(GetParam());
  ASSERT_FALSE(m.component.empty());
  std::vector<std::string> argv = {std::string(GPUNODE_BIN_DIR) + "/gpunode", m.component};
  std::vector<std::pair<std::string, std::string>> env = {
      {"GPUNODE_HOST_ROOT", Path("root")},
      {"GPUNODE_NVML_LIBRARY", sim_library_},
      {"GPUNODE_SIM_PROFILE", Path("profile.yaml")},
  };
  int port = 0;
  for (auto [name, value] : m.env) {
    if (name == "DCGM_EXPORTER_LISTEN" && value == ":9400") {
      port = FreePort();
      value = ":" + std::to_string(port);
    }
    env.emplace_back(name, value);
  }
  // The volumes.
  std::vector<std::string> args = m.args;
  for (const std::string& mount : m.mounts) {
    if (mount == "/var/lib/kubelet/device-plugins") {
      args.insert(args.end(), {"--kubelet-dir", KubeletDir()});
    } else if (mount == "/var/lib/kubelet/pod-resources") {
      fs::create_directories(Path("pod-resources"));
      env.emplace_back("DCGM_POD_RESOURCES_KUBELET_SOCKET", Path("pod-resources/kubelet.sock"));
    } else if (mount == "/etc/dcgm-exporter/default-counters.csv") {
      std::ofstream(Path("default-counters.csv"))
          << "# the chart's ConfigMap in this test: a few fields of our own\n"
             "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n"
             "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"
             "DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).\n";
      for (std::string& a : args) {
        if (a == mount) a = Path("default-counters.csv");
      }
    } else if (mount != "/etc/kubernetes/node-feature-discovery/features.d") {
      FAIL() << "no stand-in for the volume " << mount;
    }
  }
  argv.insert(argv.end(), args.begin(), args.end());

  if (m.component == "plugin") {
    Process kubelet({std::string(GPUNODE_BIN_DIR) + "/kubelet_emulator", "--dir", KubeletDir(),
                     "--timeout-s", "40", "--allocate", "1"},
                    {}, Path("kubelet.log"));
    ASSERT_TRUE(WaitUntil([&] { return fs::exists(KubeletDir() + "/kubelet.sock"); }, std::chrono::seconds(10)))
        << Read("kubelet.log");
    Process gpunode(argv, env, Path("gpunode.log"));
    EXPECT_EQ(kubelet.Wait(std::chrono::seconds(45)), 0) << Read("kubelet.log") << "\n" << Log();
    std::map<std::string, nlohmann::json> events;
    std::istringstream lines(Read("kubelet.log"));
    for (std::string line; std::getline(lines, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.contains("event")) events[j["event"].get<std::string>()] = j;
    }
    EXPECT_TRUE(events.count("registered")) << Read("kubelet.log");
    EXPECT_EQ(events["list"]["devices"].size(), 8u) << Read("kubelet.log");
    EXPECT_EQ(events["allocate"]["ok"], true) << Read("kubelet.log");
    EXPECT_TRUE(fs::exists(KubeletDir() + "/nvidia-gpu.sock")) << Log();
    EXPECT_EQ(gpunode.Stop(), 0) << Log();
  } else if (m.component == "exporter") {
    ASSERT_GT(port, 0) << "the manifest sets DCGM_EXPORTER_LISTEN=:9400";
    Process gpunode(argv, env, Path("gpunode.log"));
    std::string page;
    EXPECT_TRUE(WaitUntil(
        [&] {
          page = HttpGet(port, "/metrics");
          return page.find("\nDCGM_FI_DEV_GPU_UTIL{") != std::string::npos || !gpunode.Running();
        },
        std::chrono::seconds(30)));
    EXPECT_THAT(page, HasSubstr("\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\"")) << page.substr(0, 2000) << "\n" << Log();
    EXPECT_THAT(page, HasSubstr(std::string("Hostname=\"") + kNodeName + "\""));  // NODE_NAME
    EXPECT_EQ(gpunode.Stop(), 0) << Log();
  } else if (m.component == "labels") {
    const std::string file = Path("root/etc/kubernetes/node-feature-discovery/features.d/gpunode");
    Process gpunode(argv, env, Path("gpunode.log"));
    std::string labels;
    EXPECT_TRUE(WaitUntil(
        [&] {
          labels = Read("root/etc/kubernetes/node-feature-discovery/features.d/gpunode");
          return labels.find("nvidia.com/gpu.product=") != std::string::npos || !gpunode.Running();
        },
        std::chrono::seconds(30)))
        << Log();
    EXPECT_THAT(labels, HasSubstr("nvidia.com/gpu.count=8\n"));
    EXPECT_THAT(labels, HasSubstr("nvidia.com/gpu.product=NVIDIA-H200\n"));
    EXPECT_TRUE(gpunode.Running()) << "GFD's default is a loop, not oneshot\n" << Log();
    EXPECT_EQ(gpunode.Stop(), 0) << Log();
    EXPECT_FALSE(fs::exists(file)) << "SIGTERM removes the features file, as GFD does";
  } else {
    FAIL() << "unknown component " << m.component;
  }
  ExpectDoesNotApplyLines(m);
}

INSTANTIATE_TEST_SUITE_P(NvidiaManifests, NvidiaManifestTest,
                         ::testing::Values("device-plugin-static", "device-plugin-helm", "gfd-static", "gfd-helm",
                                           "dcgm-exporter-static", "dcgm-exporter-helm"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace gpunode
