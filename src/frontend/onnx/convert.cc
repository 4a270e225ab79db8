// ONNX -> graph IR. One converter function per ONNX operator, in a table keyed by op type; a
// converter reads the node's attributes (with ONNX's defaults for the model's opset) and its
// constant inputs (shape, axes, pads, … given as initializers or Constant nodes) and adds graph
// ops. Before converting anything, every node is checked against the table so that all
// unsupported operators are reported together. Converters that need a value's type (Shape,
// Split, Trilu, auto_pad, …) run graph::infer_types over the graph built so far; inputs computed
// from constants only (Shape → Slice → Concat → Reshape chains) are constant-folded on demand.
// Operators the graph registry lacks are composed from its ops: ArgMax, GatherElements and the
// losses with one-hot masks (equal against an index constant, where, sum), CumSum as a product
// with a triangular mask. Further families live in convert_<family>.cc (converter.h lists them).
#include "converter.h"

namespace kiln::frontend::onnx_import {

/// Spatial attributes of 2-D Conv/Pool nodes.
struct Spatial {
  Ints kernel, strides, pads, dilations;
};
Spatial spatial(const Converter& c, Ints kernel) {
  Spatial s;
  s.kernel = c.attr_ints("kernel_shape", kernel);
  c.unsupported_if(s.kernel.size() != 2,
                   "a " + std::to_string(s.kernel.size()) + "-D window (only 2-D)");
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  c.unsupported_if(auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
                       auto_pad != "SAME_LOWER",
                   "auto_pad=" + auto_pad);
  s.strides = c.attr_ints("strides", {1, 1});
  s.dilations = c.attr_ints("dilations", {1, 1});
  s.pads = auto_pad == "VALID" ? Ints{0, 0, 0, 0} : c.attr_ints("pads", {0, 0, 0, 0});
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // Output size ceil(in / stride); the total padding is split evenly, the odd element going
    // after (SAME_UPPER) or before (SAME_LOWER).
    Ints shape = c.type_in(0).shape;
    c.unsupported_if(shape.size() != 4 || s.strides.size() != 2 || s.dilations.size() != 2,
                     "auto_pad of a tensor that is not 4-D");
    for (size_t d = 0; d < 2; ++d) {
      int64_t in = shape[2 + d], st = s.strides[d];
      int64_t out = (in + st - 1) / st;
      int64_t total =
          std::max<int64_t>(0, (out - 1) * st + (s.kernel[d] - 1) * s.dilations[d] + 1 - in);
      int64_t small = total / 2, big = total - small;
      s.pads[d] = auto_pad == "SAME_UPPER" ? small : big;
      s.pads[d + 2] = auto_pad == "SAME_UPPER" ? big : small;
    }
  }
  return s;
}

std::vector<Entry> convert_conv(Converter& c) {
  const runtime::NDArray* w = c.const_input(1);
  Ints kshape = w && w->ndim() == 4 ? Ints{w->shape()[2], w->shape()[3]} : Ints{};
  Spatial s = spatial(c, kshape);
  Entry y = c.op("conv2d", {c.in(0), c.in(1)},
                 {{"strides", s.strides},
                  {"padding", s.pads},
                  {"dilation", s.dilations},
                  {"groups", c.attr_int("group", 1)}});
  if (c.has_input(2)) {
    Entry b = c.op("reshape", {c.in(2)}, {{"newshape", Ints{1, -1, 1, 1}}});
    y = c.op("add", {y, b});
  }
  return {y};
}

std::vector<Entry> convert_pool_2d(Converter& c, const char* op);

/// Pooling: 1-D windows run as 2-D ones over a unit height.
std::vector<Entry> convert_pool(Converter& c, const char* op) {
  if (c.attr_ints("kernel_shape", {}).size() != 1) return convert_pool_2d(c, op);
  c.unsupported_if(c.attr_string("auto_pad", "NOTSET") != "NOTSET", "auto_pad of a 1-D pool");
  c.unsupported_if(c.node->outputs.size() > 1 && !c.node->outputs[1].empty(),
                   "MaxPool's Indices output");
  Ints k = c.attr_ints("kernel_shape", {}), st = c.attr_ints("strides", {1}),
       dl = c.attr_ints("dilations", {1}), p = c.attr_ints("pads", {0, 0});
  KILN_USER_CHECK(st.size() == 1 && dl.size() == 1 && p.size() == 2)
      << c.where() << ": strides, dilations or pads of the wrong length for a 1-D window";
  bool is_max = std::string(op) == "max_pool2d";
  c.unsupported_if(p[0] > ((k[0] - 1) * dl[0] + 1) / 2 || p[1] > ((k[0] - 1) * dl[0] + 1) / 2,
                   "padding wider than half the pooling window");
  Attrs a{{"pool_size", Ints{1, k[0]}},
          {"strides", Ints{1, st[0]}},
          {"padding", Ints{0, p[0], 0, p[1]}},
          {"ceil_mode", c.attr_int("ceil_mode", 0)}};
  if (is_max)
    a.set("dilation", Ints{1, dl[0]});
  else
    a.set("count_include_pad", c.attr_int("count_include_pad", 0));
  Entry x = c.op("unsqueeze", {c.in(0)}, {{"axes", Ints{2}}});
  return {c.op("squeeze", {c.op(op, {x}, a)}, {{"axes", Ints{2}}})};
}

std::vector<Entry> convert_pool_2d(Converter& c, const char* op) {
  c.unsupported_if(c.node->outputs.size() > 1 && !c.node->outputs[1].empty(),
                   "MaxPool's Indices output");
  Spatial s = spatial(c, {});
  Attrs a{{"pool_size", s.kernel},
          {"strides", s.strides},
          {"padding", s.pads},
          {"ceil_mode", c.attr_int("ceil_mode", 0)}};
  bool is_max = std::string(op) == "max_pool2d";
  if (is_max)
    a.set("dilation", s.dilations);
  else
    a.set("count_include_pad", c.attr_int("count_include_pad", 0));
  Entry x = c.in(0);
  DataType xt = c.dtype_of(x);
  if (is_max && (xt == DataType::UInt(8) || xt == DataType::Int(8))) {
    // 8-bit max pooling in float32 (exact), converted back.
    c.unsupported_if(c.node->outputs.size() > 1, "MaxPool's Indices output");
    Entry f = c.op("cast", {x}, {{"dtype", std::string("float32")}});
    Entry y = c.op(op, {f}, a);
    bool pads_wide = false;
    for (size_t d = 0; d < 4; ++d)
      pads_wide |= s.pads[d] > ((s.kernel[d % 2] - 1) * s.dilations[d % 2] + 1) / 2;
    c.unsupported_if(pads_wide, "8-bit MaxPool with padding wider than half the window");
    return {c.op("cast", {y}, {{"dtype", xt.str()}})};
  }
  bool wide = false;
  for (size_t d = 0; d < 4; ++d)
    wide |= s.pads[d] > ((s.kernel[d % 2] - 1) * s.dilations[d % 2] + 1) / 2;
  if (wide) {
    // Padding wider than half the window: pad explicitly with a value the pool ignores (the
    // lowest float for max; zero for an average that counts the padding), then pool unpadded.
    DataType t = c.type_in(0).dtype;
    c.unsupported_if(!t.is_float() || c.attr_int("ceil_mode", 0) != 0,
                     "padding wider than half the pooling window in this form");
    if (!is_max && c.attr_int("count_include_pad", 0) == 0) {
      // Average over the real elements only: the zero-padded sum-average divided by the
      // zero-padded average of ones (the fraction of the window inside the input).
      Attrs pa{{"pad_before", Ints{0, 0, s.pads[0], s.pads[1]}},
               {"pad_after", Ints{0, 0, s.pads[2], s.pads[3]}},
               {"value", 0.0}};
      a.set("padding", Ints{0, 0, 0, 0});
      a.set("count_include_pad", int64_t{1});
      Ints shape = c.type_in(0).shape;
      Entry ones = c.fill("ones", 1, t, {1, 1, shape[2], shape[3]});
      Entry num = c.op(op, {c.op("pad", {x}, pa)}, a);
      Entry den = c.op(op, {c.op("pad", {ones}, pa)}, a);
      return {c.op("divide", {num, den})};
    }
    double v = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
    x = c.op("pad", {x},
             {{"pad_before", Ints{0, 0, s.pads[0], s.pads[1]}},
              {"pad_after", Ints{0, 0, s.pads[2], s.pads[3]}},
              {"value", v}});
    a.set("padding", Ints{0, 0, 0, 0});
  }
  return {c.op(op, {x}, a)};
}

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

