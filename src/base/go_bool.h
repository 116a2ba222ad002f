// Booleans as NVIDIA's Go components read them (strconv.ParseBool): flags (--flag=false),
// environment variables and config fields of the device plugin, GFD and dcgm-exporter.
#ifndef GPUNODE_BASE_GO_BOOL_H_
#define GPUNODE_BASE_GO_BOOL_H_

#include <string>

#include "src/base/status.h"

namespace gpunode {

// 1 t T TRUE true True / 0 f F FALSE false False; anything else is InvalidArgument naming `name`
// as typed: a flag "--flag=maybe", a variable or field NAME="maybe".
StatusOr<bool> ParseGoBool(const std::string& name, const std::string& text);

}  // namespace gpunode

#endif  // GPUNODE_BASE_GO_BOOL_H_
