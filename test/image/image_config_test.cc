#include "src/image/image_config.h"

#include <string>

#include "gtest/gtest.h"

namespace gpunode::image {
namespace {

TEST(ImageConfig, ReadsEnvLabelsAndPlatform) {
  auto c = ParseImageConfig(
      R"({"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/bin","CUDA_VERSION=12.8.1",
         "NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=tesla,driver>=535,driver<536"],
         "Labels":{"maintainer":"NVIDIA CORPORATION <cudatools@nvidia.com>"}}})",
      "test");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->os, "linux");
  EXPECT_EQ(c->architecture, "amd64");
  EXPECT_EQ(EnvValue(*c, "CUDA_VERSION"), "12.8.1");
  EXPECT_EQ(EnvValue(*c, "NVIDIA_REQUIRE_CUDA"), "cuda>=12.8 brand=tesla,driver>=535,driver<536");
  EXPECT_EQ(EnvValue(*c, "CUDA"), std::nullopt);
  EXPECT_EQ(c->labels.at("maintainer"), "NVIDIA CORPORATION <cudatools@nvidia.com>");
}

TEST(ImageConfig, TheLastEnvEntryWins) {
  auto c = ParseImageConfig(R"({"config":{"Env":["A=1","A=2"]}})", "t");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(EnvValue(*c, "A"), "2");
}

TEST(ImageConfig, WrongTypesAreNamed) {
  auto c = ParseImageConfig(R"({"config":{"Env":"A=1"}})", "reg/x");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("reg/x: image config: config.Env is not a list"),
            std::string::npos)
      << c.status();
  c = ParseImageConfig(R"({"config":{"Labels":{"a":1}}})", "reg/x");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("config.Labels[\"a\"]"), std::string::npos);
}

TEST(ImageConfig, HugeAndDeepConfigsAreRefused) {
  std::string deep(200, '[');
  deep += std::string(200, ']');
  EXPECT_FALSE(ParseImageConfig(deep, "t").ok());
  std::string huge = R"({"config":{"Env":[")" + std::string(kMaxConfigBytes, 'x') + R"("]}})";
  auto c = ParseImageConfig(huge, "t");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("more than the"), std::string::npos);
}

}  // namespace
}  // namespace gpunode::image
