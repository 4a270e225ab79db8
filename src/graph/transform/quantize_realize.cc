// Quantize realisation: the QDQ regions of a quantized model (ONNX Runtime's quantize_static
// writes DequantizeLinear → Conv / Gemm / MatMul → QuantizeLinear) become integer products with
// a fused requantisation epilogue (topi/qnn.h). Matched, per qnn_quantize node q(v, s_y, z_y)
// with scalar constant scale and zero point, walking up from v through nodes read only there:
//   [relu | clip]           folded into the saturation bounds: Q(relu(v)) = max(Q(v), z_y),
//                           Q(clip(v, a, b)) = clamp(Q(v), Q(a), Q(b)) (Q is monotone);
//   [add(·, bias)]          bias = dequantize(int32 constant) or a float32 constant, one value
//                           per output channel (through reshapes);
//   conv2d(x̂, Ŵ) | dense(x̂, Ŵ) | matmul(x̂, Ŵ)   (2-D; a matmul's data may have leading
//                                                   axes, computed as rows of a 2-D product)
// where x̂ = qnn_dequantize(x, s_x, z_x) with scalar constants and x uint8/int8, and Ŵ =
// qnn_dequantize(W, s_w, 0) of an int8 constant, per tensor or per output channel (a dense's
// weight may come through a transpose). The product becomes qnn_conv2d / qnn_dense reading x
// itself, with bias[o] = the int32 bias when its scale is s_x·s_w[o] (as quantize_static writes
// it), else round_half_even(bias / (s_x·s_w[o])), and multiplier (s_x·s_w[o]) / s_y in float32,
// as ONNX Runtime computes it. Also: add(x̂, ŷ) of the output's type → qnn_add (QLinearAdd),
// global_avg_pool2d(x̂) → qnn_global_avg_pool2d, and max_pool2d(x̂) quantized with x's own
// scale and zero point → max_pool2d of x itself (exact). Everything else (Concat, reshapes,
// other pooling, the graph's float edges) stays as it is: dequantize → float op → quantize.
// A product no integer kernel of the target takes (the op's strategy offers none: every product
// on a CPU without VNNI, a grouped convolution that is not depthwise, channels in no block of 8:
// GhostNet's 12, 20, 36, 60) gets its integer sums from the float product on integer-valued
// data and weights, then requantised as above. As int32 under the rule-based scheduler it ran
// at 1-47% of the FMA peak: RegNetY-400MF's int8 model 3x slower than its float one, ResNet-50's
// 5x slower on an AVX2 Zen 3.
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "kiln/graph/op_registry.h"
#include "kiln/graph/strategy.h"
#include "kiln/graph/transform.h"
#include "kiln/support/error.h"
#include "pass_util.h"

