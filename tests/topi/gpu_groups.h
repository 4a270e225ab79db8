// The fused groups the GPU back ends are tested on (cuda_test.cc: PTX through ptxas, and on a
// GPU where there is one; opencl_test.cc: run on PoCL): element-wise math, softmax, gathers of
// computed indices, a cumulative sum, a conv on the fallback, dense with bias, and the two
// shared-memory templates (dense; conv2d with and without an epilogue, strided, 1x1, dilated, with
// sizes that leave small tiles).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/topi/conv2d.h"
#include "kiln/topi/dense.h"
#include "kiln/topi/elemwise.h"
#include "kiln/topi/nn_norm.h"
#include "kiln/topi/reduction.h"
#include "kiln/topi/schedule_gpu.h"
#include "kiln/topi/transform.h"
#include "topi/topi_test_util.h"

namespace kiln::topi::testing {

/// A GPU group: inputs, outputs, and its GPU schedule.
struct GpuGroup {
  std::string name;
  std::vector<te::Tensor> inputs, outs;
  std::function<te::Schedule(const std::vector<te::Tensor>&, const Target&)> schedule =
      schedule_gpu_fallback;
  bool shared_memory = false;  ///< a template with shared-memory tiles (and barriers)
};

inline std::vector<GpuGroup> gpu_groups() {
  using ir::make_const;
  using ir::Var;
  std::vector<GpuGroup> r;
  {
    te::Tensor a = te::placeholder({1000}, f32, "A");
    te::Tensor b = sigmoid(tanh(exp(a)));
    te::Tensor c = te::compute(
        {1000},
        [&](const std::vector<Var>& i) {
          return ir::log(b(i[0]) + 1.f) * ir::pow(b(i[0]), make_const(f32, 0.5f));
        },
        "logpow", "elemwise");
    r.push_back({"elementwise", {a}, {c}});
  }
  {
    te::Tensor x = te::placeholder({4, 77}, f32, "X");
    r.push_back({"softmax", {x}, {softmax(x)}});
  }
  {
    // Indices computed in the kernel (a float input scaled and cast, wrapping when negative):
    // take's and gather_elements' index checks are extern stages reading them from a buffer,
    // so they are stored by a kernel of their own (a DGCNN's neighbour lookup).
    te::Tensor x = te::placeholder({5, 6}, f32, "X");
    te::Tensor f = te::placeholder({3, 2}, f32, "F");
    te::Tensor g = te::placeholder({5, 4}, f32, "G");
    auto indices = [](const te::Tensor& t, float scale) {
      return te::compute(
          t->shape,
          [&](const std::vector<Var>& i) {
            std::vector<ir::Expr> e(i.begin(), i.end());
            return ir::cast(DataType::Int(64), t(e) * make_const(f32, scale));
          },
          t->op->name + "_idx", "elemwise");
    };
    r.push_back({"take_gather_of_computed_indices",
                 {x, f, g},
                 {take(x, indices(f, 4.9f), 0), gather_elements(x, indices(g, 5.9f), 1)}});
  }
  {
    // CumSum on a GPU (cumsum_by_sum: each element sums its part of the axis) of a computed
    // input, exclusive and reversed.
    te::Tensor x = te::placeholder({6, 40, 3}, f32, "X");
    r.push_back({"cumsum_by_sum", {x}, {cumsum_by_sum(sigmoid(x), 1, true, true)}});
  }
  Conv2DParams pad1;
  pad1.padding = Padding2D{1, 1, 1, 1};
  {
    te::Tensor x = te::placeholder({1, 8, 12, 12}, f32, "X");
    te::Tensor w = te::placeholder({16, 8, 3, 3}, f32, "W");
    r.push_back({"conv2d_relu", {x, w}, {relu(conv2d_nchw(x, w, pad1))}});
  }
  {
    te::Tensor x = te::placeholder({3, 50}, f32, "X");
    te::Tensor w = te::placeholder({20, 50}, f32, "W");
    te::Tensor bias = te::placeholder({20}, f32, "bias");
    r.push_back({"dense_bias", {x, w, bias}, {dense(x, w, bias)}});
  }
  {
    // The dense template: 48x32 output tiles of 16x16, K = 64 in 4 steps.
    te::Tensor x = te::placeholder({48, 64}, f32, "X");
    te::Tensor w = te::placeholder({32, 64}, f32, "W");
    te::Tensor bias = te::placeholder({32}, f32, "bias");
    r.push_back({"dense_tiled", {x, w, bias}, {relu(dense(x, w, bias))}, schedule_dense_gpu, true});
  }
  // The conv2d template: with a bias + ReLU epilogue (accumulated in registers) or alone
  // (accumulated in place).
  auto conv = [&](const std::string& name, std::vector<int32_t> xs, std::vector<int32_t> ws,
                  Conv2DParams p, bool epilogue) {
    auto shape = [](const std::vector<int32_t>& v) {
      std::vector<ir::Expr> e;
      for (int32_t d : v) e.push_back(make_const(DataType::Int(32), d));
      return e;
    };
    te::Tensor x = te::placeholder(shape(xs), f32, "X");
    te::Tensor w = te::placeholder(shape(ws), f32, "W");
    te::Tensor y = conv2d_nchw(x, w, p);
    if (!epilogue) {
      r.push_back({name, {x, w}, {y}, schedule_conv2d_gpu, true});
      return;
    }
    te::Tensor bias = te::placeholder(shape({ws[0]}), f32, "bias");
    te::Tensor z = te::compute(
        y->shape,
        [&](const std::vector<Var>& i) {
          return ir::max(y(i[0], i[1], i[2], i[3]) + bias(i[1]), make_const(f32, 0.f));
        },
        "bias_relu", "elemwise");
    r.push_back({name, {x, w, bias}, {z}, schedule_conv2d_gpu, true});
  };
  conv("conv_tiled_bias_relu", {1, 16, 14, 14}, {32, 16, 3, 3}, pad1, true);
  conv("conv_tiled_alone", {2, 3, 9, 7}, {6, 3, 3, 3}, pad1, false);
  Conv2DParams strided = pad1;
  strided.stride_h = strided.stride_w = 2;
  conv("conv_tiled_strided", {1, 12, 15, 15}, {20, 12, 3, 3}, strided, true);
  conv("conv_tiled_1x1", {1, 8, 10, 10}, {8, 8, 1, 1}, Conv2DParams{}, true);
  Conv2DParams dilated;
  dilated.padding = Padding2D{2, 2, 2, 2};
  dilated.dilation_h = dilated.dilation_w = 2;
  conv("conv_tiled_dilated", {1, 5, 11, 13}, {7, 5, 3, 3}, dilated, false);
  return r;
}

}  // namespace kiln::topi::testing
