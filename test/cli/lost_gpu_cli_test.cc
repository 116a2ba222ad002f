// Issue #14, "a lost GPU disappears": the real binary on the simulated broken-fallen-gpu node
// (GPU 2, 0000:3a:00.0, fell off the bus). `doctor` lists it with its bus id and state in the text
// card and in JSON; `exporter` shows it as a lost row on its status page and with its bus id in
// gpunode_gpu_health.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/run_gpunode.h"
#include "test/testing/free_port.h"

namespace gpunode {
namespace {

using ::gpunode::testing::RunGpunode;
using ::gpunode::testing::RunShell;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

TEST(CliLostGpuTest, DoctorsCardListsTheLostGpuWithItsBusIdAndNvmlsError) {
  auto r = RunGpunode("--simulate broken-fallen-gpu doctor --no-cuda --color never");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.out, ContainsRegex("\n  2 +NVIDIA H100 80GB HBM3 +0000:3a:00.0 +lost \\(NVML: GPU is lost\\) +"
                                   "GPU-f48edef6-247e-4153-9d4f-19d7905b346f\n"))
      << r.out;
  EXPECT_THAT(r.out, HasSubstr("GPU 2 (0000:3a:00.0) has fallen off the bus"));
}

TEST(CliLostGpuTest, DoctorsJsonHasEveryGpuWithItsStateAndCountsTheLostOne) {
  auto r = RunGpunode("--simulate broken-fallen-gpu doctor --no-cuda -o json 2>/dev/null");
  ASSERT_EQ(r.exit_code, 2) << r.out;
  // Not const: a key the report lacks reads as null (a failure), not an assertion.
  nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << r.out;
  nlohmann::json& node = doc["baseline"]["node"];
  EXPECT_EQ(node["gpuCount"], 4);
  EXPECT_EQ(node["readableGpuCount"], 3);
  EXPECT_EQ(node["lostGpuCount"], 1);
  nlohmann::json& gpus = doc["baseline"]["gpus"];
  ASSERT_EQ(gpus.size(), 4u);
  for (unsigned i = 0; i < 4; ++i) {
    EXPECT_EQ(gpus[i]["index"], i);
    EXPECT_EQ(gpus[i]["state"], i == 2 ? "lost" : "ok");
  }
  EXPECT_EQ(gpus[2]["pciBusId"], "0000:3a:00.0");
  EXPECT_EQ(gpus[2]["uuid"], "GPU-f48edef6-247e-4153-9d4f-19d7905b346f");
  EXPECT_EQ(gpus[2]["error"], "GPU is lost");
  EXPECT_EQ(gpus[2]["nvmlError"], "NVML_ERROR_GPU_IS_LOST");
}

using ::gpunode::testing::FreePort;

TEST(CliLostGpuTest, ExportersStatusPageAndHealthSeriesNameTheLostGpuByItsBusId) {
  const std::string port = std::to_string(FreePort());
  // The exporter in the background, / and /metrics over bash's /dev/tcp, then the exporter stopped.
  const std::string script =
      "bash -c '" + std::string(GPUNODE_BIN_DIR) + "/gpunode --simulate broken-fallen-gpu exporter -c 1000 " +
      "--listen 127.0.0.1:" + port +
      " >/dev/null 2>&1 & pid=$!; "
      "get() { exec 3<>/dev/tcp/127.0.0.1/" + port +
      " || return 1; printf \"GET $1 HTTP/1.0\\r\\n\\r\\n\" >&3; cat <&3; exec 3<&-; }; "
      "for i in $(seq 1 100); do get /health 2>/dev/null | grep -q \"^OK\" && break; sleep 0.1; done; "
      "get /; get /metrics; kill $pid; wait $pid'";
  auto r = RunShell(script);
  EXPECT_THAT(r.out, HasSubstr("<tr class=\"gpu\"><td>2</td><td class=\"l\">NVIDIA H100 80GB HBM3</td>"
                               "<td class=\"l\">00000000:3A:00.0</td>"
                               "<td class=\"l\">GPU-f48edef6-247e-4153-9d4f-19d7905b346f</td>"))
      << r.out;
  EXPECT_THAT(r.out, HasSubstr("data-state=\"lost\">lost</span><span class=\"why\">GPU is lost "
                               "(NVML_ERROR_GPU_IS_LOST)</span>"));
  EXPECT_THAT(r.out, HasSubstr("gpunode_gpu_health{gpu=\"2\",UUID=\"GPU-f48edef6-247e-4153-9d4f-19d7905b346f\","
                               "pci_bus_id=\"00000000:3A:00.0\",device=\"nvidia2\",Hostname=\"gpu-node-fallen\"} 0\n"));
}

}  // namespace
}  // namespace gpunode
