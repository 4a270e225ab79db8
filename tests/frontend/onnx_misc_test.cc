// ONNX corner cases of convert_misc.cc, end to end: a one-node model built in memory (seeded
// random inputs) is imported, compiled and run, and its outputs compared with a naive C++
// reference of the ONNX definition. Covers TfIdfVectorizer (uni-, bi- and trigrams with skips,
// a permuted output order with a gap, TF / IDF / TFIDF with weights) on 1-D and 2-D input,
// QLinearMatMul with saturating results (2-D and batched), QLinearConv with per-channel weight
// scales and bias, BatchNormalization in training mode (batch statistics and running
// mean / variance), Einsum taking a diagonal and Einsum of two operands as a matmul, MatMul
// broadcasting batch dimensions, Mod of float16, Cast to and from bfloat16 (ties, NaN, overflow to
// infinity, against a distance-based rounding), results without elements (Slice past the end, Split
// into empty parts, Reshape with allowzero), and the errors for attribute values that are not
// supported.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "common/error.h"
#include "kiln/frontend/onnx.h"
#include "kiln/graph/build_module.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/support/half.h"
#include "onnx_test_util.h"

namespace kiln::frontend {
namespace {

using ::kiln::testing::error_of;
using Ints = std::vector<int64_t>;
using Vec = std::vector<float>;

int64_t numel(const Ints& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

template <typename T>
runtime::NDArray array(const Ints& shape, const std::vector<T>& v, DataType t) {
  runtime::NDArray a = runtime::NDArray::empty(shape, t);
  EXPECT_EQ(int64_t(v.size()), numel(shape));
  std::copy(v.begin(), v.end(), a.data_as<T>());
  return a;
}

Vec random_vec(int64_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  Vec v(static_cast<size_t>(n));
  for (float& x : v) x = d(gen);
  return v;
}

template <typename T>
std::vector<T> random_ints(int64_t n, uint32_t seed, int lo, int hi) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<T> v(static_cast<size_t>(n));
  for (T& x : v) x = static_cast<T>(d(gen));
  return v;
}

OnnxValueInfo info(const std::string& name, const Ints& shape, DataType t = DataType::Float(32)) {
  OnnxValueInfo v{name, t, true, {}};
  for (int64_t d : shape) v.shape.push_back(OnnxDim{d, ""});
  return v;
}

OnnxModel one_node(const std::string& path, int64_t opset, OnnxNode n) {
  OnnxModel m;
  m.path = path;
  m.opsets[""] = opset;
  m.nodes = {std::move(n)};
  return m;
}

using test_util::run;

void expect_close(const runtime::NDArray& got, const Vec& want, const Ints& shape,
                  float tol = 1e-5f) {
  test_util::expect_close_to(got, want, shape, tol, tol);
}

// --- TfIdfVectorizer

struct TfIdfCase {
  Ints pool, counts, indexes;
  std::vector<double> weights;
  int64_t min_n, max_n, skip;
  std::string mode;
};

/// Naive reference: for each row, each n-gram of the pool, count the matches at every start and
/// skip (unigrams once per position).
Vec tfidf_ref(const std::vector<int32_t>& x, int64_t rows, int64_t len, const TfIdfCase& k) {
  int64_t out_size = *std::max_element(k.indexes.begin(), k.indexes.end()) + 1;
  Vec y(size_t(rows * out_size), 0.0f);
  int64_t ngram = 0;
  for (size_t g = 0; g < k.counts.size(); ++g) {
    int64_t n = int64_t(g) + 1;
    int64_t b = k.counts[g], e = g + 1 < k.counts.size() ? k.counts[g + 1] : int64_t(k.pool.size());
    for (int64_t p = b; p < e; p += n, ++ngram) {
      if (n < k.min_n || n > k.max_n) continue;
      for (int64_t row = 0; row < rows; ++row) {
        int64_t cnt = 0;
        for (int64_t s = 0; s <= (n == 1 ? 0 : k.skip); ++s)
          for (int64_t i = 0; i + (n - 1) * (s + 1) < len; ++i) {
            bool ok = true;
            for (int64_t j = 0; j < n; ++j)
              ok = ok && x[row * len + i + j * (s + 1)] == k.pool[p + j];
            cnt += ok;
          }
        double w = k.weights.empty() ? 1.0 : k.weights[ngram];
        double v = k.mode == "TF" ? cnt : k.mode == "IDF" ? (cnt > 0 ? w : 0) : cnt * w;
        y[row * out_size + k.indexes[ngram]] = float(v);
      }
    }
  }
  return y;
}

OnnxNode tfidf_node(const TfIdfCase& k) {
  OnnxNode n{"TfIdfVectorizer", "", "tfidf", {"x"}, {"y"}, {}, false};
  n.attrs["pool_int64s"] = k.pool;
  n.attrs["ngram_counts"] = k.counts;
  n.attrs["ngram_indexes"] = k.indexes;
  if (!k.weights.empty()) n.attrs["weights"] = k.weights;
  n.attrs["min_gram_length"] = k.min_n;
  n.attrs["max_gram_length"] = k.max_n;
  n.attrs["max_skip_count"] = k.skip;
  n.attrs["mode"] = k.mode;
  return n;
}

TEST(OnnxMisc, AFloat16ModelWithFloat16ClipBoundsRunsInFloat32) {
  // A model converted to float16 (onnxconverter-common's float16 converter): its Clip bounds
  // are float16 constants (were refused: "unsupported type float16"); x · w, clipped to
  // [-0.5, 1.25], all in float16 at the interface.
  const DataType f16 = DataType::Float(16);
  auto half = [&](const Ints& shape, const Vec& v) {
    runtime::NDArray a = runtime::NDArray::empty(shape, f16);
    for (size_t i = 0; i < v.size(); ++i) a.data_as<uint16_t>()[i] = support::float_to_half(v[i]);
    return a;
  };
  const Vec x = random_vec(24, 71, -2, 2), w = random_vec(24, 72, -2, 2);
  OnnxModel m;
  m.path = "clip_fp16.onnx";
  m.opsets[""] = 13;
  m.inputs = {info("x", {2, 12}, f16)};
  m.outputs = {info("y", {2, 12}, f16)};
  m.initializers["w"] = half({2, 12}, w);
  m.initializers["lo"] = half({}, {-0.5f});
  m.initializers["hi"] = half({}, {1.25f});
  m.nodes = {OnnxNode{"Mul", "", "mul", {"x", "w"}, {"p"}, {}, false},
             OnnxNode{"Clip", "", "clip", {"p", "lo", "hi"}, {"y"}, {}, false}};
  const runtime::NDArray xh = half({2, 12}, x);
  std::vector<runtime::NDArray> out = run(m, {{"x", xh}});
  ASSERT_EQ(out[0].dtype(), f16);
  for (int64_t i = 0; i < 24; ++i) {
    const float xi = support::half_to_float(xh.data_as<uint16_t>()[i]);
    const float wi = support::half_to_float(m.initializers["w"].data_as<uint16_t>()[i]);
    const float want = std::min(1.25f, std::max(-0.5f, xi * wi));
    EXPECT_EQ(out[0].data_as<uint16_t>()[i], support::float_to_half(want)) << i;
  }
}

TEST(OnnxMisc, TfIdfVectorizerMatchesCountingReference) {
  // 4 unigrams, 3 bigrams, 2 trigrams; output positions permuted, position 9 never written.
  TfIdfCase k{{1, 2, 3, 5, 1, 2, 2, 1, 3, 3, 1, 2, 3, 2, 2, 2},
              {0, 4, 10},
              {3, 0, 10, 2, 5, 1, 7, 8, 4},
              {0.5, 1.5, 2.0, 0.25, 3.0, 1.0, 0.75, 2.5, 1.25},
              1,
              3,
              2,
              "TF"};
  const int64_t rows = 3, len = 17;
  std::vector<int32_t> x = random_ints<int32_t>(rows * len, 11, 1, 3);
  for (const char* mode : {"TF", "IDF", "TFIDF"})
    for (int64_t min_n : {1, 2})
      for (int64_t skip : {0, 2}) {
        SCOPED_TRACE(::testing::Message() << mode << " min_n " << min_n << " skip " << skip);
        k.mode = mode, k.min_n = min_n, k.skip = skip;
        OnnxModel m = one_node("tfidf.onnx", 9, tfidf_node(k));
        m.inputs = {info("x", {rows, len}, DataType::Int(32))};
        m.outputs = {info("y", {rows, 11})};
        std::vector<runtime::NDArray> out =
            run(m, {{"x", array({rows, len}, x, DataType::Int(32))}});
        Vec want = tfidf_ref(x, rows, len, k);
        // The reference must see some matches, or the test could not fail.
        ASSERT_GT(std::count_if(want.begin(), want.end(), [](float v) { return v > 0; }), 5);
        expect_close(out[0], want, {rows, 11});
      }
}

TEST(OnnxMisc, TfIdfVectorizerOneDimensionalInt64) {
  TfIdfCase k{{4, 7, 4, 7, 7, 4}, {0, 2}, {0, 1, 2, 3}, {}, 2, 2, 3, "TF"};
  std::vector<int64_t> x = random_ints<int64_t>(23, 12, 3, 8);
  OnnxModel m = one_node("tfidf1.onnx", 9, tfidf_node(k));
  m.inputs = {info("x", {23}, DataType::Int(64))};
  m.outputs = {info("y", {4})};
  std::vector<runtime::NDArray> out = run(m, {{"x", array({23}, x, DataType::Int(64))}});
  std::vector<int32_t> x32(x.begin(), x.end());
  Vec want = tfidf_ref(x32, 1, 23, k);
  EXPECT_EQ(want[0], 0.0f);  // unigrams are below min_gram_length
  expect_close(out[0], want, {4});
}

TEST(OnnxMisc, TfIdfVectorizerRejectsBadAttributes) {
  TfIdfCase k{{1, 2}, {0}, {0, 1}, {}, 1, 1, 0, "BM25"};
  OnnxModel m = one_node("tfidf_bad.onnx", 9, tfidf_node(k));
  m.inputs = {info("x", {5}, DataType::Int(32))};
  m.outputs = {info("y", {2})};
  std::string e = error_of([&] { import_onnx(m); });
  EXPECT_NE(e.find("node 'tfidf' (TfIdfVectorizer): mode must be TF, IDF or TFIDF, not 'BM25'"),
            std::string::npos)
      << e;
  k.mode = "TF";
  k.counts = {0, 1};  // a pool of 2 cannot hold whole bigrams from offset 1
  m.nodes = {tfidf_node(k)};
  e = error_of([&] { import_onnx(m); });
  EXPECT_NE(e.find("do not split a pool of 2 into whole 2-grams"), std::string::npos) << e;
  m.nodes[0].attrs["pool_strings"] = std::vector<std::string>{"a"};
  e = error_of([&] { import_onnx(m); });
  EXPECT_NE(e.find("TfIdfVectorizer with pool_strings is not supported"), std::string::npos) << e;
}

// --- QLinearMatMul, QLinearConv

uint8_t requantize_ref(int32_t acc, float a_scale, float b_scale, float y_scale, int y_zp) {
  float m = a_scale * b_scale / y_scale;
  float v = std::nearbyint(float(acc) * m) + float(y_zp);
  return uint8_t(std::clamp(v, 0.0f, 255.0f));
}

TEST(OnnxMisc, QLinearMatMulSaturatesAndRoundsLikeTheReference) {
  const int64_t B = 2, M = 5, K = 7, N = 6;
  for (bool batched : {false, true}) {
    SCOPED_TRACE(batched ? "3-D" : "2-D");
    Ints sa = batched ? Ints{B, M, K} : Ints{M, K}, sb = batched ? Ints{B, K, N} : Ints{K, N};
    int64_t nb = batched ? B : 1;
    std::vector<uint8_t> a = random_ints<uint8_t>(numel(sa), 21, 0, 255);
    std::vector<uint8_t> b = random_ints<uint8_t>(numel(sb), 22, 0, 255);
    const float as = 0.0125f, bs = 0.0075f, ys = 0.02f;
    const uint8_t azp = 121, bzp = 130, yzp = 117;
    OnnxModel m = one_node("qmm.onnx", 10,
                           OnnxNode{"QLinearMatMul",
                                    "",
                                    "qmm",
                                    {"a", "as", "azp", "b", "bs", "bzp", "ys", "yzp"},
                                    {"y"},
                                    {},
                                    false});
    auto scalar_f = [](float v) { return array<float>({}, {v}, DataType::Float(32)); };
    auto scalar_u8 = [](uint8_t v) { return array<uint8_t>({}, {v}, DataType::UInt(8)); };
    m.initializers = {{"as", scalar_f(as)},    {"azp", scalar_u8(azp)}, {"bs", scalar_f(bs)},
                      {"bzp", scalar_u8(bzp)}, {"ys", scalar_f(ys)},    {"yzp", scalar_u8(yzp)}};
    m.inputs = {info("a", sa, DataType::UInt(8)), info("b", sb, DataType::UInt(8))};
    Ints so = batched ? Ints{B, M, N} : Ints{M, N};
    m.outputs = {info("y", so, DataType::UInt(8))};
    std::vector<runtime::NDArray> out =
        run(m, {{"a", array(sa, a, DataType::UInt(8))}, {"b", array(sb, b, DataType::UInt(8))}});
    ASSERT_EQ(out[0].shape(), so);
    ASSERT_EQ(out[0].dtype(), DataType::UInt(8));
    int saturated = 0;
    for (int64_t q = 0; q < nb; ++q)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          int32_t acc = 0;
          for (int64_t p = 0; p < K; ++p)
            acc +=
                (int32_t(a[(q * M + i) * K + p]) - azp) * (int32_t(b[(q * K + p) * N + j]) - bzp);
          uint8_t want = requantize_ref(acc, as, bs, ys, yzp);
          saturated += want == 0 || want == 255;
          EXPECT_EQ(int(out[0].data_as<uint8_t>()[(q * M + i) * N + j]), int(want))
              << "at " << q << "," << i << "," << j << " (acc " << acc << ")";
        }
    EXPECT_GT(saturated, 0);  // the scales make some results saturate
  }
}

TEST(OnnxMisc, QLinearConvPerChannelScalesAndBias) {
  Ints xs{1, 3, 6, 5}, ws{4, 3, 3, 3};
  std::vector<uint8_t> x = random_ints<uint8_t>(numel(xs), 31, 0, 255);
  std::vector<int8_t> w = random_ints<int8_t>(numel(ws), 32, -128, 127);
  std::vector<int32_t> bias = random_ints<int32_t>(4, 33, -3000, 3000);
  Vec wscale{0.002f, 0.004f, 0.001f, 0.003f};
  std::vector<int8_t> wzp{0, 0, 0, 0};
  const float xscale = 0.01f, yscale = 0.05f;
  const uint8_t xzp = 128, yzp = 100;
  OnnxNode n{"QLinearConv", "", "qconv", {"x", "xs", "xzp", "w", "ws", "wzp", "ys", "yzp", "bias"},
             {"y"},         {}, false};
  n.attrs["pads"] = Ints{1, 1, 1, 1};
  n.attrs["strides"] = Ints{2, 1};
  OnnxModel m = one_node("qconv.onnx", 10, n);
  m.initializers = {{"xs", array<float>({}, {xscale}, DataType::Float(32))},
                    {"xzp", array<uint8_t>({}, {xzp}, DataType::UInt(8))},
                    {"w", array(ws, w, DataType::Int(8))},
                    {"ws", array({4}, wscale, DataType::Float(32))},
                    {"wzp", array({4}, wzp, DataType::Int(8))},
                    {"ys", array<float>({}, {yscale}, DataType::Float(32))},
                    {"yzp", array<uint8_t>({}, {yzp}, DataType::UInt(8))},
                    {"bias", array({4}, bias, DataType::Int(32))}};
  m.inputs = {info("x", xs, DataType::UInt(8))};
  Ints os{1, 4, 3, 5};
  m.outputs = {info("y", os, DataType::UInt(8))};
  std::vector<runtime::NDArray> out = run(m, {{"x", array(xs, x, DataType::UInt(8))}});
  ASSERT_EQ(out[0].shape(), os);
  for (int64_t o = 0; o < 4; ++o)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 5; ++j) {
        int32_t acc = bias[o];
        for (int64_t c = 0; c < 3; ++c)
          for (int64_t u = 0; u < 3; ++u)
            for (int64_t v = 0; v < 3; ++v) {
              int64_t y = i * 2 - 1 + u, z = j - 1 + v;
              if (y < 0 || y >= 6 || z < 0 || z >= 5) continue;
              acc += (int32_t(x[(c * 6 + y) * 5 + z]) - xzp) *
                     int32_t(w[((o * 3 + c) * 3 + u) * 3 + v]);
            }
        EXPECT_EQ(int(out[0].data_as<uint8_t>()[(o * 3 + i) * 5 + j]),
                  int(requantize_ref(acc, xscale, wscale[o], yscale, yzp)))
            << "at " << o << "," << i << "," << j;
      }
}

