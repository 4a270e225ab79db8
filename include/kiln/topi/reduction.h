/// \file reduction.h
/// \brief Reductions over any set of axes: sum, mean, max, min, prod, argmax, argmin; cumsum.
///
/// `axes` may be negative (counted from the end); an empty list reduces over every axis.
/// Duplicate or out-of-range axes throw a kiln::Error naming the op and the shape. With
/// `keepdims` the reduced axes stay as size-1 dimensions; otherwise they are dropped (reducing
/// everything without keepdims gives a rank-0 tensor). Reduction stages are tagged
/// "comm_reduce,<op>" (argmax/argmin: "comm_reduce_idx,<op>").
#pragma once

#include <string>
#include <vector>

#include "kiln/te/tensor.h"
#include "kiln/topi/op_pattern.h"

namespace kiln::topi {

/// pattern: comm_reduce
te::Tensor sum(const te::Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false,
               const std::string& name = "sum");
/// Sum divided by the number of reduced elements (integers: floor division); two stages, the
/// sum and an element-wise division tagged "elemwise,mean". pattern: comm_reduce
te::Tensor mean(const te::Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false,
                const std::string& name = "mean");
/// pattern: comm_reduce
te::Tensor max(const te::Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false,
               const std::string& name = "max");
/// pattern: comm_reduce
te::Tensor min(const te::Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false,
               const std::string& name = "min");
/// pattern: comm_reduce
te::Tensor prod(const te::Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false,
                const std::string& name = "prod");
/// Index of the largest element along `axes` (row-major position within the reduced axes when
/// there are several), with the FIRST occurrence on ties like numpy and PyTorch. The result
/// is output 0 of a two-output compute (output 1 holds the maximum); `index_dtype` is int32
/// or int64. pattern: comm_reduce
te::Tensor argmax(const te::Tensor& x, const std::vector<int>& axes, bool keepdims = false,
                  DataType index_dtype = DataType::Int(64), const std::string& name = "argmax");
/// Like argmax, for the smallest element. pattern: comm_reduce
te::Tensor argmin(const te::Tensor& x, const std::vector<int>& axes, bool keepdims = false,
                  DataType index_dtype = DataType::Int(64), const std::string& name = "argmin");

/// Running sums along `axis` (ONNX CumSum): y[.., j, ..] = the sum of x[.., i, ..] over i <= j
/// (i < j when `exclusive`; i >= j, or i > j, when `reverse`), accumulated in x's type in
/// scan order. A scan (an extern stage with hand-written loops, n adds per row), parallel
/// over the rows before the axis, the adds vectorized over the elements after it.
/// pattern: opaque
te::Tensor cumsum(const te::Tensor& x, int axis, bool exclusive = false, bool reverse = false,
                  const std::string& name = "cumsum");
/// The same as a te reduction: every output element sums its part of the axis (n^2 / 2 adds
/// per row, each element independent: what a GPU runs). pattern: comm_reduce
te::Tensor cumsum_by_sum(const te::Tensor& x, int axis, bool exclusive = false,
                         bool reverse = false, const std::string& name = "cumsum");

}  // namespace kiln::topi