std::vector<Entry> convert_clip(Converter& c) {
  std::optional<double> lo, hi;
  if (c.opset < 11) {
    if (c.has_attr("min")) lo = c.attr_float("min", 0);
    if (c.has_attr("max")) hi = c.attr_float("max", 0);
  } else {
    if (c.has_input(1)) lo = c.const_scalar(1, "min");
    if (c.has_input(2)) hi = c.const_scalar(2, "max");
  }
  if (!lo && !hi) return {c.op("identity", {c.in(0)})};
  // A missing bound is the element type's limit; float limits would overflow integer types.
  DataType t = c.dtype_of(c.in(0));
  c.unsupported_if(t.is_void() && (!lo || !hi), "Clip with one bound of a computed tensor");
  double tmin = t.is_float() ? -std::numeric_limits<float>::max()
                             : static_cast<double>(*as_const_int(ir::min_value(t)));
  double tmax = t.is_float() ? std::numeric_limits<float>::max()
                             : static_cast<double>(*as_const_int(ir::max_value(t)));
  return {c.op("clip", {c.in(0)}, {{"a_min", lo.value_or(tmin)}, {"a_max", hi.value_or(tmax)}})};
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

std::vector<Entry> convert_reduce(Converter& c, const char* op) {
  Ints axes = c.attr_ints("axes", {});
  bool axes_as_input = (std::string(op) == "sum" && c.opset >= 13) || c.opset >= 18;
  if (axes_as_input && c.has_input(1)) axes = c.const_ints(1, "axes");
  // With noop_with_empty_axes=1 an empty axes list leaves the input as it is.
  if (axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0)
    return {c.op("identity", {c.in(0)})};
  return {c.op(op, {c.in(0)}, {{"axes", axes}, {"keepdims", c.attr_int("keepdims", 1)}})};
}

std::vector<Entry> convert_constant(Converter& c) {
  auto it = c.node->attrs.find("value");
  runtime::NDArray v;
  if (it != c.node->attrs.end()) {
    const runtime::NDArray* t = std::get_if<runtime::NDArray>(&it->second);
    KILN_USER_CHECK(t) << c.where() << ": attribute 'value' must be a tensor";
    v = *t;
  } else if (c.has_attr("value_float")) {
    v = runtime::NDArray::empty({}, DataType::Float(32));
    v.data_as<float>()[0] = static_cast<float>(c.attr_float("value_float", 0));
  } else if (c.has_attr("value_int")) {
    v = runtime::NDArray::empty({}, DataType::Int(64));
    v.data_as<int64_t>()[0] = c.attr_int("value_int", 0);
  } else if (c.has_attr("value_ints")) {
    Ints xs = c.attr_ints("value_ints", {});
    v = runtime::NDArray::empty({static_cast<int64_t>(xs.size())}, DataType::Int(64));
    std::copy(xs.begin(), xs.end(), v.data_as<int64_t>());
  } else {
    c.unsupported_if(true, "this form of Constant");
  }
  return {c.constant("value", v)};
}

DataType onnx_elem_type(int64_t code) {
  switch (code) {
    case 1:
      return DataType::Float(32);
    case 2:
      return DataType::UInt(8);
    case 3:
      return DataType::Int(8);
    case 5:
      return DataType::Int(16);
    case 6:
      return DataType::Int(32);
    case 7:
      return DataType::Int(64);
    case 9:
      return DataType::Bool();
    case 11:
      return DataType::Float(64);
    case 10:
      return DataType::Float(16);
    default:
      return DataType::Void();
  }
}

runtime::NDArray int64_array(const Ints& xs) {
  runtime::NDArray a =
      runtime::NDArray::empty({static_cast<int64_t>(xs.size())}, DataType::Int(64));
  std::copy(xs.begin(), xs.end(), a.data_as<int64_t>());
  return a;
}

std::vector<Entry> convert_shape(Converter& c) {
  Ints shape = c.type_in(0).shape;
  int64_t r = static_cast<int64_t>(shape.size());
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  return {c.constant("shape", int64_array(Ints(shape.begin() + start, shape.begin() + end)))};
}

std::vector<Entry> convert_size(Converter& c) {
  runtime::NDArray a = runtime::NDArray::empty({}, DataType::Int(64));
  a.data_as<int64_t>()[0] = c.type_in(0).numel();
  return {c.constant("size", a)};
}

std::vector<Entry> convert_cast_to(Converter& c, DataType to) {
  DataType from = c.type_in(0).dtype;
  c.unsupported_if(to.is_void() || !(to.is_float() || to.is_integer()) ||
                       (to.bits() == 16 && to != DataType::Float(16)) ||
                       (to.is_uint() && to.bits() > 8 && !to.is_bool()),
                   "Cast to " + (to.is_void() ? std::string("this element type") : to.str()));
  c.unsupported_if(
      !(from.is_float() || from.is_integer()) || (from.bits() == 16 && from != DataType::Float(16)),
      "Cast from " + from.str());
  if (from == to) return {c.op("identity", {c.in(0)})};
  // To bool is "non-zero", not a truncation of the bits.
  if (to.is_bool()) return {c.op("not_equal", {c.in(0), c.fill("zero", 0, from)})};
  return {c.op("cast", {c.in(0)}, {{"dtype", to.str()}})};
}

std::vector<Entry> convert_constant_of_shape(Converter& c) {
  Ints shape = c.const_ints(0, "shape");
  runtime::NDArray v = runtime::NDArray::empty({}, DataType::Float(32));
  v.data_as<float>()[0] = 0.0f;
  auto it = c.node->attrs.find("value");
  if (it != c.node->attrs.end()) {
    const runtime::NDArray* t = std::get_if<runtime::NDArray>(&it->second);
    KILN_USER_CHECK(t && t->numel() == 1)
        << c.where() << ": attribute 'value' must be a one-element tensor";
    v = *t;
  }
  for (int64_t d : shape) KILN_USER_CHECK(d >= 0) << c.where() << ": negative dimension";
  runtime::NDArray out = runtime::NDArray::empty(shape, v.dtype());
  size_t b = static_cast<size_t>(v.dtype().bytes());
  for (int64_t k = 0; k < out.numel(); ++k)
    std::memcpy(static_cast<char*>(out.data()) + k * b, v.data(), b);
  return {c.constant("value", out)};
}

std::vector<Entry> convert_slice(Converter& c) {
  Ints starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.attr_ints("starts", {});
    ends = c.attr_ints("ends", {});
    axes = c.attr_ints("axes", {});
  } else {
    starts = c.const_ints(1, "starts");
    ends = c.const_ints(2, "ends");
    if (c.has_input(3)) axes = c.const_ints(3, "axes");
    if (c.has_input(4)) steps = c.const_ints(4, "steps");
  }
  int64_t r = static_cast<int64_t>(c.type_in(0).shape.size());
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  KILN_USER_CHECK(starts.size() == ends.size() && axes.size() == starts.size() &&
                  steps.size() == starts.size())
      << c.where() << ": starts, ends, axes and steps must have the same length";
  for (int64_t& a : axes) a = norm_axis(c, a, r);
  for (int64_t s : steps) c.unsupported_if(s == 0, "a zero step");
  if (r == 1 && c.const_input(0) && c.const_input(0)->dtype() == DataType::Int(64)) {
    // Shape arithmetic (Shape -> Slice -> Concat): sliced on the host, so that an empty slice
    // (a prefix of length 0) stays representable until it is concatenated away.
    Ints v = c.const_ints(0, "data");
    int64_t n = static_cast<int64_t>(v.size()), st = steps[0];
    int64_t b = starts[0] < 0 ? starts[0] + n : starts[0], e = ends[0] < 0 ? ends[0] + n : ends[0];
    b = st > 0 ? std::clamp<int64_t>(b, 0, n) : std::clamp<int64_t>(b, 0, n - 1);
    e = st > 0 ? std::clamp<int64_t>(e, 0, n) : std::clamp<int64_t>(e, -1, n - 1);
    Ints out;
    for (int64_t k = b; st > 0 ? k < e : k > e; k += st) out.push_back(v[k]);
    return {c.constant("slice", int64_array(out))};
  }
  return {c.op("strided_slice", {c.in(0)},
               {{"begin", starts}, {"end", ends}, {"strides", steps}, {"axes", axes}})};
}

