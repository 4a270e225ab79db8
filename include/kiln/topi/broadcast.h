/// \file broadcast.h
/// \brief Binary and ternary operators with numpy broadcasting.
///
/// Shapes align at the trailing dimension; a dimension of size 1 (or a missing leading one)
/// stretches to the other operand's size. Incompatible shapes throw a kiln::Error such as
/// "add: cannot broadcast shapes [2, 3] and [4]". Operands must have the same dtype
/// ("add: dtype mismatch: float32 and int32"). Every compute is tagged "broadcast,<op>".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/te/tensor.h"
#include "kiln/topi/op_pattern.h"

namespace kiln::topi {

/// The numpy broadcast of two static shapes; throws "<op>: cannot broadcast shapes …".
std::vector<int64_t> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                     const std::string& op = "broadcast");

/// pattern: broadcast
te::Tensor add(const te::Tensor& a, const te::Tensor& b, const std::string& name = "add");
/// pattern: broadcast
te::Tensor subtract(const te::Tensor& a, const te::Tensor& b, const std::string& name = "subtract");
/// pattern: broadcast
te::Tensor multiply(const te::Tensor& a, const te::Tensor& b, const std::string& name = "multiply");
/// Float division; for integers FLOOR division (like Python's //). pattern: broadcast
te::Tensor divide(const te::Tensor& a, const te::Tensor& b, const std::string& name = "divide");
/// a ** b (floating point only). pattern: broadcast
te::Tensor power(const te::Tensor& a, const te::Tensor& b, const std::string& name = "power");
/// pattern: broadcast
te::Tensor maximum(const te::Tensor& a, const te::Tensor& b, const std::string& name = "maximum");
/// pattern: broadcast
te::Tensor minimum(const te::Tensor& a, const te::Tensor& b, const std::string& name = "minimum");

/// Comparisons produce bool tensors. pattern: broadcast
te::Tensor equal(const te::Tensor& a, const te::Tensor& b, const std::string& name = "equal");
/// pattern: broadcast
te::Tensor not_equal(const te::Tensor& a, const te::Tensor& b,
                     const std::string& name = "not_equal");
/// pattern: broadcast
te::Tensor less(const te::Tensor& a, const te::Tensor& b, const std::string& name = "less");
/// pattern: broadcast
te::Tensor less_equal(const te::Tensor& a, const te::Tensor& b,
                      const std::string& name = "less_equal");
/// pattern: broadcast
te::Tensor greater(const te::Tensor& a, const te::Tensor& b, const std::string& name = "greater");
/// pattern: broadcast
te::Tensor greater_equal(const te::Tensor& a, const te::Tensor& b,
                         const std::string& name = "greater_equal");

/// Logical operators take any dtypes (non-zero is true) and produce bool. pattern: broadcast
te::Tensor logical_and(const te::Tensor& a, const te::Tensor& b,
                       const std::string& name = "logical_and");
/// pattern: broadcast
te::Tensor logical_or(const te::Tensor& a, const te::Tensor& b,
                      const std::string& name = "logical_or");
/// pattern: broadcast
te::Tensor logical_xor(const te::Tensor& a, const te::Tensor& b,
                       const std::string& name = "logical_xor");
/// pattern: elemwise
te::Tensor logical_not(const te::Tensor& a, const std::string& name = "logical_not");

/// cond ? a : b with the three shapes broadcast together; cond of any dtype (non-zero is
/// true), a and b of one dtype. pattern: broadcast
te::Tensor where(const te::Tensor& cond, const te::Tensor& a, const te::Tensor& b,
                 const std::string& name = "where");

/// Broadcasts x to `shape` (numpy broadcast_to: x's shape must broadcast to exactly `shape`).
/// pattern: broadcast
te::Tensor broadcast_to(const te::Tensor& x, const std::vector<int64_t>& shape,
                        const std::string& name = "broadcast_to");
/// ONNX Expand: the output shape is the broadcast of x's shape and `shape` (either may
/// stretch). pattern: broadcast
te::Tensor expand(const te::Tensor& x, const std::vector<int64_t>& shape,
                  const std::string& name = "expand");

}  // namespace kiln::topi