namespace kiln::graph {

namespace {

using runtime::NDArray;

/// True when node `e` of `g` is an op node running `op` (the one place this pass compares op
/// names: its rules are written for these ops).
bool is(const Graph& g, Entry e, const char* op) {
  const Node& n = g.node(e.node);
  return n.is_op() && n.op == op;
}

bool is_reshaping(const Graph& g, Entry e) {
  for (const char* op : {"reshape", "expand_dims", "squeeze", "unsqueeze", "flatten"})
    if (is(g, e, op)) return true;
  return false;
}

/// `e` with the element-order-preserving reshapes above it skipped.
Entry skip_reshapes(const Graph& g, Entry e) {
  while (is_reshaping(g, e) && !g.node(e.node).inputs.empty()) e = g.node(e.node).inputs[0];
  return e;
}

/// The constant value of `e` (through reshapes), or nullptr.
const NDArray* const_of(const Graph& g, Entry e) {
  const Node& n = g.node(skip_reshapes(g, e).node);
  return n.is_constant() ? &n.value : nullptr;
}

bool is_q8(DataType t) { return t == DataType::UInt(8) || t == DataType::Int(8); }

int64_t int_at(const NDArray& a, int64_t k) {
  if (a.dtype() == DataType::UInt(8)) return a.data_as<uint8_t>()[k];
  if (a.dtype() == DataType::Int(8)) return a.data_as<int8_t>()[k];
  if (a.dtype() == DataType::Int(32)) return a.data_as<int32_t>()[k];
  return 0;
}

/// A scalar float32 constant.
std::optional<float> scalar_f32(const Graph& g, Entry e) {
  const NDArray* a = const_of(g, e);
  if (!a || a->numel() != 1 || a->dtype() != DataType::Float(32)) return std::nullopt;
  return a->data_as<float>()[0];
}

/// A per-tensor activation quantization: x (uint8/int8), scale, zero point.
struct ActQuant {
  Entry x;
  float scale = 1;
  int64_t zero_point = 0;
};

std::optional<ActQuant> act_quant(const Graph& g, const Node& n) {
  if (n.inputs.size() != 3) return std::nullopt;
  std::optional<float> s = scalar_f32(g, n.inputs[1]);
  const NDArray* z = const_of(g, n.inputs[2]);
  if (!s || !z || z->numel() != 1 || !is_q8(z->dtype()) || !(*s > 0) || !std::isfinite(*s))
    return std::nullopt;
  return ActQuant{n.inputs[0], *s, int_at(*z, 0)};
}

/// An int8 weight constant dequantized per tensor or along one axis, zero points all 0.
struct WeightQuant {
  const NDArray* q = nullptr;
  std::vector<float> scale;  ///< one value, or one per index of `axis`
  int axis = -1;             ///< -1: per tensor
};

std::optional<WeightQuant> weight_quant(const Graph& g, Entry e) {
  if (!is(g, e, "qnn_dequantize")) return std::nullopt;
  const Node& d = g.node(e.node);
  const Node& qn = g.node(d.inputs[0].node);
  const NDArray* s = const_of(g, d.inputs[1]);
  const NDArray* z = const_of(g, d.inputs[2]);
  if (!qn.is_constant() || qn.value.dtype() != DataType::Int(8) || !s ||
      s->dtype() != DataType::Float(32) || !z)
    return std::nullopt;
  for (int64_t k = 0; k < z->numel(); ++k)
    if (int_at(*z, k) != 0) return std::nullopt;
  WeightQuant w;
  w.q = &qn.value;
  w.scale.assign(s->data_as<float>(), s->data_as<float>() + s->numel());
  for (float v : w.scale)
    if (!(v > 0) || !std::isfinite(v)) return std::nullopt;
  if (s->numel() > 1) {
    // The axis is the one non-unit extent of the broadcast scale.
    const std::vector<int64_t>& ss = g.type_of(d.inputs[1]).shape;
    const std::vector<int64_t>& ws = g.type_of(d.inputs[0]).shape;
    if (ss.size() != ws.size()) return std::nullopt;
    for (size_t k = 0; k < ss.size(); ++k)
      if (ss[k] != 1) w.axis = static_cast<int>(k);
    if (w.axis < 0 || ss[static_cast<size_t>(w.axis)] != s->numel()) return std::nullopt;
  }
  return w;
}

/// W [K, N] int8 → [N, K].
NDArray transpose2(const NDArray& w) {
  const int64_t K = w.shape()[0], N = w.shape()[1];
  NDArray r = NDArray::empty({N, K}, w.dtype());
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) r.data_as<int8_t>()[n * K + k] = w.data_as<int8_t>()[k * N + n];
  return r;
}

/// What replaces one quantize node.
struct Realized {
  enum class Kind { kConv, kDense, kAdd, kPool, kMaxPool } kind = Kind::kDense;
  Entry x;           ///< the quantized data (old graph)
  Entry x2;          ///< kAdd: the second operand
  NDArray weight;    ///< int8, OIHW or [N, K]
  NDArray bias;      ///< int32 [O]
  NDArray scale;     ///< float32 [O]
  Attrs attrs;       ///< the product's attributes (conv geometry) and requantisation
  std::string name;  ///< the product's name
};

class Realizer {
 public:
  explicit Realizer(const Graph& g) : g_(g), uses_(detail::use_counts(g)) {}

