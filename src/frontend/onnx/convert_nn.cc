// ONNX neural-network layers beyond the basic table. ConvTranspose maps to the graph's
// conv2d_transpose (1-D as 2-D with a unit height; groups as one transposed convolution per
// group, concatenated; output_shape and auto_pad turned into pads and output_padding). Resize
// and Upsample are separable: each resized axis, innermost first, is a sum over the taps of the
// interpolation kernel (1 for nearest, 2 for linear, 4 for cubic) of take(x, index_k, axis) ·
// weight_k, with the per-output indices and weights computed at import time exactly as ONNX's
// reference does (coordinate transformation, nearest rounding, edge clamping, exclude_outside,
// tf_crop_and_resize's extrapolation value). InstanceNormalization, MeanVarianceNormalization
// and LRN are composed from reductions and element-wise ops.
#include "converter.h"

namespace kiln::frontend::onnx_import {

TransposeWindow transpose_window(Converter& c, const graph::TensorType& xt, const Ints& kernel) {
  const size_t sp = kernel.size();
  Ints strides = c.attr_ints("strides", Ints(sp, 1));
  Ints dil = c.attr_ints("dilations", Ints(sp, 1));
  Ints outpad = c.attr_ints("output_padding", Ints(sp, 0));
  Ints pads = c.attr_ints("pads", Ints(2 * sp, 0));
  KILN_USER_CHECK(strides.size() == sp && dil.size() == sp && outpad.size() == sp &&
                  pads.size() == 2 * sp)
      << c.where() << ": strides, dilations, output_padding or pads of the wrong length";
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  c.unsupported_if(auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
                       auto_pad != "SAME_LOWER",
                   "auto_pad=" + auto_pad);
  Ints out_shape = c.attr_ints("output_shape", {});
  if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // The total padding that gives the wanted size, split as ONNX says (the odd element at the
    // end for SAME_UPPER, at the start otherwise); a negative end is extra output padding.
    if (out_shape.size() == sp + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
    KILN_USER_CHECK(out_shape.empty() || out_shape.size() == sp)
        << c.where() << ": output_shape of " << out_shape.size() << " values for " << sp
        << " spatial axes";
    for (size_t d = 0; d < sp; ++d) {
      int64_t in = xt.shape[2 + d];
      int64_t want = out_shape.empty() ? in * strides[d] : out_shape[d];
      int64_t natural = strides[d] * (in - 1) + outpad[d] + (kernel[d] - 1) * dil[d] + 1;
      int64_t total = natural - want;
      auto floordiv2 = [](int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); };
      int64_t begin = auto_pad == "SAME_UPPER" ? floordiv2(total) : total - floordiv2(total);
      int64_t end = total - begin;
      c.unsupported_if(begin < 0, "an output_shape larger than the input allows at the start");
      if (end < 0) {
        outpad[d] -= end;
        end = 0;
      }
      pads[d] = begin;
      pads[d + sp] = end;
    }
  } else if (auto_pad == "VALID") {
    pads.assign(2 * sp, 0);
  }
  return {strides, dil, outpad, pads};
}

namespace {

using graph::Attrs;
using graph::Entry;
using Ints = std::vector<int64_t>;

// --- ConvTranspose

std::vector<Entry> convert_conv_transpose(Converter& c) {
  graph::TensorType xt = c.type_in(0), wt = c.type_in(1);
  size_t r = xt.shape.size();
  c.unsupported_if(r != 3 && r != 4, "ConvTranspose of a " + std::to_string(r) + "-D input" +
                                         " (only 1-D and 2-D windows)");
  KILN_USER_CHECK(wt.shape.size() == r)
      << c.where() << ": weight " << wt.str() << " does not match input " << xt.str();
  size_t sp = r - 2;  // spatial dimensions
  int64_t group = c.attr_int("group", 1);
  KILN_USER_CHECK(group >= 1 && xt.shape[1] % group == 0 && wt.shape[0] == xt.shape[1])
      << c.where() << ": " << xt.shape[1] << " input channels, weight " << wt.str() << ", group "
      << group;
  Ints kernel(wt.shape.begin() + 2, wt.shape.end());
  auto [strides, dil, outpad, pads] = transpose_window(c, xt, kernel);
  Entry x = c.in(0), w = c.in(1);
  if (sp == 1) {
    // 1-D: a unit height.
    x = c.op("unsqueeze", {x}, {{"axes", Ints{2}}});
    w = c.op("unsqueeze", {w}, {{"axes", Ints{2}}});
    strides.insert(strides.begin(), 1);
    dil.insert(dil.begin(), 1);
    outpad.insert(outpad.begin(), 0);
    pads = {0, pads[0], 0, pads[1]};
  } else {
    pads = {pads[0], pads[1], pads[2], pads[3]};
  }
  Attrs a{{"strides", strides}, {"padding", pads}, {"dilation", dil}, {"output_padding", outpad}};
  Entry y;
  if (group == 1) {
    y = c.op("conv2d_transpose", {x, w}, a);
  } else {
    int64_t cg = xt.shape[1] / group;
    std::vector<Entry> parts;
    for (int64_t g = 0; g < group; ++g) {
      Entry xg = c.op("strided_slice", {x},
                      {{"begin", Ints{g * cg}}, {"end", Ints{(g + 1) * cg}}, {"axes", Ints{1}}});
      Entry wg = c.op("strided_slice", {w},
                      {{"begin", Ints{g * cg}}, {"end", Ints{(g + 1) * cg}}, {"axes", Ints{0}}});
      parts.push_back(c.op("conv2d_transpose", {xg, wg}, a));
    }
    y = c.op("concat", parts, {{"axis", int64_t{1}}});
  }
  if (sp == 1) y = c.op("squeeze", {y}, {{"axes", Ints{2}}});
  if (c.has_input(2)) {
    Ints bshape(r, 1);
    bshape[1] = -1;
    y = c.op("add", {y, c.op("reshape", {c.in(2)}, {{"newshape", bshape}})});
  }
  return {y};
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
  t["ConvTranspose"] = convert_conv_transpose;
  t["Resize"] = [](Converter& c) { return convert_resize(c, false); };
  t["Upsample"] = [](Converter& c) { return convert_resize(c, true); };
  t["InstanceNormalization"] = convert_instance_norm;
  t["MeanVarianceNormalization"] = convert_mvn;
  t["LRN"] = convert_lrn;
}

}  // namespace kiln::frontend::onnx_import
