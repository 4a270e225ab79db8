// Private checks shared by the integer operators of quantized models (qnn.cc,
// qnn_depthwise.cc): the requantisation parameters and the per-channel bias / scale vectors.
#pragma once

#include <string>
#include <vector>

#include "kiln/topi/qnn.h"
#include "topi_util.h"

namespace kiln::topi::detail {

inline bool is_q8(DataType t) { return t == DataType::UInt(8) || t == DataType::Int(8); }

/// A user error naming `op` unless `p` is a valid requantisation (output type, bounds within
/// it, the output zero point within it).
inline void check_requant(const RequantParams& p, const std::string& op) {
  KILN_USER_CHECK(is_q8(p.out_dtype))
      << op << ": output must be uint8 or int8, got " << p.out_dtype;
  const bool u8 = p.out_dtype == DataType::UInt(8);
  const int64_t lo = u8 ? 0 : -128, hi = u8 ? 255 : 127;
  KILN_USER_CHECK(lo <= p.out_min && p.out_min <= p.out_max && p.out_max <= hi)
      << op << ": saturation bounds [" << p.out_min << ", " << p.out_max << "] are not within "
      << p.out_dtype << "'s range [" << lo << ", " << hi << "]";
  KILN_USER_CHECK(lo <= p.y_zero_point && p.y_zero_point <= hi)
      << op << ": output zero point " << p.y_zero_point << " is outside " << p.out_dtype
      << "'s range";
}

/// The channel vectors of a product with `O` outputs: bias int32 [O], scale float32 [O].
inline void check_channel_vectors(const te::Tensor& bias, const te::Tensor& scale, int64_t O,
                                  const std::string& op) {
  auto bs = const_shape(bias, op), ss = const_shape(scale, op);
  KILN_USER_CHECK(bias->dtype == DataType::Int(32) && bs == std::vector<int64_t>{O})
      << op << ": bias must be int32 [" << O << "], got " << bias->dtype << " " << shape_text(bs);
  KILN_USER_CHECK(scale->dtype == DataType::Float(32) && ss == std::vector<int64_t>{O})
      << op << ": scale must be float32 [" << O << "], got " << scale->dtype << " "
      << shape_text(ss);
}

}  // namespace kiln::topi::detail
