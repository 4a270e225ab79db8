// ONNX element-wise operators: arithmetic, comparisons and logic (on booleans: xor is "differ",
// and the minimum, or the maximum), Pow, the variadic Max/Min/Sum/Mean, Where, Clip, math
// functions (trigonometric and hyperbolic ones as graph ops over topi's math intrinsics, Round
// half to even, IsNaN, IsInf), activations composed from graph ops (Elu, Selu, HardSigmoid,
// ThresholdedRelu, PRelu, Softsign, Celu, HardSwish, Shrink), Mod (every integer type exactly
// with integer floor division; floats with fmod=1 as a - trunc(a / b)·b in float64, exact for
// float16), BitShift of unsigned integers (multiply or floor-divide by 2^shift), and Cast /
// CastLike (to bool is "non-zero"; bfloat16 through float32's bits, rounding to nearest even).
#include "converter.h"

namespace kiln::frontend::onnx_import {

namespace {

const DataType kF32 = DataType::Float(32);

bool is_f32_or_f64(DataType t) { return t == DataType::Float(32) || t == DataType::Float(64); }

std::vector<Entry> convert_float_unary(Converter& c, const std::string& onnx, const char* op) {
  DataType t = c.type_in(0).dtype;
  c.unsupported_if(!is_f32_or_f64(t), onnx + " of " + t.str());
  return {c.op(op, {c.in(0)})};
}

std::vector<Entry> convert_softsign(Converter& c) {
  DataType t = c.type_in(0).dtype;
  c.unsupported_if(!is_f32_or_f64(t), "Softsign of " + t.str());
  Entry x = c.in(0);
  return {c.op("divide", {x, c.op("add", {c.fill("one", 1, t), c.op("abs", {x})})})};
}

/// Celu: max(0, x) + min(0, alpha (exp(x / alpha) - 1)).
std::vector<Entry> convert_celu(Converter& c) {
  DataType t = c.type_in(0).dtype;
  c.unsupported_if(!is_f32_or_f64(t), "Celu of " + t.str());
  double alpha = c.attr_float("alpha", 1.0);
  KILN_USER_CHECK(alpha != 0) << c.where() << ": alpha must not be 0";
  Entry x = c.in(0), zero = c.fill("zero", 0, t), a = c.fill("alpha", alpha, t);
  Entry e =
      c.op("multiply",
           {a, c.op("subtract", {c.op("exp", {c.op("divide", {x, a})}), c.fill("one", 1, t)})});
  return {c.op("add", {c.op("maximum", {x, zero}), c.op("minimum", {e, zero})})};
}

/// HardSwish: x · clip(x / 6 + 1/2, 0, 1).
std::vector<Entry> convert_hard_swish(Converter& c) {
  DataType t = c.type_in(0).dtype;
  c.unsupported_if(!is_f32_or_f64(t), "HardSwish of " + t.str());
  Entry x = c.in(0);
  Entry y =
      c.op("add", {c.op("multiply", {x, c.fill("alpha", 1.0 / 6.0, t)}), c.fill("beta", 0.5, t)});
  return {c.op("multiply", {x, c.op("clip", {y}, {{"a_min", 0.0}, {"a_max", 1.0}})})};
}

/// Shrink: x < -lambd ? x + bias : (x > lambd ? x - bias : 0).
std::vector<Entry> convert_shrink(Converter& c) {
  DataType t = c.type_in(0).dtype;
  c.unsupported_if(t.is_bool() || t.bits() == 16, "Shrink of " + t.str());
  double lambd = c.attr_float("lambd", 0.5), bias = c.attr_float("bias", 0.0);
  Entry x = c.in(0);
  Entry lo = c.fill("neg_lambd", -lambd, t), hi = c.fill("lambd", lambd, t);
  Entry b = c.fill("bias", bias, t);
  Entry above =
      c.op("where", {c.op("greater", {x, hi}), c.op("subtract", {x, b}), c.fill("zero", 0, t)});
  return {c.op("where", {c.op("less", {x, lo}), c.op("add", {x, b}), above})};
}

std::vector<Entry> convert_mod(Converter& c) {
  DataType t = c.type_in(0).dtype;
  c.unsupported_if(c.type_in(1).dtype != t,
                   "Mod of " + t.str() + " and " + c.type_in(1).dtype.str());
  bool fmod = c.attr_int("fmod", 0) != 0;
  Entry a = c.in(0), b = c.in(1);
  if (t.is_float()) {
    c.unsupported_if(!is_f32_or_f64(t), "Mod of " + t.str());
    KILN_USER_CHECK(fmod) << c.where() << ": Mod of floating-point values needs fmod=1";
    // a - trunc(a / b)·b in float64 (exact enough for float32 operands).
    std::string f64 = "float64";
    if (t != DataType::Float(64)) {
      a = c.op("cast", {a}, {{"dtype", f64}});
      b = c.op("cast", {b}, {{"dtype", f64}});
    }
    Entry q = c.op("divide", {a, b});
    Entry zero = c.fill("zero", 0, DataType::Float(64));
    Entry tq = c.op("where", {c.op("less", {q, zero}), c.op("ceil", {q}), c.op("floor", {q})});
    Entry r = c.op("subtract", {a, c.op("multiply", {tq, b})});
    if (t != DataType::Float(64)) r = c.op("cast", {r}, {{"dtype", t.str()}});
    return {r};
  }
  c.unsupported_if(!t.is_integer() || t.is_bool(), "Mod of " + t.str());
  // Integer division is floor division: r = a - (a / b)·b has the divisor's sign.
  Entry r = c.op("subtract", {a, c.op("multiply", {c.op("divide", {a, b}), b})});
  if (fmod && t.is_int()) {
    // fmod takes the dividend's sign: where r != 0 and its sign differs from a's, r - b.
    Entry zero = c.fill("zero", 0, t);
    Entry differ = c.op("not_equal", {c.op("less", {r, zero}), c.op("less", {a, zero})});
    Entry fix = c.op("minimum", {c.op("not_equal", {r, zero}), differ});
    r = c.op("where", {fix, c.op("subtract", {r, b}), r});
  }
  return {r};
}

/// BitShift of unsigned integers: x · 2^s (LEFT, wrapping) or x / 2^s (RIGHT, floor).
std::vector<Entry> convert_bitshift(Converter& c) {
  DataType t = c.type_in(0).dtype;
  c.unsupported_if(!t.is_uint() || t.is_bool() || c.type_in(1).dtype != t,
                   "BitShift of " + t.str());
  std::string dir = c.attr_string("direction", "");
  KILN_USER_CHECK(dir == "LEFT" || dir == "RIGHT")
      << c.where() << ": direction must be LEFT or RIGHT, got '" << dir << "'";
  // 2^s computed exactly in float64 (s < bits), then converted back to the element type;
  // shifts of the full width or more give 0.
  std::string f64 = "float64";
  Entry s = c.op("cast", {c.in(1)}, {{"dtype", f64}});
  Entry pw = c.op("power", {c.fill("two", 2, DataType::Float(64)), s});
  Entry big = c.op("greater_equal", {c.in(1), c.fill("bits", t.bits(), t)});
  Entry p = c.op("cast", {c.op("where", {big, c.fill("zero_f", 0, DataType::Float(64)), pw})},
                 {{"dtype", t.str()}});
  Entry zero = c.fill("zero", 0, t);
  if (dir == "LEFT") return {c.op("multiply", {c.in(0), p})};
  // p == 0 (a full-width shift) gives 0 rather than a division by zero.
  Entry one = c.fill("one", 1, t);
  Entry safe = c.op("where", {c.op("equal", {p, zero}), one, p});
  return {c.op("where", {c.op("equal", {p, zero}), zero, c.op("divide", {c.in(0), safe})})};
}

// --- Mod of float16

std::vector<Entry> convert_mod_float16(Converter& c) {
  KILN_USER_CHECK(c.attr_int("fmod", 0) != 0)
      << c.where() << ": Mod of floating-point values needs fmod=1";
  // a - trunc(a / b)·b in float64 is exact for float16 operands (the quotient's integer part
  // has at most 40 bits, each product is exact), so the cast back does not round.
  std::string f64 = "float64";
  Entry a = c.op("cast", {c.in(0)}, {{"dtype", f64}}),
        b = c.op("cast", {c.in(1)}, {{"dtype", f64}});
  Entry q = c.op("divide", {a, b});
  Entry tq = c.op("where", {c.op("less", {q, c.fill("zero", 0, DataType::Float(64))}),
                            c.op("ceil", {q}), c.op("floor", {q})});
  Entry r = c.op("subtract", {a, c.op("multiply", {tq, b})});
  return {c.op("cast", {c.op("cast", {r}, {{"dtype", kF32.str()}})},
               {{"dtype", DataType::Float(16).str()}})};
}

// --- bfloat16

/// Cast to or from bfloat16 (the other side a float or integer type; bool is "non-zero").
std::vector<Entry> convert_cast_bfloat16(Converter& c, DataType to) {
  DataType from = c.type_in(0).dtype;
  for (DataType t : {from, to})
    c.unsupported_if(!(t.is_float() || t.is_integer() || t.is_bool()),
                     "Cast between " + from.str() + " and " +
                         (to.is_void() ? std::string("this element type") : to.str()));
  if (from == to) return {c.op("identity", {c.in(0)})};
  if (to.is_bool()) return {c.op("not_equal", {c.in(0), c.fill("zero", 0, kF32)})};
  return {c.op("cast", {c.in(0)}, {{"dtype", to.str()}})};
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
  // (An untyped input, e.g. after an earlier node that cannot be typed, has both bounds.)
  bool real = t.is_float() || t.is_void();
  double tmin = real ? -std::numeric_limits<float>::max()
                     : static_cast<double>(*as_const_int(ir::min_value(t)));
  double tmax = real ? std::numeric_limits<float>::max()
                     : static_cast<double>(*as_const_int(ir::max_value(t)));
  return {c.op("clip", {c.in(0)}, {{"a_min", lo.value_or(tmin)}, {"a_max", hi.value_or(tmax)}})};
}

std::vector<Entry> convert_cast_to(Converter& c, DataType to) {
  DataType from = c.type_in(0).dtype;
  c.unsupported_if(to.is_void() || !(to.is_float() || to.is_integer()) ||
                       (to.bits() == 16 && to != DataType::Float(16)) ||
                       (to.is_uint() && to.bits() > 8 && !to.is_bool()),
                   "Cast to " + (to.is_void() ? std::string("this element type") : to.str()));
  c.unsupported_if(!(from.is_float() || from.is_integer() || from.is_bool()) ||
                       (from.bits() == 16 && from != DataType::Float(16)),
                   "Cast from " + from.str());
  if (from == to) return {c.op("identity", {c.in(0)})};
  // To bool is "non-zero", not a truncation of the bits.
  if (to.is_bool()) return {c.op("not_equal", {c.in(0), c.fill("zero", 0, from)})};
  return {c.op("cast", {c.in(0)}, {{"dtype", to.str()}})};
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

/// Mod: float16 operands with fmod=1 in float64; every other type by convert_mod.
std::vector<Entry> convert_mod_any(Converter& c) {
  if (c.type_in(0).dtype != DataType::Float(16) || c.type_in(1).dtype != DataType::Float(16))
    return convert_mod(c);
  return convert_mod_float16(c);
}

/// PRelu. Before opset 7 a slope that is not a single value is per channel (axis 1), not
/// broadcast from the trailing axes: [C] becomes [C, 1, …, 1].
std::vector<Entry> convert_prelu(Converter& c) {
  int r = c.rank_of(c.in(0));
  if (c.opset >= 7 || r < 3 || c.rank_of(c.in(1)) != 1) return convert_activation(c, "PRelu");
  graph::TensorType xt = c.type_in(0), st = c.type_in(1);
  if (st.shape[0] == 1) return convert_activation(c, "PRelu");
  KILN_USER_CHECK(st.shape[0] == xt.shape[1])
      << c.where() << ": slope " << st.str() << " is neither one value nor one per channel of "
      << xt.str();
  Ints shape(static_cast<size_t>(r - 1), 1);
  shape[0] = -1;
  Entry slope = c.op("reshape", {c.in(1)}, {{"newshape", shape}});
  Entry x = c.in(0);
  Entry zero = c.fill("zero", 0, xt.dtype);
  return {c.op("where", {c.op("less", {x, zero}), c.op("multiply", {x, slope}), x})};
}

/// Cast: to or from bfloat16 (onnx_elem_type has no bfloat16, code 16); to bool ("non-zero",
/// which loop conditions are made of: Range's expanded function casts its trip count); else
/// between the float and integer types.
std::vector<Entry> convert_cast(Converter& c) {
  int64_t to = c.attr_int("to", 0);
  if (to == 16) return convert_cast_bfloat16(c, DataType::BFloat16());
  if (c.type_in(0).dtype.is_bfloat16()) return convert_cast_bfloat16(c, onnx_elem_type(to));
  if (onnx_elem_type(to) != DataType::Bool()) return convert_cast_to(c, onnx_elem_type(to));
  DataType from = c.type_in(0).dtype;
  if (from.is_bool()) return {c.op("identity", {c.in(0)})};
  c.unsupported_if(!(from.is_float() || from.is_integer()), "Cast from " + from.str());
  return {c.op("not_equal", {c.in(0), c.fill("zero", 0, from)})};
}

std::vector<Entry> convert_cast_like(Converter& c) {
  DataType to = c.type_in(1).dtype;
  if (!to.is_bfloat16() && !c.type_in(0).dtype.is_bfloat16()) return convert_cast_to(c, to);
  return convert_cast_bfloat16(c, to);
}

std::vector<Entry> convert_pow(Converter& c) {
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
}

}  // namespace

void register_math_converters(ConvertTable& t) {
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
                                                        {"Not", "logical_not"}})
    t.add(onnx, unary(op));
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
    t.add(onnx, binary(op));
  for (auto [onnx, op] : std::vector<std::pair<const char*, const char*>>{{"Sin", "sin"},
                                                                          {"Cos", "cos"},
                                                                          {"Tan", "tan"},
                                                                          {"Asin", "asin"},
                                                                          {"Acos", "acos"},
                                                                          {"Atan", "atan"},
                                                                          {"Sinh", "sinh"},
                                                                          {"Cosh", "cosh"},
                                                                          {"Asinh", "asinh"},
                                                                          {"Acosh", "acosh"},
                                                                          {"Atanh", "atanh"},
                                                                          {"Round", "round_even"},
                                                                          {"IsNaN", "isnan"}})
    t.add(onnx,
          [o = std::string(onnx), op](Converter& c) { return convert_float_unary(c, o, op); });
  // On booleans (0/1): xor is "differ", and is the minimum, or the maximum.
  t.add("Xor", binary("not_equal"));
  t.add("And", binary("minimum"));
  t.add("Or", binary("maximum"));
  t.add("Pow", convert_pow);
  t.add("Max", variadic("maximum"));
  t.add("Min", variadic("minimum"));
  t.add("Sum", variadic("add"));
  t.add("Mean", convert_mean);
  t.add("Where", [](Converter& c) {
    return std::vector<Entry>{c.op("where", {c.in(0), c.in(1), c.in(2)})};
  });
  t.add("Clip", convert_clip);
  t.add("LeakyRelu", [](Converter& c) {
    return std::vector<Entry>{
        c.op("leaky_relu", {c.in(0)}, {{"alpha", c.attr_float("alpha", 0.01)}})};
  });
  for (const char* a : {"Elu", "Selu", "HardSigmoid", "ThresholdedRelu"})
    t.add(a, [k = std::string(a)](Converter& c) { return convert_activation(c, k); });
  t.add("PRelu", convert_prelu);
  t.add("Softsign", convert_softsign);
  t.add("Celu", convert_celu);
  t.add("HardSwish", convert_hard_swish);
  t.add("Shrink", convert_shrink);
  t.add("IsInf", convert_isinf);
  t.add("Mod", convert_mod_any);
  t.add("BitShift", convert_bitshift);
  t.add("Cast", convert_cast);
  t.add("CastLike", convert_cast_like);
}

}  // namespace kiln::frontend::onnx_import
