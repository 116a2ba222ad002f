// Node profiles: one GPU of gpus: and its MIG devices (see profile_internal.h).
#include <algorithm>

#include "sim/support/profile_internal.h"

namespace gpunode::sim::profile_internal {

void ParseMig(Reader& r, const YAML::Node& n, const std::string& p, const Gpu& gpu, Mig* mig) {
  if (!r.Map(n, p, {"enabled", "pending", "max_devices", "devices"})) return;
  r.Bool(n, "enabled", p, &mig->enabled);
  mig->pending = mig->enabled;
  r.Bool(n, "pending", p, &mig->pending);
  r.Int(n, "max_devices", p, &mig->max_devices, 0, 8);
  if (r.Present(n, "devices", p, false)) {
    const YAML::Node list = n["devices"];
    if (!r.Seq(list, Join(p, "devices"), 8)) return;
    for (size_t i = 0; i < list.size() && r.ok(); ++i) {
      const YAML::Node d = list[i];
      const std::string dp = str::Cat(p, ".devices[", i, "]");
      if (!r.Map(d, dp,
                 {"profile", "uuid", "gpu_instance_id", "compute_instance_id", "slices",
                  "compute_slices", "memory_mib", "multiprocessors"}))
        return;
      MigDevice m;
      r.Str(d, "profile", dp, &m.profile, true);
      r.Int(d, "gpu_instance_id", dp, &m.gpu_instance_id, 0, 64, true);
      r.Int(d, "compute_instance_id", dp, &m.compute_instance_id, 0, 64);
      r.Int(d, "slices", dp, &m.slices, 1, 8, true);
      m.compute_slices = m.slices;
      r.Int(d, "compute_slices", dp, &m.compute_slices, 1, 8);
      r.Int(d, "memory_mib", dp, &m.memory_mib, 1, int64_t{1} << 30, true);
      r.Int(d, "multiprocessors", dp, &m.multiprocessors, 0, 1024);
      if (r.Str(d, "uuid", dp, &m.uuid) && !ValidUuid(m.uuid, "MIG")) {
        r.Fail(Join(dp, "uuid"), str::Cat("expected \"MIG-<hex>\", got ", Quote(m.uuid)));
      }
      if (m.uuid.empty()) m.uuid = GeneratedUuid("MIG", str::Cat(gpu.uuid, "/", i));
      mig->devices.push_back(m);
    }
  }
  if (!r.ok()) return;
  if (mig->enabled && mig->max_devices == 0) {
    r.Fail(Join(p, "max_devices"), "MIG is enabled but max_devices is 0 (not MIG-capable)");
  } else if (mig->devices.size() > mig->max_devices) {
    r.Fail(Join(p, "devices"), str::Cat("more devices than max_devices (", mig->max_devices, ")"));
  } else if (!mig->enabled && !mig->devices.empty()) {
    r.Fail(Join(p, "devices"), "MIG devices are listed but MIG is not enabled");
  }
}

namespace {

// name, uuid, PCI ids, minor, vbios.
void ParseGpuIdentity(Reader& r, const YAML::Node& n, const std::string& p, size_t index,
                      const std::string& profile_name, Gpu* g) {
  r.Str(n, "name", p, &g->name, true);
  if (r.Str(n, "uuid", p, &g->uuid) && !ValidUuid(g->uuid, "GPU")) {
    r.Fail(Join(p, "uuid"), str::Cat("expected \"GPU-<hex>\", got ", Quote(g->uuid)));
  }
  if (g->uuid.empty()) g->uuid = GeneratedUuid("GPU", str::Cat(profile_name, "/", index));
  r.BusId(n, "bus_id", p, &g->bus_id, true);
  r.Int(n, "device_id", p, &g->device_id, 0, 0xffff, true);
  r.Int(n, "subsystem_id", p, &g->subsystem_id, 0, 0xffffffffll);
  g->minor = static_cast<unsigned>(index);
  r.Int(n, "minor", p, &g->minor, 0, 254);
  r.Str(n, "vbios", p, &g->vbios);
}

// memory, persistence, ECC, retired pages, remapped rows.
void ParseGpuMemory(Reader& r, const YAML::Node& n, const std::string& p, Gpu* g) {
  if (r.Present(n, "memory", p, true)) {
    const YAML::Node m = n["memory"];
    const std::string mp = Join(p, "memory");
    if (r.Map(m, mp, {"total_mib", "used_mib", "reserved_mib"})) {
      r.Int(m, "total_mib", mp, &g->memory_total_mib, 1, int64_t{1} << 30, true);
      r.Int(m, "used_mib", mp, &g->memory_used_mib, 0, int64_t{1} << 30);
      r.Int(m, "reserved_mib", mp, &g->memory_reserved_mib, 0, int64_t{1} << 30);
      if (r.ok() && g->memory_used_mib + g->memory_reserved_mib > g->memory_total_mib) {
        r.Fail(mp, "used_mib + reserved_mib exceeds total_mib");
      }
    }
  }
  r.Bool(n, "persistence", p, &g->persistence);
  if (r.Present(n, "ecc", p, false)) {
    const YAML::Node e = n["ecc"];
    const std::string ep = Join(p, "ecc");
    if (r.Map(e, ep,
              {"enabled", "pending", "corrected_volatile", "uncorrected_volatile",
               "corrected_aggregate", "uncorrected_aggregate"})) {
      r.Bool(e, "enabled", ep, &g->ecc.enabled);
      g->ecc.pending = g->ecc.enabled;
      r.Bool(e, "pending", ep, &g->ecc.pending);
      constexpr int64_t kMax = int64_t{1} << 53;
      r.Int(e, "corrected_volatile", ep, &g->ecc.corrected_volatile, 0, kMax);
      r.Int(e, "uncorrected_volatile", ep, &g->ecc.uncorrected_volatile, 0, kMax);
      r.Int(e, "corrected_aggregate", ep, &g->ecc.corrected_aggregate, 0, kMax);
      r.Int(e, "uncorrected_aggregate", ep, &g->ecc.uncorrected_aggregate, 0, kMax);
    }
  }
  r.Bool(n, "retired_pages_pending", p, &g->retired_pages_pending);
  if (r.Present(n, "remapped_rows", p, false)) {
    const YAML::Node e = n["remapped_rows"];
    const std::string ep = Join(p, "remapped_rows");
    if (r.Map(e, ep, {"correctable", "uncorrectable", "pending", "failure"})) {
      r.Int(e, "correctable", ep, &g->remapped_rows.correctable, 0, 1 << 20);
      r.Int(e, "uncorrectable", ep, &g->remapped_rows.uncorrectable, 0, 1 << 20);
      r.Bool(e, "pending", ep, &g->remapped_rows.pending);
      r.Bool(e, "failure", ep, &g->remapped_rows.failure);
    }
  }
}

// the PCIe link, NUMA node, switch, compute capability, SMs.
void ParseGpuPlacement(Reader& r, const YAML::Node& n, const std::string& p, int numa_nodes, Gpu* g) {
  if (r.Present(n, "pcie", p, true)) {
    const YAML::Node e = n["pcie"];
    const std::string ep = Join(p, "pcie");
    if (r.Map(e, ep, {"gen", "width", "max_gen", "max_width", "gpu_max_gen"})) {
      PcieLink& l = g->pcie;
      r.Int(e, "gen", ep, &l.gen, 1, 6, true);
      r.Int(e, "width", ep, &l.width, 1, 32, true);
      l.max_gen = l.gen;
      l.max_width = l.width;
      r.Int(e, "max_gen", ep, &l.max_gen, 1, 6);
      r.Int(e, "max_width", ep, &l.max_width, 1, 32);
      l.gpu_max_gen = l.max_gen;
      r.Int(e, "gpu_max_gen", ep, &l.gpu_max_gen, 1, 6);
      for (auto [key, w] :
           {std::pair<const char*, unsigned>{"width", l.width}, {"max_width", l.max_width}}) {
        if (r.ok() && w != 1 && w != 2 && w != 4 && w != 8 && w != 16 && w != 32) {
          r.Fail(Join(ep, key), str::Cat("expected a link width 1, 2, 4, 8, 16 or 32, got ", w));
        }
      }
      if (r.ok() && (l.gen > l.max_gen || l.width > l.max_width)) {
        r.Fail(ep, "the current link is faster than max_gen/max_width");
      }
    }
  }
  if (r.Int(n, "numa_node", p, &g->numa_node, -1, 63) && g->numa_node >= numa_nodes) {
    r.Fail(Join(p, "numa_node"),
           str::Cat("the host has ", numa_nodes, " NUMA node(s) (host.numa_nodes)"));
  }
  r.Str(n, "pcie_switch", p, &g->pcie_switch);
  std::string cc;
  if (r.Str(n, "compute_capability", p, &cc, true)) {
    auto v = Version::Parse(cc);
    if (!v.ok() || v->parts().size() != 2 || v->major() > 20 || v->minor() > 9) {
      r.Fail(Join(p, "compute_capability"),
             str::Cat("expected \"<major>.<minor>\" like \"9.0\", got ", Quote(cc)));
    } else {
      g->cc_major = static_cast<int>(v->major());
      g->cc_minor = static_cast<int>(v->minor());
    }
  }
  r.Int(n, "multiprocessors", p, &g->multiprocessors, 0, 1024);
}

// temperatures, power, energy, clocks, utilization, NVLink throughput, GPM.
void ParseGpuTelemetry(Reader& r, const YAML::Node& n, const std::string& p, Gpu* g) {
  r.Int(n, "temperature_c", p, &g->temperature_c, 0, 200);
  if (r.Present(n, "power", p, false)) {
    const YAML::Node e = n["power"];
    const std::string ep = Join(p, "power");
    if (r.Map(e, ep, {"usage_w", "limit_w", "enforced_limit_w"})) {
      r.Double(e, "usage_w", ep, &g->power_usage_w, 0, 5000);
      r.Double(e, "limit_w", ep, &g->power_limit_w, 0, 5000);
      g->power_enforced_limit_w = g->power_limit_w;
      r.Double(e, "enforced_limit_w", ep, &g->power_enforced_limit_w, 0, 5000);
    }
  }
  r.Int(n, "energy_mj", p, &g->energy_mj, 0, int64_t{1} << 62);
  if (r.Present(n, "clocks", p, false)) {
    const YAML::Node e = n["clocks"];
    const std::string ep = Join(p, "clocks");
    if (r.Map(e, ep, {"sm_mhz", "mem_mhz", "graphics_mhz", "video_mhz"})) {
      r.Int(e, "sm_mhz", ep, &g->clock_sm_mhz, 0, 10000);
      g->clock_graphics_mhz = g->clock_sm_mhz;
      r.Int(e, "mem_mhz", ep, &g->clock_mem_mhz, 0, 20000);
      r.Int(e, "graphics_mhz", ep, &g->clock_graphics_mhz, 0, 10000);
      r.Int(e, "video_mhz", ep, &g->clock_video_mhz, 0, 10000);
    }
  }
  if (r.Present(n, "utilization", p, false)) {
    const YAML::Node e = n["utilization"];
    const std::string ep = Join(p, "utilization");
    if (r.Map(e, ep, {"gpu", "memory"})) {
      r.Int(e, "gpu", ep, &g->utilization_gpu, 0, 100);
      r.Int(e, "memory", ep, &g->utilization_memory, 0, 100);
    }
  }
  unsigned u = 0;
  if (r.Int(n, "memory_temp_c", p, &u, 0, 200)) g->memory_temp_c = u;
  if (r.Int(n, "pcie_replay_count", p, &u, 0, 0xffffffffll)) g->pcie_replay_count = u;
  if (r.Int(n, "encoder_util", p, &u, 0, 100)) g->encoder_util = u;
  if (r.Int(n, "decoder_util", p, &u, 0, 100)) g->decoder_util = u;
  if (r.Present(n, "nvlink_throughput_kib", p, false)) {
    const YAML::Node e = n["nvlink_throughput_kib"];
    const std::string ep = Join(p, "nvlink_throughput_kib");
    if (r.Map(e, ep, {"tx", "rx"})) {
      NvLinkThroughput t;
      constexpr int64_t kMax = int64_t{1} << 62;
      r.Int(e, "tx", ep, &t.tx_kib, 0, kMax, true);
      r.Int(e, "rx", ep, &t.rx_kib, 0, kMax, true);
      g->nvlink_throughput_kib = t;
    }
  }
  if (r.Present(n, "gpm", p, false)) {
    const YAML::Node e = n["gpm"];
    const std::string ep = Join(p, "gpm");
    if (r.Map(e, ep,
              {"supported", "graphics_util", "sm_util", "sm_occupancy", "tensor_util",
               "dram_bw_util", "fp64_util", "fp32_util", "fp16_util", "pcie_tx_mib_s",
               "pcie_rx_mib_s"})) {
      Gpm gpm;
      r.Bool(e, "supported", ep, &gpm.supported);
      for (const auto& m : kGpmMetricNames) {
        double v = 0;
        if (r.Double(e, m.name, ep, &v, 0, m.max)) gpm.metrics[m.id] = v;
      }
      g->gpm = gpm;
    }
  }
}

// MIG, NVLinks, processes, events, unsupported calls, lost / on the bus.
void ParseGpuLists(Reader& r, const YAML::Node& n, const std::string& p, Gpu* g) {
  if (r.Present(n, "mig", p, false)) ParseMig(r, n["mig"], Join(p, "mig"), *g, &g->mig);
  if (r.Present(n, "nvlinks", p, false)) {
    const YAML::Node list = n["nvlinks"];
    const std::string lp = Join(p, "nvlinks");
    if (r.Seq(list, lp, NVML_NVLINK_MAX_LINKS)) {
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        const YAML::Node e = list[i];
        const std::string ep = str::Cat(lp, "[", i, "]");
        if (!r.Map(e, ep, {"link", "active", "remote_bus_id"})) break;
        NvLink l;
        l.link = static_cast<unsigned>(i);
        r.Int(e, "link", ep, &l.link, 0, NVML_NVLINK_MAX_LINKS - 1);
        r.Bool(e, "active", ep, &l.active);
        r.BusId(e, "remote_bus_id", ep, &l.remote_bus_id, false);
        for (const NvLink& other : g->nvlinks) {
          if (r.ok() && other.link == l.link)
            r.Fail(Join(ep, "link"), str::Cat("link ", l.link, " is listed twice"));
        }
        g->nvlinks.push_back(l);
      }
    }
  }
  if (r.Present(n, "processes", p, false)) {
    const YAML::Node list = n["processes"];
    const std::string lp = Join(p, "processes");
    if (r.Seq(list, lp)) {
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        const YAML::Node e = list[i];
        const std::string ep = str::Cat(lp, "[", i, "]");
        if (!r.Map(e, ep, {"pid", "used_mib", "gpu_instance_id", "compute_instance_id"})) break;
        Process pr;
        r.Int(e, "pid", ep, &pr.pid, 1, 0x7fffffff, true);
        r.Int(e, "used_mib", ep, &pr.used_mib, 0, int64_t{1} << 30);
        unsigned id = 0;
        if (r.Int(e, "gpu_instance_id", ep, &id, 0, 64)) pr.gpu_instance_id = id;
        if (r.Int(e, "compute_instance_id", ep, &id, 0, 64)) pr.compute_instance_id = id;
        g->processes.push_back(pr);
      }
    }
  }
  r.Bool(n, "lost", p, &g->lost);
  if (r.Present(n, "events", p, false)) {
    const YAML::Node list = n["events"];
    const std::string lp = Join(p, "events");
    if (r.Seq(list, lp)) {
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        const YAML::Node e = list[i];
        const std::string ep = str::Cat(lp, "[", i, "]");
        if (!r.Map(e, ep, {"type", "xid", "data", "gpu_instance_id", "compute_instance_id"})) break;
        Event ev;
        size_t type = 0;
        if (r.Present(e, "type", ep, true) && r.Enum(e, "type", ep, Names(kEventNames), &type)) {
          ev.type = kEventNames[type].type;
        }
        bool has_xid = r.Int(e, "xid", ep, &ev.data, 0, 0xffffffffll);
        r.Int(e, "data", ep, &ev.data, 0, 0x7fffffffffffffffll);
        if (r.ok() && ev.type == EventType::kXid && !has_xid)
          r.Fail(Join(ep, "xid"), "required for type xid");
        if (r.ok() && ev.type != EventType::kXid && has_xid)
          r.Fail(Join(ep, "xid"), "only allowed for type xid");
        unsigned id = 0;
        if (r.Int(e, "gpu_instance_id", ep, &id, 0, 64)) ev.gpu_instance_id = id;
        if (r.Int(e, "compute_instance_id", ep, &id, 0, 64)) ev.compute_instance_id = id;
        g->events.push_back(ev);
      }
    }
  }
  if (r.Present(n, "unsupported", p, false)) {
    const YAML::Node list = n["unsupported"];
    const std::string lp = Join(p, "unsupported");
    if (r.Seq(list, lp, 64)) {
      const auto& names = UnsupportedFieldNames();
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        const YAML::Node e = list[i];
        if (!e.IsScalar() || std::find(names.begin(), names.end(), e.Scalar()) == names.end()) {
          r.Fail(str::Cat(lp, "[", i, "]"),
                 str::Cat("expected one of ", str::Join(names, ", "), ", got ", Describe(e)));
          break;
        }
        g->unsupported.insert(e.Scalar());
      }
    }
  }
  r.Bool(n, "on_pci_bus", p, &g->on_pci_bus);
}

}  // namespace

