#include "src/container/runtime_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

namespace gpunode::container {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(GPUNODE_SOURCE_DIR) + "/test/fixtures/runtime/" + name);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

RuntimeConfigOptions Opts(RuntimeKind kind, bool def = false, bool cdi = false) {
  RuntimeConfigOptions o;
  o.kind = kind;
  o.set_as_default = def;
  o.enable_cdi = cdi;
  return o;
}

toml::table ParseOrDie(const std::string& text) {
  toml::parse_result r = toml::parse(text);
  EXPECT_TRUE(static_cast<bool>(r)) << (r ? "" : std::string(r.error().description())) << "\n"
                                    << text;
  return r ? std::move(r).table() : toml::table{};
}

const toml::node* At(const toml::table& t, std::initializer_list<std::string> path) {
  const toml::node* n = &t;
  for (const std::string& k : path) {
    if (n == nullptr || !n->is_table()) return nullptr;
    n = n->as_table()->get(k);
  }
  return n;
}

// Every line of `before` that is not blank is still in `after`, in order (comments included).
void ExpectLinesKept(const std::string& before, const std::string& after) {
  std::istringstream in(before);
  std::string line;
  size_t pos = 0;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (line.find("default_runtime_name") != std::string::npos) continue;  // may be edited
    size_t at = after.find(line, pos);
    ASSERT_NE(at, std::string::npos) << "lost line: " << line << "\n--- result:\n" << after;
    pos = at + line.size();
  }
}

// ---------------------------------------------------------------------------------------------
// Docker

TEST(DockerConfigTest, EmptyFileGetsRuntime) {
  auto r = EditDockerConfig("", Opts(RuntimeKind::kDocker), "daemon.json");
  ASSERT_TRUE(r.ok()) << r.status();
  auto doc = nlohmann::json::parse(r->text);
  EXPECT_EQ(doc["runtimes"]["nvidia"]["path"], "nvidia-container-runtime");
  EXPECT_TRUE(doc["runtimes"]["nvidia"]["args"].is_array());
  EXPECT_FALSE(doc.contains("default-runtime"));
  EXPECT_FALSE(doc.contains("features"));
}

TEST(DockerConfigTest, KeepsOtherRuntimesKeysAndOrderMergesFeatures) {
  std::string in = Fixture("daemon-runtimes.json");
  auto r = EditDockerConfig(in, Opts(RuntimeKind::kDocker, true, true), "daemon.json");
  ASSERT_TRUE(r.ok()) << r.status();
  auto doc = nlohmann::ordered_json::parse(r->text);
  EXPECT_EQ(doc["runtimes"]["kata"]["path"], "/usr/bin/kata-runtime");
  EXPECT_EQ(doc["runtimes"]["nvidia"]["path"], "nvidia-container-runtime");
  EXPECT_EQ(doc["default-runtime"], "nvidia");
  EXPECT_EQ(doc["features"]["buildkit"], true);  // merged, not replaced
  EXPECT_EQ(doc["features"]["cdi"], true);
  EXPECT_EQ(doc["log-opts"]["max-size"], "10m");
  // Key order survives; the 2-space indentation of the file too.
  std::vector<std::string> keys;
  for (auto& [k, v] : doc.items()) keys.push_back(k);
  EXPECT_THAT(keys, ::testing::ElementsAre("log-driver", "log-opts", "features", "runtimes",
                                           "data-root", "default-runtime"));
  EXPECT_THAT(r->text, HasSubstr("\n  \"log-driver\""));
  // Idempotent.
  auto again = EditDockerConfig(r->text, Opts(RuntimeKind::kDocker, true, true), "daemon.json");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->text, r->text);
}

TEST(DockerConfigTest, RuntimePathFlag) {
  RuntimeConfigOptions o = Opts(RuntimeKind::kDocker);
  o.runtime_path = "/usr/local/bin/gpunode-oci-runtime";
  auto r = EditDockerConfig("{}", o, "daemon.json");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(nlohmann::json::parse(r->text)["runtimes"]["nvidia"]["path"],
            "/usr/local/bin/gpunode-oci-runtime");
}

