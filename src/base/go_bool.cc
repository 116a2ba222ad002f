#include "src/base/go_bool.h"

#include "absl/strings/str_cat.h"

namespace gpunode {

StatusOr<bool> ParseGoBool(const std::string& name, const std::string& text) {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (text == t) return true;
  }
  for (const char* f : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (text == f) return false;
  }
  // a flag as it was typed (--flag=maybe), a variable with its value quoted (NAME="maybe")
  const bool flag = !name.empty() && name[0] == '-';
  return absl::InvalidArgumentError(
      absl::StrCat(name, flag ? "=" : "=\"", text, flag ? "" : "\"", ": not a boolean (true or false)"));
}

}  // namespace gpunode
