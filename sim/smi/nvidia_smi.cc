// gpunode-sim-nvidia-smi: the simulated driver's `nvidia-smi`, for what NVIDIA's DRA driver and
// gpunode run on a node (`gpunode sim hostroot` installs it as usr/bin/nvidia-smi beside the
// simulated libnvidia-ml.so.1 when it was built). Like the real one it loads libnvidia-ml.so.1 at
// run time (one already loaded through LD_PRELOAD; else dlopen: LD_LIBRARY_PATH, the system's paths; then, for a generated host
// root, the library of the driver root it sits in: <exe>/../lib/x86_64-linux-gnu) and works
// through NVML; the time slice, which NVML has no public call for, goes through the simulator's
// own export gpunodeSimDeviceSetTimeslice (sim/nvml/compute.cc). What it understands:
//
//   nvidia-smi -L | --list-gpus
//       GPU 0: NVIDIA H200 (UUID: GPU-...)            (MIG devices below their GPU:)
//         MIG 1g.18gb     Device  0: (UUID: MIG-...)
//   nvidia-smi [-i ID[,ID...]] -c MODE | --compute-mode=MODE
//       MODE: DEFAULT|EXCLUSIVE_PROCESS|PROHIBITED or 0|2|3 (1, EXCLUSIVE_THREAD, is refused as
//       the driver refuses it). ID: an index, a GPU UUID or a PCI bus id; no -i: every GPU.
//       "Set compute mode to EXCLUSIVE_PROCESS for GPU 00000000:1B:00.0." / "Compute mode is
//       already set to DEFAULT for GPU ...", then "All done."
//   nvidia-smi compute-policy [-i ID[,ID...]] --set-timeslice N | --set-timeslice=N
//       N: 0=DEFAULT, 1=SHORT, 2=MEDIUM, 3=LONG. "Set timeslice to 3 (LONG) for GPU ...", "All done."
//   nvidia-smi compute-policy [-i ID[,ID...]] -l | --list
//       One line per GPU (this format is the simulator's; the real listing's layout differs
//       between drivers and is not reproduced): "GPU 0 (GPU-...): Timeslice 3 (LONG)".
//   nvidia-smi [-i ID] --query-gpu=index,uuid,name,pci.bus_id,compute_mode --format=csv[,noheader]
//       compute_mode as the real one prints it: Default, Exclusive_Process, Prohibited.
//
// Exit codes are the real nvidia-smi's (its man page, RETURN VALUE): 0 success; 2 invalid
// arguments ("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.");
// 3 operation not supported; 4 no permission; 6 no such GPU ("No devices were found"); 9 no
// driver (NVML does not initialise); 12 libnvidia-ml.so not found; 15 GPU lost; 255 other errors.
// A failed set prints "Unable to set ... for GPU <bus id>: <NVML's error string>" and
// "Terminating early due to previous errors.", and exits with NVML's error code as above.
#include <dlfcn.h>
#include <unistd.h>

#include <cctype>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sim/nvml/nvml_abi_more.h"
#include "src/gpu/nvml_abi.h"

namespace {

constexpr int kExitBadArgs = 2;
constexpr int kExitNotFound = 6;
constexpr int kExitNoDriver = 9;
constexpr int kExitNoLibrary = 12;
constexpr int kExitOther = 255;

struct Nvml {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*by_uuid)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*index)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*mig_count)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*mig_by_index)(nvmlDevice_t, unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*get_mode)(nvmlDevice_t, nvmlComputeMode_t*) = nullptr;
  nvmlReturn_t (*set_mode)(nvmlDevice_t, nvmlComputeMode_t) = nullptr;
  nvmlReturn_t (*get_slice)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*set_slice)(nvmlDevice_t, unsigned) = nullptr;
};

Nvml g_nvml;

// NVML's return code as the exit code, as nvidia-smi maps them (its man page).
int ExitFor(nvmlReturn_t r) {
  switch (r) {
    case NVML_ERROR_INVALID_ARGUMENT: return 2;
    case NVML_ERROR_NOT_SUPPORTED: return 3;
    case NVML_ERROR_NO_PERMISSION: return 4;
    case NVML_ERROR_NOT_FOUND: return 6;
    case NVML_ERROR_DRIVER_NOT_LOADED: return 9;
    case NVML_ERROR_LIBRARY_NOT_FOUND: return 12;
    case NVML_ERROR_FUNCTION_NOT_FOUND: return 13;
    case NVML_ERROR_GPU_IS_LOST: return 15;
    default: return kExitOther;
  }
}

