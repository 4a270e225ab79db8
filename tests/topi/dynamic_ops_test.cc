// NonZero, Unique, NonMaxSuppression and TopK (topi/dynamic.h) built and run on seeded random
// inputs with poisoned outputs, against naive C++ references written independently of the runtime
// kernels: NonZero by walking multi-indices, Unique with a std::map keyed by the slice's values,
// NMS with explicit corner boxes and max(0, ·) overlaps. Inputs are chosen to exercise the data
// dependence: zeros for NonZero, many duplicate values and slices for Unique, clustered
// (overlapping) boxes with tied scores for NMS. Only the first `extent` rows of a bounded
// output are defined; the test checks them and the extent.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

#include "common/error.h"
#include "kiln/topi/dynamic.h"
#include "topi_test_util.h"

namespace kiln::topi::testing {
namespace {

using ::kiln::testing::error_of;

std::vector<ir::Expr> exprs(const Shape& s) {
  std::vector<ir::Expr> r;
  for (int64_t v : s) r.push_back(ir::Expr(static_cast<int32_t>(v)));
  return r;
}

int64_t count(const Shape& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

int64_t extent_of(const NDArray& e) { return e.data_as<int64_t>()[0]; }

/// Element (flat index k) of `a`'s dense prefix viewed with shape `actual`.
double dense_at(const NDArray& a, const Shape& actual, const Shape& idx) {
  return element(a, flat(actual, idx));
}

NDArray with_zeros(Shape s, DataType t, uint32_t seed) {
  NDArray a = random_array(s, t, seed, t.is_uint() ? 1 : -3, 3);
  std::mt19937 rng(seed + 100);
  for (int64_t i = 0; i < a.numel(); ++i)
    if (rng() % 3 == 0) set_element(a, i, 0.0);
  return a;
}

TEST(DynamicOps, NonZeroMatchesReference) {
  struct Case {
    Shape shape;
    DataType t;
  };
  std::vector<Case> cases = {{{3, 4}, f32},
                             {{17}, i64},
                             {{2, 3, 5}, i32},
                             {{2, 2, 2, 3}, boolean},
                             {{4, 5}, DataType::Float(64)},
                             {{6, 7}, DataType::Int(8)},
                             {{5, 3}, DataType::UInt(8)}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(runtime::shape_str(c.shape) + " " + c.t.str());
    te::Tensor x = te::placeholder(exprs(c.shape), c.t, "x");
    std::vector<te::Tensor> outs = nonzero(x);
    const int64_t rank = static_cast<int64_t>(c.shape.size()), numel = count(c.shape);
    ASSERT_EQ(shape_of(outs[0]), (Shape{rank, numel}));
    NDArray a = with_zeros(c.shape, c.t, seed++);
    std::vector<Shape> want;
    for (int64_t i = 0; i < numel; ++i)
      if (element(a, i) != 0) want.push_back(unflat(c.shape, i));
    ASSERT_GT(want.size(), 0u);
    ASSERT_LT(want.size(), static_cast<size_t>(numel));
    std::vector<NDArray> got = run(te::create_schedule(outs), {x}, outs, {a});
    const int64_t n = static_cast<int64_t>(want.size());
    ASSERT_EQ(extent_of(got[1]), n);
    for (int64_t r = 0; r < rank; ++r)
      for (int64_t k = 0; k < n; ++k)
        ASSERT_EQ(dense_at(got[0], {rank, n}, {r, k}), want[k][r]) << "row " << r << " col " << k;
  }
}

/// Reference Unique over the slices along `axis` (nullopt: flattened).
struct UniqueRef {
  std::vector<std::vector<double>> y;  // unique slices, in output order
  std::vector<int64_t> indices, inverse, counts;
};

UniqueRef unique_ref(const NDArray& a, std::optional<int> axis, bool sorted) {
  Shape s = a.shape();
  int64_t n = axis ? s[*axis] : a.numel();
  auto slice = [&](int64_t i) {
    std::vector<double> v;
    if (!axis) return std::vector<double>{element(a, i)};
    for (int64_t f = 0; f < a.numel(); ++f) {
      Shape idx = unflat(s, f);
      if (idx[*axis] == i) v.push_back(element(a, f));
    }
    return v;
  };
  std::map<std::vector<double>, int64_t> first;  // slice -> first occurrence
  std::vector<std::vector<double>> slices;
  for (int64_t i = 0; i < n; ++i) {
    slices.push_back(slice(i));
    first.emplace(slices.back(), i);
  }
  std::vector<std::vector<double>> order;
  if (sorted) {
    for (const auto& [k, v] : first) order.push_back(k);
  } else {
    for (int64_t i = 0; i < n; ++i)
      if (first.at(slices[i]) == i) order.push_back(slices[i]);
  }
  UniqueRef r;
  r.y = order;
  for (const auto& u : order) {
    r.indices.push_back(first.at(u));
    r.counts.push_back(std::count(slices.begin(), slices.end(), u));
  }
  for (int64_t i = 0; i < n; ++i)
    r.inverse.push_back(std::find(order.begin(), order.end(), slices[i]) - order.begin());
  return r;
}

TEST(DynamicOps, UniqueMatchesReference) {
  struct Case {
    Shape shape;
    DataType t;
    std::optional<int> axis;
    bool sorted;
  };
  std::vector<Case> cases = {{{23}, f32, std::nullopt, true},
                             {{23}, f32, std::nullopt, false},
                             {{4, 6}, i64, std::nullopt, true},
                             {{4, 6}, i32, std::nullopt, false},
                             {{7, 3}, f32, 0, true},
                             {{7, 3}, i64, 0, false},
                             {{2, 9, 3}, i32, 1, true},
                             {{2, 9, 3}, f32, 1, false},
                             {{3, 2, 8}, DataType::Int(8), 2, true},
                             {{10}, boolean, std::nullopt, true},
                             {{5, 4}, DataType::Float(64), 1, true}};
  uint32_t seed = 7;
  for (const Case& c : cases) {
    SCOPED_TRACE(runtime::shape_str(c.shape) + " " + c.t.str() + " axis " +
                 (c.axis ? std::to_string(*c.axis) : "none") + (c.sorted ? " sorted" : ""));
    // Few distinct values, and (with an axis) slices copied over others: many duplicates.
    NDArray a = random_array(c.shape, c.t, seed++, -2, 2);
    if (c.t.is_float())
      for (int64_t i = 0; i < a.numel(); ++i) set_element(a, i, std::round(element(a, i) * 2) / 2);
    if (c.axis) {
      std::mt19937 rng(seed);
      for (int64_t f = 0; f < a.numel(); ++f) {
        Shape idx = unflat(c.shape, f);
        if (idx[*c.axis] % 3 == 2) {  // slice 3k+2 repeats slice (3k+2)/2
          Shape src = idx;
          src[*c.axis] = idx[*c.axis] / 2;
          set_element(a, f, at(a, src));
        }
      }
    }
    te::Tensor x = te::placeholder(exprs(c.shape), c.t, "x");
    std::vector<te::Tensor> outs = unique(
        x,
        c.axis ? std::optional<int64_t>(*c.axis - static_cast<int>(c.shape.size())) : std::nullopt,
        c.sorted);  // a negative axis
    std::vector<NDArray> got = run(te::create_schedule(outs), {x}, outs, {a});
    UniqueRef want = unique_ref(a, c.axis, c.sorted);
    const int64_t u = static_cast<int64_t>(want.y.size());
    const int64_t n = c.axis ? c.shape[*c.axis] : a.numel();
    ASSERT_LT(u, n) << "the input should have duplicates";
    ASSERT_EQ(extent_of(got[4]), u);
    Shape yshape = c.axis ? c.shape : Shape{u};
    if (c.axis) yshape[*c.axis] = u;
    for (int64_t f = 0; f < count(yshape); ++f) {
      Shape idx = unflat(yshape, f);
      int64_t j = c.axis ? idx[*c.axis] : idx[0];
      // The reference slice lists its elements in row-major order of the other axes.
      int64_t within = 0;
      if (c.axis) {
        Shape rest = yshape, ri = idx;
        rest.erase(rest.begin() + *c.axis);
        ri.erase(ri.begin() + *c.axis);
        within = flat(rest, ri);
      }
      ASSERT_EQ(element(got[0], f), want.y[j][within]) << "y at " << runtime::shape_str(idx);
    }
    for (int64_t j = 0; j < u; ++j) {
      EXPECT_EQ(got[1].data_as<int64_t>()[j], want.indices[j]) << "indices " << j;
      EXPECT_EQ(got[3].data_as<int64_t>()[j], want.counts[j]) << "counts " << j;
    }
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(got[2].data_as<int64_t>()[i], want.inverse[i]) << "inverse " << i;
  }
}

/// Reference NMS: selected (batch, class, box) triples.
std::vector<std::array<int64_t, 3>> nms_ref(const NDArray& boxes, const NDArray& scores,
                                            int64_t max_out, float iou_thr,
                                            std::optional<float> score_thr, bool center) {
  Shape bs = boxes.shape(), ss = scores.shape();
  std::vector<std::array<int64_t, 3>> r;
  auto corners = [&](int64_t b, int64_t i) {
    const float* p = boxes.data_as<float>() + (b * bs[1] + i) * 4;
    std::array<float, 4> c;  // x0, y0, x1, y1
    if (center) {
      c = {p[0] - p[2] / 2, p[1] - p[3] / 2, p[0] + p[2] / 2, p[1] + p[3] / 2};
    } else {
      c = {std::min(p[1], p[3]), std::min(p[0], p[2]), std::max(p[1], p[3]), std::max(p[0], p[2])};
    }
    return c;
  };
  for (int64_t b = 0; b < bs[0]; ++b) {
    for (int64_t c = 0; c < ss[1]; ++c) {
      const float* sc = scores.data_as<float>() + (b * ss[1] + c) * ss[2];
      std::vector<std::pair<float, int64_t>> cand;
      for (int64_t i = 0; i < ss[2]; ++i)
        if (!score_thr || sc[i] > *score_thr) cand.push_back({-sc[i], i});
      std::sort(cand.begin(), cand.end());  // score descending, then index ascending
      std::vector<int64_t> kept;
      for (auto [neg, i] : cand) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool ok = true;
        for (int64_t j : kept) {
          auto p = corners(b, i), q = corners(b, j);
          float w = std::max(0.f, std::min(p[2], q[2]) - std::max(p[0], q[0]));
          float h = std::max(0.f, std::min(p[3], q[3]) - std::max(p[1], q[1]));
          float inter = w * h;
          float uni = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter;
          if (inter > 0 && inter / uni > iou_thr) ok = false;
        }
        if (!ok) continue;
        kept.push_back(i);
        r.push_back({b, c, i});
      }
    }
  }
  return r;
}

TEST(DynamicOps, NonMaxSuppressionMatchesReference) {
  struct Case {
    int64_t batches, classes, boxes;
    bool center;
    int64_t max_out;
    float iou;
    std::optional<float> score;
  };
  std::vector<Case> cases = {{1, 1, 12, false, 3, 0.5f, std::nullopt},
                             {2, 3, 10, false, 100, 0.3f, 0.25f},
                             {1, 2, 16, true, 5, 0.4f, 0.1f},
                             {3, 1, 9, true, 2, 0.0f, std::nullopt},
                             {1, 1, 8, false, 0, 0.5f, 0.0f}};
  uint32_t seed = 21;
  for (const Case& c : cases) {
    SCOPED_TRACE("case with " + std::to_string(c.boxes) + " boxes, max " +
                 std::to_string(c.max_out));
    std::mt19937 rng(seed++);
    std::uniform_real_distribution<float> pos(0.f, 2.f), size(0.5f, 1.5f);
    NDArray boxes = NDArray::empty({c.batches, c.boxes, 4}, f32);
    for (int64_t i = 0; i < c.batches * c.boxes; ++i) {
      float* p = boxes.data_as<float>() + i * 4;
      float x = pos(rng), y = pos(rng), w = size(rng), h = size(rng);
      if (c.center) {
        p[0] = x, p[1] = y, p[2] = w, p[3] = h;
      } else if (rng() & 1) {  // corners, sometimes flipped
        p[0] = y, p[1] = x, p[2] = y + h, p[3] = x + w;
      } else {
        p[0] = y + h, p[1] = x + w, p[2] = y, p[3] = x;
      }
    }
    NDArray scores = NDArray::empty({c.batches, c.classes, c.boxes}, f32);
    for (int64_t i = 0; i < scores.numel(); ++i)  // multiples of 0.1: ties
      scores.data_as<float>()[i] = static_cast<float>(rng() % 10) / 10.f;
    NDArray mo = NDArray::empty({1}, i64), iou = NDArray::empty({1}, f32),
            st = NDArray::empty({1}, f32);
    mo.data_as<int64_t>()[0] = c.max_out;
    iou.data_as<float>()[0] = c.iou;
    st.data_as<float>()[0] = c.score.value_or(0.f);
    te::Tensor tb = te::placeholder(exprs(boxes.shape()), f32, "boxes");
    te::Tensor ts = te::placeholder(exprs(scores.shape()), f32, "scores");
    te::Tensor tm = te::placeholder({1}, i64, "max_out"), ti = te::placeholder({1}, f32, "iou");
    te::Tensor tt = te::placeholder({1}, f32, "score");
    std::vector<te::Tensor> ins{tb, ts, tm, ti};
    std::vector<NDArray> data{boxes, scores, mo, iou};
    if (c.score) {
      ins.push_back(tt);
      data.push_back(st);
    }
    std::vector<te::Tensor> outs =
        non_max_suppression(tb, ts, tm, ti, c.score ? tt : te::Tensor(), c.center ? 1 : 0);
    ASSERT_EQ(shape_of(outs[0]), (Shape{c.batches * c.classes * c.boxes, 3}));
    std::vector<NDArray> got = run(te::create_schedule(outs), ins, outs, data);
    auto want = nms_ref(boxes, scores, c.max_out, c.iou, c.score, c.center);
    ASSERT_EQ(extent_of(got[1]), static_cast<int64_t>(want.size()));
    for (size_t k = 0; k < want.size(); ++k)
      for (int j = 0; j < 3; ++j)
        ASSERT_EQ(got[0].data_as<int64_t>()[k * 3 + j], want[k][j]) << "row " << k << " col " << j;
  }
}

TEST(DynamicOps, NmsWithoutMaxOutputSelectsNothing) {
  te::Tensor tb = te::placeholder({1, 3, 4}, f32, "boxes");
  te::Tensor ts = te::placeholder({1, 1, 3}, f32, "scores");
  std::vector<te::Tensor> outs = non_max_suppression(tb, ts, {}, {}, {}, 0);
  NDArray boxes = random_array({1, 3, 4}, f32, 3), scores = random_array({1, 1, 3}, f32, 4);
  std::vector<NDArray> got = run(te::create_schedule(outs), {tb, ts}, outs, {boxes, scores});
  EXPECT_EQ(extent_of(got[1]), 0);
}

/// The reference order of TopK: by (is NaN, value), descending for the largest (NaN first) or
/// ascending for the smallest (NaN last); a stable sort keeps equal values in index order.
std::vector<int64_t> topk_reference(const std::vector<double>& col, int64_t k, bool largest) {
  std::vector<int64_t> idx(col.size());
  std::iota(idx.begin(), idx.end(), int64_t{0});
  auto key = [&](int64_t i) { return std::make_pair(std::isnan(col[i]) ? 1 : 0, col[i]); };
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    auto ka = key(a), kb = key(b);
    if (ka.first != kb.first) return largest ? ka.first > kb.first : ka.first < kb.first;
    if (ka.first == 1) return false;  // two NaNs: index order
    return largest ? ka.second > kb.second : ka.second < kb.second;
  });
  idx.resize(static_cast<size_t>(k));
  return idx;
}

