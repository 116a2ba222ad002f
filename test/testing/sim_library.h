// The simulated NVML library the tests load: GPUNODE_SIM_LIBRARY when it is set (ctest sets it),
// else the one built next to the binaries (GPUNODE_BIN_DIR/libgpunode-simnvml.so).
#ifndef GPUNODE_TEST_TESTING_SIM_LIBRARY_H_
#define GPUNODE_TEST_TESTING_SIM_LIBRARY_H_

#include <cstdlib>
#include <string>

namespace gpunode::testing {

inline std::string SimLibrary() {
  const char* env = std::getenv("GPUNODE_SIM_LIBRARY");
  return env ? env : std::string(GPUNODE_BIN_DIR) + "/libgpunode-simnvml.so";
}

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_TESTING_SIM_LIBRARY_H_
