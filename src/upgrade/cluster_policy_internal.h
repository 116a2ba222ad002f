// Shared by cluster_policy.cc (the node operands, the listing) and cluster_policy_driver.cc
// (spec.driver and spec.daemonsets as the default pool's driver). Not for other folders.
#ifndef GPUNODE_UPGRADE_CLUSTER_POLICY_INTERNAL_H_
#define GPUNODE_UPGRADE_CLUSTER_POLICY_INTERNAL_H_

#include <set>
#include <string>

#include "nlohmann/json.hpp"
#include "src/base/status.h"
#include "src/kube/json_fields.h"
#include "src/upgrade/cluster_policy.h"

namespace gpunode::upgrade::cluster_policy_internal {

inline constexpr size_t kMaxName = 1024;  // a name, an image reference, a version, a selector
inline constexpr size_t kMaxList = 256;   // env, args, tolerations, pull secrets

// Whether a value asks for anything: false, "", 0, null, [] and {} (or an object of those) do not.
bool AsksForSomething(const nlohmann::json& v);
// A short, terminal-safe summary of a value: a string as it is, anything else as compact JSON.
std::string Summary(const nlohmann::json& v);

// The translation under way: what the sections add to.
class Output {
 public:
  explicit Output(PolicyTranslation* t) : t_(t) {}
  PolicyTranslation& t() { return *t_; }
  void Applied(const std::string& path, const std::string& value, const std::string& to) {
    t_->applied.push_back({path, value, to});
  }
  // Listed only when the value asks for something.
  void Unapplied(const std::string& path, const nlohmann::json& v, const std::string& why) {
    if (AsksForSomething(v)) t_->unapplied.push_back({path, Summary(v), why});
  }
  // The member `key` of `section`, when present.
  void UnappliedMember(const kube::Fields& section, const std::string& key, const std::string& why);
  // Every member of `section` not in `handled`: a field gpunode does not know.
  void Unknown(const kube::Fields& section, const std::set<std::string>& handled);

 private:
  PolicyTranslation* t_;
};

// A string member bounded to kMaxName bytes.
StatusOr<std::string> Name(const kube::Fields& f, const std::string& key);
// An optional bool member: nullopt when absent.
StatusOr<std::optional<bool>> OptionalBool(const kube::Fields& f, const std::string& key);
// A list of {name, value} objects (NVIDIA's EnvVar), bounded: the list as given.
StatusOr<nlohmann::json> EnvList(const kube::Fields& f, const std::string& key);
// An EnvVar's "name" or "value" ("" when absent or null).
std::string EnvString(const nlohmann::json& entry, const char* key);
// A list of strings, bounded.
StatusOr<std::vector<std::string>> StringList(const kube::Fields& f, const std::string& key);

// spec.driver (with spec.daemonsets for the driver pods) -> t.default_driver, applied, unapplied.
Status TranslateDriver(const kube::Fields& spec, Output& out);

}  // namespace gpunode::upgrade::cluster_policy_internal

#endif  // GPUNODE_UPGRADE_CLUSTER_POLICY_INTERNAL_H_
