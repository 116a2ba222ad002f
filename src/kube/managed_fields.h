// Who owns which fields of an object, from its metadata.managedFields (server-side apply's
// bookkeeping, FieldsV1: {"f:metadata": {"f:labels": {"f:KEY": {}}}}), read with every type checked.
// Only what gpunode needs: the label keys of each manager.
#ifndef GPUNODE_KUBE_MANAGED_FIELDS_H_
#define GPUNODE_KUBE_MANAGED_FIELDS_H_

#include <set>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "src/base/status.h"
#include "src/kube/json_fields.h"

namespace gpunode::kube {

struct ManagedFieldsEntry {
  std::string manager;      // "gpunode", "kubelet", "nfd-master", "kubectl-label"
  std::string operation;    // "Apply" or "Update"
  std::string subresource;  // "" or "status"
  std::set<std::string> labels;  // metadata.labels keys it owns
  size_t index = 0;         // its position in metadata.managedFields
};

// The entries of `meta` (an object's metadata); an entry whose fieldsType is not FieldsV1 owns
// no labels as far as we can tell.
StatusOr<std::vector<ManagedFieldsEntry>> ReadManagedLabels(const Fields& meta);

// "f:KEY" of FieldsV1 for a label key.
std::string FieldsV1Key(const std::string& key);

}  // namespace gpunode::kube

#endif  // GPUNODE_KUBE_MANAGED_FIELDS_H_
