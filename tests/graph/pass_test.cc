// Graph passes: golden text after each pass on small graphs, constant folding checked
// numerically against values computed here, every pass on a 10,000-node relu chain
// (no recursion, well under a second), and the recipe on the shared pass runner: records,
// "unchanged", the dump after a named pass, the verifier, and the graph's structural equality.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "common/error.h"
#include "common/golden.h"
#include "graph/graph_test_util.h"
#include "kiln/graph/build_module.h"
#include "kiln/graph/graph.h"
#include "kiln/graph/transform.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/support/half.h"

namespace kiln::graph {
namespace {

const DataType f32 = DataType::Float(32);
using Ints = std::vector<int64_t>;
using ::kiln::testing::error_of;

runtime::NDArray iota(std::vector<int64_t> shape, float start, float step) {
  runtime::NDArray a = runtime::NDArray::empty(std::move(shape), f32);
  for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = start + step * i;
  return a;
}

TEST(DeadCode, RemovesUnused) {
  Graph g;
  Entry x = g.add_input("x", {4}, f32);
  g.add_input("unused_in", {4}, f32);
  Entry c = g.add_constant("c", iota({4}, 1, 1));
  g.add_op("exp", {x});
  Entry a = g.add_op("add", {x, c});
  g.add_op("relu", {a});
  g.add_output(g.add_op("sigmoid", {a}));
  Graph r = dead_code_elimination(infer_types(g));
  r.verify("test");
  KILN_EXPECT_GOLDEN("pass_dead_code_removes_unused", r.str());
}

TEST(CSE, MergesDuplicates) {
  Graph g;
  Entry x = g.add_input("x", {4}, f32);
  Entry a1 = g.add_op("relu", {x});
  Entry a2 = g.add_op("relu", {x});
  Entry b1 = g.add_op("exp", {a1});
  Entry b2 = g.add_op("exp", {a2});  // merges once a2 has merged
  Entry c1 = g.add_op("clip", {b1}, {{"a_min", 0.0}, {"a_max", 1.0}});
  Entry c2 = g.add_op("clip", {b2}, {{"a_min", 0.0}, {"a_max", 2.0}});  // other attrs
  g.add_output(g.add_op("add", {c1, c2}));
  g.add_output(g.add_op("add", {c1, c2}));
  Graph r = dead_code_elimination(common_subexpression_elimination(infer_types(g)));
  KILN_EXPECT_GOLDEN("pass_cse_merges_duplicates", r.str());
}

TEST(InferTypes, Bfloat16ArithmeticIsRefusedCastIsNot) {
  Graph g;
  Entry x = g.add_input("x", {4}, DataType::BFloat16());
  Entry t = g.add_op("transpose", {g.add_op("reshape", {x}, {{"newshape", Ints{2, 2}}})});
  Entry f = g.add_op("cast", {t}, {{"dtype", std::string("float32")}});
  g.add_output(g.add_op("relu", {f}));
  EXPECT_NO_THROW(infer_types(g));
  g.add_output(g.add_op("add", {x, x}, {}, "sum"));
  EXPECT_EQ(error_of([&] { infer_types(g); }),
            "infer_types: node %5 (add 'sum'): bfloat16 arithmetic is not supported yet (only "
            "Cast to and from bfloat16 and data movement such as reshape and transpose); cast "
            "to float32 first");
}

/// A float16 array of `v`'s values (rounded to nearest).
runtime::NDArray half_array(const runtime::NDArray& v) {
  runtime::NDArray h = runtime::NDArray::empty(v.shape(), DataType::Float(16));
  for (int64_t i = 0; i < v.numel(); ++i)
    h.data_as<uint16_t>()[i] = support::float_to_half(v.data_as<float>()[i]);
  return h;
}

runtime::NDArray as_float(const runtime::NDArray& h) {
  runtime::NDArray v = runtime::NDArray::empty(h.shape(), f32);
  for (int64_t i = 0; i < h.numel(); ++i)
    v.data_as<float>()[i] = support::half_to_float(h.data_as<uint16_t>()[i]);
  return v;
}

TEST(Float16InFloat32, ComputesInFloat32AndKeepsTheInterfaceAndTheModelsCasts) {
  // x (float16) → conv2d with float16 weights → relu → the model's cast to float32 and back to
  // float16 (a mixed-precision export) → + a float16 bias: float32 arithmetic throughout, the
  // input cast up once, the result cast down once, the model's cast to float16 kept.
  const DataType f16 = DataType::Float(16);
  std::mt19937 rng(12);
  const runtime::NDArray w = half_array(test_util::random_array({8, 4, 3, 3}, rng));
  const runtime::NDArray b = half_array(test_util::random_array({1, 8, 1, 1}, rng));
  Graph g;
  Entry x = g.add_input("x", {1, 4, 6, 6}, f16);
  Entry c =
      g.add_op("conv2d", {x, g.add_constant("w", w)}, {{"padding", Ints{1, 1, 1, 1}}}, "conv");
  Entry r = g.add_op("relu", {c}, {}, "relu");
  Entry up = g.add_op("cast", {r}, {{"dtype", std::string("float32")}}, "up");
  Entry down = g.add_op("cast", {up}, {{"dtype", std::string("float16")}}, "down");
  g.add_output(g.add_op("add", {down, g.add_constant("b", b)}, {}, "bias"));
  Graph f = float16_in_float32(infer_types(g));
  KILN_EXPECT_GOLDEN("pass_float16_in_float32", f.str());
  // Built for the CPU (where the recipe runs the pass), against the same graph in float32
  // with float16's values: within one rounding of the result to float16.
  CompiledModule m = build_module(g, Target::host(), BuildOptions{2, true});
  auto e = runtime::GraphExecutor::create(m.graph_json, m.lib, m.params);
  const runtime::NDArray xv = half_array(test_util::random_array({1, 4, 6, 6}, rng));
  e.set_input("x", xv);
  e.run();
  const runtime::NDArray got = e.get_output(0);
  ASSERT_EQ(got.dtype(), f16);
  Graph ref;
  Entry rx = ref.add_input("x", {1, 4, 6, 6}, f32);
  Entry rc = ref.add_op("conv2d", {rx, ref.add_constant("w", as_float(w))},
                        {{"padding", Ints{1, 1, 1, 1}}});
  Entry rd = ref.add_op(
      "cast", {ref.add_op("cast", {ref.add_op("relu", {rc})}, {{"dtype", std::string("float16")}})},
      {{"dtype", std::string("float32")}});
  ref.add_output(ref.add_op("add", {rd, ref.add_constant("b", as_float(b))}));
  CompiledModule rm = build_module(ref, Target::host(), BuildOptions{0, true});
  auto re = runtime::GraphExecutor::create(rm.graph_json, rm.lib, rm.params);
  re.set_input("x", as_float(xv));
  re.run();
  const runtime::NDArray want = re.get_output(0);
  int64_t off = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const float wv = want.data_as<float>()[i];
    const float gv = support::half_to_float(got.data_as<uint16_t>()[i]);
    off += !(std::abs(gv - wv) <= std::ldexp(std::abs(wv), -11) + 1e-7f);
  }
  EXPECT_EQ(off, 0);
}

TEST(CSE, MergesEqualConstants) {
  // Equal constants (type, shape and bytes) merge, so the ops using them merge too; a constant
  // with one other element, or another shape, stays.
  Graph g;
  Entry x = g.add_input("x", {2, 3}, f32);
  Entry c1 = g.add_constant("c1", iota({2, 3}, 0, 1));
  Entry c2 = g.add_constant("c2", iota({2, 3}, 0, 1));
  runtime::NDArray other = iota({2, 3}, 0, 1);
  other.data_as<float>()[5] = 7.5f;
  Entry c3 = g.add_constant("c3", other);
  Entry c4 = g.add_constant("c4", iota({3, 2}, 0, 1));
  Entry a1 = g.add_op("add", {x, c1});
  Entry a2 = g.add_op("add", {x, c2});
  Entry a3 = g.add_op("add", {x, c3});
  Entry r4 = g.add_op("reshape", {c4}, {{"newshape", Ints{2, 3}}});
  g.add_output(g.add_op("add", {g.add_op("add", {a1, a2}), g.add_op("add", {a3, r4})}));
  Graph r = dead_code_elimination(common_subexpression_elimination(infer_types(g)));
  KILN_EXPECT_GOLDEN("pass_cse_merges_equal_constants", r.str());
}

TEST(ConstantFolding, ShapeLikeSubgraph) {
  // constant [2, 3] -> reshape [3, 2] -> add constant -> transpose: all folds; x + that stays.
  Graph g;
  Entry x = g.add_input("x", {2, 3}, f32);
  Entry c = g.add_constant("c", iota({2, 3}, 0, 1));    // 0..5
  Entry d = g.add_constant("d", iota({3, 2}, 10, 10));  // 10..60
  Entry r = g.add_op("reshape", {c}, {{"newshape", Ints{3, 2}}});
  Entry s = g.add_op("add", {r, d}, {}, "shape_calc");
  Entry t = g.add_op("transpose", {s});
  g.add_output(g.add_op("multiply", {x, t}));
  Graph f = dead_code_elimination(constant_folding(infer_types(g)));
  f.verify("test");
  KILN_EXPECT_GOLDEN("pass_constant_folding_shape_like_subgraph", f.str());
  // s[i][j] = (2i + j) + 10 (2i + j + 1); t[j][i] = s[i][j].
  const float* v = f.node(1).value.data_as<float>();
  for (int j = 0; j < 2; ++j)
    for (int i = 0; i < 3; ++i) {
      float k = 2.0f * i + j;
      EXPECT_FLOAT_EQ(v[j * 3 + i], k + 10 * (k + 1)) << i << "," << j;
    }
}

TEST(ConstantFolding, EqualNodesShareAKernelNotTheirValues) {
  // Three transposes of [2, 3] constants: two with the same attributes (one kernel, each on its
  // own constant), one with other attributes (its own kernel) on the same input type.
  Graph g;
  Entry c = g.add_constant("c", iota({2, 3, 1}, 0, 1)),
        d = g.add_constant("d", iota({2, 3, 1}, 100, 1));
  Entry t1 = g.add_op("transpose", {c}, {{"axes", Ints{1, 0, 2}}});
  Entry t2 = g.add_op("transpose", {d}, {{"axes", Ints{1, 0, 2}}});
  Entry t3 = g.add_op("transpose", {c}, {{"axes", Ints{2, 1, 0}}});
  g.add_output(t1);
  g.add_output(t2);
  g.add_output(t3);
  Graph f = dead_code_elimination(constant_folding(infer_types(g)));
  ASSERT_EQ(f.outputs().size(), 3u);
  auto value = [&](size_t k) { return f.node(f.outputs()[k].node).value; };
  ASSERT_EQ(value(0).shape(), (std::vector<int64_t>{3, 2, 1}));
  ASSERT_EQ(value(2).shape(), (std::vector<int64_t>{1, 3, 2}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(value(0).data_as<float>()[j * 2 + i], static_cast<float>(i * 3 + j));
      EXPECT_EQ(value(1).data_as<float>()[j * 2 + i], static_cast<float>(100 + i * 3 + j));
      EXPECT_EQ(value(2).data_as<float>()[j * 2 + i], static_cast<float>(i * 3 + j));
    }
}

TEST(ConstantFolding, NamesAreUnique) {
  Graph g;
  Entry c = g.add_constant("c", iota({3}, 1, 1));
  Entry a = g.add_op("exp", {c}, {}, "e");
  Entry b = g.add_op("negative", {a}, {}, "e_folded");  // collides with the first name
  g.add_output(a);
  g.add_output(b);
  Graph f = dead_code_elimination(constant_folding(infer_types(g)));
  KILN_EXPECT_GOLDEN("pass_constant_folding_names_are_unique", f.str());
  EXPECT_NEAR(f.node(1).value.data_as<float>()[2], -std::exp(3.0), 1e-4);
}

TEST(Simplify, IdentitiesAndAlgebra) {
  Graph g;
  Entry x = g.add_input("x", {2, 3, 4}, f32);
  Entry one = g.add_constant("one", iota({1}, 1, 0));
  Entry zero = g.add_constant("zero", iota({4}, 0, 0));
  Entry big_zero = g.add_constant("big_zero", iota({5, 2, 3, 4}, 0, 0));
  Entry a = g.add_op("identity", {x});
  Entry b = g.add_op("dropout", {a}, {{"rate", 0.1}});
  Entry c = g.add_op("multiply", {one, b});
  Entry d = g.add_op("add", {c, zero});
  Entry e = g.add_op("reshape", {d}, {{"newshape", Ints{2, 3, 4}}});
  Entry f = g.add_op("divide", {e, one});
  Entry h = g.add_op("add", {f, big_zero});  // broadcasts to a bigger shape: stays
  g.add_output(h);
  Graph r = dead_code_elimination(simplify(infer_types(g)));
  KILN_EXPECT_GOLDEN("pass_simplify_identities_and_algebra", r.str());
}

TEST(Simplify, ASliceThatKeepsEveryElementInOrderIsDropped) {
  Graph g;
  Entry x = g.add_input("x", {2, 6, 4}, f32);
  Entry all = g.add_op("strided_slice", {x},
                       {{"begin", Ints{0}}, {"end", Ints{6}}, {"axes", Ints{1}}}, "all");
  Entry rev =
      g.add_op("strided_slice", {all},
               {{"begin", Ints{5}}, {"end", Ints{-7}}, {"strides", Ints{-1}}, {"axes", Ints{1}}},
               "reversed");
  Entry part = g.add_op("strided_slice", {rev},
                        {{"begin", Ints{1}}, {"end", Ints{6}}, {"axes", Ints{1}}}, "part");
  g.add_output(part);
  Graph r = dead_code_elimination(simplify(infer_types(g)));
  // The reversal has x's shape but not its order; the last slice drops a row.
  std::string names;
  for (const Node& n : r.nodes()) {
    if (!n.is_op()) continue;
    names += n.name + " ";
    if (n.name == "reversed") {
      EXPECT_TRUE(r.node(n.inputs[0].node).is_input()) << r.str();
    }
  }
  EXPECT_EQ(names, "reversed part ") << r.str();
}

TEST(Simplify, PowerByOneAndTwo) {
  // LayerNorm as exported before opset 17 squares by Pow(x, 2): a product, not a libm call.
  Graph g;
  Entry x = g.add_input("x", {2, 3}, f32);
  Entry a = g.add_op("power", {x, g.add_constant("two", iota({}, 2, 0))});
  Entry b = g.add_op("power", {a, g.add_constant("one", iota({1}, 1, 0))});
  Entry c = g.add_op("power", {b, g.add_constant("three", iota({}, 3, 0))});  // stays
  g.add_output(c);
  Graph r = dead_code_elimination(simplify(infer_types(g)));
  KILN_EXPECT_GOLDEN("pass_simplify_power_by_one_and_two", r.str());
}

TEST(Simplify, TransposeAndReshapeChains) {
  Graph g;
  Entry x = g.add_input("x", {2, 3, 4}, f32);
  Entry t1 = g.add_op("transpose", {x}, {{"axes", Ints{1, 2, 0}}});   // [3, 4, 2]
  Entry t2 = g.add_op("transpose", {t1}, {{"axes", Ints{2, 0, 1}}});  // back to x
  Entry t3 = g.add_op("transpose", {t2}, {{"axes", Ints{0, 2, 1}}});  // [2, 4, 3]
  Entry t4 = g.add_op("transpose", {t3});                             // reversed: [3, 4, 2]
  Entry r1 = g.add_op("reshape", {t4}, {{"newshape", Ints{12, 2}}});
  Entry r2 = g.add_op("reshape", {r1}, {{"newshape", Ints{-1}}});
  g.add_output(r2);
  Graph r = dead_code_elimination(simplify(infer_types(g)));
  KILN_EXPECT_GOLDEN("pass_simplify_transpose_and_reshape_chains", r.str());
}

TEST(Simplify, ConvolutionTapsThatOnlyReadPaddingAreDropped) {
  // On a 5x5 map: dilation 6 (every off-center tap reads padding only) becomes a 1x1
  // convolution without padding; with dilation 3 the outer taps read data for output rows and
  // columns 0-1 or 3-4 only: three bands per axis (taps 1-2, 1, 0-1), nine unpadded
  // convolutions over the input slices they read, concatenated back (a third of the
  // multiply-adds); on a one-row map a 3x3 kernel keeps its middle row, padded left and right.
  Graph g;
  Entry x = g.add_input("x", {1, 128, 5, 5}, f32);
  Entry row = g.add_input("row", {1, 4, 1, 7}, f32);
  auto conv = [&](Entry in, const std::string& w, int64_t dilation, Ints padding) {
    const int64_t c = in == row ? 4 : 128;
    return g.add_op("conv2d", {in, g.add_constant(w, iota({64, c, 3, 3}, -1, 2e-5f))},
                    {{"strides", Ints{1, 1}},
                     {"padding", std::move(padding)},
                     {"dilation", Ints{dilation, dilation}}});
  };
  g.add_output(conv(x, "w_rate6", 6, Ints{6, 6, 6, 6}));
  g.add_output(conv(x, "w_rate3", 3, Ints{3, 3, 3, 3}));  // saves 64 * 128 * 144 multiply-adds
  g.add_output(conv(row, "w_row", 1, Ints{1, 1, 1, 1}));
  Graph r = dead_code_elimination(simplify(infer_types(g)));
  KILN_EXPECT_GOLDEN("pass_simplify_conv_taps", r.str());
  // The cropped and banded kernels hold the original's taps: the same outputs as the graph
  // compiled without simplification (opt level 0).
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 5).max_err, 1e-5);
}

