// compat data --refresh-from-images: rows proposed from images' own configs.
#include "src/compat/refresh.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/yaml.h"
#include "test/compat/test_data.h"

namespace gpunode::compat {
namespace {

using ::testing::HasSubstr;
using testing::BuiltinData;

ImageObservation Seen(std::string ref, std::vector<std::string> env, std::string digest = "") {
  ImageObservation o;
  o.ref = std::move(ref);
  o.digest = std::move(digest);
  o.source = "registry test";
  o.facts = ReadImageCudaFacts(env, {});
  return o;
}

TEST(Refresh, ReleasesMissingFromTheDataSetAreProposedGroupedByCuda) {
  std::vector<ImageObservation> images = {
      Seen("vllm/vllm-openai:v0.10.1", {"CUDA_VERSION=12.8.1"}, "sha256:aaaa"),
      Seen("vllm/vllm-openai:v0.10.1.1", {"CUDA_VERSION=12.8.1"}),
      Seen("nvcr.io/nvidia/pytorch:25.10-py3", {"CUDA_VERSION=13.0.2.006"}),
      Seen("docker.io/acme/llm:1.0", {"CUDA_VERSION=12.4.1"}),
      Seen("nvidia/cuda:12.8.1-base-ubuntu24.04", {"CUDA_VERSION=12.8.1"}),
      Seen("nvcr.io/nvidia/pytorch:25.11-py3", {}),
  };
  images.push_back(Seen("nvcr.io/nvidia/pytorch:25.12-py3", {"CUDA_VERSION=13.1.0"}));
  ImageObservation bad = Seen("vllm/vllm-openai:v9.9.9", {});
  bad.error = absl::NotFoundError("registry docker.io: vllm/vllm-openai:v9.9.9: manifest unknown");
  images.push_back(bad);
  RefreshProposal p = ProposeFromImages(BuiltinData(), images, "2026-12-03");
  EXPECT_EQ(p.proposed, 3);
  EXPECT_EQ(p.agreeing, 2);  // nvidia/cuda (tag), pytorch 25.12 (already there)
  EXPECT_THAT(p.yaml, HasSubstr("IMGCFG20261203: \"image configs (env CUDA_VERSION) read by gpunode on 2026-12-03\""));
  EXPECT_THAT(p.yaml, HasSubstr("- {family: vllm/vllm-openai, tags: [\"v0.10.1\", \"v0.10.1.1\"], cuda: \"12.8.1\", "
                                "source: \"IMGCFG20261203 - vllm/vllm-openai:v0.10.1@sha256:aaaa, "
                                "vllm/vllm-openai:v0.10.1.1\", confidence: official}"));
  EXPECT_THAT(p.yaml, HasSubstr("- {family: nvcr.io/nvidia/pytorch, variant: py3, tags: [\"25.10\"], cuda: \"13.0.2\""));
  EXPECT_THAT(p.yaml, HasSubstr("# docker.io/acme/llm:1.0: no family of the data set has repository docker.io/acme/llm"));
  EXPECT_THAT(p.yaml, HasSubstr("# nvcr.io/nvidia/pytorch:25.11-py3: its config (registry test) sets no CUDA_VERSION"));
  EXPECT_THAT(p.yaml, HasSubstr("# vllm/vllm-openai:v9.9.9: not read: registry docker.io"));
  // The proposal is YAML.
  EXPECT_TRUE(LoadYaml(p.yaml, "proposal").ok()) << p.yaml;
}

}  // namespace
}  // namespace gpunode::compat
