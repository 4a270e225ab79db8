/// \file quantize_calibration.h
/// \brief Entropy (KL-divergence) calibration of quantized models (`kiln quantize --method
/// entropy`): the histogram of a
/// tensor's values over the calibration samples and the range whose int8 quantization loses
/// the least information, as ONNX Runtime's HistogramCalibrater computes them for
/// CalibrationMethod.Entropy (onnxruntime/quantization/calibrate.py: HistogramCollector's
/// collect_value / merge_histogram / get_entropy_threshold, after TensorRT's "8-bit inference"
/// method), so that the same calibration data gives the same ranges.
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace kiln::graph {

/// A histogram of values over [-threshold, threshold] in equal bins, with the values' min and
/// max.
struct Histogram {
  std::vector<int64_t> counts;
  double threshold = 0, min = INFINITY, max = -INFINITY;

  /// Adds n values. The first call makes `num_bins` bins over [-t, t], t = max |v|; a later
  /// call with a larger t keeps the bin width and adds bins on both sides (ONNX Runtime's
  /// merge_histogram), else counts into the bins as they are.
  void add(const float* v, int64_t n, int64_t num_bins);
  /// Edge i of the bins (0 … counts.size()).
  double edge(int64_t i) const;
};

/// The range [lo, hi] that minimises the KL divergence between the histogram's distribution
/// and its quantization into `num_quantized_bins` levels, over the candidate ranges centred on
/// the middle bin (edges [mid - i, mid + i + 1] for i = num_quantized_bins / 2 … mid, the
/// outliers folded into the end bins), clipped to the values' [min, max]; ONNX Runtime's
/// get_entropy_threshold, step for step.
std::pair<double, double> entropy_range(const Histogram& h, int64_t num_quantized_bins);

}  // namespace kiln::graph
