// ONNX importer: a small evaluator, on the host, for the graph ops that shape arithmetic and
// loop conditions are made of, so that folding them at import time compiles nothing
// (Converter::folded tries it first). It covers small tensors (at most kMaxElements elements) of
// bool, integer and float32/float64 types and only ops whose result is exact and unambiguous:
// identity and the reshaping ops (reshape, squeeze, unsqueeze, expand_dims, flatten; the output
// shape comes from the op registry's type rule), cast between integer types and from integers
// or floats to floats, integer add / subtract / multiply / negative / minimum / maximum
// (two's-complement wrap-around) and divide (floor division, as the generated code),
// comparisons, logical_not, where, concat, transpose, strided_slice (topi's index math) and take
// with indices in [-n, n). Anything else (float arithmetic, whose rounding is the code generator's
// to decide; division by zero or -1; out-of-range indices) returns nullopt and is folded through
// the compiler.
#include "converter.h"
#include "kiln/graph/op_registry.h"
#include "kiln/topi/transform.h"

namespace kiln::frontend::onnx_import {

namespace {

// Index tensors of a model's constant sub-graphs (Swin's relative-position indices, 49 x 49 x 2)
// cost the host microseconds; a JIT build costs tens of milliseconds.
constexpr int64_t kMaxElements = 65536;

bool host_type(DataType t) {
  return t.is_bool() || (t.is_int() && t.bits() >= 8 && t.bits() <= 64) ||
         (t.is_uint() && t.bits() >= 8 && t.bits() <= 32) || t == DataType::Float(32) ||
         t == DataType::Float(64);
}

bool is_real(DataType t) { return t.is_float(); }

int64_t get_int(const runtime::NDArray& a, int64_t k) {
  DataType t = a.dtype();
  const void* p = a.data();
  if (t.is_bool() || t == DataType::UInt(8)) return static_cast<const uint8_t*>(p)[k];
  if (t == DataType::UInt(16)) return static_cast<const uint16_t*>(p)[k];
  if (t == DataType::UInt(32)) return static_cast<const uint32_t*>(p)[k];
  if (t == DataType::Int(8)) return static_cast<const int8_t*>(p)[k];
  if (t == DataType::Int(16)) return static_cast<const int16_t*>(p)[k];
  if (t == DataType::Int(32)) return static_cast<const int32_t*>(p)[k];
  return static_cast<const int64_t*>(p)[k];
}

double get_real(const runtime::NDArray& a, int64_t k) {
  if (a.dtype() == DataType::Float(32)) return a.data_as<float>()[k];
  return a.data_as<double>()[k];
}

/// Stores integer `v` (wrapped to the type's width, as two's complement).
void set_int(runtime::NDArray& a, int64_t k, int64_t v) {
  DataType t = a.dtype();
  void* p = a.data();
  if (t.is_bool())
    static_cast<uint8_t*>(p)[k] = v != 0;
  else if (t == DataType::UInt(8))
    static_cast<uint8_t*>(p)[k] = static_cast<uint8_t>(v);
  else if (t == DataType::UInt(16))
    static_cast<uint16_t*>(p)[k] = static_cast<uint16_t>(v);
  else if (t == DataType::UInt(32))
    static_cast<uint32_t*>(p)[k] = static_cast<uint32_t>(v);
  else if (t == DataType::Int(8))
    static_cast<int8_t*>(p)[k] = static_cast<int8_t>(v);
  else if (t == DataType::Int(16))
    static_cast<int16_t*>(p)[k] = static_cast<int16_t>(v);
  else if (t == DataType::Int(32))
    static_cast<int32_t*>(p)[k] = static_cast<int32_t>(v);
  else
    static_cast<int64_t*>(p)[k] = v;
}

void set_real(runtime::NDArray& a, int64_t k, double v) {
  if (a.dtype() == DataType::Float(32))
    a.data_as<float>()[k] = static_cast<float>(v);
  else
    a.data_as<double>()[k] = v;
}

/// The element of `a` (broadcast against `out`, numpy rules) read for output element k.
int64_t source_index(const Ints& out, const Ints& in, int64_t k) {
  int64_t idx = 0, stride = 1;
  size_t r = out.size(), ri = in.size();
  for (size_t d = 0; d < ri; ++d) {
    size_t od = r - 1 - d, id = ri - 1 - d;
    int64_t coord = k % out[od];
    k /= out[od];
    if (in[id] != 1) idx += coord * stride;
    stride *= in[id];
  }
  return idx;
}

/// Element-wise ops over broadcast inputs; nullopt when `op` is not one of them or not exact.
std::optional<runtime::NDArray> elementwise(const std::string& op,
                                            const std::vector<const runtime::NDArray*>& in,
                                            const graph::TensorType& ot) {
  runtime::NDArray out = runtime::NDArray::empty(ot.shape, ot.dtype);
  int64_t n = out.numel();
  auto src = [&](size_t i, int64_t k) { return source_index(ot.shape, in[i]->shape(), k); };
  if (op == "where") {
    if (in.size() != 3 || is_real(in[0]->dtype()) || in[1]->dtype() != ot.dtype ||
        in[2]->dtype() != ot.dtype)
      return std::nullopt;
    size_t b = static_cast<size_t>(ot.dtype.bytes());
    for (int64_t k = 0; k < n; ++k) {
      const runtime::NDArray* pick = get_int(*in[0], src(0, k)) != 0 ? in[1] : in[2];
      size_t i = pick == in[1] ? 1 : 2;
      std::memcpy(static_cast<char*>(out.data()) + k * b,
                  static_cast<const char*>(pick->data()) + src(i, k) * b, b);
    }
    return out;
  }
  if (op == "logical_not" || op == "negative") {
    if (in.size() != 1 || is_real(in[0]->dtype())) return std::nullopt;
    for (int64_t k = 0; k < n; ++k) {
      int64_t v = get_int(*in[0], src(0, k));
      set_int(out, k,
              op == "negative" ? static_cast<int64_t>(0ULL - static_cast<uint64_t>(v)) : v == 0);
    }
    return out;
  }
  if (in.size() != 2 || in[0]->dtype() != in[1]->dtype()) return std::nullopt;
  bool real = is_real(in[0]->dtype());
  static const std::set<std::string> compare{"less",      "greater",    "equal",
                                             "not_equal", "less_equal", "greater_equal"};
  if (compare.count(op)) {
    // NaN compares as the code generator decides (ordered or not): left to it.
    for (size_t i = 0; real && i < 2; ++i)
      for (int64_t k = 0; k < in[i]->numel(); ++k)
        if (std::isnan(get_real(*in[i], k))) return std::nullopt;
    for (int64_t k = 0; k < n; ++k) {
      bool r;
      if (real) {
        double a = get_real(*in[0], src(0, k)), b = get_real(*in[1], src(1, k));
        r = op == "less"         ? a < b
            : op == "greater"    ? a > b
            : op == "equal"      ? a == b
            : op == "not_equal"  ? a != b
            : op == "less_equal" ? a <= b
                                 : a >= b;
      } else {
        int64_t a = get_int(*in[0], src(0, k)), b = get_int(*in[1], src(1, k));
        r = op == "less"         ? a < b
            : op == "greater"    ? a > b
            : op == "equal"      ? a == b
            : op == "not_equal"  ? a != b
            : op == "less_equal" ? a <= b
                                 : a >= b;
      }
      set_int(out, k, r);
    }
    return out;
  }
  static const std::set<std::string> arith{"add",     "subtract", "multiply",
                                           "minimum", "maximum",  "divide"};
  if (!arith.count(op) || real || ot.dtype != in[0]->dtype()) return std::nullopt;
  for (int64_t k = 0; k < n; ++k) {
    int64_t a = get_int(*in[0], src(0, k)), b = get_int(*in[1], src(1, k));
    // Integer division is floor division, as the generated code's (ir operator/); a zero
    // divisor, or -1 (the type's minimum over -1 overflows), is left to the compiler.
    if (op == "divide" && (b == 0 || b == -1)) return std::nullopt;
    uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    int64_t r = op == "add"        ? static_cast<int64_t>(ua + ub)
                : op == "subtract" ? static_cast<int64_t>(ua - ub)
                : op == "multiply" ? static_cast<int64_t>(ua * ub)
                : op == "divide"   ? a / b - ((a % b != 0 && (a < 0) != (b < 0)) ? 1 : 0)
                : op == "minimum"  ? std::min(a, b)
                                   : std::max(a, b);
    set_int(out, k, r);
  }
  return out;
}

std::optional<runtime::NDArray> cast(const runtime::NDArray& x, const graph::TensorType& ot) {
  DataType from = x.dtype(), to = ot.dtype;
  runtime::NDArray out = runtime::NDArray::empty(ot.shape, to);
  bool ok = (from.is_integer() || from.is_bool()) && to.is_integer() && !to.is_bool();
  ok = ok || is_real(to);
  if (!ok) return std::nullopt;
  for (int64_t k = 0; k < x.numel(); ++k) {
    if (is_real(to))
      set_real(out, k, is_real(from) ? get_real(x, k) : static_cast<double>(get_int(x, k)));
    else
      set_int(out, k, get_int(x, k));
  }
  // int64 values beyond 2^53 convert with one rounding through double to float32: not exact.
  if (is_real(to) && !is_real(from) && to == DataType::Float(32))
    for (int64_t k = 0; k < x.numel(); ++k)
      if (get_int(x, k) > (int64_t{1} << 53) || get_int(x, k) < -(int64_t{1} << 53))
        return std::nullopt;
  return out;
}

std::optional<runtime::NDArray> concat(const std::vector<const runtime::NDArray*>& in, int64_t axis,
                                       const graph::TensorType& ot) {
  runtime::NDArray out = runtime::NDArray::empty(ot.shape, ot.dtype);
  int64_t r = static_cast<int64_t>(ot.shape.size());
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return std::nullopt;
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= ot.shape[d];
  size_t b = static_cast<size_t>(ot.dtype.bytes());
  char* dst = static_cast<char*>(out.data());
  for (int64_t o = 0; o < outer; ++o) {
    for (const runtime::NDArray* a : in) {
      if (a->dtype() != ot.dtype) return std::nullopt;
      int64_t chunk = a->numel() / std::max<int64_t>(outer, 1);
      size_t bytes = static_cast<size_t>(chunk) * b;
      std::memcpy(dst, static_cast<const char*>(a->data()) + o * bytes, bytes);
      dst += bytes;
    }
  }
  return out;
}

/// out[i] = x[source(i)] for a data-movement op: `source` maps an output coordinate vector to
/// the input's flat index.
runtime::NDArray gather(const runtime::NDArray& x, const graph::TensorType& ot,
                        const std::function<int64_t(const Ints&)>& source) {
  runtime::NDArray out = runtime::NDArray::empty(ot.shape, ot.dtype);
  const size_t b = static_cast<size_t>(ot.dtype.bytes());
  Ints c(ot.shape.size(), 0);
  for (int64_t k = 0; k < out.numel(); ++k) {
    std::memcpy(static_cast<char*>(out.data()) + k * static_cast<int64_t>(b),
                static_cast<const char*>(x.data()) + source(c) * static_cast<int64_t>(b), b);
    for (size_t d = c.size(); d-- > 0;) {  // the next coordinate, row-major
      if (++c[d] < ot.shape[d]) break;
      c[d] = 0;
    }
  }
  return out;
}

/// The flat index of coordinate `c` in row-major `shape`.
int64_t flat(const Ints& shape, const Ints& c) {
  int64_t k = 0;
  for (size_t d = 0; d < shape.size(); ++d) k = k * shape[d] + c[d];
  return k;
}

std::optional<runtime::NDArray> take(const runtime::NDArray& x, const runtime::NDArray& idx,
                                     int64_t axis, const graph::TensorType& ot) {
  if (is_real(idx.dtype())) return std::nullopt;
  int64_t r = x.ndim();
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return std::nullopt;
  int64_t outer = 1, inner = 1, n = x.shape()[axis];
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (int64_t d = axis + 1; d < r; ++d) inner *= x.shape()[d];
  // Negative indices count from the end, as the compiled take wraps them (i + n).
  auto index = [&](int64_t k) {
    const int64_t i = get_int(idx, k);
    return i < 0 ? i + n : i;
  };
  for (int64_t k = 0; k < idx.numel(); ++k)
    if (index(k) < 0 || index(k) >= n) return std::nullopt;
  runtime::NDArray out = runtime::NDArray::empty(ot.shape, ot.dtype);
  if (out.numel() != outer * idx.numel() * inner || ot.dtype != x.dtype()) return std::nullopt;
  size_t b = static_cast<size_t>(x.dtype().bytes()), row = static_cast<size_t>(inner) * b;
  char* dst = static_cast<char*>(out.data());
  const char* base = static_cast<const char*>(x.data());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < idx.numel(); ++k, dst += row)
      std::memcpy(dst, base + (o * n + index(k)) * static_cast<int64_t>(row), row);
  return out;
}

}  // namespace

