// The file applier of `gpunode runtime configure` (runtime_config.h): reads, edits and writes the
// config under the host's lock, with a backup of every change; and restoring those backups. Also
// the `nvidia-container-runtime-hook` link for Docker's --gpus (a link it replaces is backed up).
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/container/runtime_config.h"
#include "src/node/probe.h"

namespace gpunode::container {

namespace {

std::string BackupTime() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  ::gmtime_r(&ts.tv_sec, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d%02d%02dT%02d%02d%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
  return buf;
}

std::string TimeOf(int64_t sec) {
  struct tm tm;
  const time_t t = static_cast<time_t>(sec);
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d%02d%02dT%02d%02d%02d.000000Z", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buf;
}

// <backup_dir>/<config path> (the config's real path keeps backups of different files apart).
std::string BackupStem(const std::string& real_host_path, const std::string& backup_dir) {
  return absl::StrCat(backup_dir, real_host_path);
}

// Writes a backup of one version of the config; returns its local path.
StatusOr<std::string> WriteBackup(const std::string& stem, const std::string& time, bool exists,
                                  absl::string_view text, uint32_t mode) {
  const HostFs local = HostFs::Local();
  WriteOptions o;
  o.mode = exists ? mode : 0644;
  o.keep_mode = false;
  const std::string path = absl::StrCat(stem, ".", time, exists ? "" : ".absent");
  GPUNODE_RETURN_IF_ERROR(local.WriteFileAtomically(path, exists ? text : absl::string_view(), o).status());
  return path;
}

// gpunode < 0.2 kept "<file>.gpunode.bak" beside the file: in a drop-in folder CRI-O loads it.
Status MigrateOldBackup(const HostFs& fs, const std::string& target, const std::string& stem) {
  const std::string old = target + ".gpunode.bak";
  auto info = fs.Stat(old);
  if (!info.ok() || info->type != FileType::kRegular) return absl::OkStatus();
  GPUNODE_ASSIGN_OR_RETURN(std::string text, fs.ReadFile(old, 16 << 20));
  GPUNODE_RETURN_IF_ERROR(WriteBackup(stem, TimeOf(info->mtime_sec), true, text, info->mode).status());
  return fs.RemoveFile(old);
}

}  // namespace

StatusOr<ApplyResult> ApplyRuntimeConfig(const HostFs& fs, const std::string& host_path,
                                         const RuntimeConfigOptions& options, const ApplyOptions& apply) {
  ApplyResult result;
  GPUNODE_ASSIGN_OR_RETURN(const std::string target,
                           fs.RealPath(host_path, /*follow_last=*/true, /*strict=*/true));
  result.path = target;
  FileLock lock;
  if (!apply.dry_run) {
    GPUNODE_ASSIGN_OR_RETURN(lock, fs.Lock(target));
  }
  const std::string stem = BackupStem(target, apply.backup_dir);
  for (int attempt = 1;; ++attempt) {
    result.attempts = attempt;
    GPUNODE_ASSIGN_OR_RETURN(HostFs::Versioned current, fs.ReadVersioned(target));
    const bool exists = current.identity.exists;
    GPUNODE_ASSIGN_OR_RETURN(EditResult edit, EditRuntimeConfig(current.text, options, target));
    result.warnings = edit.warnings;
    result.created = !exists;
    result.changed = !exists || edit.text != current.text;
    if (!result.changed) return result;
    result.diff = UnifiedDiff(current.text, edit.text, exists ? target : "/dev/null", target);
    if (apply.dry_run) return result;

    if (apply.backup_dir.empty()) return absl::InvalidArgumentError("no backup folder given");
    GPUNODE_RETURN_IF_ERROR(MigrateOldBackup(fs, target, stem));
    GPUNODE_ASSIGN_OR_RETURN(result.backup_path,
                             WriteBackup(stem, BackupTime(), exists, current.text, current.mode));
    WriteOptions w;
    w.mode = 0644;
    w.expect = current.identity;
    w.held = &lock;
    w.test_hook = apply.test_hook;
    auto written = fs.WriteFileAtomically(target, edit.text, w);
    if (written.ok()) return result;
    if (absl::IsAborted(written.status()) && attempt < 2) continue;  // changed under us: once more
    if (absl::IsAborted(written.status())) {
      return absl::AbortedError(absl::StrCat(written.status().message(),
                                             " (twice; run again when the other program is done)"));
    }
    return written.status();
  }
}

StatusOr<std::vector<BackupEntry>> ListBackups(const HostFs& fs, const std::string& host_path,
                                               const std::string& backup_dir) {
  GPUNODE_ASSIGN_OR_RETURN(const std::string target,
                           fs.RealPath(host_path, /*follow_last=*/true, /*strict=*/true));
  const std::string stem = BackupStem(target, backup_dir);
  const size_t slash = stem.rfind('/');
  const std::string dir = stem.substr(0, slash);
  const std::string prefix = stem.substr(slash + 1) + ".";
  std::vector<BackupEntry> out;
  auto names = HostFs::Local().ListDir(dir);
  if (!names.ok()) {
    if (absl::IsNotFound(names.status())) return out;
    return names.status();
  }
  for (const std::string& name : *names) {
    if (!absl::StartsWith(name, prefix)) continue;
    std::string rest = name.substr(prefix.size());
    BackupEntry e;
    e.path = absl::StrCat(dir, "/", name);
    if (absl::EndsWith(rest, ".absent")) {
      e.absent = true;
      rest.resize(rest.size() - 7);
    }
    // 20261201T081500.123456Z
    if (rest.size() != 23 || rest[8] != 'T' || rest.back() != 'Z') continue;
    e.time = rest;
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const BackupEntry& a, const BackupEntry& b) { return a.time < b.time; });
  return out;
}