TEST(Simplify, AZeroPadOfTheMapJoinsTheConvolutionsPadding) {
  // TensorFlow's strided "SAME" convolution exported as Pad(0, 0, 1, 1) + Conv(padding 0), and a
  // depthwise one with uneven pads on top of its own: the convolutions pad the map themselves.
  // Stay: a pad of ones, a pad of channels. A pad that adds nothing goes.
  Graph g;
  Entry x = g.add_input("x", {1, 8, 9, 9}, f32);
  auto pad = [&](Ints before, Ints after, double value) {
    return g.add_op(
        "pad", {x},
        {{"pad_before", std::move(before)}, {"pad_after", std::move(after)}, {"value", value}});
  };
  auto conv = [&](Entry in, const std::string& w, int64_t groups, Ints padding, int64_t c = 8) {
    return g.add_op("conv2d", {in, g.add_constant(w, iota({8, c / groups, 3, 3}, -1, 0.01f))},
                    {{"strides", Ints{2, 2}}, {"padding", std::move(padding)}, {"groups", groups}});
  };
  g.add_output(conv(pad({0, 0, 0, 0}, {0, 0, 1, 1}, 0.0), "w_same", 1, Ints{0, 0, 0, 0}));
  g.add_output(conv(pad({0, 0, 2, 0}, {0, 0, 0, 1}, 0.0), "w_dw", 8, Ints{1, 1, 1, 1}));
  g.add_output(conv(pad({0, 0, 1, 1}, {0, 0, 1, 1}, 1.0), "w_ones", 1, Ints{0, 0, 0, 0}));
  g.add_output(conv(pad({0, 1, 0, 0}, {0, 1, 0, 0}, 0.0), "w_chan", 1, Ints{1, 1, 1, 1}, 10));
  g.add_output(g.add_op("relu", {pad({0, 0, 0, 0}, {0, 0, 0, 0}, 0.0)}));  // a pad of nothing
  Graph r = dead_code_elimination(simplify(infer_types(g)));
  KILN_EXPECT_GOLDEN("pass_simplify_zero_pad_joins_conv", r.str());
  EXPECT_LT(test_util::compare_with_unoptimized(g, 2, 7).max_err, 1e-5);
}

