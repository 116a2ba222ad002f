// The validator's re-check on the node context's clock: with a FakeClock, a change of the node is
// seen only when the clock passes the interval, never because real time passed. The checks are
// the real `gpunode doctor -o json` children on a simulated node (its profile edited live).
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/support/profile.h"
#include "src/agent/components.h"
#include "src/agent/config.h"
#include "src/agent/node_context.h"
#include "src/base/clock.h"
#include "test/testing/sim_library.h"
#include "test/testing/status_matchers.h"

namespace gpunode::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

TEST(ValidatorTest, TheReCheckWaitsForTheClockToPassTheInterval) {
  const fs::path dir = fs::temp_directory_path() / ("gpn-validator-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto source = sim::ResolveProfile("pcie-l40s-4");
  ASSERT_OK(source) << source.status();
  const std::string profile = (dir / "profile.yaml").string();
  std::ofstream(profile) << source->text;
  ::setenv("GPUNODE_SIM_LIBRARY", gpunode::testing::SimLibrary().c_str(), 1);

  FakeClock clock;
  NodeContextOptions o;
  o.self_args = {std::string(GPUNODE_BIN_DIR) + "/gpunode", "--simulate", profile};
  o.clock = &clock;
  NodeContext ctx(std::move(o));
  Log log(Log::Format::kText, [](const std::string&) {});
  AgentConfig c;
  c.validator.cuda = false;
  c.validator.interval = 60s;
  c.validator.retry = 60s;
  std::unique_ptr<Component> validator = MakeValidator(ctx, c, log, nullptr);
  std::jthread run([&](std::stop_token stop) { (void)validator->Run(stop); });

  ASSERT_TRUE(ctx.WaitGateDecided(std::chrono::steady_clock::now() + 120s, {}));
  ASSERT_TRUE(ctx.gate().open) << ctx.gate().message;
  EXPECT_THAT(ctx.gate().message, Not(HasSubstr("single GPUs failing")));

  // A GPU falls off the bus: only the next check can see it.
  std::string text = source->text;
  const std::string last = "temperature_c: 31}";
  ASSERT_NE(text.find(last), std::string::npos);
  text.replace(text.find(last), last.size(), "temperature_c: 31, lost: true}");
  std::ofstream(profile + ".tmp") << text;
  fs::rename(profile + ".tmp", profile);

  ASSERT_TRUE(clock.AwaitWaiters(1, 60s));  // the validator is in its wait
  std::this_thread::sleep_for(1500ms);      // real time passes: no check
  EXPECT_THAT(ctx.gate().message, Not(HasSubstr("single GPUs failing")));
  clock.Advance(59s);  // not yet the interval
  std::this_thread::sleep_for(300ms);
  EXPECT_THAT(ctx.gate().message, Not(HasSubstr("single GPUs failing")));
  clock.Advance(1s);  // the interval: it checks again
  bool seen = false;
  for (int i = 0; i < 1200 && !seen; ++i) {
    seen = ctx.gate().message.find("single GPUs failing") != std::string::npos;
    if (!seen) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(seen) << ctx.gate().message;
  EXPECT_TRUE(ctx.gate().open);  // one lost GPU does not close the gate
  run.request_stop();
  run.join();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpunode::agent
