// ONNX quantized operators. QuantizeLinear / DequantizeLinear per tensor or per axis as the
// graph ops qnn_quantize / qnn_dequantize (topi/qnn.h; the quantize_realize pass turns
// dequantize → conv / matmul → quantize into integer products); DynamicQuantizeLinear as
// element-wise graph ops. QLinearMatMul / QLinearConv are an int32
// product of zero-point-corrected operands, scaled in float32 by a_scale·b_scale/y_scale,
// rounded half to even, offset and saturated (as ONNX Runtime requantizes). MatMulInteger and
// ConvInteger: the zero points subtracted in int32, then the int32 matmul / conv2d.
#include <cstring>

#include "converter.h"

namespace kiln::frontend::onnx_import {

namespace {

const DataType kF32 = DataType::Float(32);
const DataType kI32 = DataType::Int(32);

// --- quantization

/// Scale (and zero point) of input i broadcast along `axis` of a rank-r tensor; a one-element
/// 1-D tensor is per tensor (as ONNX Runtime reads it: quantize_static writes such scales).
Entry along_axis(Converter& c, Entry e, int64_t axis, size_t r) {
  if (c.rank_of(e) == 0) return e;
  std::optional<graph::TensorType> t = c.known_type(e);
  if (t && t->known() && t->numel() == 1) return c.op("reshape", {e}, {{"newshape", Ints{}}});
  Ints shape(r, 1);
  shape[static_cast<size_t>(axis)] = -1;
  return c.op("reshape", {e}, {{"newshape", shape}});
}

/// The zero point of a QuantizeLinear / DequantizeLinear (input 2), or a zero of type `t`.
Entry zero_point_or_zero(Converter& c, DataType t) {
  if (c.has_input(2)) return c.in(2);
  runtime::NDArray z = runtime::NDArray::empty({}, t);
  std::memset(z.data(), 0, z.nbytes());
  return c.constant("zero_point", z);
}

std::vector<Entry> convert_dequantize(Converter& c) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(!(t.dtype == DataType::UInt(8) || t.dtype == DataType::Int(8) ||
                     t.dtype == DataType::Int(32)),
                   "DequantizeLinear of " + t.dtype.str());
  size_t r = t.shape.size();
  bool per_axis = c.rank_of(c.in(1)) > 0 && c.type_in(1).numel() > 1;
  int64_t axis = per_axis ? norm_axis(c, c.attr_int("axis", 1), static_cast<int64_t>(r)) : 0;
  DataType st = c.type_in(1).dtype;
  c.unsupported_if(st != DataType::Float(32), "DequantizeLinear to " + st.str());
  Entry zp = zero_point_or_zero(c, t.dtype);
  return {c.op("qnn_dequantize",
               {c.in(0), along_axis(c, c.in(1), axis, r), along_axis(c, zp, axis, r)})};
}

std::vector<Entry> convert_quantize(Converter& c) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(!(t.dtype == DataType::Float(32)), "QuantizeLinear of " + t.dtype.str());
  c.unsupported_if(c.type_in(1).dtype != DataType::Float(32),
                   "QuantizeLinear with a scale of " + c.type_in(1).dtype.str());
  size_t r = t.shape.size();
  bool per_axis = c.rank_of(c.in(1)) > 0 && c.type_in(1).numel() > 1;
  int64_t axis = per_axis ? norm_axis(c, c.attr_int("axis", 1), static_cast<int64_t>(r)) : 0;
  DataType qt = c.has_input(2) ? c.type_in(2).dtype : DataType::UInt(8);
  c.unsupported_if(!(qt == DataType::UInt(8) || qt == DataType::Int(8)),
                   "QuantizeLinear to " + qt.str());
  // saturate(round_half_even(x / scale) + zero_point)
  Entry zp = zero_point_or_zero(c, qt);
  return {
      c.op("qnn_quantize", {c.in(0), along_axis(c, c.in(1), axis, r), along_axis(c, zp, axis, r)})};
}

std::vector<Entry> convert_dynamic_quantize(Converter& c) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(t.dtype != DataType::Float(32), "DynamicQuantizeLinear of " + t.dtype.str());
  DataType f = DataType::Float(32);
  Entry x = c.in(0), zero = c.fill("zero", 0, f);
  Attrs all{{"axes", Ints{}}, {"keepdims", int64_t{0}}};
  Entry mx = c.op("maximum", {c.op("max", {x}, all), zero});
  Entry mn = c.op("minimum", {c.op("min", {x}, all), zero});
  Entry scale = c.op("divide", {c.op("subtract", {mx, mn}), c.fill("qrange", 255, f)});
  Entry zp = c.op("clip", {c.op("round_even", {c.op("divide", {c.op("negative", {mn}), scale})})},
                  {{"a_min", 0.0}, {"a_max", 255.0}});
  Entry y = c.op("clip", {c.op("add", {c.op("round_even", {c.op("divide", {x, scale})}), zp})},
                 {{"a_min", 0.0}, {"a_max", 255.0}});
  std::string u8 = "uint8";
  return {c.op("cast", {y}, {{"dtype", u8}}), scale, c.op("cast", {zp}, {{"dtype", u8}})};
}