TEST(Simplify, MovesSinkThroughElementwiseOpsAndCancel) {
  // A conv-like [8, 4, 5, 6] result moved to [1, 4, 8, 5, 6] (reshape, transpose), scaled and
  // shifted by per-channel constants (one of lower rank), ReLU'd, and moved back: every op
  // runs on the unmoved tensor with its constant re-shaped, and the moves cancel.
  Graph g;
  Entry x = g.add_input("x", {8, 4, 5, 6}, f32);
  Entry m = g.add_op("reshape", {x}, {{"newshape", Ints{1, 8, 4, 5, 6}}});
  m = g.add_op("transpose", {m}, {{"axes", Ints{0, 2, 1, 3, 4}}});
  Entry a = g.add_op("multiply", {m, g.add_constant("scale", iota({1, 4, 1, 1, 1}, 1, 1))});
  Entry b = g.add_op("add", {g.add_constant("shift", iota({4, 1, 1, 1}, 0, 1)), a});
  Entry r = g.add_op("relu", {b}, {}, "act");
  r = g.add_op("transpose", {r}, {{"axes", Ints{0, 2, 1, 3, 4}}});
  g.add_output(g.add_op("reshape", {r}, {{"newshape", Ints{8, 4, 5, 6}}}));
  // Stays: a transpose that another op reads as well; a constant whose values would have to
  // be reordered (its extents 3 and 2 lie along the swapped axes).
  Entry y = g.add_input("y", {2, 3, 4}, f32);
  Entry t = g.add_op("transpose", {y}, {{"axes", Ints{1, 0, 2}}});
  g.add_output(g.add_op("exp", {t}));
  g.add_output(t);
  Entry u = g.add_op("transpose", {y}, {{"axes", Ints{1, 0, 2}}});
  g.add_output(g.add_op("add", {u, g.add_constant("grid", iota({3, 2, 1}, 0, 1))}));
  Graph s = dead_code_elimination(simplify(infer_types(g)));
  KILN_EXPECT_GOLDEN("pass_simplify_moves_sink_and_cancel", s.str());
}