TEST(DockerConfigTest, MalformedNamesFileAndPosition) {
  auto r = EditDockerConfig(Fixture("daemon-malformed.json"), Opts(RuntimeKind::kDocker),
                            "/etc/docker/daemon.json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("parse /etc/docker/daemon.json: line "));
  EXPECT_FALSE(EditDockerConfig("[1]", Opts(RuntimeKind::kDocker), "d.json").ok());
  EXPECT_FALSE(EditDockerConfig(R"({"runtimes": 3})", Opts(RuntimeKind::kDocker), "d.json").ok());
}

// ---------------------------------------------------------------------------------------------
// containerd

TEST(ContainerdConfigTest, Versions) {
  EXPECT_EQ(*ContainerdConfigVersion("", "c"), 2);
  EXPECT_EQ(*ContainerdConfigVersion("# only a comment\n", "c"), 2);
  EXPECT_EQ(*ContainerdConfigVersion(Fixture("containerd-v1.toml"), "c"), 1);
  EXPECT_EQ(*ContainerdConfigVersion(Fixture("containerd-v2.toml"), "c"), 2);
  EXPECT_EQ(*ContainerdConfigVersion(Fixture("containerd-v3.toml"), "c"), 3);
  EXPECT_FALSE(ContainerdConfigVersion("version = 7\n", "c").ok());
}

struct ContainerdCase {
  const char* fixture;
  std::vector<std::string> cri;
};

class ContainerdFixtureTest : public ::testing::TestWithParam<ContainerdCase> {};

TEST_P(ContainerdFixtureTest, AddsRuntimeKeepsEverythingElse) {
  const ContainerdCase& c = GetParam();
  std::string in = Fixture(c.fixture);
  auto r = EditContainerdConfig(in, Opts(RuntimeKind::kContainerd, true, true), c.fixture);
  ASSERT_TRUE(r.ok()) << r.status();
  toml::table before = ParseOrDie(in);
  toml::table after = ParseOrDie(r->text);
  const toml::node* cri = &after;
  for (const std::string& k : c.cri) cri = cri->as_table()->get(k);
  ASSERT_NE(cri, nullptr);
  const toml::table& t = *cri->as_table();
  const toml::node* nv = At(t, {"containerd", "runtimes", "nvidia"});
  ASSERT_NE(nv, nullptr) << r->text;
  EXPECT_EQ(At(*nv->as_table(), {"options", "BinaryName"})->value<std::string>(),
            "/usr/bin/nvidia-container-runtime");
  EXPECT_EQ(At(*nv->as_table(), {"options", "SystemdCgroup"})->value<bool>(), true);
  EXPECT_EQ(At(*nv->as_table(), {"runtime_type"})->value<std::string>(), "io.containerd.runc.v2");
  EXPECT_EQ(At(t, {"containerd", "default_runtime_name"})->value<std::string>(), "nvidia");
  EXPECT_EQ(At(t, {"enable_cdi"})->value<bool>(), true);
  // runc itself is unchanged, comments and unknown keys survive.
  const toml::node* runc_before = At(before, {"plugins"});
  ASSERT_NE(runc_before, nullptr);
  ExpectLinesKept(in, r->text);
  // Idempotent: the second run returns the text unchanged.
  auto again = EditContainerdConfig(r->text, Opts(RuntimeKind::kContainerd, true, true), "x");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->text, r->text);
}

INSTANTIATE_TEST_SUITE_P(
    Versions, ContainerdFixtureTest,
    ::testing::Values(
        ContainerdCase{"containerd-v1.toml", {"plugins", "cri"}},
        ContainerdCase{"containerd-v2.toml", {"plugins", "io.containerd.grpc.v1.cri"}},
        ContainerdCase{"containerd-v3.toml", {"plugins", "io.containerd.cri.v1.runtime"}}),
    [](const ::testing::TestParamInfo<ContainerdCase>& param_info) {
      std::string name = param_info.param.fixture;
      name = name.substr(0, name.find('.'));
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

TEST(ContainerdConfigTest, V2WithoutFlagsLeavesDefaultAndCdiAlone) {
  std::string in = Fixture("containerd-v2.toml");
  auto r = EditContainerdConfig(in, Opts(RuntimeKind::kContainerd), "c");
  ASSERT_TRUE(r.ok()) << r.status();
  toml::table after = ParseOrDie(r->text);
  const toml::node* cri = At(after, {"plugins", "io.containerd.grpc.v1.cri"});
  EXPECT_EQ(At(*cri->as_table(), {"containerd", "default_runtime_name"})->value<std::string>(),
            "runc");
  EXPECT_EQ(At(*cri->as_table(), {"enable_cdi"}), nullptr);
  // The new table sits right after runc's options, with a readable layout.
  EXPECT_THAT(r->text,
              HasSubstr("            NoPivotRoot = false\n\n"
                        "          [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes."
                        "nvidia]\n            base_runtime_spec = \"\"\n"));
  EXPECT_THAT(r->text,
              HasSubstr("\n            BinaryName = \"/usr/bin/nvidia-container-runtime\"\n"));
  // Only additions.
  std::string diff = UnifiedDiff(in, r->text, "a", "b");
  std::istringstream lines(diff);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("---", 0) == 0) continue;
    EXPECT_NE(line.front(), '-') << diff;
  }
}

