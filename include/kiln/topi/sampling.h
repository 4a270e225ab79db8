/// \file sampling.h
/// \brief Sampling operators: GridSample (bilinear / nearest / bicubic interpolation at the
/// points of a sampling grid, with zeros / border / reflection padding) and RoiAlign (average
/// or max of bilinear samples over the bins of regions of interest).
///
/// Both are te computes with gathers at clamped, in-bounds indices; reads a padding rule
/// discards are masked, never out of bounds. The arithmetic follows the ONNX reference
/// implementations (which follow PyTorch's grid_sampler and the Caffe2 / ONNX Runtime
/// RoiAlign kernels).
///
///   te::Tensor y = topi::grid_sample(x, grid, GridSampleMode::kBilinear,
///                                    GridSamplePadding::kZeros, false);
#pragma once

#include <cstdint>
#include <string>

#include "kiln/te/tensor.h"

namespace kiln::topi {

enum class GridSampleMode { kBilinear, kNearest, kBicubic };
enum class GridSamplePadding { kZeros, kBorder, kReflection };

/// out[n, c, h, w] = x[n, c] interpolated at the normalized point grid[n, h, w] = (x, y) in
/// [-1, 1] (−1: the left / top edge: the first pixel's centre when `align_corners`, else its
/// outer edge). x: [N, C, H, W] float, grid: [N, Ho, Wo, 2] of x's dtype; out [N, C, Ho, Wo].
/// Nearest rounds half to even. pattern: opaque
te::Tensor grid_sample(const te::Tensor& x, const te::Tensor& grid, GridSampleMode mode,
                       GridSamplePadding padding, bool align_corners,
                       const std::string& name = "grid_sample");

/// RoiAlign's attributes.
struct RoiAlignParams {
  int64_t output_height = 1, output_width = 1;
  /// Samples per bin along each axis; must be positive (the adaptive 0 depends on the data).
  int64_t sampling_ratio = 1;
  double spatial_scale = 1.0;
  /// true: coordinates shifted by −0.5 (ONNX half_pixel); false: output_half_pixel, with
  /// regions at least 1×1.
  bool half_pixel = true;
  /// true: max of the samples' largest weighted corner (ONNX's max mode); false: average.
  bool max_mode = false;
};

/// out[r, c, ph, pw] pools bin (ph, pw) of region rois[r] = (x1, y1, x2, y2) of image
/// batch_indices[r] of x. x: [N, C, H, W] float; rois: [R, 4] of x's dtype; batch_indices:
/// [R] integer (clamped to [0, N)); out [R, C, output_height, output_width]. A blocked x
/// [N, C/b, H, W, b] gives a blocked out [R, C/b, output_height, output_width, b].
/// pattern: opaque
te::Tensor roi_align(const te::Tensor& x, const te::Tensor& rois, const te::Tensor& batch_indices,
                     const RoiAlignParams& p, const std::string& name = "roi_align");

}  // namespace kiln::topi
