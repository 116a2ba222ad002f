// The dynamic linker's cache, etc/ld.so.cache, read (and, for fixtures, written) by hand.
//
// glibc (elf/dl-cache.h) has written three layouts over the years; all are native-endian and we
// only accept little-endian files:
//   * old     "ld.so-1.7.0": magic[11] pad[1] nlibs:u32, then nlibs entries {flags:i32, key:u32,
//             value:u32}; key/value are string offsets relative to the end of the entry table.
//   * compat  the old layout immediately followed (at the next 8-byte boundary) by a new one.
//   * new     "glibc-ld.so.cache" "1.1": magic[17] version[3] nlibs:u32 len_strings:u32 flags:u8
//             pad[3] extension_offset:u32 unused[3]:u32 (48 bytes), then nlibs entries {flags:i32,
//             key:u32, value:u32, osversion:u32, hwcap:u64} (24 bytes); key/value are string offsets
//             relative to the start of the new header.
// When a new table is present it is the one we return (it is what the loader uses).
//
// Every count and offset is bounds-checked: malformed input yields InvalidArgument (naming what is
// wrong and where), never a crash, a read past the buffer or an unbounded allocation.
#ifndef GPUNODE_CONTAINER_LDCACHE_H_
#define GPUNODE_CONTAINER_LDCACHE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/host_fs.h"
#include "src/base/status.h"

namespace gpunode::container {

// Flag bits of a cache entry (glibc elf/dl-cache.h / sysdeps/generic/ldconfig.h).
inline constexpr int32_t kLdFlagTypeMask = 0x00ff;
inline constexpr int32_t kLdFlagElf = 0x0001;       // any ELF library
inline constexpr int32_t kLdFlagElfLibc6 = 0x0003;  // what ldconfig writes for glibc libraries
inline constexpr int32_t kLdFlagArchMask = 0xff00;
inline constexpr int32_t kLdFlagX8664Lib64 = 0x0300;
inline constexpr int32_t kLdFlagPowerPcLib64 = 0x0500;
inline constexpr int32_t kLdFlagX8664LibX32 = 0x0800;
inline constexpr int32_t kLdFlagArmLibHf = 0x0900;
inline constexpr int32_t kLdFlagAArch64Lib64 = 0x0a00;

struct LdCacheEntry {
  std::string name;  // the key: a SONAME such as "libcuda.so.1"
  int32_t flags = 0;
  std::string path;  // the value: "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
  uint64_t hwcap = 0;  // 0 in the old layout

  bool IsElf() const { return (flags & kLdFlagElf) != 0; }
  // x86-64, AArch64 or ppc64le ELF libraries (the ones a 64-bit container loads).
  bool Is64Bit() const;
  // "x86-64", "i386", "aarch64", "x32", "armhf", "ppc64", ... or "arch 0x1300" when unknown.
  std::string ArchName() const;
};

enum class LdCacheFormat { kOld, kCompat, kNew };

struct LdCache {
  LdCacheFormat format = LdCacheFormat::kNew;
  std::vector<LdCacheEntry> entries;  // in file order
};

// Parses the bytes of an ld.so.cache. `origin` names the input in errors
// ("parse /etc/ld.so.cache: new header: 3 entries need 72 bytes at offset 48, file has 60").
StatusOr<LdCache> ParseLdCache(absl::string_view bytes, absl::string_view origin = "ld.so.cache");

// Reads and parses `host_path` (default /etc/ld.so.cache) through HostFs (at most 64 MiB).
StatusOr<LdCache> ReadLdCache(const HostFs& fs, absl::string_view host_path = "/etc/ld.so.cache");

// Encodes entries in the given layout (kNew or kCompat for the new table; kOld writes only the old
// one). For fixtures and tests: entries are written in the order given, not in the loader's
// sorted order, so the result is for our reader, not for ld.so.
std::string EncodeLdCache(const std::vector<LdCacheEntry>& entries,
                          LdCacheFormat format = LdCacheFormat::kNew);

}  // namespace gpunode::container

#endif  // GPUNODE_CONTAINER_LDCACHE_H_
