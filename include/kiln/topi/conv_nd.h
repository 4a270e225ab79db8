/// \file conv_nd.h
/// \brief Convolution, transposed convolution and pooling over 3-D windows (NCDHW), and max
/// pooling's argmax (Indices) over 1-, 2- or 3-D windows.
///
/// * `conv3d_ncdhw`: data [N, C, D, H, W], kernel [O, C/groups, KD, KH, KW]; per-side padding,
///   strides, dilation, groups; output [N, O, OD, OH, OW]. Pattern kOutEWiseFusable (like
///   conv2d: a bias add or an activation fuses into its output).
/// * `conv3d_transpose_ncdhw`: data [N, C, D, H, W], kernel [C, O/groups, KD, KH, KW] (ONNX
///   ConvTranspose's layout); out extent = stride·(in - 1) + output_padding + dilation·(k - 1)
///   + 1 - pad_begin - pad_end. Computed directly as a gather: output z takes input
///   (z + pad_begin - k·dilation) / stride where that is a whole number inside the input.
/// * `pool_nd`: max / average pooling of x [N, C, spatial...] over 1 to 3 spatial axes, with the
///   semantics of pooling.h (PyTorch's: ceil_mode drops a last window starting in the end
///   padding; max ignores padding; avg divides by the taps inside the padded input when
///   count_include_pad, else inside the input), any padding (not limited to half the window).
/// * `max_pool_nd_indices`: the flat index into x (over all of N, C and the spatial axes) of
///   the first maximum of each window in row-major window order, as ONNX MaxPool's Indices;
///   storage_order 1 writes the spatial part column-major (first spatial axis fastest).
///
/// Padding vectors list the begins of every spatial axis, then the ends (ONNX's order).
/// Errors name the operator, the shapes and the attributes.
///
/// The CPU schedule of conv3d (`schedule_conv3d_ncdhw`) follows conv2d_nchw's reference
/// schedule: batch, output channel, depth and row fused into one parallel loop, each output row
/// accumulated in a local buffer with the reduction loops outside it, the row split by the
/// vector lanes and vectorized; a padding stage is computed at the root in parallel. When the
/// output width is a multiple of 4 it is the rule-based scheduler's (auto_schedule.h) instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/target/target.h"
#include "kiln/te/schedule.h"
#include "kiln/te/tensor.h"
#include "kiln/topi/op_pattern.h"
#include "kiln/topi/pooling.h"

namespace kiln::topi {

/// Pattern kind of conv3d and conv3d_transpose.
constexpr OpPattern kConv3DPattern = OpPattern::kOutEWiseFusable;

/// Attributes of an N-d convolution (3 spatial axes for conv3d).
struct ConvNdParams {
  std::vector<int64_t> strides{1, 1, 1};
  std::vector<int64_t> dilation{1, 1, 1};
  std::vector<int64_t> padding{0, 0, 0, 0, 0, 0};  ///< begins, then ends
  std::vector<int64_t> output_padding{0, 0, 0};    ///< transposed convolution only
  int64_t groups = 1;
};

/// Shape rule of conv3d_ncdhw; a user error naming "conv3d", the shapes and the attributes
/// otherwise (rank, channel / group mismatch, a kernel larger than the padded input).
std::vector<int64_t> conv3d_ncdhw_shape(const std::vector<int64_t>& data,
                                        const std::vector<int64_t>& kernel,
                                        const ConvNdParams& params);

/// out[n, o, z, y, x] = sum_{c, kd, kh, kw} pad(data)[n, g(o)·C/groups + c, z·sd + kd·dd,
/// y·sh + kh·dh, x·sw + kw·dw] · kernel[o, c, kd, kh, kw]. The padding is its own stage (tag
/// "injective,pad"); main stage tag "conv3d_ncdhw". pattern: out_ewise_fusable
te::Tensor conv3d_ncdhw(const te::Tensor& data, const te::Tensor& kernel,
                        const ConvNdParams& params, const std::string& name = "conv3d_ncdhw");

/// Shape rule of conv3d_transpose_ncdhw; a user error naming "conv3d_transpose" otherwise.
std::vector<int64_t> conv3d_transpose_ncdhw_shape(const std::vector<int64_t>& data,
                                                  const std::vector<int64_t>& kernel,
                                                  const ConvNdParams& params);

/// The transposed 3-D convolution (see the file comment); main stage tag
/// "conv3d_transpose_ncdhw". pattern: out_ewise_fusable
te::Tensor conv3d_transpose_ncdhw(const te::Tensor& data, const te::Tensor& kernel,
                                  const ConvNdParams& params,
                                  const std::string& name = "conv3d_transpose_ncdhw");

/// The schedule of a group whose first output holds a conv3d_ncdhw stage (found by tag): see
/// the file comment. Other outputs' stages are left at the root.
te::Schedule schedule_conv3d_ncdhw(const std::vector<te::Tensor>& outs, const Target& target);

/// Window attributes of pool_nd: one value per spatial axis, padding begins then ends.
struct PoolNdAttrs {
  std::vector<int64_t> kernel, stride, dilation, padding;
  bool ceil_mode = false;
  bool count_include_pad = false;  ///< avg only
};

/// Max / average pooling over the spatial axes (2..) of x [N, C, spatial...], 1 to 3 of them.
/// pattern: out_ewise_fusable
te::Tensor pool_nd(const te::Tensor& x, PoolType type, const PoolNdAttrs& attrs,
                   const std::string& name = "pool_nd");

/// ONNX MaxPool's Indices (int64, the pooled shape): see the file comment. pattern: opaque
te::Tensor max_pool_nd_indices(const te::Tensor& x, const PoolNdAttrs& attrs, int storage_order,
                               const std::string& name = "max_pool_indices");

}  // namespace kiln::topi