TEST(OnnxMisc, QLinearMatMulRejectsPerRowScale) {
  OnnxModel m = one_node("qmm_row.onnx", 10,
                         OnnxNode{"QLinearMatMul",
                                  "",
                                  "qmm",
                                  {"a", "as", "azp", "b", "bs", "bzp", "ys", "yzp"},
                                  {"y"},
                                  {},
                                  false});
  m.initializers = {{"as", array<float>({2}, {0.1f, 0.2f}, DataType::Float(32))},
                    {"azp", array<uint8_t>({2}, {1, 2}, DataType::UInt(8))},
                    {"bs", array<float>({}, {0.1f}, DataType::Float(32))},
                    {"bzp", array<uint8_t>({}, {3}, DataType::UInt(8))},
                    {"ys", array<float>({}, {0.1f}, DataType::Float(32))},
                    {"yzp", array<uint8_t>({}, {4}, DataType::UInt(8))}};
  m.inputs = {info("a", {2, 3}, DataType::UInt(8)), info("b", {3, 2}, DataType::UInt(8))};
  m.outputs = {info("y", {2, 2}, DataType::UInt(8))};
  std::string e = error_of([&] { import_onnx(m); });
  EXPECT_NE(e.find("node 'qmm' (QLinearMatMul): QLinearMatMul with a per-axis a scale or zero "
                   "point is not supported"),
            std::string::npos)
      << e;
}

