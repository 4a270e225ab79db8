// Regression tests for issue 26's compile-time bounds and numerics at the graph level: every
// hostile input is rebuilt here in C++ (graph::Graph) and must give a user error naming the
// node and the problem, or the right answer. Attributes that do not fit 32-bit index
// arithmetic (a Conv with pads 2^40), extents near 2^63 and element counts whose product
// overflows, Gather with constant and with run-time out-of-range indices, and NaN through a
// convolution whose relu is fused into it.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "common/error.h"
#include "graph/graph_test_util.h"
#include "kiln/graph/build_module.h"
#include "kiln/graph/transform.h"
#include "kiln/runtime/graph_executor.h"

namespace kiln::graph {
namespace {

using runtime::NDArray;
using testing::error_of;
const DataType f32 = DataType::Float(32);
const DataType i64 = DataType::Int(64);

/// The message of building `g` for the host (a test failure when it builds).
std::string build_error(const Graph& g) {
  return error_of([&] { build_module(g, Target::host()); });
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Hardening, ConvPaddingBeyond32BitsIsAUserError) {
  // issue 26: pads=[2^40, ...] was an internal error (32-bit truncation).
  const int64_t big = int64_t{1} << 40;
  Graph g;
  Entry x = g.add_input("x", {1, 1, 4, 4}, f32);
  std::mt19937 rng(1);
  Entry w = g.add_constant("w", test_util::random_array({1, 1, 3, 3}, rng));
  g.add_output(g.add_op("conv2d", {x, w},
                        {{"padding", std::vector<int64_t>{big, big, big, big}},
                         {"strides", std::vector<int64_t>{big, big}}},
                        "conv_big_pads"));
  std::string msg = build_error(g);
  EXPECT_TRUE(contains(msg, "conv2d 'conv_big_pads'")) << msg;
  EXPECT_TRUE(contains(msg, "attribute 'padding'")) << msg;
  EXPECT_TRUE(contains(msg, "holds 1099511627776, outside the 32-bit range")) << msg;
  EXPECT_FALSE(contains(msg, "internal")) << msg;
}

TEST(Hardening, HugeExtentsAreUserErrors) {
  {
    // A Conv input dimension near 2^63 (issue 26: divisors() looped ~3e9 times).
    Graph g;
    Entry x = g.add_input("x", {1, 1, std::numeric_limits<int64_t>::max() - 24, 4}, f32);
    g.add_output(g.add_op("relu", {x}, {}, "r"));
    std::string msg = build_error(g);
    EXPECT_TRUE(contains(msg, "input 'x' has shape")) << msg;
    EXPECT_TRUE(contains(msg, "more than 2147483647 (2^31 - 1) elements")) << msg;
  }
  {
    // Extents whose product overflows int64: [2^22, 2^22, 2^22].
    Graph g;
    const int64_t e = int64_t{1} << 22;
    Entry x = g.add_input("x", {e, e, e}, f32);
    g.add_output(g.add_op("relu", {x}, {}, "r"));
    EXPECT_TRUE(contains(build_error(g), "more than 2147483647 (2^31 - 1) elements"));
  }
  {
    // An op whose output is too large although its inputs are small: pad by 2^30 twice.
    Graph g;
    Entry x = g.add_input("x", {4, 4}, f32);
    const int64_t p = int64_t{1} << 30;
    g.add_output(g.add_op(
        "pad", {x},
        {{"pad_before", std::vector<int64_t>{p, p}}, {"pad_after", std::vector<int64_t>{0, 0}}},
        "big_pad"));
    std::string msg = build_error(g);
    EXPECT_TRUE(contains(msg, "pad 'big_pad'")) << msg;
    EXPECT_TRUE(contains(msg, "output 0 has shape float32[1073741828, 1073741828]")) << msg;
  }
}

TEST(Hardening, GatherWithConstantIndexOutOfRangeIsACompileError) {
  Graph g;
  Entry x = g.add_input("x", {5, 3}, f32);
  NDArray idx = NDArray::empty({3}, i64);
  idx.data_as<int64_t>()[0] = 1;
  idx.data_as<int64_t>()[1] = -5;  // wraps to 0: fine
  idx.data_as<int64_t>()[2] = 7;
  g.add_output(g.add_op("take", {x, g.add_constant("idx", idx)}, {{"axis", int64_t{0}}}, "gather"));
  std::string msg = build_error(g);
  EXPECT_TRUE(contains(msg, "take 'gather'")) << msg;
  EXPECT_TRUE(contains(msg,
                       "index 7 (element 2 of constant 'idx') is out of range for axis 0 of "
                       "extent 5 (data float32[5, 3]); indices must lie in [-5, 4]"))
      << msg;
}

TEST(Hardening, GatherWithRunTimeIndexOutOfRangeFailsAtRunTime) {
  // Run-time indices: in range they gather (negatives wrap); out of range the kernel fails
  // with the index instead of clamping it. The take is fused with a following add.
  Graph g;
  Entry x = g.add_input("x", {5, 3}, f32);
  Entry ix = g.add_input("ix", {4}, i64);
  Entry t = g.add_op("take", {x, ix}, {{"axis", int64_t{0}}}, "gather");
  g.add_output(g.add_op("add", {t, t}, {}, "twice"));
  CompiledModule m = build_module(g, Target::host());
  auto ex = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  std::mt19937 rng(3);
  NDArray xv = test_util::random_array({5, 3}, rng);
  ex.set_input("x", xv);
  NDArray iv = NDArray::empty({4}, i64);
  const int64_t ok[4] = {4, -1, 0, -5};
  for (int k = 0; k < 4; ++k) iv.data_as<int64_t>()[k] = ok[k];
  ex.set_input("ix", iv);
  ex.run();
  NDArray y = ex.get_output(0);
  for (int k = 0; k < 4; ++k) {
    int64_t row = ok[k] < 0 ? ok[k] + 5 : ok[k];
    for (int c = 0; c < 3; ++c)
      EXPECT_FLOAT_EQ(y.data_as<float>()[k * 3 + c], 2 * xv.data_as<float>()[row * 3 + c]);
  }
  for (int64_t bad : {int64_t{5}, int64_t{-6}, int64_t{1} << 40}) {
    iv.data_as<int64_t>()[2] = bad;
    ex.set_input("ix", iv);
    std::string msg = error_of([&] { ex.run(); });
    EXPECT_TRUE(contains(msg,
                         "take: index out of range for axis 0 of extent 5 (indices "
                         "must lie in [-5, 4]), got " +
                             std::to_string(bad)))
        << msg;
  }
}

TEST(Hardening, GatherElementsWithRunTimeIndexOutOfRangeFailsAtRunTime) {
  // The same check for GatherElements (torch.gather), named after it, with the node.
  Graph g;
  Entry x = g.add_input("x", {2, 5}, f32);
  Entry ix = g.add_input("ix", {2, 3}, i64);
  g.add_output(g.add_op("gather_elements", {x, ix}, {{"axis", int64_t{1}}}, "neighbours"));
  CompiledModule m = build_module(g, Target::host());
  auto ex = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  std::mt19937 rng(4);
  ex.set_input("x", test_util::random_array({2, 5}, rng));
  NDArray iv = NDArray::empty({2, 3}, i64);
  for (int k = 0; k < 6; ++k) iv.data_as<int64_t>()[k] = k % 5 - 2;
  ex.set_input("ix", iv);
  ex.run();
  iv.data_as<int64_t>()[4] = 5;
  ex.set_input("ix", iv);
  const std::string msg = error_of([&] { ex.run(); });
  EXPECT_TRUE(contains(msg,
                       "gather_elements: index out of range for axis 1 of extent 5 (indices "
                       "must lie in [-5, 4]), got 5"))
      << msg;
  EXPECT_TRUE(contains(msg, "neighbours")) << msg;
}

TEST(Hardening, ZeroExtentThatIsNotFirst) {
  // issue 26: [2, 0, 3] gave "floordiv by constant zero" (the schedule fused the axes). Empty
  // tensors now compile and run; a sum over the empty axis is 0.
  Graph g;
  Entry x = g.add_input("x", {2, 0, 3}, f32);
  Entry r = g.add_op("relu", {x}, {}, "r");
  g.add_output(g.add_op("add", {r, r}, {}, "twice"));
  g.add_output(g.add_op("sum", {x}, {{"axes", std::vector<int64_t>{1}}}, "s"));
  g.add_output(g.add_op("transpose", {x}, {{"axes", std::vector<int64_t>{2, 0, 1}}}, "t"));
  CompiledModule m = build_module(g, Target::host());
  auto ex = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  ex.set_input("x", NDArray::empty({2, 0, 3}, f32));
  ex.run();
  EXPECT_EQ(ex.get_output(0).shape(), (std::vector<int64_t>{2, 0, 3}));
  NDArray s = ex.get_output(1);
  ASSERT_EQ(s.shape(), (std::vector<int64_t>{2, 3}));
  for (int k = 0; k < 6; ++k) EXPECT_EQ(s.data_as<float>()[k], 0.0f);
  EXPECT_EQ(ex.get_output(2).shape(), (std::vector<int64_t>{3, 2, 0}));
}

TEST(Hardening, NanThroughConvWithFusedRelu) {
  // conv2d (1x1) + bias + relu is one kernel (conv2d_nchwc with the relu in its epilogue): a
  // NaN pixel must come out NaN in every output channel, not 0; elsewhere relu(conv).
  const int C = 16, F = 16, H = 6, W = 6;
  std::mt19937 rng(5);
  NDArray wv = test_util::random_array({F, C, 1, 1}, rng),
          bv = test_util::random_array({1, F, 1, 1}, rng);
  Graph g;
  Entry x = g.add_input("x", {1, C, H, W}, f32);
  Entry c = g.add_op("conv2d", {x, g.add_constant("w", wv)}, {}, "conv");
  Entry a = g.add_op("add", {c, g.add_constant("b", bv)}, {}, "bias");
  g.add_output(g.add_op("relu", {a}, {}, "relu"));
  CompiledModule m = build_module(g, Target::host());
  auto ex = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  NDArray xv = test_util::random_array({1, C, H, W}, rng);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  xv.data_as<float>()[(3 * H + 2) * W + 4] = nan;  // channel 3, pixel (2, 4)
  ex.set_input("x", xv);
  ex.run();
  NDArray y = ex.get_output(0);
  const float* X = xv.data_as<float>();
  for (int f = 0; f < F; ++f)
    for (int p = 0; p < H * W; ++p) {
      float got = y.data_as<float>()[f * H * W + p];
      if (p == 2 * W + 4) {
        EXPECT_TRUE(std::isnan(got)) << "channel " << f << ": got " << got;
        continue;
      }
      double s = bv.data_as<float>()[f];
      for (int k = 0; k < C; ++k)
        s += static_cast<double>(X[k * H * W + p]) * wv.data_as<float>()[f * C + k];
      EXPECT_NEAR(got, std::max(s, 0.0), 1e-4) << "channel " << f << " pixel " << p;
    }
}

}  // namespace
}  // namespace kiln::graph
