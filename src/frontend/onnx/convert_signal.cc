// ONNX importer: signal processing and sampling operators.
//
// DFT and STFT become the graph ops dft / stft with a float64 weight table (cos / sin of the
// transform, built here in double by topi::dft_weights) as a constant input; the transform
// length, axis and frame step must be constants. MelWeightMatrix's inputs are all parameters:
// its matrix is computed here (after the ONNX reference) and becomes a constant. Det,
// GridSample and RoiAlign map to det, grid_sample and roi_align. Attribute values Kiln does not
// implement are refused with an error naming the node, the op and the value.
#include "converter.h"
#include "kiln/topi/signal.h"

namespace kiln::frontend::onnx_import {

namespace {

using Entries = std::vector<Entry>;

int64_t flag_attr(const Converter& c, const char* name, int64_t dflt) {
  int64_t v = c.attr_int(name, dflt);
  KILN_USER_CHECK(v == 0 || v == 1)
      << c.where() << ": attribute '" << name << "' must be 0 or 1, got " << v;
  return v;
}

int64_t scalar_int(const Converter& c, size_t i, const char* what) {
  Ints v = c.const_ints(i, what);
  KILN_USER_CHECK(v.size() == 1) << c.where() << ": input " << i << " (" << what
                                 << ") must be a scalar, got " << v.size() << " values";
  return v[0];
}

Entries convert_dft(Converter& c) {
  graph::TensorType tx = c.type_in(0);
  const int64_t r = static_cast<int64_t>(tx.shape.size());
  KILN_USER_CHECK(r >= 2) << c.where() << ": input must have rank >= 2 ([..., 1 or 2]), got "
                          << tx.str();
  KILN_USER_CHECK(tx.dtype.is_float()) << c.where() << ": input must be float, got " << tx.str();
  const int64_t parts = tx.shape[r - 1];
  KILN_USER_CHECK(parts == 1 || parts == 2)
      << c.where() << ": the last dimension must be 1 (real) or 2 (complex), got " << tx.str();
  int64_t axis =
      c.opset >= 20 ? (c.has_input(2) ? scalar_int(c, 2, "axis") : -2) : c.attr_int("axis", 1);
  axis = norm_axis(c, axis, r);
  KILN_USER_CHECK(axis < r - 1) << c.where() << ": axis " << axis << " is the complex dimension of "
                                << tx.str();
  const bool inverse = flag_attr(c, "inverse", 0) != 0;
  const bool onesided = flag_attr(c, "onesided", 0) != 0;
  const int64_t len = tx.shape[axis];
  int64_t n =
      c.has_input(1) ? scalar_int(c, 1, "dft_length") : (inverse && onesided ? 2 * (len - 1) : len);
  KILN_USER_CHECK(n >= 1) << c.where() << ": dft_length must be positive, got " << n;
  runtime::NDArray w = topi::dft_weights(len, parts, n, inverse, onesided);
  return {c.op("dft", {c.in(0), c.constant("dft_weights", w)}, {{"axis", axis}})};
}

Entries convert_stft(Converter& c) {
  graph::TensorType tx = c.type_in(0);
  KILN_USER_CHECK(tx.shape.size() == 3 && (tx.shape[2] == 1 || tx.shape[2] == 2))
      << c.where() << ": signal must be [batch, length, 1 or 2], got " << tx.str();
  KILN_USER_CHECK(tx.dtype.is_float()) << c.where() << ": signal must be float, got " << tx.str();
  const int64_t step = scalar_int(c, 1, "frame_step");
  KILN_USER_CHECK(step >= 1) << c.where() << ": frame_step must be positive, got " << step;
  const bool onesided = flag_attr(c, "onesided", 1) != 0;
  int64_t frame = tx.shape[1];
  if (c.has_input(3)) {
    frame = scalar_int(c, 3, "frame_length");
  } else if (c.has_input(2)) {
    graph::TensorType tw = c.type_in(2);
    KILN_USER_CHECK(tw.shape.size() == 1) << c.where() << ": window must be 1-D, got " << tw.str();
    frame = tw.shape[0];
  }
  KILN_USER_CHECK(frame >= 1 && frame <= tx.shape[1])
      << c.where() << ": frame_length " << frame << " must be in [1, " << tx.shape[1]
      << "] (the signal length)";
  Entry window;
  if (c.has_input(2)) {
    graph::TensorType tw = c.type_in(2);
    KILN_USER_CHECK(tw.shape == Ints{frame} && tw.dtype == tx.dtype)
        << c.where() << ": window " << tw.str() << " must be [" << frame << "] of " << tx.dtype;
    window = c.in(2);
  } else {
    window = c.fill("window", 1.0, tx.dtype, {frame});
  }
  runtime::NDArray w = topi::dft_weights(frame, tx.shape[2], frame, false, onesided);
  return {c.op("stft", {c.in(0), window, c.constant("dft_weights", w)}, {{"frame_step", step}})};
}

/// The ONNX reference's MelWeightMatrix (triangular filters on the mel scale), computed here.
Entries convert_mel(Converter& c) {
  const int64_t bins = scalar_int(c, 0, "num_mel_bins");
  const int64_t dft_length = scalar_int(c, 1, "dft_length");
  const int64_t rate = scalar_int(c, 2, "sample_rate");
  const double lower = c.const_scalar(3, "lower_edge_hertz");
  const double upper = c.const_scalar(4, "upper_edge_hertz");
  KILN_USER_CHECK(bins >= 1 && dft_length >= 1 && rate >= 1)
      << c.where() << ": num_mel_bins, dft_length and sample_rate must be positive, got " << bins
      << ", " << dft_length << ", " << rate;
  DataType t = onnx_elem_type(c.attr_int("output_datatype", 1));
  c.unsupported_if(t.is_void() || t.is_bool(),
                   "output_datatype " + std::to_string(c.attr_int("output_datatype", 1)));
  const int64_t spec_bins = dft_length / 2 + 1;
  const double low_mel = 2595.0 * std::log1p(lower / 700.0) / std::log(10.0);
  const double high_mel = 2595.0 * std::log1p(upper / 700.0) / std::log(10.0);
  const double step = (high_mel - low_mel) / static_cast<double>(bins + 2);
  std::vector<int64_t> fb(bins + 2);
  for (int64_t i = 0; i < bins + 2; ++i) {
    double mel = static_cast<double>(i) * step + low_mel;
    double hz = 700.0 * std::expm1(mel / 2595.0 * std::log(10.0));
    fb[i] = static_cast<int64_t>(
        std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(rate)));
    KILN_USER_CHECK(fb[i] >= 0 && fb[i] < spec_bins)
        << c.where() << ": mel bin edge " << fb[i] << " is outside the " << spec_bins
        << " spectrogram bins";
  }
  std::vector<double> m(spec_bins * bins, 0.0);
  for (int64_t i = 0; i < bins; ++i) {
    int64_t lo = fb[i], mid = fb[i + 1], hi = fb[i + 2];
    if (mid == lo) {
      m[mid * bins + i] = 1;
    } else {
      for (int64_t j = lo; j <= mid; ++j)
        m[j * bins + i] = static_cast<double>(j - lo) / static_cast<double>(mid - lo);
    }
    if (hi > mid) {
      for (int64_t j = mid; j < hi; ++j)
        m[j * bins + i] = static_cast<double>(hi - j) / static_cast<double>(hi - mid);
    }
  }
  runtime::NDArray a = runtime::NDArray::empty({spec_bins, bins}, t);
  for (int64_t k = 0; k < a.numel(); ++k) c.set_elem(a, k, m[k]);
  return {c.constant("mel_weight_matrix", a)};
}

Entries convert_grid_sample(Converter& c) {
  graph::TensorType tx = c.type_in(0);
  c.unsupported_if(tx.shape.size() != 4, "GridSample on a rank-" + std::to_string(tx.shape.size()) +
                                             " input (only [N, C, H, W])");
  std::string mode = c.attr_string("mode", c.opset >= 20 ? "linear" : "bilinear");
  bool known = c.opset >= 20 ? (mode == "linear" || mode == "nearest" || mode == "cubic")
                             : (mode == "bilinear" || mode == "nearest" || mode == "bicubic");
  c.unsupported_if(!known, "mode '" + mode + "'");
  std::string pad = c.attr_string("padding_mode", "zeros");
  c.unsupported_if(pad != "zeros" && pad != "border" && pad != "reflection",
                   "padding_mode '" + pad + "'");
  int64_t align = flag_attr(c, "align_corners", 0);
  return {c.op("grid_sample", {c.in(0), c.in(1)},
               {{"mode", mode}, {"padding_mode", pad}, {"align_corners", align}})};
}

Entries convert_roi_align(Converter& c) {
  std::string mode = c.attr_string("mode", "avg");
  c.unsupported_if(mode != "avg" && mode != "max", "mode '" + mode + "'");
  std::string ctm = c.attr_string("coordinate_transformation_mode",
                                  c.opset >= 16 ? "half_pixel" : "output_half_pixel");
  c.unsupported_if(ctm != "half_pixel" && ctm != "output_half_pixel",
                   "coordinate_transformation_mode '" + ctm + "'");
  int64_t oh = c.attr_int("output_height", 1), ow = c.attr_int("output_width", 1);
  KILN_USER_CHECK(oh >= 1 && ow >= 1)
      << c.where() << ": output_height and output_width must be positive, got " << oh << " and "
      << ow;
  int64_t ratio = c.attr_int("sampling_ratio", 0);
  c.unsupported_if(ratio == 0,
                   "sampling_ratio 0 (adaptive: the sample count depends on the "
                   "data)");
  KILN_USER_CHECK(ratio > 0) << c.where() << ": sampling_ratio must be >= 0, got " << ratio;
  double scale = c.attr_float("spatial_scale", 1.0);
  return {c.op("roi_align", {c.in(0), c.in(1), c.in(2)},
               {{"output_height", oh},
                {"output_width", ow},
                {"sampling_ratio", ratio},
                {"spatial_scale", scale},
                {"half_pixel", int64_t{ctm == "half_pixel" ? 1 : 0}},
                {"mode", mode}})};
}

}  // namespace

void register_signal_converters(ConvertTable& t) {
  t.add("DFT", convert_dft);
  t.add("STFT", convert_stft);
  t.add("MelWeightMatrix", convert_mel);
  t.add("Det", [](Converter& c) { return Entries{c.op("det", {c.in(0)})}; });
  t.add("GridSample", convert_grid_sample);
  t.add("RoiAlign", convert_roi_align);
}

}  // namespace kiln::frontend::onnx_import
