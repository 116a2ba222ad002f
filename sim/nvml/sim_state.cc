#include "sim/nvml/sim_state.h"

#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"

namespace gpunode::sim {
namespace {

bool StatFile(const std::string& path, int64_t* mtime_ns, int64_t* size, uint64_t* inode) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return false;
  *mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  *size = static_cast<int64_t>(st.st_size);
  *inode = static_cast<uint64_t>(st.st_ino);
  return true;
}

bool ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return !in.bad();
}

}  // namespace

SimState& SimState::Get() {
  static SimState* state = new SimState();
  return *state;
}

void SimState::Warn(const std::string& message) {
  if (!warned_.insert(message).second) return;
  std::fprintf(stderr, "gpunode-simnvml: %s\n", message.c_str());
}

nvmlReturn_t SimState::Load() {
  const char* env = std::getenv("GPUNODE_SIM_PROFILE");
  if (env == nullptr || *env == '\0') {
    Warn(
        "GPUNODE_SIM_PROFILE is not set: set it to a node profile file or a built-in profile name");
    profile_.reset();
    return NVML_ERROR_LIBRARY_NOT_FOUND;
  }
  const char* interval = std::getenv("GPUNODE_SIM_RELOAD_MS");
  int ms = 50;
  if (interval != nullptr && absl::SimpleAtoi(interval, &ms) && ms >= 0) {
    reload_interval_ = std::chrono::milliseconds(ms);
  } else {
    reload_interval_ = std::chrono::milliseconds(50);
  }
  std::string path = env;
  FileSignature sig;
  std::string text;
  bool is_file = StatFile(path, &sig.mtime_ns, &sig.size, &sig.inode) && ReadWholeFile(path, &text);
  if (!is_file) {
    auto source = ResolveProfile(path);
    if (!source.ok()) {
      Warn(std::string(source.status().message()));
      profile_.reset();
      return NVML_ERROR_LIBRARY_NOT_FOUND;
    }
    text = source->text;
    path.clear();
  }
  auto parsed = ParseProfile(text, is_file ? path : std::string(env));
  if (!parsed.ok()) {
    Warn(std::string(parsed.status().message()));
    profile_.reset();
    return NVML_ERROR_LIBRARY_NOT_FOUND;
  }
  profile_ = std::make_unique<NodeProfile>(*std::move(parsed));
  file_path_ = path;
  signature_ = sig;
  last_check_ = std::chrono::steady_clock::now();
  profile_ref_ = env;
  SeedMig(text);
  SeedCompute(text);
  return NVML_SUCCESS;
}

int SimState::ChangeFd() {
  if (change_fd_ != -2) return change_fd_;
  change_fd_ = -1;
  if (file_path_.empty()) return change_fd_;
  const size_t slash = file_path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : file_path_.substr(0, slash));
  const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return change_fd_;
  if (inotify_add_watch(fd, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_MODIFY) < 0) {
    ::close(fd);
    return change_fd_;
  }
  change_fd_ = fd;
  return change_fd_;
}

void SimState::MaybeReload(bool force) {
  if (profile_ == nullptr || file_path_.empty()) return;
  auto now = std::chrono::steady_clock::now();
  if (!force && now - last_check_ < reload_interval_) return;
  last_check_ = now;
  FileSignature sig;
  if (!StatFile(file_path_, &sig.mtime_ns, &sig.size, &sig.inode)) return;  // being replaced
  if (sig == signature_) return;
  std::string text;
  if (!ReadWholeFile(file_path_, &text)) return;
  signature_ = sig;
  auto parsed = ParseProfile(text, file_path_);
  if (!parsed.ok()) {
    Warn(std::string("keeping the previous profile: ") + std::string(parsed.status().message()));
    return;
  }
  *profile_ = *std::move(parsed);
  SeedMig(text);
  SeedCompute(text);
}

nvmlDevice_t SimState::Handle(unsigned gpu, int mig) {
  auto key = std::make_pair(gpu, mig);
  auto it = handle_index_.find(key);
  if (it != handle_index_.end()) return it->second;
  handles_.push_back(nvmlDevice_st{gpu, mig});
  nvmlDevice_t h = &handles_.back();
  handle_index_[key] = h;
  handle_set_.insert(h);
  return h;
}

}  // namespace gpunode::sim
