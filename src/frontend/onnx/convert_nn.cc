// ONNX neural-network layers other than convolution and pooling: Gemm and MatMul (dense /
// matmul; batched operands flattened to 3-D), BatchNormalization (inference; in training mode
// the batch statistics and the running ones are computed from reductions), LayerNormalization,
// Softmax / LogSoftmax / Hardmax (before opset 13 over the trailing dimensions flattened from
// `axis`), Dropout (inference only), Resize and Upsample, InstanceNormalization,
// MeanVarianceNormalization and LRN. Resize and Upsample are separable: each resized axis,
// innermost first, is a sum over the taps of the interpolation kernel (1 for nearest, 2 for
// linear, 4 for cubic) of take(x, index_k, axis) · weight_k, with the per-output indices and
// weights computed at import time exactly as ONNX's reference does (coordinate transformation,
// nearest rounding, edge clamping, exclude_outside, tf_crop_and_resize's extrapolation value).
// The normalizations are composed from reductions and element-wise ops.
#include "converter.h"

namespace kiln::frontend::onnx_import {

namespace {

const DataType kF32 = DataType::Float(32);

std::vector<Entry> convert_gemm(Converter& c) {
  Entry a = c.in(0), b = c.in(1);
  if (c.attr_int("transA", 0)) a = c.op("transpose", {a}, {{"axes", Ints{1, 0}}});
  // dense computes a · bᵀ, so B is transposed unless transB already is.
  if (!c.attr_int("transB", 0)) b = c.op("transpose", {b}, {{"axes", Ints{1, 0}}});
  Entry y = c.op("dense", {a, b});
  double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  auto scalar = [&](const char* hint, double v) {
    runtime::NDArray s = runtime::NDArray::empty({}, DataType::Float(32));
    s.data_as<float>()[0] = static_cast<float>(v);
    return c.constant(hint, s);
  };
  if (alpha != 1.0) y = c.op("multiply", {y, scalar("alpha", alpha)});
  if (c.has_input(2) && beta != 0.0) {
    Entry bias = c.in(2);
    if (beta != 1.0) bias = c.op("multiply", {bias, scalar("beta", beta)});
    y = c.op("add", {y, bias});
  }
  return {y};
}

std::vector<Entry> convert_matmul(Converter& c) {
  int ra = c.rank_of(c.in(0)), rb = c.rank_of(c.in(1));
  if (ra > 2 && rb == 2) {
    // [..., M, K] · [K, N]: the leading dimensions flattened into M (Linear layers on
    // sequences).
    Ints sa = c.type_in(0).shape, sb = c.type_in(1).shape;
    Entry a = c.op("reshape", {c.in(0)}, {{"newshape", Ints{-1, sa[ra - 1]}}});
    Ints out(sa.begin(), sa.end() - 1);
    out.push_back(sb[1]);
    return std::vector<Entry>{c.op("reshape", {c.op("matmul", {a, c.in(1)})}, {{"newshape", out}})};
  }
  if (ra >= 2 && rb >= 2 && std::max(ra, rb) > 2) {
    // Batched: the batch dimensions broadcast as numpy's (right-aligned; an operand whose batch
    // dimensions differ from the result's is expanded, e.g. grouped-query attention's keys
    // shared by several heads, unless it is one matrix), then flattened to one batch axis.
    Ints sa = c.type_in(0).shape, sb = c.type_in(1).shape;
    Ints ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
    Ints batch(std::max(ba.size(), bb.size()), 1);
    for (size_t k = 0; k < batch.size(); ++k) {
      const int64_t x = k < ba.size() ? ba[ba.size() - 1 - k] : 1;
      const int64_t y = k < bb.size() ? bb[bb.size() - 1 - k] : 1;
      KILN_USER_CHECK(x == y || x == 1 || y == 1)
          << c.where() << ": batch dimensions of " << c.type_in(0).str() << " and "
          << c.type_in(1).str() << " do not broadcast";
      batch[batch.size() - 1 - k] = std::max(x, y);
    }
    auto batched = [&](Entry e, const Ints& own, int64_t rows, int64_t cols) {
      int64_t n = 1;
      for (int64_t d : own) n *= d;
      // One matrix for every batch: batch_matmul broadcasts a batch of 1 itself.
      if (n == 1) return c.op("reshape", {e}, {{"newshape", Ints{1, rows, cols}}});
      if (own != batch) {
        Ints full = batch;
        full.push_back(rows);
        full.push_back(cols);
        e = c.op("where", {c.fill("ones", 1, DataType::Bool(), full), e, e});
      }
      return c.op("reshape", {e}, {{"newshape", Ints{-1, rows, cols}}});
    };
    Entry a = batched(c.in(0), ba, sa[ra - 2], sa[ra - 1]);
    Entry b = batched(c.in(1), bb, sb[rb - 2], sb[rb - 1]);
    Ints out = batch;
    out.push_back(sa[ra - 2]);
    out.push_back(sb[rb - 1]);
    return std::vector<Entry>{c.op("reshape", {c.op("matmul", {a, b})}, {{"newshape", out}})};
  }
  return std::vector<Entry>{c.op("matmul", {c.in(0), c.in(1)})};
}

std::vector<Entry> convert_batch_norm_inference(Converter& c) {
  c.unsupported_if(c.attr_int("training_mode", 0) != 0, "training_mode=1");
  return std::vector<Entry>{c.op("batch_norm", {c.in(0), c.in(1), c.in(2), c.in(3), c.in(4)},
                                 {{"epsilon", c.attr_float("epsilon", 1e-5)}})};
}

// --- BatchNormalization in training mode

std::vector<Entry> convert_batch_norm_training(Converter& c) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(t.dtype != kF32 && t.dtype != DataType::Float(64),
                   "BatchNormalization of " + t.dtype.str());
  size_t r = t.shape.size();
  KILN_USER_CHECK(r >= 2) << c.where() << ": the input must have a channel axis, not " << t.str();
  Ints axes{0}, bshape(r, 1);
  for (size_t k = 2; k < r; ++k) axes.push_back(int64_t(k));
  bshape[1] = -1;
  Entry x = c.in(0);
  Entry mean = c.op("mean", {x}, {{"axes", axes}, {"keepdims", int64_t{0}}});
  Entry d = c.op("subtract", {x, c.op("reshape", {mean}, {{"newshape", bshape}})});
  Entry var = c.op("mean", {c.op("multiply", {d, d})}, {{"axes", axes}, {"keepdims", int64_t{0}}});
  Entry y = c.op("batch_norm", {x, c.in(1), c.in(2), mean, var},
                 {{"epsilon", c.attr_float("epsilon", 1e-5)}});
  std::vector<Entry> outs{y};
  if (c.node->outputs.size() > 1) {
    double mom = c.attr_float("momentum", 0.9);
    auto running = [&](size_t i, Entry batch) {
      return c.op("add",
                  {c.op("multiply", {c.in(i), c.fill("momentum", mom, t.dtype)}),
                   c.op("multiply", {batch, c.fill("one_minus_momentum", 1 - mom, t.dtype)})});
    };
    outs.push_back(running(3, mean));
    outs.push_back(running(4, var));
  }
  return outs;
}

std::vector<Entry> convert_batch_norm(Converter& c) {
  if (c.opset < 14 || c.attr_int("training_mode", 0) == 0) return convert_batch_norm_inference(c);
  return convert_batch_norm_training(c);
}

std::vector<Entry> convert_softmax(Converter& c, const char* op) {
  int64_t axis = c.attr_int("axis", c.opset < 13 ? 1 : -1);
  if (c.opset < 13) {
    // Before opset 13, Softmax flattens to 2-D at `axis`: the same as the last-axis softmax only
    // when `axis` is the last axis.
    int r = c.rank_of(c.in(0));
    c.unsupported_if(r < 0 && axis != -1, "Softmax before opset 13 of a tensor of unknown rank");
    if (r >= 0) axis = norm_axis(c, axis, r);
    if (r >= 0 && axis != r - 1) {
      // Softmax over the trailing dimensions flattened into one, then the original shape back.
      Ints shape = c.type_in(0).shape;
      int64_t inner = 1;
      for (int64_t d = axis; d < r; ++d) inner *= shape[d];
      Entry flat = c.op("reshape", {c.in(0)}, {{"newshape", Ints{-1, inner}}});
      Entry y = c.op(op, {flat}, {{"axis", int64_t{-1}}});
      return {c.op("reshape", {y}, {{"newshape", shape}})};
    }
    axis = -1;
  }
  return {c.op(op, {c.in(0)}, {{"axis", axis}})};
}

/// Hardmax: 1 at the first maximum along the axis, 0 elsewhere (before opset 13, over the
/// trailing dimensions flattened from `axis`); a NaN counts as the maximum, as in ArgMax.
std::vector<Entry> convert_hardmax(Converter& c) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(!(t.dtype == DataType::Float(32) || t.dtype == DataType::Float(64)),
                   "Hardmax of " + t.dtype.str());
  int64_t r = static_cast<int64_t>(t.shape.size());
  int64_t axis = norm_axis(c, c.attr_int("axis", c.opset < 13 ? 1 : -1), r);
  Entry x = c.in(0);
  int64_t red = axis;
  if (c.opset < 13) {
    int64_t inner = 1;
    for (int64_t d = axis; d < r; ++d) inner *= t.shape[d];
    x = c.op("reshape", {x}, {{"newshape", Ints{-1, inner}}});
    red = 1;
  }
  int64_t len = 1;
  if (c.opset < 13)
    for (int64_t d = axis; d < r; ++d) len *= t.shape[d];
  else
    len = t.shape[axis];
  size_t rank = c.opset < 13 ? 2 : static_cast<size_t>(r);
  Attrs keep1{{"axes", Ints{red}}, {"keepdims", int64_t{1}}};
  Entry hit = c.op("equal", {x, c.op("max", {x}, keep1)});
  // A NaN is the maximum (max propagates NaN): the 1 goes to the first NaN, as
  // one_hot(argmax(x)) in PyTorch and ArgMax here. (ONNX Runtime's Hardmax gives a row of
  // zeros when the row starts with NaN and skips NaN elsewhere, which its ArgMax does not.)
  Entry nan = c.op("isnan", {x});
  hit = c.op("where", {nan, nan, hit});
  Entry idx = c.op("where", {hit, iota(c, len, rank, red),
                             c.fill("sentinel", static_cast<double>(len), DataType::Int(64))});
  Entry first = c.op("min", {idx}, keep1);
  Entry y = c.op("where", {c.op("equal", {iota(c, len, rank, red), first}),
                           c.fill("one", 1, t.dtype), c.fill("zero", 0, t.dtype)});
  if (c.opset < 13) y = c.op("reshape", {y}, {{"newshape", t.shape}});
  return {y};
}