// --- QLinearMatMul, QLinearConv

/// The number of elements of input i (a scale or zero point); 1 when it is absent.
int64_t numel_in(Converter& c, size_t i) { return c.has_input(i) ? c.type_in(i).numel() : 1; }

/// Input i cast to int32, minus zero point `zp` (when given) reshaped by `zp_shape` when it has
/// more than one element.
Entry centered(Converter& c, size_t i, size_t zp, const Ints& zp_shape) {
  Entry v = c.op("cast", {c.in(i)}, {{"dtype", kI32.str()}});
  if (!c.has_input(zp)) return v;
  Entry z = c.op("cast", {c.in(zp)}, {{"dtype", kI32.str()}});
  if (numel_in(c, zp) > 1) z = c.op("reshape", {z}, {{"newshape", zp_shape}});
  return c.op("subtract", {v, z});
}

/// round_half_even(acc · a_scale·b_scale / y_scale) + y_zero_point, saturated to y's type.
Entry requantize(Converter& c, Entry acc, Entry b_scale, DataType yt) {
  Entry m = c.op("divide", {c.op("multiply", {c.in(1), b_scale}), c.in(6)});
  Entry y =
      c.op("round_even", {c.op("multiply", {c.op("cast", {acc}, {{"dtype", kF32.str()}}), m})});
  if (c.has_input(7)) y = c.op("add", {y, c.op("cast", {c.in(7)}, {{"dtype", kF32.str()}})});
  double lo = yt == DataType::UInt(8) ? 0 : -128, hi = yt == DataType::UInt(8) ? 255 : 127;
  y = c.op("clip", {y}, {{"a_min", lo}, {"a_max", hi}});
  return c.op("cast", {y}, {{"dtype", yt.str()}});
}

/// Checks the operand, scale and zero-point types; returns y's type.
DataType check_quantized_inputs(Converter& c) {
  DataType yt = c.has_input(7) ? c.type_in(7).dtype : DataType::UInt(8);
  c.unsupported_if(!(yt == DataType::UInt(8) || yt == DataType::Int(8)),
                   c.node->op_type + " to " + yt.str());
  for (size_t i : {0, 3}) {
    DataType t = c.type_in(i).dtype;
    c.unsupported_if(!(t == DataType::UInt(8) || t == DataType::Int(8)),
                     c.node->op_type + " of " + t.str());
  }
  for (size_t i : {1, 4, 6})
    c.unsupported_if(c.type_in(i).dtype != kF32,
                     c.node->op_type + " with a scale of " + c.type_in(i).dtype.str());
  for (size_t i : {1, 2, 6, 7})
    c.unsupported_if(numel_in(c, i) != 1, c.node->op_type + " with a per-axis " +
                                              (i == 1 || i == 2 ? "a" : "y") +
                                              " scale or zero point");
  return yt;
}

std::vector<Entry> convert_qlinear_matmul(Converter& c) {
  DataType yt = check_quantized_inputs(c);
  Ints sa = c.type_in(0).shape, sb = c.type_in(3).shape;
  size_t ra = sa.size(), rb = sb.size();
  c.unsupported_if(ra < 2 || rb < 2 || ra != rb,
                   "QLinearMatMul of ranks " + std::to_string(ra) + " and " + std::to_string(rb));
  c.unsupported_if(!std::equal(sa.begin(), sa.end() - 2, sb.begin()),
                   "QLinearMatMul with broadcast batch dimensions");
  int64_t n = sb[rb - 1];
  int64_t nb = numel_in(c, 4);
  c.unsupported_if(nb != 1 && nb != n,
                   "QLinearMatMul with a b scale of " + std::to_string(nb) + " elements");
  // Per-column b scale / zero point broadcast along the last axis as they are.
  Entry a = centered(c, 0, 2, {}), b = centered(c, 3, 5, {n});
  Entry acc;
  if (ra == 2) {
    acc = c.op("matmul", {a, b});
  } else {
    // batch_matmul is float-only: a [B, M, K, 1] · b [B, 1, K, N] summed over K, in int32.
    int64_t m = sa[ra - 2], k = sa[ra - 1];
    a = c.op("reshape", {a}, {{"newshape", Ints{-1, m, k, 1}}});
    b = c.op("reshape", {b}, {{"newshape", Ints{-1, 1, k, n}}});
    acc = c.op("sum", {c.op("multiply", {a, b})}, {{"axes", Ints{2}}, {"keepdims", int64_t{0}}});
    Ints out(sa.begin(), sa.end() - 1);
    out.push_back(n);
    acc = c.op("reshape", {acc}, {{"newshape", out}});
  }
  return {requantize(c, acc, c.in(4), yt)};
}

