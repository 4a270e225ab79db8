/// \file nn_norm.h
/// \brief Softmax, log-softmax, batch normalization (inference) and layer normalization.
///
/// softmax and log_softmax are numerically stable: they subtract the maximum along the axis
/// before exponentiating. Their stages are a max reduction ("<name>.max"), a sum of exponentials
/// ("<name>.sum") and the output tagged "softmax_output" / "log_softmax_output", which
/// schedule_softmax (schedule_injective.h) looks for. layer_norm's stages are two sums
/// ("<name>.sum", "<name>.sqsum": the mean, then the squared deviations from it, a two-pass
/// variance) and the output tagged "layer_norm_output".
#pragma once

#include <string>
#include <vector>

#include "kiln/te/tensor.h"
#include "kiln/topi/op_pattern.h"

namespace kiln::topi {

namespace tag {
constexpr const char* kSoftmaxOutput = "softmax_output";
constexpr const char* kLogSoftmaxOutput = "log_softmax_output";
/// A softmax's exp(x - max) along a short last axis, stored per row (schedule_softmax computes
/// it at the row loop) so that the sum and the output read it instead of recomputing exp.
constexpr const char* kSoftmaxExp = "softmax_exp";
constexpr const char* kLayerNormOutput = "layer_norm_output";
}  // namespace tag

/// exp(x - max) / sum(exp(x - max)) along `axis` (float only). pattern: opaque (schedule with
/// schedule_softmax)
te::Tensor softmax(const te::Tensor& x, int axis = -1, const std::string& name = "softmax");
/// (x - max) - log(sum(exp(x - max))) along `axis`. pattern: opaque (schedule_softmax)
te::Tensor log_softmax(const te::Tensor& x, int axis = -1, const std::string& name = "log_softmax");

/// Inference batch norm over channel axis 1 of an input of rank >= 2:
/// (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c]; the four parameters are 1-D of
/// size C with x's dtype. pattern: injective (tag "injective,batch_norm")
te::Tensor batch_norm(const te::Tensor& x, const te::Tensor& gamma, const te::Tensor& beta,
                      const te::Tensor& moving_mean, const te::Tensor& moving_var,
                      double eps = 1e-5, const std::string& name = "batch_norm");

/// Layer norm over the trailing `gamma.ndim()` axes (ONNX LayerNormalization with axis =
/// x.ndim - gamma.ndim): (x - mean) / sqrt(var + eps) * gamma + beta, biased variance. gamma
/// and beta must have the shape of x's trailing dimensions. pattern: comm_reduce (schedule with
/// schedule_norm)
te::Tensor layer_norm(const te::Tensor& x, const te::Tensor& gamma, const te::Tensor& beta,
                      double eps = 1e-5, const std::string& name = "layer_norm");

}  // namespace kiln::topi
