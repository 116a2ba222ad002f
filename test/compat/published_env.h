// Environment values of published images, for the requirement tests (requirement_test.cc,
// engine_requires_test.cc). Each value names where it was read.
#ifndef GPUNODE_TEST_COMPAT_PUBLISHED_ENV_H_
#define GPUNODE_TEST_COMPAT_PUBLISHED_ENV_H_

namespace gpunode::compat::testing {

// nvidia/cuda:12.8.1-* (base, runtime, devel; every Ubuntu release): the NVIDIA_REQUIRE_CUDA that
// NVIDIA's template (gitlab.com/nvidia/container-images/cuda, dist/12.8.1/<os>/base/Dockerfile)
// writes for CUDA 12.8. Copied from the environment of a running vllm/vllm-openai v0.10.1.1
// container (built FROM nvidia/cuda 12.8.1) as vLLM's collect_env printed it in a public issue;
// the same value's start is in the layer history of an Ubuntu 24.04 image built on
// nvidia/cuda:12.8.1 ("ENV NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=unknown,driver>=470,...").
// One `cuda>=12.8` group, then brand groups for the forward-compatibility branches 470, 535, 550,
// 560 and 565 (no geforce/titan among them).
inline constexpr char kCuda1281Require[] =
    "cuda>=12.8 "
    "brand=unknown,driver>=470,driver<471 brand=grid,driver>=470,driver<471 "
    "brand=tesla,driver>=470,driver<471 brand=nvidia,driver>=470,driver<471 "
    "brand=quadro,driver>=470,driver<471 brand=quadrortx,driver>=470,driver<471 "
    "brand=nvidiartx,driver>=470,driver<471 brand=vapps,driver>=470,driver<471 "
    "brand=vpc,driver>=470,driver<471 brand=vcs,driver>=470,driver<471 "
    "brand=vws,driver>=470,driver<471 brand=cloudgaming,driver>=470,driver<471 "
    "brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,driver<536 "
    "brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536 "
    "brand=quadro,driver>=535,driver<536 brand=quadrortx,driver>=535,driver<536 "
    "brand=nvidiartx,driver>=535,driver<536 brand=vapps,driver>=535,driver<536 "
    "brand=vpc,driver>=535,driver<536 brand=vcs,driver>=535,driver<536 "
    "brand=vws,driver>=535,driver<536 brand=cloudgaming,driver>=535,driver<536 "
    "brand=unknown,driver>=550,driver<551 brand=grid,driver>=550,driver<551 "
    "brand=tesla,driver>=550,driver<551 brand=nvidia,driver>=550,driver<551 "
    "brand=quadro,driver>=550,driver<551 brand=quadrortx,driver>=550,driver<551 "
    "brand=nvidiartx,driver>=550,driver<551 brand=vapps,driver>=550,driver<551 "
    "brand=vpc,driver>=550,driver<551 brand=vcs,driver>=550,driver<551 "
    "brand=vws,driver>=550,driver<551 brand=cloudgaming,driver>=550,driver<551 "
    "brand=unknown,driver>=560,driver<561 brand=grid,driver>=560,driver<561 "
    "brand=tesla,driver>=560,driver<561 brand=nvidia,driver>=560,driver<561 "
    "brand=quadro,driver>=560,driver<561 brand=quadrortx,driver>=560,driver<561 "
    "brand=nvidiartx,driver>=560,driver<561 brand=vapps,driver>=560,driver<561 "
    "brand=vpc,driver>=560,driver<561 brand=vcs,driver>=560,driver<561 "
    "brand=vws,driver>=560,driver<561 brand=cloudgaming,driver>=560,driver<561 "
    "brand=unknown,driver>=565,driver<566 brand=grid,driver>=565,driver<566 "
    "brand=tesla,driver>=565,driver<566 brand=nvidia,driver>=565,driver<566 "
    "brand=quadro,driver>=565,driver<566 brand=quadrortx,driver>=565,driver<566 "
    "brand=nvidiartx,driver>=565,driver<566 brand=vapps,driver>=565,driver<566 "
    "brand=vpc,driver>=565,driver<566 brand=vcs,driver>=565,driver<566 "
    "brand=vws,driver>=565,driver<566 brand=cloudgaming,driver>=565,driver<566";

// nvidia/cuda:12.8.1-base-ubuntu24.04: CUDA_VERSION from the same layer history
// ("ENV CUDA_VERSION=12.8.1") and NVIDIA's Dockerfile.
inline constexpr char kCuda1281Version[] = "12.8.1";

// vllm/vllm-openai:v0.10.1 (built FROM nvidia/cuda:12.8.1-devel-ubuntu22.04): the collect_env
// output above (v0.10.1.1, the same Dockerfile and base) shows NVIDIA_REQUIRE_CUDA =
// kCuda1281Require, CUDA_VERSION=12.8.1 and VLLM_USAGE_SOURCE=production-docker-image.
inline constexpr char kVllmUsageSource[] = "production-docker-image";

// nvcr.io/nvidia/pytorch:25.08-py3: NGC's framework images set NVIDIA_REQUIRE_CUDA=cuda>=9.0
// (the environment of NGC PyTorch 20.06 and 23.10 as printed in public issues and scripts; NGC
// keeps the value across releases and relies on the compat libraries in /usr/local/cuda/compat and
// its entrypoint's driver check instead). The 25.08 value itself was not read from its config here:
// marked so in the tests.
inline constexpr char kNgcRequire[] = "cuda>=9.0";

}  // namespace gpunode::compat::testing

#endif  // GPUNODE_TEST_COMPAT_PUBLISHED_ENV_H_