  /// The integer product for quantize node `i`, or nothing when the pattern does not apply.
  std::optional<Realized> match(int i) {
    const Node& q = g_.node(i);
    if (!q.is_op() || !is(g_, Entry{i, 0}, "qnn_quantize")) return std::nullopt;
    std::optional<ActQuant> yq = act_quant(g_, q);
    if (!yq) return std::nullopt;
    const DataType yt = q.outputs[0].dtype;
    int64_t lo = yt == DataType::UInt(8) ? 0 : -128, hi = yt == DataType::UInt(8) ? 255 : 127;
    Entry v = q.inputs[0];
    // Max pooling between a dequantize and a quantize with the same parameters (what
    // quantize_static writes around MaxPool): max commutes with the monotone dequantize and
    // Q(DQ(x)) = x, so it pools the quantized values themselves, exactly (ONNX Runtime drops
    // the pair too).
    if (single_use(v) && is(g_, v, "max_pool2d") &&
        is(g_, g_.node(v.node).inputs[0], "qnn_dequantize")) {
      const Node& pool = g_.node(v.node);
      std::optional<ActQuant> xq = act_quant(g_, g_.node(pool.inputs[0].node));
      if (!xq || g_.type_of(xq->x).dtype != yt || xq->scale != yq->scale ||
          xq->zero_point != yq->zero_point || pool.num_outputs() != 1 ||
          (pool.attrs.has("layout") && pool.attrs.get_string("layout") != "NCHW"))
        return std::nullopt;
      Realized r;
      r.kind = Realized::Kind::kMaxPool;
      r.x = xq->x;
      r.name = pool.name;
      r.attrs = pool.attrs;
      return r;
    }
    // Relu / Clip: the saturation bounds.
    if (single_use(v) && is(g_, v, "relu")) {
      lo = std::max(lo, yq->zero_point);
      v = g_.node(v.node).inputs[0];
    } else if (single_use(v) && is(g_, v, "clip")) {
      const Node& c = g_.node(v.node);
      lo = std::max(lo, quantize(c.attrs.get_float("a_min"), *yq, lo, hi));
      hi = std::min(hi, quantize(c.attrs.get_float("a_max"), *yq, lo, hi));
      v = c.inputs[0];
    }
    // The requantisation of a product or a pool: zero points, saturation bounds, type.
    auto finish = [&](Realized& r, int64_t x_zero_point) {
      r.attrs.set("x_zero_point", x_zero_point);
      r.attrs.set("y_zero_point", yq->zero_point);
      r.attrs.set("out_min", lo);
      r.attrs.set("out_max", hi);
      r.attrs.set("out_dtype", yt.str());
      return r;
    };
    // The sum of two dequantized tensors of the output's type: ONNX Runtime's QLinearAdd.
    if (single_use(v) && is(g_, v, "add")) {
      const Node& a = g_.node(v.node);
      if (a.inputs.size() == 2 && is(g_, a.inputs[0], "qnn_dequantize") &&
          is(g_, a.inputs[1], "qnn_dequantize")) {
        std::optional<ActQuant> qa = act_quant(g_, g_.node(a.inputs[0].node));
        std::optional<ActQuant> qb = act_quant(g_, g_.node(a.inputs[1].node));
        if (!qa || !qb || g_.type_of(qa->x) != q.outputs[0] || g_.type_of(qb->x) != q.outputs[0])
          return std::nullopt;
        Realized r;
        r.kind = Realized::Kind::kAdd;
        r.x = qa->x;
        r.x2 = qb->x;
        r.name = a.name;
        // As MLAS computes them, in float32.
        const float ra = qa->scale / yq->scale, rb = qb->scale / yq->scale;
        const float fixed =
            static_cast<float>(yq->zero_point) - std::fma(ra, static_cast<float>(qa->zero_point),
                                                          rb * static_cast<float>(qb->zero_point));
        r.attrs.set("ratio_a", static_cast<double>(ra));
        r.attrs.set("ratio_b", static_cast<double>(rb));
        r.attrs.set("fixed", static_cast<double>(fixed));
        r.attrs.set("out_min", lo);
        r.attrs.set("out_max", hi);
        r.attrs.set("out_dtype", yt.str());
        return r;
      }
    }
    // Global average pooling of a dequantized tensor: ONNX Runtime's QLinearGlobalAveragePool.
    if (single_use(v) && is(g_, v, "global_avg_pool2d") &&
        is(g_, g_.node(v.node).inputs[0], "qnn_dequantize")) {
      const Node& pool = g_.node(v.node);
      std::optional<ActQuant> xq = act_quant(g_, g_.node(pool.inputs[0].node));
      if (!xq || g_.type_of(xq->x).dtype != yt || g_.type_of(xq->x).shape.size() != 4 ||
          (pool.attrs.has("layout") && pool.attrs.get_string("layout") != "NCHW"))
        return std::nullopt;
      const std::vector<int64_t>& xs = g_.type_of(xq->x).shape;
      Realized r;
      r.kind = Realized::Kind::kPool;
      r.x = xq->x;
      r.name = pool.name;
      // As MLAS computes it, in float32.
      const float scale = xq->scale / (yq->scale * static_cast<float>(xs[2] * xs[3]));
      r.attrs.set("scale", static_cast<double>(scale));
      return finish(r, xq->zero_point);
    }
    std::optional<Entry> rows_of;  // a row-wise MatMul's N-D data x̂ (rows_matmul)
    if (auto m = rows_matmul(v)) {
      rows_of = m->second;
      v = m->first;
    }
    // Bias.
    std::optional<Entry> bias;
    if (single_use(v) && is(g_, v, "add")) {
      const Node& a = g_.node(v.node);
      if (a.inputs.size() != 2) return std::nullopt;
      for (int k = 0; k < 2 && !bias; ++k) {
        Entry p = a.inputs[static_cast<size_t>(k)];
        if (auto m = rows_matmul(p)) {
          rows_of = m->second;
          p = m->first;
        }
        if (is(g_, p, "conv2d") || is(g_, p, "dense") || is(g_, p, "matmul")) {
          bias = a.inputs[static_cast<size_t>(1 - k)];
          v = p;
        }
      }
      if (!bias) return std::nullopt;
    }
    if (!single_use(v)) return std::nullopt;
    const Node& p = g_.node(v.node);
    const bool conv = is(g_, v, "conv2d");
    if (!conv && !is(g_, v, "dense") && !is(g_, v, "matmul")) return std::nullopt;
    const Entry data = rows_of ? *rows_of : p.inputs[0];
    if (p.inputs.size() != 2 || !is(g_, data, "qnn_dequantize")) return std::nullopt;
    std::optional<ActQuant> xq = act_quant(g_, g_.node(data.node));
    if (!xq || !is_q8(g_.type_of(xq->x).dtype)) return std::nullopt;
    const TensorType& xt = g_.type_of(xq->x);
    // The weight, as OIHW (conv) or [N, K] (dense), with its output-channel scales.
    Entry we = p.inputs[1];
    bool transposed = is(g_, v, "matmul");
    if (!conv && is(g_, we, "transpose")) {
      const Node& t = g_.node(we.node);
      if (t.attrs.get_ints("axes") != std::vector<int64_t>{1, 0}) return std::nullopt;
      we = t.inputs[0];
      transposed = !transposed;
    }
    std::optional<WeightQuant> wq = weight_quant(g_, we);
    if (!wq) return std::nullopt;
    NDArray w = *wq->q;
    if (conv) {
      if (xt.shape.size() != 4 || w.ndim() != 4 || (wq->axis != -1 && wq->axis != 0))
        return std::nullopt;
    } else {
      // A MatMul's data may have leading axes (a transformer's [B, S, K] · [K, N]): its rows.
      const bool rows = is(g_, v, "matmul") && xt.shape.size() > 2;
      if ((xt.shape.size() != 2 && !rows) || w.ndim() != 2) return std::nullopt;
      const int out_axis = transposed ? 1 : 0;
      if (wq->axis != -1 && wq->axis != out_axis) return std::nullopt;
      if (transposed) w = transpose2(w);
    }
    const int64_t O = w.shape()[0];
    std::vector<float> sw(static_cast<size_t>(O));
    for (int64_t o = 0; o < O; ++o)
      sw[static_cast<size_t>(o)] = wq->scale.size() == 1 ? wq->scale[0] : wq->scale[size_t(o)];
    Realized r;
    r.kind = conv ? Realized::Kind::kConv : Realized::Kind::kDense;
    r.x = xq->x;
    r.weight = w;
    r.name = p.name;
    r.scale = NDArray::empty({O}, DataType::Float(32));
    r.bias = NDArray::empty({O}, DataType::Int(32));
    for (int64_t o = 0; o < O; ++o) {
      const float sxw = xq->scale * sw[static_cast<size_t>(o)];
      r.scale.data_as<float>()[o] = sxw / yq->scale;  // as ONNX Runtime: (s_x · s_w) / s_y
      r.bias.data_as<int32_t>()[o] = 0;
    }
    if (bias && !bias_values(*bias, O, conv, xq->scale, sw, &r.bias)) return std::nullopt;
    if (conv) {
      for (const char* k : {"strides", "padding", "dilation", "groups"})
        r.attrs.set(k, p.attrs.get(k));
    }
    return finish(r, xq->zero_point);
  }

