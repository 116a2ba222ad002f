// Writes a CompatData as the C++ source of builtin::kTables (builtin_tables.h). Used at build time
// by src/compat/gen/compat_gen.cc on the data set ParseCompatData read from data/compat.yaml, and
// by the test that the built-in tables and the YAML agree (the same text from both).
#ifndef GPUNODE_COMPAT_BUILTIN_EMIT_H_
#define GPUNODE_COMPAT_BUILTIN_EMIT_H_

#include <string>

#include "absl/strings/string_view.h"
#include "src/compat/dataset.h"

namespace gpunode::compat {

// The whole generated file. `source` names the YAML in its header comment.
std::string EmitBuiltinTables(const CompatData& data, absl::string_view source);

}  // namespace gpunode::compat

#endif  // GPUNODE_COMPAT_BUILTIN_EMIT_H_
