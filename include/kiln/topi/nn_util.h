/// \file nn_util.h
/// \brief Shared pieces of the convolution family (conv2d.h, depthwise_conv2d.h,
/// conv2d_transpose.h): padding and convolution attributes, output-extent arithmetic, the
/// spatial padding stage, NCHW[x]c layout helpers and the lookup of an operator's main stage.
///
/// Padding is per side: `Padding2D{top, left, bottom, right}`; `Padding2D::from` takes the
/// ONNX / TVM spellings (1 value: all sides; 2: (h, w); 4: (top, left, bottom, right)).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/te/schedule.h"
#include "kiln/te/tensor.h"

namespace kiln::topi {

/// Zero padding of the two spatial dimensions, per side.
struct Padding2D {
  int64_t top = 0, left = 0, bottom = 0, right = 0;

  /// The same padding on every side.
  static Padding2D all(int64_t p) { return {p, p, p, p}; }
  /// `h` above and below, `w` left and right.
  static Padding2D hw(int64_t h, int64_t w) { return {h, w, h, w}; }
  /// From 1 (all), 2 (h, w) or 4 (top, left, bottom, right) values; a user error naming `op`
  /// for another count or a negative value.
  static Padding2D from(const std::vector<int64_t>& v, const std::string& op);
  bool is_zero() const { return top == 0 && left == 0 && bottom == 0 && right == 0; }
  /// "(top, left, bottom, right)".
  std::string str() const;
  bool operator==(const Padding2D& o) const {
    return top == o.top && left == o.left && bottom == o.bottom && right == o.right;
  }
};

/// Attributes of a 2-D convolution.
struct Conv2DParams {
  int64_t stride_h = 1, stride_w = 1;
  Padding2D padding;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  /// "strides (1, 1), padding (1, 1, 1, 1), dilation (1, 1), groups 1".
  std::string str() const;
};

/// The output extent of a convolution along one axis:
/// (in + pad_before + pad_after - dilation * (k - 1) - 1) / stride + 1 (may be <= 0 when the
/// dilated kernel does not fit; callers check).
int64_t conv_out_extent(int64_t in, int64_t k, int64_t stride, int64_t dilation, int64_t pad_before,
                        int64_t pad_after);

/// Checks the attributes (strides and dilation positive, padding non-negative, groups
/// positive); a user error naming `op` otherwise.
void check_conv_params(const Conv2DParams& p, const std::string& op);

/// Zero-pads dimensions `h_axis` and `h_axis + 1` of `x` by `p` (the other dimensions are
/// untouched): a compute tagged "injective,pad" reading `x` under if_then_else. Returns `x`
/// itself when `p` is zero. pattern: injective
te::Tensor pad_spatial(const te::Tensor& x, int h_axis, const Padding2D& p,
                       const std::string& name = "pad");

/// The shape [N, C/bn, H, W, bn] of an NCHW tensor of shape `nchw` in layout NCHW<bn>c; a
/// user error naming `op` when bn does not divide C.
std::vector<int64_t> nchwc_shape(const std::vector<int64_t>& nchw, int64_t bn,
                                 const std::string& op = "nchwc_shape");
/// "NCHW16c" for bn = 16.
std::string nchwc_layout(int64_t bn);

/// The static shape of `t` as integers; a user error naming `op` when a dimension is not a
/// constant.
std::vector<int64_t> static_shape(const te::Tensor& t, const std::string& op);
/// "[1, 64, 56, 56]".
std::string shape_str(const std::vector<int64_t>& s);

/// The first compute op tagged `tag` reachable from `outs` (searching producers of the
/// outputs), or an undefined tensor.
te::Tensor find_tagged(const std::vector<te::Tensor>& outs, const std::string& tag);

/// Inlines every injective compute stage reachable from `outs` that is not an output, not in
/// `keep`, and not a producer of a stage in `keep` (so the main stage's inputs, e.g. its
/// padding, are left alone).
void inline_injective_consumers(te::Schedule& s, const std::vector<te::Tensor>& outs,
                                const std::vector<te::Tensor>& keep);

/// Largest divisor of n that is <= bound (at least 1).
int64_t largest_divisor_at_most(int64_t n, int64_t bound);

/// The default channel block of a blocked (NCHW[x]c) layout of C channels for `lanes` vector
/// lanes, one rule for every blocked operator so that chains of layers share one layout: the
/// largest power-of-two divisor of C up to the lanes when it is at least half of them (a whole
/// or a half vector: 40 channels in blocks of 8, not 10; 24 in blocks of 8, not 12, whose
/// 10- and 12-lane vectors LLVM splits into 8 + 2 and 8 + 4 and whose element-wise kernels run
/// scalar), else the largest divisor up to the lanes (6, 10: a squeeze-and-excitation block's
/// narrow convolutions).
int64_t channel_block(int64_t C, int64_t lanes);

}  // namespace kiln::topi
