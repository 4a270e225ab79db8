/// \file half.h
/// \brief IEEE 754 binary16 (float16) values on the host: the compiler reads float16 constants (a
/// model's weights, a Clip bound) as float32 (exact: every binary16 value, subnormals,
/// infinities and NaN, is a float32 value), and the runner writes float16 inputs (rounded to
/// nearest, ties to even, as a cast does).
#pragma once

#include <cstdint>
#include <cstring>

namespace kiln::support {

/// The float32 value of the binary16 bit pattern `h`.
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);  // infinity, NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);  // normal: rebias 15 -> 127
  } else if (man == 0) {
    bits = sign;  // ±0
  } else {
    // Subnormal: m·2^-24; shift the mantissa up to its leading one.
    exp = 113;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// The binary16 bit pattern nearest `f` (ties to even; beyond the largest finite value,
/// infinity; NaN stays NaN).
inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a >= 0x7f800000u)  // infinity; NaN keeps its top payload bits and stays quiet
    return static_cast<uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | (a >> 13) : 0u));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (a < 0x38800000u) {  // below 2^-14: a subnormal binary16, round(|f| · 2^24)
    const uint32_t e = a >> 23;
    if (e < 102) return static_cast<uint16_t>(sign);  // below 2^-25: rounds to 0
    const uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t r = a - 0x38000000u;  // rebias 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}

}  // namespace kiln::support