 private:
  bool single_use(Entry e) const { return uses_[static_cast<size_t>(e.node)] == 1; }

  /// A MatMul of N-D data as the importer writes it, reshape(matmul(reshape(x̂), W)), where the
  /// reshapes only merge and split the leading axes (the rows of a row-wise product): the
  /// matmul and x̂ (a qnn_dequantize), or nothing.
  std::optional<std::pair<Entry, Entry>> rows_matmul(Entry e) const {
    if (!single_use(e) || !is(g_, e, "reshape")) return std::nullopt;
    const Entry m = g_.node(e.node).inputs[0];
    if (!single_use(m) || !is(g_, m, "matmul")) return std::nullopt;
    const TensorType &et = g_.type_of(e), &mt = g_.type_of(m);
    if (mt.shape.size() != 2 || et.shape.size() <= 2 || et.shape.back() != mt.shape[1])
      return std::nullopt;
    const Entry r = g_.node(m.node).inputs[0];
    if (!single_use(r) || !is(g_, r, "reshape")) return std::nullopt;
    const Entry d = g_.node(r.node).inputs[0];
    const TensorType &rt = g_.type_of(r), &dt = g_.type_of(d);
    if (!is(g_, d, "qnn_dequantize") || rt.shape.size() != 2 || dt.shape.size() <= 2 ||
        dt.shape.back() != rt.shape[1])
      return std::nullopt;
    return std::make_pair(m, d);
  }

