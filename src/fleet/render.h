// Renderers of `gpunode fleet`'s answers: JSON documents (apiVersion gpunode/v1; kinds FleetReport,
// FleetCompat, FleetDrainPlan, documented in docs/fleet.md), the terminal tables, and one
// self-contained HTML page. They return strings; src/cli prints or writes them.
#ifndef GPUNODE_FLEET_RENDER_H_
#define GPUNODE_FLEET_RENDER_H_

#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/base/html.h"
#include "src/fleet/fleet.h"

namespace gpunode::fleet {

nlohmann::ordered_json ToJson(const FleetReport& report);
nlohmann::ordered_json ToJson(const FleetCompatReport& report);
nlohmann::ordered_json ToJson(const DrainPlan& plan);

// Summary, pools and findings; `list_nodes` adds one row per GPU node. `color`: ANSI colours.
// Every string that came from the cluster or a saved NodeList (names, labels, condition reasons
// and messages) is passed through TerminalSafe (src/base/terminal.h): escape sequences in a Node's
// condition message are shown, not obeyed.
std::string RenderText(const FleetReport& report, bool list_nodes, bool color);
std::string RenderText(const FleetCompatReport& report, bool color);
std::string RenderText(const DrainPlan& plan);

// One HTML page with no external asset (inline CSS, no script): the summary, findings, pools and
// GPU nodes of `report`, plus `compat` and `plan` when given. Every string that came from the
// cluster is escaped.
std::string RenderHtml(const FleetReport& report, const FleetCompatReport* compat = nullptr,
                       const DrainPlan* plan = nullptr);

// & < > " ' -> entities.
using ::gpunode::HtmlEscape;  // src/base/html.h

}  // namespace gpunode::fleet

#endif  // GPUNODE_FLEET_RENDER_H_