void ParseGpu(Reader& r, const YAML::Node& n, const std::string& p, size_t index,
              const std::string& profile_name, int numa_nodes, Gpu* g) {
  if (!r.Map(n, p,
             {"name",
              "uuid",
              "bus_id",
              "device_id",
              "subsystem_id",
              "minor",
              "vbios",
              "memory",
              "persistence",
              "ecc",
              "retired_pages_pending",
              "remapped_rows",
              "pcie",
              "numa_node",
              "pcie_switch",
              "compute_capability",
              "multiprocessors",
              "temperature_c",
              "power",
              "energy_mj",
              "clocks",
              "utilization",
              "memory_temp_c",
              "pcie_replay_count",
              "encoder_util",
              "decoder_util",
              "nvlink_throughput_kib",
              "gpm",
              "mig",
              "nvlinks",
              "processes",
              "lost",
              "events",
              "unsupported",
              "on_pci_bus"}))
    return;
  ParseGpuIdentity(r, n, p, index, profile_name, g);
  ParseGpuMemory(r, n, p, g);
  ParseGpuPlacement(r, n, p, numa_nodes, g);
  ParseGpuTelemetry(r, n, p, g);
  ParseGpuLists(r, n, p, g);
}

}  // namespace gpunode::sim::profile_internal