const char* ErrorText(nvmlReturn_t r) {
  return g_nvml.error_string != nullptr ? g_nvml.error_string(r) : "Unknown Error";
}

int BadArgs() {
  std::fprintf(stderr, "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n");
  return kExitBadArgs;
}

template <class F>
bool Sym(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(::dlsym(lib, name));
  return *out != nullptr;
}

// Loads libnvidia-ml.so.1 and initialises it; an exit code on failure.
int LoadNvml() {
  // A library already loaded (LD_PRELOAD) that has NVML's entry points is the one to use.
  // (RTLD_DEFAULT is the null handle: `loaded` says which.)
  const bool loaded = ::dlsym(RTLD_DEFAULT, "nvmlInit_v2") != nullptr;
  void* lib = loaded ? RTLD_DEFAULT : ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!loaded && lib == nullptr) {
    char exe[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
      std::string dir(exe, static_cast<size_t>(n));
      dir = dir.substr(0, dir.rfind('/'));
      lib = ::dlopen((dir + "/../lib/x86_64-linux-gnu/libnvidia-ml.so.1").c_str(), RTLD_NOW | RTLD_GLOBAL);
    }
  }
  if (!loaded && lib == nullptr) {
    std::fprintf(stderr,
                 "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA "
                 "Display Driver is properly installed and present in your system.\nPlease also try adding directory "
                 "that contains libnvidia-ml.so to your system PATH.\n");
    return kExitNoLibrary;
  }
  Nvml& n = g_nvml;
  const bool ok = Sym(lib, "nvmlInit_v2", &n.init) && Sym(lib, "nvmlShutdown", &n.shutdown) &&
                  Sym(lib, "nvmlErrorString", &n.error_string) && Sym(lib, "nvmlDeviceGetCount_v2", &n.count) &&
                  Sym(lib, "nvmlDeviceGetHandleByIndex_v2", &n.by_index) &&
                  Sym(lib, "nvmlDeviceGetHandleByUUID", &n.by_uuid) && Sym(lib, "nvmlDeviceGetName", &n.name) &&
                  Sym(lib, "nvmlDeviceGetUUID", &n.uuid) && Sym(lib, "nvmlDeviceGetPciInfo_v3", &n.pci) &&
                  Sym(lib, "nvmlDeviceGetIndex", &n.index) && Sym(lib, "nvmlDeviceGetMigMode", &n.mig_mode) &&
                  Sym(lib, "nvmlDeviceGetMaxMigDeviceCount", &n.mig_count) &&
                  Sym(lib, "nvmlDeviceGetMigDeviceHandleByIndex", &n.mig_by_index) &&
                  Sym(lib, "nvmlDeviceGetComputeMode", &n.get_mode) &&
                  Sym(lib, "nvmlDeviceSetComputeMode", &n.set_mode);
  if (!ok) {
    std::fprintf(stderr, "Failed to initialize NVML: Function Not Found\n");
    return 13;
  }
  // The simulator's own (a real libnvidia-ml.so.1 has neither: the time slice is then not supported).
  Sym(lib, "gpunodeSimDeviceGetTimeslice", &n.get_slice);
  Sym(lib, "gpunodeSimDeviceSetTimeslice", &n.set_slice);
  if (nvmlReturn_t r = n.init(); r != NVML_SUCCESS) {
    if (r == NVML_ERROR_DRIVER_NOT_LOADED || r == NVML_ERROR_LIBRARY_NOT_FOUND) {
      std::fprintf(stderr,
                   "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
                   "latest NVIDIA driver is installed and running.\n\n");
      return kExitNoDriver;
    }
    std::fprintf(stderr, "Failed to initialize NVML: %s\n", ErrorText(r));
    return ExitFor(r);
  }
  return 0;
}

struct Device {
  nvmlDevice_t handle = nullptr;
  unsigned index = 0;
  std::string uuid, name, bus_id;
};

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

bool Describe(nvmlDevice_t h, Device* d) {
  d->handle = h;
  char buf[96];
  if (g_nvml.uuid(h, buf, sizeof buf) != NVML_SUCCESS) return false;
  d->uuid = buf;
  if (g_nvml.name(h, buf, sizeof buf) == NVML_SUCCESS) d->name = buf;
  nvmlPciInfo_t pci{};
  if (g_nvml.pci(h, &pci) == NVML_SUCCESS) d->bus_id = pci.busId;
  unsigned index = 0;
  if (g_nvml.index(h, &index) == NVML_SUCCESS) d->index = index;
  return true;
}

