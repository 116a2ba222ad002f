#include "src/container/runtime_config.h"

#include <functional>
#include <chrono>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/status_matchers.h"

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
  ASSERT_OK(r) << r.status();
  auto doc = nlohmann::json::parse(r->text);
  EXPECT_EQ(doc["runtimes"]["nvidia"]["path"], "nvidia-container-runtime");
  EXPECT_TRUE(doc["runtimes"]["nvidia"]["args"].is_array());
  EXPECT_FALSE(doc.contains("default-runtime"));
  EXPECT_FALSE(doc.contains("features"));
}

TEST(DockerConfigTest, KeepsOtherRuntimesKeysAndOrderMergesFeatures) {
  std::string in = Fixture("daemon-runtimes.json");
  auto r = EditDockerConfig(in, Opts(RuntimeKind::kDocker, true, true), "daemon.json");
  ASSERT_OK(r) << r.status();
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
  ASSERT_OK(again);
  EXPECT_EQ(again->text, r->text);
}

TEST(DockerConfigTest, RuntimePathFlag) {
  RuntimeConfigOptions o = Opts(RuntimeKind::kDocker);
  o.runtime_path = "/usr/local/bin/gpunode-oci-runtime";
  auto r = EditDockerConfig("{}", o, "daemon.json");
  ASSERT_OK(r);
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
  ASSERT_OK(r) << r.status();
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
  ASSERT_OK(again) << again.status();
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
  ASSERT_OK(r) << r.status();
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
  ASSERT_OK(r) << r.status();
  toml::table t = ParseOrDie(r->text);
  EXPECT_EQ(t["version"].value<int64_t>(), 2);
  EXPECT_NE(At(t, {"plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes", "nvidia",
                   "options", "BinaryName"}),
            nullptr)
      << r->text;
  auto again = EditContainerdConfig(r->text, Opts(RuntimeKind::kContainerd), "c");
  ASSERT_OK(again);
  EXPECT_EQ(again->text, r->text);
}

TEST(ContainerdConfigTest, ReplacesExistingValueKeepingComment) {
  std::string in =
      "version = 2\n"
      "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
      "  default_runtime_name = \"runc\"  # chosen by ops\n";
  auto r = EditContainerdConfig(in, Opts(RuntimeKind::kContainerd, true), "c");
  ASSERT_OK(r) << r.status();
  EXPECT_THAT(r->text, HasSubstr("  default_runtime_name = \"nvidia\" # chosen by ops\n"));
  EXPECT_THAT(r->text, Not(HasSubstr("\"runc\"")));
}