  /// The quantized value of real `v` under `q`, within [lo, hi].
  static int64_t quantize(double v, const ActQuant& q, int64_t lo, int64_t hi) {
    double r = std::nearbyint(static_cast<float>(v) / q.scale) + static_cast<double>(q.zero_point);
    return static_cast<int64_t>(std::min<double>(hi, std::max<double>(lo, r)));
  }

  /// The int32 bias (one per output channel) of bias entry `b`; false when it is not a
  /// per-channel constant or dequantized constant.
  bool bias_values(Entry b, int64_t O, bool conv, float sx, const std::vector<float>& sw,
                   NDArray* out) const {
    // One value per output channel on the channel axis (conv: axis 1 of 4; dense: the last).
    std::vector<int64_t> bs = g_.type_of(b).shape;
    if (conv) {
      while (bs.size() < 4) bs.insert(bs.begin(), 1);
      if (bs.size() != 4 || bs[0] != 1 || bs[1] != O || bs[2] != 1 || bs[3] != 1) return false;
    } else {
      if (bs.empty() || bs.back() != O) return false;
      for (size_t k = 0; k + 1 < bs.size(); ++k)
        if (bs[k] != 1) return false;
    }
    Entry src = skip_reshapes(g_, b);
    auto put = [&](int64_t o, double real) {
      const double q = std::nearbyint(real / static_cast<double>(sx * sw[static_cast<size_t>(o)]));
      if (!(std::abs(q) < 2147483647.0)) return false;
      out->data_as<int32_t>()[o] = static_cast<int32_t>(q);
      return true;
    };
    if (is(g_, src, "qnn_dequantize")) {
      const Node& d = g_.node(src.node);
      const NDArray* q = const_of(g_, d.inputs[0]);
      const NDArray* s = const_of(g_, d.inputs[1]);
      const NDArray* z = const_of(g_, d.inputs[2]);
      if (!q || !s || !z || q->dtype() != DataType::Int(32) || q->numel() != O ||
          s->dtype() != DataType::Float(32) || (s->numel() != 1 && s->numel() != O) ||
          (z->numel() != 1 && z->numel() != O))
        return false;
      for (int64_t o = 0; o < O; ++o) {
        const float so = s->data_as<float>()[s->numel() == 1 ? 0 : o];
        const int64_t zo = int_at(*z, z->numel() == 1 ? 0 : o), qo = int_at(*q, o);
        const float want = sx * sw[static_cast<size_t>(o)];
        if (zo == 0 && std::abs(so - want) <= 1e-6f * want) {
          out->data_as<int32_t>()[o] = static_cast<int32_t>(qo);  // quantize_static's bias
        } else if (!put(o, static_cast<double>(qo - zo) * so)) {
          return false;
        }
      }
      return true;
    }
    const NDArray* c = const_of(g_, src);
    if (!c || c->dtype() != DataType::Float(32) || c->numel() != O) return false;
    for (int64_t o = 0; o < O; ++o)
      if (!put(o, c->data_as<float>()[o])) return false;
    return true;
  }

