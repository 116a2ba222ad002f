// SlicePublisher (resource_slices.h): reconciles the API server's ResourceSlices of this node and
// driver with the device model.
#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/dra/resource_slices.h"
#include "src/kube/json_fields.h"

namespace gpunode::dra {
namespace {

using nlohmann::json;

constexpr SliceApi kVersions[] = {SliceApi::kV1, SliceApi::kV1beta2, SliceApi::kV1beta1};
// A name from the API server as it appears in a message: never more than a DNS subdomain.
constexpr size_t kMaxNameInMessage = 253;

// The devices of a slice (from us or from the API server) in one form, for comparison: v1's shape,
// attributes and capacity always present, taints without their time (the API server sets it),
// taints left out entirely when `drop_taints`. Every field's type is checked.
StatusOr<json> NormalizedDevices(const kube::Fields& spec, SliceApi api, bool drop_taints) {
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields devices, spec.Array("devices"));
  if (devices.present() && devices.json().size() > kMaxDevicesPerSlice) {
    return devices.Error(
        absl::StrCat(devices.json().size(), " devices, more than the API allows (", kMaxDevicesPerSlice, ")"));
  }
  json out = json::array();
  for (const kube::Fields& element : devices.Elements()) {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields device, element.AsObject());
    GPUNODE_ASSIGN_OR_RETURN(std::string name, device.String("name"));
    if (name.empty()) return device.Error("a device without a name");
    kube::Fields body = device;
    if (api == SliceApi::kV1beta1) {
      GPUNODE_ASSIGN_OR_RETURN(body, device.Object("basic"));
    }
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields attributes, body.Object("attributes"));
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields capacity, body.Object("capacity"));
    json caps = json::object();
    if (capacity.present()) {
      for (const auto& [key, value] : capacity.json().items()) {
        GPUNODE_ASSIGN_OR_RETURN(kube::Fields one, capacity.Object(key));
        GPUNODE_ASSIGN_OR_RETURN(std::string quantity, one.String("value"));
        caps[key] = {{"value", quantity}};
      }
    }
    json n = {{"name", name},
              {"attributes", attributes.present() ? attributes.json() : json::object()},
              {"capacity", std::move(caps)}};
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields taints, body.Array("taints"));
    if (!drop_taints && taints.present() && !taints.json().empty()) {
      json list = json::array();
      for (const kube::Fields& t : taints.Elements()) {
        GPUNODE_ASSIGN_OR_RETURN(kube::Fields taint, t.AsObject());
        GPUNODE_ASSIGN_OR_RETURN(std::string key, taint.String("key"));
        GPUNODE_ASSIGN_OR_RETURN(std::string value, taint.String("value"));
        GPUNODE_ASSIGN_OR_RETURN(std::string effect, taint.String("effect"));
        GPUNODE_ASSIGN_OR_RETURN(std::string time_added, taint.String("timeAdded"));
        (void)time_added;  // type-checked, not compared
        list.push_back({{"key", key}, {"value", value}, {"effect", effect}});
      }
      n["taints"] = std::move(list);
    }
    out.push_back(std::move(n));
  }
  return out;
}

// A write refused because the slice changed between our list and our write: a conflict or an
// AlreadyExists (409, Aborted), or a slice gone (404). The reconcile starts over from the list.
bool StartOver(const Status& s) {
  return s.code() == absl::StatusCode::kAborted || s.code() == absl::StatusCode::kNotFound;
}

}  // namespace

// A slice of this node and driver on the API server.
struct SlicePublisher::Existing {
  std::string name;
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;
  int64_t slice_count = 0;
  std::string pool;
  std::string owner_uid;  // the UID of the Node that owns it ("" when none)
  json object;   // as the API server sent it (the base of an update)
  json devices;  // NormalizedDevices, taints kept
  // device name -> its taints as stored (with their times)
  std::map<std::string, std::vector<DraTaint>> taints;
};

SlicePublisher::SlicePublisher(kube::Client& client, Options options) : client_(client), options_(std::move(options)) {}
SlicePublisher::~SlicePublisher() = default;
SlicePublisher::SlicePublisher(SlicePublisher&&) noexcept = default;

