// The image's own CUDA facts (env of its config) over the data set's answer for the reference.
// The env values are those of published image configs (sources: test/data/images/, issue 32).
#include "src/compat/image_facts.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/compat/test_data.h"

namespace gpunode::compat {
namespace {

using testing::BuiltinData;
using ::testing::HasSubstr;

// nvidia/cuda:12.8.1-base-ubuntu24.04 (its Dockerfile in gitlab.com/nvidia/container-images/cuda,
// dist/12.8.1/ubuntu2404/base).
const std::vector<std::string> kCuda1281Env = {
    "PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "NVARCH=x86_64",
    "NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=unknown,driver>=470,driver<471 brand=grid,driver>=470,driver<471 "
    "brand=tesla,driver>=470,driver<471 brand=nvidia,driver>=535,driver<536 brand=tesla,driver>=535,driver<536",
    "NV_CUDA_CUDART_VERSION=12.8.90-1",
    "CUDA_VERSION=12.8.1",
    "NVIDIA_VISIBLE_DEVICES=all",
    "NVIDIA_DRIVER_CAPABILITIES=compute,utility"};

TEST(ImageFacts, CudaVersionAndRequirementsAreRead) {
  std::vector<std::string> problems;
  ImageCudaFacts f = ReadImageCudaFacts(kCuda1281Env, {}, &problems);
  EXPECT_TRUE(problems.empty());
  ASSERT_TRUE(f.cuda);
  EXPECT_EQ(f.cuda->ToString(), "12.8.1");
  ASSERT_EQ(f.requirements.size(), 2u);  // what the shim reads: CUDA_VERSION (legacy rule) and NVIDIA_REQUIRE_*
  EXPECT_EQ(f.requirements[0], "CUDA_VERSION=12.8.1");
  EXPECT_THAT(f.requirements[1], ::testing::StartsWith("NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=unknown"));
  EXPECT_FALSE(f.disable_require);
  EXPECT_EQ(f.env.count("PATH"), 0u);
}

TEST(ImageFacts, DisableRequireFollowsGoParseBool) {
  EXPECT_TRUE(ReadImageCudaFacts({"NVIDIA_DISABLE_REQUIRE=1"}, {}).disable_require);
  EXPECT_TRUE(ReadImageCudaFacts({"NVIDIA_DISABLE_REQUIRE=true"}, {}).disable_require);
  EXPECT_FALSE(ReadImageCudaFacts({"NVIDIA_DISABLE_REQUIRE=yes"}, {}).disable_require);  // ParseBool fails: false
  EXPECT_FALSE(ReadImageCudaFacts({"NVIDIA_DISABLE_REQUIRE=0"}, {}).disable_require);
}

TEST(ImageFacts, NgcPytorchVariablesNameTheFramework) {
  ImageCudaFacts f = ReadImageCudaFacts(
      {"CUDA_VERSION=13.0.0.044", "NVIDIA_PYTORCH_VERSION=25.08", "PYTORCH_VERSION=2.8.0a0+34c6371d24",
       "CUDA_DRIVER_VERSION=580.65.06"},
      {});
  ASSERT_TRUE(f.cuda);
  EXPECT_EQ(f.cuda->ToString(), "13.0.0.044");
  EXPECT_EQ(f.framework, "pytorch");
  ASSERT_TRUE(f.framework_version);
  EXPECT_EQ(f.framework_version->ToString(), "2.8.0");
  EXPECT_EQ(f.ngc_release, "25.08");
  ASSERT_TRUE(f.cuda_driver_version);
  EXPECT_EQ(f.cuda_driver_version->ToString(), "580.65.06");
}

TEST(ImageFacts, AMalformedCudaVersionIsNamedNotFatal) {
  std::vector<std::string> problems;
  ImageCudaFacts f = ReadImageCudaFacts({"CUDA_VERSION=twelve"}, {}, &problems);
  EXPECT_FALSE(f.cuda);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("CUDA_VERSION=\"twelve\""));
}

// An image the data set cannot map (a release not in it) gets an answer from its own config.
TEST(ImageFacts, AnImageOutsideTheDataSetIsAnsweredFromItsConfig) {
  auto plain = WorkloadFromImage(BuiltinData(), "docker.io/acme/llm-server:2026.11");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->cuda);
  auto w = WorkloadFromImageConfig(BuiltinData(), "docker.io/acme/llm-server:2026.11",
                                   ReadImageCudaFacts(kCuda1281Env, {}), "registry docker.io");
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE(w->cuda);
  EXPECT_EQ(w->cuda->ToString(), "12.8.1");
  EXPECT_THAT(w->derived_from, HasSubstr("CUDA_VERSION=12.8.1 in the image's config (registry docker.io)"));
  EXPECT_EQ(w->config_source, "registry docker.io");
  EXPECT_TRUE(w->needed.empty());
  EXPECT_TRUE(w->ships_cuda_compat);  // NVIDIA_REQUIRE_CUDA's brand= groups come with cuda-compat
  EXPECT_EQ(w->requirements.size(), 2u);
}

TEST(ImageFacts, WithoutCudaVersionTheDataSetStillAnswers) {
  auto w = WorkloadFromImageConfig(BuiltinData(), "nvidia/cuda:12.4.1-base-ubuntu22.04", ReadImageCudaFacts({}, {}),
                                   "image config (docker)");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->cuda);
  EXPECT_EQ(w->cuda->ToString(), "12.4.1");
  EXPECT_EQ(w->config_source, "image config (docker)");
}

}  // namespace
}  // namespace gpunode::compat