// Every GPU, in index order.
std::vector<Device> AllGpus() {
  std::vector<Device> out;
  unsigned count = 0;
  if (g_nvml.count(&count) != NVML_SUCCESS) return out;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t h = nullptr;
    Device d;
    if (g_nvml.by_index(i, &h) != NVML_SUCCESS || !Describe(h, &d)) continue;
    d.index = i;
    out.push_back(d);
  }
  return out;
}

bool SameBusId(const std::string& a, const std::string& b) {
  // "00000000:1B:00.0" and "0000:1b:00.0" name the same function.
  auto norm = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const size_t colon = s.find(':');
    if (colon != std::string::npos && s.find(':', colon + 1) != std::string::npos) {
      std::string domain = s.substr(0, colon);
      while (domain.size() > 1 && domain[0] == '0') domain.erase(0, 1);
      s = domain + s.substr(colon);
    }
    return s;
  };
  return norm(a) == norm(b);
}

// The devices -i names (all GPUs without -i); an exit code when one is unknown.
int Select(const std::string& ids, std::vector<Device>* out) {
  std::vector<Device> all = AllGpus();
  if (ids.empty()) {
    if (all.empty()) {
      std::printf("No devices were found\n");
      return kExitNotFound;
    }
    *out = all;
    return 0;
  }
  for (const std::string& id : Split(ids, ',')) {
    bool found = false;
    if (!id.empty() && id.find_first_not_of("0123456789") == std::string::npos && id.size() < 6) {
      const unsigned i = static_cast<unsigned>(std::atoi(id.c_str()));
      for (const Device& d : all) {
        if (d.index == i) out->push_back(d), found = true;
      }
    } else if (id.rfind("GPU-", 0) == 0 || id.rfind("MIG-", 0) == 0) {
      nvmlDevice_t h = nullptr;
      Device d;
      if (g_nvml.by_uuid(id.c_str(), &h) == NVML_SUCCESS && Describe(h, &d)) out->push_back(d), found = true;
    } else {
      for (const Device& d : all) {
        if (SameBusId(d.bus_id, id)) out->push_back(d), found = true;
      }
    }
    if (!found) {
      std::printf("No devices were found\n");
      return kExitNotFound;
    }
  }
  return 0;
}

int ListGpus() {
  for (const Device& d : AllGpus()) {
    std::printf("GPU %u: %s (UUID: %s)\n", d.index, d.name.c_str(), d.uuid.c_str());
    unsigned current = 0, pending = 0, max = 0;
    if (g_nvml.mig_mode(d.handle, &current, &pending) != NVML_SUCCESS || current != NVML_DEVICE_MIG_ENABLE) continue;
    if (g_nvml.mig_count(d.handle, &max) != NVML_SUCCESS) continue;
    for (unsigned m = 0; m < max; ++m) {
      nvmlDevice_t h = nullptr;
      Device mig;
      if (g_nvml.mig_by_index(d.handle, m, &h) != NVML_SUCCESS || !Describe(h, &mig)) continue;
      const size_t at = mig.name.find(" MIG ");
      const std::string profile = at == std::string::npos ? mig.name : mig.name.substr(at + 5);
      std::printf("  MIG %-12s Device %2u: (UUID: %s)\n", profile.c_str(), m, mig.uuid.c_str());
    }
  }
  return 0;
}

const char* ModeName(unsigned mode) {
  switch (mode) {
    case NVML_COMPUTEMODE_DEFAULT: return "DEFAULT";
    case NVML_COMPUTEMODE_EXCLUSIVE_THREAD: return "EXCLUSIVE_THREAD";
    case NVML_COMPUTEMODE_PROHIBITED: return "PROHIBITED";
    case NVML_COMPUTEMODE_EXCLUSIVE_PROCESS: return "EXCLUSIVE_PROCESS";
  }
  return "UNKNOWN";
}

const char* QueryModeName(unsigned mode) {
  switch (mode) {
    case NVML_COMPUTEMODE_DEFAULT: return "Default";
    case NVML_COMPUTEMODE_PROHIBITED: return "Prohibited";
    case NVML_COMPUTEMODE_EXCLUSIVE_PROCESS: return "Exclusive_Process";
  }
  return "[Unknown Error]";
}