// --- BatchNormalization in training mode

TEST(OnnxMisc, BatchNormTrainingModeUsesBatchStatistics) {
  Ints xs{3, 4, 2, 5};
  Vec x = random_vec(numel(xs), 41, -2, 3), s = random_vec(4, 42), bias = random_vec(4, 43);
  Vec mean = random_vec(4, 44), var = random_vec(4, 45, 0.5f, 2.0f);
  OnnxNode n{"BatchNormalization", "", "bn", {"x", "s", "b", "m", "v"},
             {"y", "rm", "rv"},    {}, false};
  n.attrs["training_mode"] = int64_t{1};
  n.attrs["epsilon"] = 1e-2;
  n.attrs["momentum"] = 0.7;
  OnnxModel m = one_node("bn.onnx", 15, n);
  m.initializers = {{"s", array({4}, s, DataType::Float(32))},
                    {"b", array({4}, bias, DataType::Float(32))},
                    {"m", array({4}, mean, DataType::Float(32))},
                    {"v", array({4}, var, DataType::Float(32))}};
  m.inputs = {info("x", xs)};
  m.outputs = {info("y", xs), info("rm", {4}), info("rv", {4})};
  std::vector<runtime::NDArray> out = run(m, {{"x", array(xs, x, DataType::Float(32))}});
  ASSERT_EQ(out.size(), 3u);
  Vec y(x.size()), rm(4), rv(4);
  for (int64_t c = 0; c < 4; ++c) {
    double sum = 0, sq = 0;
    int64_t cnt = 0;
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t k = 0; k < 10; ++k) sum += x[(b * 4 + c) * 10 + k], ++cnt;
    double mu = sum / double(cnt);
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t k = 0; k < 10; ++k) sq += std::pow(x[(b * 4 + c) * 10 + k] - mu, 2);
    double v = sq / double(cnt);
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t k = 0; k < 10; ++k) {
        size_t i = size_t((b * 4 + c) * 10 + k);
        y[i] = float((x[i] - mu) / std::sqrt(v + 1e-2) * s[c] + bias[c]);
      }
    rm[c] = float(mean[c] * 0.7 + mu * 0.3);
    rv[c] = float(var[c] * 0.7 + v * 0.3);
  }
  expect_close(out[0], y, xs, 1e-4f);
  expect_close(out[1], rm, {4}, 1e-5f);
  expect_close(out[2], rv, {4}, 1e-5f);
}

