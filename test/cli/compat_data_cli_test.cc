// `gpunode compat data` and the new image families, through the real binary.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/run_gpunode.h"

namespace gpunode {
namespace {

using ::testing::HasSubstr;
using ::gpunode::testing::RunGpunode;

TEST(CompatDataCli, PrintsDateAndCoverage) {
  auto r = RunGpunode("compat data");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("Updated:"));
  EXPECT_THAT(r.out, HasSubstr("CUDA toolkits"));
  EXPECT_THAT(r.out, HasSubstr("NGC PyTorch"));
  EXPECT_THAT(r.out, HasSubstr("TGI"));
}

TEST(CompatDataCli, JsonHonoursTheGlobalOutputFlag) {
  auto r = RunGpunode("compat data -o json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["apiVersion"], "gpunode/v1");
  EXPECT_EQ(j["kind"], "CompatDataCoverage");
  EXPECT_GT(j["families"].size(), 10u);
}

TEST(CompatDataCli, HelpListsSubcommandsOnce) {
  auto r = RunGpunode("compat --help");
  size_t first = r.out.find("ubcommands");
  ASSERT_NE(first, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ubcommands", first + 1), std::string::npos) << r.out;
  EXPECT_THAT(r.out, HasSubstr("data"));
}

TEST(CompatDataCli, NgcPytorch2508OnR580IsCompatible) {
  auto r = RunGpunode("compat check --image nvcr.io/nvidia/pytorch:25.08-py3 --image-source data --driver 580.65.06 --gpu H100 -o json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "compatible");
  EXPECT_EQ(j["workload"]["cuda"], "13.0");
}

TEST(CompatDataCli, UnknownVllmReleaseSaysKnownFamily) {
  auto r = RunGpunode("compat check --image vllm/vllm-openai:v0.10.1 --image-source data --driver 550.54.15 --gpu H100");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("known family vLLM"));
}

TEST(CompatDataCli, BadDataFileIsRefusedWithItsName) {
  auto r = RunGpunode("compat data --data /nonexistent/compat.yaml");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("/nonexistent/compat.yaml"));
}

}  // namespace
}  // namespace gpunode
