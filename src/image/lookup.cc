#include "src/image/lookup.h"

#include "absl/strings/str_cat.h"

namespace gpunode::image {

LookupResult LookUpImageConfig(const compat::ImageRef& ref, LookupPlan& plan) {
  LookupResult out;
  for (const std::unique_ptr<ImageStore>& store : plan.stores) {
    auto c = store->Find(ref);
    if (c.ok()) {
      out.config = *std::move(c);
      return out;
    }
    out.tried.push_back(std::string(c.status().message()));
  }
  if (plan.registry) {
    auto c = FetchFromRegistry(ref, *plan.registry);
    if (c.ok()) {
      out.config = *std::move(c);
      return out;
    }
    out.tried.push_back(std::string(c.status().message()));
  }
  return out;
}

}  // namespace gpunode::image
