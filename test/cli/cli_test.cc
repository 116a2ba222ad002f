// End-to-end tests of the real gpunode binary (build/bin/gpunode) against simulated nodes:
// exit codes, JSON documents and error messages as a user sees them.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/run_gpunode.h"
#include "nlohmann/json.hpp"

namespace {

using ::gpunode::testing::Result;
using ::gpunode::testing::RunGpunode;

nlohmann::json Json(const Result& r) {
  auto doc = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(doc.is_discarded()) << r.out;
  return doc;
}

TEST(CliDoctorTest, TheHealthySimulatedDgxH200PassesWithExitZero) {
  Result r = RunGpunode("--simulate dgx-h200 doctor --color never");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("simulated node: dgx-h200"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("NVIDIA H200"));
}

TEST(CliDoctorTest, JsonOutputIsAVersionedDoctorReport) {
  Result r = RunGpunode("--simulate dgx-h200 doctor -o json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json doc = Json(r);
  EXPECT_EQ(doc["apiVersion"], "gpunode/v1");
  EXPECT_EQ(doc["kind"], "DoctorReport");
  EXPECT_EQ(doc["metadata"]["simulated"], "dgx-h200");
  EXPECT_EQ(doc["baseline"]["gpus"].size(), 8u);
}

// Regression (#14): `doctor --with-bench` where the bench cannot run printed "Result: OK", exited 2
// and its JSON said exitCode 0. Text, JSON and exit code now agree.
TEST(CliDoctorTest, WithBenchThatCannotRunTheTextJsonAndExitCodeAgree) {
  Result text = RunGpunode("--simulate dgx-h200 doctor --with-bench --color never");
  EXPECT_EQ(text.exit_code, 2) << text.out;
  EXPECT_THAT(text.out, ::testing::HasSubstr("bench could not run"));
  EXPECT_THAT(text.out, ::testing::HasSubstr("Overall: FAIL (exit 2): the checks passed, the bench could not run"));
  Result json = RunGpunode("--simulate dgx-h200 doctor --with-bench -o json");
  EXPECT_EQ(json.exit_code, 2);
  const std::string body = json.out.substr(json.out.find('{'));
  auto doc = nlohmann::json::parse(body, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << json.out;
  EXPECT_EQ(doc["summary"]["exitCode"], 2);
  EXPECT_EQ(doc["summary"]["status"], "fail");
  EXPECT_EQ(doc["summary"]["checksExitCode"], 0);
  EXPECT_EQ(doc["baseline"]["bench"]["verdict"], "error");
}

TEST(CliDoctorTest, YamlOutputWorks) {
  Result r = RunGpunode("--simulate t4-cloud doctor -o yaml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("kind: \"DoctorReport\""));
}

TEST(CliDoctorTest, BrokenNodesExitWithTheirSeverityAndNameTheLayer) {
  struct Case { const char* profile; int exit_code; const char* id; };
  for (Case c : {Case{"broken-mismatch", 2, "driver.version-mismatch"},
                 Case{"broken-no-driver", 2, "kernel.module-not-loaded"},
                 Case{"broken-fallen-gpu", 2, "driver.gpu-lost"},
                 Case{"broken-degraded-link", 1, "hardware.pcie-degraded"}}) {
    Result r = RunGpunode(std::string("--simulate ") + c.profile + " doctor -o json");
    EXPECT_EQ(r.exit_code, c.exit_code) << c.profile << "\n" << r.out;
    nlohmann::json doc = Json(r);
    EXPECT_EQ(doc["summary"]["firstAction"]["id"], c.id) << c.profile;
  }
}

TEST(CliDoctorTest, AHostRootThatDoesNotExistIsAUsageErrorNamingIt) {
  Result r = RunGpunode("--host-root /nonexistent/gpunode doctor");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.out, ::testing::HasSubstr("/nonexistent/gpunode"));
}

TEST(CliDoctorTest, AnUnknownProfileListsTheBuiltInOnes) {
  Result r = RunGpunode("--simulate no-such-node doctor");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.out, ::testing::HasSubstr("dgx-h200"));
}

TEST(CliDoctorTest, AMalformedProfileFileIsRejectedWithItsPath) {
  std::string path = std::filesystem::temp_directory_path() / "gpunode-cli-bad-profile.yaml";
  std::ofstream(path) << "apiVersion: gpunode/v1\nkind: NodeProfile\nname: bad\ngpus: [ {name: x, pcie: {gen: \"x\"\n";
  Result r = RunGpunode("--simulate " + path + " doctor");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("gpunode-cli-bad-profile.yaml"));
  std::filesystem::remove(path);
}