std::vector<Entry> convert_layer_norm(Converter& c) {
  graph::TensorType t = c.type_in(0);
  int64_t r = static_cast<int64_t>(t.shape.size());
  int64_t axis = norm_axis(c, c.attr_int("axis", -1), r);
  Ints norm(t.shape.begin() + axis, t.shape.end());
  c.unsupported_if(c.type_in(1).shape != norm,
                   "LayerNormalization with a scale not of the normalized shape");
  Entry bias = c.has_input(2) ? c.in(2) : c.fill("bias", 0, t.dtype, norm);
  if (c.has_input(2))
    c.unsupported_if(c.type_in(2).shape != norm,
                     "LayerNormalization with a bias not of the normalized shape");
  double eps = c.attr_float("epsilon", 1e-5);
  std::vector<Entry> outs{c.op("layer_norm", {c.in(0), c.in(1), bias}, {{"epsilon", eps}})};
  bool stats = false;
  for (size_t i = 1; i < c.node->outputs.size(); ++i) stats |= !c.node->outputs[i].empty();
  if (stats) {
    // Mean and 1/sqrt(variance + epsilon) over the normalized axes, kept as size-1 dimensions,
    // in the stash type.
    c.unsupported_if(!(t.dtype == DataType::Float(32) || t.dtype == DataType::Float(64)),
                     "LayerNormalization's statistics of " + t.dtype.str());
    int64_t stash = c.attr_int("stash_type", 1);
    c.unsupported_if(stash != 1, "stash_type=" + std::to_string(stash));
    Ints axes;
    for (int64_t d = axis; d < r; ++d) axes.push_back(d);
    Attrs red{{"axes", axes}, {"keepdims", int64_t{1}}};
    Entry mean = c.op("mean", {c.in(0)}, red);
    Entry dev = c.op("subtract", {c.in(0), mean});
    Entry var = c.op("mean", {c.op("multiply", {dev, dev})}, red);
    Entry inv =
        c.op("reciprocal", {c.op("sqrt", {c.op("add", {var, c.fill("eps", eps, t.dtype)})})});
    if (t.dtype != DataType::Float(32)) {
      mean = c.op("cast", {mean}, {{"dtype", std::string("float32")}});
      inv = c.op("cast", {inv}, {{"dtype", std::string("float32")}});
    }
    outs.push_back(mean);
    outs.push_back(inv);
  }
  return outs;
}

