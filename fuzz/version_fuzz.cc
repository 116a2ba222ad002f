// libFuzzer target: version text (--driver, --cuda, wheel tags) through the parsers, and parsed
// versions through the rules engine and driver-for. Invariants: no crash; Parse either fails or
// yields 1 to 5 components; comparison is consistent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "src/base/version.h"
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto v = gpunode::Version::Parse(text, "--driver");
  if (v.ok()) {
    if (v->parts().empty() || v->parts().size() > 5) std::abort();
    if (!(*v == *v) || (*v < *v)) std::abort();
    gpunode::compat::GpuCatalog catalog(Data());
    gpunode::compat::NodeTarget target;
    target.origin = "fuzz";
    target.driver = *v;
    if (auto g = catalog.LookupByPciId(0x1db1)) target.gpus.push_back(*g);  // V100
    auto spec = gpunode::compat::WorkloadFromCuda("12.4.1");
    if (spec.ok()) (void)gpunode::compat::ToJson(gpunode::compat::Check(Data(), *spec, target));
    (void)gpunode::compat::RenderText(gpunode::compat::DriverFor(Data(), *v, target.gpus), false);
  }
  auto cuda = gpunode::compat::WorkloadFromCuda(text);
  if (cuda.ok() && !cuda->cuda) std::abort();
  (void)gpunode::compat::CudaFromWheelTag(text);
  (void)gpunode::compat::ParseCompatData(text, "fuzz.yaml");
  return 0;
}
