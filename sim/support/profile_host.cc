// Node profiles: the document, host: and driver: (see profile_internal.h).
#include <cctype>
#include <set>

#include "sim/support/profile_internal.h"

namespace gpunode::sim::profile_internal {

void ParseHost(Reader& r, const YAML::Node& n, Host* host) {
  const std::string p = "host";
  if (!r.Map(n, p,
             {"hostname", "kernel_release", "numa_nodes", "module", "nouveau_loaded",
              "cuda_toolkit", "pci_devices", "files", "empty_files", "nvidia_utils"}))
    return;
  r.Bool(n, "nvidia_utils", p, &host->nvidia_utils);
  r.Str(n, "hostname", p, &host->hostname);
  r.Str(n, "kernel_release", p, &host->kernel_release);
  r.Int(n, "numa_nodes", p, &host->numa_nodes, 1, 64);
  r.Bool(n, "nouveau_loaded", p, &host->nouveau_loaded);
  if (r.Present(n, "module", p, false)) {
    const YAML::Node m = n["module"];
    const std::string mp = "host.module";
    if (r.Map(m, mp, {"loaded", "flavor", "version"})) {
      r.Bool(m, "loaded", mp, &host->module.loaded);
      size_t flavor = 0;
      if (r.Enum(m, "flavor", mp, {"open", "proprietary"}, &flavor)) {
        host->module.flavor = flavor == 0 ? ModuleFlavor::kOpen : ModuleFlavor::kProprietary;
      }
      r.VersionStr(m, "version", mp, &host->module.version, false);
    }
  }
  if (r.Present(n, "cuda_toolkit", p, false)) {
    const YAML::Node t = n["cuda_toolkit"];
    const std::string tp = "host.cuda_toolkit";
    if (r.Map(t, tp, {"version", "nvcc_version"})) {
      CudaToolkit tk;
      r.VersionStr(t, "version", tp, &tk.version, true);
      r.VersionStr(t, "nvcc_version", tp, &tk.nvcc_version, false);
      if (tk.nvcc_version.empty() && r.ok()) {
        Version v = Version::Parse(tk.version).value();
        tk.nvcc_version = str::Cat(v.major(), ".", v.minor(), ".", 131);
      }
      host->cuda_toolkit = tk;
    }
  }
  if (r.Present(n, "pci_devices", p, false)) {
    const YAML::Node list = n["pci_devices"];
    if (r.Seq(list, "host.pci_devices", 256)) {
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        const YAML::Node d = list[i];
        const std::string dp = str::Cat("host.pci_devices[", i, "]");
        if (!r.Map(d, dp, {"bus_id", "vendor", "device", "class", "numa_node", "driver", "name"}))
          break;
        PciFunction f;
        r.BusId(d, "bus_id", dp, &f.bus_id, true);
        r.Int(d, "vendor", dp, &f.vendor, 0, 0xffff);
        r.Int(d, "device", dp, &f.device, 0, 0xffff, true);
        r.Int(d, "class", dp, &f.class_code, 0, 0xffffff, true);
        r.Int(d, "numa_node", dp, &f.numa_node, -1, 63);
        r.Str(d, "driver", dp, &f.driver);
        r.Str(d, "name", dp, &f.name);
        host->pci_devices.push_back(f);
      }
    }
  }
  // host.files: see ParseHostFiles.
  if (r.Present(n, "empty_files", p, false)) {
    const YAML::Node list = n["empty_files"];
    if (r.Seq(list, "host.empty_files", 1024)) {
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        const std::string ep = str::Cat("host.empty_files[", i, "]");
        if (!list[i].IsScalar() || list[i].Scalar().empty() || list[i].Scalar()[0] != '/') {
          r.Fail(ep, str::Cat("expected an absolute path, got ", Describe(list[i])));
          break;
        }
        host->empty_files.push_back(list[i].Scalar());
      }
    }
  }
}

