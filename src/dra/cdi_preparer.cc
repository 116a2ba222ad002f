#include "src/dra/k8s_names.h"
#include "src/dra/cdi_preparer.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/terminal.h"

namespace gpunode::dra {
namespace {

using json = nlohmann::json;

std::string Shown(absl::string_view s) {
  std::string cut(s.substr(0, 80));
  if (s.size() > 80) cut += "...";
  return absl::StrCat("\"", TerminalSafe(cut), "\"");
}

std::string ClaimWhat(const ClaimRef& c) { return absl::StrCat("ResourceClaim ", c.ns, "/", c.name); }

// The node service checks claims too; the preparer does not rely on it (names reach paths and URLs).
Status CheckRef(const ClaimRef& c) {
  if (!IsUid(c.uid)) return absl::InvalidArgumentError(absl::StrCat("claim UID ", Shown(c.uid), ": not a UID"));
  if (!IsDnsLabel(c.ns)) {
    return absl::InvalidArgumentError(absl::StrCat("claim ", c.uid, ": namespace ", Shown(c.ns), " is not a DNS label"));
  }
  if (!IsDnsSubdomain(c.name)) {
    return absl::InvalidArgumentError(absl::StrCat("claim ", c.uid, ": name ", Shown(c.name), " is not a DNS subdomain"));
  }
  return absl::OkStatus();
}

std::string ClaimApiPath(const ClaimRef& c) {
  return absl::StrCat("/apis/resource.k8s.io/v1/namespaces/", c.ns, "/resourceclaims/", c.name);
}

template <class T>
void Append(std::vector<T>& to, const std::vector<T>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

// Adds a sharing applier's edits to a device's.
void AddEdits(cdi::ContainerEdits& to, const cdi::ContainerEdits& from) {
  Append(to.env, from.env);
  Append(to.device_nodes, from.device_nodes);
  Append(to.net_devices, from.net_devices);
  Append(to.hooks, from.hooks);
  Append(to.mounts, from.mounts);
  Append(to.additional_gids, from.additional_gids);
  if (from.intel_rdt) to.intel_rdt = from.intel_rdt;
}

}  // namespace

std::string CdiVendor(absl::string_view driver) { return absl::StrCat("k8s.", driver); }

std::string ClaimSpecFileName(absl::string_view driver, absl::string_view claim_uid) {
  // CDI's GenerateTransientSpecName(vendor, class, uid) + ".yaml", as NVIDIA's driver writes it.
  return absl::StrCat(CdiVendor(driver), "-", kCdiClaimClass, "_", claim_uid, ".yaml");
}

std::string ClaimCdiDeviceId(absl::string_view driver, absl::string_view claim_uid, absl::string_view device) {
  return absl::StrCat(CdiVendor(driver), "/", kCdiClaimClass, "=", claim_uid, "-", device);
}

// What one Prepare call reads at most once.
struct CdiPreparer::Call {
  std::optional<std::vector<DraDevice>> devices;
  const container::BuildResult* spec = nullptr;
  bool changed = false;  // the checkpoint changed