// --- Einsum with a repeated subscript

TEST(OnnxMisc, EinsumTakesDiagonals) {
  struct Case {
    std::string eq;
    Ints in, out;
  };
  const int64_t n = 4;
  Vec x = random_vec(3 * n * n, 51);
  for (const Case& k : {Case{"...ii->...i", {3, n, n}, {3, n}}, Case{"bii->b", {3, n, n}, {3}},
                        Case{"bij->jb", {3, n, n}, {n, 3}}, Case{"iib->bi", {n, n, 3}, {3, n}}}) {
    SCOPED_TRACE(k.eq);
    OnnxNode node{"Einsum", "", "einsum", {"x"}, {"y"}, {}, false};
    node.attrs["equation"] = k.eq;
    OnnxModel m = one_node("einsum.onnx", 12, node);
    m.inputs = {info("x", k.in)};
    m.outputs = {info("y", k.out)};
    std::vector<runtime::NDArray> out = run(m, {{"x", array(k.in, x, DataType::Float(32))}});
    Vec want(size_t(numel(k.out)), 0.0f);
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          if (k.eq == "...ii->...i" && i == j) want[b * n + i] = x[(b * n + i) * n + j];
          if (k.eq == "bii->b" && i == j) want[b] += x[(b * n + i) * n + j];
          if (k.eq == "bij->jb") want[j * 3 + b] += x[(b * n + i) * n + j];
          if (k.eq == "iib->bi" && i == j) want[b * n + i] = x[(i * n + j) * 3 + b];
        }
    expect_close(out[0], want, k.out);
  }
}

// --- Einsum of two operands

/// Naive Einsum of two operands with explicit output subscripts (no "...", no repeated letter):
/// loops over every assignment of the letters.
Vec einsum_ref(const std::string& ta, const Ints& sa, const Vec& a, const std::string& tb,
               const Ints& sb, const Vec& b, const std::string& out, const Ints& so) {
  std::map<char, int64_t> size;
  for (size_t d = 0; d < ta.size(); ++d) size[ta[d]] = std::max(size[ta[d]], sa[d]);
  for (size_t d = 0; d < tb.size(); ++d) size[tb[d]] = std::max(size[tb[d]], sb[d]);
  std::string letters;
  for (auto [ch, n] : size) letters += ch;
  auto offset = [&](const std::string& t, const Ints& s, std::map<char, int64_t>& at) {
    int64_t o = 0;
    for (size_t d = 0; d < t.size(); ++d) o = o * s[d] + (s[d] == 1 ? 0 : at[t[d]]);
    return o;
  };
  Vec y(size_t(numel(so)), 0.0f);
  std::map<char, int64_t> at;
  for (char ch : letters) at[ch] = 0;
  for (;;) {
    y[size_t(offset(out, so, at))] += a[size_t(offset(ta, sa, at))] * b[size_t(offset(tb, sb, at))];
    size_t k = 0;
    for (; k < letters.size(); ++k) {
      if (++at[letters[k]] < size[letters[k]]) break;
      at[letters[k]] = 0;
    }
    if (k == letters.size()) return y;
  }
}