  const Graph& g_;
  std::vector<int> uses_;
};

/// Integer ops whose int8 activations may be carried as uint8 + 128 (see shift_to_uint8).
bool shifts_output(const Graph& g, int i) {
  const Node& n = g.node(i);
  if (!n.is_op() || n.num_outputs() != 1 || n.outputs[0].dtype != DataType::Int(8)) return false;
  const Entry e{i, 0};
  if (is(g, e, "qnn_quantize"))
    return const_of(g, n.inputs[2]) != nullptr && const_of(g, n.inputs[2])->numel() == 1;
  return is(g, e, "qnn_conv2d") || is(g, e, "qnn_dense") || is(g, e, "qnn_add") ||
         is(g, e, "qnn_global_avg_pool2d");
}

/// `x` (an entry of `out`) reshaped to `shape`.
Entry reshape(Graph& out, Entry x, const std::vector<int64_t>& shape) {
  Node n;
  n.op = "reshape";
  n.attrs.set("newshape", shape);
  n.inputs = {x};
  n.outputs = {TensorType{shape, out.type_of(x).dtype}};
  return Entry{out.add_node(std::move(n)), 0};
}

/// A float-sum product's result before its cast to 8 bits: `values` (float) + `zero_point`.
struct CentredIntegers {
  Entry values;
  int64_t zero_point = 0;
};

/// An integer product's sums as the float product computes them, where the target has no
/// integer kernel for it (no VNNI, or a grouped convolution): qnn_dequantize(x, 1, z_x) and the
/// int8 weights as floats are integers, and so are their products and sums while under 2^24
/// (exact up to 514 products per output, 2^24 / (255 · 128); beyond, only a sum whose magnitude
/// passes 2^24 may round, and then a requantised value near a rounding boundary may move one unit).
/// A convolution is marked exact (no Winograd: its transformed operands are not integers). Then
/// ONNX Runtime's requantisation: round_half_even((acc + bias) * scale), clamped, plus the
/// output's zero point. `x` is the data in `out` (a dense's [M, K] rows); the result, named
/// `name`, has type `yt`. `integers` maps each such result (its node) to its values less its
/// zero point, before the cast to 8 bits (integers, in float): a product reading one reads
/// those (plus the difference of the zero points, none when it reads the tensor with the
/// producer's own), so the epilogue between two float-sum products does not narrow to 8 bits
/// and widen back, nor add a zero point to subtract it again (the same values: exact there).
Entry float_sum_product(Graph& out, detail::NameGen& names, const Realized& r, Entry x,
                        const TensorType& yt, const std::string& name,
                        std::map<int, CentredIntegers>& integers) {
  const std::string base = r.name.empty() ? "qnn_float_sums" : r.name;
  const DataType f32 = DataType::Float(32);
  const TensorType& xt = out.type_of(x);
  auto scalar = [&](const std::string& name, double v, DataType t) {
    NDArray a = NDArray::empty({}, t);
    if (t == f32) {
      a.data_as<float>()[0] = static_cast<float>(v);
    } else if (t == DataType::UInt(8)) {
      a.data_as<uint8_t>()[0] = static_cast<uint8_t>(v);
    } else {
      a.data_as<int8_t>()[0] = static_cast<int8_t>(v);
    }
    return out.add_constant(names(base + name), a);
  };
  auto add = [&](const std::string& op, std::vector<Entry> in, Attrs a, const TensorType& t) {
    Node n;
    n.op = op;
    n.inputs = std::move(in);
    n.attrs = std::move(a);
    n.outputs = {t};
    return Entry{out.add_node(std::move(n)), 0};
  };
  const int64_t zx = r.attrs.get_int("x_zero_point"), zy = r.attrs.get_int("y_zero_point");
  TensorType xf = xt;
  xf.dtype = f32;
  auto it = integers.find(x.node);
  Entry xc;
  if (it == integers.end()) {
    xc = add("qnn_dequantize",
             {x, scalar("_one", 1.0, f32), scalar("_x_zero_point", double(zx), xt.dtype)}, Attrs(),
             xf);
  } else if (it->second.zero_point == zx) {
    xc = it->second.values;
  } else {
    xc = add("add",
             {it->second.values,
              scalar("_zero_point_difference", double(it->second.zero_point - zx), f32)},
             Attrs(), xf);
  }
  const NDArray& w = r.weight;
  NDArray wf = NDArray::empty(w.shape(), f32);
  for (int64_t k = 0; k < w.numel(); ++k) wf.data_as<float>()[k] = w.data_as<int8_t>()[k];
  TensorType at = yt;
  at.dtype = f32;
  const bool conv = r.kind == Realized::Kind::kConv;
  Attrs ca;
  if (conv) {
    for (const char* k : {"strides", "padding", "dilation", "groups"}) ca.set(k, r.attrs.get(k));
    ca.set("exact", int64_t{1});
  }
  Entry acc =
      add(conv ? "conv2d" : "dense", {xc, out.add_constant(names(base + "_fweight"), wf)}, ca, at);
  const int64_t O = w.shape()[0];
  const std::vector<int64_t> per_channel =
      conv ? std::vector<int64_t>{O, 1, 1} : std::vector<int64_t>{O};
  NDArray bias = NDArray::empty(per_channel, f32), scale = NDArray::empty(per_channel, f32);
  for (int64_t o = 0; o < O; ++o) {
    bias.data_as<float>()[o] = static_cast<float>(r.bias.data_as<int32_t>()[o]);
    scale.data_as<float>()[o] = r.scale.data_as<float>()[o];
  }
  // fold_batch_norm leaves the scale out of an exact convolution's weights (w·scale is no
  // integer: the rounding would differ from ONNX Runtime's).
  Entry v = add("add", {acc, out.add_constant(names(base + "_fbias"), bias)}, Attrs(), at);
  v = add("multiply", {v, out.add_constant(names(base + "_fscale"), scale)}, Attrs(), at);
  v = add("round_even", {v}, Attrs(), at);
  Attrs clip;
  clip.set("a_min", static_cast<double>(r.attrs.get_int("out_min") - zy));
  clip.set("a_max", static_cast<double>(r.attrs.get_int("out_max") - zy));
  v = add("clip", {v}, clip, at);
  const Entry centred = v;
  v = add("add", {v, scalar("_y_zero_point", double(zy), f32)}, Attrs(), at);
  Attrs cast;
  cast.set("dtype", yt.dtype.str());
  Node last;
  last.op = "cast";
  last.name = name;
  last.inputs = {v};
  last.attrs = cast;
  last.outputs = {yt};
  const Entry y{out.add_node(std::move(last)), 0};
  integers[y.node] = CentredIntegers{centred, zy};
  return y;
}

bool shifts_input(const Graph& g, int i, size_t k) {
  const Node& n = g.node(i);
  const Entry e{i, 0};
  if (is(g, e, "qnn_add")) return true;
  if (is(g, e, "qnn_dequantize"))
    return k == 0 && const_of(g, n.inputs[2]) && const_of(g, n.inputs[2])->numel() == 1;
  return k == 0 &&
         (is(g, e, "qnn_conv2d") || is(g, e, "qnn_dense") || is(g, e, "qnn_global_avg_pool2d"));
}

/// A scalar uint8 constant: the int8 zero point `z` + 128.
NDArray shifted_zero_point(const NDArray& z) {
  NDArray r = NDArray::empty({}, DataType::UInt(8));
  r.data_as<uint8_t>()[0] = static_cast<uint8_t>(int_at(z, 0) + 128);
  return r;
}

/// int8 activations carried as uint8: an int8 tensor written by an integer op (or a quantize)
/// and read only by integer ops (or dequantizes), not a graph result, becomes uint8 with every
/// value and its zero point + 128 — the same real values. VNNI multiplies unsigned data, so its
/// convolutions then read such tensors as they are, with no +128 pass. Exact: the
/// requantisation adds the zero point after rounding (a shifted zero point shifts the result),
/// the products subtract the (shifted) zero point from the (shifted) data, qnn_add undoes the
/// shift of its operands before its float arithmetic and redoes it after rounding.
Graph shift_to_uint8(const Graph& g) {
  const int N = g.num_nodes();
  std::vector<std::vector<std::pair<int, size_t>>> readers(static_cast<size_t>(N));
  for (int i = 0; i < N; ++i)
    for (size_t k = 0; k < g.node(i).inputs.size(); ++k)
      readers[static_cast<size_t>(g.node(i).inputs[k].node)].push_back({i, k});
  std::set<int> results;
  for (const Entry& e : g.outputs()) results.insert(e.node);
  // can[i]: node i's output may be carried shifted, as far as its readers go (a max pooling
  // passes its input's type through: it may read a shifted tensor when its own output may be
  // shifted). Readers come later, so a backward sweep decides.
  auto pool = [&](int i) {
    return is(g, Entry{i, 0}, "max_pool2d") && g.node(i).outputs[0].dtype == DataType::Int(8);
  };
  std::vector<bool> can(static_cast<size_t>(N), false), shifted(static_cast<size_t>(N), false);
  for (int i = N - 1; i >= 0; --i) {
    if (results.count(i) || (!shifts_output(g, i) && !pool(i)) ||
        readers[static_cast<size_t>(i)].empty())
      continue;
    bool ok = true;
    for (auto [r, k] : readers[static_cast<size_t>(i)])
      ok = ok && (pool(r) ? can[static_cast<size_t>(r)] : shifts_input(g, r, k));
    can[static_cast<size_t>(i)] = ok;
  }
  bool any = false;
  for (int i = 0; i < N; ++i) {
    const bool in = !pool(i) || shifted[static_cast<size_t>(g.node(i).inputs[0].node)];
    shifted[static_cast<size_t>(i)] = can[static_cast<size_t>(i)] && in;
    any = any || shifted[static_cast<size_t>(i)];
  }
  if (!any) return g;
  Graph out;
  detail::EntryMap map(g);
  detail::NameGen names(g);
  auto in_shifted = [&](const Node& n, size_t k) {
    return shifted[static_cast<size_t>(n.inputs[k].node)];
  };
  for (int i = 0; i < N; ++i) {
    const Node& n = g.node(i);
    Node r = map.remap(n);
    if (n.is_op()) {
      const Entry e{i, 0};
      const bool out_shift = shifted[static_cast<size_t>(i)];
      if (out_shift) r.outputs[0].dtype = DataType::UInt(8);
      if (is(g, e, "qnn_quantize") || is(g, e, "qnn_dequantize")) {
        const bool shift = is(g, e, "qnn_quantize") ? out_shift : in_shifted(n, 0);
        if (shift)
          r.inputs[2] =
              out.add_constant(names(n.name.empty() ? "zero_point_u8" : n.name + "_zp_u8"),
                               shifted_zero_point(*const_of(g, n.inputs[2])));
      } else if (is(g, e, "qnn_add")) {
        if (in_shifted(n, 0)) r.attrs.set("a_offset", int64_t{128});
        if (in_shifted(n, 1)) r.attrs.set("b_offset", int64_t{128});
        if (out_shift) {
          r.attrs.set("y_offset", int64_t{128});
          r.attrs.set("out_min", n.attrs.get_int("out_min") + 128);
          r.attrs.set("out_max", n.attrs.get_int("out_max") + 128);
          r.attrs.set("out_dtype", std::string("uint8"));
        }
      } else if (r.attrs.has("x_zero_point")) {  // qnn_conv2d / qnn_dense / the pool
        if (in_shifted(n, 0)) r.attrs.set("x_zero_point", n.attrs.get_int("x_zero_point") + 128);
        if (out_shift) {
          r.attrs.set("y_zero_point", n.attrs.get_int("y_zero_point") + 128);
          r.attrs.set("out_min", n.attrs.get_int("out_min") + 128);
          r.attrs.set("out_max", n.attrs.get_int("out_max") + 128);
          r.attrs.set("out_dtype", std::string("uint8"));
        }
      }
    }
    map.set_node(i, out.add_node(std::move(r)), n.num_outputs());
  }
  out.set_outputs(map.outputs(g));
  return dead_code_elimination(out);  // the int8 zero points nothing reads any more
}

}  // namespace