  const DraDevice* Find(const CdiPreparerOptions& o, const std::string& name) {
    if (!devices) devices = o.devices();
    for (const DraDevice& d : *devices) {
      if (d.name == name) return &d;
    }
    return nullptr;
  }
  std::string Names() const {
    std::vector<std::string> names;
    if (devices) {
      for (const DraDevice& d : *devices) names.push_back(d.name);
    }
    return names.empty() ? std::string("none") : absl::StrJoin(names, ", ");
  }
};

StatusOr<std::unique_ptr<CdiPreparer>> CdiPreparer::Create(HostFs fs, CdiPreparerOptions options) {
  auto bad = [](absl::string_view why) { return absl::InvalidArgumentError(absl::StrCat("DRA claim preparer: ", why)); };
  if (options.driver_name.empty()) return bad("no driver name");
  if (options.node_name.empty()) return bad("no node name (the pool of this node's devices)");
  if (!options.devices || !options.inventory) return bad("no device or inventory source");
  if (options.client == nullptr) return bad("no Kubernetes client");
  if (options.cdi_root.empty() || options.cdi_root.front() != '/') {
    return bad(absl::StrCat("CDI root ", Shown(options.cdi_root), ": not an absolute path"));
  }
  if (options.checkpoint_path.empty() || options.checkpoint_path.front() != '/') {
    return bad(absl::StrCat("checkpoint ", Shown(options.checkpoint_path), ": not an absolute path"));
  }
  while (options.cdi_root.size() > 1 && options.cdi_root.back() == '/') options.cdi_root.pop_back();
  std::unique_ptr<CdiPreparer> p(new CdiPreparer(std::move(fs), std::move(options)));
  GPUNODE_ASSIGN_OR_RETURN(p->checkpoint_, LoadCheckpoint(p->fs_, p->options_.checkpoint_path));
  std::string boot;
  if (!p->options_.boot_id_path.empty()) {
    if (StatusOr<std::string> b = p->fs_.ReadLine(p->options_.boot_id_path); b.ok()) boot = *b;
  }
  Checkpoint& cp = p->checkpoint_;
  if (!cp.boot_id.empty() && !boot.empty() && cp.boot_id != boot) {
    // The node rebooted: the spec files (under /var/run) and any sharing set-up are gone, and the
    // kubelet prepares its claims again.
    p->start_notes_.push_back(absl::StrCat("the node rebooted since the checkpoint was written (boot ",
                                           Shown(cp.boot_id), ", now ", Shown(boot), "): its ", cp.claims.size(),
                                           " prepared claim(s) are forgotten"));
    for (const auto& [uid, claim] : cp.claims) {
      if (Status s = p->RemoveSpecFiles(uid, claim); !s.ok()) p->start_notes_.push_back(std::string(s.message()));
    }
    cp.claims.clear();
    cp.boot_id = boot;
    GPUNODE_RETURN_IF_ERROR(SaveCheckpoint(p->fs_, p->options_.checkpoint_path, cp));
  } else if (cp.boot_id.empty()) {
    cp.boot_id = boot;  // written with the next change
  }
  // What the checkpoint says was applied is applied again: an MPS daemon of the plugin's is gone
  // after its restart (a time slice, kept by the driver, is set to the same value).
  if (p->options_.sharing != nullptr) {
    for (const auto& [uid, claim] : cp.claims) {
      for (const SharingRecord& r : claim.sharing) {
        if (!r.applied) continue;
        if (StatusOr<cdi::ContainerEdits> e = p->options_.sharing->Apply(uid, r); !e.ok()) {
          p->start_notes_.push_back(absl::StrCat("claim ", uid, " (", claim.ns, "/", claim.name,
                                                 "): its sharing settings could not be applied again: ",
                                                 e.status().message()));
        } else {
          p->start_notes_.push_back(absl::StrCat("claim ", uid, " (", claim.ns, "/", claim.name, "): ",
                                                 r.config.sharing ? SharingStrategyName(r.config.sharing->strategy)
                                                                  : "sharing",
                                                 " settings applied again"));
        }
      }
    }
  }
  return p;
}

Checkpoint CdiPreparer::checkpoint() const {
  std::lock_guard<std::mutex> l(mu_);
  return checkpoint_;
}

std::string CdiPreparer::SpecPath(absl::string_view uid) const {
  return absl::StrCat(options_.cdi_root == "/" ? "" : options_.cdi_root, "/",
                      ClaimSpecFileName(options_.driver_name, uid));
}

Status CdiPreparer::RemoveSpecFiles(const std::string& uid, const PreparedClaim& claim) {
  // The recorded path is removed only when it has the name of this claim's spec (a CDI root
  // changed since keeps its file found; nothing else is ever removed).
  const std::string name = ClaimSpecFileName(options_.driver_name, uid);
  if (!claim.cdi_spec.empty() && absl::EndsWith(claim.cdi_spec, "/" + name)) {
    GPUNODE_RETURN_IF_ERROR(fs_.RemoveFile(claim.cdi_spec));
  }
  return fs_.RemoveFile(SpecPath(uid));
}

Status CdiPreparer::RevertSharing(const std::string& uid, const PreparedClaim& claim) {
  for (const SharingRecord& r : claim.sharing) {
    if (!r.applied) continue;
    if (options_.sharing == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "claim ", uid, ": its sharing settings were applied, and this gpunode has no sharing applier to undo them"));
    }
    GPUNODE_RETURN_IF_ERROR(Annotate(options_.sharing->Revert(uid, r), absl::StrCat("claim ", uid)));
  }
  return absl::OkStatus();
}

