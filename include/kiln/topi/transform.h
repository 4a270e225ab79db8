/// \file transform.h
/// \brief Shape operators: reshape, transpose, concat, split, pad, strided_slice, take,
/// squeeze, expand_dims / unsqueeze, flatten, layout_transform.
///
/// All are injective (each output element reads at most one input element) and tagged
/// "injective,<op>". Shapes are static; a bad shape or axis throws a kiln::Error naming the op
/// and the shapes. Reads that a guard discards (pad borders, concat inputs) use clamped,
/// in-bounds indices so that vectorized code never reads outside a buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/te/tensor.h"
#include "kiln/topi/op_pattern.h"

namespace kiln::topi {

/// Reshape in row-major order. In `newshape`, 0 copies the input's dimension at the same
/// position (ONNX Reshape with allowzero = 0) and one -1 is inferred from the element count.
/// pattern: injective
te::Tensor reshape(const te::Tensor& x, const std::vector<int64_t>& newshape,
                   const std::string& name = "reshape");
/// transpose's permutation of a tensor of shape `in`: output dimension d is input dimension
/// perm[d] (empty axes: reversed; negative axes wrap; a repeated or missing axis throws).
std::vector<int> transpose_permutation(const std::vector<int64_t>& in,
                                       const std::vector<int>& axes);
/// out[i0, …] = x[i_axes…]: output dimension d is input dimension axes[d]; empty axes reverse
/// the dimensions. Negative axes wrap. pattern: injective
te::Tensor transpose(const te::Tensor& x, const std::vector<int>& axes = {},
                     const std::string& name = "transpose");
/// Joins tensors of one dtype along `axis`; the other dimensions must match.
/// pattern: injective
te::Tensor concat(const std::vector<te::Tensor>& xs, int axis = 0,
                  const std::string& name = "concat");
/// Splits along `axis` into `sections` equal parts (the size must divide).
/// pattern: injective
std::vector<te::Tensor> split(const te::Tensor& x, int sections, int axis = 0,
                              const std::string& name = "split");
/// Splits along `axis` before each of the ascending `indices` (numpy array_split with
/// indices): [0, i0), [i0, i1), …, [ilast, n). Every part must be non-empty.
/// pattern: injective
std::vector<te::Tensor> split_at(const te::Tensor& x, const std::vector<int64_t>& indices,
                                 int axis = 0, const std::string& name = "split");
/// Splits along `axis` into parts of the given sizes (ONNX Split), which must sum to the size.
/// pattern: injective
std::vector<te::Tensor> split_sizes(const te::Tensor& x, const std::vector<int64_t>& sizes,
                                    int axis = 0, const std::string& name = "split");
/// Constant padding: pad_before[d] / pad_after[d] elements (>= 0) before / after dimension d;
/// shorter lists pad the remaining dimensions by 0. pattern: injective
te::Tensor pad(const te::Tensor& x, const std::vector<int64_t>& pad_before,
               const std::vector<int64_t>& pad_after, double value = 0.0,
               const std::string& name = "pad");
/// What strided_slice reads of a tensor of shape `in`: output index i of dimension d is input
/// index start[d] + i * step[d], for i < extent[d] (the output shape).
struct SliceWindow {
  std::vector<int64_t> start, step, extent;
};
/// The window of strided_slice (its semantics below; the same errors). The importer's host
/// evaluator folds slices of shape arithmetic with it.
SliceWindow strided_slice_window(const std::vector<int64_t>& in, const std::vector<int64_t>& begin,
                                 const std::vector<int64_t>& end,
                                 const std::vector<int64_t>& strides = {},
                                 const std::vector<int>& axes = {});
/// numpy / ONNX Slice semantics on the axes `axes` (default: 0, 1, … for as many as `begin`
/// has): negative begin/end count from the end; they are clamped to [0, n] for a positive
/// stride and to [-1, n-1] (begin: [0, n-1]) for a negative one; strides default to 1 and
/// must not be 0. An empty result is an error. pattern: injective
te::Tensor strided_slice(const te::Tensor& x, const std::vector<int64_t>& begin,
                         const std::vector<int64_t>& end, const std::vector<int64_t>& strides = {},
                         const std::vector<int>& axes = {},
                         const std::string& name = "strided_slice");
/// ONNX GatherElements / torch.gather along `axis`: indices has x's rank and, off the axis, at
/// most x's extents; out[i] = x[i with i[axis] replaced by indices[i]], out shape = indices'
/// shape. Indices wrap and are checked at run time as take's ("gather_elements: index out of
/// range for axis a of extent n (...), got i").
/// pattern: injective
te::Tensor gather_elements(const te::Tensor& x, const te::Tensor& indices, int axis,
                           const std::string& name = "gather_elements");
/// ONNX Gather / numpy take along `axis`: out shape = x.shape[:axis] + indices.shape +
/// x.shape[axis+1:]. Indices are integer; negative ones wrap (i + n); an index outside
/// [-n, n) makes the kernel return an error at run time ("take: index out of range for axis a
/// of extent n (...), got i"); the indices are copied by an extern stage that checks
/// them. pattern: injective
te::Tensor take(const te::Tensor& x, const te::Tensor& indices, int axis = 0,
                const std::string& name = "take");
/// Removes the listed size-1 dimensions (all size-1 dimensions when `axes` is empty).
/// pattern: injective
te::Tensor squeeze(const te::Tensor& x, const std::vector<int>& axes = {},
                   const std::string& name = "squeeze");
/// Inserts `num_newaxis` size-1 dimensions at `axis` (in [-ndim-1, ndim]). pattern: injective
te::Tensor expand_dims(const te::Tensor& x, int axis, int num_newaxis = 1,
                       const std::string& name = "expand_dims");
/// ONNX Unsqueeze: `axes` are positions in the OUTPUT (rank ndim + axes.size()), negatives
/// wrap there. pattern: injective
te::Tensor unsqueeze(const te::Tensor& x, const std::vector<int>& axes,
                     const std::string& name = "unsqueeze");
/// ONNX Flatten: to 2-D [prod(shape[:axis]), prod(shape[axis:])]; axis in [-ndim, ndim].
/// pattern: injective
te::Tensor flatten(const te::Tensor& x, int axis = 1, const std::string& name = "flatten");
/// Converts between "NCHW" and blocked "NCHW<b>c" layouts (b > 0, e.g. "NCHW16c":
/// [N, C/b, H, W, b] with channel c at [c / b, …, c % b]), in either direction or from one
/// block size to another. The channel count must divide by every block size. pattern:
/// injective
te::Tensor layout_transform(const te::Tensor& x, const std::string& src_layout,
                            const std::string& dst_layout,
                            const std::string& name = "layout_transform");

}  // namespace kiln::topi