TEST(ContainerdConfigTest, DottedKeysInParentTable) {
  std::string in =
      "version = 2\n"
      "[plugins.\"io.containerd.grpc.v1.cri\"]\n"
      "containerd.snapshotter = \"overlayfs\"\n";
  auto r = EditContainerdConfig(in, Opts(RuntimeKind::kContainerd, true), "c");
  ASSERT_OK(r) << r.status();
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
  ASSERT_OK(r) << r.status();
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
  ASSERT_OK(r) << r.status();
  toml::table t = ParseOrDie(r->text);
  EXPECT_EQ(At(t, {"crio", "runtime", "default_runtime"})->value<std::string>(), "nvidia");
  EXPECT_EQ(At(t, {"crio", "runtime", "runtimes", "nvidia", "runtime_type"})->value<std::string>(),
            "oci");
  EXPECT_EQ(At(t, {"crio", "runtime", "runtimes", "crun", "runtime_root"})->value<std::string>(),
            "/run/crun");
  EXPECT_THAT(r->text, HasSubstr("# default_runtime is the runtime used when none is requested"));
  EXPECT_THAT(r->text, HasSubstr("[crio.runtime.runtimes.nvidia]\n"));
  auto again = EditCrioConfig(r->text, Opts(RuntimeKind::kCrio, true), "crio.conf");
  ASSERT_OK(again);
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

// Found by fuzz_runtime_config: Debian's toml++ 3.3.0 reaches an "unreachable" point (undefined
// behaviour) on some non-ASCII characters outside strings, e.g. U+0389 in a table header or é after
// a malformed value. Such a file is refused without UB (this binary runs under UBSan); non-ASCII
// text in strings and comments is kept.
TEST(ContainerdConfigTest, NonAsciiOutsideStringsIsRefusedBeforeTomlpp) {
  const std::string bad = "version = 2\n[plugins.grpc\xce\x89" "1.cri]\n";
  auto r = EditContainerdConfig(bad, Opts(RuntimeKind::kContainerd), "config.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("config.toml: line 2, column 14"));
  const std::string ok =
      "version = 2 # caf\xc3\xa9\nroot = \"/data/\xce\x89\"\nx = '''\n\xce\x89\n'''\ny = \"\"\"\n\xce\x89\"\"\"\n";
  auto fine = EditContainerdConfig(ok, Opts(RuntimeKind::kContainerd), "config.toml");
  ASSERT_OK(fine) << fine.status();
  EXPECT_THAT(fine->text, HasSubstr("root = \"/data/\xce\x89\""));
  EXPECT_FALSE(EditContainerdConfig("x = 1e_r\xef\xbb\x95\n", Opts(RuntimeKind::kContainerd), "c.toml").ok());
  // Also found by the fuzzer: a float version was cast to an integer (undefined for 2.5e115).
  auto huge = EditContainerdConfig("version = 2.5e115\n", Opts(RuntimeKind::kContainerd), "c.toml");
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(), HasSubstr("unsupported containerd config version"));
}

class ApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpunode-rtcfg-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    backups_ = dir_ + "/backups";
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
  // A file named on this machine (--config): the local root.
  StatusOr<ApplyResult> Apply(const std::string& path, const RuntimeConfigOptions& o, bool dry_run,
                              std::function<Status(absl::string_view)> hook = nullptr) {
    ApplyOptions a;
    a.dry_run = dry_run;
    a.backup_dir = backups_;
    a.test_hook = std::move(hook);
    return ApplyRuntimeConfig(HostFs::Local(), path, o, a);
  }
  // Every entry of a folder, for "nothing else was left here" checks.
  static std::vector<std::string> Entries(const std::string& dir) {
    std::vector<std::string> out;
    for (auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string dir_;
  std::string backups_;
};

TEST_F(ApplyTest, WritesBackupKeepsModeAndIsIdempotent) {
  std::string path = dir_ + "/config.toml";
  std::string in = Fixture("containerd-v2.toml");
  Write(path, in);
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  auto r = Apply(path, Opts(RuntimeKind::kContainerd), false);
  ASSERT_OK(r) << r.status();
  EXPECT_TRUE(r->changed);
  EXPECT_FALSE(r->created);
  EXPECT_TRUE(absl::StartsWith(r->backup_path, backups_ + path + ".")) << r->backup_path;
  EXPECT_EQ(Read(r->backup_path), in);
  EXPECT_THAT(Read(path), HasSubstr("runtimes.nvidia]"));
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  std::string written = Read(path);
  auto again = Apply(path, Opts(RuntimeKind::kContainerd), false);
  ASSERT_OK(again);
  EXPECT_FALSE(again->changed);
  EXPECT_EQ(Read(path), written);
  // No temp files left behind; the backup is not beside the file.
  EXPECT_EQ(Entries(dir_), (std::vector<std::string>{"backups", "config.toml"}));
}

TEST_F(ApplyTest, MissingFileIsCreatedWithParentsAndItsAbsenceBackedUp) {
  std::string path = dir_ + "/etc/crio/crio.conf.d/99-nvidia.toml";
  auto r = Apply(path, Opts(RuntimeKind::kCrio), false);
  ASSERT_OK(r) << r.status();
  EXPECT_TRUE(r->created);
  EXPECT_TRUE(absl::EndsWith(r->backup_path, ".absent")) << r->backup_path;
  EXPECT_THAT(Read(path), HasSubstr("runtime_type = \"oci\""));
}

TEST_F(ApplyTest, DryRunChangesNothing) {
  std::string path = dir_ + "/daemon.json";
  Write(path, "{\"debug\": true}\n");
  auto r = Apply(path, Opts(RuntimeKind::kDocker, true), true);
  ASSERT_OK(r) << r.status();
  EXPECT_TRUE(r->changed);
  EXPECT_THAT(r->diff, HasSubstr("+    \"default-runtime\": \"nvidia\""));
  EXPECT_THAT(r->diff, HasSubstr("-{\"debug\": true}"));
  EXPECT_EQ(Read(path), "{\"debug\": true}\n");
  EXPECT_FALSE(std::filesystem::exists(backups_));
}

TEST_F(ApplyTest, MalformedInputLeavesFileUntouched) {
  std::string path = dir_ + "/config.toml";
  std::string bad = Fixture("containerd-malformed.toml");
  Write(path, bad);
  auto r = Apply(path, Opts(RuntimeKind::kContainerd), false);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(path));
  EXPECT_EQ(Read(path), bad);
  EXPECT_FALSE(std::filesystem::exists(backups_));
}

TEST_F(ApplyTest, UnwritableDirectoryLeavesFileUntouched) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  std::string path = dir_ + "/daemon.json";
  Write(path, "{}\n");
  ASSERT_EQ(::chmod(dir_.c_str(), 0555), 0);
  auto r = Apply(path, Opts(RuntimeKind::kDocker), false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Read(path), "{}\n");
}