StatusOr<PrepareResults> CdiPreparer::Prepare(const std::vector<ClaimRef>& claims) {
  std::lock_guard<std::mutex> l(mu_);
  Call call;
  Checkpoint next = checkpoint_;
  std::vector<std::pair<std::string, PreparedClaim>> made;  // undone if the checkpoint cannot be written
  PrepareResults out;
  for (const ClaimRef& c : claims) out.emplace(c.uid, PrepareOne(c, call, next, made));
  if (call.changed) {
    if (Status s = SaveCheckpoint(fs_, options_.checkpoint_path, next); !s.ok()) {
      // Nothing this call made may stay behind unrecorded: the kubelet asks again.
      for (const auto& [uid, claim] : made) {
        (void)RemoveSpecFiles(uid, claim);
        (void)RevertSharing(uid, claim);
      }
      return s;
    }
  }
  checkpoint_ = std::move(next);
  return out;
}

StatusOr<std::vector<PreparedDevice>> CdiPreparer::PrepareOne(const ClaimRef& claim, Call& call, Checkpoint& next,
                                                              std::vector<std::pair<std::string, PreparedClaim>>& made) {
  GPUNODE_RETURN_IF_ERROR(CheckRef(claim));
  const std::string what = ClaimWhat(claim);
  if (auto it = next.claims.find(claim.uid); it != next.claims.end()) {
    const PreparedClaim& known = it->second;
    if (known.ns != claim.ns || known.name != claim.name) {
      return absl::FailedPreconditionError(absl::StrCat(what, ": its UID ", claim.uid, " was prepared as ResourceClaim ",
                                                        known.ns, "/", known.name));
    }
    if (known.cdi_spec.empty() || fs_.Exists(known.cdi_spec)) return known.devices;
    // Its spec file is gone (the CDI folder was emptied): prepared again from the claim.
    GPUNODE_RETURN_IF_ERROR(RevertSharing(claim.uid, known));
    next.claims.erase(it);
    call.changed = true;
  }
  kube::CallOptions get;
  get.timeout = options_.get_timeout;
  StatusOr<json> object = options_.client->Get(ClaimApiPath(claim), get);
  if (!object.ok()) return Annotate(object.status(), what);
  GPUNODE_ASSIGN_OR_RETURN(ClaimAllocation allocation, ReadClaimAllocation(*object, what, options_.driver_name));
  if (allocation.uid != claim.uid) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": metadata.uid is ", Shown(allocation.uid), " but the kubelet asked for UID ", Shown(claim.uid),
        " (the claim was deleted and created again under the same name?)"));
  }
  if (!allocation.allocated) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": not allocated yet (no status.allocation)"));
  }
  GPUNODE_ASSIGN_OR_RETURN(PreparedClaim prepared, Build(claim, allocation, call, next));
  next.claims[claim.uid] = prepared;
  call.changed = true;
  std::vector<PreparedDevice> devices = prepared.devices;
  made.emplace_back(claim.uid, std::move(prepared));
  return devices;
}