std::vector<Entry> convert_expand(Converter& c) {
  Ints shape = c.const_ints(1, "shape");
  // where(true, x, x) broadcasts x against `shape` (bidirectionally, as ONNX's Expand) for any
  // element type.
  Entry all = c.fill("ones", 1, DataType::Bool(), shape);
  return {c.op("where", {all, c.in(0), c.in(0)})};
}

std::vector<Entry> convert_range(Converter& c) {
  const runtime::NDArray* a = c.const_input(0);
  KILN_USER_CHECK(a && c.const_input(1) && c.const_input(2))
      << c.where() << ": start, limit and delta must be a constant; computed values are not "
      << "supported yet";
  DataType t = a->dtype();
  c.unsupported_if(!(t == DataType::Float(32) || t == DataType::Float(64) ||
                     t == DataType::Int(16) || t == DataType::Int(32) || t == DataType::Int(64)),
                   "Range of " + t.str());
  double start = c.const_scalar(0, "start"), limit = c.const_scalar(1, "limit"),
         delta = c.const_scalar(2, "delta");
  KILN_USER_CHECK(delta != 0) << c.where() << ": delta is 0";
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
  runtime::NDArray out = runtime::NDArray::empty({n}, t);
  for (int64_t k = 0; k < n; ++k) {
    if (t == DataType::Float(32))  // accumulate in the element type, as the reference does
      out.data_as<float>()[k] =
          static_cast<float>(start) + static_cast<float>(k) * static_cast<float>(delta);
    else
      c.set_elem(out, k, start + static_cast<double>(k) * delta);
  }
  return {c.constant("range", out)};
}

std::vector<Entry> convert_pad(Converter& c) {
  std::string mode = c.attr_string("mode", "constant");
  c.unsupported_if(mode != "constant" && mode != "edge" && mode != "reflect",
                   "Pad mode '" + mode + "'");
  Ints pads;
  double value = 0;
  int64_t r = static_cast<int64_t>(c.type_in(0).shape.size());
  Ints axes;
  if (c.opset < 11) {
    pads = c.attr_ints(c.opset < 2 ? "paddings" : "pads", {});
    value = c.attr_float("value", 0.0);
  } else {
    pads = c.const_ints(1, "pads");
    if (c.has_input(2)) value = c.const_scalar(2, "constant_value");
    if (c.has_input(3)) axes = c.const_ints(3, "axes");
  }
  if (axes.empty())
    for (int64_t d = 0; d < r; ++d) axes.push_back(d);
  KILN_USER_CHECK(pads.size() == 2 * axes.size())
      << c.where() << ": " << pads.size() << " pads for " << axes.size() << " axes";
  Ints before(r, 0), after(r, 0);
  size_t n = axes.size();
  for (size_t k = 0; k < n; ++k) {
    int64_t a = norm_axis(c, axes[k], r);
    c.unsupported_if(pads[k] < 0 || pads[k + n] < 0, "negative pads");
    before[a] = pads[k];
    after[a] = pads[k + n];
  }
  if (mode != "constant") {
    // edge / reflect: per padded axis, a take at constant source indices (clamped to the edge,
    // or mirrored without repeating the edge element).
    Ints shape = c.type_in(0).shape;
    Entry x = c.in(0);
    for (int64_t d = 0; d < r; ++d) {
      if (before[d] == 0 && after[d] == 0) continue;
      int64_t n = shape[d];
      c.unsupported_if(mode == "reflect" && (n < 2 || before[d] >= n || after[d] >= n),
                       "reflect padding as wide as the dimension");
      Ints src;
      for (int64_t o = -before[d]; o < n + after[d]; ++o) {
        int64_t i = o;
        if (mode == "edge") {
          i = std::clamp<int64_t>(o, 0, n - 1);
        } else {
          if (i < 0) i = -i;
          if (i >= n) i = 2 * (n - 1) - i;
        }
        src.push_back(i);
      }
      x = c.op("take", {x, c.constant("src", int64_array(src))}, {{"axis", d}});
    }
    return {x};
  }
  return {c.op("pad", {c.in(0)}, {{"pad_before", before}, {"pad_after", after}, {"value", value}})};
}

std::vector<Entry> convert_split(Converter& c) {
  graph::TensorType t = c.type_in(0);
  int64_t r = static_cast<int64_t>(t.shape.size());
  int64_t axis = norm_axis(c, c.attr_int("axis", 0), r);
  int64_t dim = t.shape[axis];
  size_t n = c.node->outputs.size();
  Ints sizes;
  if (c.opset < 13 && c.has_attr("split"))
    sizes = c.attr_ints("split", {});
  else if (c.opset >= 13 && c.has_input(1))
    sizes = c.const_ints(1, "split");
  if (sizes.empty()) {
    if (c.has_attr("num_outputs")) n = static_cast<size_t>(c.attr_int("num_outputs", 1));
    int64_t chunk = (dim + static_cast<int64_t>(n) - 1) / static_cast<int64_t>(n);
    for (size_t k = 0; k < n; ++k) {
      int64_t b = chunk * static_cast<int64_t>(k);
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - b)));
    }
    c.unsupported_if(!c.has_attr("num_outputs") && dim % static_cast<int64_t>(n) != 0,
                     "an uneven Split without 'split'");
  }
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  KILN_USER_CHECK(total == dim && sizes.size() == n)
      << c.where() << ": split sizes do not add up to dimension " << dim << " with " << n
      << " outputs";
  std::vector<Entry> outs;
  int64_t b = 0;
  for (int64_t s : sizes) {
    outs.push_back(c.op("strided_slice", {c.in(0)},
                        {{"begin", Ints{b}}, {"end", Ints{b + s}}, {"axes", Ints{axis}}}));
    b += s;
  }
  return outs;
}

/// An element-wise activation f(x) assembled from graph ops; the scalars are of x's type.
std::vector<Entry> convert_activation(Converter& c, const std::string& kind) {
  Entry x = c.in(0);
  DataType t = c.type_in(0).dtype;
  c.unsupported_if(!(t == DataType::Float(32) || t == DataType::Float(64)),
                   kind + " of " + t.str());
  auto k = [&](const char* hint, double v) { return c.fill(hint, v, t); };
  Entry zero = k("zero", 0);
  if (kind == "Elu" || kind == "Selu") {
    double alpha = c.attr_float("alpha", kind == "Elu" ? 1.0 : 1.67326319217681884765625);
    double gamma = kind == "Elu" ? 1.0 : c.attr_float("gamma", 1.05070102214813232421875);
    // x <= 0: alpha * (exp(x) - 1); x > 0: x; Selu scales both by gamma.
    Entry neg =
        c.op("multiply", {k("alpha", alpha), c.op("subtract", {c.op("exp", {x}), k("one", 1)})});
    Entry y = c.op("where", {c.op("greater", {x, zero}), x, neg});
    if (kind == "Selu") y = c.op("multiply", {y, k("gamma", gamma)});
    return {y};
  }
  if (kind == "HardSigmoid") {
    Entry y = c.op("add", {c.op("multiply", {x, k("alpha", c.attr_float("alpha", 0.2))}),
                           k("beta", c.attr_float("beta", 0.5))});
    return {c.op("clip", {y}, {{"a_min", 0.0}, {"a_max", 1.0}})};
  }
  if (kind == "ThresholdedRelu") {
    Entry alpha = k("alpha", c.attr_float("alpha", 1.0));
    return {c.op("where", {c.op("greater", {x, alpha}), x, zero})};
  }
  if (kind == "PRelu") {
    Entry slope = c.in(1);
    return {c.op("where", {c.op("less", {x, zero}), c.op("multiply", {x, slope}), x})};
  }
  KILN_ICHECK(false) << kind;
  return {};
}

