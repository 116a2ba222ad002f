// The real gpunode binary's `bench` front end without a GPU: flag errors exit 3 naming the flag;
// a missing libcuda and a simulated node are clear errors, not crashes.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/run_gpunode.h"

namespace {

using ::testing::HasSubstr;

using ::gpunode::testing::Result;
using ::gpunode::testing::RunGpunode;

TEST(BenchCliTest, UnknownTestExitsThreeNamingTheFlag) {
  Result r = RunGpunode("bench --tests gemm,flops");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--tests: unknown test 'flops'"));
}

TEST(BenchCliTest, BadGpusExitsThreeNamingTheFlag) {
  Result r = RunGpunode("bench --gpus 0,x");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--gpus: 'x' is not a GPU index"));
}

TEST(BenchCliTest, NegativeDurationExitsThreeNamingTheFlag) {
  Result r = RunGpunode("bench --duration -2");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--duration"));
}

TEST(BenchCliTest, MissingLibcudaIsAClearError) {
#ifdef GPUNODE_TEST_EXPECT_PTX
  Result r = RunGpunode("--cuda-library /nonexistent/libcuda.so.1 bench --tests hbm");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("load /nonexistent/libcuda.so.1"));
  EXPECT_THAT(r.out, HasSubstr("libcuda.so.1"));
#else
  Result r = RunGpunode("bench");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("built without nvcc"));
#endif
}

TEST(BenchCliTest, SimulatedNodeCannotBench) {
  Result r = RunGpunode("--simulate dgx-h200 bench");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, ::testing::AnyOf(HasSubstr("bench needs real GPUs"), HasSubstr("built without nvcc")));
}

TEST(BenchCliTest, HelpListsTheFlags) {
  Result r = RunGpunode("bench --help");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  for (const char* flag : {"--tests", "--gpus", "--duration", "--force", "--gemm-library", "--ptx"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
}

TEST(BenchCliTest, UnknownGemmLibraryExitsThreeNamingTheChoices) {
  Result r = RunGpunode("bench --gemm-library cublas");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--gemm-library"));
  EXPECT_THAT(r.out, HasSubstr("gpunode"));
}

TEST(BenchCliTest, UnknownPtxExitsThreeNamingTheChoices) {
  Result r = RunGpunode("bench --ptx sm_75");
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--ptx"));
  EXPECT_THAT(r.out, HasSubstr("compute_75"));
}

}  // namespace
