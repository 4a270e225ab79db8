/// \file dynamic_kernels.h
/// \brief Runtime kernels of the operators whose output shape depends on the data, and TopK.
///
/// NonZero, Unique, NonMaxSuppression and TopK are sequential algorithms (counting, sorting,
/// greedy selection). Their generated kernels (topi/dynamic.h) are extern ops whose body calls
/// these C functions with the buffers' data pointers and the static shapes as integers. The first
/// three write their data-dependent output densely, row-major with the ACTUAL shape, at the start
/// of the output buffer (which is sized for the upper bound) and the actual extent into
/// `extent[0]`; the graph executor then exposes the output with that shape (docs/module-format.md,
/// "bounded").
///
/// Element types are given as (DataType code, bits): int 8/16/32/64, uint 8/16/32/64, bool
/// (uint 1, one byte per element), float 32/64. Every function returns 0, or -1 after
/// kiln_set_last_error for an element type it does not handle.
#ifndef KILN_RUNTIME_DYNAMIC_KERNELS_H_
#define KILN_RUNTIME_DYNAMIC_KERNELS_H_

#include <stdint.h>

#include "kiln/runtime/c_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/// NonZero: `in` has shape [d0, …, d{rank-1}] (rank 1..6; unused dims are 1). Writes the
/// multi-indices of the non-zero elements in row-major order as int64 [rank, n] into `out`
/// (bound [rank, numel]) and n into extent[0].
KILN_DLL int32_t kiln_dynamic_nonzero(const void* in, int32_t code, int32_t bits, int64_t rank,
                                      int64_t d0, int64_t d1, int64_t d2, int64_t d3, int64_t d4,
                                      int64_t d5, int64_t* out, int64_t* extent);

/// Unique over the slices of `in` viewed as [outer, n, inner] (the slices are in[:, i, :];
/// without an axis outer = inner = 1). Slices compare lexicographically. With `sorted` the
/// unique slices come in ascending order, else in order of first occurrence. Writes
///   y        [outer, u, inner]  the unique slices (bound u = n), same type as `in`
///   indices  [u]                the first occurrence of each unique slice
///   inverse  [n]                for each slice, the index of its unique slice in y
///   counts   [u]                how often each unique slice occurs
/// and u into extent[0].
KILN_DLL int32_t kiln_dynamic_unique(const void* in, int32_t code, int32_t bits, int64_t outer,
                                     int64_t n, int64_t inner, int32_t sorted, void* y,
                                     int64_t* indices, int64_t* inverse, int64_t* counts,
                                     int64_t* extent);

/// NonMaxSuppression (ONNX semantics): boxes float [batches, boxes, 4], scores float
/// [batches, classes, boxes]. `max_output` (int64), `iou_threshold` and `score_threshold`
/// (float) are one-element buffers, read only when the matching `has_*` flag is non-zero (an
/// absent max_output selects nothing; an absent score threshold keeps every box). Writes the
/// selected [batch, class, box] triples as int64 [k, 3] into `out` (bound k =
/// batches * classes * boxes) and k into extent[0].
KILN_DLL int32_t kiln_dynamic_nms(const float* boxes, const float* scores,
                                  const int64_t* max_output, const float* iou_threshold,
                                  const float* score_threshold, int32_t has_max_output,
                                  int32_t has_iou_threshold, int32_t has_score_threshold,
                                  int64_t batches, int64_t classes, int64_t num_boxes,
                                  int32_t center_point_box, int64_t* out, int64_t* extent);

/// TopK along the middle axis of `in` viewed as [outer, n, inner]: writes the k first elements
/// of each column [o, :, i] in order, the largest first when `largest` (NaN counting as the
/// largest), else the smallest first (NaN last), equal values by lower index, as `values`
/// [outer, k, inner] (the type of `in`) and their positions as int64 `indices`. The output
/// shape does not depend on the data (no extent). Returns -1 for k outside [0, n].
KILN_DLL int32_t kiln_topk(const void* in, int32_t code, int32_t bits, int64_t outer, int64_t n,
                           int64_t inner, int64_t k, int32_t largest, void* values,
                           int64_t* indices);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // KILN_RUNTIME_DYNAMIC_KERNELS_H_