TEST(ContainerdConfigTest, EmptyFileGetsVersion2AndRuntime) {
  auto r = EditContainerdConfig("", Opts(RuntimeKind::kContainerd), "c");
  ASSERT_TRUE(r.ok()) << r.status();
  toml::table t = ParseOrDie(r->text);
  EXPECT_EQ(t["version"].value<int64_t>(), 2);
  EXPECT_NE(At(t, {"plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes", "nvidia",
                   "options", "BinaryName"}),
            nullptr)
      << r->text;
  auto again = EditContainerdConfig(r->text, Opts(RuntimeKind::kContainerd), "c");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->text, r->text);
}

TEST(ContainerdConfigTest, ReplacesExistingValueKeepingComment) {
  std::string in =
      "version = 2\n"
      "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
      "  default_runtime_name = \"runc\"  # chosen by ops\n";
  auto r = EditContainerdConfig(in, Opts(RuntimeKind::kContainerd, true), "c");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->text, HasSubstr("  default_runtime_name = \"nvidia\" # chosen by ops\n"));
  EXPECT_THAT(r->text, Not(HasSubstr("\"runc\"")));
}

TEST(ContainerdConfigTest, DottedKeysInParentTable) {
  std::string in =
      "version = 2\n"
      "[plugins.\"io.containerd.grpc.v1.cri\"]\n"
      "containerd.snapshotter = \"overlayfs\"\n";
  auto r = EditContainerdConfig(in, Opts(RuntimeKind::kContainerd, true), "c");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->text, HasSubstr("containerd.default_runtime_name = \"nvidia\""));
  ParseOrDie(r->text);
}

TEST(ContainerdConfigTest, MalformedNamesFileAndLine) {
  auto r = EditContainerdConfig(Fixture("containerd-malformed.toml"),
                                Opts(RuntimeKind::kContainerd), "/etc/containerd/config.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("parse /etc/containerd/config.toml: line 2"));
}

TEST(ContainerdConfigTest, RuntimesNotATableIsRefused) {
  auto r = EditContainerdConfig(
      "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\nruntimes = 5\n",
      Opts(RuntimeKind::kContainerd), "c");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("is not a table"));
}

// ---------------------------------------------------------------------------------------------
// CRI-O

TEST(CrioConfigTest, DropInFromNothing) {
  auto r = EditCrioConfig("", Opts(RuntimeKind::kCrio, true, true), "99-nvidia.toml");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text,
            "[crio.runtime.runtimes.nvidia]\n"
            "runtime_path = \"/usr/bin/nvidia-container-runtime\"\n"
            "runtime_type = \"oci\"\n"
            "\n"
            "[crio.runtime]\n"
            "default_runtime = \"nvidia\"\n");
  EXPECT_THAT(r->warnings, ::testing::ElementsAre(HasSubstr("--cdi is ignored")));
}

TEST(CrioConfigTest, MainFileKeepsComments) {
  std::string in = Fixture("crio.conf");
  auto r = EditCrioConfig(in, Opts(RuntimeKind::kCrio, true), "crio.conf");
  ASSERT_TRUE(r.ok()) << r.status();
  toml::table t = ParseOrDie(r->text);
  EXPECT_EQ(At(t, {"crio", "runtime", "default_runtime"})->value<std::string>(), "nvidia");
  EXPECT_EQ(At(t, {"crio", "runtime", "runtimes", "nvidia", "runtime_type"})->value<std::string>(),
            "oci");
  EXPECT_EQ(At(t, {"crio", "runtime", "runtimes", "crun", "runtime_root"})->value<std::string>(),
            "/run/crun");
  EXPECT_THAT(r->text, HasSubstr("# default_runtime is the runtime used when none is requested"));
  EXPECT_THAT(r->text, HasSubstr("[crio.runtime.runtimes.nvidia]\n"));
  auto again = EditCrioConfig(r->text, Opts(RuntimeKind::kCrio, true), "crio.conf");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->text, r->text);
}

// ---------------------------------------------------------------------------------------------
// Diff