StatusOr<SlicePublisher::Existing> SlicePublisher::ReadSlice(const json& item, SliceApi api) const {
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields first, kube::Fields::Root(item, "a ResourceSlice of the list"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields first_meta, first.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(std::string name, first_meta.String("name"));
  if (name.empty()) return first.Error("metadata.name is empty");
  if (name.size() > kMaxNameInMessage) name = name.substr(0, kMaxNameInMessage) + "...";
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields root, kube::Fields::Root(item, absl::StrCat("ResourceSlice ", name)));
  Existing e;
  e.name = first_meta.json().value("name", "");
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields meta, root.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(e.uid, meta.String("uid"));
  GPUNODE_ASSIGN_OR_RETURN(e.resource_version, meta.String("resourceVersion"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields owners, meta.Array("ownerReferences"));
  for (const kube::Fields& o : owners.Elements()) {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields owner, o.AsObject());
    GPUNODE_ASSIGN_OR_RETURN(std::string kind, owner.String("kind"));
    GPUNODE_ASSIGN_OR_RETURN(std::string uid, owner.String("uid"));
    if (kind == "Node") e.owner_uid = uid;
  }
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields spec, root.Object("spec"));
  if (!spec.present()) return root.Error("spec: missing");
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields pool, spec.Object("pool"));
  GPUNODE_ASSIGN_OR_RETURN(e.pool, pool.String("name"));
  GPUNODE_ASSIGN_OR_RETURN(std::optional<int64_t> generation, pool.Int("generation"));
  GPUNODE_ASSIGN_OR_RETURN(std::optional<int64_t> count, pool.Int("resourceSliceCount"));
  e.generation = generation.value_or(0);
  e.slice_count = count.value_or(0);
  if (e.generation < 0 || e.slice_count < 0) return pool.Error("a negative generation or resourceSliceCount");
  GPUNODE_ASSIGN_OR_RETURN(e.devices, NormalizedDevices(spec, api, /*drop_taints=*/false));
  // The stored taints with their times (their types were checked above).
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields devices, spec.Array("devices"));
  for (const kube::Fields& d : devices.Elements()) {
    const json* body = &d.json();
    if (api == SliceApi::kV1beta1) {
      auto basic = body->find("basic");
      if (basic == body->end()) continue;
      body = &*basic;
    }
    auto taints = body->is_object() ? body->find("taints") : body->end();
    if (taints == body->end() || !taints->is_array()) continue;
    auto& list = e.taints[d.json().value("name", "")];
    for (const json& t : *taints) {
      auto text = [&t](const char* key) {
        auto it = t.find(key);
        return it != t.end() && it->is_string() ? it->get<std::string>() : std::string();
      };
      list.push_back({text("key"), text("value"), text("effect"), text("timeAdded")});
    }
  }
  e.object = item;
  return e;
}

StatusOr<std::vector<SlicePublisher::Existing>> SlicePublisher::ListIn(SliceApi api) {
  // spec.nodeName and spec.driver are field selectors of ResourceSlices; the answer is filtered
  // again here (the API server is not trusted to have done it).
  const std::string path =
      absl::StrCat(SlicesPath(api), "?fieldSelector=",
                   kube::UrlEscape(absl::StrCat("spec.nodeName=", options_.node, ",spec.driver=", options_.driver)));
  std::vector<Existing> out;
  size_t seen = 0;
  kube::ListOptions list;
  list.call = options_.call;
  auto listed = client_.List(path, list, [&](json& item) -> Status {
    if (++seen > options_.max_slices) {
      return absl::ResourceExhaustedError(absl::StrCat("list ", path, ": more than ", options_.max_slices,
                                                       " ResourceSlices; refusing to read more"));
    }
    if (!item.is_object() || !item.contains("spec") || !item["spec"].is_object()) {
      auto e = ReadSlice(item, api);  // names what is wrong
      return e.ok() ? absl::InvalidArgumentError("a ResourceSlice of the list without a spec") : e.status();
    }
    const json& spec = item["spec"];
    if (spec.value("nodeName", json()) != json(options_.node) || spec.value("driver", json()) != json(options_.driver)) {
      return absl::OkStatus();
    }
    GPUNODE_ASSIGN_OR_RETURN(Existing e, ReadSlice(item, api));
    out.push_back(std::move(e));
    return absl::OkStatus();
  });
  if (!listed.ok()) return listed.status();
  return out;
}

StatusOr<std::vector<SlicePublisher::Existing>> SlicePublisher::ListOurs() {
  if (api_) {
    auto listed = ListIn(*api_);
    if (listed.ok() || listed.status().code() != absl::StatusCode::kNotFound) return listed;
    api_.reset();  // the API server stopped serving it: look again
  }
  Status last;
  for (SliceApi api : kVersions) {
    auto listed = ListIn(api);
    if (listed.ok()) {
      api_ = api;
      return listed;
    }
    if (listed.status().code() != absl::StatusCode::kNotFound) return listed.status();
    last = listed.status();
  }
  return absl::NotFoundError(absl::StrCat(
      "the API server serves no ResourceSlices (resource.k8s.io v1, v1beta2, v1beta1; is DynamicResourceAllocation "
      "on?): ",
      last.message()));
}