TEST(Optimize, Recipe) {
  Graph g;
  Entry x = g.add_input("x", {1, 4}, f32);
  Entry w = g.add_constant("w", iota({4, 4}, 0, 0.5f));
  Entry wt = g.add_op("transpose", {w});
  Entry wtt = g.add_op("transpose", {wt});  // simplify removes the pair
  Entry d1 = g.add_op("dense", {x, wtt});
  Entry d2 = g.add_op("dense", {x, w});  // same after simplify: CSE merges
  Entry s = g.add_op("add", {d1, d2});
  Entry bias = g.add_op("exp", {g.add_constant("b", iota({4}, 0, 0))});  // folds to ones
  g.add_output(g.add_op("multiply", {s, bias}));                         // x·1 after folding
  Graph r = optimize(g, 1);
  KILN_EXPECT_GOLDEN("pass_optimize_recipe", r.str());
  // Level 2 adds layout alteration: the weights are packed into a 16-wide panel (zero past
  // row 4), the product computed over it and sliced.
  Graph r2 = optimize(g, 2);
  EXPECT_NE(r2.str().find("dense_packed(%0, %1, orig_units=4, units=16) : float32[1, 16]"),
            std::string::npos)
      << r2.str();
  EXPECT_EQ(optimize(g, 0).num_nodes(), g.num_nodes());
}