TEST(OnnxMisc, EinsumOfTwoOperandsIsAMatmulWhereItCanBe) {
  struct Case {
    std::string a, b, out;
    Ints sa, sb, so;
    bool matmul;
  };
  for (const Case& k : {
           // MaxViT's attention: batch letters first, rows, then the contracted letter.
           Case{"bghij", "bghjd", "bghid", {1, 2, 3, 5, 6}, {1, 2, 3, 6, 4}, {1, 2, 3, 5, 4}, true},
           // Q·Kᵀ: the contracted letter last in both operands.
           Case{"bhid", "bhjd", "bhij", {2, 3, 5, 4}, {2, 3, 7, 4}, {2, 3, 5, 7}, true},
           // No batch letter; the output transposed; batch letters out of order.
           Case{"ik", "kj", "ji", {5, 3}, {3, 4}, {4, 5}, true},
           Case{"hbik", "bhkj", "bjhi", {3, 2, 5, 4}, {2, 3, 4, 6}, {2, 6, 3, 5}, true},
           // A matrix-vector product; letters of one operand summed out first.
           Case{"bik", "k", "bi", {2, 5, 4}, {4}, {2, 5}, true},
           Case{"ijx", "jk", "i", {3, 4, 2}, {4, 5}, {3}, true},
           // A batch letter broadcast from size 1: the generic product.
           Case{"bij", "bjk", "bik", {3, 4, 5}, {1, 5, 2}, {3, 4, 2}, false},
       }) {
    std::string eq = k.a + "," + k.b + "->" + k.out;
    SCOPED_TRACE(eq);
    Vec a = random_vec(numel(k.sa), 71), b = random_vec(numel(k.sb), 72);
    OnnxNode node{"Einsum", "", "einsum", {"a", "b"}, {"y"}, {}, false};
    node.attrs["equation"] = eq;
    OnnxModel m = one_node("einsum2.onnx", 12, node);
    m.inputs = {info("a", k.sa), info("b", k.sb)};
    m.outputs = {info("y", k.so)};
    graph::Graph g;
    std::vector<runtime::NDArray> out = run(
        m, {{"a", array(k.sa, a, DataType::Float(32))}, {"b", array(k.sb, b, DataType::Float(32))}},
        &g);
    EXPECT_EQ(g.str().find("matmul(") != std::string::npos, k.matmul) << g.str();
    expect_close(out[0], einsum_ref(k.a, k.sa, a, k.b, k.sb, b, k.out, k.so), k.so);
  }
}

// --- MatMul with broadcast batch dimensions

TEST(OnnxMisc, MatMulBroadcastsBatchDimensionsAsNumpy) {
  struct Case {
    Ints sa, sb, so;
  };
  for (const Case& k : {
           // Grouped-query attention's shape: one key matrix per group of heads (expanded).
           Case{{2, 3, 4, 5}, {2, 1, 5, 6}, {2, 3, 4, 6}},
           // Ranks differ; one matrix for every batch (batch_matmul broadcasts it).
           Case{{3, 4, 5}, {1, 1, 5, 2}, {1, 3, 4, 2}},
           Case{{4, 5}, {2, 3, 5, 2}, {2, 3, 4, 2}},
           Case{{2, 1, 4, 5}, {3, 5, 2}, {2, 3, 4, 2}},
       }) {
    SCOPED_TRACE(::testing::PrintToString(k.sa) + " x " + ::testing::PrintToString(k.sb));
    Vec a = random_vec(numel(k.sa), 81), b = random_vec(numel(k.sb), 82);
    OnnxNode node{"MatMul", "", "mm", {"a", "b"}, {"y"}, {}, false};
    OnnxModel m = one_node("matmul_bcast.onnx", 13, node);
    m.inputs = {info("a", k.sa), info("b", k.sb)};
    m.outputs = {info("y", k.so)};
    std::vector<runtime::NDArray> out = run(m, {{"a", array(k.sa, a, DataType::Float(32))},
                                                {"b", array(k.sb, b, DataType::Float(32))}});
    // Reference: the output's batch index, right-aligned into each operand (size 1 repeats).
    const size_t r = k.so.size();
    const int64_t M = k.so[r - 2], N = k.so[r - 1], K = k.sa.back();
    Vec want(size_t(numel(k.so)), 0.0f);
    const int64_t batches = numel(k.so) / (M * N);
    auto offset = [&](const Ints& s, int64_t flat) {  // the operand's first element of batch `flat`
      Ints idx(r - 2);
      for (size_t d = r - 2; d-- > 0;) idx[d] = flat % k.so[d], flat /= k.so[d];
      int64_t o = 0;
      const size_t own = s.size() - 2;
      for (size_t d = 0; d < own; ++d) {
        const int64_t i = idx[r - 2 - own + d];
        o = o * s[d] + (s[d] == 1 ? 0 : i);
      }
      return o * s[own] * s[own + 1];
    };
    for (int64_t bt = 0; bt < batches; ++bt)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double acc = 0;
          for (int64_t q = 0; q < K; ++q)
            acc += double(a[size_t(offset(k.sa, bt) + i * K + q)]) *
                   b[size_t(offset(k.sb, bt) + q * N + j)];
          want[size_t((bt * M + i) * N + j)] = float(acc);
        }
    expect_close(out[0], want, k.so);
  }
  // Batch dimensions that do not broadcast: an error naming the node and both types.
  OnnxNode node{"MatMul", "", "mm", {"a", "b"}, {"y"}, {}, false};
  OnnxModel m = one_node("matmul_bad.onnx", 13, node);
  m.inputs = {info("a", {2, 3, 4, 5}), info("b", {2, 2, 5, 6})};
  m.outputs = {info("y", {2, 3, 4, 6})};
  EXPECT_NE(error_of([&] { import_onnx(m); })
                .find("batch dimensions of float32[2, 3, 4, 5] and "
                      "float32[2, 2, 5, 6] do not broadcast"),
            std::string::npos)
      << error_of([&] { import_onnx(m); });
}

// --- 3-D pooling as two 2-D pools

