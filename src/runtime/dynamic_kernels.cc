// The runtime kernels of NonZero, Unique, NonMaxSuppression and TopK (dynamic_kernels.h). Each
// dispatches once on the element type to a template. NonZero counts, then writes the
// multi-indices (so the [rank, n] result is dense). Unique sorts the slice indices stably by
// (slice, index), so each run of equal slices starts at its first occurrence; the runs are
// then ordered by slice (sorted) or by first occurrence. NonMaxSuppression follows the ONNX
// reference: per batch and class, candidates above the score threshold in descending score
// (ties: lower box index first), each kept unless its IoU with an already kept box of the
// class exceeds the threshold, until max_output boxes are kept. TopK sorts each column's
// (value, index) pairs partially (a heap for a few of many, else a selection and a sort of the
// k), columns in parallel on the runtime's thread pool.

#include "kiln/runtime/dynamic_kernels.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

int32_t bad_type(const char* fn, int32_t code, int32_t bits) {
  std::string msg = std::string(fn) + ": unsupported element type (code " + std::to_string(code) +
                    ", " + std::to_string(bits) + " bits)";
  kiln_set_last_error(msg.c_str());
  return -1;
}

/// Calls f(T{}) with T the C type of (code, bits); false when there is none.
template <typename F>
bool dispatch(int32_t code, int32_t bits, F&& f) {
  switch (code * 1000 + bits) {
    case 0 * 1000 + 8:
      f(int8_t{});
      return true;
    case 0 * 1000 + 16:
      f(int16_t{});
      return true;
    case 0 * 1000 + 32:
      f(int32_t{});
      return true;
    case 0 * 1000 + 64:
      f(int64_t{});
      return true;
    case 1 * 1000 + 1:
      f(uint8_t{});
      return true;  // bool: one byte per element
    case 1 * 1000 + 8:
      f(uint8_t{});
      return true;
    case 1 * 1000 + 16:
      f(uint16_t{});
      return true;
    case 1 * 1000 + 32:
      f(uint32_t{});
      return true;
    case 1 * 1000 + 64:
      f(uint64_t{});
      return true;
    case 2 * 1000 + 32:
      f(float{});
      return true;
    case 2 * 1000 + 64:
      f(double{});
      return true;
    default:
      return false;
  }
}

template <typename T>
void nonzero(const T* in, int64_t rank, const int64_t* dims, int64_t* out, int64_t* extent) {
  int64_t numel = 1;
  for (int64_t r = 0; r < rank; ++r) numel *= dims[r];
  int64_t n = 0;
  for (int64_t i = 0; i < numel; ++i) n += in[i] != T(0);
  int64_t k = 0;
  for (int64_t i = 0; i < numel; ++i) {
    if (in[i] == T(0)) continue;
    int64_t rest = i;
    for (int64_t r = rank - 1; r >= 0; --r) {
      out[r * n + k] = rest % dims[r];
      rest /= dims[r];
    }
    ++k;
  }
  extent[0] = n;
}

template <typename T>
void unique(const T* in, int64_t outer, int64_t n, int64_t inner, bool sorted, T* y,
            int64_t* indices, int64_t* inverse, int64_t* counts, int64_t* extent) {
  // Lexicographic comparison of slices a and b: elements in (outer, inner) order.
  auto cmp = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o) {
      const T* pa = in + (o * n + a) * inner;
      const T* pb = in + (o * n + b) * inner;
      for (int64_t k = 0; k < inner; ++k) {
        if (pa[k] < pb[k]) return -1;
        if (pb[k] < pa[k]) return 1;
      }
    }
    return 0;
  };
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
  // Runs of equal slices: [start, end) in `order`; order[start] is the first occurrence.
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (int64_t i = 0; i < n; ++i) {
    if (i == 0 || cmp(order[i - 1], order[i]) != 0) runs.emplace_back(i, i + 1);
    runs.back().second = i + 1;
  }
  if (!sorted) {
    std::sort(runs.begin(), runs.end(),
              [&](const auto& a, const auto& b) { return order[a.first] < order[b.first]; });
  }
  const int64_t u = static_cast<int64_t>(runs.size());
  for (int64_t j = 0; j < u; ++j) {
    auto [start, end] = runs[j];
    int64_t first = order[start];
    indices[j] = first;
    counts[j] = end - start;
    for (int64_t i = start; i < end; ++i) inverse[order[i]] = j;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(y + (o * u + j) * inner, in + (o * n + first) * inner,
                  static_cast<size_t>(inner) * sizeof(T));
  }
  extent[0] = u;
}

