/// \file elemwise.h
/// \brief Element-wise unary operators: out[i] = f(x[i]), same shape as the input.
///
/// Every operator here has pattern kind `elemwise` and builds one te compute tagged
/// "elemwise,<op>" named `name` (default: the op's name). Math functions (sigmoid, exp, log, …)
/// need a floating-point input and throw a kiln::Error naming the op and the dtype otherwise;
/// relu, leaky_relu, clip, abs, neg, sign, identity and cast also take integers.
#pragma once

#include <string>

#include "kiln/te/tensor.h"
#include "kiln/topi/op_pattern.h"

namespace kiln::topi {

/// max(x, 0). pattern: elemwise
te::Tensor relu(const te::Tensor& x, const std::string& name = "relu");
/// x > 0 ? x : alpha * x (float only). pattern: elemwise
te::Tensor leaky_relu(const te::Tensor& x, double alpha = 0.01,
                      const std::string& name = "leaky_relu");
/// min(max(x, lo), hi); lo <= hi required. pattern: elemwise
te::Tensor clip(const te::Tensor& x, double lo, double hi, const std::string& name = "clip");
/// 1 / (1 + exp(-x)). pattern: elemwise
te::Tensor sigmoid(const te::Tensor& x, const std::string& name = "sigmoid");
/// pattern: elemwise
te::Tensor tanh(const te::Tensor& x, const std::string& name = "tanh");
/// pattern: elemwise
te::Tensor exp(const te::Tensor& x, const std::string& name = "exp");
/// Natural logarithm. pattern: elemwise
te::Tensor log(const te::Tensor& x, const std::string& name = "log");
/// pattern: elemwise
te::Tensor sqrt(const te::Tensor& x, const std::string& name = "sqrt");
/// 1 / sqrt(x). pattern: elemwise
te::Tensor rsqrt(const te::Tensor& x, const std::string& name = "rsqrt");
/// pattern: elemwise
te::Tensor erf(const te::Tensor& x, const std::string& name = "erf");
/// 0.5 x (1 + erf(x / sqrt(2))) (the exact, erf form). pattern: elemwise
te::Tensor gelu(const te::Tensor& x, const std::string& name = "gelu");
/// |x|. pattern: elemwise
te::Tensor abs(const te::Tensor& x, const std::string& name = "abs");
/// -x. pattern: elemwise
te::Tensor negative(const te::Tensor& x, const std::string& name = "negative");
/// pattern: elemwise
te::Tensor floor(const te::Tensor& x, const std::string& name = "floor");
/// pattern: elemwise
te::Tensor ceil(const te::Tensor& x, const std::string& name = "ceil");
/// Rounds half away from zero (C's round; numpy rounds half to even). pattern: elemwise
te::Tensor round(const te::Tensor& x, const std::string& name = "round");
/// -1, 0 or 1 with x's dtype. pattern: elemwise
te::Tensor sign(const te::Tensor& x, const std::string& name = "sign");
/// 1 / x (float only). pattern: elemwise
te::Tensor reciprocal(const te::Tensor& x, const std::string& name = "reciprocal");
/// log(1 + exp(x)), computed stably as max(x, 0) + log(1 + exp(-|x|)). pattern: elemwise
te::Tensor softplus(const te::Tensor& x, const std::string& name = "softplus");
/// clip(alpha x + beta, 0, 1) (ONNX HardSigmoid defaults). pattern: elemwise
te::Tensor hard_sigmoid(const te::Tensor& x, double alpha = 0.2, double beta = 0.5,
                        const std::string& name = "hard_sigmoid");
/// sin, cos, tan, asin, acos, atan, sinh, cosh (libm / LLVM intrinsics) and asinh, acosh,
/// atanh (from log and sqrt), float only. pattern: elemwise
te::Tensor sin(const te::Tensor& x, const std::string& name = "sin");
te::Tensor cos(const te::Tensor& x, const std::string& name = "cos");
te::Tensor tan(const te::Tensor& x, const std::string& name = "tan");
te::Tensor asin(const te::Tensor& x, const std::string& name = "asin");
te::Tensor acos(const te::Tensor& x, const std::string& name = "acos");
te::Tensor atan(const te::Tensor& x, const std::string& name = "atan");
te::Tensor sinh(const te::Tensor& x, const std::string& name = "sinh");
te::Tensor cosh(const te::Tensor& x, const std::string& name = "cosh");
/// sign(x) log(|x| + sqrt(x² + 1)). pattern: elemwise
te::Tensor asinh(const te::Tensor& x, const std::string& name = "asinh");
/// log(x + sqrt(x² - 1)) (NaN below 1). pattern: elemwise
te::Tensor acosh(const te::Tensor& x, const std::string& name = "acosh");
/// log((1 + x) / (1 - x)) / 2. pattern: elemwise
te::Tensor atanh(const te::Tensor& x, const std::string& name = "atanh");
/// Rounds half to even (numpy / ONNX Round; the default floating-point rounding mode).
/// pattern: elemwise
te::Tensor round_even(const te::Tensor& x, const std::string& name = "round_even");
/// x != x as bool (float only). pattern: elemwise
te::Tensor isnan(const te::Tensor& x, const std::string& name = "isnan");
/// Converts to `dtype` (float to int truncates toward zero; to bool is x != 0).
/// pattern: elemwise
te::Tensor cast(const te::Tensor& x, DataType dtype, const std::string& name = "cast");
/// A copy of x. pattern: elemwise
te::Tensor identity(const te::Tensor& x, const std::string& name = "identity");

}  // namespace kiln::topi