const char* SliceName(unsigned slice) {
  static const char* const kNames[] = {"DEFAULT", "SHORT", "MEDIUM", "LONG"};
  return slice < 4 ? kNames[slice] : "UNKNOWN";
}

int Unable(const char* what, const Device& d, nvmlReturn_t r) {
  std::printf("Unable to set %s for GPU %s: %s\nTerminating early due to previous errors.\n", what, d.bus_id.c_str(),
              ErrorText(r));
  return ExitFor(r);
}

int SetComputeMode(const std::string& ids, const std::string& value) {
  int mode = -1;
  if (value == "DEFAULT" || value == "0") mode = NVML_COMPUTEMODE_DEFAULT;
  if (value == "EXCLUSIVE_THREAD" || value == "1") mode = NVML_COMPUTEMODE_EXCLUSIVE_THREAD;
  if (value == "PROHIBITED" || value == "2") mode = NVML_COMPUTEMODE_PROHIBITED;
  if (value == "EXCLUSIVE_PROCESS" || value == "3") mode = NVML_COMPUTEMODE_EXCLUSIVE_PROCESS;
  if (mode < 0) return BadArgs();
  std::vector<Device> devices;
  if (int rc = Select(ids, &devices)) return rc;
  for (const Device& d : devices) {
    nvmlComputeMode_t current{};
    if (g_nvml.get_mode(d.handle, &current) == NVML_SUCCESS && static_cast<int>(current) == mode) {
      std::printf("Compute mode is already set to %s for GPU %s.\n", ModeName(mode), d.bus_id.c_str());
      continue;
    }
    if (nvmlReturn_t r = g_nvml.set_mode(d.handle, static_cast<nvmlComputeMode_t>(mode)); r != NVML_SUCCESS) {
      return Unable("compute mode", d, r);
    }
    std::printf("Set compute mode to %s for GPU %s.\n", ModeName(mode), d.bus_id.c_str());
  }
  std::printf("All done.\n");
  return 0;
}

int ComputePolicy(const std::vector<std::string>& args) {
  std::string ids, slice;
  bool list = false, have_slice = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if ((a == "-i" || a == "--id") && i + 1 < args.size()) {
      ids = args[++i];
    } else if (a.rfind("--id=", 0) == 0) {
      ids = a.substr(5);
    } else if (a == "-l" || a == "--list") {
      list = true;
    } else if (a == "--set-timeslice" && i + 1 < args.size()) {
      slice = args[++i];
      have_slice = true;
    } else if (a.rfind("--set-timeslice=", 0) == 0) {
      slice = a.substr(16);
      have_slice = true;
    } else if (a == "-h" || a == "--help") {
      std::printf(
          "\n    Compute Policy -- Control and list compute policies.\n\n    Usage: nvidia-smi compute-policy [options]\n\n"
          "    Options include:\n    [-i | --id]: GPU device ID's. Provide comma\n                 separated values for more "
          "than one device\n\n    [-l | --list]: List all compute policies\n\n    [ | --set-timeslice]: Set timeslice "
          "config for a GPU:\n                          0=DEFAULT, 1=SHORT, 2=MEDIUM, 3=LONG\n\n    [-h | --help]: "
          "Display help information\n\n");
      return 0;
    } else {
      return BadArgs();
    }
  }
  if (list == have_slice) return BadArgs();
  if (have_slice && (slice.size() != 1 || slice[0] < '0' || slice[0] > '3')) {
    std::fprintf(stderr, "Invalid timeslice value \"%s\": 0=DEFAULT, 1=SHORT, 2=MEDIUM, 3=LONG\n", slice.c_str());
    return BadArgs();
  }
  std::vector<Device> devices;
  if (int rc = Select(ids, &devices)) return rc;
  for (const Device& d : devices) {
    if (list) {
      unsigned current = 0;
      nvmlReturn_t r = g_nvml.get_slice != nullptr ? g_nvml.get_slice(d.handle, &current) : NVML_ERROR_NOT_SUPPORTED;
      if (r != NVML_SUCCESS) {
        std::printf("GPU %u (%s): Timeslice %s\n", d.index, d.uuid.c_str(), ErrorText(r));
      } else {
        std::printf("GPU %u (%s): Timeslice %u (%s)\n", d.index, d.uuid.c_str(), current, SliceName(current));
      }
      continue;
    }
    const unsigned n = static_cast<unsigned>(slice[0] - '0');
    nvmlReturn_t r = g_nvml.set_slice != nullptr ? g_nvml.set_slice(d.handle, n) : NVML_ERROR_NOT_SUPPORTED;
    if (r != NVML_SUCCESS) return Unable("timeslice", d, r);
    std::printf("Set timeslice to %u (%s) for GPU %s.\n", n, SliceName(n), d.bus_id.c_str());
  }
  if (!list) std::printf("All done.\n");
  return 0;
}