Status SlicePublisher::EnsureNodeUid() {
  if (!options_.owned_by_node || !node_uid_.empty()) return absl::OkStatus();
  const std::string path = "/api/v1/nodes/" + kube::UrlEscape(options_.node);
  auto node = client_.Get(path, options_.call);
  if (!node.ok()) {
    return Status(node.status().code(), absl::StrCat("reading Node ", options_.node,
                                                     " (its ResourceSlices are owned by it): ", node.status().message()));
  }
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields root, kube::Fields::Root(*node, "Node " + options_.node));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields meta, root.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(node_uid_, meta.String("uid"));
  if (node_uid_.empty()) return root.Error("metadata.uid is empty");
  return absl::OkStatus();
}

Status SlicePublisher::DeleteSlice(const Existing& e) {
  json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (!e.uid.empty()) options["preconditions"]["uid"] = e.uid;
  if (!e.resource_version.empty()) options["preconditions"]["resourceVersion"] = e.resource_version;
  auto deleted = client_.Delete(absl::StrCat(SlicesPath(*api_), "/", kube::UrlEscape(e.name)), options, options_.call);
  if (deleted.ok()) {
    ++writes_.deleted;
  } else if (deleted.status().code() != absl::StatusCode::kNotFound) {  // gone already: fine
    return deleted.status();
  }
  return absl::OkStatus();
}

void SlicePublisher::NoteWritten(const json& sent, const json& answer, SliceApi api) {
  // An API server whose DRADeviceTaints feature is off drops the taints it is sent.
  auto sent_root = kube::Fields::Root(sent, "sent");
  auto answer_root = kube::Fields::Root(answer, "answer");
  if (!sent_root.ok() || !answer_root.ok()) return;
  auto sent_spec = sent_root->Object("spec");
  auto answer_spec = answer_root->Object("spec");
  if (!sent_spec.ok() || !answer_spec.ok()) return;
  auto with = NormalizedDevices(*sent_spec, api, false);
  auto without = NormalizedDevices(*sent_spec, api, true);
  auto stored = NormalizedDevices(*answer_spec, api, false);
  if (with.ok() && without.ok() && stored.ok() && *with != *without && *stored == *without) taints_dropped_ = true;
}