TEST(CliDoctorTest, AnUnknownOutputFormatOrFlagIsAUsageError) {
  EXPECT_EQ(RunGpunode("--simulate dgx-h200 doctor -o xml").exit_code, 3);
  EXPECT_EQ(RunGpunode("doctor --no-such-flag").exit_code, 3);
  EXPECT_EQ(RunGpunode("").exit_code, 3);
}

TEST(CliDoctorTest, HelpTeachesWithExamples) {
  Result r = RunGpunode("doctor --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, ::testing::HasSubstr("Examples"));
}

TEST(CliCompatTest, TheExampleImageIsCompatibleOnTheSimulatedH200Node) {
  Result r = RunGpunode("--simulate dgx-h200 compat check --image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime --image-source data -o json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json doc = Json(r);
  EXPECT_EQ(doc["kind"], "CompatReport");
  EXPECT_EQ(doc["verdict"], "compatible");
}

TEST(CliCompatTest, Driver535WithAnH100GetsCaveatsForCuda124) {
  Result r = RunGpunode("compat check --image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime --image-source data --driver 535.183.01 --gpu H100 -o json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(Json(r)["verdict"], "compatible-with-caveats");
}

TEST(CliCompatTest, AMalformedDriverVersionIsExitThreeNamingTheFlag) {
  Result r = RunGpunode("compat check --cuda 12.4 --driver abc --gpu H100");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("--driver"));
}

TEST(CliCompatTest, AnUnknownGpuIsExitThree) {
  Result r = RunGpunode("compat check --cuda 12.4 --driver 550.54.15 --gpu 'Voodoo 5'");
  EXPECT_EQ(r.exit_code, 3) << r.out;
}

TEST(CliSimTest, ListsTheBuiltInProfiles) {
  Result r = RunGpunode("sim list");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* name : {"dgx-h200", "pcie-l40s-4", "t4-cloud", "a100-mig", "broken-mismatch", "broken-no-driver",
                           "broken-fallen-gpu", "broken-degraded-link"}) {
    EXPECT_THAT(r.out, ::testing::HasSubstr(name));
  }
}

}  // namespace