std::vector<Entry> convert_mean(Converter& c) {
  Entry acc = c.in(0);
  for (size_t i = 1; i < c.node->inputs.size(); ++i) acc = c.op("add", {acc, c.in(i)});
  DataType t = c.type_in(0).dtype;
  c.unsupported_if(!t.is_float(), "Mean of " + t.str());
  return {c.op("divide", {acc, c.fill("n", static_cast<double>(c.node->inputs.size()), t)})};
}

/// ReduceL1/L2/LogSum/LogSumExp/SumSquare as element-wise ops around a sum.
std::vector<Entry> convert_reduce_composite(Converter& c, const std::string& kind) {
  Ints axes = c.attr_ints("axes", {});
  if (c.opset >= 18 && c.has_input(1)) axes = c.const_ints(1, "axes");
  c.unsupported_if(axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0,
                   "noop_with_empty_axes=1");
  DataType t = c.type_in(0).dtype;
  c.unsupported_if(!(t == DataType::Float(32) || t == DataType::Float(64)),
                   kind + " of " + t.str());
  Entry x = c.in(0);
  if (kind == "ReduceL1") x = c.op("abs", {x});
  if (kind == "ReduceL2" || kind == "ReduceSumSquare") x = c.op("multiply", {x, x});
  // LogSumExp subtracts the maximum first so that exp cannot overflow.
  Entry mx;
  if (kind == "ReduceLogSumExp") {
    mx = c.op("max", {x}, {{"axes", axes}, {"keepdims", int64_t{1}}});
    x = c.op("exp", {c.op("subtract", {x, mx})});
  }
  Entry y = c.op("sum", {x}, {{"axes", axes}, {"keepdims", c.attr_int("keepdims", 1)}});
  if (kind == "ReduceL2") y = c.op("sqrt", {y});
  if (kind == "ReduceLogSum" || kind == "ReduceLogSumExp") y = c.op("log", {y});
  if (kind == "ReduceLogSumExp")
    y = c.op("add", {y, c.op("max", {c.in(0)},
                             {{"axes", axes}, {"keepdims", c.attr_int("keepdims", 1)}})});
  return {y};
}

std::vector<Entry> convert_trilu(Converter& c) {
  graph::TensorType t = c.type_in(0);
  size_t r = t.shape.size();
  c.unsupported_if(r < 2, "Trilu of a tensor of rank < 2");
  int64_t k = c.has_input(1) ? static_cast<int64_t>(c.const_scalar(1, "k")) : 0;
  bool upper = c.attr_int("upper", 1) != 0;
  int64_t rows = t.shape[r - 2], cols = t.shape[r - 1];
  runtime::NDArray mask = runtime::NDArray::empty({rows, cols}, DataType::Bool());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      mask.data_as<uint8_t>()[i * cols + j] = upper ? (j - i >= k) : (j - i <= k);
  Entry m = c.constant("mask", mask);
  return {c.op("where", {m, c.in(0), c.fill("zero", 0, t.dtype)})};
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

/// NegativeLogLikelihoodLoss of `logp` [N, C, d...] at `target` [N, d...] with one-hot masks
/// (target == class) instead of a gather, so ignored or out-of-range targets select nothing.
Entry nll_loss(Converter& c, Entry logp, Entry target, std::optional<Entry> weight) {
  graph::TensorType t = c.type_in(0);
  DataType tt = c.dtype_of(target);
  c.unsupported_if(!(t.dtype == DataType::Float(32) || t.dtype == DataType::Float(64)),
                   "a loss of " + t.dtype.str());
  c.unsupported_if(!(tt == DataType::Int(32) || tt == DataType::Int(64)),
                   "targets of type " + tt.str());
  size_t r = t.shape.size();
  c.unsupported_if(r < 2, "a loss of a tensor of rank < 2");
  int64_t classes = t.shape[1];
  std::string reduction = c.attr_string("reduction", "mean");
  c.unsupported_if(reduction != "none" && reduction != "sum" && reduction != "mean",
                   "reduction '" + reduction + "'");
  Ints cshape(r, 1);
  cshape[1] = classes;
  runtime::NDArray ids = runtime::NDArray::empty(cshape, tt);
  for (int64_t k = 0; k < classes; ++k) c.set_elem(ids, k, static_cast<double>(k));
  Entry onehot =
      c.op("equal", {c.op("unsqueeze", {target}, {{"axes", Ints{1}}}), c.constant("classes", ids)});
  Entry zero = c.fill("zero", 0, t.dtype);
  Attrs over_c{{"axes", Ints{1}}, {"keepdims", int64_t{0}}};
  Entry picked = c.op("sum", {c.op("where", {onehot, logp, zero})}, over_c);
  Entry w = weight ? c.op("reshape", {*weight}, {{"newshape", cshape}}) : c.fill("one", 1, t.dtype);
  Entry wt = c.op("sum", {c.op("where", {onehot, w, zero})}, over_c);
  if (c.has_attr("ignore_index")) {
    Entry ii = c.fill("ignore_index", static_cast<double>(c.attr_int("ignore_index", 0)), tt);
    wt = c.op("where", {c.op("not_equal", {target, ii}), wt, zero});
  }
  Entry loss = c.op("negative", {c.op("multiply", {picked, wt})});
  if (reduction == "none") return loss;
  Ints all;
  for (size_t d = 0; d + 1 < r; ++d) all.push_back(static_cast<int64_t>(d));
  Attrs red{{"axes", all}, {"keepdims", int64_t{0}}};
  Entry total = c.op("sum", {loss}, red);
  if (reduction == "sum") return total;
  return c.op("divide", {total, c.op("sum", {wt}, red)});
}

std::vector<Entry> convert_nll(Converter& c) {
  std::optional<Entry> w;
  if (c.has_input(2)) w = c.in(2);
  return {nll_loss(c, c.in(0), c.in(1), w)};
}

std::vector<Entry> convert_sce(Converter& c) {
  std::optional<Entry> w;
  if (c.has_input(2)) w = c.in(2);
  Entry logp = c.op("log_softmax", {c.in(0)}, {{"axis", int64_t{1}}});
  return {nll_loss(c, logp, c.in(1), w), logp};
}

Entry iota(Converter& c, int64_t n, size_t r, int64_t axis, DataType t) {
  Ints shape(r, 1);
  shape[static_cast<size_t>(axis)] = n;
  runtime::NDArray a = runtime::NDArray::empty(shape, t);
  for (int64_t k = 0; k < n; ++k) c.set_elem(a, k, static_cast<double>(k));
  return c.constant("iota", a);
}

/// ArgMax/ArgMin: the first (or last) index along `axis` where x equals its max (min), as the
/// min (max) of where(x == extreme, index, sentinel).
std::vector<Entry> convert_arg(Converter& c, bool is_max) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(!(t.dtype == DataType::Float(32) || t.dtype == DataType::Float(64) ||
                     t.dtype == DataType::Int(32) || t.dtype == DataType::Int(64)),
                   "ArgMax/ArgMin of " + t.dtype.str());
  size_t r = t.shape.size();
  int64_t axis = norm_axis(c, c.attr_int("axis", 0), static_cast<int64_t>(r));
  int64_t keep = c.attr_int("keepdims", 1);
  bool last = c.attr_int("select_last_index", 0) != 0;
  int64_t n = t.shape[static_cast<size_t>(axis)];
  Attrs keep1{{"axes", Ints{axis}}, {"keepdims", int64_t{1}}};
  Entry ext = c.op(is_max ? "max" : "min", {c.in(0)}, keep1);
  Entry hit = c.op("equal", {c.in(0), ext});
  if (t.dtype.is_float()) {
    // A NaN extreme (max / min propagate NaN) is hit by the NaN elements (PyTorch's argmax).
    Entry nan = c.op("isnan", {c.in(0)});
    hit = c.op("where", {nan, nan, hit});
  }
  Entry sentinel = c.fill("sentinel", last ? -1.0 : static_cast<double>(n), DataType::Int(64));
  Entry idx = c.op("where", {hit, iota(c, n, r, axis), sentinel});
  return {c.op(last ? "max" : "min", {idx}, {{"axes", Ints{axis}}, {"keepdims", keep}})};
}

