#include "src/lifecycle/harness.h"

#include <pthread.h>

#include <condition_variable>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "src/base/backoff.h"
#include "src/base/held_mutex.h"

namespace gpunode::lifecycle {

const char* ComponentStateName(ComponentState s) {
  switch (s) {
    case ComponentState::kDisabled: return "disabled";
    case ComponentState::kWaiting: return "waiting";
    case ComponentState::kStarting: return "starting";
    case ComponentState::kRunning: return "running";
    case ComponentState::kBackoff: return "backoff";
    case ComponentState::kDone: return "done";
    case ComponentState::kStopped: return "stopped";
  }
  return "?";
}

const char* OffReasonName(OffReason r) {
  switch (r) {
    case OffReason::kConfig: return "off in the config";
    case OffReason::kNodeLabel: return "off by a Node label";
    case OffReason::kUninstall: return "off for the uninstall";
    case OffReason::kStartBarrier: return "waiting for the first read of the Node";
    case OffReason::kMigChange: return "waiting for a MIG change";
  }
  return "?";
}

namespace {
bool SwitchesOff(OffReason r) {
  return r == OffReason::kConfig || r == OffReason::kNodeLabel || r == OffReason::kUninstall;
}
}  // namespace

struct Harness::Slot {
  std::shared_ptr<Component> component;
  std::string name;
  std::map<OffReason, std::string> off;  // why it does not run (reason -> detail); empty: it runs
  ComponentState state = ComponentState::kStarting;
  int restarts = 0;
  std::string last_error;
  bool restart_requested = false;
  bool in_run = false;  // inside Component::Run
  bool exited = false;  // its Loop has returned
  std::stop_source run_stop;  // the current run's (or backoff's)
  std::thread thread;

  bool enabled() const {
    for (const auto& [r, detail] : off) {
      if (SwitchesOff(r)) return false;
    }
    return true;
  }
  std::string OffWhy() const {
    std::string out;
    for (const auto& [r, detail] : off) {
      absl::StrAppend(&out, out.empty() ? "" : "; ", OffReasonName(r), detail.empty() ? "" : " (", detail,
                      detail.empty() ? "" : ")");
    }
    return out;
  }
  ComponentState IdleState() const { return enabled() ? ComponentState::kWaiting : ComponentState::kDisabled; }
};

Harness::Harness(Clock& clock, Log& log, HarnessOptions options)
    : clock_(clock), log_(log), options_(options) {}

Harness::~Harness() {
  Stop();
  std::vector<Slot*> slots;
  {
    absl::MutexLock lock(&mu_);
    for (auto& s : slots_) slots.push_back(s.get());
  }
  for (Slot* s : slots) {
    if (s->thread.joinable()) s->thread.join();  // a stuck one is waited for here
  }
}

void Harness::Add(std::unique_ptr<Component> c, bool enabled) {
  auto slot = std::make_unique<Slot>();
  slot->name = c->name();
  slot->component = std::move(c);
  if (!enabled) slot->off[OffReason::kConfig] = "";
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

std::vector<std::string> Harness::Stop() {
  const auto deadline = std::chrono::steady_clock::now() + options_.stop_timeout;
  std::vector<Slot*> done;  // joined without mu_: the loops take it to finish
  std::vector<std::string> stuck;
  {
    absl::MutexLock lock(&mu_);
    stop_.request_stop();
    for (auto& s : slots_) s->run_stop.request_stop();
    if (!started_) return {};
    auto all_exited = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      for (auto& s : slots_) {
        if (!s->exited) return false;
      }
      return true;
    };
    HeldMutex held(mu_);
    changed_.wait_until(held, deadline, all_exited);
    for (auto& s : slots_) {
      if (s->exited) {
        done.push_back(s.get());
      } else {
        stuck.push_back(s->name);
      }
    }
  }
  for (Slot* s : done) {
    if (s->thread.joinable()) s->thread.join();
  }
  for (const std::string& name : stuck) {
    log_.Error(name, absl::StrCat("did not stop within ", std::chrono::duration<double>(options_.stop_timeout).count(),
                                  " s: left behind (stuck in its run)"));
  }
  return stuck;
}

Status Harness::RunOnce(Component& c, std::stop_token stop) {
  try {
    return c.Run(std::move(stop));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("exception from its run: ", e.what()));
  } catch (...) {
    return absl::InternalError("exception from its run (not a std::exception)");
  }
}