TEST(DynamicOps, TopKMatchesReference) {
  // Values on a coarse grid (many ties, which go by lower index), NaNs in the float cases, the
  // axis in the middle (strided columns), k from 0 to the whole axis (a sort), a few of many (the
  // heap) and many of many (a selection, then a sort).
  struct Case {
    Shape shape;
    int64_t axis, k;
    bool largest;
    DataType t;
  };
  std::vector<Case> cases = {
      {{5, 40}, -1, 7, true, f32},    {{3, 50, 4}, 1, 50, false, f32},
      {{6, 300}, 1, 10, true, i32},   {{4, 9}, 0, 2, false, DataType::Float(64)},
      {{2, 33, 3}, 1, 20, true, i64}, {{3, 8}, 1, 0, true, f32}};
  uint32_t seed = 60;
  for (const Case& c : cases) {
    SCOPED_TRACE(runtime::shape_str(c.shape) + " axis " + std::to_string(c.axis) + " k " +
                 std::to_string(c.k) + (c.largest ? " largest " : " smallest ") + c.t.str());
    te::Tensor x = te::placeholder(exprs(c.shape), c.t, "x");
    std::vector<te::Tensor> outs = topk(x, c.k, c.axis, c.largest);
    NDArray a = random_array(c.shape, c.t, seed, -5, 5);
    std::mt19937 rng(seed++);
    for (int64_t i = 0; i < a.numel(); ++i) {
      double v = std::round(element(a, i) * 2) / 2;  // ties
      if (c.t.is_float() && rng() % 11 == 0) v = std::nan("");
      set_element(a, i, v);
    }
    const int64_t r = static_cast<int64_t>(c.shape.size());
    const size_t ax = static_cast<size_t>(c.axis < 0 ? c.axis + r : c.axis);
    Shape os = c.shape;
    os[ax] = c.k;
    ASSERT_EQ(shape_of(outs[0]), os);
    ASSERT_EQ(shape_of(outs[1]), os);
    std::vector<NDArray> got = run(te::create_schedule(outs), {x}, outs, {a});
    // Every column: the positions of the reference order, and the values at them.
    Shape col_shape = c.shape;
    col_shape[ax] = 1;
    for (int64_t cidx = 0; cidx < count(col_shape); ++cidx) {
      Shape at = unflat(col_shape, cidx);
      std::vector<double> col;
      for (int64_t j = 0; j < c.shape[ax]; ++j) {
        Shape p = at;
        p[ax] = j;
        col.push_back(element(a, flat(c.shape, p)));
      }
      std::vector<int64_t> want = topk_reference(col, c.k, c.largest);
      for (int64_t j = 0; j < c.k; ++j) {
        Shape p = at;
        p[ax] = j;
        const int64_t f = flat(os, p);
        ASSERT_EQ(element(got[1], f), want[j]) << "column " << cidx << " rank " << j;
        const double v = element(got[0], f), w = col[want[j]];
        if (std::isnan(w)) {
          EXPECT_TRUE(std::isnan(v)) << "column " << cidx << " rank " << j;
        } else {
          EXPECT_EQ(v, w) << "column " << cidx << " rank " << j;
        }
      }
    }
  }
}