/// GatherElements via one-hot masks: out[.., k, ..] = sum over d of (idx[.., k, ..] == d) ?
/// data[.., d, ..] : 0, with a new axis after `axis` holding d.
std::vector<Entry> convert_gather_elements(Converter& c) {
  graph::TensorType t = c.type_in(0), ti = c.type_in(1);
  c.unsupported_if(!(t.dtype == DataType::Float(32) || t.dtype == DataType::Float(64) ||
                     t.dtype == DataType::Int(32) || t.dtype == DataType::Int(64)),
                   "GatherElements of " + t.dtype.str());
  c.unsupported_if(!(ti.dtype == DataType::Int(32) || ti.dtype == DataType::Int(64)),
                   "GatherElements indices of " + ti.dtype.str());
  size_t r = t.shape.size();
  c.unsupported_if(ti.shape.size() != r, "GatherElements with indices of another rank");
  int64_t axis = norm_axis(c, c.attr_int("axis", 0), static_cast<int64_t>(r));
  for (size_t d = 0; d < r; ++d)
    c.unsupported_if(static_cast<int64_t>(d) != axis && ti.shape[d] != t.shape[d],
                     "GatherElements with indices smaller than the data off the axis");
  int64_t n = t.shape[static_cast<size_t>(axis)];
  Entry idx = c.in(1);
  // Negative indices count from the end.
  Entry zero_i = c.fill("zero_i", 0, ti.dtype);
  idx = c.op("where", {c.op("less", {idx, zero_i}),
                       c.op("add", {idx, c.fill("n", static_cast<double>(n), ti.dtype)}), idx});
  Entry hit = c.op("equal", {c.op("unsqueeze", {idx}, {{"axes", Ints{axis + 1}}}),
                             iota(c, n, r + 1, axis + 1, ti.dtype)});
  Entry data = c.op("unsqueeze", {c.in(0)}, {{"axes", Ints{axis}}});
  Entry picked = c.op("where", {hit, data, c.fill("zero", 0, t.dtype)});
  return {c.op("sum", {picked}, {{"axes", Ints{axis + 1}}, {"keepdims", int64_t{0}}})};
}

/// Hardmax: 1 at the first maximum along the axis, 0 elsewhere (before opset 13, over the
/// trailing dimensions flattened from `axis`).
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
  Entry idx = c.op("where", {hit, iota(c, len, rank, red),
                             c.fill("sentinel", static_cast<double>(len), DataType::Int(64))});
  Entry first = c.op("min", {idx}, keep1);
  Entry y = c.op("where", {c.op("equal", {iota(c, len, rank, red), first}),
                           c.fill("one", 1, t.dtype), c.fill("zero", 0, t.dtype)});
  if (c.opset < 13) y = c.op("reshape", {y}, {{"newshape", t.shape}});
  return {y};
}

/// CumSum as a matrix product: the axis moved last and flattened against an [n, n] mask of
/// ones (upper triangular; strict when exclusive; lower when reversed).
std::vector<Entry> convert_cumsum(Converter& c) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(!(t.dtype == DataType::Float(32) || t.dtype == DataType::Float(64)),
                   "CumSum of " + t.dtype.str());
  int64_t r = static_cast<int64_t>(t.shape.size());
  c.unsupported_if(r < 1, "CumSum of a scalar");
  int64_t axis = norm_axis(c, static_cast<int64_t>(c.const_scalar(1, "axis")), r);
  bool exclusive = c.attr_int("exclusive", 0) != 0, reverse = c.attr_int("reverse", 0) != 0;
  int64_t n = t.shape[axis];
  runtime::NDArray m = runtime::NDArray::empty({n, n}, t.dtype);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      bool on = reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j);
      c.set_elem(m, i * n + j, on ? 1.0 : 0.0);
    }
  Ints perm, moved;
  for (int64_t d = 0; d < r; ++d)
    if (d != axis) perm.push_back(d);
  perm.push_back(axis);
  for (int64_t d : perm) moved.push_back(t.shape[d]);
  Ints inverse(r);
  for (int64_t d = 0; d < r; ++d) inverse[perm[d]] = d;
  Entry x = c.op("transpose", {c.in(0)}, {{"axes", perm}});
  x = c.op("reshape", {x}, {{"newshape", Ints{-1, n}}});
  Entry y = c.op("matmul", {x, c.constant("mask", m)});
  y = c.op("reshape", {y}, {{"newshape", moved}});
  return {c.op("transpose", {y}, {{"axes", inverse}})};
}

/// DepthToSpace (DCR or CRD order) and SpaceToDepth as reshape, transpose, reshape.
std::vector<Entry> convert_depth_space(Converter& c, bool to_space) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(t.shape.size() != 4, "a tensor that is not 4-D");
  int64_t bs = c.attr_int("blocksize", 0);
  KILN_USER_CHECK(bs > 0) << c.where() << ": blocksize must be positive";
  int64_t b = t.shape[0], ch = t.shape[1], h = t.shape[2], w = t.shape[3];
  Ints mid, perm, out;
  if (to_space) {
    KILN_USER_CHECK(ch % (bs * bs) == 0) << c.where() << ": channels not divisible by blocksize²";
    std::string mode = c.attr_string("mode", "DCR");
    c.unsupported_if(mode != "DCR" && mode != "CRD", "mode '" + mode + "'");
    if (mode == "DCR") {
      mid = {b, bs, bs, ch / (bs * bs), h, w};
      perm = {0, 3, 4, 1, 5, 2};
    } else {
      mid = {b, ch / (bs * bs), bs, bs, h, w};
      perm = {0, 1, 4, 2, 5, 3};
    }
    out = {b, ch / (bs * bs), h * bs, w * bs};
  } else {
    KILN_USER_CHECK(h % bs == 0 && w % bs == 0)
        << c.where() << ": spatial size not divisible by blocksize";
    mid = {b, ch, h / bs, bs, w / bs, bs};
    perm = {0, 3, 5, 1, 2, 4};
    out = {b, ch * bs * bs, h / bs, w / bs};
  }
  Entry x = c.op("reshape", {c.in(0)}, {{"newshape", mid}});
  x = c.op("transpose", {x}, {{"axes", perm}});
  return {c.op("reshape", {x}, {{"newshape", out}})};
}

/// EyeLike: a constant of the input's shape with ones on diagonal k.
std::vector<Entry> convert_eye_like(Converter& c) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(t.shape.size() != 2, "EyeLike of a tensor that is not 2-D");
  DataType dt = c.has_attr("dtype") ? onnx_elem_type(c.attr_int("dtype", 1)) : t.dtype;
  c.unsupported_if(dt.is_void(), "EyeLike to this element type");
  int64_t k = c.attr_int("k", 0), rows = t.shape[0], cols = t.shape[1];
  runtime::NDArray a = runtime::NDArray::empty({rows, cols}, dt);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) c.set_elem(a, i * cols + j, j - i == k ? 1.0 : 0.0);
  return {c.constant("eye", a)};
}