Status SlicePublisher::Reconcile(const std::vector<DraDevice>& devices, bool* start_over) {
  // Errors of writes may ask to start over; errors before them do not.
  auto write = [start_over](Status s) {
    if (StartOver(s)) *start_over = true;
    return s;
  };
  GPUNODE_RETURN_IF_ERROR(EnsureNodeUid());
  std::vector<Existing> existing;
  const auto now = std::chrono::steady_clock::now();
  auto seen_at = now;
  if (known_ && api_ && options_.reuse_written.count() > 0 && now - known_at_ < options_.reuse_written) {
    existing = std::move(*known_);
    seen_at = known_at_;
  } else {
    GPUNODE_ASSIGN_OR_RETURN(existing, ListOurs());
  }
  known_.reset();  // known again only once every write below went through
  const SliceApi api = *api_;

  // Taints without a time keep the one stored for the same taint of the same device.
  std::map<std::string, const std::vector<DraTaint>*> stored_taints;
  for (const Existing& e : existing) {
    for (const auto& [device, taints] : e.taints) stored_taints[device] = &taints;
  }
  std::vector<DraDevice> want = devices;
  for (DraDevice& d : want) {
    auto it = stored_taints.find(d.name);
    if (it == stored_taints.end()) continue;
    for (DraTaint& t : d.taints) {
      if (!t.time_added.empty()) continue;
      for (const DraTaint& s : *it->second) {
        if (s.key == t.key && s.value == t.value && s.effect == t.effect) t.time_added = s.time_added;
      }
    }
  }

  int64_t newest = 0;
  for (const Existing& e : existing) newest = std::max(newest, e.generation);
  SliceSpec spec{options_.driver, options_.node, newest, node_uid_};
  std::vector<json> slices = BuildResourceSlices(want, spec, api);

  // Up to date: exactly the wanted slices, each at the newest generation with the wanted content.
  std::map<std::string, const Existing*> by_name;
  for (const Existing& e : existing) by_name[e.name] = &e;
  bool same = existing.size() == slices.size();
  for (size_t i = 0; same && i < slices.size(); ++i) {
    auto it = by_name.find(slices[i]["metadata"]["name"].get<std::string>());
    if (it == by_name.end()) {
      same = false;
      break;
    }
    const Existing& e = *it->second;
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields root, kube::Fields::Root(slices[i], "wanted slice"));
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields wanted_spec, root.Object("spec"));
    GPUNODE_ASSIGN_OR_RETURN(json wanted, NormalizedDevices(wanted_spec, api, taints_dropped_));
    json stored = e.devices;
    if (taints_dropped_) {
      for (json& d : stored) d.erase("taints");
    }
    same = e.generation == newest && e.pool == options_.node && e.owner_uid == node_uid_ &&
           e.slice_count == static_cast<int64_t>(slices.size()) && stored == wanted;
  }
  if (same) {
    generation_ = newest;
    known_ = std::move(existing);
    known_at_ = seen_at;
    return absl::OkStatus();
  }

  // Write the pool anew at the next generation: first delete what is no longer wanted (better a
  // device missing for a moment than one announced that is gone), then update, then create.
  const int64_t generation = newest + 1;
  std::set<std::string> wanted_names;
  for (json& s : slices) {
    s["spec"]["pool"]["generation"] = generation;
    wanted_names.insert(s["metadata"]["name"].get<std::string>());
  }
  for (const Existing& e : existing) {
    if (!wanted_names.count(e.name)) GPUNODE_RETURN_IF_ERROR(write(DeleteSlice(e)));
  }
  std::vector<Existing> written;  // the slices as the API server answered our writes
  bool all_read = true;
  auto remember = [&](const json& answer) {
    auto e = ReadSlice(answer, api);
    if (e.ok()) {
      written.push_back(std::move(*e));
    } else {
      all_read = false;
    }
  };
  for (json& s : slices) {
    const std::string name = s["metadata"]["name"].get<std::string>();
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      auto answer = client_.Post(SlicesPath(api), s, options_.call);
      GPUNODE_RETURN_IF_ERROR(write(answer.status()));
      ++writes_.created;
      NoteWritten(s, *answer, api);
      remember(*answer);
      continue;
    }
    // An update: the stored object (its uid, labels, resourceVersion for the conflict check) with
    // our spec and owner.
    json body = it->second->object;
    body["apiVersion"] = ApiVersionOf(api);
    body["kind"] = "ResourceSlice";
    body["spec"] = s["spec"];
    if (s["metadata"].contains("ownerReferences")) body["metadata"]["ownerReferences"] = s["metadata"]["ownerReferences"];
    body["metadata"]["resourceVersion"] = it->second->resource_version;
    auto answer = client_.Put(absl::StrCat(SlicesPath(api), "/", kube::UrlEscape(name)), body, options_.call);
    GPUNODE_RETURN_IF_ERROR(write(answer.status()));
    ++writes_.updated;
    NoteWritten(s, *answer, api);
    remember(*answer);
  }
  generation_ = generation;
  if (all_read) {
    known_ = std::move(written);
    known_at_ = std::chrono::steady_clock::now();
  }
  return absl::OkStatus();
}

Status SlicePublisher::Publish(const std::vector<DraDevice>& devices) {
  writes_ = {};
  GPUNODE_RETURN_IF_ERROR(ValidateSlices({options_.driver, options_.node, 1, ""}, devices));
  Status s;
  for (int attempt = 0; attempt <= options_.conflict_retries; ++attempt) {
    bool start_over = false;
    s = Reconcile(devices, &start_over);
    if (s.ok() || !start_over) return s;
  }
  return Status(s.code(), absl::StrCat("publishing the ResourceSlices of node ", options_.node, ": still conflicting after ",
                                       options_.conflict_retries + 1, " tries: ", s.message()));
}

Status SlicePublisher::RemoveAll() {
  writes_ = {};
  known_.reset();
  GPUNODE_RETURN_IF_ERROR(ValidateSlices({options_.driver, options_.node, 1, ""}, {}));
  Status s;
  for (int attempt = 0; attempt <= options_.conflict_retries; ++attempt) {
    auto existing = ListOurs();
    if (!existing.ok()) {
      // No version of the API at all: there is nothing to remove.
      return existing.status().code() == absl::StatusCode::kNotFound && !api_ ? absl::OkStatus() : existing.status();
    }
    s = absl::OkStatus();
    for (const Existing& e : *existing) {
      s = DeleteSlice(e);
      if (!s.ok()) break;
    }
    if (s.ok() || s.code() != absl::StatusCode::kAborted) return s;  // a conflict: list again
  }
  return s;
}

}  // namespace gpunode::dra
