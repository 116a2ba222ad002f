#include "src/kube/managed_fields.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpunode::kube {

std::string FieldsV1Key(const std::string& key) { return absl::StrCat("f:", key); }

StatusOr<std::vector<ManagedFieldsEntry>> ReadManagedLabels(const Fields& meta) {
  GPUNODE_ASSIGN_OR_RETURN(Fields list, meta.Array("managedFields"));
  std::vector<ManagedFieldsEntry> out;
  size_t index = 0;
  for (const Fields& element : list.Elements()) {
    ManagedFieldsEntry e;
    e.index = index++;
    if (!element.present()) continue;
    GPUNODE_ASSIGN_OR_RETURN(Fields entry, element.AsObject());
    GPUNODE_ASSIGN_OR_RETURN(e.manager, entry.String("manager"));
    GPUNODE_ASSIGN_OR_RETURN(e.operation, entry.String("operation"));
    GPUNODE_ASSIGN_OR_RETURN(e.subresource, entry.String("subresource"));
    GPUNODE_ASSIGN_OR_RETURN(std::string type, entry.String("fieldsType"));
    GPUNODE_ASSIGN_OR_RETURN(Fields v1, entry.Object("fieldsV1"));
    if (type == "FieldsV1" && v1.present()) {
      GPUNODE_ASSIGN_OR_RETURN(Fields m, v1.Object("f:metadata"));
      GPUNODE_ASSIGN_OR_RETURN(Fields labels, m.Object("f:labels"));
      if (labels.present()) {
        for (const auto& [k, v] : labels.json().items()) {
          if (absl::StartsWith(k, "f:")) e.labels.insert(k.substr(2));
        }
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace gpunode::kube