std::vector<Entry> convert_dropout(Converter& c) {
  // Inference only: training_mode (input 2) must be absent or a constant false.
  if (c.has_input(2)) {
    const runtime::NDArray* tm = c.const_input(2);
    KILN_USER_CHECK(tm) << c.where()
                        << ": input 2 (training_mode) must be a constant; computed values "
                           "are not supported yet";
    // Training with ratio 0 drops nothing either.
    bool zero_ratio = c.has_input(1) && c.const_input(1) && c.const_scalar(1, "ratio") == 0.0;
    c.unsupported_if(!tm || tm->numel() != 1 || (tm->data_as<uint8_t>()[0] != 0 && !zero_ratio),
                     "Dropout in training mode");
  }
  std::vector<Entry> outs{c.op("identity", {c.in(0)})};
  // In inference the mask keeps every element.
  if (c.node->outputs.size() > 1 && !c.node->outputs[1].empty())
    outs.push_back(c.fill("mask", 1, DataType::Bool(), c.type_in(0).shape));
  return outs;
}

// --- Resize / Upsample

struct ResizeSpec {
  std::string mode = "nearest";      // nearest, linear, cubic
  std::string coord = "half_pixel";  // coordinate_transformation_mode
  std::string nearest_mode = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};

/// The taps of one resized axis: for output o and tap k, the (clamped) input index and the
/// weight; `valid[o]` false where tf_crop_and_resize falls outside the input.
struct AxisTaps {
  int taps = 1;
  std::vector<Ints> index;                  // [taps][n_out]
  std::vector<std::vector<double>> weight;  // [taps][n_out]
  std::vector<bool> valid;
  bool identity = true;
};

