// Shape operators against naive C++ index mappings, with the default schedule and
// schedule_injective; error messages for bad shapes and axes.
#include "kiln/topi/transform.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "kiln/topi/elemwise.h"
#include "topi/topi_test_util.h"

namespace kiln::topi::testing {
namespace {

TEST(TopiTransform, ReshapeFlattenSqueezeUnsqueeze) {
  te::Tensor X = input({2, 3, 1, 7}, f32, "X");
  NDArray x = random_array({2, 3, 1, 7}, f32, 1);
  auto same_flat = [&](const Shape& s) {
    return reference(s, f32, [&, s](const Shape& i) { return element(x, flat(s, i)); });
  };
  te::Tensor r1 = reshape(X, {0, -1}), r2 = reshape(X, {7, 6}), f0 = flatten(X, 0),
             f2 = flatten(X, -2), sq = squeeze(X), sq2 = squeeze(X, {-2}),
             ed = expand_dims(X, -1, 2), us = unsqueeze(X, {0, 5});
  EXPECT_EQ(shape_of(r1), (Shape{2, 21}));
  EXPECT_EQ(shape_of(f0), (Shape{1, 42}));
  EXPECT_EQ(shape_of(f2), (Shape{6, 7}));
  EXPECT_EQ(shape_of(sq), (Shape{2, 3, 7}));
  EXPECT_EQ(shape_of(ed), (Shape{2, 3, 1, 7, 1, 1}));
  EXPECT_EQ(shape_of(us), (Shape{1, 2, 3, 1, 7, 1}));
  std::vector<te::Tensor> outs = {r1, r2, f0, f2, sq, sq2, ed, us};
  std::vector<NDArray> want;
  for (const te::Tensor& t : outs) want.push_back(same_flat(shape_of(t)));
  check({X}, outs, {x}, want);
}

TEST(TopiTransform, Transpose) {
  te::Tensor X = input({2, 3, 5}, f32, "X");
  NDArray x = random_array({2, 3, 5}, f32, 2);
  te::Tensor t1 = transpose(X, {1, -1, 0}), t2 = transpose(X);
  check({X}, {t1, t2}, {x},
        {reference({3, 5, 2}, f32,
                   [&](const Shape& i) {
                     return at(x, {i[2], i[0], i[1]});
                   }),
         reference({5, 3, 2}, f32, [&](const Shape& i) {
           return at(x, {i[2], i[1], i[0]});
         })});
}

TEST(TopiTransform, ConcatAndSplit) {
  te::Tensor A = input({2, 3, 5}, f32, "A"), B = input({2, 1, 5}, f32, "B"),
             C = input({2, 4, 5}, f32, "C");
  NDArray a = random_array({2, 3, 5}, f32, 3), b = random_array({2, 1, 5}, f32, 4),
          c = random_array({2, 4, 5}, f32, 5);
  te::Tensor cat = concat({A, B, C}, -2);
  NDArray want = reference({2, 8, 5}, f32, [&](const Shape& i) {
    if (i[1] < 3) return at(a, i);
    if (i[1] < 4) return at(b, {i[0], i[1] - 3, i[2]});
    return at(c, {i[0], i[1] - 4, i[2]});
  });
  check({A, B, C}, {cat}, {a, b, c}, {want});
  // Wide concat along the last axis exercises vector reads near every boundary.
  te::Tensor P = input({3, 13}, f32, "P"), Q = input({3, 7}, f32, "Q");
  NDArray p = random_array({3, 13}, f32, 6), q = random_array({3, 7}, f32, 7);
  check({P, Q}, {concat({P, Q}, 1)}, {p, q}, {reference({3, 20}, f32, [&](const Shape& i) {
          return i[1] < 13 ? at(p, i) : at(q, {i[0], i[1] - 13});
        })});

  te::Tensor X = input({4, 7}, f32, "X");
  NDArray x = random_array({4, 7}, f32, 8);
  std::vector<te::Tensor> parts = split_at(X, {2, 3}, 1);
  std::vector<te::Tensor> halves = split(X, 2, 0);
  std::vector<te::Tensor> sized = split_sizes(X, {4, 3}, -1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(shape_of(parts[2]), (Shape{4, 4}));
  std::vector<te::Tensor> outs = parts;
  outs.insert(outs.end(), halves.begin(), halves.end());
  outs.insert(outs.end(), sized.begin(), sized.end());
  auto slice1 = [&](int64_t off, int64_t len) {
    return reference({4, len}, f32, [&, off](const Shape& i) { return at(x, {i[0], i[1] + off}); });
  };
  auto slice0 = [&](int64_t off) {
    return reference({2, 7}, f32, [&, off](const Shape& i) { return at(x, {i[0] + off, i[1]}); });
  };
  check(
      {X}, outs, {x},
      {slice1(0, 2), slice1(2, 1), slice1(3, 4), slice0(0), slice0(2), slice1(0, 4), slice1(4, 3)});
}

TEST(TopiTransform, Pad) {
  te::Tensor X = input({3, 5}, f32, "X");
  NDArray x = random_array({3, 5}, f32, 9);
  te::Tensor p1 = pad(X, {1, 2}, {2, 0}, 7.5), p2 = pad(X, {0}, {1});
  check({X}, {p1, p2}, {x},
        {reference({6, 7}, f32,
                   [&](const Shape& i) {
                     int64_t r = i[0] - 1, c = i[1] - 2;
                     return r >= 0 && r < 3 && c >= 0 && c < 5 ? at(x, {r, c}) : 7.5;
                   }),
         reference({4, 5}, f32, [&](const Shape& i) { return i[0] < 3 ? at(x, i) : 0.0; })});
}

/// numpy-style reference slice of one axis: the selected indices.
std::vector<int64_t> np_slice(int64_t n, int64_t b, int64_t e, int64_t s) {
  std::vector<int64_t> r;
  if (b < 0) b += n;
  if (e < 0) e += n;
  if (s > 0) {
    b = std::clamp<int64_t>(b, 0, n);
    e = std::clamp<int64_t>(e, 0, n);
    for (int64_t i = b; i < e; i += s) r.push_back(i);
  } else {
    b = std::clamp<int64_t>(b, -1, n - 1);
    e = std::clamp<int64_t>(e, -1, n - 1);
    for (int64_t i = b; i > e; i += s) r.push_back(i);
  }
  return r;
}

TEST(TopiTransform, StridedSlice) {
  te::Tensor X = input({7, 13}, f32, "X");
  NDArray x = random_array({7, 13}, f32, 10);
  const int64_t kBig = std::numeric_limits<int64_t>::max();
  struct Case {
    std::vector<int64_t> b, e, s;
  };
  std::vector<Case> cases = {{{1, 2}, {5, 11}, {1, 3}},
                             {{-1, -2}, {-kBig, 0}, {-2, -1}},
                             {{-100, 20}, {100, -20}, {1, -4}},
                             {{6}, {2}, {-1}},
                             {{0, 12}, {kBig, -kBig}, {3, -5}}};
  std::vector<te::Tensor> outs;
  std::vector<NDArray> want;
  for (const Case& c : cases) {
    te::Tensor t = strided_slice(X, c.b, c.e, c.s);
    std::vector<int64_t> rows = np_slice(7, c.b[0], c.e[0], c.s[0]);
    std::vector<int64_t> cols =
        c.b.size() > 1 ? np_slice(13, c.b[1], c.e[1], c.s[1]) : np_slice(13, 0, 13, 1);
    Shape s = {static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols.size())};
    EXPECT_EQ(shape_of(t), s);
    outs.push_back(t);
    want.push_back(reference(s, f32, [&](const Shape& i) {
      return at(x, {rows[i[0]], cols[i[1]]});
    }));
  }
  // With explicit axes.
  te::Tensor t = strided_slice(X, {-3}, {kBig}, {}, {1});
  outs.push_back(t);
  want.push_back(reference({7, 3}, f32, [&](const Shape& i) { return at(x, {i[0], i[1] + 10}); }));
  check({X}, outs, {x}, want);
}

TEST(TopiTransform, TakeWrapsNegativeIndices) {
  te::Tensor X = input({5, 6}, f32, "X");
  NDArray x = random_array({5, 6}, f32, 11);
  for (DataType it : {i32, i64}) {
    te::Tensor I = input({2, 3}, it, "I");
    NDArray ind = random_array({2, 3}, it, 12, -5, 4);
    te::Tensor t0 = take(X, I, 0), t1 = take(X, I, -1);
    EXPECT_EQ(shape_of(t0), (Shape{2, 3, 6}));
    EXPECT_EQ(shape_of(t1), (Shape{5, 2, 3}));
    auto wrap = [](double v, int64_t n) { return static_cast<int64_t>(v < 0 ? v + n : v); };
    check({X, I}, {t0, t1}, {x, ind},
          {reference({2, 3, 6}, f32,
                     [&](const Shape& i) {
                       return at(x, {wrap(at(ind, {i[0], i[1]}), 5), i[2]});
                     }),
           reference({5, 2, 3}, f32, [&](const Shape& i) {
             return at(x, {i[0], wrap(at(ind, {i[1], i[2]}), 6)});
           })});
  }
}

TEST(TopiTransform, GatherElementsAlongEachAxis) {
  // torch.gather: out[i] = x[i with i[axis] = indices[i]], indices wrapping when negative and,
  // off the axis, smaller than the data (a DGCNN's neighbour lookup reads [.., n, k] of
  // [.., n, n]).
  te::Tensor X = input({4, 5, 6}, f32, "X");
  NDArray x = random_array({4, 5, 6}, f32, 17);
  uint32_t seed = 18;
  for (int axis : {0, 1, -1}) {
    SCOPED_TRACE(axis);
    const size_t ax = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
    const Shape is = ax == 2 ? Shape{3, 5, 9} : ax == 1 ? Shape{3, 9, 6} : Shape{7, 4, 2};
    for (DataType it : {i32, i64}) {
      te::Tensor I = input(is, it, "I");
      const int64_t n = Shape{4, 5, 6}[ax];
      NDArray ind = random_array(is, it, seed++, -static_cast<double>(n), n - 0.01);
      te::Tensor g = gather_elements(X, I, axis);
      EXPECT_EQ(shape_of(g), is);
      check({X, I}, {g}, {x, ind}, {reference(is, f32, [&](const Shape& i) {
              Shape j = i;
              const auto k = static_cast<int64_t>(at(ind, i));
              j[ax] = k < 0 ? k + n : k;
              return at(x, j);
            })});
    }
  }
  te::Tensor I = input({4, 5, 7}, i64, "I");
  EXPECT_NE(error_of([&] {
              gather_elements(X, I, 1);
            }).find("gather_elements: indices [4, 5, 7] exceed the data [4, 5, 6] on axis 2"),
            std::string::npos);
}

TEST(TopiTransform, TakeOfComputedIndices) {
  // An embedding lookup whose indices are computed in the same kernel (a float input cast to
  // int64, as exported recommendation models do): the injective schedule inlines the cast, but
  // take's index check is an extern stage, which reads a buffer, so lowering stores the cast.
  te::Tensor X = input({9, 4}, f32, "X");
  te::Tensor F = input({3, 2}, f32, "F");
  NDArray x = random_array({9, 4}, f32, 15);
  NDArray f = random_array({3, 2}, f32, 16, -9.0, 8.9);  // cast truncates toward zero
  te::Tensor t = take(X, cast(F, i64), 0);
  check({X, F}, {t}, {x, f}, {reference({3, 2, 4}, f32, [&](const Shape& i) {
          auto k = static_cast<int64_t>(at(f, {i[0], i[1]}));
          return at(x, {k < 0 ? k + 9 : k, i[2]});
        })});
}

TEST(TopiTransform, LayoutTransform) {
  te::Tensor X = input({2, 8, 3, 5}, f32, "X");
  NDArray x = random_array({2, 8, 3, 5}, f32, 13);
  te::Tensor b4 = layout_transform(X, "NCHW", "NCHW4c");
  te::Tensor back = layout_transform(b4, "NCHW4c", "NCHW");
  te::Tensor b2 = layout_transform(b4, "NCHW4c", "NCHW2c");
  EXPECT_EQ(shape_of(b4), (Shape{2, 2, 3, 5, 4}));
  check({X}, {b4, back, b2}, {x},
        {reference({2, 2, 3, 5, 4}, f32,
                   [&](const Shape& i) {
                     return at(x, {i[0], i[1] * 4 + i[4], i[2], i[3]});
                   }),
         reference({2, 8, 3, 5}, f32, [&](const Shape& i) { return at(x, i); }),
         reference({2, 4, 3, 5, 2}, f32, [&](const Shape& i) {
           return at(x, {i[0], i[1] * 2 + i[4], i[2], i[3]});
         })});
}

TEST(TopiTransform, LayoutTransformToShortBlock) {
  // NCHW -> NCHW3c (a 3-channel image into a first convolution): the injective schedule keeps
  // scalar loops over (w, c), c unrolled, for LLVM's interleaved vectorization, instead of a
  // vector gather over the flattened index.
  te::Tensor X = input({2, 6, 5, 21}, f32, "X");
  NDArray x = random_array({2, 6, 5, 21}, f32, 14);
  te::Tensor b3 = layout_transform(X, "NCHW", "NCHW3c");
  check({X}, {b3}, {x}, {reference({2, 2, 5, 21, 3}, f32, [&](const Shape& i) {
          return at(x, {i[0], i[1] * 3 + i[4], i[2], i[3]});
        })});
  te::Schedule s = schedule_injective({b3}, host_target());
  const std::string text = tir::to_string(lower(s, {X, b3}, "f"));
  EXPECT_NE(text.find("for (l, 0, 21) {"), std::string::npos) << text;
  EXPECT_NE(text.find("l*3 + 2] = X["), std::string::npos) << text;
  EXPECT_EQ(text.find("ramp"), std::string::npos) << text;
}

TEST(TopiTransform, ChannelShuffleOfShortRowsCopiesWholeVectors) {
  // ShuffleNet-v2's concat + channel shuffle on NCHW maps whose rows are no multiple of the
  // vector: rows of 28 as two 16-lane vectors (at 0 and 12), rows of 14 as two 8-lane ones (at
  // 0 and 6), each read from one source row (no gather, no mask), against the index mapping.
  for (int64_t w : {28, 14}) {
    SCOPED_TRACE(w);
    te::Tensor A = input({1, 6, 3, w}, f32, "A"), B = input({1, 6, 3, w}, f32, "B");
    NDArray a = random_array({1, 6, 3, w}, f32, 20), b = random_array({1, 6, 3, w}, f32, 21);
    te::Tensor cat = concat({A, B}, 1);
    te::Tensor out =
        reshape(transpose(reshape(cat, {1, 2, 6, 3, w}), {0, 2, 1, 3, 4}), {1, 12, 3, w});
    NDArray want = reference({1, 12, 3, w}, f32, [&](const Shape& i) {
      const int64_t c = (i[1] % 2) * 6 + i[1] / 2;  // the shuffled channel's source
      return c < 6 ? at(a, {0, c, i[2], i[3]}) : at(b, {0, c - 6, i[2], i[3]});
    });
    check({A, B}, {out}, {a, b}, {want});
    te::Schedule s = schedule_injective({out}, Target("llvm -mcpu=skylake-avx512"));
    const std::string text = tir::to_string(lower(s, {A, B, out}, "f"));
    const std::string lanes = w == 28 ? "16" : "8";
    EXPECT_NE(text.find(", 1, " + lanes + ")] = select("), std::string::npos) << text;
    EXPECT_NE(text.find(std::to_string(w == 28 ? 12 : 6) + ", 1, " + lanes + ")] = select("),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("broadcast(" + std::to_string(2 * 3 * w)), std::string::npos)
        << text;  // no per-lane division by the shuffled channel pair
    EXPECT_EQ(text.find(" if "), std::string::npos) << text;  // no masked vector
  }
}

TEST(TopiTransform, ConcatOfManyInputsThenElementwiseReadsOneInputPerLoop) {
  // DenseNet's blocked concat of every earlier feature map, then batch norm + ReLU: the
  // schedule keeps the concat axis as a loop that loop_partition cuts into one loop per input,
  // so no store reads (and selects between) more than one input.
  std::vector<te::Tensor> xs;
  std::vector<NDArray> data;
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (int k = 0; k < 9; ++k) {
    int64_t c = 1 + k % 3;
    offsets.push_back(total);
    total += c;
    xs.push_back(input({1, c, 3, 5, 16}, f32, "X" + std::to_string(k)));
    data.push_back(random_array({1, c, 3, 5, 16}, f32, 40 + k));
  }
  te::Tensor out = relu(concat(xs, 1));
  NDArray want = reference({1, total, 3, 5, 16}, f32, [&](const Shape& i) {
    size_t k = 0;
    while (k + 1 < offsets.size() && i[1] >= offsets[k + 1]) ++k;
    return std::max(0.0, at(data[k], {0, i[1] - offsets[k], i[2], i[3], i[4]}));
  });
  check(xs, {out}, data, {want});
  te::Schedule s = schedule_injective({out}, host_target());
  std::vector<te::Tensor> args = xs;
  args.push_back(out);
  const std::string text = tir::to_string(lower(s, args, "f"));
  size_t stores = 0, pos = 0;
  while ((pos = text.find("relu[", pos)) != std::string::npos) {
    size_t end = text.find('\n', pos);
    const std::string line = text.substr(pos, end - pos);
    int inputs = 0;
    for (int k = 0; k < 9; ++k)
      inputs += line.find("X" + std::to_string(k) + "[") != std::string::npos;
    EXPECT_EQ(inputs, 1) << line;
    ++stores;
    pos = end;
  }
  EXPECT_EQ(stores, 9u) << text;
  EXPECT_NE(text.find("pragma_no_unroll"), std::string::npos) << text;
}

TEST(TopiTransform, Errors) {
  te::Tensor X = input({2, 3}, f32, "X");
  te::Tensor Y = input({2, 4}, f32, "Y");
  te::Tensor N = input({2, 6, 3, 3}, f32, "N");
  auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos;
  };
  EXPECT_EQ(error_of([&] {
              reshape(X, {4, 2});
            }),
            "reshape: cannot reshape [2, 3] (6 elements) to [4, 2] (8 elements)");
  EXPECT_TRUE(has(error_of([&] { reshape(X, {-1, -1}); }), "more than one -1"));
  EXPECT_TRUE(has(error_of([&] { reshape(X, {4, -1}); }), "cannot infer the -1 in [4, -1]"));
  // Known dimensions whose product overflows int64 (a fuzz finding: signed overflow before the
  // -1 was inferred, then a product that wrapped): the count saturates and the checks fail.
  EXPECT_TRUE(has(error_of([&] {
                    reshape(X, {8246498862299086851, 116, -1});
                  }),
                  "cannot infer the -1 in [8246498862299086851, 116, -1]"));
  EXPECT_TRUE(has(error_of([&] {
                    reshape(X, {4294967296, 4294967296, 6});
                  }),
                  "cannot reshape [2, 3] (6 elements) to [4294967296, 4294967296, 6]"));
  EXPECT_TRUE(has(error_of([&] { transpose(X, {0, 0}); }), "transpose: axis 0 repeats"));
  EXPECT_EQ(error_of([&] {
              concat({X, Y}, 0);
            }),
            "concat: input 1 has shape [2, 4], incompatible with [2, 3] along axis 0");
  EXPECT_EQ(error_of([&] { split(X, 2, 1); }),
            "split: axis 1 of size 3 cannot be split into 2 equal sections (shape [2, 3])");
  EXPECT_TRUE(has(error_of([&] { pad(X, {-1}, {}); }), "pad: negative padding"));
  EXPECT_TRUE(has(error_of([&] { strided_slice(X, {0}, {2}, {0}); }),
                  "strided_slice: stride of axis 0 is 0"));
  EXPECT_TRUE(has(error_of([&] { strided_slice(X, {2}, {1}); }), "is empty"));
  EXPECT_TRUE(has(error_of([&] { take(X, X); }), "take: indices must be integers, got float32"));
  EXPECT_EQ(error_of([&] { squeeze(X, {1}); }),
            "squeeze: cannot squeeze axis 1 of size 3 (shape [2, 3])");
  EXPECT_EQ(error_of([&] { expand_dims(X, 4); }),
            "expand_dims: axis 4 is out of range for a tensor of rank 2 (shape [2, 3])");
  EXPECT_TRUE(has(error_of([&] { flatten(X, 3); }), "flatten: axis 3 is out of range [-2, 2]"));
  EXPECT_EQ(error_of([&] { layout_transform(N, "NCHW", "NCHW4c"); }),
            "layout_transform: 6 channels are not divisible by the block size 4 of NCHW4c "
            "(input [2, 6, 3, 3])");
  EXPECT_TRUE(
      has(error_of([&] { layout_transform(N, "NHWC", "NCHW"); }), "unsupported layout 'NHWC'"));
}

}  // namespace
}  // namespace kiln::topi::testing
