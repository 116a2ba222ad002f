#include "src/container/ldcache.h"

#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpunode::container {
namespace {

constexpr absl::string_view kOldMagic = "ld.so-1.7.0";        // 11 bytes, no NUL in the file
constexpr absl::string_view kNewMagic = "glibc-ld.so.cache";  // 17 bytes
constexpr absl::string_view kNewVersion = "1.1";              // 3 bytes
constexpr uint64_t kOldHeaderSize = 16;                       // magic[11] pad[1] nlibs
constexpr uint64_t kOldEntrySize = 12;
constexpr uint64_t kNewHeaderSize = 48;
constexpr uint64_t kNewEntrySize = 24;
constexpr size_t kMaxCacheBytes = 64u << 20;

uint64_t Align8(uint64_t v) { return (v + 7) & ~uint64_t{7}; }

uint32_t LoadU32(absl::string_view b, uint64_t off) {
  uint32_t v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

uint64_t LoadU64(absl::string_view b, uint64_t off) {
  uint64_t v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

void PutU32(std::string* out, uint64_t off, uint32_t v) { std::memcpy(out->data() + off, &v, sizeof v); }
void PutU64(std::string* out, uint64_t off, uint64_t v) { std::memcpy(out->data() + off, &v, sizeof v); }

class Parser {
 public:
  Parser(absl::string_view bytes, absl::string_view origin) : b_(bytes), origin_(origin) {}

  Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("parse ", origin_, ": ", what));
  }

  // The NUL-terminated string at `base + offset`.
  StatusOr<std::string> String(uint64_t base, uint32_t offset, size_t entry, const char* field) const {
    uint64_t at = base + offset;
    if (at >= b_.size()) {
      return Error(absl::StrFormat("entry %d: %s offset %u points past the end (%d bytes)", entry, field,
                                   offset, b_.size()));
    }
    const char* start = b_.data() + at;
    const void* nul = std::memchr(start, '\0', b_.size() - at);
    if (nul == nullptr) {
      return Error(absl::StrFormat("entry %d: %s at offset %u is not NUL-terminated", entry, field, offset));
    }
    return std::string(start, static_cast<const char*>(nul) - start);
  }

  // Entries of the new table whose header starts at `base`.
  StatusOr<std::vector<LdCacheEntry>> New(uint64_t base) const {
    if (b_.size() < base + kNewHeaderSize) {
      return Error(absl::StrFormat("new header at offset %d: needs %d bytes, file has %d", base,
                                   kNewHeaderSize, b_.size()));
    }
    if (b_.substr(base, kNewMagic.size()) != kNewMagic) {
      return Error(absl::StrFormat("no \"%s\" header at offset %d", std::string(kNewMagic), base));
    }
    absl::string_view version = b_.substr(base + kNewMagic.size(), kNewVersion.size());
    if (version != kNewVersion) {
      return Error(absl::StrCat("unsupported cache version \"", absl::CHexEscape(version), "\" (want ",
                                kNewVersion, ")"));
    }
    uint64_t nlibs = LoadU32(b_, base + 20);
    uint64_t table = base + kNewHeaderSize;
    if (nlibs > (b_.size() - table) / kNewEntrySize) {
      return Error(absl::StrFormat("new header: %d entries need %d bytes at offset %d, file has %d", nlibs,
                                   nlibs * kNewEntrySize, table, b_.size()));
    }
    std::vector<LdCacheEntry> out;
    out.reserve(nlibs);
    for (uint64_t i = 0; i < nlibs; ++i) {
      uint64_t e = table + i * kNewEntrySize;
      LdCacheEntry entry;
      entry.flags = static_cast<int32_t>(LoadU32(b_, e));
      GPUNODE_ASSIGN_OR_RETURN(entry.name, String(base, LoadU32(b_, e + 4), i, "key"));
      GPUNODE_ASSIGN_OR_RETURN(entry.path, String(base, LoadU32(b_, e + 8), i, "value"));
      entry.hwcap = LoadU64(b_, e + 16);
      out.push_back(std::move(entry));
    }
    return out;
  }

  StatusOr<LdCache> Parse() const {
    LdCache cache;
    if (b_.substr(0, kNewMagic.size()) == kNewMagic) {
      cache.format = LdCacheFormat::kNew;
      GPUNODE_ASSIGN_OR_RETURN(cache.entries, New(0));
      return cache;
    }
    if (b_.substr(0, kOldMagic.size()) != kOldMagic) {
      return Error(absl::StrCat("not an ld.so.cache: starts with \"",
                                absl::CHexEscape(b_.substr(0, kNewMagic.size())), "\""));
    }
    if (b_.size() < kOldHeaderSize) {
      return Error(absl::StrFormat("old header: needs %d bytes, file has %d", kOldHeaderSize, b_.size()));
    }
    uint64_t nlibs = LoadU32(b_, 12);
    if (nlibs > (b_.size() - kOldHeaderSize) / kOldEntrySize) {
      return Error(absl::StrFormat("old header: %d entries need %d bytes at offset %d, file has %d", nlibs,
                                   nlibs * kOldEntrySize, kOldHeaderSize, b_.size()));
    }
    uint64_t table_end = kOldHeaderSize + nlibs * kOldEntrySize;
    uint64_t new_base = Align8(table_end);
    if (new_base < b_.size() && b_.substr(new_base, kNewMagic.size()) == kNewMagic) {
      cache.format = LdCacheFormat::kCompat;
      GPUNODE_ASSIGN_OR_RETURN(cache.entries, New(new_base));
      return cache;
    }
    cache.format = LdCacheFormat::kOld;
    cache.entries.reserve(nlibs);
    for (uint64_t i = 0; i < nlibs; ++i) {
      uint64_t e = kOldHeaderSize + i * kOldEntrySize;
      LdCacheEntry entry;
      entry.flags = static_cast<int32_t>(LoadU32(b_, e));
      GPUNODE_ASSIGN_OR_RETURN(entry.name, String(table_end, LoadU32(b_, e + 4), i, "key"));
      GPUNODE_ASSIGN_OR_RETURN(entry.path, String(table_end, LoadU32(b_, e + 8), i, "value"));
      cache.entries.push_back(std::move(entry));
    }
    return cache;
  }

 private:
  absl::string_view b_;
  absl::string_view origin_;
};

}  // namespace

