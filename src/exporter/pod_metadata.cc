#include "src/exporter/pod_metadata.h"

#include <re2/re2.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "src/kube/client.h"
#include "src/kube/json_fields.h"

namespace gpunode::exporter {
namespace {

bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

// Kubernetes' label value: empty, or at most 63 characters of [A-Za-z0-9._-] beginning and ending
// with an alphanumeric (apimachinery validation.IsValidLabelValue).
bool IsKubernetesLabelValue(std::string_view v) {
  if (v.empty()) return true;
  if (v.size() > kMaxPodLabelValueBytes || !IsAlnum(v.front()) || !IsAlnum(v.back())) return false;
  return std::all_of(v.begin(), v.end(), [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

// A sanitized name Prometheus takes: [a-zA-Z_][a-zA-Z0-9_]*, not the reserved "__" prefix.
bool IsUsableLabelName(std::string_view name) {
  return !name.empty() && !(name.front() >= '0' && name.front() <= '9') && !name.starts_with("__");
}

// A UID as the API server makes them (a UUID): at most 64 characters of [A-Za-z0-9-].
bool IsPodUid(std::string_view uid) {
  return !uid.empty() && uid.size() <= kMaxPodUidBytes &&
         std::all_of(uid.begin(), uid.end(), [](char c) { return IsAlnum(c) || c == '-'; });
}

std::string_view CodeKind(const Status& st) {
  switch (st.code()) {
    case absl::StatusCode::kNotFound:
      return "not found";
    case absl::StatusCode::kPermissionDenied:
      return "forbidden";
    case absl::StatusCode::kUnauthenticated:
      return "unauthenticated";
    case absl::StatusCode::kInvalidArgument:
      return "malformed";
    case absl::StatusCode::kResourceExhausted:
      return "too large";
    default:
      return "unavailable";
  }
}

PodMetadataOptions WithLog(PodMetadataOptions o) {
  if (!o.log) o.log = [](const std::string&) {};
  return o;
}

}  // namespace

PodLabelFilter::~PodLabelFilter() = default;

StatusOr<std::shared_ptr<const PodLabelFilter>> PodLabelFilter::Create(const std::vector<std::string>& patterns) {
  std::shared_ptr<PodLabelFilter> f(new PodLabelFilter());
  for (const std::string& p : patterns) {
    re2::RE2::Options o;
    o.set_log_errors(false);
    auto re = std::make_unique<re2::RE2>(p, o);
    if (!re->ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pod label allowlist pattern \"", p, "\" does not compile: ", re->error()));
    }
    f->patterns_.push_back(p);
    f->compiled_.push_back(std::move(re));
  }
  return std::shared_ptr<const PodLabelFilter>(std::move(f));
}

bool PodLabelFilter::Allowed(std::string_view key) const {
  if (compiled_.empty()) return true;
  const re2::StringPiece text(key.data(), key.size());
  for (const auto& re : compiled_) {
    if (re2::RE2::PartialMatch(text, *re)) return true;
  }
  return false;
}

std::string SanitizePodLabelName(std::string_view key) {
  std::string out(key);
  for (char& c : out) {
    if (!IsAlnum(c) && c != '_') c = '_';
  }
  return out;
}

StatusOr<PodMetadata> ExtractPodMetadata(const nlohmann::json& pod, const PodLabelFilter* filter,
                                         std::string_view what) {
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields root, kube::Fields::Root(pod, std::string(what)));
  GPUNODE_ASSIGN_OR_RETURN(kube::Fields meta, root.Object("metadata"));
  GPUNODE_ASSIGN_OR_RETURN(std::string uid, meta.String("uid"));
  GPUNODE_ASSIGN_OR_RETURN(auto labels, meta.StringMap("labels"));  // a std::map: in key order
  PodMetadata out;
  out.read = true;
  if (IsPodUid(uid)) out.uid = std::move(uid);
  std::map<std::string, std::string> kept;  // sanitized name -> value; the first key in order wins
  for (const auto& [key, value] : labels) {
    if (filter != nullptr && !filter->Allowed(key)) continue;  // not wanted: not "dropped"
    std::string name = SanitizePodLabelName(key);
    if (key.size() > kMaxPodLabelKeyBytes || !IsKubernetesLabelValue(value) || !IsUsableLabelName(name) ||
        kept.count(name) > 0) {
      ++out.dropped;
      continue;
    }
    kept.emplace(std::move(name), value);
  }
  for (auto& [name, value] : kept) {
    if (out.labels.size() == kMaxLabelsPerPod) {
      ++out.dropped;
      continue;
    }
    out.labels.emplace_back(name, std::move(value));
  }
  return out;
}

const PodMetadata* PodMetadataSnapshot::Find(const std::string& ns, const std::string& name) const {
  auto it = pods.find(PodKey{ns, name});
  return it == pods.end() ? nullptr : &it->second;
}

PodMetadataCache::PodMetadataCache(kube::Client& client, PodMetadataOptions options,
                                   std::function<std::shared_ptr<const PodMapping>()> pods)
    : client_(client), options_(WithLog(std::move(options))), pods_(std::move(pods)),
      latest_(std::make_shared<const PodMetadataSnapshot>()) {}

PodMetadataCache::~PodMetadataCache() { Stop(); }

void PodMetadataCache::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void PodMetadataCache::Stop() {
  stop_.request_stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PodMetadataCache::Run() {
  const std::stop_token stop = stop_.get_token();
  while (!stop.stop_requested()) {
    RunOnce();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, stop, options_.round, [] { return false; });
  }
}

std::shared_ptr<const PodMetadataSnapshot> PodMetadataCache::Latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

uint64_t PodMetadataCache::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

void PodMetadataCache::Read(const PodKey& key, Entry& e, std::stop_token stop) {
  const std::string what = absl::StrCat("pod ", key.namespace_name, "/", key.name);
  kube::CallOptions call;
  call.timeout = options_.timeout;
  call.stop = stop;
  call.max_body_bytes = kMaxPodBytes;
  const auto now = std::chrono::steady_clock::now();
  StatusOr<nlohmann::json> pod = client_.Get(
      absl::StrCat("/api/v1/namespaces/", kube::UrlEscape(key.namespace_name), "/pods/", kube::UrlEscape(key.name)),
      call);
  Status failure;
  if (pod.ok()) {
    StatusOr<PodMetadata> meta = ExtractPodMetadata(*pod, options_.filter.get(), what);
    if (meta.ok()) {
      e.meta = *std::move(meta);
      e.next = now + options_.refresh;
      if (!logged_.empty()) {
        options_.log("pod metadata: the API server answers pod reads again");
        logged_.clear();
      }
      return;
    }
    failure = meta.status();
  } else {
    failure = pod.status();
  }
  if (stop.stop_requested()) return;  // cancelled by Stop: not a failure of the API server
  ++errors_total_;
  e.next = now + options_.retry;
  // A pod the API server no longer has (deleted while the kubelet still lists it): no labels, no
  // UID, as dcgm-exporter shows a pod missing from its informer. Any other failure keeps the last
  // metadata read (labels rarely change, the UID never).
  if (failure.code() == absl::StatusCode::kNotFound) e.meta = PodMetadata{};
  const std::string_view kind = CodeKind(failure);
  if (logged_.insert(std::string(kind)).second) {
    std::string hint;
    if (failure.code() == absl::StatusCode::kPermissionDenied) {
      hint = " (pod labels and UID need `get` on pods: the chart grants it with exporter.podLabels or exporter.podUid)";
    }
    options_.log(absl::StrCat("pod metadata: ", failure.message(), hint, "; retrying every ",
                              std::chrono::duration_cast<std::chrono::seconds>(options_.retry).count(),
                              " s (logged once until a read works)"));
  }
}

void PodMetadataCache::RunOnce() {
  const std::stop_token stop = stop_.get_token();
  std::shared_ptr<const PodMapping> mapping = pods_ ? pods_() : nullptr;
  // The pods of the last successful List (a failed one keeps them: PodMapper::Latest).
  std::set<PodKey> want;
  if (mapping) {
    for (const auto& [device, refs] : mapping->by_device) {
      for (const PodRef& r : refs) {
        if (r.namespace_name.empty() || r.pod.empty() || r.namespace_name.size() > 253 || r.pod.size() > 253) continue;
        want.insert(PodKey{r.namespace_name, r.pod});
      }
    }
  }
  uint64_t over = 0;
  while (want.size() > kMaxPods) {
    want.erase(std::prev(want.end()));
    ++over;
  }
  bool changed = over != pods_over_limit_;
  pods_over_limit_ = over;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (want.count(it->first) == 0) {
      it = entries_.erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  const uint64_t errors_before = errors_total_;
  for (const PodKey& key : want) {
    if (stop.stop_requested()) return;
    auto [it, added] = entries_.try_emplace(key);
    if (!added && it->second.next > std::chrono::steady_clock::now()) continue;
    const PodMetadata before = it->second.meta;
    Read(key, it->second, stop);
    changed = changed || added || !(before == it->second.meta);
  }
  if (!changed && errors_total_ == errors_before) return;
  auto next = std::make_shared<PodMetadataSnapshot>();
  for (const auto& [key, e] : entries_) next->pods.emplace(key, e.meta);
  next->errors_total = errors_total_;
  next->pods_over_limit = pods_over_limit_;
  std::lock_guard<std::mutex> lock(mu_);
  latest_ = std::move(next);
  if (changed) ++generation_;
}

}  // namespace gpunode::exporter