int Query(const std::string& ids, const std::string& fields, const std::string& format) {
  std::vector<std::string> names = Split(fields, ',');
  bool header = true;
  for (const std::string& f : Split(format, ',')) {
    if (f == "noheader") header = false;
    else if (f != "csv" && f != "nounits") return BadArgs();
  }
  for (const std::string& n : names) {
    if (n != "index" && n != "uuid" && n != "name" && n != "pci.bus_id" && n != "compute_mode") {
      std::fprintf(stderr, "Field \"%s\" is not a valid field to query.\n\n", n.c_str());
      return kExitBadArgs;
    }
  }
  std::vector<Device> devices;
  if (int rc = Select(ids, &devices)) return rc;
  if (header) {
    for (size_t i = 0; i < names.size(); ++i) std::printf("%s%s", i ? ", " : "", names[i].c_str());
    std::printf("\n");
  }
  for (const Device& d : devices) {
    for (size_t i = 0; i < names.size(); ++i) {
      std::string v;
      if (names[i] == "index") v = std::to_string(d.index);
      if (names[i] == "uuid") v = d.uuid;
      if (names[i] == "name") v = d.name;
      if (names[i] == "pci.bus_id") v = d.bus_id;
      if (names[i] == "compute_mode") {
        nvmlComputeMode_t m{};
        nvmlReturn_t r = g_nvml.get_mode(d.handle, &m);
        v = r == NVML_SUCCESS ? QueryModeName(m) : (r == NVML_ERROR_NOT_SUPPORTED ? "[N/A]" : "[Unknown Error]");
      }
      std::printf("%s%s", i ? ", " : "", v.c_str());
    }
    std::printf("\n");
  }
  return 0;
}

int Main(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    std::printf(
        "gpunode-sim-nvidia-smi: the simulated driver's nvidia-smi\n"
        "  -L, --list-gpus\n  [-i ID] -c, --compute-mode=DEFAULT|EXCLUSIVE_PROCESS|PROHIBITED|0|2|3\n"
        "  compute-policy [-i ID] --set-timeslice 0..3 | -l, --list\n"
        "  [-i ID] --query-gpu=index,uuid,name,pci.bus_id,compute_mode --format=csv[,noheader]\n");
    return args.empty() ? kExitBadArgs : 0;
  }
  const bool policy = args[0] == "compute-policy";
  std::string ids, mode, query, format;
  bool list = false, have_mode = false;
  if (!policy) {
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if ((a == "-i" || a == "--id") && i + 1 < args.size()) {
        ids = args[++i];
      } else if (a.rfind("--id=", 0) == 0) {
        ids = a.substr(5);
      } else if ((a == "-c" || a == "--compute-mode") && i + 1 < args.size()) {
        mode = args[++i];
        have_mode = true;
      } else if (a.rfind("--compute-mode=", 0) == 0) {
        mode = a.substr(15);
        have_mode = true;
      } else if (a == "-L" || a == "--list-gpus") {
        list = true;
      } else if (a.rfind("--query-gpu=", 0) == 0) {
        query = a.substr(12);
      } else if (a.rfind("--format=", 0) == 0) {
        format = a.substr(9);
      } else {
        return BadArgs();
      }
    }
    if (static_cast<int>(list) + static_cast<int>(have_mode) + static_cast<int>(!query.empty()) != 1) return BadArgs();
    if (!query.empty() && format.empty()) return BadArgs();
  }
  if (int rc = LoadNvml()) return rc;
  int rc = 0;
  if (policy) {
    rc = ComputePolicy(std::vector<std::string>(args.begin() + 1, args.end()));
  } else if (list) {
    rc = ListGpus();
  } else if (have_mode) {
    rc = SetComputeMode(ids, mode);
  } else {
    rc = Query(ids, query, format);
  }
  g_nvml.shutdown();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return Main(args);
}