std::vector<Entry> convert_qlinear_conv(Converter& c) {
  DataType yt = check_quantized_inputs(c);
  Ints sx = c.type_in(0).shape, sw = c.type_in(3).shape;
  c.unsupported_if(sx.size() != 4, "QLinearConv of a tensor that is not 4-D");
  c.unsupported_if(c.attr_string("auto_pad", "NOTSET") != "NOTSET", "QLinearConv with auto_pad");
  int64_t m = sw[0], nw = numel_in(c, 4);
  c.unsupported_if(nw != 1 && nw != m,
                   "QLinearConv with a w scale of " + std::to_string(nw) + " elements");
  Entry x = centered(c, 0, 2, {}), w = centered(c, 3, 5, {m, 1, 1, 1});
  Entry acc = c.op("conv2d", {x, w},
                   {{"strides", c.attr_ints("strides", {1, 1})},
                    {"padding", c.attr_ints("pads", {0, 0, 0, 0})},
                    {"dilation", c.attr_ints("dilations", {1, 1})},
                    {"groups", c.attr_int("group", 1)}});
  if (c.has_input(8)) {
    c.unsupported_if(c.type_in(8).dtype != kI32,
                     "QLinearConv with a bias of " + c.type_in(8).dtype.str());
    acc = c.op("add", {acc, c.op("reshape", {c.in(8)}, {{"newshape", Ints{1, m, 1, 1}}})});
  }
  Entry ws = c.in(4);
  if (nw > 1) ws = c.op("reshape", {ws}, {{"newshape", Ints{1, m, 1, 1}}});
  return {requantize(c, acc, ws, yt)};
}

/// x - zero_point in int32 (zero point per tensor, or per row / column along `axis`).
Entry minus_zero_point(Converter& c, size_t x, size_t zp, int64_t axis, size_t rank) {
  std::string i32 = "int32";
  Entry v = c.op("cast", {c.in(x)}, {{"dtype", i32}});
  if (!c.has_input(zp)) return v;
  Entry z = c.op("cast", {c.in(zp)}, {{"dtype", i32}});
  if (c.rank_of(c.in(zp)) > 0 && c.type_in(zp).numel() > 1) {
    Ints shape(rank, 1);
    shape[static_cast<size_t>(axis)] = -1;
    z = c.op("reshape", {z}, {{"newshape", shape}});
  }
  return c.op("subtract", {v, z});
}

/// MatMulInteger / ConvInteger: the zero points subtracted in int32, then an int32 product.
std::vector<Entry> convert_integer_product(Converter& c, bool conv) {
  for (size_t i : {0, 1}) {
    DataType t = c.type_in(i).dtype;
    c.unsupported_if(!(t == DataType::UInt(8) || t == DataType::Int(8)),
                     c.node->op_type + " of " + t.str());
  }
  size_t ra = c.type_in(0).shape.size(), rb = c.type_in(1).shape.size();
  if (!conv) {
    c.unsupported_if(ra != 2 || rb != 2, "MatMulInteger of operands that are not 2-D");
    Entry a = minus_zero_point(c, 0, 2, 0, ra), b = minus_zero_point(c, 1, 3, 1, rb);
    return {c.op("matmul", {a, b})};
  }
  c.unsupported_if(ra != 4, "ConvInteger of a tensor that is not 4-D");
  c.unsupported_if(c.attr_string("auto_pad", "NOTSET") != "NOTSET", "ConvInteger with auto_pad");
  Entry x = minus_zero_point(c, 0, 2, 1, ra), w = minus_zero_point(c, 1, 3, 0, rb);
  return {c.op("conv2d", {x, w},
               {{"strides", c.attr_ints("strides", {1, 1})},
                {"padding", c.attr_ints("pads", {0, 0, 0, 0})},
                {"dilation", c.attr_ints("dilations", {1, 1})},
                {"groups", c.attr_int("group", 1)}})};
}

}  // namespace

void register_quant_converters(ConvertTable& t) {
  t.add("DequantizeLinear", convert_dequantize);
  t.add("QuantizeLinear", convert_quantize);
  t.add("DynamicQuantizeLinear", convert_dynamic_quantize);
  t.add("QLinearMatMul", convert_qlinear_matmul);
  t.add("QLinearConv", convert_qlinear_conv);
  t.add("MatMulInteger", [](Converter& c) { return convert_integer_product(c, false); });
  t.add("ConvInteger", [](Converter& c) { return convert_integer_product(c, true); });
}

}  // namespace kiln::frontend::onnx_import