std::vector<double> tap_coeffs(const ResizeSpec& s, double ratio, bool integral) {
  if (s.mode == "nearest") {
    if (integral) return {0, 1};
    if (s.nearest_mode == "round_prefer_floor")
      return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
    if (s.nearest_mode == "round_prefer_ceil")
      return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    if (s.nearest_mode == "floor") return {1, 0};
    return {0, 1};  // ceil
  }
  if (s.mode == "linear") return {1 - ratio, ratio};
  double A = s.cubic_a, r = ratio, q = 1 - ratio;
  return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
          ((A + 2) * r - (A + 3)) * r * r + 1, ((A + 2) * q - (A + 3)) * q * q + 1,
          ((A * (q + 1) - 5 * A) * (q + 1) + 8 * A) * (q + 1) - 4 * A};
}

AxisTaps axis_taps(const ResizeSpec& s, int64_t n_in, int64_t n_out, double scale, double roi_lo,
                   double roi_hi) {
  AxisTaps t;
  t.taps = s.mode == "nearest" || s.mode == "linear" ? 2 : 4;
  t.index.assign(t.taps, Ints(n_out));
  t.weight.assign(t.taps, std::vector<double>(n_out));
  t.valid.assign(n_out, true);
  double out_w = scale * static_cast<double>(n_in), in_w = static_cast<double>(n_in);
  for (int64_t o = 0; o < n_out; ++o) {
    double x = static_cast<double>(o), xo = 0;
    const std::string& m = s.coord;
    if (m == "align_corners") {
      xo = out_w == 1 ? 0.0 : x * (in_w - 1) / (out_w - 1);
    } else if (m == "asymmetric") {
      xo = x / scale;
    } else if (m == "tf_crop_and_resize") {
      xo = out_w == 1 ? (roi_hi - roi_lo) * (in_w - 1) / 2
                      : x * (roi_hi - roi_lo) * (in_w - 1) / (out_w - 1);
      xo += roi_lo * (in_w - 1);
      if (xo < 0 || xo > in_w - 1) t.valid[o] = false;
    } else if (m == "pytorch_half_pixel") {
      xo = out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    } else if (m == "tf_half_pixel_for_nn") {
      xo = (x + 0.5) / scale;
    } else {  // half_pixel
      xo = (x + 0.5) / scale - 0.5;
    }
    double fl = std::floor(xo);
    bool integral = xo == fl;
    double ratio = integral ? 1.0 : xo - fl;
    std::vector<double> w = tap_coeffs(s, ratio, integral);
    // Neighbours: the taps nearest to xo, i.e. floor(xo) - taps/2 + 1 … (xo - 1 when integral,
    // matching the reference's tie-breaking towards the lower index).
    int64_t first = static_cast<int64_t>(integral ? xo - 1 : fl) - t.taps / 2 + 1;
    double sum = 0;
    for (int k = 0; k < t.taps; ++k) {
      int64_t idx = first + k;
      if (s.exclude_outside && (idx < 0 || idx >= n_in)) w[k] = 0;
      sum += w[k];
    }
    for (int k = 0; k < t.taps; ++k) {
      int64_t idx = std::clamp<int64_t>(first + k, 0, n_in - 1);
      t.index[k][o] = idx;
      t.weight[k][o] = s.exclude_outside && sum != 0 ? w[k] / sum : w[k];
      if (t.weight[k][o] != 0 && (t.weight[k][o] != 1 || idx != o)) t.identity = false;
    }
    if (!t.valid[o]) t.identity = false;
  }
  if (n_in != n_out) t.identity = false;
  return t;
}