/// Naive 3-D max / average pool of x [N, C, D, H, W] (ONNX semantics, floor or ceil output
/// sizes, a window starting in the end padding dropped as PyTorch does).
Vec pool3d_ref(const Vec& x, const Ints& xs, bool is_max, const Ints& k, const Ints& st,
               const Ints& pads, const Ints& dil, bool ceil, bool include_pad, Ints* out_shape) {
  Ints os{xs[0], xs[1]};
  for (size_t d = 0; d < 3; ++d) {
    int64_t span = xs[2 + d] + pads[d] + pads[d + 3] - dil[d] * (k[d] - 1) - 1;
    int64_t o = (ceil ? (span + st[d] - 1) / st[d] : span / st[d]) + 1;
    if (ceil && (o - 1) * st[d] >= xs[2 + d] + pads[d]) --o;
    os.push_back(o);
  }
  *out_shape = os;
  Vec y(size_t(numel(os)));
  size_t at = 0;
  for (int64_t n = 0; n < os[0]; ++n)
    for (int64_t c = 0; c < os[1]; ++c)
      for (int64_t od = 0; od < os[2]; ++od)
        for (int64_t oh = 0; oh < os[3]; ++oh)
          for (int64_t ow = 0; ow < os[4]; ++ow) {
            double acc = is_max ? -INFINITY : 0;
            int64_t counted = 1;
            const int64_t o[3] = {od, oh, ow};
            for (size_t d = 0; d < 3; ++d) {
              // Taps inside the input (or, counting the padding, inside the padded input).
              const int64_t s0 = o[d] * st[d] - pads[d];
              const int64_t lo = include_pad ? -pads[d] : 0;
              const int64_t hi = include_pad ? xs[2 + d] + pads[d + 3] : xs[2 + d];
              int64_t cnt = 0;
              for (int64_t r = 0; r < k[d]; ++r)
                cnt += s0 + r * dil[d] >= lo && s0 + r * dil[d] < hi;
              counted *= cnt;
            }
            for (int64_t a = 0; a < k[0]; ++a)
              for (int64_t b = 0; b < k[1]; ++b)
                for (int64_t e = 0; e < k[2]; ++e) {
                  const int64_t i = od * st[0] - pads[0] + a * dil[0];
                  const int64_t j = oh * st[1] - pads[1] + b * dil[1];
                  const int64_t l = ow * st[2] - pads[2] + e * dil[2];
                  if (i < 0 || i >= xs[2] || j < 0 || j >= xs[3] || l < 0 || l >= xs[4]) continue;
                  const double v =
                      x[size_t((((n * xs[1] + c) * xs[2] + i) * xs[3] + j) * xs[4] + l)];
                  acc = is_max ? std::max(acc, v) : acc + v;
                }
            y[at++] = float(is_max ? acc : acc / double(counted));
          }
  return y;
}

TEST(OnnxMisc, Pool3dRunsAsTwo2dPools) {
  struct Case {
    bool is_max;
    Ints k, st, pads, dil;
    bool ceil, include_pad;
  };
  const Ints xs{2, 3, 7, 9, 11};
  Vec x = random_vec(numel(xs), 91);
  for (const Case& k : {
           Case{true, {3, 3, 3}, {2, 2, 2}, {1, 1, 1, 1, 1, 1}, {1, 1, 1}, false, false},
           Case{true, {2, 3, 3}, {1, 2, 1}, {0, 1, 1, 1, 0, 1}, {2, 1, 2}, true, false},
           Case{false, {3, 3, 3}, {2, 2, 2}, {1, 1, 1, 1, 1, 1}, {1, 1, 1}, true, false},
           Case{false, {3, 2, 3}, {1, 2, 2}, {1, 0, 1, 1, 1, 0}, {1, 1, 1}, false, true},
       }) {
    SCOPED_TRACE(std::string(k.is_max ? "max" : "avg") + " k " + ::testing::PrintToString(k.k));
    OnnxNode node{k.is_max ? "MaxPool" : "AveragePool", "", "pool", {"x"}, {"y"}, {}, false};
    node.attrs["kernel_shape"] = k.k;
    node.attrs["strides"] = k.st;
    node.attrs["pads"] = k.pads;
    node.attrs["ceil_mode"] = int64_t{k.ceil};
    if (k.is_max)
      node.attrs["dilations"] = k.dil;
    else
      node.attrs["count_include_pad"] = int64_t{k.include_pad};
    Ints os;
    Vec want = pool3d_ref(x, xs, k.is_max, k.k, k.st, k.pads, k.dil, k.ceil, k.include_pad, &os);
    OnnxModel m = one_node("pool3d.onnx", 12, node);
    m.inputs = {info("x", xs)};
    m.outputs = {info("y", os)};
    graph::Graph g;
    std::vector<runtime::NDArray> out = run(m, {{"x", array(xs, x, DataType::Float(32))}}, &g);
    EXPECT_EQ(g.str().find("pool_nd"), std::string::npos) << g.str();
    expect_close(out[0], want, os);
  }
}

// --- Mod of float16

TEST(OnnxMisc, ModOfFloat16IsExact) {
  const int64_t n = 64;
  Vec av = random_vec(n, 61, -300, 300), bv = random_vec(n, 62, -7, 7);
  std::vector<_Float16> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = _Float16(av[i]);
    b[i] = _Float16(std::abs(bv[i]) < 0.1f ? 0.5f : bv[i]);
  }
  OnnxNode node{"Mod", "", "mod", {"a", "b"}, {"y"}, {}, false};
  node.attrs["fmod"] = int64_t{1};
  OnnxModel m = one_node("mod.onnx", 13, node);
  m.inputs = {info("a", {n}, DataType::Float(16)), info("b", {n}, DataType::Float(16))};
  m.outputs = {info("y", {n}, DataType::Float(16))};
  std::vector<runtime::NDArray> out = run(
      m, {{"a", array({n}, a, DataType::Float(16))}, {"b", array({n}, b, DataType::Float(16))}});
  ASSERT_EQ(out[0].dtype(), DataType::Float(16));
  for (int64_t i = 0; i < n; ++i) {
    float want = std::fmod(float(a[i]), float(b[i]));
    EXPECT_EQ(float(out[0].data_as<_Float16>()[i]), want)
        << "fmod(" << float(a[i]) << ", " << float(b[i]) << ")";
  }
}