bool LdCacheEntry::Is64Bit() const {
  int32_t arch = flags & kLdFlagArchMask;
  return arch == kLdFlagX8664Lib64 || arch == kLdFlagAArch64Lib64 || arch == kLdFlagPowerPcLib64;
}

std::string LdCacheEntry::ArchName() const {
  switch (flags & kLdFlagArchMask) {
    case 0x0000:
      return "i386";
    case 0x0100:
      return "sparc64";
    case 0x0200:
      return "ia64";
    case kLdFlagX8664Lib64:
      return "x86-64";
    case 0x0400:
      return "s390x";
    case kLdFlagPowerPcLib64:
      return "ppc64";
    case kLdFlagX8664LibX32:
      return "x32";
    case kLdFlagArmLibHf:
      return "armhf";
    case kLdFlagAArch64Lib64:
      return "aarch64";
    case 0x0b00:
      return "armsf";
    default:
      return absl::StrFormat("arch 0x%04x", flags & kLdFlagArchMask);
  }
}

StatusOr<LdCache> ParseLdCache(absl::string_view bytes, absl::string_view origin) {
  return Parser(bytes, origin).Parse();
}

StatusOr<LdCache> ReadLdCache(const HostFs& fs, absl::string_view host_path) {
  GPUNODE_ASSIGN_OR_RETURN(std::string bytes, fs.ReadFile(host_path, kMaxCacheBytes));
  return ParseLdCache(bytes, host_path);
}

std::string EncodeLdCache(const std::vector<LdCacheEntry>& entries, LdCacheFormat format) {
  const uint64_t n = entries.size();
  // Strings, in one table shared by both layouts: key and value of each entry.
  std::string strings;
  std::vector<std::pair<uint64_t, uint64_t>> string_at;  // offsets within `strings`
  for (const LdCacheEntry& e : entries) {
    uint64_t key = strings.size();
    strings.append(e.name).push_back('\0');
    uint64_t value = strings.size();
    strings.append(e.path).push_back('\0');
    string_at.emplace_back(key, value);
  }
  std::string out;
  uint64_t old_table_end = 0;
  if (format != LdCacheFormat::kNew) {
    old_table_end = kOldHeaderSize + n * kOldEntrySize;
    out.resize(old_table_end, '\0');
    std::memcpy(out.data(), kOldMagic.data(), kOldMagic.size());
    PutU32(&out, 12, static_cast<uint32_t>(n));
  }
  if (format == LdCacheFormat::kOld) {
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t e = kOldHeaderSize + i * kOldEntrySize;
      PutU32(&out, e, static_cast<uint32_t>(entries[i].flags));
      PutU32(&out, e + 4, static_cast<uint32_t>(string_at[i].first));
      PutU32(&out, e + 8, static_cast<uint32_t>(string_at[i].second));
    }
    return out + strings;
  }
  const uint64_t base = Align8(out.size());
  const uint64_t strings_at = base + kNewHeaderSize + n * kNewEntrySize;  // from file start
  out.resize(strings_at, '\0');
  std::memcpy(out.data() + base, kNewMagic.data(), kNewMagic.size());
  std::memcpy(out.data() + base + kNewMagic.size(), kNewVersion.data(), kNewVersion.size());
  PutU32(&out, base + 20, static_cast<uint32_t>(n));
  PutU32(&out, base + 24, static_cast<uint32_t>(strings.size()));
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t e = base + kNewHeaderSize + i * kNewEntrySize;
    PutU32(&out, e, static_cast<uint32_t>(entries[i].flags));
    PutU32(&out, e + 4, static_cast<uint32_t>(strings_at - base + string_at[i].first));
    PutU32(&out, e + 8, static_cast<uint32_t>(strings_at - base + string_at[i].second));
    PutU64(&out, e + 16, entries[i].hwcap);
    if (format == LdCacheFormat::kCompat) {  // the old entries point into the same strings
      uint64_t o = kOldHeaderSize + i * kOldEntrySize;
      PutU32(&out, o, static_cast<uint32_t>(entries[i].flags));
      PutU32(&out, o + 4, static_cast<uint32_t>(strings_at - old_table_end + string_at[i].first));
      PutU32(&out, o + 8, static_cast<uint32_t>(strings_at - old_table_end + string_at[i].second));
    }
  }
  return out + strings;
}

}  // namespace gpunode::container
