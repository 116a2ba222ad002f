// src/base/subprocess.h: the child's signals, its process group and deadline, the output cap, a
// child that daemonizes, and the errors of a child that could not start.
#include "src/base/subprocess.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gpunode {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// What a long-running gpunode does (the agent, the plugin): SIGTERM blocked to take it with
// sigwait, and here also ignored. Restored when the test ends.
class BlockedSigterm {
 public:
  BlockedSigterm() {
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, &old_mask_);
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGTERM, &ign, &old_action_);
  }
  ~BlockedSigterm() {
    sigaction(SIGTERM, &old_action_, nullptr);
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }

 private:
  sigset_t old_mask_;
  struct sigaction old_action_ {};
};

bool Gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  return text.empty() || (close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z');
}

TEST(SubprocessTest, AChildStartedWithSigtermBlockedAndIgnoredInTheParentReceivesSigterm) {
  BlockedSigterm blocked;
  SubprocessOptions o;
  o.argv = {"/bin/sleep", "30"};
  auto pid = SpawnSubprocess(o, -1);
  ASSERT_OK(pid) << pid.status();
  ASSERT_EQ(::kill(*pid, SIGTERM), 0);
  int status = 0;
  pid_t w = 0;
  for (int i = 0; i < 200 && (w = ::waitpid(*pid, &status, WNOHANG)) == 0; ++i) std::this_thread::sleep_for(10ms);
  if (w == 0) {
    ::kill(*pid, SIGKILL);
    ::waitpid(*pid, &status, 0);
    FAIL() << "the child did not end at SIGTERM: it inherited the parent's blocked or ignored SIGTERM";
  }
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);

  // The same through RunSubprocess: the child's own SIGTERM ends it.
  SubprocessOptions self;
  self.argv = {"/bin/sh", "-c", "kill -TERM $$; echo survived"};
  self.timeout = 10s;
  auto r = RunSubprocess(self);
  ASSERT_OK(r) << r.status();
  EXPECT_EQ(r->term_signal, SIGTERM);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_EQ(r->out, "");
}

TEST(SubprocessTest, AChildOverItsDeadlineIsKilledWithItsGroup) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("gpn-subprocess-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string pidfile = (dir / "pid").string();
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", "sleep 30 & echo $! > " + pidfile + "; wait"};
  o.timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  auto r = RunSubprocess(o);
  ASSERT_OK(r) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_FALSE(r->stopped);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  int grandchild = 0;
  std::ifstream(pidfile) >> grandchild;
  ASSERT_GT(grandchild, 0);
  bool gone = false;
  for (int i = 0; i < 100 && !(gone = Gone(grandchild)); ++i) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(gone) << "the grandchild " << grandchild << " outlived the deadline";
  std::filesystem::remove_all(dir);

  // A stop ends it the same way, said apart from the deadline.
  std::stop_source stop;
  SubprocessOptions s;
  s.argv = {"/bin/sleep", "30"};
  s.stop = stop.get_token();
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    stop.request_stop();
  });
  auto stopped = RunSubprocess(s);
  stopper.join();
  ASSERT_OK(stopped) << stopped.status();
  EXPECT_TRUE(stopped->stopped);
  EXPECT_FALSE(stopped->timed_out);
}

TEST(SubprocessTest, OutputIsCappedPerStreamAndTheChildIsNeverBlockedByIt) {
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", "head -c 300000 /dev/zero; echo err >&2; exit 3"};
  o.timeout = 20s;
  o.max_output = 1000;
  auto r = RunSubprocess(o);
  ASSERT_OK(r) << r.status();
  EXPECT_EQ(r->exit_code, 3);  // it wrote everything and ended: the rest was read and dropped
  EXPECT_EQ(r->out.size(), 1000u);
  EXPECT_TRUE(r->out_truncated);
  EXPECT_EQ(r->err, "err\n");
  EXPECT_FALSE(r->err_truncated);

  SubprocessOptions merged;
  merged.argv = {"/bin/sh", "-c", "cat; echo err >&2"};
  merged.input = "hello\n";
  merged.merge_output = true;
  merged.timeout = 10s;
  auto m = RunSubprocess(merged);
  ASSERT_OK(m) << m.status();
  EXPECT_EQ(m->out, "hello\nerr\n");
  EXPECT_EQ(m->err, "");
}

TEST(SubprocessTest, AChildThatLeftADaemonHoldingItsPipesDoesNotHoldTheCaller) {
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", "setsid sleep 4 & echo started"};
  o.timeout = 20s;
  const auto start = std::chrono::steady_clock::now();
  auto r = RunSubprocess(o);
  ASSERT_OK(r) << r.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2500ms) << "read until the daemon ended";
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->out, "started\n");
}

TEST(SubprocessTest, AChildThatCannotStartIsAnErrorNamingTheStep) {
  SubprocessOptions missing;
  missing.argv = {"/nonexistent/gpunode-x"};
  auto r = RunSubprocess(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("exec /nonexistent/gpunode-x"));

  SubprocessOptions step;
  step.argv = {"/bin/true"};
  step.in_child = [](const char** what) {
    *what = "enter the test namespace";
    return EPERM;
  };
  auto s = RunSubprocess(step);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("enter the test namespace /bin/true"));

  SubprocessOptions none;
  EXPECT_FALSE(RunSubprocess(none).ok());
  auto spawned = SpawnSubprocess(missing, -1);
  EXPECT_FALSE(spawned.ok());
}

}  // namespace
}  // namespace gpunode
