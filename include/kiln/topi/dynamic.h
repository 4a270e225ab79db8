/// \file dynamic.h
/// \brief Operators whose output shape depends on the data: NonZero, Unique, NonMaxSuppression;
/// and TopK, a sort in the runtime too.
///
/// The first three return its outputs with an UPPER-BOUND shape along one axis plus a last output,
/// int64 [1], holding the actual extent of that axis after the kernel ran. The kernel writes a
/// bounded output densely, row-major with its actual shape, at the start of the bound-sized buffer;
/// the graph layer (graph.h, BoundedOutput) and the graph executor turn it into a tensor of the
/// actual shape. The computes are extern ops calling the runtime's C kernels
/// (kiln/runtime/dynamic_kernels.h); their pattern kind is opaque.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/te/tensor.h"

namespace kiln::topi {

/// NonZero of `x` (rank 1..6; int, uint, bool or float32/64 elements): {indices int64 [rank,
/// numel(x)] bounded on axis 1, extent int64 [1]}. pattern: opaque
std::vector<te::Tensor> nonzero(const te::Tensor& x, const std::string& name = "nonzero");

/// Unique of `x` (int, uint, bool or float32/64), flattened when `axis` is empty, else over the
/// slices along `axis` (negative counts from the end); ascending when `sorted`, else in order of
/// first occurrence. With n = the flattened size or the axis extent: {y [x's shape with n on the
/// axis, or [n]] bounded on the axis (0 without one), indices int64 [n] bounded, inverse_indices
/// int64 [n] (static), counts int64 [n] bounded, extent int64 [1]}. pattern: opaque
std::vector<te::Tensor> unique(const te::Tensor& x, std::optional<int64_t> axis, bool sorted,
                               const std::string& name = "unique");

/// NonMaxSuppression (ONNX): boxes float32 [B, N, 4], scores float32 [B, C, N], and the optional
/// one-element inputs max_output_boxes_per_class (int64), iou_threshold and score_threshold
/// (float32) — undefined tensors when absent. center_point_box selects [xc, yc, w, h] boxes (1)
/// or corner pairs [y1, x1, y2, x2] (0). {selected int64 [B * C * N, 3] bounded on axis 0,
/// extent int64 [1]}. pattern: opaque
std::vector<te::Tensor> non_max_suppression(const te::Tensor& boxes, const te::Tensor& scores,
                                            const te::Tensor& max_output,
                                            const te::Tensor& iou_threshold,
                                            const te::Tensor& score_threshold,
                                            int64_t center_point_box,
                                            const std::string& name = "nms");

/// TopK of `x` (int, uint or float32/64) along `axis` (negative counts from the end), 0 <= k <=
/// the axis extent: {values [x's shape with k on the axis] in order (the largest first when
/// `largest`, NaN counting as the largest, else the smallest first; equal values by lower
/// index), indices int64 of the same shape}. Static shapes (no extent): a partial sort in the
/// runtime (kiln_topk), n log k per column. pattern: opaque
std::vector<te::Tensor> topk(const te::Tensor& x, int64_t k, int64_t axis, bool largest,
                             const std::string& name = "topk");

/// TopK as te computes, for targets that cannot call the runtime (GPUs): element i's rank is
/// the number of elements before it in the order (greater, or equal at a lower index: n
/// comparisons each), output j selects the element of rank j. Same outputs as topk, except
/// that NaNs compare as nothing does. pattern: opaque
std::vector<te::Tensor> topk_by_rank(const te::Tensor& x, int64_t k, int64_t axis, bool largest,
                                     const std::string& name = "topk");

}  // namespace kiln::topi