/// Resizes `x` (type xt) to `out` with the given scales (ONNX's scale_factors) and roi.
Entry resize(Converter& c, Entry x, const graph::TensorType& xt, const Ints& out,
             const std::vector<double>& scales, const std::vector<double>& roi,
             const ResizeSpec& s) {
  size_t r = xt.shape.size();
  c.unsupported_if(
      s.mode != "nearest" && !(xt.dtype == DataType::Float(32) || xt.dtype == DataType::Float(64)),
      "Resize (" + s.mode + ") of " + xt.dtype.str());
  for (size_t ax = r; ax-- > 0;) {
    double lo = roi.empty() ? 0.0 : roi[ax], hi = roi.empty() ? 1.0 : roi[ax + r];
    KILN_USER_CHECK(out[ax] > 0) << c.where() << ": output dimension " << ax << " is empty";
    AxisTaps t = axis_taps(s, xt.shape[ax], out[ax], scales[ax], lo, hi);
    if (t.identity) continue;
    Ints wshape(r, 1);
    wshape[ax] = out[ax];
    auto index_const = [&](int k) {
      runtime::NDArray a = runtime::NDArray::empty({out[ax]}, DataType::Int(64));
      std::copy(t.index[k].begin(), t.index[k].end(), a.data_as<int64_t>());
      return c.constant("index", a);
    };
    auto take = [&](int k) {
      return c.op("take", {x, index_const(k)}, {{"axis", static_cast<int64_t>(ax)}});
    };
    Entry y;
    if (s.mode == "nearest") {
      // One input element per output: the tap of weight 1.
      Ints pick(out[ax]);
      for (int64_t o = 0; o < out[ax]; ++o)
        pick[o] = t.weight[0][o] != 0 ? t.index[0][o] : t.index[1][o];
      t.index[0] = pick;
      y = take(0);
    } else {
      for (int k = 0; k < t.taps; ++k) {
        runtime::NDArray w = runtime::NDArray::empty(wshape, xt.dtype);
        for (int64_t o = 0; o < out[ax]; ++o) c.set_elem(w, o, t.weight[k][o]);
        Entry term = c.op("multiply", {take(k), c.constant("weight", w)});
        y = k == 0 ? term : c.op("add", {y, term});
      }
    }
    bool all_valid = std::all_of(t.valid.begin(), t.valid.end(), [](bool v) { return v; });
    if (!all_valid) {
      runtime::NDArray m = runtime::NDArray::empty(wshape, DataType::Bool());
      for (int64_t o = 0; o < out[ax]; ++o) m.data_as<uint8_t>()[o] = t.valid[o];
      y = c.op("where",
               {c.constant("valid", m), y, c.fill("extrapolation", s.extrapolation, xt.dtype)});
    }
    x = y;
  }
  return x;
}

