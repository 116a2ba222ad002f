#include "src/exporter/pod_mapper.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "podresources/v1/api.grpc.pb.h"
#include "src/base/held_mutex.h"
#include "src/base/well_known.h"

namespace gpunode::exporter {
namespace {

constexpr int kMaxReceiveBytes = 64 << 20;  // dcgm-exporter's 4 MiB default broke big nodes (#509)
constexpr std::string_view kGpuResource = wellknown::kResourceGpu;
constexpr std::string_view kMigPrefix = "nvidia.com/mig-";

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The socket is there (checked before dialing, so a node without a kubelet gets a clear message
// instead of gRPC's connect error).
Status CheckSocket(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrCat("pod-resources socket ", path,
                                              " does not exist (is the kubelet running and is "
                                              "/var/lib/kubelet/pod-resources mounted?)"));
    }
    return ErrnoToStatus(err, "stat pod-resources socket", path);
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("pod-resources socket ", path, " is not a socket"));
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& path) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxReceiveBytes);
  // Our own subchannel, not the process-wide pool: dropping the channel after a failure really
  // reconnects (the kubelet recreates its socket when it restarts).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel("unix:" + path, grpc::InsecureChannelCredentials(), args);
}

Status CallList(v1::PodResourcesLister::Stub& stub, grpc::ClientContext& ctx, std::chrono::milliseconds timeout,
                const std::string& path, v1::ListPodResourcesResponse* resp) {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::ListPodResourcesRequest req;
  grpc::Status st = stub.List(&ctx, req, resp);
  if (st.ok()) return absl::OkStatus();
  return Status(static_cast<absl::StatusCode>(st.error_code()),
                absl::StrCat("pod-resources List on ", path, ": ", st.error_message()));
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A number as NVIDIA's device names write it: decimal, no leading zero, at most 5 digits.
bool DraNumber(std::string_view s) { return AllDigits(s) && s.size() <= 5 && (s.size() == 1 || s[0] != '0'); }

void AddRef(PodMapping& m, std::string key, const v1::PodResources& pod, const v1::ContainerResources& c) {
  m.by_device[std::move(key)].push_back(PodRef{pod.name(), pod.namespace_(), c.name()});
}

// The container's DRA devices of `dra.driver` in `dra.pool` (any pool when empty), by device name.
void AddDraDevices(PodMapping& m, const v1::PodResources& pod, const v1::ContainerResources& c, const DraSource& dra) {
  int claims = 0;
  for (const v1::DynamicResource& claim : c.dynamic_resources()) {
    const bool claim_over = ++claims > kMaxDraClaimsPerContainer;
    int devices = 0;
    for (const v1::ClaimResource& r : claim.claim_resources()) {
      if (r.driver_name() != dra.driver) continue;
      const bool device_over = ++devices > kMaxDraDevicesPerClaim;
      if (claim_over || device_over || (!dra.pool.empty() && r.pool_name() != dra.pool) ||
          !IsNvidiaDraDeviceName(r.device_name())) {
        ++m.dra_ignored;
        continue;
      }
      AddRef(m, r.device_name(), pod, c);
    }
  }
}

}  // namespace

std::string PodDeviceKey(std::string_view id) {
  // GKE device names: "nvidia0", "nvidia0/vgpu1" -> "nvidia0"; a MIG instance "nvidia0/gi2",
  // "nvidia0/gi2/vgpu1" -> "nvidia0/gi2" (dcgm-exporter's gkeMigDeviceIDRegex,
  // `^nvidia([0-9]+)/gi([0-9]+)(/vgpu[0-9]+)?$`, keys it by GPU and GPU instance id).
  // (Old-style MIG IDs "MIG-GPU-<uuid>/1/0" also contain '/', and are kept whole.)
  constexpr std::string_view kNvidia = "nvidia";
  constexpr std::string_view kGi = "/gi";
  if (id.substr(0, kNvidia.size()) == kNvidia) {
    const size_t slash = id.find('/');
    const std::string_view head = id.substr(0, slash);
    if (AllDigits(head.substr(kNvidia.size()))) {
      if (slash == std::string_view::npos || id.substr(slash, kGi.size()) != kGi) return std::string(head);
      const size_t end = id.find('/', slash + 1);
      const std::string_view gi = id.substr(slash + kGi.size(), end == std::string_view::npos ? end : end - slash - kGi.size());
      if (AllDigits(gi)) return std::string(id.substr(0, slash + kGi.size() + gi.size()));
      return std::string(head);
    }
  }
  // Time-sliced / MPS replicas of the NVIDIA device plugin: "<id>::<n>" -> "<id>".
  const size_t sep = id.rfind("::");
  if (sep != std::string_view::npos && AllDigits(id.substr(sep + 2))) id = id.substr(0, sep);
  return std::string(id);
}

