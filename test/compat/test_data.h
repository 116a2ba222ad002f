// Shared fixtures of the compat tests: the built-in data set, loaded once.
#ifndef GPUNODE_TEST_COMPAT_TEST_DATA_H_
#define GPUNODE_TEST_COMPAT_TEST_DATA_H_

#include <cstdlib>
#include <iostream>

#include "src/compat/dataset.h"

namespace gpunode::compat::testing {

inline const CompatData& BuiltinData() {
  static const CompatData* data = [] {
    auto d = LoadBuiltin();
    if (!d.ok()) {
      std::cerr << "built-in data set does not load: " << d.status() << "\n";
      std::abort();
    }
    return new CompatData(*std::move(d));
  }();
  return *data;
}

}  // namespace gpunode::compat::testing

#endif  // GPUNODE_TEST_COMPAT_TEST_DATA_H_
