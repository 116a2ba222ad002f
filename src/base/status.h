// Error currency of gpunode: absl::Status / absl::StatusOr everywhere below main().
// Codes follow absl's guidance (they are gRPC's codes, so the device plugin can return them as is).
// Messages name the operation and the object: "read /proc/driver/nvidia/version: No such file".
#ifndef GPUNODE_BASE_STATUS_H_
#define GPUNODE_BASE_STATUS_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpunode {

using absl::Status;
using absl::StatusOr;

// Prefixes the message of a non-OK status with context, keeping its code.
Status Annotate(const Status& status, absl::string_view context);

// Maps an errno value to the closest absl code, with "op path: strerror" as the message.
Status ErrnoToStatus(int err, absl::string_view op, absl::string_view path);

}  // namespace gpunode

#define GPUNODE_CONCAT_INNER_(a, b) a##b
#define GPUNODE_CONCAT_(a, b) GPUNODE_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define GPUNODE_RETURN_IF_ERROR(expr)                \
  do {                                               \
    ::absl::Status gpunode_status_ = (expr);         \
    if (!gpunode_status_.ok()) return gpunode_status_; \
  } while (0)

// `lhs = value of expr`, or returns its status from the enclosing function.
#define GPUNODE_ASSIGN_OR_RETURN(lhs, expr) \
  GPUNODE_ASSIGN_OR_RETURN_IMPL_(GPUNODE_CONCAT_(gpunode_statusor_, __LINE__), lhs, expr)
#define GPUNODE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()

#endif  // GPUNODE_BASE_STATUS_H_
