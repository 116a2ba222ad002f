// The ceilings table (data/gpu-ceilings.yaml, embedded): per GPU model, the datasheet peaks
// (dense bf16/fp16/fp32 TFLOP/s, memory bandwidth, PCIe generation and width) and ceilings
// measured on real cards, each value with its source and confidence. Pure: parsed from text.
#ifndef GPUNODE_BENCH_CEILINGS_H_
#define GPUNODE_BENCH_CEILINGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"

namespace gpunode::bench {

struct SourcedValue {
  double value = 0;
  std::string source;      // URL or "how it was measured"
  std::string confidence;  // "high", "medium", "low"
};

struct ModelCeilings {
  std::string id;                  // "h200-sxm"
  std::string title;               // "NVIDIA H200 SXM 141GB"
  std::vector<std::string> names;  // NVML names that mean this model ("NVIDIA H200")
  // Datasheet peaks (dense, no sparsity). Empty when the model has no such unit (T4 bf16).
  std::optional<SourcedValue> bf16_tflops, fp16_tflops, fp32_tflops, memory_gbps;
  std::optional<SourcedValue> pcie_gen, pcie_width;
  // Measured on real cards with cuBLAS(Lt) / cuMemcpy; preferred over datasheet peaks.
  std::optional<SourcedValue> measured_bf16_tflops, measured_fp16_tflops, measured_fp32_tflops,
      measured_copy_gbps;
};

struct CeilingsTable {
  std::vector<ModelCeilings> models;
  // The model whose `names` holds `nvml_name` (case-insensitive, surrounding spaces ignored).
  const ModelCeilings* Find(absl::string_view nvml_name) const;
};

// Parses the YAML text. Every value must carry a non-empty source and a confidence of high,
// medium or low; ids must be unique; a name may belong to one model only. Errors name the model
// and field ("gpu-ceilings.yaml: model h100-sxm: bf16_tflops: missing source").
StatusOr<CeilingsTable> ParseCeilings(absl::string_view yaml_text);

// The embedded data/gpu-ceilings.yaml, parsed once.
StatusOr<CeilingsTable> BuiltinCeilings();

}  // namespace gpunode::bench

#endif  // GPUNODE_BENCH_CEILINGS_H_