std::optional<runtime::NDArray> eval_on_host(const graph::Node& n,
                                             const std::vector<const runtime::NDArray*>& in) {
  static const std::set<std::string> ops{
      "identity", "reshape",   "squeeze",       "unsqueeze",     "expand_dims", "flatten",
      "cast",     "add",       "subtract",      "multiply",      "minimum",     "maximum",
      "negative", "less",      "greater",       "equal",         "not_equal",   "less_equal",
      "divide",   "transpose", "strided_slice", "greater_equal", "logical_not", "where",
      "concat",   "take"};
  if (!n.is_op() || !ops.count(n.op)) return std::nullopt;
  std::vector<graph::TensorType> types;
  for (const runtime::NDArray* a : in) {
    if (!a || !host_type(a->dtype()) || a->numel() > kMaxElements) return std::nullopt;
    types.push_back(graph::TensorType{a->shape(), a->dtype()});
  }
  const graph::OpDef* def = graph::OpRegistry::global().find(n.op);
  if (!def) return std::nullopt;
  graph::Attrs attrs;
  std::vector<graph::TensorType> outs;
  try {
    attrs = def->normalize_attrs(n.attrs, n.name);
    outs = def->infer(types, attrs);
  } catch (const Error&) {
    return std::nullopt;
  }
  if (outs.size() != 1 || !outs[0].known() || !host_type(outs[0].dtype) ||
      outs[0].numel() > kMaxElements)
    return std::nullopt;
  const graph::TensorType& ot = outs[0];
  static const std::set<std::string> reshaping{"identity",  "reshape",     "squeeze",
                                               "unsqueeze", "expand_dims", "flatten"};
  if (reshaping.count(n.op)) {
    if (in.size() != 1 || ot.dtype != in[0]->dtype() || ot.numel() != in[0]->numel())
      return std::nullopt;
    runtime::NDArray out = runtime::NDArray::empty(ot.shape, ot.dtype);
    std::memcpy(out.data(), in[0]->data(),
                static_cast<size_t>(in[0]->numel()) * static_cast<size_t>(ot.dtype.bytes()));
    return out;
  }
  if (n.op == "cast") return in.size() == 1 ? cast(*in[0], ot) : std::nullopt;
  if ((n.op == "transpose" || n.op == "strided_slice") &&
      (in.size() != 1 || ot.dtype != in[0]->dtype()))
    return std::nullopt;
  // The index math is topi's own (transpose_permutation, strided_slice_window), which the type
  // rule has already checked.
  if (n.op == "transpose") {
    const Ints& is = in[0]->shape();
    const std::vector<int64_t> axes = attrs.get_ints("axes");
    const std::vector<int> perm =
        topi::transpose_permutation(is, std::vector<int>(axes.begin(), axes.end()));
    Ints src(is.size());
    return gather(*in[0], ot, [&](const Ints& c) {
      for (size_t d = 0; d < perm.size(); ++d) src[static_cast<size_t>(perm[d])] = c[d];
      return flat(is, src);
    });
  }
  if (n.op == "strided_slice") {
    const Ints& is = in[0]->shape();
    const std::vector<int64_t> axes = attrs.get_ints("axes");
    const topi::SliceWindow w = topi::strided_slice_window(
        is, attrs.get_ints("begin"), attrs.get_ints("end"), attrs.get_ints("strides"),
        std::vector<int>(axes.begin(), axes.end()));
    if (w.extent != ot.shape) return std::nullopt;
    Ints src(is.size());
    return gather(*in[0], ot, [&](const Ints& c) {
      for (size_t d = 0; d < is.size(); ++d) src[d] = w.start[d] + c[d] * w.step[d];
      return flat(is, src);
    });
  }
  if (n.op == "concat") return concat(in, attrs.get_int("axis"), ot);
  if (n.op == "take")
    return in.size() == 2 ? take(*in[0], *in[1], attrs.get_int("axis"), ot) : std::nullopt;
  return elementwise(n.op, in, ot);
}

}  // namespace kiln::frontend::onnx_import