// Every pass on a 10,000-node chain: iterative, so no stack overflow, and fast.
TEST(Passes, LongChain) {
  constexpr int kN = 10000;
  Graph g;
  Entry e = g.add_input("x", {1, 8}, f32);
  Entry one = g.add_constant("one", iota({1}, 1, 0));
  for (int i = 0; i < kN; ++i) {
    e = g.add_op(i % 3 == 2 ? "multiply" : "relu",
                 i % 3 == 2 ? std::vector<Entry>{e, one} : std::vector<Entry>{e});
  }
  g.add_output(e);
  // Times are printed, not asserted (tests never depend on timing): what this test checks is
  // that no pass recurses over the graph (a 10,000-node chain) and that each gives the right
  // graph.
  auto timed = [](const char* name, auto f) {
    auto t0 = std::chrono::steady_clock::now();
    Graph r = f();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ long chain ] %s: %.3f s\n", name, s);
    return r;
  };
  Graph t = timed("infer_types", [&] { return infer_types(g); });
  EXPECT_EQ(t.type_of(t.outputs()[0]).str(), "float32[1, 8]");
  Graph d = timed("dce", [&] { return dead_code_elimination(t); });
  EXPECT_EQ(d.num_nodes(), kN + 2);
  Graph c = timed("cse", [&] { return common_subexpression_elimination(t); });
  EXPECT_EQ(c.num_nodes(), kN + 2);
  Graph f = timed("constant_folding", [&] { return constant_folding(t); });
  EXPECT_EQ(f.num_nodes(), kN + 2);
  Graph s = timed("simplify", [&] { return simplify(t); });
  Graph s2 = timed("dce", [&] { return dead_code_elimination(s); });
  EXPECT_EQ(s2.num_nodes(), kN - kN / 3 + 1);  // the multiplies and `one` are gone
  timed("verify", [&] {
    s2.verify("test");
    return s2;
  });
  timed("str", [&] {
    EXPECT_GT(s2.str().size(), 100000u);
    return s2;
  });
  Graph o = timed("optimize", [&] { return optimize(g, 2); });
  for (const Node& n : o.nodes()) EXPECT_TRUE(!n.is_op() || !n.impl.name.empty());
}