// --- bfloat16

/// Nearest bfloat16 of a finite float by distances in double (ties to the even pattern).
uint16_t bf16_ref(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  uint16_t lo = uint16_t(u >> 16), hi = uint16_t(lo + 1);
  auto value = [](uint16_t b) {
    // Past the largest finite value, IEEE rounding treats infinity as 2^128.
    if ((b & 0x7F80) == 0x7F80) return (b & 0x8000) ? -std::ldexp(1.0, 128) : std::ldexp(1.0, 128);
    uint32_t w = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &w, 4);
    return double(f);
  };
  double dl = std::abs(double(x) - value(lo)), dh = std::abs(double(x) - value(hi));
  if (dl != dh) return dl < dh ? lo : hi;
  return (lo & 1) ? hi : lo;
}

TEST(OnnxMisc, CastToAndFromBfloat16) {
  const int64_t n = 64;
  std::vector<uint32_t> bits(n);
  std::mt19937 gen(81);
  for (int64_t i = 0; i < n; ++i) {
    Vec v = random_vec(1, uint32_t(100 + i), -1000, 1000);
    std::memcpy(&bits[i], &v[0], 4);
    if (i % 4 == 1) bits[i] = (bits[i] & 0xFFFF0000u) | 0x8000u;  // a tie
    if (i % 4 == 2) bits[i] = (bits[i] & 0xFFFF0000u) | (gen() & 0xFFFFu);
  }
  bits[0] = 0x7FC00001u;   // NaN (quiet; low payload bits only)
  bits[4] = 0xFF800001u;   // signalling NaN whose payload lies below bfloat16's bits
  bits[8] = 0x7F800000u;   // +inf
  bits[12] = 0x7F7FFFFFu;  // largest float: rounds to +inf
  // x -> bfloat16 (Cast) -> float32 (CastLike x), and bfloat16 -> int32.
  OnnxNode to_bf{"Cast", "", "to_bf", {"x"}, {"b"}, {}, false};
  to_bf.attrs["to"] = int64_t{16};
  OnnxNode back{"CastLike", "", "back", {"b", "x"}, {"y"}, {}, false};
  OnnxNode to_int{"Cast", "", "to_int", {"b"}, {"i"}, {}, false};
  to_int.attrs["to"] = int64_t{6};
  OnnxModel m;
  m.path = "bf16.onnx";
  m.opsets[""] = 15;
  m.nodes = {to_bf, back, to_int};
  m.inputs = {info("x", {n})};
  m.outputs = {info("b", {n}, DataType::BFloat16()), info("y", {n}),
               info("i", {n}, DataType::Int(32))};
  runtime::NDArray x = runtime::NDArray::empty({n}, DataType::Float(32));
  std::memcpy(x.data(), bits.data(), size_t(n) * 4);
  std::vector<runtime::NDArray> out = run(m, {{"x", x}});
  ASSERT_EQ(out[0].dtype(), DataType::BFloat16());
  for (int64_t i = 0; i < n; ++i) {
    float xf;
    std::memcpy(&xf, &bits[i], 4);
    uint16_t got = out[0].data_as<uint16_t>()[i];
    uint32_t back_bits;
    std::memcpy(&back_bits, out[1].data_as<float>() + i, 4);
    SCOPED_TRACE(::testing::Message() << "input bits " << std::hex << bits[i]);
    if (std::isnan(xf)) {
      EXPECT_EQ(got & 0x7F80u, 0x7F80u);
      EXPECT_NE(got & 0x7Fu, 0u);  // still a NaN, not an infinity
      EXPECT_EQ(got & 0x8000u, (bits[i] >> 16) & 0x8000u);
    } else if (std::isinf(xf)) {
      EXPECT_EQ(got, uint16_t(bits[i] >> 16));
    } else {
      EXPECT_EQ(got, bf16_ref(xf));
    }
    EXPECT_EQ(back_bits, uint32_t(got) << 16);  // bfloat16 -> float32 is exact
    float bf;
    std::memcpy(&bf, &back_bits, 4);
    if (std::isfinite(bf)) {
      EXPECT_EQ(out[2].data_as<int32_t>()[i], int32_t(bf));
    }
  }
}

TEST(OnnxMisc, CastFromBoolGivesZeroAndOne) {
  // Sparsemax counts its support as Cast(1 + k·z > cumsum, float) summed: a comparison's bool
  // cast to float32, int64 and uint8 is 0 or 1.
  const int64_t n = 40;
  Vec a = random_vec(n, 91), b = random_vec(n, 92);
  OnnxNode gt{"Greater", "", "gt", {"a", "b"}, {"g"}, {}, false};
  OnnxNode to_f{"Cast", "", "to_f", {"g"}, {"f"}, {}, false};
  to_f.attrs["to"] = int64_t{1};
  OnnxNode to_i{"Cast", "", "to_i", {"g"}, {"i"}, {}, false};
  to_i.attrs["to"] = int64_t{7};
  OnnxNode to_u{"Cast", "", "to_u", {"g"}, {"u"}, {}, false};
  to_u.attrs["to"] = int64_t{2};
  OnnxModel m;
  m.path = "cast_bool.onnx";
  m.opsets[""] = 13;
  m.nodes = {gt, to_f, to_i, to_u};
  m.inputs = {info("a", {n}), info("b", {n})};
  m.outputs = {info("f", {n}), info("i", {n}, DataType::Int(64)),
               info("u", {n}, DataType::UInt(8))};
  std::vector<runtime::NDArray> out = run(
      m, {{"a", array({n}, a, DataType::Float(32))}, {"b", array({n}, b, DataType::Float(32))}});
  for (int64_t k = 0; k < n; ++k) {
    const bool want = a[size_t(k)] > b[size_t(k)];
    EXPECT_EQ(out[0].data_as<float>()[k], want ? 1.0f : 0.0f) << k;
    EXPECT_EQ(out[1].data_as<int64_t>()[k], want ? 1 : 0) << k;
    EXPECT_EQ(out[2].data_as<uint8_t>()[k], want ? 1 : 0) << k;
  }
}

