#include "src/dra/checkpoint.h"

#include <cinttypes>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "src/base/json.h"
#include "src/kube/json_fields.h"

namespace gpunode::dra {
namespace {

using json = nlohmann::json;

std::string Checksum(const std::string& data) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[40];
  std::snprintf(buf, sizeof(buf), "fnv1a64:%016" PRIx64, h);
  return buf;
}

json DeviceToJson(const PreparedDevice& d) {
  json out = {{"requests", d.request_names},
              {"pool", d.pool_name},
              {"device", d.device_name},
              {"cdiDeviceIds", d.cdi_device_ids}};
  if (d.share_id) out["shareId"] = *d.share_id;
  return out;
}

json SharingToJson(const SharingRecord& s) {
  return {{"devices", s.devices},
          {"uuids", s.uuids},
          {"config", DeviceConfigToJson(s.config)},
          {"pinnedMemoryLimits", s.pinned_memory_limits},
          {"applied", s.applied}};
}

json DataToJson(const Checkpoint& c) {
  json claims = json::object();
  for (const auto& [uid, claim] : c.claims) {
    json devices = json::array();
    for (const PreparedDevice& d : claim.devices) devices.push_back(DeviceToJson(d));
    json sharing = json::array();
    for (const SharingRecord& s : claim.sharing) sharing.push_back(SharingToJson(s));
    claims[uid] = {{"namespace", claim.ns},
                   {"name", claim.name},
                   {"cdiSpec", claim.cdi_spec},
                   {"devices", std::move(devices)},
                   {"sharing", std::move(sharing)},
                   {"exclusiveDevices", claim.exclusive_devices}};
  }
  return {{"bootId", c.boot_id}, {"claims", std::move(claims)}};
}

StatusOr<std::vector<std::string>> Strings(const kube::Fields& parent, absl::string_view key) {
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields list, parent.Array(key));
  std::vector<std::string> out;
  for (const kube::Fields& e : list.Elements()) {
    if (!e.json().is_string()) return e.Error(absl::StrCat("expected a string, got ", kube::JsonTypeName(e.json())));
    out.push_back(e.json().get<std::string>());
  }
  return out;
}

StatusOr<PreparedDevice> ParseDevice(const kube::Fields& f) {
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields d, f.AsObject());
  PreparedDevice out;
  GPUNODE_ASSIGN_OR_RETURN(out.request_names, Strings(d, "requests"));
  GPUNODE_ASSIGN_OR_RETURN(out.pool_name, d.String("pool"));
  GPUNODE_ASSIGN_OR_RETURN(out.device_name, d.String("device"));
  GPUNODE_ASSIGN_OR_RETURN(out.cdi_device_ids, Strings(d, "cdiDeviceIds"));
  if (d.json().contains("shareId")) {
    GPUNODE_ASSIGN_OR_RETURN(std::string share, d.String("shareId"));
    out.share_id = share;
  }
  if (out.pool_name.empty() || out.device_name.empty()) return d.Error("a device without pool or name");
  return out;
}

StatusOr<SharingRecord> ParseSharing(const kube::Fields& f) {
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields s, f.AsObject());
  SharingRecord out;
  GPUNODE_ASSIGN_OR_RETURN(out.devices, Strings(s, "devices"));
  GPUNODE_ASSIGN_OR_RETURN(out.uuids, Strings(s, "uuids"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields config, s.Object("config"));
  if (!config.present()) return s.Error("config: required");
  GPUNODE_ASSIGN_OR_RETURN(out.config, ParseDeviceConfig(config.json(), config.what(), config.path()));
  if (!out.config.sharing) return config.Error("a config without sharing");
  GPUNODE_ASSIGN_OR_RETURN(out.pinned_memory_limits, s.StringMap("pinnedMemoryLimits"));
  GPUNODE_ASSIGN_OR_RETURN(out.applied, s.Bool("applied"));
  if (out.devices.size() != out.uuids.size()) return s.Error("devices and uuids differ in length");
  return out;
}

StatusOr<PreparedClaim> ParseClaim(const kube::Fields& c) {
  PreparedClaim out;
  GPUNODE_ASSIGN_OR_RETURN(out.ns, c.String("namespace"));
  GPUNODE_ASSIGN_OR_RETURN(out.name, c.String("name"));
  GPUNODE_ASSIGN_OR_RETURN(out.cdi_spec, c.String("cdiSpec"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields devices, c.Array("devices"));
  for (const kube::Fields& d : devices.Elements()) {
    GPUNODE_ASSIGN_OR_RETURN(PreparedDevice device, ParseDevice(d));
    out.devices.push_back(std::move(device));
  }
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields sharing, c.Array("sharing"));
  for (const kube::Fields& s : sharing.Elements()) {
    GPUNODE_ASSIGN_OR_RETURN(SharingRecord record, ParseSharing(s));
    out.sharing.push_back(std::move(record));
  }
  GPUNODE_ASSIGN_OR_RETURN(out.exclusive_devices, Strings(c, "exclusiveDevices"));
  if (out.ns.empty() || out.name.empty()) return c.Error("a claim without namespace or name");
  return out;
}

}  // namespace

