// ONNX element-wise math beyond the basic table: trigonometric and hyperbolic functions (graph
// ops over topi's math intrinsics), Round (half to even), IsNaN, and activations composed from
// graph ops (Softsign, Celu, HardSwish, Shrink). Mod of every integer type is computed exactly
// with integer (floor) division; Mod of floats (fmod=1) as a - trunc(a / b)·b in float64.
// BitShift of unsigned integers multiplies or floor-divides by 2^shift.
#include "converter.h"

namespace kiln::frontend::onnx_import {

namespace {

using graph::Entry;

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

}  // namespace

void register_math_converters(ConvertTable& t) {
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
    t[onnx] = [o = std::string(onnx), op](Converter& c) { return convert_float_unary(c, o, op); };
  t["Softsign"] = convert_softsign;
  t["Celu"] = convert_celu;
  t["HardSwish"] = convert_hard_swish;
  t["Shrink"] = convert_shrink;
  t["Mod"] = convert_mod;
  t["BitShift"] = convert_bitshift;
}

}  // namespace kiln::frontend::onnx_import