std::vector<double> const_floats(Converter& c, size_t i, const char* what) {
  const runtime::NDArray* a = c.const_input(i);
  KILN_USER_CHECK(a) << c.where() << ": input " << i << " (" << what
                     << ") must be a constant; computed values are not supported yet";
  std::vector<double> out;
  for (int64_t k = 0; k < a->numel(); ++k) {
    if (a->dtype() == DataType::Float(32))
      out.push_back(a->data_as<float>()[k]);
    else if (a->dtype() == DataType::Float(64))
      out.push_back(a->data_as<double>()[k]);
    else
      KILN_ERROR << c.where() << ": input " << i << " (" << what << ") must be float32/float64";
  }
  return out;
}

std::vector<Entry> convert_resize(Converter& c, bool upsample) {
  graph::TensorType xt = c.type_in(0);
  size_t r = xt.shape.size();
  ResizeSpec s;
  s.mode = c.attr_string("mode", "nearest");
  c.unsupported_if(
      s.mode != "nearest" && s.mode != "linear" && s.mode != "cubic" && s.mode != "bilinear",
      "Resize mode '" + s.mode + "'");
  if (s.mode == "bilinear") s.mode = "linear";
  std::vector<double> scales, roi;
  Ints out;
  if (upsample || c.opset < 11) {
    // Upsample and Resize-10: scales only, asymmetric coordinates, nearest rounds down.
    s.coord = "asymmetric";
    s.nearest_mode = upsample || c.opset < 11 ? "floor" : s.nearest_mode;
    if (upsample && c.opset < 9) {
      auto it = c.node->attrs.find("scales");
      KILN_USER_CHECK(it != c.node->attrs.end()) << c.where() << ": attribute 'scales' is required";
      const auto* v = std::get_if<std::vector<double>>(&it->second);
      KILN_USER_CHECK(v) << c.where() << ": attribute 'scales' must be a list of floats";
      scales = *v;
    } else {
      scales = const_floats(c, 1, "scales");
    }
  } else {
    s.coord = c.attr_string("coordinate_transformation_mode", "half_pixel");
    c.unsupported_if(s.coord != "half_pixel" && s.coord != "pytorch_half_pixel" &&
                         s.coord != "align_corners" && s.coord != "asymmetric" &&
                         s.coord != "tf_half_pixel_for_nn" && s.coord != "tf_crop_and_resize",
                     "coordinate_transformation_mode '" + s.coord + "'");
    s.nearest_mode = c.attr_string("nearest_mode", "round_prefer_floor");
    c.unsupported_if(s.nearest_mode != "round_prefer_floor" &&
                         s.nearest_mode != "round_prefer_ceil" && s.nearest_mode != "floor" &&
                         s.nearest_mode != "ceil",
                     "nearest_mode '" + s.nearest_mode + "'");
    s.cubic_a = c.attr_float("cubic_coeff_a", -0.75);
    s.exclude_outside = c.attr_int("exclude_outside", 0) != 0;
    s.extrapolation = c.attr_float("extrapolation_value", 0.0);
    c.unsupported_if(c.attr_int("antialias", 0) != 0, "antialias=1");
    c.unsupported_if(c.has_attr("axes"), "Resize with 'axes'");
    c.unsupported_if(c.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch",
                     "keep_aspect_ratio_policy other than 'stretch'");
    if (s.coord == "tf_crop_and_resize") roi = const_floats(c, 1, "roi");
    // sizes win over scales; an empty scales tensor counts as absent.
    if (c.has_input(3)) {
      out = c.const_ints(3, "sizes");
    } else {
      KILN_USER_CHECK(c.has_input(2)) << c.where() << ": Resize needs scales or sizes";
      scales = const_floats(c, 2, "scales");
    }
  }
  if (!out.empty()) {
    KILN_USER_CHECK(out.size() == r)
        << c.where() << ": sizes has " << out.size() << " entries for a rank-" << r << " input";
    scales.clear();
    for (size_t d = 0; d < r; ++d)
      scales.push_back(static_cast<double>(out[d]) / static_cast<double>(xt.shape[d]));
  } else {
    KILN_USER_CHECK(scales.size() == r)
        << c.where() << ": scales has " << scales.size() << " entries for a rank-" << r << " input";
    for (size_t d = 0; d < r; ++d) {
      KILN_USER_CHECK(scales[d] > 0) << c.where() << ": scale " << scales[d] << " is not positive";
      out.push_back(static_cast<int64_t>(std::floor(static_cast<double>(xt.shape[d]) * scales[d])));
    }
  }
  KILN_USER_CHECK(roi.empty() || roi.size() == 2 * r)
      << c.where() << ": roi has " << roi.size() << " entries for a rank-" << r << " input";
  return {resize(c, c.in(0), xt, out, scales, roi, s)};
}

