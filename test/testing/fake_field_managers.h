// Server-side apply's field ownership, as far as the API server stand-in (fake_api_server.h)
// needs it: who owns which metadata.labels key, kept in metadata.managedFields in the API server's
// own format (FieldsV1), with its rules —
//   - Apply by M: a label another manager owns with a different value is a conflict (409) unless
//     forced (then M takes it); a label M applied before and leaves out now loses M, and is
//     removed when nobody else owns it; M's Apply entry owns exactly what it applied.
//   - Update (merge/strategic/JSON patch, PUT) by M: labels it adds or changes become M's alone,
//     labels it removes are nobody's. A request that replaces managedFields (JSON patch) is taken
//     as the new bookkeeping, as the API server does.
// Fields other than labels are merged (strategic: conditions by type) and not tracked.
#ifndef GPUNODE_TEST_TESTING_FAKE_FIELD_MANAGERS_H_
#define GPUNODE_TEST_TESTING_FAKE_FIELD_MANAGERS_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "test/testing/fake_api_responders.h"

namespace gpunode::testing {

struct FieldManagers {
  using json = nlohmann::json;

  static json& Entries(json& obj) {
    json& m = obj["metadata"]["managedFields"];
    if (!m.is_array()) m = json::array();
    return m;
  }
  static json& LabelsOf(json& entry) {
    json& l = entry["fieldsV1"]["f:metadata"]["f:labels"];
    if (!l.is_object()) l = json::object();
    return l;
  }
  static bool Owns(const json& entry, const std::string& key) {
    const json* l = &entry;
    for (const char* k : {"fieldsV1", "f:metadata", "f:labels"}) {
      if (!l->is_object() || !l->contains(k)) return false;
      l = &(*l)[k];
    }
    return l->is_object() && l->contains("f:" + key);
  }
  static bool Same(const json& e, const std::string& manager, const std::string& op, const std::string& sub) {
    return e.value("manager", "") == manager && e.value("operation", "") == op && e.value("subresource", "") == sub;
  }
  static json& EntryFor(json& obj, const std::string& manager, const std::string& op, const std::string& sub) {
    json& entries = Entries(obj);
    for (json& e : entries) {
      if (Same(e, manager, op, sub)) return e;
    }
    json e = {{"manager", manager}, {"operation", op}, {"apiVersion", "v1"}, {"time", "2026-12-01T13:00:00Z"},
              {"fieldsType", "FieldsV1"}, {"fieldsV1", json::object()}};
    if (!sub.empty()) e["subresource"] = sub;
    entries.push_back(e);
    return entries.back();
  }
  static void Disown(json& obj, const std::string& key, const json* except = nullptr) {
    for (json& e : Entries(obj)) {
      if (&e != except && Owns(e, key)) LabelsOf(e).erase("f:" + key);
    }
  }
  static bool Owned(json& obj, const std::string& key) {
    for (const json& e : Entries(obj)) {
      if (Owns(e, key)) return true;
    }
    return false;
  }
  // Entries that own nothing any more go.
  static void Prune(json& obj) {
    json kept = json::array();
    for (json& e : Entries(obj)) {
      json& f = e["fieldsV1"];
      if (f.is_object() && f.contains("f:metadata") && f["f:metadata"].is_object()) {
        json& m = f["f:metadata"];
        if (m.contains("f:labels") && m["f:labels"].is_object() && m["f:labels"].empty()) m.erase("f:labels");
        if (m.empty()) f.erase("f:metadata");
      }
      if (f.is_object() && !f.empty()) kept.push_back(e);
    }
    obj["metadata"]["managedFields"] = kept;
  }
  static json Labels(const json& obj) {
    if (obj.is_object() && obj.contains("metadata") && obj["metadata"].is_object() &&
        obj["metadata"].contains("labels") && obj["metadata"]["labels"].is_object()) {
      return obj["metadata"]["labels"];
    }
    return json::object();
  }

  static void Update(const json& before, json& after, const std::string& manager) {
    if (!after.is_object() || !after.contains("metadata") || !after["metadata"].is_object()) return;
    json base = after;
    const json was = before.is_object() && before.contains("metadata") && before["metadata"].is_object()
                         ? before["metadata"].value("managedFields", json::array())
                         : json::array();
    if (after["metadata"].value("managedFields", json::array()) == was) base["metadata"]["managedFields"] = was;
    const json old_labels = Labels(before), new_labels = Labels(after);
    for (const auto& [k, v] : new_labels.items()) {
      if (old_labels.contains(k) && old_labels[k] == v) continue;
      Disown(base, k);
      LabelsOf(EntryFor(base, manager, "Update", ""))["f:" + k] = json::object();
    }
    for (const auto& [k, v] : old_labels.items()) {
      if (!new_labels.contains(k)) Disown(base, k);
    }
    Prune(base);
    after["metadata"]["managedFields"] = base["metadata"]["managedFields"];
  }

  static bool Apply(json& obj, const json& config, const std::string& manager, bool force, const std::string& sub,
                    std::string* conflict) {
    const json want = Labels(config);
    json labels = Labels(obj);
    json& mine = EntryFor(obj, manager, "Apply", sub);
    std::vector<std::string> previous;
    for (const auto& [k, v] : LabelsOf(mine).items()) previous.push_back(k.substr(2));
    std::vector<std::string> conflicts;
    for (const auto& [k, v] : want.items()) {
      if (!labels.contains(k) || labels[k] == v) continue;
      for (const json& e : Entries(obj)) {
        if (&e != &mine && Owns(e, k)) conflicts.push_back("conflict with \"" + e.value("manager", "") + "\": .metadata.labels." + k);
      }
    }
    if (!conflicts.empty() && !force) {
      *conflict = "Apply failed with " + std::to_string(conflicts.size()) + " conflict(s): ";
      for (const std::string& c : conflicts) *conflict += c + "; ";
      Prune(obj);
      return false;
    }
    for (const auto& [k, v] : want.items()) {
      if (force && labels.contains(k) && labels[k] != v) Disown(obj, k, &mine);
      labels[k] = v;
    }
    LabelsOf(mine) = json::object();
    for (const auto& [k, v] : want.items()) LabelsOf(mine)["f:" + k] = json::object();
    for (const std::string& k : previous) {
      if (!want.contains(k) && !Owned(obj, k)) labels.erase(k);
    }
    if (!sub.empty()) mine["fieldsV1"]["f:" + sub] = json::object();
    obj["metadata"]["labels"] = labels;
    json rest = config;
    rest.erase("apiVersion");
    rest.erase("kind");
    if (rest.contains("metadata") && rest["metadata"].is_object()) {
      rest["metadata"].erase("labels");
      rest["metadata"].erase("name");
    }
    FakeApiResponders::StrategicMerge(obj, rest);
    Prune(obj);
    return true;
  }
};

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_TESTING_FAKE_FIELD_MANAGERS_H_
