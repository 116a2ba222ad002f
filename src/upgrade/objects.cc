// The controller's projections of the objects it watches (Nodes, driver pods, workload pods) and
// kubectl's equality-based label selectors. Every field is read through kube::Fields: a wrong type
// is an error naming the object and the field; what is kept is bounded.
#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/base/well_known.h"
#include "src/kube/json_fields.h"
#include "src/upgrade/planner.h"

namespace gpunode::upgrade {
namespace {

constexpr size_t kMaxLabels = 512;

std::string NameOf(const nlohmann::json& o) {
  if (o.is_object() && o.contains("metadata") && o["metadata"].is_object() && o["metadata"].contains("name") &&
      o["metadata"]["name"].is_string()) {
    return o["metadata"]["name"].get<std::string>().substr(0, 253);
  }
  return "?";
}

}  // namespace

StatusOr<NodeFacts> ReadNodeFacts(const nlohmann::json& node) {
  NodeFacts f;
  const std::string where = absl::StrCat("Node ", NameOf(node));
  GPUNODE_ASSIGN_OR_RETURN(f.node, fleet::ParseNode(node, where));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields root, kube::Fields::Root(node, where));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields meta, root.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(f.labels, meta.StringMap("labels"));
  if (f.labels.size() > kMaxLabels) return meta.Error(absl::StrCat("labels: more than ", kMaxLabels));
  // Every label is in f.labels; the fleet model's copy of the nvidia.com/gpunode.io ones is not kept
  // twice (a thousand Nodes: the controller's largest cost). Use WithLabels() where fleet reads them.
  f.node.labels.clear();
  GPUNODE_ASSIGN_OR_RETURN(f.uid, meta.String("uid"));
  GPUNODE_ASSIGN_OR_RETURN(auto annotations, meta.StringMap("annotations"));
  for (auto& [k, v] : annotations) {
    if (absl::StartsWith(k, "gpunode.io/driver-upgrade.")) f.annotations[k] = v.substr(0, 4096);
  }
  if (auto it = f.labels.find(wellknown::kLabelUpgradeState); it != f.labels.end()) {
    f.state_label = it->second;
    f.state = ParseState(it->second).value_or(State::kNone);
  }
  auto id = f.labels.find("feature.node.kubernetes.io/system-os_release.ID");
  auto ver = f.labels.find("feature.node.kubernetes.io/system-os_release.VERSION_ID");
  if (id != f.labels.end() && ver != f.labels.end()) f.os_tag = absl::StrCat(id->second, ver->second);
  return f;
}

StatusOr<DriverPod> ReadDriverPod(const nlohmann::json& pod) {
  DriverPod p;
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields root, kube::Fields::Root(pod, absl::StrCat("Pod ", NameOf(pod))));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields meta, root.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(p.ns, meta.String("namespace"));
  GPUNODE_ASSIGN_OR_RETURN(p.name, meta.String("name"));
  GPUNODE_ASSIGN_OR_RETURN(auto labels, meta.StringMap("labels"));
  GPUNODE_ASSIGN_OR_RETURN(auto annotations, meta.StringMap("annotations"));
  p.resource = labels[kLabelPodDriver];
  p.hash = labels[kLabelPodHash];
  p.version = annotations[kAnnoPodVersion].substr(0, 128);
  p.previous = absl::EndsWith(labels["gpunode.io/driver-daemonset"], "-previous");
  GPUNODE_ASSIGN_OR_RETURN(std::string deletion, meta.String("deletionTimestamp"));
  p.deleting = !deletion.empty();
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields spec, root.Object("spec"));
  GPUNODE_ASSIGN_OR_RETURN(p.node, spec.String("nodeName"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields status, root.Object("status"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields conditions, status.Array("conditions"));
  for (const kube::Fields& c : conditions.Elements()) {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields co, c.AsObject());
    GPUNODE_ASSIGN_OR_RETURN(std::string type, co.String("type"));
    GPUNODE_ASSIGN_OR_RETURN(std::string st, co.String("status"));
    if (type == "Ready") p.ready = st == "True";
  }
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields containers, status.Array("containerStatuses"));
  for (const kube::Fields& c : containers.Elements()) {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields co, c.AsObject());
    GPUNODE_ASSIGN_OR_RETURN(std::optional<int64_t> restarts, co.Int("restartCount"));
    p.restarts = std::max(p.restarts, static_cast<int>(std::clamp<int64_t>(restarts.value_or(0), 0, 1 << 20)));
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields state, co.Object("state"));
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields waiting, state.Object("waiting"));
    if (waiting.present()) {
      GPUNODE_ASSIGN_OR_RETURN(p.waiting_reason, waiting.String("reason"));
      GPUNODE_ASSIGN_OR_RETURN(p.waiting_message, waiting.String("message"));
      p.waiting_reason = p.waiting_reason.substr(0, 128);
      p.waiting_message = p.waiting_message.substr(0, 512);
    }
  }
  return p;
}