// host.files is a free-form mapping of absolute paths to contents.
void ParseHostFiles(Reader& r, const YAML::Node& host, Host* out) {
  if (!r.ok() || !host.IsMap() || !host["files"].IsDefined()) return;
  const YAML::Node files = host["files"];
  if (!files.IsMap()) {
    r.Fail("host.files",
           str::Cat("expected a map of paths to contents, got ", Describe(files)));
    return;
  }
  if (files.size() > 1024) {
    r.Fail("host.files", "at most 1024 files are allowed");
    return;
  }
  for (auto it = files.begin(); it != files.end(); ++it) {
    if (!it->first.IsScalar() || it->first.Scalar().empty() || it->first.Scalar()[0] != '/') {
      r.Fail("host.files", str::Cat("keys must be absolute paths, got ", Describe(it->first)));
      return;
    }
    const std::string fp = str::Cat("host.files.", it->first.Scalar());
    if (!it->second.IsScalar()) {
      r.Fail(fp, str::Cat("expected the file content as a string, got ", Describe(it->second)));
      return;
    }
    out->files[it->first.Scalar()] = it->second.Scalar();
  }
}

void ParseDriver(Reader& r, const YAML::Node& n, Driver* d) {
  const std::string p = "driver";
  if (!r.Map(n, p, {"version", "nvml_version", "cuda_version", "init_error", "cuda_init_error"}))
    return;
  r.VersionStr(n, "version", p, &d->version, true);
  r.VersionStr(n, "nvml_version", p, &d->nvml_version, false);
  r.VersionStr(n, "cuda_version", p, &d->cuda_version, true);
  if (r.Present(n, "init_error", p, false)) {
    std::string s;
    if (r.Str(n, "init_error", p, &s)) {
      auto code = NvmlReturnFromName(s);
      if (!code) {
        r.Fail("driver.init_error",
               str::Cat("expected an NVML return code name (", str::Join(Names(kReturnNames), ", "),
                        "), got ", Quote(s)));
      } else {
        d->init_error = *code;
      }
    }
  }
  if (r.Present(n, "cuda_init_error", p, false)) {
    const YAML::Node c = n["cuda_init_error"];
    int64_t v = 0;
    if (c.IsScalar() && ParseInteger(c.Scalar(), &v) && v >= 0 && v <= 999) {
      d->cuda_init_error = static_cast<int>(v);
    } else {
      std::string s = c.IsScalar() ? Upper(c.Scalar()) : "";
      if (s.rfind("CUDA_ERROR_", 0) == 0) s = s.substr(11);
      if (s == "CUDA_SUCCESS") s = "SUCCESS";
      bool found = false;
      for (const auto& e : kCudaInitNames) {
        if (e.name == s) {
          d->cuda_init_error = e.code;
          found = true;
        }
      }
      if (!found) {
        r.Fail("driver.cuda_init_error",
               str::Cat("expected a CUresult 0-999 or one of ",
                        str::Join(Names(kCudaInitNames), ", "), ", got ", Describe(c)));
      }
    }
  }
  if (r.ok() && d->nvml_version.empty()) {
    d->nvml_version = str::Cat(Version::Parse(d->cuda_version).value().major(), ".", d->version);
  }
}