std::vector<Entry> convert_isinf(Converter& c) {
  DataType t = c.type_in(0).dtype;
  c.unsupported_if(!(t == DataType::Float(32) || t == DataType::Float(64)), "IsInf of " + t.str());
  bool pos = c.attr_int("detect_positive", 1) != 0, neg = c.attr_int("detect_negative", 1) != 0;
  double inf = std::numeric_limits<double>::infinity();
  Entry x = c.in(0);
  if (pos && neg) return {c.op("equal", {c.op("abs", {x}), c.fill("inf", inf, t)})};
  if (pos) return {c.op("equal", {x, c.fill("inf", inf, t)})};
  if (neg) return {c.op("equal", {x, c.fill("ninf", -inf, t)})};
  c.unsupported_if(true, "IsInf detecting neither sign");
  return {};
}

const ConvertTable& table() {
  static const ConvertTable t = [] {
    ConvertTable m;
    for (auto [onnx, op] :
         std::vector<std::pair<const char*, const char*>>{{"Relu", "relu"},
                                                          {"Sigmoid", "sigmoid"},
                                                          {"Tanh", "tanh"},
                                                          {"Exp", "exp"},
                                                          {"Log", "log"},
                                                          {"Sqrt", "sqrt"},
                                                          {"Erf", "erf"},
                                                          {"Abs", "abs"},
                                                          {"Neg", "negative"},
                                                          {"Floor", "floor"},
                                                          {"Ceil", "ceil"},
                                                          {"Sign", "sign"},
                                                          {"Reciprocal", "reciprocal"},
                                                          {"Softplus", "softplus"},
                                                          {"Identity", "identity"},
                                                          {"Not", "logical_not"}})
      m[onnx] = unary(op);
    for (auto [onnx, op] :
         std::vector<std::pair<const char*, const char*>>{{"Add", "add"},
                                                          {"Sub", "subtract"},
                                                          {"Mul", "multiply"},
                                                          {"Div", "divide"},
                                                          {"Equal", "equal"},
                                                          {"Less", "less"},
                                                          {"Greater", "greater"},
                                                          {"LessOrEqual", "less_equal"},
                                                          {"GreaterOrEqual", "greater_equal"}})
      m[onnx] = binary(op);
    m["Pow"] = [](Converter& c) {
      // The result has the base's type. A float base takes the exponent converted to its type;
      // integer powers are computed in float64 (exact for the integer results it can hold).
      DataType tb = c.type_in(0).dtype, te = c.type_in(1).dtype;
      c.unsupported_if(tb.bits() == 16 || te.bits() == 16 || tb.is_bool() || te.is_bool(),
                       "Pow of " + tb.str() + " and " + te.str());
      Entry b = c.in(0), e = c.in(1);
      if (tb.is_float()) {
        if (te != tb) e = c.op("cast", {e}, {{"dtype", tb.str()}});
        return std::vector<Entry>{c.op("power", {b, e})};
      }
      c.unsupported_if(!tb.is_int(), "Pow of " + tb.str());
      std::string f64 = "float64";
      b = c.op("cast", {b}, {{"dtype", f64}});
      if (te != DataType::Float(64)) e = c.op("cast", {e}, {{"dtype", f64}});
      return std::vector<Entry>{c.op("cast", {c.op("power", {b, e})}, {{"dtype", tb.str()}})};
    };
    m["Max"] = variadic("maximum");
    m["Min"] = variadic("minimum");
    m["Sum"] = variadic("add");
    m["Where"] = [](Converter& c) {
      return std::vector<Entry>{c.op("where", {c.in(0), c.in(1), c.in(2)})};
    };
    m["Dropout"] = [](Converter& c) {
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
    };
    m["Clip"] = convert_clip;
    m["LeakyRelu"] = [](Converter& c) {
      return std::vector<Entry>{
          c.op("leaky_relu", {c.in(0)}, {{"alpha", c.attr_float("alpha", 0.01)}})};
    };
    m["Conv"] = convert_conv;
    m["MaxPool"] = [](Converter& c) { return convert_pool(c, "max_pool2d"); };
    m["AveragePool"] = [](Converter& c) { return convert_pool(c, "avg_pool2d"); };
    m["GlobalAveragePool"] = unary("global_avg_pool2d");
    m["GlobalMaxPool"] = unary("global_max_pool2d");
    m["Gemm"] = convert_gemm;
    m["MatMul"] = [](Converter& c) {
      // Operands of one rank above 3 with equal batch dimensions: batch flattened to 3-D.
      int ra = c.rank_of(c.in(0)), rb = c.rank_of(c.in(1));
      if (ra > 2 && rb == 2) {
        // [..., M, K] · [K, N]: the leading dimensions flattened into M (Linear layers on
        // sequences).
        Ints sa = c.type_in(0).shape, sb = c.type_in(1).shape;
        Entry a = c.op("reshape", {c.in(0)}, {{"newshape", Ints{-1, sa[ra - 1]}}});
        Ints out(sa.begin(), sa.end() - 1);
        out.push_back(sb[1]);
        return std::vector<Entry>{
            c.op("reshape", {c.op("matmul", {a, c.in(1)})}, {{"newshape", out}})};
      }
      if (ra > 3 && ra == rb) {
        Ints sa = c.type_in(0).shape, sb = c.type_in(1).shape;
        c.unsupported_if(!std::equal(sa.begin(), sa.end() - 2, sb.begin()),
                         "MatMul with broadcast batch dimensions");
        Entry a = c.op("reshape", {c.in(0)}, {{"newshape", Ints{-1, sa[ra - 2], sa[ra - 1]}}});
        Entry b = c.op("reshape", {c.in(1)}, {{"newshape", Ints{-1, sb[rb - 2], sb[rb - 1]}}});
        Ints out(sa.begin(), sa.end() - 1);
        out.push_back(sb[rb - 1]);
        return std::vector<Entry>{c.op("reshape", {c.op("matmul", {a, b})}, {{"newshape", out}})};
      }
      return std::vector<Entry>{c.op("matmul", {c.in(0), c.in(1)})};
    };
    m["BatchNormalization"] = [](Converter& c) {
      c.unsupported_if(c.attr_int("training_mode", 0) != 0, "training_mode=1");
      return std::vector<Entry>{c.op("batch_norm", {c.in(0), c.in(1), c.in(2), c.in(3), c.in(4)},
                                     {{"epsilon", c.attr_float("epsilon", 1e-5)}})};
    };
    m["Softmax"] = [](Converter& c) { return convert_softmax(c, "softmax"); };
    m["LogSoftmax"] = [](Converter& c) { return convert_softmax(c, "log_softmax"); };
    m["Flatten"] = [](Converter& c) {
      return std::vector<Entry>{c.op("flatten", {c.in(0)}, {{"axis", c.attr_int("axis", 1)}})};
    };
    m["Reshape"] = [](Converter& c) {
      c.unsupported_if(c.attr_int("allowzero", 0) != 0, "allowzero=1");
      Ints shape = c.opset < 5 ? c.attr_ints("shape", {}) : c.const_ints(1, "shape");
      return std::vector<Entry>{c.op("reshape", {c.in(0)}, {{"newshape", shape}})};
    };
    m["Transpose"] = [](Converter& c) {
      return std::vector<Entry>{c.op("transpose", {c.in(0)}, {{"axes", c.attr_ints("perm", {})}})};
    };
    m["Concat"] = [](Converter& c) {
      // Constant 1-D int64 parts (shape arithmetic) are joined on the host; empty parts vanish.
      bool host = true;
      for (size_t i = 0; i < c.node->inputs.size() && host; ++i) {
        const runtime::NDArray* a = c.const_input(i);
        host = a && a->ndim() == 1 && a->dtype() == DataType::Int(64);
      }
      if (host) {
        Ints all;
        for (size_t i = 0; i < c.node->inputs.size(); ++i) {
          Ints v = c.const_ints(i, "part");
          all.insert(all.end(), v.begin(), v.end());
        }
        return std::vector<Entry>{c.constant("concat", int64_array(all))};
      }
      std::vector<Entry> ins;
      for (size_t i = 0; i < c.node->inputs.size(); ++i) ins.push_back(c.in(i));
      return std::vector<Entry>{c.op("concat", ins, {{"axis", c.attr_int("axis", 0)}})};
    };
    m["Squeeze"] = [](Converter& c) {
      Ints axes = c.opset < 13 ? c.attr_ints("axes", {})
                               : (c.has_input(1) ? c.const_ints(1, "axes") : Ints{});
      return std::vector<Entry>{c.op("squeeze", {c.in(0)}, {{"axes", axes}})};
    };
    m["Unsqueeze"] = [](Converter& c) {
      Ints axes = c.opset < 13 ? c.attr_ints("axes", {}) : c.const_ints(1, "axes");
      return std::vector<Entry>{c.op("unsqueeze", {c.in(0)}, {{"axes", axes}})};
    };
    m["Gather"] = [](Converter& c) {
      return std::vector<Entry>{
          c.op("take", {c.in(0), c.in(1)}, {{"axis", c.attr_int("axis", 0)}})};
    };
    m["ReduceMean"] = [](Converter& c) { return convert_reduce(c, "mean"); };
    m["ReduceSum"] = [](Converter& c) { return convert_reduce(c, "sum"); };
    m["ReduceMax"] = [](Converter& c) { return convert_reduce(c, "max"); };
    m["ReduceMin"] = [](Converter& c) { return convert_reduce(c, "min"); };
    m["ReduceProd"] = [](Converter& c) { return convert_reduce(c, "prod"); };
    m["Constant"] = convert_constant;
    m["Shape"] = convert_shape;
    m["Size"] = convert_size;
    m["Cast"] = [](Converter& c) {
      return convert_cast_to(c, onnx_elem_type(c.attr_int("to", 0)));
    };
    m["CastLike"] = [](Converter& c) { return convert_cast_to(c, c.type_in(1).dtype); };
    m["ConstantOfShape"] = convert_constant_of_shape;
    m["Slice"] = convert_slice;
    m["Expand"] = convert_expand;
    m["Range"] = convert_range;
    m["Pad"] = convert_pad;
    m["Split"] = convert_split;
    for (const char* a : {"Elu", "Selu", "HardSigmoid", "ThresholdedRelu", "PRelu"})
      m[a] = [k = std::string(a)](Converter& c) { return convert_activation(c, k); };
    m["Mean"] = convert_mean;
    for (const char* a :
         {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})
      m[a] = [k = std::string(a)](Converter& c) { return convert_reduce_composite(c, k); };
    m["Trilu"] = convert_trilu;
    m["ArgMax"] = [](Converter& c) { return convert_arg(c, true); };
    m["ArgMin"] = [](Converter& c) { return convert_arg(c, false); };
    m["GatherElements"] = convert_gather_elements;
    m["Hardmax"] = convert_hardmax;
    m["CumSum"] = convert_cumsum;
    m["DepthToSpace"] = [](Converter& c) { return convert_depth_space(c, true); };
    m["SpaceToDepth"] = [](Converter& c) { return convert_depth_space(c, false); };
    m["EyeLike"] = convert_eye_like;
    m["IsInf"] = convert_isinf;
    m["NegativeLogLikelihoodLoss"] = convert_nll;
    m["SoftmaxCrossEntropyLoss"] = convert_sce;
    m["LayerNormalization"] = convert_layer_norm;
    // On booleans (0/1): xor is "differ", and is the minimum, or the maximum.
    m["Xor"] = binary("not_equal");
    m["And"] = binary("minimum");
    m["Or"] = binary("maximum");
    register_rnn_converters(m);
    register_math_converters(m);
    register_nn_converters(m);
    register_tensor_converters(m);
    register_training_converters(m);
    // The families below may wrap an entry registered above (keeping it for the cases it
    // handles), so they come last.
    register_ndim_converters(m);
    register_signal_converters(m);
    register_dynamic_converters(m);
    register_control_converters(m);
    register_misc_converters(m);
    return m;
  }();
  return t;
}