/// True when the IoU of boxes a and b (4 floats each) exceeds `threshold` (ONNX reference).
bool suppress(const float* a, const float* b, bool center, float threshold) {
  float ax0, ax1, ay0, ay1, bx0, bx1, by0, by1;
  if (!center) {  // [y1, x1, y2, x2], corners in any order
    ay0 = std::min(a[0], a[2]), ay1 = std::max(a[0], a[2]);
    ax0 = std::min(a[1], a[3]), ax1 = std::max(a[1], a[3]);
    by0 = std::min(b[0], b[2]), by1 = std::max(b[0], b[2]);
    bx0 = std::min(b[1], b[3]), bx1 = std::max(b[1], b[3]);
  } else {  // [x_center, y_center, width, height]
    ax0 = a[0] - a[2] / 2, ax1 = a[0] + a[2] / 2, ay0 = a[1] - a[3] / 2, ay1 = a[1] + a[3] / 2;
    bx0 = b[0] - b[2] / 2, bx1 = b[0] + b[2] / 2, by0 = b[1] - b[3] / 2, by1 = b[1] + b[3] / 2;
  }
  float ix0 = std::max(ax0, bx0), ix1 = std::min(ax1, bx1);
  if (ix1 <= ix0) return false;
  float iy0 = std::max(ay0, by0), iy1 = std::min(ay1, by1);
  if (iy1 <= iy0) return false;
  float inter = (ix1 - ix0) * (iy1 - iy0);
  if (inter <= 0) return false;
  float area_a = (ax1 - ax0) * (ay1 - ay0), area_b = (bx1 - bx0) * (by1 - by0);
  float uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

/// The first k of (value, index) pairs in TopK's order: the larger first (NaN the largest, as
/// in PyTorch) when `largest`, else the smaller first (NaN last); equal values by lower index.
/// A partial sort for a few of many (a heap, n log k), else a selection and a sort of the k.
template <typename T>
void first_k(std::vector<std::pair<T, int64_t>>& v, int64_t k, bool largest) {
  using P = std::pair<T, int64_t>;
  auto run = [&](auto before) {
    auto mid = v.begin() + k;
    if (k * 16 < static_cast<int64_t>(v.size())) {
      std::partial_sort(v.begin(), mid, v.end(), before);
    } else {
      if (mid != v.end()) std::nth_element(v.begin(), mid, v.end(), before);
      std::sort(v.begin(), mid, before);
    }
  };
  bool has_nan = false;
  if constexpr (std::is_floating_point_v<T>)
    for (const P& p : v) has_nan |= p.first != p.first;
  if (has_nan) {
    auto nan = [](T x) { return x != x; };
    run([&](const P& a, const P& b) {
      const bool na = nan(a.first), nb = nan(b.first);
      if (na || nb) return na && nb ? a.second < b.second : (largest ? na : nb);
      if (a.first != b.first) return largest ? a.first > b.first : a.first < b.first;
      return a.second < b.second;
    });
  } else if (largest) {
    run([](const P& a, const P& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
  } else {
    run([](const P& a, const P& b) {
      return a.first < b.first || (a.first == b.first && a.second < b.second);
    });
  }
}

/// TopK of the columns [o, :, i] of `in` viewed as [outer, n, inner], for the columns c in
/// [begin, end) (c = o * inner + i).
template <typename T>
void topk(const T* in, int64_t n, int64_t inner, int64_t k, bool largest, T* values,
          int64_t* indices, int64_t begin, int64_t end) {
  std::vector<std::pair<T, int64_t>> v(static_cast<size_t>(n));
  for (int64_t c = begin; c < end; ++c) {
    const int64_t o = c / inner, i = c % inner;
    const T* row = in + o * n * inner + i;
    for (int64_t j = 0; j < n; ++j) v[static_cast<size_t>(j)] = {row[j * inner], j};
    first_k(v, k, largest);
    T* vo = values + o * k * inner + i;
    int64_t* io = indices + o * k * inner + i;
    for (int64_t j = 0; j < k; ++j) {
      vo[j * inner] = v[static_cast<size_t>(j)].first;
      io[j * inner] = v[static_cast<size_t>(j)].second;
    }
  }
}

struct TopKCall {
  const void* in;
  int32_t code, bits;
  int64_t n, inner, k;
  bool largest;
  void* values;
  int64_t* indices;
};

int32_t topk_chunk(int64_t begin, int64_t end, void* closure) {
  const TopKCall& t = *static_cast<const TopKCall*>(closure);
  bool ok = dispatch(t.code, t.bits, [&](auto x) {
    using T = decltype(x);
    topk(static_cast<const T*>(t.in), t.n, t.inner, t.k, t.largest, static_cast<T*>(t.values),
         t.indices, begin, end);
  });
  return ok ? 0 : bad_type("kiln_topk", t.code, t.bits);
}

}  // namespace

extern "C" {

KILN_DLL int32_t kiln_dynamic_nonzero(const void* in, int32_t code, int32_t bits, int64_t rank,
                                      int64_t d0, int64_t d1, int64_t d2, int64_t d3, int64_t d4,
                                      int64_t d5, int64_t* out, int64_t* extent) {
  const int64_t dims[6] = {d0, d1, d2, d3, d4, d5};
  if (rank < 1 || rank > 6) {
    kiln_set_last_error("kiln_dynamic_nonzero: rank must be 1..6");
    return -1;
  }
  bool ok = dispatch(code, bits, [&](auto t) {
    nonzero(static_cast<const decltype(t)*>(in), rank, dims, out, extent);
  });
  return ok ? 0 : bad_type("kiln_dynamic_nonzero", code, bits);
}

KILN_DLL int32_t kiln_dynamic_unique(const void* in, int32_t code, int32_t bits, int64_t outer,
                                     int64_t n, int64_t inner, int32_t sorted, void* y,
                                     int64_t* indices, int64_t* inverse, int64_t* counts,
                                     int64_t* extent) {
  bool ok = dispatch(code, bits, [&](auto t) {
    using T = decltype(t);
    unique(static_cast<const T*>(in), outer, n, inner, sorted != 0, static_cast<T*>(y), indices,
           inverse, counts, extent);
  });
  return ok ? 0 : bad_type("kiln_dynamic_unique", code, bits);
}

KILN_DLL int32_t kiln_dynamic_nms(const float* boxes, const float* scores,
                                  const int64_t* max_output, const float* iou_threshold,
                                  const float* score_threshold, int32_t has_max_output,
                                  int32_t has_iou_threshold, int32_t has_score_threshold,
                                  int64_t batches, int64_t classes, int64_t num_boxes,
                                  int32_t center_point_box, int64_t* out, int64_t* extent) {
  const int64_t max_out = has_max_output ? std::max<int64_t>(max_output[0], 0) : 0;
  const float iou = has_iou_threshold ? iou_threshold[0] : 0.0f;
  int64_t k = 0;
  std::vector<int64_t> cand, kept;
  for (int64_t b = 0; b < batches; ++b) {
    const float* bb = boxes + b * num_boxes * 4;
    for (int64_t c = 0; c < classes; ++c) {
      const float* sc = scores + (b * classes + c) * num_boxes;
      cand.clear();
      kept.clear();
      for (int64_t i = 0; i < num_boxes; ++i)
        if (!has_score_threshold || sc[i] > score_threshold[0]) cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(),
                       [&](int64_t x, int64_t y) { return sc[x] > sc[y]; });
      for (int64_t i : cand) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool keep = true;
        for (int64_t j : kept) {
          if (suppress(bb + i * 4, bb + j * 4, center_point_box != 0, iou)) {
            keep = false;
            break;
          }
        }
        if (!keep) continue;
        kept.push_back(i);
        out[k * 3 + 0] = b;
        out[k * 3 + 1] = c;
        out[k * 3 + 2] = i;
        ++k;
      }
    }
  }
  extent[0] = k;
  return 0;
}

KILN_DLL int32_t kiln_topk(const void* in, int32_t code, int32_t bits, int64_t outer, int64_t n,
                           int64_t inner, int64_t k, int32_t largest, void* values,
                           int64_t* indices) {
  if (k < 0 || k > n) {
    kiln_set_last_error(
        ("kiln_topk: k " + std::to_string(k) + " is outside [0, " + std::to_string(n) + "]")
            .c_str());
    return -1;
  }
  if (k == 0 || outer * inner == 0) return 0;
  TopKCall call{in, code, bits, n, inner, k, largest != 0, values, indices};
  // Columns in parallel when there is enough work (n log k comparisons each).
  if (outer * inner * n < (int64_t{1} << 14)) return topk_chunk(0, outer * inner, &call);
  return kiln_parallel_for(outer * inner, topk_chunk, &call);
}

}  // extern "C"
