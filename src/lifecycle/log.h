// The log of a long-running process made of components (the agent, a stand-alone plugin or
// exporter, a cluster-side controller).
#ifndef GPUNODE_LIFECYCLE_LOG_H_
#define GPUNODE_LIFECYCLE_LOG_H_

#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gpunode::lifecycle {

// Log lines: "2026-12-01T13:00:00Z gpunode agent [plugin] message" or, with json, one object per
// line: {"time":"...","level":"info","component":"plugin","msg":"..."}. Thread-safe.
class Log {
 public:
  enum class Format { kText, kJson };
  using Sink = std::function<void(const std::string& line)>;
  explicit Log(Format format = Format::kText, Sink sink = nullptr);
  // A stand-alone command's text lines: "2026-12-01T13:00:00Z gpunode plugin: message".
  void set_program(std::string program) { program_ = std::move(program); }
  void Info(const std::string& component, const std::string& msg) { Write("info", component, msg); }
  void Warn(const std::string& component, const std::string& msg) { Write("warning", component, msg); }
  void Error(const std::string& component, const std::string& msg) { Write("error", component, msg); }
  // A logger for one component (the signature the plugin and exporter take).
  std::function<void(const std::string&)> For(const std::string& component);
  void Write(const char* level, const std::string& component, const std::string& msg);

 private:
  Format format_;
  absl::Mutex mu_;  // one line at a time
  Sink sink_ ABSL_GUARDED_BY(mu_);  // nullptr: stderr
  std::string program_;
};

}  // namespace gpunode::lifecycle

#endif  // GPUNODE_LIFECYCLE_LOG_H_