TEST(OnnxMisc, CumSumOfIntegersNumbersPositionsLikeRoberta) {
  // RoBERTa's position ids: cumsum(ids != pad) * (ids != pad) + pad, in int32 along the
  // sequence; and a float CumSum, exclusive and reversed, along the first axis of the ids'
  // embedding-like values (an axis with rows after it).
  const int64_t b = 3, n = 11, pad = 1;
  std::vector<int64_t> ids(static_cast<size_t>(b * n));
  std::mt19937 rng(93);
  for (int64_t& v : ids) v = rng() % 3 == 0 ? pad : 2 + rng() % 50;
  OnnxModel m;
  m.path = "cumsum.onnx";
  m.opsets[""] = 14;
  m.inputs = {info("ids", {b, n}, DataType::Int(64)), info("x", {b, n})};
  m.initializers = {{"pad", array<int64_t>({}, {pad}, DataType::Int(64))},
                    {"padi", array<int32_t>({}, {int32_t(pad)}, DataType::Int(32))},
                    {"one", array<int64_t>({}, {1}, DataType::Int(64))},
                    {"zero", array<int64_t>({}, {0}, DataType::Int(64))}};
  OnnxNode eq{"Equal", "", "eq", {"ids", "pad"}, {"e"}, {}, false};
  OnnxNode nt{"Not", "", "not", {"e"}, {"keep"}, {}, false};
  OnnxNode cast{"Cast", "", "cast", {"keep"}, {"k"}, {}, false};
  cast.attrs["to"] = int64_t{6};
  OnnxNode cs{"CumSum", "", "cs", {"k", "one"}, {"c"}, {}, false};
  OnnxNode mul{"Mul", "", "mul", {"c", "k"}, {"ck"}, {}, false};
  OnnxNode add{"Add", "", "add", {"ck", "padi"}, {"pos"}, {}, false};
  OnnxNode csx{"CumSum", "", "csx", {"x", "zero"}, {"y"}, {}, false};
  csx.attrs["exclusive"] = int64_t{1};
  csx.attrs["reverse"] = int64_t{1};
  m.nodes = {eq, nt, cast, cs, mul, add, csx};
  m.outputs = {info("pos", {b, n}, DataType::Int(32)), info("y", {b, n})};
  Vec x = random_vec(b * n, 94);
  std::vector<runtime::NDArray> out =
      run(m, {{"ids", array<int64_t>({b, n}, ids, DataType::Int(64))},
              {"x", array({b, n}, x, DataType::Float(32))}});
  for (int64_t r = 0; r < b; ++r) {
    int32_t count = 0;
    for (int64_t j = 0; j < n; ++j) {
      const size_t f = static_cast<size_t>(r * n + j);
      const bool keep = ids[f] != pad;
      count += keep;
      EXPECT_EQ(out[0].data_as<int32_t>()[f], keep ? count + pad : pad) << r << "," << j;
      float want = 0;
      for (int64_t q = r + 1; q < b; ++q) want += x[static_cast<size_t>(q * n + j)];
      EXPECT_NEAR(out[1].data_as<float>()[f], want, 1e-5) << r << "," << j;
    }
  }
}

// --- results without elements

TEST(OnnxMisc, EmptyResultsOfSliceSplitAndReshape) {
  OnnxModel m;
  m.path = "empty.onnx";
  m.opsets[""] = 14;
  m.inputs = {info("x", {4, 6})};
  m.initializers = {{"st", array<int64_t>({1}, {10}, DataType::Int(64))},
                    {"en", array<int64_t>({1}, {20}, DataType::Int(64))},
                    {"ax", array<int64_t>({1}, {1}, DataType::Int(64))},
                    {"sp", array<int64_t>({3}, {0, 4, 0}, DataType::Int(64))},
                    {"sh", array<int64_t>({3}, {0, 2, 3}, DataType::Int(64))}};
  OnnxNode slice{"Slice", "", "slice", {"x", "st", "en", "ax"}, {"e"}, {}, false};
  OnnxNode split{"Split", "", "split", {"x", "sp"}, {"s0", "s1", "s2"}, {}, false};
  OnnxNode reshape{"Reshape", "", "reshape", {"e", "sh"}, {"r"}, {}, false};
  reshape.attrs["allowzero"] = int64_t{1};
  m.nodes = {slice, split, reshape};
  m.outputs = {info("e", {4, 0}), info("s0", {0, 6}), info("s1", {4, 6}), info("s2", {0, 6}),
               info("r", {0, 2, 3})};
  Vec x = random_vec(24, 71);
  std::vector<runtime::NDArray> out = run(m, {{"x", array({4, 6}, x, DataType::Float(32))}});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0].shape(), (Ints{4, 0}));
  EXPECT_EQ(out[1].shape(), (Ints{0, 6}));
  expect_close(out[2], x, {4, 6});
  EXPECT_EQ(out[3].shape(), (Ints{0, 6}));
  EXPECT_EQ(out[4].shape(), (Ints{0, 2, 3}));
}

TEST(OnnxMisc, ReshapeAllowZeroWithMinusOneIsAnError) {
  OnnxModel m;
  m.path = "allowzero.onnx";
  m.opsets[""] = 14;
  m.inputs = {info("x", {0, 3})};
  m.initializers = {{"sh", array<int64_t>({2}, {0, -1}, DataType::Int(64))}};
  OnnxNode reshape{"Reshape", "", "rs", {"x", "sh"}, {"r"}, {}, false};
  reshape.attrs["allowzero"] = int64_t{1};
  m.nodes = {reshape};
  m.outputs = {info("r", {0, 3})};
  std::string e = error_of([&] { import_onnx(m); });
  EXPECT_NE(e.find("node 'rs' (Reshape): shape [0, -1] has both a 0 and a -1"), std::string::npos)
      << e;
}

}  // namespace
}  // namespace kiln::frontend
