// libFuzzer target: image references and pip requirements through the parsers and the rules
// engine. Invariants: no crash, no exception, and a spec without a CUDA version always says
// what would let us decide.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "src/compat/dataset.h"
#include "src/compat/engine.h"
#include "src/compat/image_ref.h"

namespace {

const gpunode::compat::CompatData& Data() {
  static const gpunode::compat::CompatData* data = [] {
    auto d = gpunode::compat::LoadBuiltin();
    if (!d.ok()) std::abort();
    return new gpunode::compat::CompatData(*std::move(d));
  }();
  return *data;
}

void Exercise(const gpunode::StatusOr<gpunode::compat::WorkloadSpec>& spec) {
  if (!spec.ok()) return;
  if (!spec->cuda && spec->needed.empty()) std::abort();
  gpunode::compat::NodeTarget target;
  target.origin = "fuzz";
  target.driver = gpunode::Version::Of({535, 104, 5});
  gpunode::compat::GpuCatalog catalog(Data());
  if (auto g = catalog.LookupByPciId(0x2335)) target.gpus.push_back(*g);
  gpunode::compat::CompatReport r = gpunode::compat::Check(Data(), *spec, target);
  (void)gpunode::compat::ToJson(r).dump();
  (void)gpunode::compat::RenderText(r, false);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  (void)gpunode::compat::ParseImageRef(text);
  Exercise(gpunode::compat::WorkloadFromImage(Data(), text));
  Exercise(gpunode::compat::WorkloadFromPip(Data(), text));
  gpunode::compat::GpuCatalog catalog(Data());
  (void)catalog.Lookup(text);
  (void)catalog.LookupByName(text);
  return 0;
}
