// The status page at `/` over hand-made snapshots: one row per GPU, every row with the same
// cells, a GPU NVML cannot read shown as what it is (lost / unreadable) with its identity.
#include "src/exporter/status_page.h"

#include <regex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/gpu/nvml.h"

namespace gpunode::exporter {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

GpuSample Healthy(unsigned index) {
  GpuSample g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.pci_bus_id = "00000000:1" + std::to_string(index) + ":00.0";
  g.device = "nvidia" + std::to_string(index);
  g.model_name = "NVIDIA H100 80GB HBM3";
  g.memory_total_mib = 81559;
  g.set(FieldId::kGpuUtil, 12);
  g.set(FieldId::kFbUsed, 1024);
  g.set(FieldId::kGpuTemp, 35);
  g.set(FieldId::kPowerUsage, 71.3);
  return g;
}

// GPU 1 of 3 fell off the bus; its identity came from sysfs and /proc.
NodeSnapshot NodeWithALostGpu() {
  NodeSnapshot snap;
  snap.hostname = "gpu-node-fallen";
  snap.driver_version = "550.127.05";
  snap.gpus = {Healthy(0), Healthy(1), Healthy(2)};
  GpuSample& lost = snap.gpus[1];
  lost.healthy = false;
  lost.status = gpu::NvmlReturnToStatus(NVML_ERROR_GPU_IS_LOST, "nvmlDeviceGetHandleByIndex_v2(1)", "GPU is lost");
  lost.values.fill(std::nullopt);
  lost.pci_bus_id = "00000000:3A:00.0";
  lost.uuid = "GPU-f48edef6-247e-4153-9d4f-19d7905b346f";
  return snap;
}

std::vector<std::string> Rows(const std::string& page) {
  std::vector<std::string> rows;
  std::regex row("<tr class=\"gpu\">.*?</tr>");
  for (auto it = std::sregex_iterator(page.begin(), page.end(), row); it != std::sregex_iterator(); ++it) {
    rows.push_back(it->str());
  }
  return rows;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// Issue #14: the lost GPU's row showed empty model and UUID cells and NVML's raw error string.
TEST(StatusPageTest, ALostGpuHasARowWithItsBusIdTheStateLostAndTheErrorInWords) {
  const NodeSnapshot snap = NodeWithALostGpu();
  const std::string page = RenderStatusPage(&snap, StatusPageOptions{});
  const std::vector<std::string> rows = Rows(page);
  ASSERT_EQ(rows.size(), 3u) << page;
  const std::string& lost = rows[1];
  EXPECT_THAT(lost, HasSubstr("<td>1</td>"));
  EXPECT_THAT(lost, HasSubstr("<td class=\"l\">00000000:3A:00.0</td>"));
  EXPECT_THAT(lost, HasSubstr("<td class=\"l\">GPU-f48edef6-247e-4153-9d4f-19d7905b346f</td>"));
  EXPECT_THAT(lost, HasSubstr("data-state=\"lost\">lost</span>"));
  EXPECT_THAT(lost, HasSubstr("GPU is lost (NVML_ERROR_GPU_IS_LOST)"));
  EXPECT_THAT(lost, Not(HasSubstr("nvmlDeviceGetHandleByIndex")));  // the call is for logs, not the page
  // Unknown model: a dash, never an empty cell.
  EXPECT_THAT(lost, Not(HasSubstr("<td class=\"l\"></td>")));
  EXPECT_THAT(rows[0], HasSubstr("<td class=\"l\">00000000:10:00.0</td>"));
  EXPECT_THAT(rows[0], HasSubstr(">healthy<"));
}

TEST(StatusPageTest, EveryRowHasAsManyCellsAsTheHeaderWithAndWithoutPods) {
  const NodeSnapshot snap = NodeWithALostGpu();
  PodMapping pods;
  pods.ok = true;
  pods.by_device["GPU-0"] = {PodRef{.pod = "train-0", .namespace_name = "ml", .container = "main"}};
  const std::vector<const PodMapping*> mappings = {nullptr, &pods};
  for (const PodMapping* mapping : mappings) {
    StatusPageOptions options;
    options.pods = mapping;
    const std::string page = RenderStatusPage(&snap, options);
    const size_t header_start = page.find("<thead>");
    const size_t header_end = page.find("</thead>");
    ASSERT_NE(header_start, std::string::npos);
    const std::string header = page.substr(header_start, header_end - header_start);
    const size_t columns = Count(header, "<th>") + Count(header, "<th ");
    EXPECT_EQ(columns, mapping == nullptr ? 9u : 10u);
    for (const std::string& row : Rows(page)) EXPECT_EQ(Count(row, "<td"), columns) << row;
  }
}

TEST(StatusPageTest, AGpuNvmlCannotOpenForAnotherReasonIsUnreadable) {
  NodeSnapshot snap = NodeWithALostGpu();
  snap.gpus[1].status =
      gpu::NvmlReturnToStatus(NVML_ERROR_NO_PERMISSION, "nvmlDeviceGetHandleByIndex_v2(1)", "Insufficient Permissions");
  const std::vector<std::string> rows = Rows(RenderStatusPage(&snap, StatusPageOptions{}));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_THAT(rows[1], HasSubstr("data-state=\"unreadable\">unreadable</span>"));
  EXPECT_THAT(rows[1], HasSubstr("Insufficient Permissions (NVML_ERROR_NO_PERMISSION)"));
}

}  // namespace
}  // namespace gpunode::exporter