void Converter::find_unsupported(const std::vector<OnnxNode>& nodes,
                                 std::vector<std::string>& missing) {
  for (const OnnxNode& n : nodes) {
    std::string dom = n.domain.empty() ? "ai.onnx" : n.domain;
    auto op = m_.opsets.find(n.domain);
    int64_t ver = op == m_.opsets.end() ? 0 : op->second;
    // The optimizer steps of the preview training domain are element-wise updates.
    bool training = n.domain == "ai.onnx.preview.training" &&
                    (n.op_type == "Adagrad" || n.op_type == "Momentum" || n.op_type == "Adam");
    // A node with a list of graphs as an attribute (none of the converted operators has one).
    bool graphs_unread = n.has_subgraph && n.subgraphs.empty();
    bool ok = (n.domain.empty() || training) && table().count(n.op_type) && !graphs_unread;
    if (!ok) {
      missing.push_back(n.op_type + " (domain " + dom + ", opset " + std::to_string(ver) +
                        ", node '" + n.name + "')");
    }
    for (const auto& [name, body] : n.subgraphs) find_unsupported(body->nodes, missing);
  }
}

void Converter::convert_nodes(const std::vector<OnnxNode>& nodes, bool name_values) {
  for (const OnnxNode& n : nodes) {
    node = &n;
    int first_new = g_.num_nodes();
    std::vector<Entry> outs = table().at(n.op_type)(*this);
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i].empty()) continue;
      KILN_USER_CHECK(i < outs.size())
          << where() << ": output " << i << " ('" << n.outputs[i] << "') is not supported yet";
      values_[n.outputs[i]] = outs[i];
      if (!name_values || is_sequence(outs[i]) || is_optional(outs[i])) continue;
      // The graph node that produces an ONNX value carries the value's name (unique in ONNX;
      // graph outputs and their .npy files are named after it).
      graph::Node& prod = g_.mutable_node(outs[i].node);
      if (outs[i].node >= first_new && prod.is_op() && g_.node(outs[i].node).num_outputs() <= 1 &&
          !used_.count(n.outputs[i])) {
        used_.erase(prod.name);
        prod.name = n.outputs[i];
        used_.insert(prod.name);
      }
    }
  }
}

std::vector<Entry> Converter::import_body(const OnnxGraph& body, const std::vector<Entry>& inputs) {
  KILN_USER_CHECK(inputs.size() == body.inputs.size())
      << where() << ": the sub-graph '" << body.name << "' has " << body.inputs.size()
      << " inputs, but " << inputs.size() << " are given to it";
  const OnnxNode* outer = node;
  // The body sees the enclosing scopes' values; its own names shadow them until it ends.
  std::map<std::string, Entry> saved = values_;
  for (size_t i = 0; i < inputs.size(); ++i) values_[body.inputs[i].name] = inputs[i];
  for (const auto& [name, value] : body.initializers)
    values_[name] = g_.add_constant(unique_name(body.name + "." + name), value);
  convert_nodes(body.nodes, false);
  std::vector<Entry> outs;
  for (const OnnxValueInfo& v : body.outputs) outs.push_back(values_.at(v.name));
  values_ = std::move(saved);
  node = outer;
  return outs;
}

