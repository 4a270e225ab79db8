/// \file saturating.h
/// \brief Shape arithmetic on sizes that come from a user's model and may be hostile.
///
/// A model can declare dimensions near 2^63; their product overflows int64 (undefined
/// behaviour). These saturate at INT64_MAX instead, a count no real tensor has, so the caller's
/// size check (element count equal, at most 2^31 - 1 elements) fails and its error names the
/// node.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace kiln {

/// a * b, or INT64_MAX when it overflows.
inline int64_t mul_saturating(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

/// The product of `dims`; INT64_MAX when it overflows.
inline int64_t numel_saturating(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n = mul_saturating(n, d);
  return n;
}

}  // namespace kiln
