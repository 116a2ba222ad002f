// Reading and writing JSON from inputs we do not control (daemon.json, a bundle's config.json,
// the kubelet's files, CDI specs) without a way to crash or stall gpunode:
//  - a nesting limit (kMaxJsonDepth) checked while parsing, before anything recursive runs
//    (nlohmann's serializer and our own walks recurse);
//  - linear time for large objects: nlohmann's ordered_json inserts with a linear search per key
//    (100 000 keys took 20 s); our SAX builder indexes the keys while it builds the object;
//  - duplicate keys: the last one wins (as Go's encoding/json, which Docker and runc use);
//  - invalid UTF-8 is a parse error (nlohmann's lexer checks it) naming the place;
//  - no exceptions: every error is a Status naming the source, and DumpJson never throws
//    (an invalid UTF-8 string that reached a document some other way is written as U+FFFD).
#ifndef GPUNODE_BASE_JSON_H_
#define GPUNODE_BASE_JSON_H_

#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/base/status.h"

namespace gpunode {

// Deeper than any real config (an OCI config.json is ~6 levels, a CDI spec ~7, daemon.json ~4).
inline constexpr int kMaxJsonDepth = 128;

// Parses `text` as one JSON document. Errors are INVALID_ARGUMENT: "<source>: not valid JSON:
// line L, column C: <why>" or "<source>: nested deeper than 128 levels".
StatusOr<nlohmann::json> ParseJson(absl::string_view text, absl::string_view source,
                                   int max_depth = kMaxJsonDepth);
// The same, keeping the keys of every object in the file's order.
StatusOr<nlohmann::ordered_json> ParseOrderedJson(absl::string_view text, absl::string_view source,
                                                  int max_depth = kMaxJsonDepth);

// dump() that cannot throw.
std::string DumpJson(const nlohmann::json& doc, int indent = -1, char indent_char = ' ');
std::string DumpJson(const nlohmann::ordered_json& doc, int indent = -1, char indent_char = ' ');

// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or code points > U+10FFFF).
bool IsValidUtf8(absl::string_view text);

}  // namespace gpunode

#endif  // GPUNODE_BASE_JSON_H_
