// The CDI (Container Device Interface) spec model: the fields of CDI 1.1.0, rendering to YAML/JSON,
// a strict parser and our validator (docs/cdi.md; facts in shared/reference/container-cdi.md §1).
//
// Parsing is strict like the Go library's: an unknown field, a wrong type or a malformed value is
// InvalidArgument naming the origin and the path, e.g.
//   nvidia.yaml: devices[1].containerEdits.mounts[0].hostpath: unknown field
// Validation (ValidateSpec) checks names, the version (known, and not below what the fields
// need), required fields, env entries, hook names, device types and permissions.
#ifndef GPUNODE_CONTAINER_CDI_SPEC_H_
#define GPUNODE_CONTAINER_CDI_SPEC_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/base/status.h"

namespace gpunode::cdi {

struct DeviceNode {
  std::string path;       // in the container (required)
  std::string host_path;  // empty: same as path (>= 0.5.0 when set)
  std::string type;       // "", "b", "c", "u", "p"
  std::optional<int64_t> major;
  std::optional<int64_t> minor;
  std::optional<uint32_t> file_mode;
  std::string permissions;  // subset of "rwm"; empty means rwm
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
};

struct Mount {
  std::string host_path;
  std::string container_path;
  std::vector<std::string> options;
  std::string type;  // >= 0.4.0 when set
};

struct Hook {
  std::string hook_name;  // prestart, createRuntime, createContainer, startContainer, poststart, poststop
  std::string path;
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::optional<int64_t> timeout;
};

struct IntelRdt {
  std::string clos_id;
  std::string l3_cache_schema;
  std::string mem_bw_schema;
  std::vector<std::string> schemata;  // >= 1.1.0
  std::optional<bool> enable_monitoring;  // >= 1.1.0
};

struct NetDevice {
  std::string host_interface_name;
  std::string name;
};

struct ContainerEdits {
  std::vector<std::string> env;  // "NAME=VALUE"
  std::vector<DeviceNode> device_nodes;
  std::vector<NetDevice> net_devices;  // >= 1.1.0
  std::vector<Hook> hooks;
  std::vector<Mount> mounts;
  std::optional<IntelRdt> intel_rdt;    // >= 0.7.0
  std::vector<uint32_t> additional_gids;  // >= 0.7.0

  bool Empty() const {
    return env.empty() && device_nodes.empty() && net_devices.empty() && hooks.empty() &&
           mounts.empty() && !intel_rdt && additional_gids.empty();
  }
};

struct Device {
  std::string name;
  std::map<std::string, std::string> annotations;  // >= 0.6.0 when non-empty
  ContainerEdits edits;
};

struct Spec {
  std::string cdi_version;
  std::string kind;  // "vendor/class"
  std::map<std::string, std::string> annotations;
  std::vector<Device> devices;
  ContainerEdits edits;  // spec-level containerEdits
};

// Versions of the CDI spec, oldest first: 0.1.0 ... 1.1.0.
const std::vector<std::string>& KnownVersions();

struct RequiredVersion {
  std::string version;  // "0.3.0" at least
  std::string reason;   // why, e.g. "device name \"0\" starts with a digit"; empty for 0.3.0
};
// The lowest cdiVersion whose schema has every field the spec uses (specs-go/version.go rules).
RequiredVersion MinimumVersion(const Spec& spec);

// "nvidia.com/gpu=0" for each device, in spec order.
std::vector<std::string> QualifiedNames(const Spec& spec);

// Name rules of the Go library (pkg/parser): empty when fine, else what is wrong.
std::string CheckKind(absl::string_view kind);
std::string CheckDeviceName(absl::string_view name);

// Every problem of the spec, each prefixed by the path of the field ("devices[0].name: ...").
std::vector<std::string> SpecProblems(const Spec& spec);
// OK, or InvalidArgument "<origin>: <problem>; <problem>...".
Status ValidateSpec(const Spec& spec, absl::string_view origin);

// Rendering. Keys in the order of the Go structs; empty fields left out; every string quoted in
// YAML (so "0" stays a string through sigs.k8s.io/yaml). YAML starts with "---".
nlohmann::ordered_json SpecToJson(const Spec& spec);
std::string RenderSpecYaml(const Spec& spec);
std::string RenderSpecJson(const Spec& spec);

// Strict parse of a YAML or JSON spec (see the file comment). `origin` prefixes errors.
StatusOr<Spec> ParseSpec(absl::string_view text, absl::string_view origin);

}  // namespace gpunode::cdi

#endif  // GPUNODE_CONTAINER_CDI_SPEC_H_
