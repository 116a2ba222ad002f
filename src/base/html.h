// Text for HTML pages we render (the exporter's status page, the fleet page): every string that
// came from a node, a label or a config is escaped, in element text and in quoted attributes.
#ifndef GPUNODE_BASE_HTML_H_
#define GPUNODE_BASE_HTML_H_

#include <string>
#include <string_view>

namespace gpunode {

// & < > " ' as entities; everything else as it is.
std::string HtmlEscape(std::string_view text);

}  // namespace gpunode

#endif  // GPUNODE_BASE_HTML_H_