StatusOr<RestoreResult> RestoreRuntimeConfig(const HostFs& fs, const std::string& host_path,
                                             const std::string& backup_dir) {
  RestoreResult result;
  GPUNODE_ASSIGN_OR_RETURN(const std::string target,
                           fs.RealPath(host_path, /*follow_last=*/true, /*strict=*/true));
  result.path = target;
  GPUNODE_ASSIGN_OR_RETURN(FileLock lock, fs.Lock(target));
  const std::string stem = BackupStem(target, backup_dir);
  GPUNODE_RETURN_IF_ERROR(MigrateOldBackup(fs, target, stem));
  GPUNODE_ASSIGN_OR_RETURN(std::vector<BackupEntry> backups, ListBackups(fs, target, backup_dir));
  if (backups.empty()) {
    return absl::NotFoundError(absl::StrCat("no backup of ", target, " in ", backup_dir,
                                            " (gpunode has not changed this file)"));
  }
  result.restored = backups.back();
  GPUNODE_ASSIGN_OR_RETURN(HostFs::Versioned current, fs.ReadVersioned(target));
  GPUNODE_ASSIGN_OR_RETURN(result.backup_path, WriteBackup(stem, BackupTime(), current.identity.exists,
                                                           current.text, current.mode));
  if (result.restored.absent) {
    GPUNODE_RETURN_IF_ERROR(fs.RemoveFile(target));
    result.removed = true;
    return result;
  }
  GPUNODE_ASSIGN_OR_RETURN(HostFs::Versioned saved, HostFs::Local().ReadVersioned(result.restored.path));
  WriteOptions w;
  w.mode = saved.mode;
  w.keep_mode = current.identity.exists;
  w.expect = current.identity;
  w.held = &lock;
  GPUNODE_RETURN_IF_ERROR(fs.WriteFileAtomically(target, saved.text, w).status());
  return result;
}

StatusOr<std::string> InstallDockerGpusHook(const HostFs& host, const std::string& runtime_path, bool dry_run,
                                            const std::string& backup_dir) {
  constexpr char kHook[] = "nvidia-container-runtime-hook";
  std::string target = runtime_path.empty() ? "nvidia-container-runtime" : runtime_path;
  if (target.front() != '/') target = node::FindHostProgram(host, target);
  if (const std::string existing = node::FindHostProgram(host, kHook); !existing.empty()) {
    auto a = host.RealPath(existing);
    auto b = target.empty() ? StatusOr<std::string>(absl::NotFoundError("")) : host.RealPath(target);
    if (a.ok() && b.ok() && *a == *b) return absl::StrCat(existing, " already answers for gpunode (docker run --gpus)");
    auto st = host.Stat(existing);
    if (st.ok() && st->type != FileType::kSymlink) {
      return absl::StrCat(existing, " is another program (NVIDIA Container Toolkit's hook?): left alone; with the "
                                    "nvidia runtime as Docker's runtime gpunode's shim removes it from --gpus containers");
    }
  }
  if (target.empty()) {
    return std::string("no nvidia-container-runtime on the host's PATH: install gpunode as /usr/bin/nvidia-container-runtime "
                       "(a link), then run this again so that Docker offers --gpus");
  }
  const std::string link = absl::StrCat("/usr/bin/", kHook);
  // A link of that name to something else (NVIDIA's hook, a dangling one): backed up before it is
  // replaced, as a link with the same target, where the configs' backups go.
  std::string old_target;
  if (auto st = host.Stat(link); st.ok() && st->type == FileType::kSymlink) {
    GPUNODE_ASSIGN_OR_RETURN(old_target, host.ReadLink(link));
    if (old_target == target) old_target.clear();
  }
  const std::string what = absl::StrCat(" -> ", target, " (Docker offers --gpus when it finds it)");
  if (dry_run) {
    return absl::StrCat("would link ", link, what,
                        old_target.empty() ? "" : absl::StrCat("; the link there now (-> ", old_target, ") would be backed up"));
  }
  std::string backup;
  if (!old_target.empty()) {
    if (backup_dir.empty()) return absl::InvalidArgumentError(absl::StrCat("replace ", link, ": no backup folder given"));
    GPUNODE_ASSIGN_OR_RETURN(const std::string real, host.RealPath(link, /*follow_last=*/false, /*strict=*/true));
    backup = absl::StrCat(BackupStem(real, backup_dir), ".", BackupTime());
    GPUNODE_RETURN_IF_ERROR(HostFs::Local().Symlink(old_target, backup));
  }
  GPUNODE_RETURN_IF_ERROR(host.Symlink(target, link));
  auto shown = host.LocalPath(link, /*follow_last=*/false);
  std::string msg = absl::StrCat("linked ", shown.ok() ? *shown : link, what);
  if (!backup.empty()) {
    absl::StrAppend(&msg, "; the link that was there (-> ", old_target, ") is backed up as ", backup,
                    " (to put it back: ln -sfn ", old_target, " ", shown.ok() ? *shown : link, ")");
  }
  return msg;
}

}  // namespace gpunode::container
