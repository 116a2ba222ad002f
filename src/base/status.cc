#include "src/base/status.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpunode {

Status Annotate(const Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

Status ErrnoToStatus(int err, absl::string_view op, absl::string_view path) {
  std::string msg = absl::StrCat(op, " ", path, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EEXIST:
      return absl::AlreadyExistsError(msg);
    case EINVAL:
    case ENAMETOOLONG:
      return absl::InvalidArgumentError(msg);
    case EAGAIN:
    case EBUSY:
    case ENODEV:
    case ENXIO:
    case EIO:
      return absl::UnavailableError(msg);
    case ENOSPC:
    case ENOMEM:
    case EMFILE:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace gpunode
