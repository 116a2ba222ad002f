// Keeps libcuda out of the long-running commands (plugin, labels, exporter, agent).
//
// NVML itself dlopen()s libcuda.so.1 at nvmlInit on recent drivers (580: 3.8-5.9 MiB of file pages
// in every NVML user, benchmarks/results/footprint-2026-12-01.md), although nothing these commands
// ask of NVML needs it (measured on the H200 with libcuda hidden: every call, GPM included, works and
// the metrics and labels are unchanged). The gpunode executable therefore defines `dlopen` itself
// (exported with --export-dynamic-symbol, so NVML's call binds to it): it forwards every call to the
// C library's, except that after KeepLibcudaOut() a request for libcuda.so* fails the way a missing
// library does (NULL, dlerror() set). doctor, bench and the agent's validator child load libcuda as
// before: they never call KeepLibcudaOut(). docs/ARCHITECTURE.md, "Footprint".
#ifndef GPUNODE_CLI_LIBCUDA_GUARD_H_
#define GPUNODE_CLI_LIBCUDA_GUARD_H_

namespace gpunode::cli {

// From now on, dlopen of libcuda.so* (by name or path) fails in this process.
void KeepLibcudaOut();
bool LibcudaKeptOut();

}  // namespace gpunode::cli

#endif  // GPUNODE_CLI_LIBCUDA_GUARD_H_