StatusOr<WorkloadPod> ReadWorkloadPod(const nlohmann::json& pod) {
  WorkloadPod p;
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields root, kube::Fields::Root(pod, absl::StrCat("Pod ", NameOf(pod))));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields meta, root.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(p.ns, meta.String("namespace"));
  GPUNODE_ASSIGN_OR_RETURN(p.name, meta.String("name"));
  GPUNODE_ASSIGN_OR_RETURN(p.labels, meta.StringMap("labels"));
  if (p.labels.size() > kMaxLabels) return meta.Error(absl::StrCat("labels: more than ", kMaxLabels));
  GPUNODE_ASSIGN_OR_RETURN(auto annotations, meta.StringMap("annotations"));
  p.mirror = annotations.count("kubernetes.io/config.mirror") > 0;
  p.driver = p.labels.count(kLabelPodDriver) > 0;
  GPUNODE_ASSIGN_OR_RETURN(std::string deletion, meta.String("deletionTimestamp"));
  p.deleting = !deletion.empty();
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields owners, meta.Array("ownerReferences"));
  for (const kube::Fields& o : owners.Elements()) {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields ow, o.AsObject());
    GPUNODE_ASSIGN_OR_RETURN(bool controller, ow.Bool("controller"));
    GPUNODE_ASSIGN_OR_RETURN(std::string kind, ow.String("kind"));
    if (controller) p.has_controller = true;
    if (controller && kind == "DaemonSet") p.daemonset = true;
  }
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields spec, root.Object("spec"));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields claims, spec.Array("resourceClaims"));
  if (claims.present() && !claims.json().empty()) p.uses_gpu = true;
  for (const char* list : {"containers", "initContainers"}) {
    GPUNODE_ASSIGN_OR_RETURN(kube::Fields cs, spec.Array(list));
    for (const kube::Fields& c : cs.Elements()) {
      GPUNODE_ASSIGN_OR_RETURN(kube::Fields co, c.AsObject());
      GPUNODE_ASSIGN_OR_RETURN(kube::Fields res, co.Object("resources"));
      for (const char* kind : {"limits", "requests"}) {
        GPUNODE_ASSIGN_OR_RETURN(kube::Fields r, res.Object(kind));
        if (!r.present()) continue;
        for (const auto& [name, value] : r.json().items()) {
          if (absl::StartsWith(name, wellknown::kNvidiaPrefix)) p.uses_gpu = true;
        }
      }
    }
  }
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields volumes, spec.Array("volumes"));
  for (const kube::Fields& v : volumes.Elements()) {
    if (v.json().is_object() && v.json().contains("emptyDir")) p.empty_dir = true;
  }
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields status, root.Object("status"));
  GPUNODE_ASSIGN_OR_RETURN(std::string phase, status.String("phase"));
  p.terminal = phase == "Succeeded" || phase == "Failed";
  return p;
}

bool Selector::Matches(const std::map<std::string, std::string>& labels) const {
  for (const Term& t : terms) {
    auto it = labels.find(t.key);
    switch (t.op) {
      case Term::kEq:
        if (it == labels.end() || it->second != t.value) return false;
        break;
      case Term::kNe:
        if (it != labels.end() && it->second == t.value) return false;
        break;
      case Term::kExists:
        if (it == labels.end()) return false;
        break;
      case Term::kNotExists:
        if (it != labels.end()) return false;
        break;
    }
  }
  return true;
}

StatusOr<Selector> ParseSelector(const std::string& text, const std::string& where) {
  Selector s;
  if (text.size() > 4096) return absl::InvalidArgumentError(absl::StrCat(where, ": longer than 4096 bytes"));
  for (absl::string_view raw : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::string term(absl::StripAsciiWhitespace(raw));
    Selector::Term t;
    if (absl::StrContains(term, " in ") || absl::StrContains(term, " notin ") || absl::StrContains(term, "(")) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": \"", term, "\": set-based terms (in, notin) are not supported; use =, != or a key"));
    }
    size_t pos;
    if ((pos = term.find("!=")) != std::string::npos) {
      t.op = Selector::Term::kNe;
      t.key = term.substr(0, pos);
      t.value = term.substr(pos + 2);
    } else if ((pos = term.find("==")) != std::string::npos) {
      t.key = term.substr(0, pos);
      t.value = term.substr(pos + 2);
    } else if ((pos = term.find('=')) != std::string::npos) {
      t.key = term.substr(0, pos);
      t.value = term.substr(pos + 1);
    } else if (absl::StartsWith(term, "!")) {
      t.op = Selector::Term::kNotExists;
      t.key = term.substr(1);
    } else {
      t.op = Selector::Term::kExists;
      t.key = term;
    }
    t.key = std::string(absl::StripAsciiWhitespace(t.key));
    t.value = std::string(absl::StripAsciiWhitespace(t.value));
    if (t.key.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": \"", term, "\": no label key"));
    s.terms.push_back(std::move(t));
  }
  return s;
}

}  // namespace gpunode::upgrade