TEST(DynamicOps, TopKByRankMatchesReference) {
  // The GPU form (rank counting in te computes), run here on the CPU: ties by lower index, the
  // axis first or last; no NaNs (they compare as nothing does there).
  uint32_t seed = 80;
  for (auto [shape, axis, k, largest] : std::vector<std::tuple<Shape, int64_t, int64_t, bool>>{
           {{5, 40}, 1, 7, true}, {{12, 3}, 0, 12, false}}) {
    SCOPED_TRACE(runtime::shape_str(shape));
    te::Tensor x = te::placeholder(exprs(shape), f32, "x");
    std::vector<te::Tensor> outs = topk_by_rank(x, k, axis, largest);
    NDArray a = random_array(shape, f32, seed++, -5, 5);
    for (int64_t i = 0; i < a.numel(); ++i) set_element(a, i, std::round(element(a, i) * 2) / 2);
    std::vector<NDArray> got = run(te::create_schedule(outs), {x}, outs, {a});
    const size_t ax = static_cast<size_t>(axis);
    Shape os = shape, col_shape = shape;
    os[ax] = k;
    col_shape[ax] = 1;
    for (int64_t c = 0; c < count(col_shape); ++c) {
      Shape at = unflat(col_shape, c);
      std::vector<double> col;
      for (int64_t j = 0; j < shape[ax]; ++j) {
        Shape p = at;
        p[ax] = j;
        col.push_back(element(a, flat(shape, p)));
      }
      std::vector<int64_t> want = topk_reference(col, k, largest);
      for (int64_t j = 0; j < k; ++j) {
        Shape p = at;
        p[ax] = j;
        ASSERT_EQ(element(got[1], flat(os, p)), want[j]) << "column " << c << " rank " << j;
        ASSERT_EQ(element(got[0], flat(os, p)), col[want[j]]) << "column " << c << " rank " << j;
      }
    }
  }
}

