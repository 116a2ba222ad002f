// The compatibility rules engine: pure functions over CompatData. No I/O, no globals; the CLI
// builds the inputs (WorkloadSpec from image_ref.h, NodeTarget from --driver/--gpu or the node
// inventory) and prints the outputs.
//
// Check() evaluates every rule (docs/compat.md lists them) and returns all findings; the verdict
// is the worst finding (incompatible > unknown > compatible-with-caveats > compatible), and the
// deciding rule is the first finding with that severity, in layer order: kernel driver vs GPU,
// user-space driver vs toolkit, toolkit vs GPU architecture, framework vs GPU.
#ifndef GPUNODE_COMPAT_ENGINE_H_
#define GPUNODE_COMPAT_ENGINE_H_

#include <vector>

#include "src/base/status.h"
#include "src/base/version.h"
#include "src/compat/dataset.h"
#include "src/compat/gpu_catalog.h"
#include "src/compat/image_ref.h"
#include "src/compat/report.h"

namespace gpunode::compat {

// The report types and their renderers (ToJson, RenderText) are in report.h.
CompatReport Check(const CompatData& data, const WorkloadSpec& workload, const NodeTarget& target);

// `gpunode compat driver-for --cuda X.Y [--gpu NAME]`.
DriverForReport DriverFor(const CompatData& data, const Version& cuda,
                          const std::vector<GpuRef>& gpus);

}  // namespace gpunode::compat

#endif  // GPUNODE_COMPAT_ENGINE_H_