// ---- the recipe on the shared pass runner (support/pass_runner.h) ----------------------------

/// x [2, 3] → identity → add(·, zeros) → relu, with a batch norm of constant parameters: the
/// first simplify changes the graph, the second does not.
Graph runner_graph() {
  Graph g;
  Entry x = g.add_input("x", {1, 2, 3, 3}, f32);
  Entry i = g.add_op("identity", {x});
  Entry a = g.add_op("add", {i, g.add_constant("zero", iota({1, 2, 3, 3}, 0, 0))});
  Entry bn = g.add_op(
      "batch_norm",
      {a, g.add_constant("gamma", iota({2}, 1, 0.5)), g.add_constant("beta", iota({2}, 0.25, 0.25)),
       g.add_constant("mean", iota({2}, -0.5, 1)), g.add_constant("var", iota({2}, 2, 1))},
      {}, "bn");
  g.add_output(g.add_op("relu", {bn}, {}, "act"));
  g.set_output_names({"y"});
  return g;
}

TEST(Optimize, RecordsEveryPassAndWhetherItChangedTheGraph) {
  std::vector<PassRecord> records;
  OptimizeOptions opt;
  opt.opt_level = 1;
  opt.records = &records;
  Graph r = optimize(runner_graph(), Target::host(), opt);
  std::vector<std::string> names;
  for (const PassRecord& rec : records) {
    names.push_back(rec.name);
    EXPECT_GE(rec.ms, 0) << rec.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "infer_types", "float16_in_float32", "quantize_realize", "simplify",
                       "constant_folding", "simplify", "common_subexpression_elimination",
                       "fold_batch_norm", "simplify", "dead_code_elimination", "fold_batch_norm",
                       "dead_code_elimination", "select_implementations"}));
  ASSERT_EQ(records.size(), 13u);
  EXPECT_TRUE(records[0].changed);    // types filled in
  EXPECT_FALSE(records[1].changed);   // no float16
  EXPECT_FALSE(records[2].changed);   // nothing quantized
  EXPECT_TRUE(records[3].changed);    // identity and x + 0 bypassed
  EXPECT_FALSE(records[5].changed);   // nothing left for the second simplify
  EXPECT_TRUE(records[7].changed);    // the batch norm became multiply → add
  EXPECT_FALSE(records[8].changed);   // no transpose or reshape to sink through it
  EXPECT_TRUE(records[9].changed);    // the bypassed nodes removed
  EXPECT_FALSE(records[10].changed);  // no scale newly next to a convolution
  EXPECT_EQ(r.output_names(), std::vector<std::string>{"y"});  // kept by every step
}