void Harness::Loop(Slot* slot) {
  // "gn:plugin" in top -H and /proc/PID/task/*/comm (15 characters at most).
  ::pthread_setname_np(::pthread_self(), ("gn:" + slot->name).substr(0, 15).c_str());
  const std::stop_token harness_stop = stop_.get_token();
  Backoff backoff({.initial = options_.initial_backoff, .max = options_.max_backoff, .jitter = options_.jitter});
  while (!harness_stop.stop_requested()) {
    std::shared_ptr<Component> c;
    std::stop_source run;
    {
      absl::MutexLock lock(&mu_);
      if (!slot->off.empty()) slot->state = slot->IdleState();
      auto runnable = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return slot->off.empty() || harness_stop.stop_requested();
      };
      mu_.Await(absl::Condition(&runnable));
      if (harness_stop.stop_requested()) break;
      slot->run_stop = std::stop_source();
      run = slot->run_stop;
      slot->restart_requested = false;
      slot->state = ComponentState::kRunning;
      slot->in_run = true;
      c = slot->component;
    }
    const Clock::TimePoint started = clock_.Now();
    Status st;
    {
      std::stop_callback forward(harness_stop, [run]() mutable { run.request_stop(); });
      st = RunOnce(*c, run.get_token());
    }
    absl::ReleasableMutexLock lock(&mu_);
    slot->in_run = false;
    changed_.notify_all();
    if (harness_stop.stop_requested()) break;
    // A run the harness asked to stop (switched off, a restart, switched off and on again before
    // it returned) is never a failure, whatever it returned.
    if (run.stop_requested()) {
      if (!slot->off.empty()) {
        log_.Info(slot->name, absl::StrCat("stopped: ", slot->OffWhy()));
      } else {
        log_.Info(slot->name, slot->restart_requested ? "restarting with new settings" : "running again");
      }
      backoff.Reset();
      continue;
    }
    if (st.ok() && c->one_shot()) {
      slot->state = ComponentState::kDone;
      slot->last_error.clear();
      backoff.Reset();
      auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return slot->restart_requested || !slot->off.empty() || harness_stop.stop_requested();
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
      slot->exited = true;
      changed_.notify_all();
      lock.Release();
      if (options_.on_failure) options_.on_failure();
      return;
    }
    ++slot->restarts;
    slot->state = ComponentState::kBackoff;
    if (clock_.Now() - started >= options_.stable_after) backoff.Reset();
    const std::chrono::milliseconds pause = backoff.Next();
    log_.Error(slot->name, absl::StrCat(slot->last_error, "; running it again in ",
                                        std::chrono::duration<double>(pause).count(), " s"));
    slot->run_stop = std::stop_source();
    std::stop_source wait = slot->run_stop;
    lock.Release();
    {
      std::stop_callback forward(harness_stop, [wait]() mutable { wait.request_stop(); });
      clock_.WaitFor(pause, wait.get_token());
    }
  }
  absl::MutexLock lock(&mu_);
  slot->state = ComponentState::kStopped;
  slot->in_run = false;
  slot->exited = true;
  changed_.notify_all();
}

Harness::Slot* Harness::Find(const std::string& name) {
  for (auto& s : slots_) {
    if (s->name == name) return s.get();
  }
  return nullptr;
}

bool Harness::SetOff(const std::string& name, OffReason why, bool off, const std::string& detail) {
  absl::MutexLock lock(&mu_);
  Slot* slot = Find(name);
  if (slot == nullptr) return false;
  const bool had = slot->off.count(why) > 0;
  if (had == off && (!off || slot->off[why] == detail)) return true;
  const bool was_runnable = slot->off.empty();
  if (off) {
    slot->off[why] = detail;
  } else {
    slot->off.erase(why);
  }
  if (was_runnable && !slot->off.empty()) {
    slot->run_stop.request_stop();  // a run, or a backoff: it waits for the reasons to go
    log_.Info(name, absl::StrCat(SwitchesOff(why) ? "switching off: " : "holding back: ", OffReasonName(why),
                                 detail.empty() ? "" : absl::StrCat(" (", detail, ")")));
  } else if (!was_runnable && slot->off.empty()) {
    log_.Info(name, absl::StrCat("switched on (", OffReasonName(why), " no more)"));
  }
  if (!slot->off.empty() && !slot->in_run && slot->state != ComponentState::kStopped) {
    slot->state = slot->IdleState();
  }
  return true;
}

bool Harness::WaitStopped(const std::string& name, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  absl::MutexLock lock(&mu_);
  Slot* slot = Find(name);
  if (slot == nullptr) return false;
  HeldMutex held(mu_);
  return changed_.wait_until(held, deadline, [slot]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !slot->in_run; });
}

bool Harness::Restart(const std::string& name) {
  absl::MutexLock lock(&mu_);
  Slot* slot = Find(name);
  if (slot == nullptr) return false;
  slot->restart_requested = true;
  slot->run_stop.request_stop();
  return true;
}

bool Harness::Replace(std::unique_ptr<Component> c) {
  const std::string name = c->name();
  {
    absl::MutexLock lock(&mu_);
    Slot* slot = Find(name);
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
    i.enabled = s->enabled();
    i.state = s->state;
    i.restarts = s->restarts;
    i.last_error = s->last_error;
    i.off_why = s->OffWhy();
    i.up = s->off.empty() && (s->state == ComponentState::kDone ||
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

}  // namespace gpunode::lifecycle