TEST(UnifiedDiffTest, Hunks) {
  EXPECT_EQ(UnifiedDiff("a\n", "a\n", "x", "y"), "");
  EXPECT_EQ(UnifiedDiff("", "a\nb\n", "/dev/null", "f"), "--- /dev/null\n+++ f\n@@ -0,0 +1,2 @@\n+a\n+b\n");
  EXPECT_EQ(UnifiedDiff("1\n2\n3\n4\n5\n6\n7\n8\n", "1\n2\n3\n4\nX\n5\n6\n7\n8\n", "x", "y"),
            "--- x\n+++ y\n@@ -2,6 +2,7 @@\n 2\n 3\n 4\n+X\n 5\n 6\n 7\n");
}

// ---------------------------------------------------------------------------------------------
// Files

class ApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpunode-rtcfg-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    ::chmod(dir_.c_str(), 0755);
    std::filesystem::remove_all(dir_);
  }
  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string dir_;
};

TEST_F(ApplyTest, WritesBackupKeepsModeAndIsIdempotent) {
  std::string path = dir_ + "/config.toml";
  std::string in = Fixture("containerd-v2.toml");
  Write(path, in);
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  auto r = ApplyRuntimeConfig(path, Opts(RuntimeKind::kContainerd), false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
  EXPECT_FALSE(r->created);
  EXPECT_EQ(r->backup_path, path + ".gpunode.bak");
  EXPECT_EQ(Read(path + ".gpunode.bak"), in);
  EXPECT_THAT(Read(path), HasSubstr("runtimes.nvidia]"));
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  std::string written = Read(path);
  auto again = ApplyRuntimeConfig(path, Opts(RuntimeKind::kContainerd), false);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->changed);
  EXPECT_EQ(Read(path), written);
  // No temp files left behind.
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir_)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 2);
}

TEST_F(ApplyTest, MissingFileIsCreatedWithParents) {
  std::string path = dir_ + "/etc/crio/crio.conf.d/99-nvidia.toml";
  auto r = ApplyRuntimeConfig(path, Opts(RuntimeKind::kCrio), false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->created);
  EXPECT_TRUE(r->backup_path.empty());
  EXPECT_THAT(Read(path), HasSubstr("runtime_type = \"oci\""));
}

TEST_F(ApplyTest, DryRunChangesNothing) {
  std::string path = dir_ + "/daemon.json";
  Write(path, "{\"debug\": true}\n");
  auto r = ApplyRuntimeConfig(path, Opts(RuntimeKind::kDocker, true), true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
  EXPECT_THAT(r->diff, HasSubstr("+    \"default-runtime\": \"nvidia\""));
  EXPECT_THAT(r->diff, HasSubstr("-{\"debug\": true}"));
  EXPECT_EQ(Read(path), "{\"debug\": true}\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".gpunode.bak"));
}

TEST_F(ApplyTest, MalformedInputLeavesFileUntouched) {
  std::string path = dir_ + "/config.toml";
  std::string bad = Fixture("containerd-malformed.toml");
  Write(path, bad);
  auto r = ApplyRuntimeConfig(path, Opts(RuntimeKind::kContainerd), false);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(path));
  EXPECT_EQ(Read(path), bad);
  EXPECT_FALSE(std::filesystem::exists(path + ".gpunode.bak"));
}

TEST_F(ApplyTest, UnwritableDirectoryLeavesFileUntouched) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  std::string path = dir_ + "/daemon.json";
  Write(path, "{}\n");
  ASSERT_EQ(::chmod(dir_.c_str(), 0555), 0);
  auto r = ApplyRuntimeConfig(path, Opts(RuntimeKind::kDocker), false);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(dir_));
  EXPECT_EQ(Read(path), "{}\n");
}

// Works as root too: the backup cannot be written (a directory holds its name), so the write
// stops after the new text went to a temp file; the original stays and no temp file is left.
TEST_F(ApplyTest, FailedWriteLeavesFileUntouchedAndNoTempFile) {
  std::string path = dir_ + "/config.toml";
  std::string in = Fixture("containerd-v3.toml");
  Write(path, in);
  ASSERT_TRUE(std::filesystem::create_directory(path + ".gpunode.bak"));
  auto r = ApplyRuntimeConfig(path, Opts(RuntimeKind::kContainerd), false);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(".gpunode.bak"));
  EXPECT_EQ(Read(path), in);
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir_)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 2);  // config.toml and the blocking directory
}

}  // namespace
}  // namespace gpunode::container