// Works as root too: the backup cannot be written (a file holds the backup folder's name), so
// nothing else is written; the original stays and no temp file is left.
TEST_F(ApplyTest, FailedBackupLeavesFileUntouchedAndNoTempFile) {
  std::string path = dir_ + "/config.toml";
  std::string in = Fixture("containerd-v3.toml");
  Write(path, in);
  Write(backups_, "not a folder");
  auto r = Apply(path, Opts(RuntimeKind::kContainerd), false);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("not a directory"));
  EXPECT_EQ(Read(path), in);
  EXPECT_EQ(Entries(dir_), (std::vector<std::string>{"backups", "config.toml"}));
}

// Issue 11, row 2: an absolute symlink whose target is inside the host root is edited where it
// points (inside the root), the link stays a link, and the file keeps every other setting.
TEST_F(ApplyTest, AbsoluteSymlinkInsideTheHostRootIsEditedWhereItPoints) {
  const std::string root = dir_ + "/host";
  std::filesystem::create_directories(root + "/etc/containerd");
  const std::string real = "version = 2\nroot = \"/data/containerd\"\n\n"
                           "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n"
                           "  SystemdCgroup = true\n";
  Write(root + "/etc/containerd/real.toml", real);
  std::filesystem::create_symlink("/etc/containerd/real.toml", root + "/etc/containerd/config.toml");
  auto fs = HostFs::Open(root);
  ASSERT_OK(fs);
  ApplyOptions a;
  a.backup_dir = backups_;
  auto r = ApplyRuntimeConfig(*fs, "/etc/containerd/config.toml", Opts(RuntimeKind::kContainerd), a);
  ASSERT_OK(r) << r.status();
  EXPECT_EQ(r->path, "/etc/containerd/real.toml");
  EXPECT_TRUE(std::filesystem::is_symlink(root + "/etc/containerd/config.toml"));
  const std::string edited = Read(root + "/etc/containerd/real.toml");
  EXPECT_THAT(edited, HasSubstr("SystemdCgroup = true"));
  EXPECT_THAT(edited, HasSubstr("root = \"/data/containerd\""));
  EXPECT_THAT(edited, HasSubstr("runtimes.nvidia]"));
  EXPECT_EQ(Read(r->backup_path), real);
}

// Issue 11, row 3: a link to an absolute path is read as the host reads it (inside the root); the
// file of that name on this machine is never touched. A link whose ".." climbs out of the root is
// refused and nothing is written anywhere.
TEST_F(ApplyTest, SymlinkOutOfTheHostRootNeverReachesThisMachinesFile) {
  const std::string root = dir_ + "/host";
  const std::string outside = dir_ + "/outside.json";
  Write(outside, "{\"mine\": 1}\n");
  std::filesystem::create_directories(root + "/etc/docker");
  std::filesystem::create_symlink(outside, root + "/etc/docker/daemon.json");
  auto fs = HostFs::Open(root);
  ASSERT_OK(fs);
  ApplyOptions a;
  a.backup_dir = backups_;
  auto r = ApplyRuntimeConfig(*fs, "/etc/docker/daemon.json", Opts(RuntimeKind::kDocker), a);
  ASSERT_OK(r) << r.status();
  EXPECT_EQ(Read(outside), "{\"mine\": 1}\n");
  EXPECT_THAT(Read(root + outside), HasSubstr("nvidia"));

  std::filesystem::remove(root + "/etc/docker/daemon.json");
  std::filesystem::create_symlink("../../../../../../../../../.." + outside, root + "/etc/docker/daemon.json");
  auto refused = ApplyRuntimeConfig(*fs, "/etc/docker/daemon.json", Opts(RuntimeKind::kDocker), a);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("outside the host root"));
  EXPECT_EQ(Read(outside), "{\"mine\": 1}\n");
  EXPECT_TRUE(std::filesystem::is_symlink(root + "/etc/docker/daemon.json"));
}

