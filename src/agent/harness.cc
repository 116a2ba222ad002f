#include "src/agent/harness.h"

#include <pthread.h>

#include <condition_variable>
#include <ctime>
#include <iostream>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "src/base/json.h"

namespace gpunode::agent {

bool RealClock::WaitUntil(TimePoint deadline, std::stop_token stop) {
  // A plain sleep that a stop ends: std::condition_variable_any is the one wait that takes a
  // stop_token, and its local mutex guards nothing.
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock<std::mutex> lock(m);
  cv.wait_until(lock, stop, deadline, [] { return false; });
  return !stop.stop_requested();
}

Clock::TimePoint FakeClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

bool FakeClock::WaitUntil(TimePoint deadline, std::stop_token stop) {
  // The Await below is looked at again whenever mu_ is released; a stop is requested without
  // mu_, so its callback takes mu_ once. Declared before `lock`: it is never destroyed (which
  // waits for a running callback) while this thread holds mu_.
  std::stop_callback wake(stop, [this] { absl::MutexLock touch(&mu_); });
  absl::MutexLock lock(&mu_);
  ++waiters_;
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop.stop_requested() || now_ >= deadline; };
  mu_.Await(absl::Condition(&done));
  --waiters_;
  return !stop.stop_requested();
}

void FakeClock::Advance(std::chrono::milliseconds d) {
  absl::MutexLock lock(&mu_);
  now_ += d;
}

int FakeClock::waiters() const {
  absl::MutexLock lock(&mu_);
  return waiters_;
}

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

const char* ComponentStateName(ComponentState s) {
  switch (s) {
    case ComponentState::kDisabled: return "disabled";
    case ComponentState::kStarting: return "starting";
    case ComponentState::kRunning: return "running";
    case ComponentState::kBackoff: return "backoff";
    case ComponentState::kDone: return "done";
    case ComponentState::kStopped: return "stopped";
  }
  return "?";
}

struct Harness::Slot {
  std::shared_ptr<Component> component;
  std::string name;
  bool enabled = true;
  ComponentState state = ComponentState::kStarting;
  int restarts = 0;
  std::string last_error;
  bool restart_requested = false;
  std::stop_source run_stop;  // the current run's (or backoff's)
  std::thread thread;
};

Harness::Harness(Clock& clock, Log& log, HarnessOptions options)
    : clock_(clock), log_(log), options_(options) {}

Harness::~Harness() { Stop(); }

void Harness::Add(std::unique_ptr<Component> c, bool enabled) {
  auto slot = std::make_unique<Slot>();
  slot->name = c->name();
  slot->component = std::move(c);
  slot->enabled = enabled;
  slot->state = enabled ? ComponentState::kStarting : ComponentState::kDisabled;
  absl::MutexLock lock(&mu_);
  slots_.push_back(std::move(slot));
}

void Harness::Start() {
  absl::MutexLock lock(&mu_);
  if (started_) return;
  started_ = true;
  for (auto& s : slots_) {
    Slot* slot = s.get();
    slot->thread = std::thread([this, slot] { Loop(slot); });
  }
}

void Harness::Stop() {
  std::vector<Slot*> slots;  // joined without mu_: the loops take it to finish
  {
    absl::MutexLock lock(&mu_);
    stop_.request_stop();
    for (auto& s : slots_) {
      s->run_stop.request_stop();
      slots.push_back(s.get());
    }
  }
  for (Slot* s : slots) {
    if (s->thread.joinable()) s->thread.join();
  }
}

