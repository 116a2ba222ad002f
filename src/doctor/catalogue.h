// The diagnosis catalogue: every finding gpunode doctor can report, by id, with its words —
// summary, why it happens, what to do first — its status and the layers that disagree. The checks
// (checks.cc) decide whether a finding applies and give only what they observed; the words live
// here, once. docs/doctor.md's catalogue is checked against this table by
// test/doctor/catalogue_test.cc.
#ifndef GPUNODE_DOCTOR_CATALOGUE_H_
#define GPUNODE_DOCTOR_CATALOGUE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/doctor/doctor.h"

namespace gpunode::doctor {

// One wording of a finding. Most ids have one; an id whose words depend on what was found (which
// driver holds the GPU, whether the toolkit is a major version ahead) has one entry per `variant`.
struct Advice {
  std::string_view id;       // stable, e.g. "driver.version-mismatch"
  std::string_view variant;  // "" for the usual wording
  CheckStatus status = CheckStatus::kWarn;
  std::vector<Layer> layers;  // the layers that disagree; the first is where the check lives
  // The row of docs/doctor.md's catalogue: the symptom this id explains. On the first entry of an
  // id only; its other variants leave it empty.
  std::string_view symptom;
  // The finding's text, with {name} placeholders filled from FindingFacts::args.
  std::string_view summary;
  std::string_view diagnosis;  // why this happens
  std::string_view action;     // what to do first
};

// Every entry, grouped by id, in the order the checks run.
const std::vector<Advice>& Catalogue();

// The entry for (id, variant), or nullptr.
const Advice* FindAdvice(std::string_view id, std::string_view variant = "");

// The value of one {name} placeholder: text or a number (absl::AlphaNum formats it).
struct FindingArg {
  FindingArg(std::string_view n, const absl::AlphaNum& v) : name(n), value(v.data(), v.size()) {}
  std::string_view name;
  std::string value;
};

// What a check observed. Named fields (callers use designated initializers), so an observed and
// an expected value cannot trade places unnoticed the way positional strings could.
struct FindingFacts {
  std::string_view variant;  // which wording, for ids that have several
  std::string observed;
  std::string expected;
  std::vector<FindingArg> args;  // the placeholders of the entry's summary, diagnosis and action
};

// The finding `id` of the catalogue with these facts. An id or variant the catalogue lacks, or a
// placeholder without a value, is a bug of the caller, not of the node: it throws
// std::logic_error, which the tests catch and main reports as a bug.
Finding MakeFinding(std::string_view id, FindingFacts facts);

}  // namespace gpunode::doctor

#endif  // GPUNODE_DOCTOR_CATALOGUE_H_