std::string DraGpuName(unsigned minor) { return absl::StrCat("gpu-", minor); }

bool IsNvidiaDraDeviceName(std::string_view name) {
  constexpr std::string_view kGpu = "gpu-";
  constexpr std::string_view kMig = "-mig-";
  if (name.size() > 63 || name.substr(0, kGpu.size()) != kGpu) return false;
  std::string_view rest = name.substr(kGpu.size());
  const size_t mig = rest.find(kMig);
  if (mig == std::string_view::npos) return DraNumber(rest);  // gpu-<minor>
  if (!DraNumber(rest.substr(0, mig))) return false;
  // <profile>-<GI profile id>-<placement start>; the profile may hold dashes itself ("1g10gb-me").
  rest = rest.substr(mig + kMig.size());
  const size_t start_dash = rest.rfind('-');
  if (start_dash == std::string_view::npos || !DraNumber(rest.substr(start_dash + 1))) return false;
  rest = rest.substr(0, start_dash);
  const size_t id_dash = rest.rfind('-');
  if (id_dash == std::string_view::npos || !DraNumber(rest.substr(id_dash + 1))) return false;
  const std::string_view profile = rest.substr(0, id_dash);
  if (profile.empty() || profile.front() == '-' || profile.back() == '-') return false;
  return std::all_of(profile.begin(), profile.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

bool IsGpuResource(std::string_view name, const std::vector<std::string>& resource_names) {
  if (name == kGpuResource || name.substr(0, kMigPrefix.size()) == kMigPrefix) return true;
  return std::find(resource_names.begin(), resource_names.end(), name) != resource_names.end();
}

PodMapping BuildPodMapping(const v1::ListPodResourcesResponse& resp, const std::vector<std::string>& resource_names,
                           const DraSource& dra) {
  PodMapping m;
  m.ok = true;
  for (const v1::PodResources& pod : resp.pod_resources()) {
    for (const v1::ContainerResources& c : pod.containers()) {
      for (const v1::ContainerDevices& d : c.devices()) {
        if (!IsGpuResource(d.resource_name(), resource_names)) continue;
        for (const std::string& id : d.device_ids()) {
          std::string key = PodDeviceKey(id);
          if (key.empty()) continue;
          AddRef(m, std::move(key), pod, c);
        }
      }
      if (!dra.driver.empty()) AddDraDevices(m, pod, c, dra);
    }
  }
  for (auto& [key, refs] : m.by_device) {
    std::sort(refs.begin(), refs.end());
    refs.erase(std::unique(refs.begin(), refs.end()), refs.end());
  }
  return m;
}

const std::vector<PodRef>* PodMapping::ForGpu(std::string_view uuid, std::string_view device_name,
                                              std::string_view dra_device) const {
  for (std::string_view key : {uuid, device_name, dra_device}) {
    if (key.empty()) continue;
    auto it = by_device.find(std::string(key));
    if (it != by_device.end()) return &it->second;
  }
  return nullptr;
}

const std::vector<PodRef>* PodMapping::ForMigInstance(unsigned gpu_index, std::optional<unsigned> minor,
                                                      const MigInstanceSample& instance) const {
  for (const std::string& uuid : instance.uuids) {
    auto it = by_device.find(uuid);
    if (it != by_device.end()) return &it->second;
  }
  if (auto it = by_device.find(absl::StrCat("nvidia", gpu_index, "/gi", instance.gpu_instance_id));
      it != by_device.end()) {
    return &it->second;
  }
  if (!minor || !instance.gi_profile_id || !instance.placement_start) return nullptr;
  const std::string prefix = absl::StrCat("gpu-", *minor, "-mig-");
  const std::string suffix = absl::StrCat("-", *instance.gi_profile_id, "-", *instance.placement_start);
  for (auto it = by_device.lower_bound(prefix); it != by_device.end() && it->first.starts_with(prefix); ++it) {
    // "<profile><suffix>" with a profile of at least one character (IsNvidiaDraDeviceName).
    if (it->first.size() > prefix.size() + suffix.size() && it->first.ends_with(suffix)) return &it->second;
  }
  return nullptr;
}

StatusOr<PodMapping> ListOnce(const PodMapperOptions& options) {
  GPUNODE_RETURN_IF_ERROR(CheckSocket(options.socket_path));
  auto channel = MakeChannel(options.socket_path);
  auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext ctx;
  v1::ListPodResourcesResponse resp;
  GPUNODE_RETURN_IF_ERROR(CallList(*stub, ctx, options.timeout, options.socket_path, &resp));
  PodMapping m = BuildPodMapping(resp, options.resource_names, options.dra);
  m.last_success_timestamp_seconds = NowSeconds();
  return m;
}

// The cached channel of the refresher thread.
class PodMapper::Client {
 public:
  explicit Client(const std::string& path)
      : channel_(MakeChannel(path)), stub_(v1::PodResourcesLister::NewStub(channel_)) {}
  v1::PodResourcesLister::Stub& stub() { return *stub_; }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::PodResourcesLister::Stub> stub_;
};

PodMapper::PodMapper(PodMapperOptions options) : options_(std::move(options)) {
  auto initial = std::make_shared<PodMapping>();
  initial->status = absl::UnavailableError(
      absl::StrCat("pod-resources: not yet refreshed (socket ", options_.socket_path, ")"));
  latest_ = std::move(initial);
}

PodMapper::~PodMapper() { Stop(); }

void PodMapper::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { Run(); });
}

