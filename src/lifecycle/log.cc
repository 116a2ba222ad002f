#include "src/lifecycle/log.h"

#include <ctime>
#include <iostream>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "src/base/json.h"

namespace gpunode::lifecycle {

Log::Log(Format format, Sink sink) : format_(format), sink_(std::move(sink)) {}

std::function<void(const std::string&)> Log::For(const std::string& component) {
  return [this, component](const std::string& msg) { Info(component, msg); };
}

void Log::Write(const char* level, const std::string& component, const std::string& msg) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::string line;
  if (format_ == Format::kText && !program_.empty()) {
    line = absl::StrCat(when, " ", program_, ": ",
                        std::string_view(level) == "info" ? "" : absl::StrCat(level, ": "), msg);
  } else if (format_ == Format::kJson) {
    nlohmann::ordered_json j = {{"time", when}, {"level", level}, {"component", component}, {"msg", msg}};
    line = DumpJson(j, -1);
  } else {
    line = absl::StrCat(when, " gpunode agent [", component, "] ",
                        std::string_view(level) == "info" ? "" : absl::StrCat(level, ": "), msg);
  }
  absl::MutexLock lock(&mu_);
  if (sink_) {
    sink_(line);
  } else {
    std::cerr << line << std::endl;
  }
}

}  // namespace gpunode::lifecycle
