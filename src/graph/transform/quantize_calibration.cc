// Entropy calibration (graph/quantize_calibration.h): ONNX Runtime's histogram collection and
// KL-divergence threshold search, written out from onnxruntime/quantization/calibrate.py
// (HistogramCollector) and quant_utils.py (smooth_distribution), with scipy.stats.entropy's
// normalisation; the numpy semantics they rely on are kept where they matter (np.histogram's closed
// last bin, the int64 truncation of the expanded q).
#include "kiln/graph/quantize_calibration.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace kiln::graph {

namespace {

/// np.histogram(v, bins, range=(-t, t)) added into `counts` at `offset` (values outside are
/// dropped; the last bin is closed).
void bin_into(std::vector<int64_t>& counts, int64_t offset, int64_t bins, double t, const float* v,
              int64_t n) {
  const double lo = -t, width = 2 * t;
  for (int64_t k = 0; k < n; ++k) {
    const double x = v[k];
    if (!(x >= lo && x <= t)) continue;
    int64_t i = static_cast<int64_t>((x - lo) / width * double(bins));
    i = std::clamp<int64_t>(i, 0, bins - 1);
    // numpy corrects the index against the edges themselves.
    auto edge = [&](int64_t j) { return lo + width * double(j) / double(bins); };
    if (x < edge(i) && i > 0) --i;
    if (i < bins - 1 && x >= edge(i + 1)) ++i;
    ++counts[size_t(offset + i)];
  }
}

/// smooth_distribution: zeros become eps, the non-zero bins give that mass back; empty when
/// every bin is zero (the divergence is then infinite).
std::vector<double> smooth(const std::vector<double>& p, double eps = 0.0001) {
  const int64_t zeros = std::count(p.begin(), p.end(), 0.0);
  const int64_t nonzeros = int64_t(p.size()) - zeros;
  if (nonzeros == 0) return {};
  const double eps1 = eps * double(zeros) / double(nonzeros);
  if (eps1 >= 1.0) return {};
  std::vector<double> r(p.size());
  for (size_t i = 0; i < p.size(); ++i) r[i] = p[i] == 0 ? eps : p[i] - eps1;
  return r;
}

/// scipy.stats.entropy(p, q): Σ p̂ log(p̂ / q̂) of the normalised distributions.
double kl_divergence(const std::vector<double>& p, const std::vector<double>& q) {
  const double sp = std::accumulate(p.begin(), p.end(), 0.0);
  const double sq = std::accumulate(q.begin(), q.end(), 0.0);
  double d = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double a = p[i] / sp, b = q[i] / sq;
    if (a > 0) d += a * std::log(a / b);
  }
  return d;
}

}  // namespace

double Histogram::edge(int64_t i) const {
  return -threshold + 2 * threshold * double(i) / double(counts.size());
}

void Histogram::add(const float* v, int64_t n, int64_t num_bins) {
  if (n == 0) return;
  double lo = INFINITY, hi = -INFINITY;
  for (int64_t k = 0; k < n; ++k) {
    lo = std::min(lo, double(v[k]));
    hi = std::max(hi, double(v[k]));
  }
  const double t = std::max(std::abs(lo), std::abs(hi));
  min = std::min(min, lo);
  max = std::max(max, hi);
  if (counts.empty() || t <= threshold) {
    if (counts.empty()) {
      counts.assign(size_t(num_bins), 0);
      threshold = t;
    }
    if (threshold == 0) {
      counts[counts.size() / 2] += n;  // all zeros
      return;
    }
    bin_into(counts, 0, int64_t(counts.size()), threshold, v, n);
    return;
  }
  const int64_t old_bins = int64_t(counts.size());
  if (threshold == 0) {
    // The old values were all zeros: re-bin with the same count over the new range.
    std::vector<int64_t> c(size_t(old_bins), 0);
    bin_into(c, 0, old_bins, t, v, n);
    for (int64_t i = 0; i < old_bins; ++i) c[size_t(i)] += counts[size_t(i)];
    counts = std::move(c);
    threshold = t;
    return;
  }
  // Grow by whole bins of the old width on both sides.
  const double stride = 2 * threshold / double(old_bins);
  const int64_t half = static_cast<int64_t>(std::floor((t - threshold) / stride)) + 1;
  const int64_t bins = old_bins + 2 * half;
  const double nt = double(half) * stride + threshold;
  std::vector<int64_t> c(size_t(bins), 0);
  bin_into(c, 0, bins, nt, v, n);
  for (int64_t i = 0; i < old_bins; ++i) c[size_t(half + i)] += counts[size_t(i)];
  counts = std::move(c);
  threshold = nt;
}

std::pair<double, double> entropy_range(const Histogram& h, int64_t num_quantized_bins) {
  const int64_t num_bins = int64_t(h.counts.size());
  if (num_bins == 0) return {0.0, 0.0};
  const int64_t zero_bin = num_bins / 2, half_q = num_quantized_bins / 2;
  double best = std::numeric_limits<double>::infinity();
  std::pair<double, double> range{h.edge(0), h.edge(num_bins)};
  bool first = true;
  for (int64_t i = half_q; i <= zero_bin; ++i) {
    const int64_t start = zero_bin - i, end = std::min(zero_bin + i + 1, num_bins);
    const std::pair<double, double> cand{h.edge(start), h.edge(end)};
    const int64_t size = end - start;
    // The reference p: the slice, outliers folded into its end bins.
    std::vector<double> p(static_cast<size_t>(size));
    for (int64_t k = 0; k < size; ++k) p[size_t(k)] = double(h.counts[size_t(start + k)]);
    int64_t left = 0, right = 0;
    for (int64_t k = 0; k < start; ++k) left += h.counts[size_t(k)];
    for (int64_t k = end; k < num_bins; ++k) right += h.counts[size_t(k)];
    p.front() += double(left);
    p.back() += double(right);
    // The candidate q: the slice merged into num_quantized_bins levels (the rest into the
    // last), each level spread evenly (truncated to an integer) over its non-zero bins of p.
    const int64_t merged = size / num_quantized_bins;
    std::vector<int64_t> qb(size_t(num_quantized_bins), 0);
    for (int64_t b = 0; b < num_quantized_bins; ++b)
      for (int64_t k = b * merged; k < (b + 1) * merged; ++k)
        qb[size_t(b)] += h.counts[size_t(start + k)];
    for (int64_t k = num_quantized_bins * merged; k < size; ++k)
      qb.back() += h.counts[size_t(start + k)];
    std::vector<double> q(static_cast<size_t>(size), 0.0);
    for (int64_t b = 0; b < num_quantized_bins; ++b) {
      int64_t norm = 0;
      for (int64_t k = b * merged; k < (b + 1) * merged; ++k) norm += p[size_t(k)] != 0;
      if (norm == 0) continue;
      const double v = std::trunc(double(qb[size_t(b)]) / double(norm));
      for (int64_t k = b * merged; k < (b + 1) * merged; ++k) q[size_t(k)] = v;
    }
    const std::vector<double> ps = smooth(p), qs = smooth(q);
    const double d =
        ps.empty() || qs.empty() ? std::numeric_limits<double>::infinity() : kl_divergence(ps, qs);
    if (first || d < best) {  // np.argmin: the first of equal minima
      best = d;
      range = cand;
      first = false;
    }
  }
  range.first = std::max(range.first, h.min);
  range.second = std::min(range.second, h.max);
  return range;
}

}  // namespace kiln::graph