void PodMapper::Stop() {
  std::thread t;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (in_flight_ != nullptr) in_flight_->TryCancel();
    t = std::move(thread_);
  }
  cv_.notify_all();
  if (t.joinable()) t.join();
}

std::shared_ptr<const PodMapping> PodMapper::Latest() const {
  absl::MutexLock lock(&mu_);
  return latest_;
}

uint64_t PodMapper::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

void PodMapper::Run() {
  mu_.Lock();
  while (!stopping_) {
    mu_.Unlock();
    RefreshOnce();
    mu_.Lock();
    HeldMutex held(mu_);
    cv_.wait_for(held, options_.refresh_interval, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; });
  }
  mu_.Unlock();
}

void PodMapper::RefreshOnce() {
  v1::ListPodResourcesResponse resp;
  Status status = CheckSocket(options_.socket_path);
  if (status.ok()) {
    if (client_ == nullptr) client_ = std::make_unique<Client>(options_.socket_path);
    grpc::ClientContext ctx;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      in_flight_ = &ctx;
    }
    status = CallList(client_->stub(), ctx, options_.timeout, options_.socket_path, &resp);
    {
      absl::MutexLock lock(&mu_);
      in_flight_ = nullptr;
      if (stopping_) return;  // cancelled by Stop: nothing to report
    }
  }
  if (!status.ok()) client_.reset();  // the next refresh dials again

  const std::shared_ptr<const PodMapping> prev = Latest();
  auto next = std::make_shared<PodMapping>();
  if (status.ok()) {
    *next = BuildPodMapping(resp, options_.resource_names, options_.dra);
    next->last_success_timestamp_seconds = NowSeconds();
    next->refresh_errors_total = prev->refresh_errors_total;
  } else {
    next->ok = false;
    next->status = std::move(status);
    next->by_device = prev->by_device;  // stale but kept (see PodMapping::by_device)
    next->dra_ignored = prev->dra_ignored;
    next->last_success_timestamp_seconds = prev->last_success_timestamp_seconds;
    next->refresh_errors_total = prev->refresh_errors_total + 1;
  }
  const bool changed = next->ok != prev->ok || next->by_device != prev->by_device;
  absl::MutexLock lock(&mu_);
  latest_ = std::move(next);
  if (changed) ++generation_;
}

}  // namespace gpunode::exporter
