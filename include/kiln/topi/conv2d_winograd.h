/// \file conv2d_winograd.h
/// \brief 3x3 stride-1 convolution by Winograd's minimal filtering F(m x m, 3 x 3) in the
/// blocked layout NCHW[x]c (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks").
///
/// The output is cut into m x m tiles. Each tile of the padded input (alpha x alpha, alpha =
/// m + 2) is transformed to V = B^T d B, the kernel (once, at compile time) to U = G g G^T, and
/// then, for each of the alpha^2 transform points separately, M = V x U is a matrix product over
/// the input channels; the output tile is A^T M A. F(2x2, 3x3) needs 16 products where direct
/// convolution needs 36 per tile and channel pair (2.25x fewer multiply-adds); the transforms
/// only add and subtract.
///
/// Stages (each its own loop nest): padding (to a whole number of tiles), the input transform
/// V [alpha, alpha, C/x, P, x] (P = N * tiles; for each transform point, the product then
/// reads contiguous memory: 1.3-1.6x faster than a tile's alpha^2 vectors side by side), the
/// batched product M [alpha, alpha, O/y, P, y]
/// (register-tiled like a 1x1 conv2d_nchwc: a broadcast of V times kernel vectors), and the
/// output transform [N, O/y, OH, OW, y] (main stage tag "conv2d_winograd_nchwc") into which an
/// element-wise epilogue (bias, relu, residual add) is inlined.
///
///   Conv2DWorkload wl{1, 64, 56, 56, 64, 3, 3, {1, 1, Padding2D::all(1)}};
///   NDArray u = transform_winograd_weight(oihw_kernel, 2, 16, 16);  // compile time
///   autotune::Template t = conv2d_winograd_nchwc_template(wl, {}, Target::host());
///   // inst.args = {data [1, 64/16, 56, 56, 16], u [4, 4, 4, 4, 16, 16], output}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/autotune/template.h"
#include "kiln/runtime/ndarray.h"
#include "kiln/target/target.h"
#include "kiln/te/schedule.h"
#include "kiln/te/tensor.h"
#include "kiln/topi/conv2d.h"

namespace kiln::topi {

/// Whether `wl` can be computed by Winograd F(m x m, 3 x 3): a 3x3 kernel, strides and
/// dilation 1, groups 1.
bool winograd_applicable(const Conv2DWorkload& wl);

/// Whether the graph compiler computes `wl` by Winograd rather than directly on `target`: every
/// winograd_candidate (at least 7 x 7 outputs), with AVX-512 at least 32 input and output
/// channels. A map under 14 x 14 whose F(4x4) transformed kernel (4x the kernel) would exceed
/// 16 MB takes F(2x2) (16/9 of the kernel). On Zen 4, 1 thread, inside the model: AlexNet's
/// 13x13 layers 2.61 -> 1.38 and 1.96 -> 1.20 ms (kernels of 2.6-3.5 MB transformed);
/// ResNet-18's 7x7x512 layers (C12) 2.03 -> 1.34 ms by F(2x2) in kiln-bench-ops (2.10 -> 1.48
/// with the caches evicted before each call), 16.8 MB of weights each instead of 9.4 (F(4x4)'s
/// 38 MB had kept them direct: docs/conv2d-schedule.md). With AVX2 the direct convolution is
/// bound by its FMAs: ResNet-18's 7x7x512 layer took 4.4 ms by Winograd F(2x2) against 8.2 ms
/// direct inside the model on Zen 1.
bool prefer_winograd(const Conv2DWorkload& wl, const Target& target);

/// Whether tuning should also try Winograd for `wl` (and compiling with records of both
/// algorithms pick the faster): applicable, at least 16 input and output channels and 7 x 7
/// outputs.
bool winograd_candidate(const Conv2DWorkload& wl);

/// [alpha, alpha, O/oc_bn, C/ic_bn, ic_bn, oc_bn] (alpha = m + 2) for a 3x3 OIHW kernel shape;
/// a user error naming the op when the kernel is not 3x3, m is not 2 or 4, or a block does not
/// divide its channel count.
std::vector<int64_t> winograd_weight_shape(const std::vector<int64_t>& oihw, int64_t m,
                                           int64_t ic_bn, int64_t oc_bn);

/// U = G g G^T of every (output, input) channel pair of a float32 OIHW 3x3 kernel, computed in
/// double precision, in the blocked shape of winograd_weight_shape. Meant for compile time.
runtime::NDArray transform_winograd_weight(const runtime::NDArray& oihw, int64_t m, int64_t ic_bn,
                                           int64_t oc_bn);

/// Shape rule: [N, O/y, OH, OW, y] from data [N, C/x, H, W, x] and a transformed kernel
/// [alpha, alpha, O/y, C/x, x, y]; a user error naming "conv2d_winograd_nchwc", the shapes and
/// the attributes otherwise (strides and dilation must be 1, groups 1).
std::vector<int64_t> conv2d_winograd_nchwc_shape(const std::vector<int64_t>& data,
                                                 const std::vector<int64_t>& transformed_kernel,
                                                 const Conv2DParams& params);

/// The Winograd convolution (the tile size m is the kernel's alpha - 2); when `epilogue` is not
/// empty, one element-wise stage (tag "elemwise,conv2d_epilogue") follows the output transform
/// and is returned. pattern: out_ewise_fusable
te::Tensor conv2d_winograd_nchwc(const te::Tensor& data, const te::Tensor& transformed_kernel,
                                 const Conv2DParams& params, const EpilogueSpec& epilogue = {},
                                 const std::string& name = "conv2d_winograd_nchwc");

/// The tile size m and channel blocks a config chooses for a workload (knobs tile_m, fixed, and
/// the default lanes-wide blocks, so the layer shares its neighbours' layout).
struct WinogradLayout {
  int64_t m = 4, ic_bn = 0, oc_bn = 0;
  std::vector<int64_t> data_shape, kernel_shape, out_shape;  ///< blocked shapes
};
WinogradLayout define_conv2d_winograd_knobs(autotune::Config& cfg, const Conv2DWorkload& wl,
                                            const Target& target);

/// Schedules the group whose output is `out` and whose main stage is a conv2d_winograd_nchwc
/// (found by tag): padding and input transform parallel over tiles, the product tiled into
/// registers (knobs oc_reg, tile_p, unroll_ic) and parallel over transform points, the output
/// transform (with the inlined epilogue) parallel over output rows of tiles.
void schedule_conv2d_winograd_nchwc(autotune::Config& cfg, te::Schedule& s, const te::Tensor& out,
                                    const Target& target);

/// Template "conv2d_winograd_nchwc": args {data (NCHW<x>c), transformed kernel, [bias [O]],
/// [residual (NCHW<y>c)], out}.
autotune::Template conv2d_winograd_nchwc_template(const Conv2DWorkload& wl, const EpilogueFlags& ep,
                                                  const Target& target);

}  // namespace kiln::topi
