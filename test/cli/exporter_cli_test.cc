// `gpunode exporter`, the real binary: one page with --once, dcgm-exporter's environment
// variables, and bad input (counters CSV, web config, interval, listen address, a port in use):
// a clear message and a non-zero exit, never a crash. Serving over HTTP is in
// test/exporter/server_test.cc; a real Prometheus scraping it in test/e2e/exporter_prometheus_test.sh.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/run_gpunode.h"
#include "test/testing/temp_dir_test.h"

namespace gpunode {
namespace {

using ::gpunode::testing::RunGpunode;
using ::testing::HasSubstr;
using ::testing::Not;

class ExporterCliTest : public gpunode::testing::TempDirTest {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string p = Path(name);
    std::ofstream(p) << text;
    return p;
  }
};

TEST_F(ExporterCliTest, OncePrintsOnePageWithTheDefaultCounters) {
  auto r = RunGpunode("--simulate dgx-h200 exporter --once 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).\n"));
  EXPECT_THAT(r.out, HasSubstr("Hostname=\"dgx-h200-01\""));
  EXPECT_THAT(r.out, HasSubstr("DCGM_FI_DRIVER_VERSION=\"580.95.05\""));
  EXPECT_THAT(r.out, HasSubstr("gpunode_build_info{version="));
}

TEST_F(ExporterCliTest, HonoursDcgmExporterEnvironmentAndFlags) {
  const std::string csv = Write("c.csv", "# mine\nDCGM_FI_DEV_GPU_TEMP, gauge, Temp.\n");
  auto r = RunGpunode("--simulate dgx-h200 exporter --once --hostname-label hostname 2>/dev/null",
                      {{"DCGM_EXPORTER_COLLECTORS", csv}, {"NODE_NAME", "node-7"}});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("# HELP DCGM_FI_DEV_GPU_TEMP Temp.\n"));
  EXPECT_THAT(r.out, HasSubstr(",hostname=\"node-7\"} "));
  EXPECT_THAT(r.out, Not(HasSubstr("DCGM_FI_DEV_SM_CLOCK")));
  auto n = RunGpunode("--simulate dgx-h200 exporter --once -n -f " + csv + " 2>/dev/null");
  ASSERT_EQ(n.exit_code, 0) << n.out;
  EXPECT_THAT(n.out, Not(HasSubstr("Hostname=")));
}

TEST_F(ExporterCliTest, MalformedCountersAreRefusedWithTheLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"DCGM_FI_DEV_GPU_TEMP, gauge\n", "line 1"},
      {"# c\nDCGM_FI_DEV_NOT_A_FIELD, gauge, x.\n", "unknown field 'DCGM_FI_DEV_NOT_A_FIELD'"},
      {"DCGM_FI_DEV_GPU_TEMP, histogram, x.\n", "unknown type 'histogram'"},
  };
  for (const auto& [text, want] : cases) {
    const std::string csv = Write("bad.csv", text);
    auto r = RunGpunode("--simulate dgx-h200 exporter --once -f " + csv);
    EXPECT_EQ(r.exit_code, 3) << text << r.out;
    EXPECT_THAT(r.out, HasSubstr(want)) << text;
    EXPECT_THAT(r.out, HasSubstr(csv)) << text;
  }
  auto missing = RunGpunode("--simulate dgx-h200 exporter --once -f /nonexistent/counters.csv");
  EXPECT_EQ(missing.exit_code, 3);
  EXPECT_THAT(missing.out, HasSubstr("/nonexistent/counters.csv"));
}

TEST_F(ExporterCliTest, BadWebConfigIntervalOrAddressIsAUsageError) {
  auto unreadable = RunGpunode("--simulate dgx-h200 exporter --web-config-file /nonexistent/web.yml");
  EXPECT_EQ(unreadable.exit_code, 3) << unreadable.out;
  EXPECT_THAT(unreadable.out, HasSubstr("web config file /nonexistent/web.yml: cannot read"));
  const std::string web = Write("web.yml", "tls_server_config:\n  cert_file: nope.crt\n  key_file: nope.key\n");
  auto nocert = RunGpunode("--simulate dgx-h200 exporter --web-config-file " + web);
  EXPECT_EQ(nocert.exit_code, 3) << nocert.out;
  EXPECT_THAT(nocert.out, HasSubstr("nope.crt"));
  auto interval = RunGpunode("--simulate dgx-h200 exporter -c 5");
  EXPECT_EQ(interval.exit_code, 3);
  EXPECT_THAT(interval.out, HasSubstr("--collect-interval \"5\""));
  auto env_interval = RunGpunode("--simulate dgx-h200 exporter", {{"DCGM_EXPORTER_INTERVAL", "soon"}});
  EXPECT_EQ(env_interval.exit_code, 3);
  EXPECT_THAT(env_interval.out, HasSubstr("\"soon\""));
  auto listen = RunGpunode("--simulate dgx-h200 exporter --listen 9400");
  EXPECT_EQ(listen.exit_code, 3);
  EXPECT_THAT(listen.out, HasSubstr("listen address \"9400\""));
}

TEST_F(ExporterCliTest, APortInUseExitsWithTheReason) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string listen = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  auto r = RunGpunode("--simulate dgx-h200 exporter --listen " + listen);
  ::close(fd);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("cannot listen on " + listen + ": address already in use"));
}

}  // namespace
}  // namespace gpunode
