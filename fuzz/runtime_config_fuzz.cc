// `gpunode runtime configure`'s editors on arbitrary file contents: daemon.json (JSON: nesting,
// huge objects, invalid UTF-8), containerd's config.toml and a CRI-O drop-in (TOML). Each input is
// edited or refused with a Status; never an exception or a crash. The first byte picks the editor
// and the options.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "src/container/runtime_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using gpunode::container::RuntimeKind;
  gpunode::container::RuntimeConfigOptions o;
  const uint8_t pick = data[0];
  o.kind = pick % 3 == 0 ? RuntimeKind::kDocker : pick % 3 == 1 ? RuntimeKind::kContainerd : RuntimeKind::kCrio;
  o.set_as_default = (pick & 8) != 0;
  o.enable_cdi = (pick & 16) != 0;
  o.runtime_path = o.kind == RuntimeKind::kDocker ? "nvidia-container-runtime" : "/usr/bin/nvidia-container-runtime";
  const absl::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto edited = gpunode::container::EditRuntimeConfig(text, o, "fuzz-config");
  if (edited.ok()) {
    // The result must be accepted again and be a fixed point (idempotent edit).
    auto again = gpunode::container::EditRuntimeConfig(edited->text, o, "fuzz-config");
    if (again.ok() && again->text != edited->text) __builtin_trap();
    (void)gpunode::container::UnifiedDiff(text, edited->text, "a", "b");
  }
  return 0;
}