// --- normalizations

std::vector<Entry> convert_instance_norm(Converter& c) {
  graph::TensorType t = c.type_in(0);
  size_t r = t.shape.size();
  c.unsupported_if(!(t.dtype == DataType::Float(32) || t.dtype == DataType::Float(64)),
                   "InstanceNormalization of " + t.dtype.str());
  KILN_USER_CHECK(r >= 3) << c.where() << ": input must be at least 3-D, got " << t.str();
  Ints axes;
  for (size_t d = 2; d < r; ++d) axes.push_back(static_cast<int64_t>(d));
  Attrs red{{"axes", axes}, {"keepdims", int64_t{1}}};
  Entry x = c.in(0);
  Entry dev = c.op("subtract", {x, c.op("mean", {x}, red)});
  Entry var = c.op("mean", {c.op("multiply", {dev, dev})}, red);
  Entry eps = c.fill("eps", c.attr_float("epsilon", 1e-5), t.dtype);
  Entry norm = c.op("divide", {dev, c.op("sqrt", {c.op("add", {var, eps})})});
  Ints cshape(r, 1);
  cshape[1] = -1;
  Entry scale = c.op("reshape", {c.in(1)}, {{"newshape", cshape}});
  Entry bias = c.op("reshape", {c.in(2)}, {{"newshape", cshape}});
  return {c.op("add", {c.op("multiply", {norm, scale}), bias})};
}

