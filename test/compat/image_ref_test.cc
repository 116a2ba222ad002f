#include "src/compat/image_ref.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/compat/test_data.h"
#include "test/testing/status_matchers.h"

namespace gpunode::compat {
namespace {

using ::gpunode::compat::testing::BuiltinData;
using ::testing::HasSubstr;

WorkloadSpec Image(const std::string& ref) {
  auto s = WorkloadFromImage(BuiltinData(), ref);
  EXPECT_OK(s) << s.status();
  return s.ok() ? *s : WorkloadSpec{};
}

std::string Cuda(const WorkloadSpec& s) { return s.cuda ? s.cuda->ToString() : "(none)"; }

TEST(ImageRef, DefaultsToDockerHubAndLibrary) {
  auto r = ParseImageRef("ubuntu");
  ASSERT_OK(r);
  EXPECT_EQ(r->Name(), "docker.io/library/ubuntu");
  EXPECT_EQ(r->tag, "latest");
  EXPECT_TRUE(r->tag_defaulted);
}

TEST(ImageRef, KeepsRegistryPortTagAndDigest) {
  auto r = ParseImageRef(
      "registry.local:5000/team/app:v1@sha256:"
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  ASSERT_OK(r) << r.status();
  EXPECT_EQ(r->registry, "registry.local:5000");
  EXPECT_EQ(r->repository, "team/app");
  EXPECT_EQ(r->tag, "v1");
  EXPECT_EQ(r->digest.substr(0, 7), "sha256:");
}

TEST(ImageRef, RejectsMalformedReferencesNamingTheInput) {
  for (const char* bad : {"", "UPPER/case:1", "a b", "repo:", "repo:-tag", "repo@sha256:abc",
                          "/repo", "repo//x", "repo:tag@", "-repo"}) {
    auto r = ParseImageRef(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_THAT(r.status().message(), HasSubstr("is not an image reference")) << bad;
    }
  }
}

TEST(NvidiaCudaTags, ParseVersionFlavorCudnnAndOs) {
  WorkloadSpec s = Image("nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04");
  EXPECT_EQ(s.family, "nvidia/cuda");
  EXPECT_EQ(Cuda(s), "12.4.1");
  EXPECT_EQ(s.flavor, "cudnn-runtime");
  EXPECT_EQ(s.cudnn, "unversioned");
  EXPECT_EQ(s.os, "ubuntu22.04");
  EXPECT_TRUE(s.ships_cuda_compat);
  WorkloadSpec old = Image("nvidia/cuda:10.2-cudnn7-devel-ubuntu18.04");
  EXPECT_EQ(Cuda(old), "10.2");
  EXPECT_EQ(old.cudnn, "7");
  EXPECT_EQ(Cuda(Image("nvidia/cuda:11.0-base")), "11.0");
  EXPECT_EQ(Cuda(Image("nvcr.io/nvidia/cuda:12.8.1-base-ubi9")), "12.8.1");
  EXPECT_EQ(Cuda(Image("docker.io/nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04")), "13.0.2");
}

TEST(PytorchTags, ParseTorchCudaAndCudnn) {
  WorkloadSpec s = Image("pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime");
  EXPECT_EQ(s.family, "pytorch/pytorch");
  EXPECT_EQ(Cuda(s), "12.4");
  EXPECT_EQ(s.framework, "pytorch");
  EXPECT_EQ(s.framework_version->ToString(), "2.5.1");
  EXPECT_EQ(s.wheel, "cu124");
  EXPECT_EQ(s.cudnn, "9");
  EXPECT_EQ(s.flavor, "runtime");
  EXPECT_FALSE(Image("pytorch/pytorch:latest").cuda);
}

TEST(NgcPytorchTags, MapKnownMonthsAndExplainUnknownOnes) {
  WorkloadSpec s = Image("nvcr.io/nvidia/pytorch:24.05-py3");
  EXPECT_EQ(Cuda(s), "12.4.1");
  EXPECT_EQ(s.confidence, Confidence::kDerived);
  WorkloadSpec u = Image("nvcr.io/nvidia/pytorch:23.10-py3");
  EXPECT_FALSE(u.cuda);
  ASSERT_FALSE(u.needed.empty());
  EXPECT_THAT(u.needed[0], HasSubstr("CUDA_VERSION"));
  EXPECT_THAT(u.needed[0], HasSubstr("--cuda"));
  EXPECT_THAT(u.needed[0], HasSubstr("rel-23-10"));
}

TEST(TritonTags, MapEveryVariant) {
  EXPECT_EQ(Cuda(Image("nvcr.io/nvidia/tritonserver:24.05-vllm-python-py3")), "12.4.1");
  EXPECT_EQ(Cuda(Image("nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3")), "13.1.0");
  WorkloadSpec plain = Image("nvcr.io/nvidia/tritonserver:25.10-py3");
  EXPECT_EQ(Cuda(plain), "13.0.2");
  EXPECT_EQ(plain.confidence, Confidence::kDerived);
  EXPECT_FALSE(Image("nvcr.io/nvidia/tritonserver:25.10-py3-sdk").cuda);
  EXPECT_FALSE(Image("nvcr.io/nvidia/tritonserver:21.01-py3").cuda);
}

TEST(VllmTags, MapTheCapturedImage) {
  WorkloadSpec s = Image("vllm/vllm-openai:v0.8.5");
  EXPECT_EQ(Cuda(s), "12.4.0");
  EXPECT_EQ(s.framework, "vllm");
  EXPECT_FALSE(Image("vllm/vllm-openai:v0.11.0").cuda);
}

TEST(TensorflowTags, MapGpuTagsThroughTestedBuilds) {
  EXPECT_EQ(Cuda(Image("tensorflow/tensorflow:2.15.0-gpu")), "12.2");
  EXPECT_FALSE(Image("tensorflow/tensorflow:2.15.0").cuda);
}

TEST(UnknownImages, SayWhatWouldLetUsDecide) {
  WorkloadSpec s = Image("ghcr.io/acme/trainer:1.0");
  EXPECT_FALSE(s.cuda);
  EXPECT_THAT(s.derived_from, HasSubstr("ghcr.io/acme/trainer"));
  ASSERT_FALSE(s.needed.empty());
  EXPECT_THAT(s.needed[0], HasSubstr("docker inspect"));
}

TEST(UnknownImages, DigestWithoutTagIsUnknown) {
  WorkloadSpec s = Image(
      "nvidia/cuda@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  EXPECT_FALSE(s.cuda);
  EXPECT_THAT(s.derived_from, HasSubstr("digest"));
  WorkloadSpec t = Image(
      "nvidia/cuda:12.4.1-base-ubuntu22.04@sha256:"
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  EXPECT_EQ(Cuda(t), "12.4.1");
}

TEST(PipSpecs, TorchWheelVariantsGiveTheCuda) {
  const CompatData& d = BuiltinData();
  for (const char* spec : {"torch==2.5.1+cu124", "torch 2.5.1+cu124", "2.5.1+cu124"}) {
    auto s = WorkloadFromPip(d, spec);
    ASSERT_OK(s) << spec << ": " << s.status();
    EXPECT_EQ(Cuda(*s), "12.4") << spec;
    EXPECT_EQ(s->framework_version->ToString(), "2.5.1");
    EXPECT_EQ(s->wheel, "cu124");
  }
  EXPECT_EQ(Cuda(*WorkloadFromPip(d, "torch==2.0.1")), "11.7");  // PyPI default of 2.0
  EXPECT_FALSE(WorkloadFromPip(d, "torch==2.5.1")->cuda);
  EXPECT_FALSE(WorkloadFromPip(d, "torch==2.5.1+cpu")->cuda);
  EXPECT_EQ(Cuda(*WorkloadFromPip(d, "jax[cuda13]")), "13.0");
  EXPECT_EQ(Cuda(*WorkloadFromPip(d, "tensorflow==2.18.0")), "12.5");
}

TEST(PipSpecs, MalformedSpecsAreErrors) {
  const CompatData& d = BuiltinData();
  for (const char* bad : {"", "torch==", "torch==2.x", "torch==2.5.1+cuda", "torch~=2.5",
                          "jax[cuda12"}) {
    EXPECT_FALSE(WorkloadFromPip(d, bad).ok()) << bad;
  }
}

TEST(WheelTags, MapToCudaVersions) {
  EXPECT_EQ(CudaFromWheelTag("cu118")->ToString(), "11.8");
  EXPECT_EQ(CudaFromWheelTag("cu130")->ToString(), "13.0");
  EXPECT_EQ(CudaFromWheelTag("cu92")->ToString(), "9.2");
  EXPECT_FALSE(CudaFromWheelTag("cu1").ok());
  EXPECT_FALSE(CudaFromWheelTag("rocm6.1").ok());
}

TEST(CudaFlag, RejectsMalformedVersionsNamingTheFlag) {
  auto bad = WorkloadFromCuda("12.x");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--cuda \"12.x\""));
  EXPECT_FALSE(WorkloadFromCuda("12").ok());
  EXPECT_EQ(Cuda(*WorkloadFromCuda("12.4")), "12.4");
}

}  // namespace
}  // namespace gpunode::compat

namespace gpunode::compat {
namespace {

// Found by fuzz/tag_fuzz.cc: invalid UTF-8 reached the JSON report and made dump() throw.
TEST(PipSpecs, NonAsciiBytesAreRejectedSoJsonStaysValid) {
  auto s = WorkloadFromPip(testing::BuiltinData(), std::string("ch==tro2\x0e" "5\xd2\xce", 11));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), ::testing::HasSubstr("non-ASCII"));
  EXPECT_EQ(std::string(s.status().message()).find('\xd2'), std::string::npos);
}

}  // namespace
}  // namespace gpunode::compat
