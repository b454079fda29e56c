#include "base/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace redline {
namespace {

TEST(HugePagesTest, RoundsUpToWholePages) {
  EXPECT_EQ(HugePagesOf(0), 0);
  EXPECT_EQ(HugePagesOf(1), kHugePageBytes);
  EXPECT_EQ(HugePagesOf(kHugePageBytes), kHugePageBytes);
  EXPECT_EQ(HugePagesOf(kHugePageBytes + 1), 2 * kHugePageBytes);
  EXPECT_EQ(HugePagesOf(INT64_MAX - kHugePageBytes) % kHugePageBytes, 0);
}

TEST(HugePagesTest, MappingIsAlignedZeroedAndWritableToItsEnd) {
  for (int pages : {1, 3}) {
    const auto bytes = static_cast<size_t>(pages * kHugePageBytes);
    auto* p = static_cast<unsigned char*>(MapHugePages(bytes));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u);
    EXPECT_EQ(p[0], 0);
    EXPECT_EQ(p[bytes - 1], 0);
    std::memset(p, 0x5a, bytes);
    EXPECT_EQ(p[bytes / 2], 0x5a);
    UnmapHugePages(p, bytes);
  }
  UnmapHugePages(nullptr, 0);  // a no-op, as free(nullptr)
}

}  // namespace
}  // namespace redline
