// conv3d, conv3d_transpose, 3-D pooling and max pooling's argmax (conv_nd.h), each against a
// naive C++ reference on seeded random inputs with poisoned outputs: conv3d as the direct sum
// (groups, padding, strides, dilation) under the default and the conv3d schedule; the transposed
// convolution as a scatter (each input element adds its kernel-weighted copy to the output),
// independent of the gather the compute uses; pooling after PyTorch's CPU kernels (ceil_mode,
// both count_include_pad modes); the argmax as ONNX's reference (first strictly greater value in
// window order; row- or column-major flat index). Errors name the op and the shapes.
#include "kiln/topi/conv_nd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "topi_test_util.h"

namespace kiln::topi {
namespace {

using namespace testing;  // NOLINT

te::Schedule default_schedule(const std::vector<te::Tensor>& outs, const Target&) {
  return te::create_schedule(outs);
}

struct ConvCase {
  Shape data, kernel;
  ConvNdParams p;
};

NDArray conv3d_ref(const NDArray& x, const NDArray& w, const ConvNdParams& p, const Shape& os) {
  const Shape &xs = x.shape(), &ws = w.shape();
  int64_t cpg = ws[1], opg = os[1] / p.groups;
  return reference(os, f32, [&](const Shape& i) {
    double acc = 0;
    int64_t g = i[1] / opg;
    for (int64_t c = 0; c < cpg; ++c)
      for (int64_t a = 0; a < ws[2]; ++a)
        for (int64_t b = 0; b < ws[3]; ++b)
          for (int64_t e = 0; e < ws[4]; ++e) {
            int64_t z = i[2] * p.strides[0] - p.padding[0] + a * p.dilation[0];
            int64_t y = i[3] * p.strides[1] - p.padding[1] + b * p.dilation[1];
            int64_t q = i[4] * p.strides[2] - p.padding[2] + e * p.dilation[2];
            if (z < 0 || z >= xs[2] || y < 0 || y >= xs[3] || q < 0 || q >= xs[4]) continue;
            acc += at(x, {i[0], g * cpg + c, z, y, q}) * at(w, {i[1], c, a, b, e});
          }
    return acc;
  });
}

TEST(Conv3D, MatchesNaiveReference) {
  std::vector<ConvCase> cases = {
      {{2, 3, 4, 5, 6}, {4, 3, 2, 3, 3}, {}},
      {{1, 4, 5, 6, 7}, {6, 2, 3, 3, 3}, {{2, 1, 2}, {1, 2, 1}, {1, 0, 2, 0, 1, 1}, {}, 2}},
      {{1, 2, 6, 6, 9}, {3, 2, 2, 2, 3}, {{1, 2, 1}, {2, 1, 2}, {1, 1, 1, 1, 1, 1}, {}, 1}},
      {{1, 16, 3, 8, 17}, {8, 16, 1, 3, 3}, {{1, 1, 1}, {1, 1, 1}, {0, 1, 1, 0, 1, 1}, {}, 1}},
  };
  uint32_t seed = 1;
  for (const ConvCase& k : cases) {
    SCOPED_TRACE(::testing::Message() << "data " << runtime::shape_str(k.data));
    te::Tensor x = input(k.data, f32, "x"), w = input(k.kernel, f32, "w");
    te::Tensor y = conv3d_ncdhw(x, w, k.p);
    Shape os = conv3d_ncdhw_shape(k.data, k.kernel, k.p);
    ASSERT_EQ(shape_of(y), os);
    NDArray xa = random_array(k.data, f32, seed++), wa = random_array(k.kernel, f32, seed++);
    check({x, w}, {y}, {xa, wa}, {conv3d_ref(xa, wa, k.p, os)}, schedule_conv3d_ncdhw);
  }
}

TEST(Conv3D, WithFusedBiasAndRelu) {
  Shape ds{1, 3, 4, 5, 9}, ks{4, 3, 3, 3, 3};
  ConvNdParams p;
  p.padding = {1, 1, 1, 1, 1, 1};
  te::Tensor x = input(ds, f32, "x"), w = input(ks, f32, "w"), b = input({4}, f32, "b");
  te::Tensor c = conv3d_ncdhw(x, w, p);
  te::Tensor y = te::compute(
      c->shape,
      [&](const std::vector<ir::Var>& i) {
        return ir::max(c(std::vector<ir::Expr>(i.begin(), i.end())) + b(i[1]), ir::make_zero(f32));
      },
      "out", "elemwise,bias_relu");
  NDArray xa = random_array(ds, f32, 7), wa = random_array(ks, f32, 8),
          ba = random_array({4}, f32, 9);
  NDArray conv = conv3d_ref(xa, wa, p, shape_of(c));
  NDArray want = reference(shape_of(c), f32, [&](const Shape& i) {
    return std::max(0.0, at(conv, i) + at(ba, {i[1]}));
  });
  check({x, w, b}, {y}, {xa, wa, ba}, {want}, schedule_conv3d_ncdhw);
}

TEST(Conv3D, ErrorsNameTheOpAndShapes) {
  ConvNdParams p;
  std::string msg = error_of([&] { conv3d_ncdhw_shape({1, 3, 4, 4, 4}, {2, 2, 3, 3, 3}, p); });
  EXPECT_NE(msg.find("conv3d: data [1, 3, 4, 4, 4] and kernel [2, 2, 3, 3, 3] do not match"),
            std::string::npos)
      << msg;
  msg = error_of([&] { conv3d_ncdhw_shape({1, 3, 2, 4, 4}, {2, 3, 3, 3, 3}, p); });
  EXPECT_NE(msg.find("is larger than the padded input [1, 3, 2, 4, 4]"), std::string::npos) << msg;
  msg = error_of([&] { conv3d_ncdhw_shape({1, 3, 4, 4}, {2, 3, 3, 3}, p); });
  EXPECT_NE(msg.find("must both be 5-D"), std::string::npos) << msg;
}

NDArray conv3d_transpose_ref(const NDArray& x, const NDArray& w, const ConvNdParams& p,
                             const Shape& os) {
  const Shape &xs = x.shape(), &ws = w.shape();
  int64_t cpg = xs[1] / p.groups, opg = ws[1];
  int64_t total = 1;
  for (int64_t v : os) total *= v;
  std::vector<double> acc(static_cast<size_t>(total), 0.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    Shape xi = unflat(xs, i);
    int64_t g = xi[1] / cpg;
    for (int64_t oc = 0; oc < opg; ++oc)
      for (int64_t a = 0; a < ws[2]; ++a)
        for (int64_t b = 0; b < ws[3]; ++b)
          for (int64_t e = 0; e < ws[4]; ++e) {
            int64_t z = xi[2] * p.strides[0] - p.padding[0] + a * p.dilation[0];
            int64_t y = xi[3] * p.strides[1] - p.padding[1] + b * p.dilation[1];
            int64_t q = xi[4] * p.strides[2] - p.padding[2] + e * p.dilation[2];
            if (z < 0 || z >= os[2] || y < 0 || y >= os[3] || q < 0 || q >= os[4]) continue;
            acc[flat(os, {xi[0], g * opg + oc, z, y, q})] +=
                element(x, i) * at(w, {xi[1], oc, a, b, e});
          }
  }
  return reference(os, f32, [&](const Shape& i) { return acc[flat(os, i)]; });
}

TEST(Conv3DTranspose, MatchesScatterReference) {
  std::vector<ConvCase> cases = {
      {{1, 1, 3, 4, 5}, {1, 2, 3, 3, 3}, {}},
      {{2, 4, 3, 3, 4}, {4, 3, 2, 3, 2}, {{2, 1, 3}, {1, 2, 1}, {1, 0, 0, 0, 1, 1}, {1, 0, 2}, 2}},
      {{1, 2, 2, 3, 3}, {2, 2, 3, 2, 2}, {{2, 2, 2}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, {0, 1, 1}, 1}},
  };
  uint32_t seed = 30;
  for (const ConvCase& k : cases) {
    SCOPED_TRACE(::testing::Message() << "data " << runtime::shape_str(k.data));
    te::Tensor x = input(k.data, f32, "x"), w = input(k.kernel, f32, "w");
    te::Tensor y = conv3d_transpose_ncdhw(x, w, k.p);
    Shape os = conv3d_transpose_ncdhw_shape(k.data, k.kernel, k.p);
    ASSERT_EQ(shape_of(y), os);
    NDArray xa = random_array(k.data, f32, seed++), wa = random_array(k.kernel, f32, seed++);
    check({x, w}, {y}, {xa, wa}, {conv3d_transpose_ref(xa, wa, k.p, os)}, default_schedule);
  }
}

// --- pooling

/// PyTorch's output extent (independent of pool_output_size).
int64_t ref_out(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d, bool ceil) {
  double v = static_cast<double>(in + pb + pe - d * (k - 1) - 1) / static_cast<double>(s);
  int64_t o = static_cast<int64_t>(ceil ? std::ceil(v) : std::floor(v)) + 1;
  if (ceil && (o - 1) * s >= in + pb) --o;
  return o;
}

Shape pool_out_shape(const Shape& xs, const PoolNdAttrs& a) {
  Shape os{xs[0], xs[1]};
  size_t sp = xs.size() - 2;
  for (size_t d = 0; d < sp; ++d)
    os.push_back(ref_out(xs[2 + d], a.kernel[d], a.stride[d], a.padding[d], a.padding[d + sp],
                         a.dilation[d], a.ceil_mode));
  return os;
}

/// Visits the taps of window `i` inside the input in row-major window order: f(input index).
template <typename F>
void for_taps(const Shape& xs, const PoolNdAttrs& a, const Shape& i, F&& f) {
  size_t sp = xs.size() - 2;
  Shape r(sp, 0);
  while (true) {
    Shape idx{i[0], i[1]};
    bool inside = true;
    for (size_t d = 0; d < sp; ++d) {
      int64_t p = i[2 + d] * a.stride[d] - a.padding[d] + r[d] * a.dilation[d];
      inside &= p >= 0 && p < xs[2 + d];
      idx.push_back(p);
    }
    if (inside) f(idx);
    size_t d = sp;
    while (d > 0 && ++r[d - 1] == a.kernel[d - 1]) r[--d] = 0;
    if (d == 0) return;
  }
}

NDArray pool_ref(const NDArray& x, PoolType type, const PoolNdAttrs& a) {
  const Shape& xs = x.shape();
  size_t sp = xs.size() - 2;
  return reference(pool_out_shape(xs, a), f32, [&](const Shape& i) {
    double acc = type == PoolType::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
    for_taps(xs, a, i, [&](const Shape& idx) {
      acc = type == PoolType::kMax ? std::max(acc, at(x, idx)) : acc + at(x, idx);
    });
    if (type == PoolType::kMax) return acc;
    // PyTorch avg (dilation 1): end = min(start + k, in + pad_end); divisor from the window
    // clipped to the padded input, or to the input.
    double div = 1;
    for (size_t d = 0; d < sp; ++d) {
      int64_t s = i[2 + d] * a.stride[d] - a.padding[d];
      int64_t e = std::min(s + a.kernel[d], xs[2 + d] + a.padding[d + sp]);
      int64_t size = e - s;
      s = std::max<int64_t>(s, 0);
      e = std::min(e, xs[2 + d]);
      div *= static_cast<double>(a.count_include_pad ? size : e - s);
    }
    return acc / div;
  });
}

TEST(PoolNd, ThreeDimensionalMaxAndAverageMatchReference) {
  struct Case {
    Shape shape;
    PoolNdAttrs a;
  };
  std::vector<Case> cases = {
      {{2, 3, 5, 5, 5}, {{2, 2, 2}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, false, false}},
      {{1, 2, 5, 6, 7}, {{2, 3, 2}, {2, 2, 1}, {1, 1, 1}, {1, 1, 0, 1, 1, 1}, false, true}},
      {{1, 2, 5, 6, 7}, {{2, 3, 2}, {2, 2, 3}, {1, 1, 1}, {1, 1, 0, 1, 0, 1}, true, false}},
      {{1, 2, 4, 6, 8}, {{3, 3, 3}, {3, 2, 2}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, true, true}},
      // wider than half the window: allowed here (ONNX)
      {{1, 1, 4, 4, 5}, {{3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {2, 0, 1, 1, 2, 2}, false, false}},
  };
  uint32_t seed = 50;
  for (const Case& k : cases) {
    for (PoolType t : {PoolType::kMax, PoolType::kAvg}) {
      SCOPED_TRACE(::testing::Message() << pool_type_name(t) << " " << runtime::shape_str(k.shape)
                                        << " ceil " << k.a.ceil_mode);
      te::Tensor x = input(k.shape, f32, "x");
      te::Tensor y = pool_nd(x, t, k.a);
      ASSERT_EQ(shape_of(y), pool_out_shape(k.shape, k.a));
      NDArray xa = random_array(k.shape, f32, seed++);
      check({x}, {y}, {xa}, {pool_ref(xa, t, k.a)}, default_schedule);
    }
  }
}

TEST(PoolNd, DilatedMaxPool3D) {
  Shape s{1, 2, 7, 6, 8};
  PoolNdAttrs a{{2, 2, 3}, {1, 2, 2}, {2, 3, 2}, {1, 0, 2, 0, 1, 1}, false, false};
  te::Tensor x = input(s, f32, "x");
  te::Tensor y = pool_nd(x, PoolType::kMax, a);
  NDArray xa = random_array(s, f32, 77);
  check({x}, {y}, {xa}, {pool_ref(xa, PoolType::kMax, a)}, default_schedule);
}

NDArray argmax_ref(const NDArray& x, const PoolNdAttrs& a, int storage_order) {
  const Shape& xs = x.shape();
  size_t sp = xs.size() - 2;
  return reference(pool_out_shape(xs, a), i64, [&](const Shape& i) {
    double best = -std::numeric_limits<double>::infinity();
    Shape arg;
    for_taps(xs, a, i, [&](const Shape& idx) {
      if (at(x, idx) > best) {
        best = at(x, idx);
        arg = idx;
      }
    });
    int64_t spatial = 0, plane = 1;
    if (storage_order == 0) {
      for (size_t d = 0; d < sp; ++d) spatial = spatial * xs[2 + d] + arg[2 + d];
    } else {
      for (size_t d = sp; d-- > 0;) spatial = spatial * xs[2 + d] + arg[2 + d];
    }
    for (size_t d = 0; d < sp; ++d) plane *= xs[2 + d];
    return static_cast<double>((arg[0] * xs[1] + arg[1]) * plane + spatial);
  });
}

TEST(PoolNd, MaxPoolIndicesRowAndColumnMajor) {
  struct Case {
    Shape shape;
    PoolNdAttrs a;
  };
  std::vector<Case> cases = {
      {{2, 3, 5, 5}, {{5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}, false, false}},
      {{2, 3, 6, 7}, {{2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, true, false}},
      {{1, 2, 9}, {{3}, {2}, {2}, {1, 1}, false, false}},
      {{2, 2, 4, 5, 6}, {{2, 3, 2}, {2, 1, 2}, {1, 1, 1}, {1, 0, 1, 0, 1, 1}, false, false}},
  };
  uint32_t seed = 90;
  for (const Case& k : cases) {
    for (int order : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << runtime::shape_str(k.shape) << " order " << order);
      te::Tensor x = input(k.shape, f32, "x");
      te::Tensor y = max_pool_nd_indices(x, k.a, order);
      EXPECT_EQ(y->dtype, i64);
      NDArray xa = random_array(k.shape, f32, seed++);
      check({x}, {y}, {xa}, {argmax_ref(xa, k.a, order)}, default_schedule);
    }
  }
}

TEST(PoolNd, ErrorsNameTheOpAndShapes) {
  te::Tensor x4 = input({1, 1, 2, 2, 2, 2}, f32, "x");
  PoolNdAttrs a{{2, 2, 2, 2}, {1, 1, 1, 1}, {1, 1, 1, 1}, {0, 0, 0, 0, 0, 0, 0, 0}, false, false};
  std::string msg = error_of([&] { pool_nd(x4, PoolType::kMax, a); });
  EXPECT_NE(msg.find("max_pool_nd: input [1, 1, 2, 2, 2, 2] must have 1 to 3 spatial axes"),
            std::string::npos)
      << msg;
  te::Tensor x = input({1, 1, 4, 4, 4}, f32, "x");
  PoolNdAttrs b{{2, 2}, {1, 1}, {1, 1}, {0, 0, 0, 0}, false, false};
  msg = error_of([&] { pool_nd(x, PoolType::kAvg, b); });
  EXPECT_NE(msg.find("avg_pool_nd: kernel [2, 2]"), std::string::npos) << msg;
  msg = error_of([&] { max_pool_nd_indices(x, b, 2); });
  EXPECT_NE(msg.find("storage_order must be 0 or 1, got 2"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln::topi