TEST(Optimize, DumpsTheGraphAfterTheNamedPass) {
  OptimizeOptions opt;
  opt.opt_level = 1;
  std::vector<std::string> dumped;
  std::string after_fold;
  opt.dump_after = "fold_batch_norm";
  opt.dump = [&](const std::string& pass, const Graph& g) {
    dumped.push_back(pass);
    after_fold = g.str();
  };
  optimize(runner_graph(), Target::host(), opt);
  // fold_batch_norm runs twice: before and after simplify sinks moves through the batch norms.
  EXPECT_EQ(dumped, (std::vector<std::string>{"fold_batch_norm", "fold_batch_norm"}));
  EXPECT_EQ(after_fold.find("batch_norm("), std::string::npos) << after_fold;
  EXPECT_NE(after_fold.find("multiply("), std::string::npos) << after_fold;
  // From the environment, to stderr, with the pass's time and "(unchanged)" when it is.
  setenv("KILN_DUMP_AFTER", "all", 1);
  ::testing::internal::CaptureStderr();
  optimize(runner_graph(), 1);
  std::string err = ::testing::internal::GetCapturedStderr();
  unsetenv("KILN_DUMP_AFTER");
  EXPECT_NE(err.find("// graph after fold_batch_norm, "), std::string::npos) << err;
  EXPECT_NE(err.find("// graph after simplify (unchanged), "), std::string::npos) << err;
  EXPECT_NE(err.find("output %"), std::string::npos) << err;
}