StatusOr<const container::BuildResult*> CdiPreparer::NodeSpec(Call& call) {
  if (call.spec != nullptr) return call.spec;
  StatusOr<std::shared_ptr<const node::NodeInventory>> inv = options_.inventory();
  if (!inv.ok()) return Annotate(inv.status(), "the node's inventory");
  if (*inv == nullptr) return absl::UnavailableError("the node's inventory: not probed yet");
  if (!spec_ || *inv != spec_inventory_) {
    StatusOr<container::DriverFiles> files = container::DiscoverDriverFiles(options_.node_fs ? *options_.node_fs : fs_, **inv, options_.discover);
    if (!files.ok()) return Annotate(files.status(), "the driver's files for the CDI spec");
    container::BuildOptions build;
    build.names = container::NameStrategy::kUuid;
    build.all_device = false;
    build.hook_path = options_.hook_path;
    build.disabled_hooks = options_.disabled_hooks;
    StatusOr<container::BuildResult> result = container::BuildSpec(**inv, *files, build);
    if (!result.ok()) return Annotate(result.status(), "the node's CDI edits");
    spec_ = std::move(*result);
    spec_inventory_ = *inv;
  }
  call.spec = &*spec_;
  return call.spec;
}

StatusOr<PreparedClaim> CdiPreparer::Build(const ClaimRef& claim, ClaimAllocation& allocation, Call& call,
                                           const Checkpoint& next) {
  const std::string& what = allocation.what;
  PreparedClaim out;
  out.ns = claim.ns;
  out.name = claim.name;
  // Each device: in this node's pool, a device of this node, not held by another claim.
  std::map<std::string, const DraDevice*> found;
  for (const AllocatedDevice& d : allocation.devices) {
    if (d.pool != options_.node_name) {
      return absl::FailedPreconditionError(absl::StrCat(what, ": ", d.path, ".pool: ", Shown(d.pool),
                                                        " is not this node's pool ", Shown(options_.node_name),
                                                        " (the claim is allocated on another node)"));
    }
    const DraDevice* dev = call.Find(options_, d.device);
    if (dev == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(what, ": ", d.path, ".device: ", Shown(d.device),
                                                        " is not a device of this node (it has: ", call.Names(), ")"));
    }
    found[d.device] = dev;
    if (d.admin_access || d.share_id) continue;
    for (const auto& [uid, other] : next.claims) {
      if (uid == claim.uid) continue;
      const auto& held = other.exclusive_devices;
      if (std::find(held.begin(), held.end(), d.device) != held.end()) {
        return absl::FailedPreconditionError(absl::StrCat(what, ": device ", d.device, " is already prepared for claim ",
                                                          uid, " (", other.ns, "/", other.name, ")"));
      }
    }
    if (std::find(out.exclusive_devices.begin(), out.exclusive_devices.end(), d.device) == out.exclusive_devices.end()) {
      out.exclusive_devices.push_back(d.device);
    }
  }
  GPUNODE_RETURN_IF_ERROR(
      AssignConfigs(allocation, [&](const std::string& name) { return found.count(name) ? found[name]->type : ""; }));
  for (const AllocatedDevice& d : allocation.devices) {
    PreparedDevice p;
    p.request_names = {d.request};
    p.pool_name = d.pool;
    p.device_name = d.device;
    p.cdi_device_ids = {ClaimCdiDeviceId(options_.driver_name, claim.uid, d.device)};
    p.share_id = d.share_id;
    out.devices.push_back(std::move(p));
  }
  if (allocation.devices.empty()) return out;  // no device of ours: no spec file

  // The sharing settings, one record per config that has them.
  std::map<int, SharingRecord> groups;
  for (const AllocatedDevice& d : allocation.devices) {
    if (d.config < 0 || !allocation.configs[d.config].config.sharing) continue;
    SharingRecord& r = groups[d.config];
    r.config = allocation.configs[d.config].config;
    if (std::find(r.devices.begin(), r.devices.end(), d.device) != r.devices.end()) continue;
    r.devices.push_back(d.device);
    r.uuids.push_back(found[d.device]->uuid);
  }
  for (auto& [index, r] : groups) {
    if (r.config.sharing->mps) {
      StatusOr<std::map<std::string, std::string>> limits = PinnedMemoryLimits(*r.config.sharing->mps, r.uuids);
      if (!limits.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": ", allocation.configs[index].path,
                                                       ".opaque.parameters.sharing.", limits.status().message()));
      }
      r.pinned_memory_limits = std::move(*limits);
    }
  }

  // The spec: each device's own edits, the node's common edits at spec level.
  GPUNODE_ASSIGN_OR_RETURN(const container::BuildResult* node, NodeSpec(call));
  cdi::Spec spec;
  spec.kind = absl::StrCat(CdiVendor(options_.driver_name), "/", kCdiClaimClass);
  spec.edits = node->spec.edits;
  std::map<std::string, size_t> index_of;  // device name -> spec.devices
  for (const AllocatedDevice& d : allocation.devices) {
    if (index_of.count(d.device)) continue;
    const DraDevice* dev = found[d.device];
    auto it = std::find_if(node->spec.devices.begin(), node->spec.devices.end(),
                           [&](const cdi::Device& n) { return n.name == dev->uuid; });
    if (it == node->spec.devices.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": device ", d.device, " (", dev->uuid, ") has no device node on this node",
          node->warnings.empty() ? "" : absl::StrCat(" (", absl::StrJoin(node->warnings, "; "), ")")));
    }
    index_of[d.device] = spec.devices.size();
    spec.devices.push_back({absl::StrCat(claim.uid, "-", d.device), {}, it->edits});
  }
  auto revert = [&](const std::vector<SharingRecord>& done) {
    PreparedClaim undo;
    undo.sharing = done;
    (void)RevertSharing(claim.uid, undo);
  };
  for (auto& [index, r] : groups) {
    if (options_.sharing != nullptr) {
      StatusOr<cdi::ContainerEdits> edits = options_.sharing->Apply(claim.uid, r);
      if (!edits.ok()) {
        revert(out.sharing);
        return Annotate(edits.status(), absl::StrCat(what, ": ", allocation.configs[index].path, ": sharing"));
      }
      r.applied = true;
      for (const std::string& name : r.devices) AddEdits(spec.devices[index_of[name]].edits, *edits);
    }
    out.sharing.push_back(r);
  }
  spec.cdi_version = cdi::MinimumVersion(spec).version;
  out.cdi_spec = SpecPath(claim.uid);
  Status written = cdi::ValidateSpec(spec, out.cdi_spec);
  if (written.ok()) written = fs_.MakeDirs(options_.cdi_root);
  if (written.ok()) {
    WriteOptions w;
    w.mode = 0644;
    w.keep_mode = false;
    // A transient spec (the CDI runtime folder, cleared at boot): renamed into place whole, but not
    // fsync'ed — after a crash the checkpoint (durable) still names the claim, and a prepare that
    // finds its spec missing writes it again.
    w.durable = false;
    written = fs_.WriteFileAtomically(out.cdi_spec, cdi::RenderSpecYaml(spec), w).status();
  }
  if (!written.ok()) {
    revert(out.sharing);
    return Annotate(written, absl::StrCat(what, ": write its CDI spec"));
  }
  return out;
}

