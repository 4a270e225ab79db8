// ONNX importer: convolution and pooling over 1-D and 3-D windows, MaxPool's Indices output and
// PRelu's per-channel slope of the old opsets. Each converter wraps the one registered before it
// (convert.cc, convert_nn.cc), which keeps the cases it handles (2-D Conv and pools, 1-D pools,
// 1-D and 2-D ConvTranspose). A 1-D Conv runs as the 2-D conv2d over a unit height (so it gets
// conv2d's fast path); 3-D Conv, ConvTranspose and pools map to the graph's conv3d,
// conv3d_transpose, max_pool_nd and avg_pool_nd (ops_ndim.cc). MaxPool with an Indices output is
// max_pool_nd plus max_pool_nd_indices over any window rank. auto_pad SAME_* is turned into
// explicit pads from the input's inferred shape as ONNX defines it (the odd element at the end
// for SAME_UPPER, at the start for SAME_LOWER).
#include "converter.h"

namespace kiln::frontend::onnx_import {

namespace {

std::string ints_text(const Ints& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// Window attributes of a Conv / pool node with `sp` spatial axes; pads are begins then ends.
struct Window {
  Ints kernel, strides, dilations, pads;
};

Window window_of(const Converter& c, size_t sp, const Ints& kernel) {
  Window w;
  w.kernel = c.attr_ints("kernel_shape", kernel);
  w.strides = c.attr_ints("strides", Ints(sp, 1));
  w.dilations = c.attr_ints("dilations", Ints(sp, 1));
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  c.unsupported_if(auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
                       auto_pad != "SAME_LOWER",
                   "auto_pad=" + auto_pad);
  w.pads = auto_pad == "VALID" ? Ints(2 * sp, 0) : c.attr_ints("pads", Ints(2 * sp, 0));
  KILN_USER_CHECK(w.kernel.size() == sp && w.strides.size() == sp && w.dilations.size() == sp &&
                  w.pads.size() == 2 * sp)
      << c.where() << ": kernel_shape " << ints_text(w.kernel) << ", strides "
      << ints_text(w.strides) << ", dilations " << ints_text(w.dilations) << " or pads "
      << ints_text(w.pads) << " of the wrong length for a " << sp << "-D window";
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    Ints shape = c.type_in(0).shape;
    KILN_USER_CHECK(shape.size() == sp + 2)
        << c.where() << ": input of rank " << shape.size() << " for a " << sp << "-D window";
    for (size_t d = 0; d < sp; ++d) {
      int64_t in = shape[2 + d], st = w.strides[d];
      int64_t out = (in + st - 1) / st;
      int64_t total =
          std::max<int64_t>(0, (out - 1) * st + (w.kernel[d] - 1) * w.dilations[d] + 1 - in);
      int64_t small = total / 2, big = total - small;
      w.pads[d] = auto_pad == "SAME_UPPER" ? small : big;
      w.pads[d + sp] = auto_pad == "SAME_UPPER" ? big : small;
    }
  }
  return w;
}

/// The number of spatial axes of a Conv / ConvTranspose node: from kernel_shape, else the
/// weight's or the input's rank; 0 when none is known.
size_t conv_spatial_rank(const Converter& c) {
  if (c.has_attr("kernel_shape")) return c.attr_ints("kernel_shape", {}).size();
  int r = c.rank_of(c.in(1));
  if (r < 0) r = c.rank_of(c.in(0));
  return r >= 2 ? static_cast<size_t>(r - 2) : 0;
}

void check_window_rank(const Converter& c, size_t sp) {
  c.unsupported_if(sp < 1 || sp > 3,
                   "a " + std::to_string(sp) + "-D window (only 1-D, 2-D and 3-D)");
}

Entry add_bias(Converter& c, Entry y, size_t rank) {
  if (!c.has_input(2)) return y;
  Ints shape(rank, 1);
  shape[1] = -1;
  return c.op("add", {y, c.op("reshape", {c.in(2)}, {{"newshape", shape}})});
}

std::vector<Entry> convert_conv_nd(Converter& c, size_t sp) {
  Ints wshape = c.type_in(1).shape;
  KILN_USER_CHECK(wshape.size() == sp + 2)
      << c.where() << ": weight of shape " << ints_text(wshape) << " for a " << sp << "-D window";
  Window w = window_of(c, sp, Ints(wshape.begin() + 2, wshape.end()));
  KILN_USER_CHECK(Ints(wshape.begin() + 2, wshape.end()) == w.kernel)
      << c.where() << ": kernel_shape " << ints_text(w.kernel) << " does not match the weight "
      << ints_text(wshape);
  int64_t group = c.attr_int("group", 1);
  if (sp == 1) {
    // A unit height: conv2d over [N, C, 1, L] with an [O, C/g, 1, K] kernel.
    Entry x = c.op("unsqueeze", {c.in(0)}, {{"axes", Ints{2}}});
    Entry k = c.op("unsqueeze", {c.in(1)}, {{"axes", Ints{2}}});
    Entry y = c.op("conv2d", {x, k},
                   {{"strides", Ints{1, w.strides[0]}},
                    {"padding", Ints{0, w.pads[0], 0, w.pads[1]}},
                    {"dilation", Ints{1, w.dilations[0]}},
                    {"groups", group}});
    y = c.op("squeeze", {y}, {{"axes", Ints{2}}});
    return {add_bias(c, y, 3)};
  }
  Entry y = c.op(
      "conv3d", {c.in(0), c.in(1)},
      {{"strides", w.strides}, {"padding", w.pads}, {"dilation", w.dilations}, {"groups", group}});
  return {add_bias(c, y, 5)};
}

/// ConvTranspose over a 3-D window (window attributes resolved by transpose_window, as for
/// 1-D / 2-D).
std::vector<Entry> convert_conv_transpose_3d(Converter& c) {
  graph::TensorType xt = c.type_in(0), wt = c.type_in(1);
  KILN_USER_CHECK(wt.shape.size() == 5)
      << c.where() << ": weight " << wt.str() << " does not match input " << xt.str();
  int64_t group = c.attr_int("group", 1);
  KILN_USER_CHECK(group >= 1 && xt.shape[1] % group == 0 && wt.shape[0] == xt.shape[1])
      << c.where() << ": " << xt.shape[1] << " input channels, weight " << wt.str() << ", group "
      << group;
  Ints kernel(wt.shape.begin() + 2, wt.shape.end());
  KILN_USER_CHECK(c.attr_ints("kernel_shape", kernel) == kernel)
      << c.where() << ": kernel_shape " << ints_text(c.attr_ints("kernel_shape", kernel))
      << " does not match the weight " << wt.str();
  auto [strides, dil, outpad, pads] = transpose_window(c, xt, kernel);
  Entry y = c.op("conv3d_transpose", {c.in(0), c.in(1)},
                 {{"strides", strides},
                  {"padding", pads},
                  {"dilation", dil},
                  {"output_padding", outpad},
                  {"groups", group}});
  return {add_bias(c, y, 5)};
}

/// MaxPool / AveragePool over any window rank through max_pool_nd / avg_pool_nd, with MaxPool's
/// Indices.
std::vector<Entry> convert_pool_nd(Converter& c, bool is_max) {
  Ints k = c.attr_ints("kernel_shape", {});
  size_t sp = k.size();
  check_window_rank(c, sp);
  Window w = window_of(c, sp, k);
  graph::Attrs a{{"pool_size", w.kernel},
                 {"strides", w.strides},
                 {"padding", w.pads},
                 {"dilation", w.dilations},
                 {"ceil_mode", c.attr_int("ceil_mode", 0)}};
  if (!is_max) a.set("count_include_pad", c.attr_int("count_include_pad", 0));
  Entry x = c.in(0);
  DataType t = c.dtype_of(x);
  bool narrow = is_max && (t == DataType::UInt(8) || t == DataType::Int(8));
  c.unsupported_if(!t.is_void() && !t.is_float() && !narrow,
                   std::string(is_max ? "MaxPool" : "AveragePool") + " of " + t.str());
  // 8-bit max pooling runs in float32 (exact) and converts back.
  Entry xf = narrow ? c.op("cast", {x}, {{"dtype", std::string("float32")}}) : x;
  Entry y = c.op(is_max ? "max_pool_nd" : "avg_pool_nd", {xf}, a);
  if (narrow) y = c.op("cast", {y}, {{"dtype", t.str()}});
  std::vector<Entry> outs{y};
  if (is_max && c.node->outputs.size() > 1 && !c.node->outputs[1].empty()) {
    graph::Attrs ia = a;
    ia.set("storage_order", c.attr_int("storage_order", 0));
    outs.push_back(c.op("max_pool_nd_indices", {xf}, ia));
  }
  return outs;
}

bool wants_indices(const Converter& c) {
  return c.node->outputs.size() > 1 && !c.node->outputs[1].empty();
}

}  // namespace

void register_ndim_converters(ConvertTable& t) {
  ConvertFn conv = t.at("Conv");
  t["Conv"] = [conv](Converter& c) -> std::vector<Entry> {
    size_t sp = conv_spatial_rank(c);
    if (sp == 2 || sp == 0) return conv(c);
    check_window_rank(c, sp);
    return convert_conv_nd(c, sp);
  };
  ConvertFn convt = t.at("ConvTranspose");
  t["ConvTranspose"] = [convt](Converter& c) -> std::vector<Entry> {
    size_t sp = conv_spatial_rank(c);
    if (sp > 3) check_window_rank(c, sp);
    if (sp != 3) return convt(c);
    return convert_conv_transpose_3d(c);
  };
  ConvertFn maxpool = t.at("MaxPool");
  t["MaxPool"] = [maxpool](Converter& c) -> std::vector<Entry> {
    size_t sp = c.attr_ints("kernel_shape", {}).size();
    if ((sp == 1 || sp == 2) && !wants_indices(c)) return maxpool(c);
    return convert_pool_nd(c, true);
  };
  ConvertFn avgpool = t.at("AveragePool");
  t["AveragePool"] = [avgpool](Converter& c) -> std::vector<Entry> {
    size_t sp = c.attr_ints("kernel_shape", {}).size();
    if (sp == 1 || sp == 2) return avgpool(c);
    return convert_pool_nd(c, false);
  };
  ConvertFn prelu = t.at("PRelu");
  t["PRelu"] = [prelu](Converter& c) -> std::vector<Entry> {
    // Before opset 7 a slope that is not a single value is per channel (axis 1), not
    // broadcast from the trailing axes: [C] becomes [C, 1, …, 1].
    int r = c.rank_of(c.in(0));
    if (c.opset >= 7 || r < 3 || c.rank_of(c.in(1)) != 1) return prelu(c);
    graph::TensorType xt = c.type_in(0), st = c.type_in(1);
    if (st.shape[0] == 1) return prelu(c);
    KILN_USER_CHECK(st.shape[0] == xt.shape[1])
        << c.where() << ": slope " << st.str() << " is neither one value nor one per channel of "
        << xt.str();
    Ints shape(static_cast<size_t>(r - 1), 1);
    shape[0] = -1;
    Entry slope = c.op("reshape", {c.in(1)}, {{"newshape", shape}});
    Entry x = c.in(0);
    Entry zero = c.fill("zero", 0, xt.dtype);
    return {c.op("where", {c.op("less", {x, zero}), c.op("multiply", {x, slope}), x})};
  };
}

}  // namespace kiln::frontend::onnx_import