TEST(Optimize, AVerifierFailureNamesTheStep) {
  // Two constants named alike break Graph::verify's invariants: caught before the first pass.
  Graph g;
  Entry x = g.add_input("x", {4}, f32);
  g.add_output(g.add_op("add", {x, g.add_constant("k", iota({4}, 1, 1))}));
  g.mutable_node(1).name = "x";
  const std::string msg = error_of([&] { optimize(g, 1); });
  EXPECT_NE(msg.find("graph after construction: name 'x' of %1 is used twice"), std::string::npos)
      << msg;
}

TEST(GraphStructuralEqual, ComparesNodesAttributesAndConstantValues) {
  auto make = [](float c, double alpha, const std::string& name) {
    Graph g;
    Entry x = g.add_input("x", {4}, f32);
    Entry k = g.add_constant("k", iota({4}, c, 1));
    g.add_output(g.add_op("leaky_relu", {g.add_op("add", {x, k})}, {{"alpha", alpha}}, name));
    return infer_types(g);
  };
  const Graph a = make(1, 0.1, "act");
  EXPECT_TRUE(structural_equal(a, a));
  EXPECT_TRUE(structural_equal(a, make(1, 0.1, "act")));     // other buffers, same values
  EXPECT_FALSE(structural_equal(a, make(2, 0.1, "act")));    // a constant's values
  EXPECT_FALSE(structural_equal(a, make(1, 0.2, "act")));    // an attribute
  EXPECT_FALSE(structural_equal(a, make(1, 0.1, "other")));  // a node's name
  Graph untyped = a;
  untyped.mutable_node(3).outputs[0] = TensorType{};
  EXPECT_FALSE(structural_equal(a, untyped));  // an output type
  Graph chosen = a;
  chosen.mutable_node(3).impl.name = "injective.generic";
  EXPECT_FALSE(structural_equal(a, chosen));  // the chosen implementation
}

}  // namespace
}  // namespace kiln::graph
