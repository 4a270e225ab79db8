// softmax, log_softmax, batch_norm and layer_norm against naive C++ (double precision), with
// the default schedule and schedule_softmax / schedule_norm; large inputs check stability.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/topi/nn_norm.h"
#include "topi/topi_test_util.h"

namespace kiln::topi::testing {
namespace {

NDArray naive_softmax(const NDArray& x, int axis, bool log_form) {
  const Shape& s = x.shape();
  int ax = axis < 0 ? axis + static_cast<int>(s.size()) : axis;
  return reference(s, f32, [&](const Shape& i) {
    Shape j = i;
    double mx = -INFINITY;
    for (j[ax] = 0; j[ax] < s[ax]; ++j[ax]) mx = std::max(mx, at(x, j));
    double sm = 0;
    for (j[ax] = 0; j[ax] < s[ax]; ++j[ax]) sm += std::exp(at(x, j) - mx);
    return log_form ? at(x, i) - mx - std::log(sm) : std::exp(at(x, i) - mx) / sm;
  });
}

TEST(TopiNorm, SoftmaxAndLogSoftmax) {
  uint32_t seed = 1;
  for (auto [shape, axis] : std::vector<std::pair<Shape, int>>{
           {{7, 13}, -1}, {{3, 5, 7}, 1}, {{13}, 0}, {{2, 3, 1}, -1}, {{40, 130}, 1}}) {
    SCOPED_TRACE(::testing::Message() << runtime::shape_str(shape) << " axis " << axis);
    te::Tensor X = input(shape, f32, "X");
    // Values up to 80: exp would overflow float32 without the max subtraction.
    NDArray x = random_array(shape, f32, seed++, -80, 80);
    check({X}, {softmax(X, axis)}, {x}, {naive_softmax(x, axis, false)}, schedule_softmax,
          {1e-4, 1e-6});
    check({X}, {log_softmax(X, axis)}, {x}, {naive_softmax(x, axis, true)}, schedule_softmax,
          {1e-5, 1e-4});
  }
}

TEST(TopiNorm, ShortRowsTakeWholeVectorsAndATree) {
  // An SSD head's class scores (rows of 21): the row max and sum are lane partials over whole
  // vectors (the last shifted inwards, its repeated lanes the identity) combined in a tree, the
  // exponentials and the output stored as whole vectors at 0 and 5: nothing masked.
  uint32_t seed = 40;
  for (int64_t L : {16, 21, 37, 100}) {
    SCOPED_TRACE(L);
    const Shape shape = {3, 9, L};
    te::Tensor X = input(shape, f32, "X");
    NDArray x = random_array(shape, f32, seed++, -20, 20);
    check({X}, {softmax(X, -1)}, {x}, {naive_softmax(x, -1, false)}, schedule_softmax,
          {1e-5, 1e-6});
    check({X}, {log_softmax(X, -1)}, {x}, {naive_softmax(x, -1, true)}, schedule_softmax,
          {1e-5, 1e-5});
    te::Tensor Y = softmax(X, -1);
    te::Schedule s = schedule_softmax({Y}, Target("llvm -mcpu=skylake-avx512"));
    const std::string tir = tir::to_string(lower(s, {X, Y}, "f"));
    EXPECT_NE(tir.find("kiln.vector_slice"), std::string::npos) << tir;
    EXPECT_EQ(tir.find(" if "), std::string::npos) << tir;  // no masked access
  }
}

TEST(TopiNorm, BatchNormInference) {
  for (const Shape& s : std::vector<Shape>{{2, 3, 5, 7}, {4, 13}, {1, 16, 9, 9}}) {
    SCOPED_TRACE(runtime::shape_str(s));
    int64_t c = s[1];
    te::Tensor X = input(s, f32, "X"), G = input({c}, f32, "G"), B = input({c}, f32, "B"),
               M = input({c}, f32, "M"), V = input({c}, f32, "V");
    NDArray x = random_array(s, f32, 1), g = random_array({c}, f32, 2),
            b = random_array({c}, f32, 3), m = random_array({c}, f32, 4),
            v = random_array({c}, f32, 5, 0.1, 2);
    NDArray want = reference(s, f32, [&](const Shape& i) {
      Shape ci = {i[1]};
      return (at(x, i) - at(m, ci)) / std::sqrt(at(v, ci) + 1e-3) * at(g, ci) + at(b, ci);
    });
    check({X, G, B, M, V}, {batch_norm(X, G, B, M, V, 1e-3)}, {x, g, b, m, v}, {want},
          schedule_norm, {1e-5, 1e-5});
  }
}

TEST(TopiNorm, LayerNorm) {
  uint32_t seed = 10;
  for (auto [s, r] : std::vector<std::pair<Shape, int>>{
           {{7, 13}, 1}, {{2, 3, 5}, 2}, {{3, 1, 4}, 1}, {{11}, 1}, {{64, 96}, 1}}) {
    SCOPED_TRACE(::testing::Message() << runtime::shape_str(s) << " over " << r);
    Shape gs(s.end() - r, s.end());
    te::Tensor X = input(s, f32, "X"), G = input(gs, f32, "G"), B = input(gs, f32, "B");
    // An offset of 100 checks the two-pass variance.
    NDArray x = random_array(s, f32, seed++, 99, 101), g = random_array(gs, f32, seed++),
            b = random_array(gs, f32, seed++);
    size_t lead = s.size() - r;
    int64_t n = 1;
    for (int64_t v : gs) n *= v;
    NDArray want = reference(s, f32, [&](const Shape& i) {
      double mu = 0, var = 0;
      for (int64_t f = 0; f < n; ++f) {
        Shape j(i.begin(), i.begin() + lead), t = unflat(gs, f);
        j.insert(j.end(), t.begin(), t.end());
        mu += at(x, j);
      }
      mu /= n;
      for (int64_t f = 0; f < n; ++f) {
        Shape j(i.begin(), i.begin() + lead), t = unflat(gs, f);
        j.insert(j.end(), t.begin(), t.end());
        var += (at(x, j) - mu) * (at(x, j) - mu);
      }
      var /= n;
      Shape ti(i.begin() + lead, i.end());
      return (at(x, i) - mu) / std::sqrt(var + 1e-5) * at(g, ti) + at(b, ti);
    });
    check({X, G, B}, {layer_norm(X, G, B, 1e-5)}, {x, g, b}, {want}, schedule_norm, {1e-3, 1e-3});
  }
}

TEST(TopiNorm, Errors) {
  te::Tensor X = input({2, 3, 4}, f32, "X"), I = input({2, 3}, i32, "I");
  te::Tensor C3 = input({3}, f32, "C"), C4 = input({4}, f32, "D");
  EXPECT_EQ(error_of([&] { softmax(X, 3); }),
            "softmax: axis 3 is out of range for a tensor of rank 3 (shape [2, 3, 4])");
  EXPECT_EQ(error_of([&] { log_softmax(I); }),
            "log_softmax: needs a floating-point input, got int32");
  EXPECT_EQ(error_of([&] { batch_norm(X, C4, C3, C3, C3); }),
            "batch_norm: gamma must have shape [3] (channels of input [2, 3, 4]), got [4]");
  EXPECT_EQ(error_of([&] { layer_norm(X, C3, C3); }),
            "layer_norm: gamma shape [3] must equal the trailing dimensions of input [2, 3, 4]");
  EXPECT_NE(error_of([&] { schedule_softmax({X}, host_target()); }).find("not a softmax output"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::topi::testing