graph::Graph Converter::run() {
  // 0. Graph inputs and outputs hold tensors, or sequences of tensors (flattened into tensors);
  //    optionals, maps and sparse tensors are not computed.
  for (const std::vector<OnnxValueInfo>* vs : {&m_.inputs, &m_.outputs}) {
    for (const OnnxValueInfo& v : *vs) {
      KILN_USER_CHECK(v.kind.empty() || v.kind == "sequence")
          << "'" << m_.path << "': graph " << (vs == &m_.inputs ? "input" : "output") << " '"
          << v.name << "' is " << (v.kind == "optional" ? "an " : "a ") << v.kind
          << " value, which Kiln does not support yet (only tensors, sequences of tensors and "
             "optionals of these)";
    }
  }
  for (const std::string& name : opt_.empty_optional_inputs) {
    bool found = std::any_of(m_.inputs.begin(), m_.inputs.end(),
                             [&](const OnnxValueInfo& v) { return v.name == name && v.optional; });
    KILN_USER_CHECK(found) << "'" << m_.path << "': ImportOptions::empty_optional_inputs names '"
                           << name << "', which is not an optional-typed graph input of the model";
  }
  for (const auto& [name, shapes] : opt_.sequence_inputs) {
    bool found = std::any_of(m_.inputs.begin(), m_.inputs.end(), [&](const OnnxValueInfo& v) {
      return v.name == name && v.kind == "sequence";
    });
    KILN_USER_CHECK(found) << "'" << m_.path << "': ImportOptions::sequence_inputs names '" << name
                           << "', which is not a sequence-typed graph input of the model";
  }
  // 1. Every operator supported (sub-graphs included)? Report all that are not, at once.
  std::vector<std::string> missing;
  find_unsupported(m_.nodes, missing);
  if (!missing.empty()) {
    std::ostringstream os;
    os << "'" << m_.path << "' uses " << missing.size() << " unsupported ONNX operator"
       << (missing.size() == 1 ? "" : "s") << ":";
    for (const std::string& s : missing) os << "\n  " << s;
    KILN_ERROR << os.str();
  }
  opset = m_.default_opset();
  // 2. Inputs and initializers. The names of flattened sequence elements are reserved first.
  for (const OnnxValueInfo& v : m_.inputs) used_.insert(v.name);
  for (const auto& [name, value] : m_.initializers) used_.insert(name);
  for (const OnnxValueInfo& v : m_.inputs) {
    if (v.optional && opt_.empty_optional_inputs.count(v.name)) {
      values_[v.name] = make_optional(std::nullopt);
      continue;
    }
    if (v.kind == "sequence") {
      add_sequence_input(v);
      if (v.optional) values_[v.name] = make_optional(values_.at(v.name));
      continue;
    }
    KILN_USER_CHECK(!v.dtype.is_void())
        << "'" << m_.path << "': input '" << v.name << "' is not a tensor of a supported type";
    Ints shape;
    auto given = opt_.input_shapes.find(v.name);
    if (given != opt_.input_shapes.end()) {
      shape = given->second;
    } else {
      KILN_USER_CHECK(v.has_shape)
          << "'" << m_.path << "': input '" << v.name << "' has no shape; give one";
      for (size_t d = 0; d < v.shape.size(); ++d) {
        KILN_USER_CHECK(v.shape[d].size >= 0)
            << "'" << m_.path << "': input '" << v.name << "' dimension " << d << " is symbolic ('"
            << v.shape[d].param << "'); give the input's shape";
        shape.push_back(v.shape[d].size);
      }
    }
    values_[v.name] = g_.add_input(v.name, shape, v.dtype);
    if (v.optional) values_[v.name] = make_optional(values_.at(v.name));
  }
  for (const auto& [name, value] : m_.initializers) {
    values_[name] = g_.add_constant(name, value);
    used_.insert(name);
  }
  // 3. Nodes, in order.
  convert_nodes(m_.nodes, true);
  // 4. Outputs; a sequence gives one output per element. Each output is an op node of its own
  //    (an element may be a graph input, a constant, or appear twice).
  std::vector<Entry> heads;
  std::vector<std::string> head_names;
  std::set<Entry> taken;
  for (const OnnxValueInfo& v : m_.outputs) {
    Entry e = values_.at(v.name);
    if (is_optional(e)) {
      std::optional<Entry> held = optional_value(e);
      KILN_USER_CHECK(held) << "'" << m_.path << "': graph output '" << v.name
                            << "' is an empty optional value, which Kiln cannot return (outputs "
                               "are tensors)";
      e = *held;
    }
    if (!is_sequence(e)) {
      heads.push_back(e);
      head_names.push_back(v.name);
      taken.insert(e);
      continue;
    }
    KILN_USER_CHECK(opt_.flatten_sequence_outputs)
        << "'" << m_.path << "': graph output '" << v.name
        << "' is a sequence value, which Kiln does not support yet (only tensors) unless "
        << "ImportOptions::flatten_sequence_outputs is set (then its elements become outputs '"
        << v.name << ".0', '" << v.name << ".1', …)";
    const std::vector<Entry> items = sequence_items(e);
    for (size_t k = 0; k < items.size(); ++k) {
      std::string name = v.name + "." + std::to_string(k);
      Entry x = items[k];
      if (!g_.node(x.node).is_op() || taken.count(x))
        x = g_.add_op("identity", {x}, {}, unique_name(name));
      heads.push_back(x);
      head_names.push_back(name);
      taken.insert(x);
    }
  }
  g_.set_outputs(heads);
  g_.set_output_names(head_names);
  return g_;
}

void Converter::add_sequence_input(const OnnxValueInfo& v) {
  auto given = opt_.sequence_inputs.find(v.name);
  KILN_USER_CHECK(given != opt_.sequence_inputs.end())
      << "'" << m_.path << "': graph input '" << v.name
      << "' is a sequence value, which Kiln does not support yet without its length and element "
      << "shapes: give them in ImportOptions::sequence_inputs (the elements become tensor inputs '"
      << v.name << ".0', '" << v.name << ".1', …)";
  KILN_USER_CHECK(!v.dtype.is_void())
      << "'" << m_.path << "': sequence input '" << v.name
      << "' does not declare its element type, or it is not a tensor type Kiln supports";
  std::vector<Entry> items;
  for (size_t k = 0; k < given->second.size(); ++k) {
    const Ints& shape = given->second[k];
    std::string name = v.name + "." + std::to_string(k);
    std::ostringstream where;
    where << "'" << m_.path << "': element " << k << " of sequence input '" << v.name << "'";
    for (int64_t d : shape)
      KILN_USER_CHECK(d >= 0) << where.str() << " has a negative dimension " << d;
    if (v.has_shape) {
      bool ok = v.shape.size() == shape.size();
      for (size_t d = 0; ok && d < shape.size(); ++d)
        ok = v.shape[d].size < 0 || v.shape[d].size == shape[d];
      if (!ok) {
        std::ostringstream decl;
        decl << "[";
        for (size_t d = 0; d < v.shape.size(); ++d)
          decl << (d ? ", " : "")
               << (v.shape[d].size >= 0 ? std::to_string(v.shape[d].size) : v.shape[d].param);
        decl << "]";
        KILN_ERROR << where.str() << " is given shape " << runtime::shape_str(shape)
                   << ", but the model declares its elements " << decl.str();
      }
    }
    KILN_USER_CHECK(!used_.count(name)) << where.str() << " would be the tensor input '" << name
                                        << "', but the model already has a value of that name";
    used_.insert(name);
    items.push_back(g_.add_input(name, shape, v.dtype));
  }
  values_[v.name] = make_sequence(std::move(items));
}

}  // namespace kiln::frontend::onnx_import

namespace kiln::frontend {

graph::Graph import_onnx(const OnnxModel& model, const ImportOptions& opt) {
  return onnx_import::Converter(model, opt).run();
}

graph::Graph import_onnx(const std::string& path, const ImportOptions& opt) {
  return import_onnx(load_onnx_model(path), opt);
}

std::vector<std::string> supported_onnx_ops() {
  std::vector<std::string> out;
  for (const auto& [name, fn] : onnx_import::table()) out.push_back(name);
  return out;
}

}  // namespace kiln::frontend
