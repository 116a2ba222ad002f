// One page of a Kubernetes List answer ({"kind": "NodeList", "metadata": {...}, "items": [...]})
// read item by item (internal to src/kube): nlohmann's SAX parser drives a builder that makes one
// item's document at a time and hands it over, so a page of 500 Nodes is never one DOM (a DOM is
// several times the size of its text). Same limits as src/base/json.h: nesting 128, no
// exceptions, invalid UTF-8 refused.
#ifndef GPUNODE_KUBE_LIST_STREAM_H_
#define GPUNODE_KUBE_LIST_STREAM_H_

#include <functional>
#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/base/status.h"

namespace gpunode::kube::internal {

struct ListPageHead {
  std::string kind;
  nlohmann::json metadata;  // the list's metadata (resourceVersion, continue, remainingItemCount)
  size_t items = 0;
};

// Parses `body`, calling `on_item(item, index)` for each element of "items" in order, and
// `on_metadata` once the list's metadata is complete (the API server writes it before the items,
// so a caller can refuse a page before its items are handed over); an error from either ends the
// parse and is returned. Errors name `what`: not JSON, not an object, "items" not an array,
// "metadata" not an object.
StatusOr<ListPageHead> ParseListPage(absl::string_view body, const std::string& what,
                                     const std::function<Status(const nlohmann::json& metadata)>& on_metadata,
                                     const std::function<Status(nlohmann::json& item, size_t index)>& on_item);

}  // namespace gpunode::kube::internal

#endif  // GPUNODE_KUBE_LIST_STREAM_H_