StatusOr<UnprepareResults> CdiPreparer::Unprepare(const std::vector<ClaimRef>& claims) {
  std::lock_guard<std::mutex> l(mu_);
  Checkpoint next = checkpoint_;
  bool changed = false;
  UnprepareResults out;
  for (const ClaimRef& c : claims) {
    if (!IsUid(c.uid)) {
      out.emplace(c.uid, absl::InvalidArgumentError(absl::StrCat("claim UID ", Shown(c.uid), ": not a UID")));
      continue;
    }
    auto it = next.claims.find(c.uid);
    if (it == next.claims.end()) {
      // Not prepared here, or already unprepared: fine. A spec file a dead prepare left goes.
      out.emplace(c.uid, Annotate(fs_.RemoveFile(SpecPath(c.uid)), ClaimWhat(c)));
      continue;
    }
    Status s = RevertSharing(c.uid, it->second);
    if (s.ok()) s = RemoveSpecFiles(c.uid, it->second);
    if (s.ok()) {
      next.claims.erase(it);
      changed = true;
    }
    out.emplace(c.uid, Annotate(s, ClaimWhat(c)));
  }
  if (changed) GPUNODE_RETURN_IF_ERROR(SaveCheckpoint(fs_, options_.checkpoint_path, next));
  checkpoint_ = std::move(next);
  return out;
}

}  // namespace gpunode::dra
