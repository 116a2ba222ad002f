// GFD's --sleep-interval (also the device-plugin config's flags.gfd.sleepInterval and
// `gpunode k8s uninstall --timeout`): a small Go-duration reader.
#ifndef GPUNODE_DEVICES_SLEEP_INTERVAL_H_
#define GPUNODE_DEVICES_SLEEP_INTERVAL_H_

#include "absl/strings/string_view.h"
#include "src/base/status.h"

namespace gpunode::devices {

// GFD's --sleep-interval: a Go duration of whole seconds ("60s", "5m", "1h30m", "90" = seconds)
// or "infinite" (-1: label once, then wait for a signal). Returns seconds; below one second,
// zero, negative and malformed text are InvalidArgument.
StatusOr<int> ParseSleepInterval(absl::string_view text);

}  // namespace gpunode::devices

#endif  // GPUNODE_DEVICES_SLEEP_INTERVAL_H_
