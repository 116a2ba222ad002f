// The ld.so.cache reader: the three layouts glibc writes, built byte by byte with our encoder (and
// by hand where the encoder cannot produce the damage), malformed input, and this machine's cache.
#include "src/container/ldcache.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gpunode::container {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kX8664 = kLdFlagX8664Lib64 | kLdFlagElfLibc6;

std::vector<LdCacheEntry> SampleEntries() {
  return {{"libcuda.so.1", kX8664, "/usr/lib/x86_64-linux-gnu/libcuda.so.1", 0},
          {"libcuda.so.1", kLdFlagElfLibc6, "/usr/lib/i386-linux-gnu/libcuda.so.1", 0},
          {"libc.so.6", kLdFlagAArch64Lib64 | kLdFlagElfLibc6, "/lib/aarch64-linux-gnu/libc.so.6", 0x42}};
}

void SetU32(std::string* bytes, size_t off, uint32_t v) { std::memcpy(bytes->data() + off, &v, 4); }

TEST(LdCacheTest, TheNewFormatRoundTripsThroughTheEncoder) {
  auto cache = ParseLdCache(EncodeLdCache(SampleEntries(), LdCacheFormat::kNew));
  ASSERT_OK(cache) << cache.status();
  EXPECT_EQ(cache->format, LdCacheFormat::kNew);
  ASSERT_EQ(cache->entries.size(), 3u);
  EXPECT_EQ(cache->entries[0].name, "libcuda.so.1");
  EXPECT_EQ(cache->entries[0].path, "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
  EXPECT_EQ(cache->entries[0].flags, kX8664);
  EXPECT_EQ(cache->entries[2].hwcap, 0x42u);
}

TEST(LdCacheTest, TheCompatFormatYieldsTheNewTableAppendedAfterTheOldOne) {
  std::string bytes = EncodeLdCache(SampleEntries(), LdCacheFormat::kCompat);
  ASSERT_EQ(bytes.substr(0, 11), "ld.so-1.7.0");
  auto cache = ParseLdCache(bytes);
  ASSERT_OK(cache) << cache.status();
  EXPECT_EQ(cache->format, LdCacheFormat::kCompat);
  ASSERT_EQ(cache->entries.size(), 3u);
  EXPECT_EQ(cache->entries[1].path, "/usr/lib/i386-linux-gnu/libcuda.so.1");
  EXPECT_EQ(cache->entries[2].hwcap, 0x42u);  // only the new table has hwcap
}

TEST(LdCacheTest, TheOldOnlyFormatIsReadToo) {
  auto cache = ParseLdCache(EncodeLdCache(SampleEntries(), LdCacheFormat::kOld));
  ASSERT_OK(cache) << cache.status();
  EXPECT_EQ(cache->format, LdCacheFormat::kOld);
  ASSERT_EQ(cache->entries.size(), 3u);
  EXPECT_EQ(cache->entries[2].name, "libc.so.6");
  EXPECT_EQ(cache->entries[2].path, "/lib/aarch64-linux-gnu/libc.so.6");
}

TEST(LdCacheTest, AnEmptyCacheHasNoEntries) {
  auto cache = ParseLdCache(EncodeLdCache({}));
  ASSERT_OK(cache) << cache.status();
  EXPECT_TRUE(cache->entries.empty());
}

TEST(LdCacheTest, FlagsTellTheArchitecture) {
  auto e = SampleEntries();
  EXPECT_TRUE(e[0].Is64Bit());
  EXPECT_EQ(e[0].ArchName(), "x86-64");
  EXPECT_FALSE(e[1].Is64Bit());
  EXPECT_EQ(e[1].ArchName(), "i386");
  EXPECT_TRUE(e[2].Is64Bit());
  EXPECT_EQ(e[2].ArchName(), "aarch64");
  EXPECT_TRUE(e[0].IsElf());
  EXPECT_EQ((LdCacheEntry{"x", 0x1303, "/x", 0}.ArchName()), "arch 0x1300");
}

TEST(LdCacheTest, EveryTruncationFailsWithAClearErrorAndNeverCrashes) {
  for (LdCacheFormat format : {LdCacheFormat::kNew, LdCacheFormat::kCompat, LdCacheFormat::kOld}) {
    std::string bytes = EncodeLdCache(SampleEntries(), format);
    for (size_t n = 0; n < bytes.size(); ++n) {
      auto cache = ParseLdCache(absl::string_view(bytes.data(), n), "cut");
      if (cache.ok()) continue;  // a compat file cut inside the new table may read as old-only
      EXPECT_EQ(cache.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(cache.status().message(), HasSubstr("parse cut: ")) << n;
    }
  }
}

TEST(LdCacheTest, AHugeEntryCountIsRejectedBeforeAnythingIsAllocated) {
  std::string bytes = EncodeLdCache(SampleEntries());
  SetU32(&bytes, 20, 0xffffffffu);
  auto cache = ParseLdCache(bytes, "/etc/ld.so.cache");
  ASSERT_FALSE(cache.ok());
  EXPECT_THAT(cache.status().message(), HasSubstr("4294967295 entries need"));
  std::string old = EncodeLdCache(SampleEntries(), LdCacheFormat::kOld);
  SetU32(&old, 12, 0x7fffffffu);
  EXPECT_THAT(ParseLdCache(old).status().message(), HasSubstr("old header: 2147483647 entries"));
}

TEST(LdCacheTest, AStringOffsetPastTheEndIsRejected) {
  std::string bytes = EncodeLdCache(SampleEntries());
  SetU32(&bytes, 48 + 24 + 8, 0xfffffff0u);  // entry 1's value
  auto cache = ParseLdCache(bytes);
  ASSERT_FALSE(cache.ok());
  EXPECT_THAT(cache.status().message(), HasSubstr("entry 1: value offset 4294967280 points past the end"));
}

TEST(LdCacheTest, AStringWithoutItsNulIsRejected) {
  std::string bytes = EncodeLdCache({{"libx.so.1", kX8664, "/x/libx.so.1", 0}});
  bytes.pop_back();  // the last NUL
  auto cache = ParseLdCache(bytes);
  ASSERT_FALSE(cache.ok());
  EXPECT_THAT(cache.status().message(), HasSubstr("is not NUL-terminated"));
}

TEST(LdCacheTest, GarbageAndOtherVersionsAreNotCaches) {
  EXPECT_THAT(ParseLdCache("").status().message(), HasSubstr("not an ld.so.cache"));
  EXPECT_THAT(ParseLdCache("\x7f" "ELF\x02\x01").status().message(), HasSubstr("not an ld.so.cache"));
  std::string bytes = EncodeLdCache(SampleEntries());
  bytes[17] = '2';  // "2.1"
  EXPECT_THAT(ParseLdCache(bytes).status().message(), HasSubstr("unsupported cache version \"2.1\""));
}

TEST(LdCacheTest, ReadingGoesThroughTheHostRoot) {
  auto dir = std::filesystem::temp_directory_path() / ("gpunode-ldcache-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "etc");
  std::ofstream(dir / "etc/ld.so.cache", std::ios::binary) << EncodeLdCache(SampleEntries());
  auto fs = HostFs::Open(dir.string());
  ASSERT_OK(fs);
  auto cache = ReadLdCache(*fs);
  ASSERT_OK(cache) << cache.status();
  EXPECT_EQ(cache->entries.size(), 3u);
  std::filesystem::remove_all(dir);
  EXPECT_THAT(ReadLdCache(*fs).status().message(), HasSubstr("/etc/ld.so.cache"));
}

TEST(LdCacheTest, ThisMachinesRealCacheListsA64BitLibc) {
  if (!std::filesystem::exists("/etc/ld.so.cache")) GTEST_SKIP() << "no /etc/ld.so.cache here";
  auto fs = HostFs::Open("/");
  ASSERT_OK(fs);
  auto cache = ReadLdCache(*fs);
  ASSERT_OK(cache) << cache.status();
  bool found = false;
  for (const LdCacheEntry& e : cache->entries) {
    if (e.name == "libc.so.6" && e.Is64Bit() && e.IsElf()) {
      found = true;
      EXPECT_THAT(e.path, HasSubstr("libc.so.6"));
    }
  }
  EXPECT_TRUE(found) << "entries: " << cache->entries.size();
}

}  // namespace
}  // namespace gpunode::container