void Harness::Loop(Slot* slot) {
  // "gn:plugin" in top -H and /proc/PID/task/*/comm (15 characters at most).
  ::pthread_setname_np(::pthread_self(), ("gn:" + slot->name).substr(0, 15).c_str());
  const std::stop_token harness_stop = stop_.get_token();
  auto backoff = options_.initial_backoff;
  while (!harness_stop.stop_requested()) {
    std::shared_ptr<Component> c;
    std::stop_source run;
    {
      absl::MutexLock lock(&mu_);
      if (!slot->enabled) slot->state = ComponentState::kDisabled;
      auto enabled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return slot->enabled || harness_stop.stop_requested();
      };
      mu_.Await(absl::Condition(&enabled));
      if (!slot->enabled) break;
      slot->run_stop = std::stop_source();
      run = slot->run_stop;
      slot->restart_requested = false;
      slot->state = ComponentState::kRunning;
      c = slot->component;
    }
    const Clock::TimePoint started = clock_.Now();
    Status st;
    {
      std::stop_callback forward(harness_stop, [run]() mutable { run.request_stop(); });
      st = c->Run(run.get_token());
    }
    absl::ReleasableMutexLock lock(&mu_);
    if (harness_stop.stop_requested()) break;
    if (slot->restart_requested || !slot->enabled) {
      log_.Info(slot->name, slot->enabled ? "restarting with new settings" : "switched off");
      backoff = options_.initial_backoff;
      continue;
    }
    if (st.ok() && c->one_shot()) {
      slot->state = ComponentState::kDone;
      slot->last_error.clear();
      backoff = options_.initial_backoff;
      auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return slot->restart_requested || !slot->enabled || harness_stop.stop_requested();
      };
      mu_.Await(absl::Condition(&changed));
      continue;
    }
    slot->last_error = st.ok() ? std::string("ended by itself") : std::string(st.message());
    if (options_.fail_fast) {
      if (failure_.ok()) {
        failure_ = st.ok() ? absl::InternalError(slot->last_error) : st;
        failed_ = slot->name;
      }
      slot->state = ComponentState::kStopped;
      stop_.request_stop();
      for (auto& other : slots_) other->run_stop.request_stop();
      lock.Release();
      if (options_.on_failure) options_.on_failure();
      return;
    }
    ++slot->restarts;
    slot->state = ComponentState::kBackoff;
    if (clock_.Now() - started >= options_.stable_after) backoff = options_.initial_backoff;
    log_.Error(slot->name, absl::StrCat(slot->last_error, "; running it again in ",
                                        std::chrono::duration<double>(backoff).count(), " s"));
    slot->run_stop = std::stop_source();
    std::stop_source wait = slot->run_stop;
    lock.Release();
    {
      std::stop_callback forward(harness_stop, [wait]() mutable { wait.request_stop(); });
      clock_.WaitFor(backoff, wait.get_token());
    }
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
  absl::MutexLock lock(&mu_);
  slot->state = ComponentState::kStopped;
}

bool Harness::SetEnabled(const std::string& name, bool enabled) {
  {
    absl::MutexLock lock(&mu_);
    Slot* slot = nullptr;
    for (auto& s : slots_) {
      if (s->name == name) slot = s.get();
    }
    if (slot == nullptr) return false;
    if (slot->enabled == enabled) return true;
    slot->enabled = enabled;
    if (!enabled) slot->run_stop.request_stop();
    log_.Info(name, enabled ? "switched on" : "switching off");
  }
  return true;
}

bool Harness::Restart(const std::string& name) {
  {
    absl::MutexLock lock(&mu_);
    Slot* slot = nullptr;
    for (auto& s : slots_) {
      if (s->name == name) slot = s.get();
    }
    if (slot == nullptr) return false;
    slot->restart_requested = true;
    slot->run_stop.request_stop();
  }
  return true;
}

bool Harness::Replace(std::unique_ptr<Component> c) {
  const std::string name = c->name();
  {
    absl::MutexLock lock(&mu_);
    Slot* slot = nullptr;
    for (auto& s : slots_) {
      if (s->name == name) slot = s.get();
    }
    if (slot == nullptr) return false;
    slot->component = std::move(c);
  }
  return Restart(name);
}

std::vector<ComponentInfo> Harness::Components() const {
  absl::MutexLock lock(&mu_);
  std::vector<ComponentInfo> out;
  for (const auto& s : slots_) {
    ComponentInfo i;
    i.name = s->name;
    i.enabled = s->enabled;
    i.state = s->state;
    i.restarts = s->restarts;
    i.last_error = s->last_error;
    i.up = s->enabled && (s->state == ComponentState::kDone ||
                          (s->state == ComponentState::kRunning && s->component->Ready()));
    out.push_back(std::move(i));
  }
  return out;
}

Status Harness::failure(std::string* who) const {
  absl::MutexLock lock(&mu_);
  if (who != nullptr) *who = failed_;
  return failure_;
}

bool Harness::AllUp() const {
  for (const ComponentInfo& i : Components()) {
    if (i.enabled && !i.up) return false;
  }
  return true;
}

std::string Harness::MetricsText() const {
  const std::vector<ComponentInfo> all = Components();
  std::string up =
      "# HELP gpunode_component_up Whether the agent's component runs and is ready (1), or not (0: starting, "
      "failing, switched off).\n# TYPE gpunode_component_up gauge\n";
  std::string enabled =
      "# HELP gpunode_component_enabled Whether the agent's component is switched on (config, node labels).\n"
      "# TYPE gpunode_component_enabled gauge\n";
  std::string restarts =
      "# HELP gpunode_component_restarts_total Runs of the agent's component after it failed.\n"
      "# TYPE gpunode_component_restarts_total counter\n";
  for (const ComponentInfo& i : all) {
    absl::StrAppend(&up, "gpunode_component_up{component=\"", i.name, "\"} ", i.up ? 1 : 0, "\n");
    absl::StrAppend(&enabled, "gpunode_component_enabled{component=\"", i.name, "\"} ", i.enabled ? 1 : 0, "\n");
    absl::StrAppend(&restarts, "gpunode_component_restarts_total{component=\"", i.name, "\"} ", i.restarts, "\n");
  }
  return up + enabled + restarts;
}

}  // namespace gpunode::agent