namespace {

TEST(CliRealH200ProfileTest, TheCapturedH200ReplaysAsAHealthyNode) {
  Result r = RunGpunode("--simulate h200-real doctor -o json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json doc = Json(r);
  ASSERT_EQ(doc["baseline"]["gpus"].size(), 1u);
  EXPECT_EQ(doc["baseline"]["gpus"][0]["model"], "NVIDIA H200");
  EXPECT_EQ(doc["baseline"]["gpus"][0]["memoryTotalMiB"], 143771);
  EXPECT_EQ(doc["baseline"]["node"]["driverVersion"], "580.159.04");
  EXPECT_EQ(doc["baseline"]["node"]["kernelModule"], "open");
}

TEST(CliRealH200ProfileTest, TheCaptureCommandWritesAProfileThatValidates) {
  std::string path = std::filesystem::temp_directory_path() / "gpunode-cli-capture.yaml";
  Result r = RunGpunode("--simulate h200-real sim capture --name again -f " + path);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  Result again = RunGpunode("--simulate " + path + " doctor -o json");
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(Json(again)["baseline"]["gpus"][0]["uuid"], "GPU-336e895e-d050-a01a-30d8-3d13d8c69452");
  std::filesystem::remove(path);
}

}  // namespace

namespace gpunode {
namespace {

using ::gpunode::testing::Result;

TEST(CliCommandsTest, AMistypedCommandIsNamedWithTheClosestOnesAndExits3) {
  Result top = gpunode::testing::RunGpunode("docter");
  EXPECT_EQ(top.exit_code, 3);
  EXPECT_THAT(top.out, ::testing::HasSubstr("unknown command \"docter\" for \"gpunode\""));
  EXPECT_THAT(top.out, ::testing::HasSubstr("Did you mean this?\n\tdoctor"));
  Result sub = gpunode::testing::RunGpunode("--simulate dgx-h200 compat chek");
  EXPECT_EQ(sub.exit_code, 3);
  EXPECT_THAT(sub.out, ::testing::HasSubstr("unknown command \"chek\" for \"gpunode compat\""));
  EXPECT_THAT(sub.out, ::testing::HasSubstr("\tcheck"));
  Result cdi = gpunode::testing::RunGpunode("cdi generat");
  EXPECT_THAT(cdi.out, ::testing::HasSubstr("Did you mean this?\n\tgenerate"));
  Result none = gpunode::testing::RunGpunode("xyzzy");
  EXPECT_EQ(none.exit_code, 3);
  EXPECT_THAT(none.out, ::testing::Not(::testing::HasSubstr("Did you mean")));
}

TEST(CliCommandsTest, VersionNamesTheCommitTheCompilerAndWhatIsBuiltIn) {
  Result r = gpunode::testing::RunGpunode("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, ::testing::ContainsRegex("^gpunode [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit ([0-9a-f]{12}(-dirty)?, "
                                              "[0-9]{4}-[0-9]{2}-[0-9]{2}|unknown, unknown)\\)"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("built with "));
  EXPECT_THAT(r.out, ::testing::HasSubstr("bench kernels as PTX"));
}

TEST(CliCommandsTest, HelpCommandIsCommandHelp) {
  Result r = gpunode::testing::RunGpunode("help doctor");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("Usage: gpunode doctor"));
  Result nested = gpunode::testing::RunGpunode("help cdi generate");
  EXPECT_EQ(nested.exit_code, 0) << nested.out;
  EXPECT_THAT(nested.out, ::testing::HasSubstr("--dev-root"));
}

TEST(CliCommandsTest, UnknownArgumentsAreListedInTheOrderGiven) {
  Result r = gpunode::testing::RunGpunode("--simulate dgx-h200 doctor foo bar --baz");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.out, ::testing::HasSubstr("unknown arguments: foo bar --baz"));
}

}  // namespace
}  // namespace gpunode

namespace gpunode {
namespace {

using ::gpunode::testing::Result;
using ::testing::HasSubstr;

// The commands and flags added for Kubernetes and CDI answer bad input with the reason and exit 3,
// before any network or GPU access.
TEST(CliBadInputTest, KubernetesCommandsNameWhatIsWrong) {
  Result no_ds = gpunode::testing::RunGpunode("k8s uninstall");
  EXPECT_EQ(no_ds.exit_code, 3);
  EXPECT_THAT(no_ds.out, HasSubstr("--daemonset"));
  Result bad_ds = gpunode::testing::RunGpunode("k8s uninstall --daemonset just-a-name");
  EXPECT_EQ(bad_ds.exit_code, 3);
  EXPECT_THAT(bad_ds.out, HasSubstr("--daemonset \"just-a-name\": not NAMESPACE/NAME"));
  Result bad_timeout = gpunode::testing::RunGpunode("k8s uninstall --daemonset a/b --timeout soon");
  EXPECT_EQ(bad_timeout.exit_code, 3);
  EXPECT_THAT(bad_timeout.out, HasSubstr("--timeout \"soon\": not a duration"));
  Result no_kc = gpunode::testing::RunGpunode("k8s uninstall --daemonset a/b --kubeconfig /nonexistent/kc");
  EXPECT_EQ(no_kc.exit_code, 3);
  EXPECT_THAT(no_kc.out, HasSubstr("kubeconfig: read /nonexistent/kc"));

  Result no_node = gpunode::testing::RunGpunode("--simulate dgx-h200 labels --node-labels --oneshot");
  EXPECT_EQ(no_node.exit_code, 3);
  EXPECT_THAT(no_node.out, HasSubstr("--node-labels needs the Node's name"));
  Result stray = gpunode::testing::RunGpunode("--simulate dgx-h200 labels --daemonset a/b --oneshot");
  EXPECT_EQ(stray.exit_code, 3);
  EXPECT_THAT(stray.out, HasSubstr("go with --node-labels"));
  Result both = gpunode::testing::RunGpunode("--simulate dgx-h200 labels --print --node-labels");
  EXPECT_EQ(both.exit_code, 3);
}

TEST(CliBadInputTest, CdiGenerateRefusesBadHooksAndRoots) {
  Result hook = gpunode::testing::RunGpunode("--simulate dgx-h200 cdi generate --output - --disable-hook warp");
  EXPECT_EQ(hook.exit_code, 3);
  EXPECT_THAT(hook.out, HasSubstr("--disable-hook \"warp\": not one of create-symlinks, enable-cuda-compat, update-ldcache, all"));
  Result rel = gpunode::testing::RunGpunode("--simulate dgx-h200 cdi generate --output - --dev-root relative/dir");
  EXPECT_EQ(rel.exit_code, 3);
  EXPECT_THAT(rel.out, HasSubstr("--dev-root \"relative/dir\": not an absolute path"));
  Result missing = gpunode::testing::RunGpunode("--simulate dgx-h200 cdi generate --output - --dev-root /nonexistent/dev-root");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.out, HasSubstr("--dev-root"));
}

}  // namespace
}  // namespace gpunode