// Issue 11, row 4: the drop-in folder holds only the drop-in: no backup and no temp file, ever
// (CRI-O loads every file there, in name order). An old-style backup left there is moved out.
TEST_F(ApplyTest, DropInFolderHoldsOnlyTheDropIn) {
  const std::string d = dir_ + "/etc/crio/crio.conf.d";
  const std::string path = d + "/99-nvidia.toml";
  std::filesystem::create_directories(d);
  Write(path + ".gpunode.bak", "# an old backup\n");
  RuntimeConfigOptions a = Opts(RuntimeKind::kCrio);
  a.runtime_path = "/usr/bin/a";
  ASSERT_OK(Apply(path, a, false));
  RuntimeConfigOptions b = a;
  b.runtime_path = "/usr/bin/b";
  auto r = Apply(path, b, false);
  ASSERT_OK(r) << r.status();
  EXPECT_EQ(Entries(d), (std::vector<std::string>{"99-nvidia.toml"}));
  EXPECT_EQ(Entries(dir_ + "/etc/crio"), (std::vector<std::string>{"crio.conf.d"}));
  EXPECT_THAT(Read(path), HasSubstr("/usr/bin/b"));
  auto backups = ListBackups(HostFs::Local(), path, backups_);
  ASSERT_OK(backups) << backups.status();
  ASSERT_EQ(backups->size(), 3u);  // the migrated old one, then one per change
  EXPECT_EQ(Read((*backups)[0].path), "# an old backup\n");
}

// Issue 11, row 4 (killed run): a temp file of ours left by a killed write is removed by the next.
TEST_F(ApplyTest, StaleTempFileOfAKilledRunIsRemovedByTheNextWrite) {
  const std::string d = dir_ + "/etc/crio/crio.conf.d";
  std::filesystem::create_directories(d);
  Write(dir_ + "/etc/crio/.gpunode-tmp.crio.conf.d.99-nvidia.toml.deadbeef0000", "partial");
  ASSERT_OK(Apply(d + "/99-nvidia.toml", Opts(RuntimeKind::kCrio), false));
  EXPECT_EQ(Entries(dir_ + "/etc/crio"), (std::vector<std::string>{"crio.conf.d"}));
}

// Issue 11, row 5: two concurrent runs on one daemon.json both land (one writer at a time).
TEST_F(ApplyTest, ConcurrentRunsBothLand) {
  const std::string path = dir_ + "/daemon.json";
  for (int round = 0; round < 10; ++round) {
    Write(path, "{\"debug\": true}\n");
    RuntimeConfigOptions cdi = Opts(RuntimeKind::kDocker);
    cdi.enable_cdi = true;
    RuntimeConfigOptions def = Opts(RuntimeKind::kDocker, true);
    StatusOr<ApplyResult> r1 = absl::UnknownError("not run"), r2 = absl::UnknownError("not run");
    std::thread t1([&] { r1 = Apply(path, cdi, false); });
    std::thread t2([&] { r2 = Apply(path, def, false); });
    t1.join();
    t2.join();
    ASSERT_OK(r1) << r1.status();
    ASSERT_OK(r2) << r2.status();
    const std::string text = Read(path);
    EXPECT_THAT(text, HasSubstr("\"cdi\": true")) << "round " << round;
    EXPECT_THAT(text, HasSubstr("\"default-runtime\": \"nvidia\"")) << "round " << round;
    EXPECT_THAT(text, HasSubstr("\"debug\": true"));
  }
}

