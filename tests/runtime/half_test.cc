// float16 on the host (support/half.h): decoding every binary16 pattern and encoding float32
// values spread over the whole bit space, against the compiler's own _Float16 conversions where
// it has them; and known values (subnormals, the largest finite, ties, overflow, NaN) always.
#include "kiln/support/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace kiln::support {
namespace {

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

TEST(Half, KnownValues) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));  // the smallest subnormal
  EXPECT_EQ(half_to_float(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(bits_of(half_to_float(0x8000)), 0x80000000u);  // -0
  EXPECT_EQ(half_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);  // below the midpoint to 65536
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // the midpoint: to even, infinity
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // a tie: to even
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // a tie between 0 and 2^-24
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -26)), 0x0001);
  EXPECT_EQ(float_to_half(-std::ldexp(1023.0f, -24)), 0x83ff);
  EXPECT_EQ(float_to_half(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::quiet_NaN()) & 0x7e00, 0x7e00);
}

#ifdef __FLT16_MAX__
TEST(Half, MatchesTheCompilersConversions) {
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 v;
    const uint16_t b = static_cast<uint16_t>(h);
    std::memcpy(&v, &b, sizeof b);
    const float want = static_cast<float>(v), got = half_to_float(b);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
    } else {
      ASSERT_EQ(bits_of(got), bits_of(want)) << std::hex << h;
    }
  }
  // Every 4099th float32 pattern: all exponents, signs and rounding cases.
  for (uint64_t x = 0; x < (uint64_t{1} << 32); x += 4099) {
    const float f = from_bits(static_cast<uint32_t>(x));
    const _Float16 v = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &v, sizeof want);
    const uint16_t got = float_to_half(f);
    if (std::isnan(f)) {
      ASSERT_TRUE((got & 0x7c00) == 0x7c00 && (got & 0x3ff) != 0) << std::hex << x;
    } else {
      ASSERT_EQ(got, want) << std::hex << x;
    }
  }
}
#endif

}  // namespace
}  // namespace kiln::support
