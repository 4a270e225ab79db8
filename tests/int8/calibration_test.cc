// kiln quantize's entropy calibration (graph/quantize_calibration.h) against ONNX Runtime on
// hand-written histograms and values: every expected histogram and range below is what ONNX
// Runtime's HistogramCollector(method="entropy", num_bins=…, num_quantized_bins=…) returns for
// the same input (collect + histogram_dict, get_entropy_threshold), computed once with the
// benchmark venv's onnxruntime and written down here.
#include <gtest/gtest.h>

#include "kiln/graph/quantize_calibration.h"

namespace kiln::graph {
namespace {

TEST(EntropyCalibration, RangeOfAHandWrittenHistogramIsOnnxRuntimes) {
  // 16 bins over [-8, 8] (edges -8, -7, …, 8), quantized into 4 levels: the candidates are the
  // slices [8 - i, 8 + i + 1) for i = 2 … 8; ONNX Runtime picks edges (-4, 5).
  Histogram h;
  h.counts = {1, 0, 0, 2, 5, 9, 30, 80, 120, 40, 10, 4, 0, 0, 0, 3};
  h.threshold = 8;
  h.min = -7.5;
  h.max = 7.9;
  auto r = entropy_range(h, 4);
  EXPECT_DOUBLE_EQ(r.first, -4.0);
  EXPECT_DOUBLE_EQ(r.second, 5.0);
  // Clipped to the values' range.
  h.min = -2.5;
  r = entropy_range(h, 4);
  EXPECT_DOUBLE_EQ(r.first, -2.5);
  EXPECT_DOUBLE_EQ(r.second, 5.0);
}

TEST(EntropyCalibration, OutliersFoldedAndLevelsTruncatedAsOnnxRuntimeDoes) {
  // 32 bins over [-16, 16], 8 levels (candidates i = 4 … 16). In the first histogram the
  // outliers folded into the end bins of each candidate decide ((-4, 5) without them); in the
  // second the truncation of each level's spread count to an integer (ONNX Runtime writes it
  // into an int64 array) does ((-12, 13) without it). Both minima are clear (no near-ties).
  Histogram h;
  h.threshold = 16;
  h.min = -15.5;
  h.max = 15.5;
  h.counts = {0,  0,  0,  0,  0, 0, 0, 0, 2, 0, 0, 0, 46, 38, 16, 27,
              21, 34, 12, 32, 0, 1, 0, 2, 0, 0, 0, 0, 0,  0,  0,  0};
  auto r = entropy_range(h, 8);
  EXPECT_DOUBLE_EQ(r.first, -8.0);
  EXPECT_DOUBLE_EQ(r.second, 9.0);
  h.counts = {5,  0,  0, 0,  0,  0,  1, 5, 0, 1, 37, 21, 27, 23, 11, 35,
              34, 11, 3, 28, 43, 29, 1, 0, 3, 2, 0,  5,  4,  0,  0,  4};
  r = entropy_range(h, 8);  // the whole histogram, clipped to the values' range
  EXPECT_DOUBLE_EQ(r.first, -15.5);
  EXPECT_DOUBLE_EQ(r.second, 15.5);
}

TEST(EntropyCalibration, HistogramGrowsByWholeBinsAsOnnxRuntimesDoes) {
  const float a[] = {-1.9f, -0.7f, -0.3f, 0.1f, 0.2f, 0.25f, 0.6f, 1.1f, 1.3f, 2.0f};
  const float b[] = {-0.2f, 0.05f, 0.15f, 0.3f, 0.35f, 4.4f, -3.1f};
  Histogram h;
  h.add(a, 10, 8);
  EXPECT_EQ(h.counts, (std::vector<int64_t>{1, 0, 1, 1, 3, 1, 2, 1}));
  EXPECT_DOUBLE_EQ(h.threshold, 2.0);
  // max |b| = 4.4 > 2: 5 bins of 0.5 added on each side, threshold 4.5.
  h.add(b, 7, 8);
  EXPECT_EQ(h.counts, (std::vector<int64_t>{0, 0, 1, 0, 0, 1, 0, 1, 2, 7, 1, 2, 1, 0, 0, 0, 0, 1}));
  EXPECT_DOUBLE_EQ(h.threshold, 4.5);
  EXPECT_FLOAT_EQ(float(h.min), -3.1f);
  EXPECT_FLOAT_EQ(float(h.max), 4.4f);
  const auto r = entropy_range(h, 4);
  EXPECT_DOUBLE_EQ(r.first, -2.0);
  EXPECT_DOUBLE_EQ(r.second, 2.5);
}

TEST(EntropyCalibration, ConstantZeroTensorsGiveAnEmptyRange) {
  const float z[] = {0, 0, 0};
  Histogram h;
  h.add(z, 3, 16);
  const auto r = entropy_range(h, 4);
  EXPECT_EQ(r.first, 0.0);
  EXPECT_EQ(r.second, 0.0);
}

}  // namespace
}  // namespace kiln::graph