// Issue 11, row 5 (a writer that is not gpunode): a change between read and rename is seen; the
// edit is made again on the new text, so both changes are kept. A second change is ABORTED.
TEST_F(ApplyTest, ChangeByAnotherProgramBetweenReadAndRenameIsNotLost) {
  const std::string path = dir_ + "/daemon.json";
  Write(path, "{\"debug\": true}\n");
  int calls = 0;
  auto r = Apply(path, Opts(RuntimeKind::kDocker), false, [&](absl::string_view step) {
    if (step == "temp-written" && calls++ == 0) Write(path, "{\"debug\": true, \"other\": 1}\n");
    return absl::OkStatus();
  });
  ASSERT_OK(r) << r.status();
  EXPECT_EQ(r->attempts, 2);
  EXPECT_THAT(Read(path), HasSubstr("\"other\": 1"));
  EXPECT_THAT(Read(path), HasSubstr("\"nvidia\""));

  Write(path, "{\"x\": 1}\n");
  int n = 0;
  auto busy = Apply(path, Opts(RuntimeKind::kDocker), false, [&](absl::string_view step) {
    if (step == "temp-written") Write(path, absl::StrCat("{\"x\": ", ++n + 1, "}\n"));
    return absl::OkStatus();
  });
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(busy.status().message(), HasSubstr("changed by another program"));
  EXPECT_EQ(Read(path), "{\"x\": 3}\n");
  EXPECT_EQ(Entries(dir_), (std::vector<std::string>{"backups", "daemon.json"}));
}

// Issue 11, row 12: 100 000 keys in one object are edited in linear time (was 20 s: every
// insertion searched the keys before it). The bound is loose for sanitizer builds; the release
// timing is in the closing note (benchmarks/json_big_object.sh).
TEST_F(ApplyTest, HundredThousandKeysAreEditedInLinearTime) {
  std::string text = "{";
  for (int i = 0; i < 100000; ++i) absl::StrAppend(&text, i ? "," : "", "\"k", i, "\": ", i);
  text += "}\n";
  const std::string path = dir_ + "/daemon.json";
  Write(path, text);
  const auto start = std::chrono::steady_clock::now();
  auto r = Apply(path, Opts(RuntimeKind::kDocker), false);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_OK(r) << r.status();
  EXPECT_LT(s, 10.0);
  EXPECT_THAT(Read(path), HasSubstr("\"k99999\": 99999"));
}

// Issue 11, row 6: nesting 100 000 levels deep is refused with the reason; the file is untouched.
TEST_F(ApplyTest, DeeplyNestedJsonIsRefusedNotACrash) {
  const std::string path = dir_ + "/daemon.json";
  const std::string deep = "{\"a\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  Write(path, deep);
  auto r = Apply(path, Opts(RuntimeKind::kDocker), false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("nested deeper than 128 levels"));
  EXPECT_EQ(Read(path), deep);
}

TEST_F(ApplyTest, RestorePutsBackTheFileAsItWasAndCanBeUndone) {
  const std::string path = dir_ + "/daemon.json";
  Write(path, "{\"debug\": true}\n");
  ASSERT_OK(Apply(path, Opts(RuntimeKind::kDocker, true), false));
  const std::string configured = Read(path);
  auto restored = RestoreRuntimeConfig(HostFs::Local(), path, backups_);
  ASSERT_OK(restored) << restored.status();
  EXPECT_EQ(Read(path), "{\"debug\": true}\n");
  EXPECT_FALSE(restored->removed);
  // The state before the restore was itself backed up: restoring again undoes the restore.
  ASSERT_OK(RestoreRuntimeConfig(HostFs::Local(), path, backups_));
  EXPECT_EQ(Read(path), configured);

  const std::string fresh = dir_ + "/new/daemon.json";
  ASSERT_OK(Apply(fresh, Opts(RuntimeKind::kDocker), false));
  auto removed = RestoreRuntimeConfig(HostFs::Local(), fresh, backups_);
  ASSERT_OK(removed) << removed.status();
  EXPECT_TRUE(removed->removed);
  EXPECT_FALSE(std::filesystem::exists(fresh));
  EXPECT_EQ(RestoreRuntimeConfig(HostFs::Local(), dir_ + "/never.json", backups_).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpunode::container