std::vector<Entry> convert_mvn(Converter& c) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(!(t.dtype == DataType::Float(32) || t.dtype == DataType::Float(64)),
                   "MeanVarianceNormalization of " + t.dtype.str());
  Ints axes = c.attr_ints("axes", {0, 2, 3});
  Attrs red{{"axes", axes}, {"keepdims", int64_t{1}}};
  Entry x = c.in(0);
  Entry dev = c.op("subtract", {x, c.op("mean", {x}, red)});
  Entry var = c.op("mean", {c.op("multiply", {dev, dev})}, red);
  // ONNX's function body adds 1e-9 under the square root.
  Entry eps = c.fill("eps", 1e-9, t.dtype);
  return {c.op("divide", {dev, c.op("sqrt", {c.op("add", {var, eps})})})};
}

/// LRN over channels: x / (bias + alpha / size · Σ x²)^beta, the sum over the window
/// [c - ⌊(size-1)/2⌋, c + ⌈(size-1)/2⌉].
std::vector<Entry> convert_lrn(Converter& c) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(!(t.dtype == DataType::Float(32) || t.dtype == DataType::Float(64)),
                   "LRN of " + t.dtype.str());
  size_t r = t.shape.size();
  KILN_USER_CHECK(r >= 3) << c.where() << ": input must be at least 3-D, got " << t.str();
  int64_t size = c.attr_int("size", 0);
  KILN_USER_CHECK(size > 0) << c.where() << ": size must be positive";
  double alpha = c.attr_float("alpha", 1e-4), beta = c.attr_float("beta", 0.75),
         bias = c.attr_float("bias", 1.0);
  int64_t before = (size - 1) / 2, after = size - 1 - before, ch = t.shape[1];
  Entry sq = c.op("multiply", {c.in(0), c.in(0)});
  Ints pb(r, 0), pa(r, 0);
  pb[1] = before;
  pa[1] = after;
  Entry padded = c.op("pad", {sq}, {{"pad_before", pb}, {"pad_after", pa}, {"value", 0.0}});
  Entry sum;
  for (int64_t k = 0; k < size; ++k) {
    Entry s = c.op("strided_slice", {padded},
                   {{"begin", Ints{k}}, {"end", Ints{k + ch}}, {"axes", Ints{1}}});
    sum = k == 0 ? s : c.op("add", {sum, s});
  }
  Entry base =
      c.op("add",
           {c.fill("bias", bias, t.dtype),
            c.op("multiply", {sum, c.fill("alpha", alpha / static_cast<double>(size), t.dtype)})});
  return {c.op("divide", {c.in(0), c.op("power", {base, c.fill("beta", beta, t.dtype)})})};
}

}  // namespace

void register_nn_converters(ConvertTable& t) {
  t.add("Gemm", convert_gemm);
  t.add("MatMul", convert_matmul);
  t.add("BatchNormalization", convert_batch_norm);
  t.add("LayerNormalization", convert_layer_norm);
  t.add("InstanceNormalization", convert_instance_norm);
  t.add("MeanVarianceNormalization", convert_mvn);
  t.add("LRN", convert_lrn);
  t.add("Softmax", [](Converter& c) { return convert_softmax(c, "softmax"); });
  t.add("LogSoftmax", [](Converter& c) { return convert_softmax(c, "log_softmax"); });
  t.add("Hardmax", convert_hardmax);
  t.add("Dropout", convert_dropout);
  t.add("Resize", [](Converter& c) { return convert_resize(c, false); });
  t.add("Upsample", [](Converter& c) { return convert_resize(c, true); });
}

}  // namespace kiln::frontend::onnx_import