bool SameDevices(const std::vector<PreparedDevice>& a, const std::vector<PreparedDevice>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].request_names != b[i].request_names || a[i].pool_name != b[i].pool_name ||
        a[i].device_name != b[i].device_name || a[i].cdi_device_ids != b[i].cdi_device_ids ||
        a[i].share_id != b[i].share_id) {
      return false;
    }
  }
  return true;
}

std::string RenderCheckpoint(const Checkpoint& checkpoint) {
  const json data = DataToJson(checkpoint);
  json doc = {{"kind", kCheckpointKind},
              {"version", kCheckpointVersion},
              {"checksum", Checksum(DumpJson(data))},
              {"data", data}};
  return DumpJson(doc, 1) + "\n";
}

StatusOr<Checkpoint> ParseCheckpoint(absl::string_view text, absl::string_view origin) {
  const std::string what = absl::StrCat("checkpoint ", origin);
  GPUNODE_ASSIGN_OR_RETURN(json doc, ParseJson(text, what, 16));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields root, kube::Fields::Root(doc, what));
  GPUNODE_ASSIGN_OR_RETURN(std::string kind, root.String("kind"));
  if (kind != kCheckpointKind) {
    return root.Error(absl::StrCat("kind \"", kind.substr(0, 64), "\" is not ", kCheckpointKind,
                                   ": not a checkpoint of gpunode's DRA driver"));
  }
  GPUNODE_ASSIGN_OR_RETURN(std::optional<int64_t> version, root.Int("version"));
  if (version != kCheckpointVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": version ", version ? absl::StrCat(*version) : std::string("(none)"), " is not ", kCheckpointVersion,
        ", the version this gpunode reads; written by another gpunode? Unprepare its claims with that version or "
        "remove the file once no pod uses a claim of this node"));
  }
  GPUNODE_ASSIGN_OR_RETURN(std::string checksum, root.String("checksum"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields data, root.Object("data"));
  if (!data.present()) return root.Error("data: required");
  const std::string actual = Checksum(DumpJson(data.json()));
  if (checksum != actual) {
    return absl::DataLossError(absl::StrCat(what, ": checksum mismatch (the file says \"", checksum.substr(0, 40),
                                            "\", its data is ", actual,
                                            "): the file is corrupted or was edited; not trusted"));
  }
  Checkpoint out;
  GPUNODE_ASSIGN_OR_RETURN(out.boot_id, data.String("bootId"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields claims, data.Object("claims"));
  if (claims.present()) {
    for (const auto& [uid, unused] : claims.json().items()) {
      GPUNODE_ASSIGN_OR_RETURN(kube::Fields c, claims.Object(uid));
      if (!c.present()) return claims.Error(absl::StrCat("claim ", uid.substr(0, 64), ": null"));
      GPUNODE_ASSIGN_OR_RETURN(PreparedClaim claim, ParseClaim(c));
      out.claims.emplace(uid, std::move(claim));
    }
  }
  return out;
}

StatusOr<Checkpoint> LoadCheckpoint(const HostFs& fs, absl::string_view host_path) {
  StatusOr<std::string> text = fs.ReadFile(host_path, kMaxCheckpointBytes);
  if (!text.ok() && absl::IsNotFound(text.status())) return Checkpoint{};  // first start
  if (!text.ok()) return Annotate(text.status(), "read the DRA checkpoint");
  return ParseCheckpoint(*text, host_path);
}

Status SaveCheckpoint(const HostFs& fs, absl::string_view host_path, const Checkpoint& checkpoint) {
  const std::string path(host_path);
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) GPUNODE_RETURN_IF_ERROR(fs.MakeDirs(path.substr(0, slash)));
  WriteOptions options;
  options.mode = 0600;
  options.keep_mode = false;
  StatusOr<std::string> written = fs.WriteFileAtomically(host_path, RenderCheckpoint(checkpoint), options);
  if (!written.ok()) return Annotate(written.status(), "write the DRA checkpoint");
  return absl::OkStatus();
}

}  // namespace gpunode::dra
