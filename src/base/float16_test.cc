#include "base/float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace redline {
namespace {

TEST(Float16Test, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(Fp32ToFp16(f), h) << h;
  }
}

TEST(Float16Test, KnownValues) {
  EXPECT_EQ(Fp16ToFp32(0x3c00), 1.0f);
  EXPECT_EQ(Fp16ToFp32(0xc000), -2.0f);
  EXPECT_EQ(Fp16ToFp32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7c00);                      // rounds to inf
  EXPECT_EQ(Fp32ToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
  EXPECT_TRUE(std::isnan(
      Fp16ToFp32(Fp32ToFp16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Bfloat16Test, RoundsToNearestEven) {
  EXPECT_EQ(Bf16ToFp32(Fp32ToBf16(1.0f)), 1.0f);
  EXPECT_EQ(Fp32ToBf16(1.00390625f), 0x3f80);  // exact tie -> even
  EXPECT_EQ(Fp32ToBf16(1.01171875f), 0x3f82);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(
      Bf16ToFp32(Fp32ToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace redline