Graph quantize_realize(const Graph& g, const Target& target) {
  Realizer realizer(g);
  Graph out;
  detail::EntryMap map(g);
  detail::NameGen names(g);
  std::map<int, CentredIntegers> integers;  // float_sum_product's results → their values
  bool changed = false;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    std::optional<Realized> r = realizer.match(i);
    if (!r) {
      map.set_node(i, out.add_node(map.remap(n)), n.num_outputs());
      continue;
    }
    changed = true;
    Node p;
    p.name = r->name;
    p.attrs = r->attrs;
    p.outputs = n.outputs;
    if (r->kind == Realized::Kind::kAdd) {
      p.op = "qnn_add";
      p.inputs = {map[r->x], map[r->x2]};
    } else if (r->kind == Realized::Kind::kPool) {
      p.op = "qnn_global_avg_pool2d";
      p.inputs = {map[r->x]};
    } else if (r->kind == Realized::Kind::kMaxPool) {
      p.op = "max_pool2d";
      p.inputs = {map[r->x]};
    } else {
      const std::string base = r->name.empty() ? "qnn" + std::to_string(i) : r->name;
      p.op = r->kind == Realized::Kind::kConv ? "qnn_conv2d" : "qnn_dense";
      Entry x = map[r->x];
      const TensorType xt = out.type_of(x);
      const bool rows = r->kind == Realized::Kind::kDense && xt.shape.size() > 2;
      if (rows) {  // [..., K] as [M, K] rows, the product's [M, N] back to [..., N]
        const int64_t K = xt.shape.back();
        x = reshape(out, x, {xt.numel() / K, K});
        p.outputs[0].shape = {xt.numel() / K, r->weight.shape()[0]};
        p.name = names(r->name + "_rows");
      }
      p.inputs = {x, out.add_constant(names(base + "_qweight"), r->weight),
                  out.add_constant(names(base + "_qbias"), r->bias),
                  out.add_constant(names(base + "_qscale"), r->scale)};
      const TensorType yt = p.outputs[0];
      const std::string pname = p.name;
      Entry y{out.add_node(std::move(p)), 0};
      // No integer kernel for it on the target: the float product's sums (the integer node,
      // unread, goes with dead_code_elimination).
      if (!has_own_implementation(OpCall{out, y.node, target}))
        y = float_sum_product(out, names, *r, x, yt, pname, integers);
      if (rows) {
        Node back;
        back.op = "reshape";
        back.name = r->name;
        back.attrs.set("newshape", n.outputs[0].shape);
        back.inputs = {y};
        back.outputs = n.outputs;
        map.set_node(i, out.add_node(std::move(back)), 1);
      } else {
        map.set_node(i, y.node, 1);
      }
      continue;
    }
    map.set_node(i, out.add_node(std::move(p)), 1);
  }
  out.set_outputs(map.outputs(g));
  return changed ? shift_to_uint8(dead_code_elimination(out)) : out;
}

}  // namespace kiln::graph