TEST(DynamicOps, ErrorsNameTheProblem) {
  te::Tensor h = te::placeholder({4}, DataType::Float(16), "h");
  EXPECT_NE(error_of([&] { nonzero(h); }).find("nonzero: element type float16 is not supported"),
            std::string::npos);
  te::Tensor s = te::placeholder(std::vector<ir::Expr>{}, f32, "s");
  EXPECT_NE(error_of([&] { nonzero(s); }).find("nonzero: the input must have rank 1 to 6"),
            std::string::npos);
  te::Tensor x = te::placeholder({2, 3}, f32, "x");
  EXPECT_NE(error_of([&] { unique(x, 2, true); }).find("unique: axis 2 is out of range"),
            std::string::npos);
  te::Tensor b = te::placeholder({1, 3, 5}, f32, "b"), sc = te::placeholder({1, 1, 3}, f32, "sc");
  EXPECT_NE(error_of([&] {
              non_max_suppression(b, sc, {}, {}, {}, 0);
            }).find("boxes must be [batches, boxes, 4]"),
            std::string::npos);
  te::Tensor b4 = te::placeholder({1, 3, 4}, f32, "b4");
  te::Tensor mo = te::placeholder({1}, i32, "mo");
  EXPECT_NE(error_of([&] {
              non_max_suppression(b4, sc, mo, {}, {}, 0);
            }).find("max_output_boxes_per_class must be one int64 element"),
            std::string::npos);
  EXPECT_NE(error_of([&] { topk(x, 4, 1, true); }).find("topk: k 4 is outside [0, 3]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { topk(h, 1, 0, true); }).find("topk: element type float16 is not"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::topi::testing
