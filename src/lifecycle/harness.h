// The component harness: one process runs its long-running parts as components — the agent the
// node's services (cdi, runtime, plugin, labels, exporter, validator); a stand-alone plugin or
// exporter its one; a cluster-side controller links it without the agent. The harness owns what each command used to copy:
// the stop signal, logging (text or JSON lines), the clock, and restart with backoff. One failing
// component never takes the others down: its Run returns an error, the harness logs it, waits
// (1 s, doubling to 1 min; back to 1 s after 5 min of running) and runs it again.
//
// Components can be switched off and on while the process runs (node labels
// nvidia.com/gpu.deploy.<component>=false, a config reload) and restarted with new settings
// without touching the others (the kubelet registration of the plugin survives a change of the
// exporter's settings).
#ifndef GPUNODE_LIFECYCLE_HARNESS_H_
#define GPUNODE_LIFECYCLE_HARNESS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "src/base/clock.h"
#include "src/base/status.h"
#include "src/lifecycle/log.h"

namespace gpunode::lifecycle {

// A long-running part of a process.
class Component {
 public:
  virtual ~Component() = default;
  virtual std::string name() const = 0;
  // Runs until `stop` is requested (then returns OK promptly) or until it fails (returns the error;
  // the harness runs it again after a backoff). Returning OK without a stop counts as a failure
  // ("ended by itself"), except for one-shot components (below); so does an exception thrown from
  // it (logged with its what(); the process does not abort). Whatever a run that the harness asked
  // to stop returns, it is not a failure.
  virtual Status Run(std::stop_token stop) = 0;
  // Ready for its job (/readyz). Any thread.
  virtual bool Ready() const { return true; }
  // A one-shot component (cdi, runtime) finishes its job and returns OK: it is then "done", up
  // and ready, and not run again until restarted.
  virtual bool one_shot() const { return false; }
};

struct HarnessOptions {
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{60000};
  // Each pause drawn from [d, d * (1 + jitter)) (src/base/backoff.h); 0: exactly 1 s, 2 s, 4 s...
  double jitter = 0.0;
  // A run at least this long resets the backoff to initial_backoff.
  std::chrono::milliseconds stable_after{std::chrono::minutes(5)};
  // How long Stop() waits for the components to return from Run (steady clock). One that does not
  // is named in the log and left behind, so that the process can still clean up and exit before
  // the kubelet's SIGKILL (the chart's grace period is 30 s).
  std::chrono::milliseconds stop_timeout{std::chrono::seconds(10)};
  // A stand-alone command (`gpunode plugin`, `gpunode exporter`): the first failure stops
  // everything and is returned by failure() (the command exits, as NVIDIA's binaries do, and
  // Kubernetes restarts the container), instead of running the component again.
  bool fail_fast = false;
  // With fail_fast: called once, on the failing component's thread, after failure() is set (the
  // stand-alone command wakes its signal wait with it instead of polling).
  std::function<void()> on_failure;
};

// Why a component does not run. Each writer owns its reason and never clears another's, so the
// decision "run it?" is made in one place: a component runs when no reason holds. The first three
// switch it off (gpunode_component_enabled 0); the last two hold a switched-on component back
// for a while (state "waiting", not ready).
enum class OffReason {
  kConfig,        // its section's `enabled: false` (at start and after every reload)
  kNodeLabel,     // nvidia.com/gpu.deploy.<component>=false on the Node
  kUninstall,     // the DaemonSet is being deleted: what it writes is being removed
  kStartBarrier,  // the Node has not been read yet (per-node settings unknown)
  kMigChange,     // a MIG layout is being applied
};
const char* OffReasonName(OffReason r);

enum class ComponentState { kDisabled, kWaiting, kStarting, kRunning, kBackoff, kDone, kStopped };
const char* ComponentStateName(ComponentState s);

struct ComponentInfo {
  std::string name;
  bool enabled = false;  // no kConfig, kNodeLabel or kUninstall reason
  ComponentState state = ComponentState::kDisabled;
  bool up = false;       // running (or done) and Ready()
  int restarts = 0;      // runs after a failure
  std::string last_error;
  std::string off_why;   // the reasons it does not run now ("" when none)
};

class Harness {
 public:
  Harness(Clock& clock, Log& log, HarnessOptions options = {});
  // Stops everything and waits for every component thread, however long that takes: a process
  // that must exit while a component is stuck leaves with _exit after Stop() named it.
  ~Harness();
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  // Before Start. Components run in the order added; each on its own thread. `enabled` false is
  // OffReason::kConfig.
  void Add(std::unique_ptr<Component> c, bool enabled = true);
  void Start();
  // Stops every component (each Run sees its stop_token) and waits up to options.stop_timeout for
  // them. Returns the names of those still inside Run then (logged as stuck); empty when all
  // ended. Callable again (it waits again for the ones left).
  std::vector<std::string> Stop();

  // Sets or clears one reason for a component not to run; a running component that gets a reason
  // is stopped, one that loses its last reason starts at once (no backoff: a stop the harness
  // asked for is never a failure). `detail` is logged ("nvidia.com/gpu.deploy.dcgm=false").
  // false: no such component.
  bool SetOff(const std::string& name, OffReason why, bool off, const std::string& detail = "");
  // The config's switch: SetOff(name, OffReason::kConfig, !enabled).
  bool SetEnabled(const std::string& name, bool enabled) { return SetOff(name, OffReason::kConfig, !enabled); }
  // Waits (steady clock) until the component is not inside Run. true when it is not; false at
  // the timeout or for an unknown name.
  bool WaitStopped(const std::string& name, std::chrono::milliseconds timeout);
  // Stops a running component and runs it again at once (no backoff): new settings.
  bool Restart(const std::string& name);
  // Replaces a component's implementation (new settings), running the new one if enabled.
  bool Replace(std::unique_ptr<Component> c);

  std::vector<ComponentInfo> Components() const;
  // With fail_fast: the first failure (OK while none). Its component's name in `*who`.
  Status failure(std::string* who = nullptr) const;
  // All enabled components up.
  bool AllUp() const;
  // /healthz, /readyz and the metrics gpunode_component_up / _restarts_total, as text.
  std::string MetricsText() const;

 private:
  struct Slot;
  void Loop(Slot* slot) ABSL_LOCKS_EXCLUDED(mu_);
  Slot* Find(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the component once; an exception thrown from Run is a failed run (with its what()).
  static Status RunOnce(Component& c, std::stop_token stop);

  Clock& clock_;
  Log& log_;
  HarnessOptions options_;
  // Guards slots_ and each Slot's fields but `thread` (set by Start, joined by Stop). A Loop waits
  // with Await: every change it waits for (reasons, restart_requested, stop_) is made with mu_
  // held, and absl re-checks the waiting conditions when mu_ is released. Timed waits (Stop,
  // WaitStopped) use `changed_` on the steady clock (src/base/held_mutex.h): every change of
  // in_run and exited notifies it.
  mutable absl::Mutex mu_;
  std::condition_variable_any changed_;
  std::vector<std::unique_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  std::stop_source stop_;  // requested only with mu_ held (see above)
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  Status failure_ ABSL_GUARDED_BY(mu_);
  std::string failed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpunode::lifecycle

#endif  // GPUNODE_LIFECYCLE_HARNESS_H_
