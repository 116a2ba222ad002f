// The diagnosis catalogue (src/doctor/catalogue.cc): its entries are well formed, and
// docs/doctor.md's catalogue table lists exactly its ids, in its order, with their status, layers
// and symptom. The doc is checked rather than generated: the table is ~55 rows that change rarely,
// a failing check prints the rows to paste, and no tool target or regeneration step is needed.
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/doctor/catalogue.h"

namespace gpunode::doctor {
namespace {

// The catalogue's rows as docs/doctor.md writes them, one per id, in the catalogue's order.
std::vector<std::string> CatalogueRows() {
  std::vector<std::string> ids;
  std::map<std::string, std::vector<const Advice*>> by_id;
  for (const Advice& a : Catalogue()) {
    std::string id(a.id);
    if (!by_id.count(id)) ids.push_back(id);
    by_id[id].push_back(&a);
  }
  std::vector<std::string> rows;
  for (const std::string& id : ids) {
    const std::vector<const Advice*>& entries = by_id[id];
    std::vector<std::string> statuses;
    for (CheckStatus s : {CheckStatus::kWarn, CheckStatus::kFail}) {
      if (std::any_of(entries.begin(), entries.end(), [&](const Advice* a) { return a->status == s; })) {
        statuses.push_back(std::string(StatusName(s)));
      }
    }
    std::vector<std::string> layers;
    for (Layer l : entries[0]->layers) layers.push_back(std::string(LayerId(l)));
    rows.push_back(absl::StrCat("| `", id, "` | ", absl::StrJoin(statuses, "/"), " | ", absl::StrJoin(layers, ", "),
                                " | ", std::string(entries[0]->symptom), " |"));
  }
  return rows;
}

// The rows of the table under "## Diagnosis catalogue" in docs/doctor.md.
std::vector<std::string> DocRows() {
  std::ifstream in(GPUNODE_SOURCE_DIR "/docs/doctor.md");
  EXPECT_TRUE(in.good()) << "cannot read docs/doctor.md";
  std::vector<std::string> rows;
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (absl::StartsWith(line, "## ")) in_section = line == "## Diagnosis catalogue";
    if (in_section && absl::StartsWith(line, "| `")) rows.push_back(line);
  }
  return rows;
}

TEST(Catalogue, DocListsEveryIdWithItsStatusLayersAndSymptom) {
  std::vector<std::string> want = CatalogueRows();
  std::vector<std::string> doc = DocRows();
  EXPECT_EQ(absl::StrJoin(doc, "\n"), absl::StrJoin(want, "\n"))
      << "docs/doctor.md's catalogue differs from src/doctor/catalogue.cc; its rows should be:\n"
      << absl::StrJoin(want, "\n");
}

TEST(Catalogue, EntriesAreWellFormed) {
  // The first layer is where the check lives, and the id's prefix names it.
  const std::map<std::string, Layer> prefix_layer = {
      {"hardware", Layer::kHardware},          {"kernel", Layer::kKernelDriver},
      {"driver", Layer::kUserDriver},          {"cuda", Layer::kUserDriver},
      {"toolchain", Layer::kToolchain},        {"runtime", Layer::kContainerRuntime},
      {"kubelet", Layer::kOrchestrator}};
  std::set<std::pair<std::string_view, std::string_view>> keys;
  std::map<std::string_view, const Advice*> first;
  std::string_view previous;
  std::set<std::string_view> closed;  // ids whose group has ended
  for (const Advice& a : Catalogue()) {
    SCOPED_TRACE(std::string(a.id) + " " + std::string(a.variant));
    EXPECT_TRUE(keys.insert({a.id, a.variant}).second) << "duplicate entry";
    if (a.id != previous) {
      EXPECT_FALSE(closed.count(a.id)) << "the entries of an id must be adjacent";
      closed.insert(previous);
      previous = a.id;
    }
    std::string prefix(a.id.substr(0, a.id.find('.')));
    ASSERT_TRUE(prefix_layer.count(prefix)) << "unknown id prefix";
    ASSERT_FALSE(a.layers.empty());
    EXPECT_EQ(a.layers[0], prefix_layer.at(prefix));
    EXPECT_TRUE(a.status == CheckStatus::kWarn || a.status == CheckStatus::kFail);
    EXPECT_FALSE(a.summary.empty());
    EXPECT_FALSE(a.diagnosis.empty());
    EXPECT_FALSE(a.action.empty());
    for (std::string_view text : {a.summary, a.diagnosis, a.action, a.symptom}) {
      EXPECT_EQ(std::count(text.begin(), text.end(), '{'), std::count(text.begin(), text.end(), '}'))
          << "unbalanced placeholder in: " << text;
    }
    EXPECT_FALSE(absl::StrContains(std::string(a.symptom), "|")) << "a | would split the doc's table row";
    auto [it, is_first] = first.emplace(a.id, &a);
    if (is_first) {
      EXPECT_FALSE(a.symptom.empty()) << "the first entry of an id carries the doc's symptom";
    } else {
      EXPECT_TRUE(a.symptom.empty()) << "only the first entry of an id carries the symptom";
      EXPECT_EQ(a.layers, it->second->layers) << "the variants of an id disagree on the layers";
    }
  }
}

TEST(Catalogue, MakeFindingFillsPlaceholders) {
  Finding f = MakeFinding("hardware.row-remap-pending",
                          {.observed = "remap pending",
                           .expected = "no pending remap",
                           .args = {{"gpu", "GPU 1 (0000:2a:00.0)"}, {"index", 1}}});
  EXPECT_EQ(f.id, "hardware.row-remap-pending");
  EXPECT_EQ(f.status, CheckStatus::kWarn);
  EXPECT_EQ(f.summary, "GPU 1 (0000:2a:00.0) has a row remap pending");
  EXPECT_EQ(f.observed, "remap pending");
  EXPECT_EQ(f.expected, "no pending remap");
  EXPECT_EQ(f.action, "Drain the GPU and reset it (nvidia-smi -r -i 1) or reboot.");
  EXPECT_THAT(f.layers, ::testing::ElementsAre(Layer::kHardware));

  // A value's own braces are text, not placeholders.
  EXPECT_EQ(MakeFinding("hardware.hot", {.args = {{"gpu", "GPU {x}"}}}).summary, "GPU {x} is hot");
  // The variant picks the words.
  EXPECT_EQ(MakeFinding("toolchain.newer-than-driver",
                        {.variant = "newer-major",
                         .args = {{"toolkit", "13.0"}, {"max", "12.4"}, {"toolkit_minor", "13.0"}}})
                .status,
            CheckStatus::kFail);
}

TEST(Catalogue, CallerBugsFailLoudly) {
  EXPECT_THROW(MakeFinding("hardware.no-such-finding", {}), std::logic_error);
  EXPECT_THROW(MakeFinding("hardware.hot", {.variant = "no-such-variant", .args = {{"gpu", "GPU 0"}}}),
               std::logic_error);
  EXPECT_THROW(MakeFinding("hardware.hot", {.args = {{"gpo", "GPU 0"}}}), std::logic_error);  // misspelt
}

}  // namespace
}  // namespace gpunode::doctor