StatusOr<NodeProfile> ParseTree(const YAML::Node& root, std::string_view origin) {
  Reader r(origin);
  NodeProfile profile;
  if (!root.IsMap()) {
    r.Expected(root, "", "a map at the top level");
    return r.status();
  }
  if (!r.Map(root, "",
             {"apiVersion", "kind", "name", "description", "host", "driver", "gpu_defaults", "gpus",
              "topology"}))
    return r.status();
  std::string api, kind;
  if (r.Str(root, "apiVersion", "", &api, true) && api != kProfileApiVersion) {
    r.Fail("apiVersion", str::Cat("expected \"", kProfileApiVersion, "\", got ", Quote(api)));
  }
  if (r.Str(root, "kind", "", &kind, true) && kind != kProfileKind) {
    r.Fail("kind", str::Cat("expected \"", kProfileKind, "\", got ", Quote(kind)));
  }
  if (r.Str(root, "name", "", &profile.name, true)) {
    bool good = !profile.name.empty() && profile.name.size() <= 63;
    for (char c : profile.name) {
      good =
          good && (std::islower(static_cast<unsigned char>(c)) ||
                   std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
    }
    if (!good)
      r.Fail("name", str::Cat("expected lower-case letters, digits, '-', '_' or '.', got ",
                              Quote(profile.name)));
  }
  r.Str(root, "description", "", &profile.description);
  if (r.Present(root, "host", "", false)) {
    ParseHost(r, root["host"], &profile.host);
    ParseHostFiles(r, root["host"], &profile.host);
  }
  if (r.Present(root, "driver", "", true)) ParseDriver(r, root["driver"], &profile.driver);
  if (profile.host.module.version.empty()) profile.host.module.version = profile.driver.version;

  YAML::Node defaults;
  if (r.Present(root, "gpu_defaults", "", false)) {
    defaults = root["gpu_defaults"];
    if (!defaults.IsMap())
      r.Expected(defaults, "gpu_defaults", "a map");
  }
  if (r.Present(root, "gpus", "", true)) {
    const YAML::Node list = root["gpus"];
    if (r.Seq(list, "gpus", kMaxGpus)) {
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        const std::string gp = str::Cat("gpus[", i, "]");
        YAML::Node item = list[i];
        if (defaults.IsMap() && item.IsMap()) item = Merge(defaults, item);
        Gpu g;
        ParseGpu(r, item, gp, i, profile.name, profile.host.numa_nodes, &g);
        profile.gpus.push_back(std::move(g));
      }
    }
  }
  // Cross-checks.
  std::set<std::string> bus_ids, uuids;
  std::set<unsigned> minors;
  for (size_t i = 0; i < profile.gpus.size() && r.ok(); ++i) {
    const Gpu& g = profile.gpus[i];
    const std::string gp = str::Cat("gpus[", i, "]");
    if (!bus_ids.insert(g.bus_id).second)
      r.Fail(Join(gp, "bus_id"), str::Cat("duplicate bus id ", g.bus_id));
    if (r.ok() && !uuids.insert(g.uuid).second)
      r.Fail(Join(gp, "uuid"), str::Cat("duplicate uuid ", g.uuid));
    if (r.ok() && !minors.insert(g.minor).second)
      r.Fail(Join(gp, "minor"), str::Cat("duplicate minor ", g.minor));
    for (size_t j = 0; j < g.mig.devices.size() && r.ok(); ++j) {
      if (!uuids.insert(g.mig.devices[j].uuid).second) {
        r.Fail(str::Cat(gp, ".mig.devices[", j, "].uuid"), "duplicate uuid");
      }
    }
  }
  for (size_t i = 0; i < profile.host.pci_devices.size() && r.ok(); ++i) {
    const PciFunction& f = profile.host.pci_devices[i];
    if (!bus_ids.insert(f.bus_id).second) {
      r.Fail(str::Cat("host.pci_devices[", i, "].bus_id"), str::Cat("duplicate bus id ", f.bus_id));
    }
    if (r.ok() && f.numa_node >= profile.host.numa_nodes) {
      r.Fail(str::Cat("host.pci_devices[", i, "].numa_node"), "beyond host.numa_nodes");
    }
  }
  if (r.Present(root, "topology", "", false)) {
    const YAML::Node list = root["topology"];
    if (r.Seq(list, "topology")) {
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        const std::string tp = str::Cat("topology[", i, "]");
        if (!r.Map(list[i], tp, {"a", "b", "level"})) break;
        TopologyOverride t;
        const int64_t last = static_cast<int64_t>(profile.gpus.size()) - 1;
        r.Int(list[i], "a", tp, &t.a, 0, last, true);
        r.Int(list[i], "b", tp, &t.b, 0, last, true);
        size_t level = 0;
        if (r.Present(list[i], "level", tp, true) &&
            r.Enum(list[i], "level", tp, Names(kTopologyNames), &level)) {
          t.level = kTopologyNames[level].level;
        }
        profile.topology.push_back(t);
      }
    }
  }
  if (!r.ok()) return r.status();
  return profile;
}

}  // namespace gpunode::sim::profile_internal
