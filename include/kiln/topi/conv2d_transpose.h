/// \file conv2d_transpose.h
/// \brief Transposed 2-D convolution (the gradient of conv2d with respect to its input; DCGAN's
/// up-sampling layers), NCHW. pattern: out_ewise_fusable (kConv2DPattern).
///
/// Data [N, C, H, W], kernel [C, O/g, KH, KW] (the ONNX / PyTorch ConvTranspose layout) for g
/// groups: output channel o reads input channels (o / (O/g))·C/g .. + C/g.
/// OH = (H - 1) * sh - pad_top - pad_bottom + dh * (KH - 1) + output_padding_h + 1 (same for W).
/// Computed as a convolution with stride 1 of the flipped, channel-transposed kernel over the
/// input dilated by the stride and padded by dilation * (K - 1) - pad (a negative value crops):
/// the dilated-and-padded input is one stage that reads the input only where a value exists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/topi/conv2d.h"

namespace kiln::topi {

/// Shape rule: [N, O, OH, OW]; a user error naming "conv2d_transpose_nchw", the shapes and the
/// attributes otherwise (channel mismatch, channels not divisible by groups, output_padding not
/// smaller than the stride or the dilation, an empty output).
std::vector<int64_t> conv2d_transpose_nchw_shape(const std::vector<int64_t>& data,
                                                 const std::vector<int64_t>& kernel,
                                                 const Conv2DParams& params,
                                                 int64_t output_padding_h = 0,
                                                 int64_t output_padding_w = 0);

/// out[n, o, y, x] = sum_{c, kh, kw} data[n, c, (y + pt - kh*dh) / sh, (x + pl - kw*dw) / sw] *
/// kernel[c, o, kh, kw] over the terms whose divisions are exact and in range (with groups, c
/// over o's group and kernel column o mod O/g). Main stage tag
/// "conv2d_transpose_nchw", its dilated-padded input a stage tagged "injective,dilate_pad".
te::Tensor conv2d_transpose_nchw(const te::Tensor& data, const te::Tensor& kernel,
                                 const Conv2DParams& params, int64_t output_padding_h = 0,
                                 int64_t output_padding_w = 0,
                                 const std::string& name = "conv2d_transpose_nchw");

/// The NCHW row schedule (knobs tile_ow, vectorize, parallel_rows); the dilated input is a root
/// stage in parallel.
void schedule_conv2d_transpose_nchw(autotune::Config& cfg, te::Schedule& s, const te::Tensor& out,
                                    const Target& target);
/// The fallback (untuned) schedule: the rule-based scheduler (auto_schedule.h).
te::Schedule schedule_conv2d_transpose_nchw(const std::vector<te::Tensor>& outs,
                                            const Target& target);

/// A transposed convolution's shapes: data [batch, in_channel, height, width], kernel
/// [in_channel, out_channel, kernel_h, kernel_w]; params.groups must be 1.
struct Conv2DTransposeWorkload {
  Conv2DWorkload conv;  ///< shapes and attributes (out_channel = O of the kernel)
  int64_t output_padding_h = 0, output_padding_w = 0;
};
/// Template "conv2d_transpose_nchw": args {data, kernel, out}.
autotune::Template conv2d_transpose_nchw_template(const Conv2DTransposeWorkload& wl,
                                                  const Target& target);

}  // namespace kiln::topi
