// Algebraic simplification: one forward walk that, for each op node (inputs already mapped),
// either forwards one of its inputs in its place or rewrites it, looking only at the node
// and its producers in the graph being built:
//   identity(x), dropout(x)                     → x
//   pad(x) that adds nothing                     → x
//   an op whose output is its input's bytes, of x's type (OpDef::in_place: a strided_slice
//   that keeps every element)                   → x
//   reshape(x) to x's own shape                  → x
//   reshape(reshape(x))                          → reshape(x) (or x)   (reshape: also flatten,
//                                                  squeeze, unsqueeze, expand_dims)
//   transpose(x) by the identity permutation     → x
//   transpose(transpose(x, q), p)                → transpose(x, q∘p) (or x)
//   x·1, 1·x, x/1, x+0, 0+x, x−0, x^1            → x   (constant all ones / zeros, and only
//                                                       when the result has x's type)
//   x^2                                          → x·x (likewise)
//   f(m(x)), f(m(x), c), f(m(x), m(y))           → m(f(x)), m(f(x, c')), m(f(x, y))
//   f(m(x), b) for a reshape m                   → m(f(x, b'))
//   r(m(x)) for a reduction r                    → m'(r'(x))
//   m(concat(x, m⁻¹(y))), concat read once       → concat(m(x), y)
// where f is element-wise or broadcasting (no axis attribute, any number of operands: where's
// three), m a transpose or a reshape and c a constant that broadcasts the same way after the
// move (c' holds c's values in another shape; only where c's extents keep their order); b a
// computed operand that broadcasts (b' its reshape, a view); r a reduction whose reduced axes
// of m(x) span whole axes of x (a squeeze; GroupNorm(1)'s [N, 1, C·H·W] view), r' the same
// reduction over those axes of x keeping them, m' the reshape to r's shape; and a move of a
// concat goes to its operands (the concat axis moved with it) when one of them is a move,
// where the two moves then cancel (a 3-D UNet's skip concat between convolutions over
// [N·D, C, H, W]). A transpose sinks past a one-operand or a
// constant-operand f only when nothing else reads it, so it is never computed twice; a
// reshape (free: a view, or index arithmetic inside a fused kernel) sinks from every reader,
// so a squeeze also sinks through GELU's x·erf(x·k) diamond. Sunk
// moves meet and cancel: a 3-D convolution runs as conv2d over [N·D, C, H, W] (the ONNX
// importer) and goes back to [N, C, D, H, W]; its batch norm and ReLU sink that move until
// the next convolution's move to [N·D, C, H, W] undoes it.
// Because rewritten nodes are themselves seen by their consumers, chains collapse fully in
// one pass. Bypassed nodes are left for dead_code_elimination.
// A convolution reading a pad that adds zeros to H and W only takes them into its own padding.
// A convolution with a constant kernel whose outer rows or columns of taps only ever read
// padding (a dilation as large as the map: DeepLab's ASPP at rates 24 and 36 on a 14x14 map,
// or a 3x3 kernel on a 1-pixel-high map) gets its kernel cropped to the taps that can read data
// and its padding reduced by what the dropped taps spanned (the same output; the dropped taps
// only ever multiplied zeros). When the taps that read data still change along the output
// (DeepLab's rate-12 branch on a 14x14 map: the outer kernel rows read data for two output
// rows only), the output is cut into at most three bands per axis, each with one set of
// taps that all read data, and computed as one unpadded convolution per band pair over the
// slice of the input it reads, its kernel cropped to those taps, the pieces concatenated back;
// only when that computes at most half the multiply-adds.

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

#include "../op_attrs.h"
#include "kiln/graph/op_registry.h"
#include "kiln/graph/transform.h"
#include "kiln/support/error.h"
#include "pass_util.h"

namespace kiln::graph {

namespace {

using Ints = std::vector<int64_t>;

/// True when `e` is a constant whose every element equals `v`.
bool is_constant_all(const Graph& g, Entry e, double v) {
  const Node& n = g.node(e.node);
  if (!n.is_constant()) return false;
  const runtime::NDArray& a = n.value;
  DataType t = a.dtype();
  int64_t num = a.numel();
  if (num == 0) return false;
  auto all = [&](auto* p) {
    for (int64_t i = 0; i < num; ++i)
      if (static_cast<double>(p[i]) != v) return false;
    return true;
  };
  if (t == DataType::Float(32)) return all(a.data_as<float>());
  if (t == DataType::Float(64)) return all(a.data_as<double>());
  if (t == DataType::Int(32)) return all(a.data_as<int32_t>());
  if (t == DataType::Int(64)) return all(a.data_as<int64_t>());
  return false;
}

/// The permutation of a transpose node (empty axes: reversed; negative axes wrapped).
std::vector<int64_t> permutation(const Node& n, size_t rank) {
  std::vector<int64_t> p = n.attrs.has("axes") ? n.attrs.get_ints("axes") : std::vector<int64_t>{};
  if (p.empty()) {
    for (size_t i = 0; i < rank; ++i) p.push_back(static_cast<int64_t>(rank - 1 - i));
  }
  for (int64_t& x : p)
    if (x < 0) x += static_cast<int64_t>(rank);
  return p;
}

bool is_identity_perm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

/// The ops that move data without computing: simplify cancels their chains and sinks them
/// below element-wise ops. Reshape-like are the ops that only reinterpret their one input's
/// bytes (reshape, flatten, squeeze, unsqueeze, expand_dims: OpDef::reinterprets).
enum class Move { kNone, kReshape, kTranspose };

Move move_kind(const Node& n) {
  if (!n.is_op()) return Move::kNone;
  if (n.op == "transpose") return Move::kTranspose;
  const OpDef* def = OpRegistry::global().find(n.op);
  if (def && def->reinterprets && n.inputs.size() == 1 && n.num_outputs() == 1)
    return Move::kReshape;
  return Move::kNone;
}

/// What to do with a node: forward an existing entry, or add `node` (possibly rewritten).
struct Rewrite {
  bool forward = false;
  Entry entry;
};

Rewrite simplify_node(const Graph& out, Node& n) {
  auto fwd = [](Entry e) { return Rewrite{true, e}; };
  const std::string& op = n.op;
  if (op == "identity" || op == "dropout") return fwd(n.inputs[0]);
  if (n.inputs.size() == 1 && out.type_of(n.inputs[0]) == n.outputs[0]) {
    // An op whose output is its one input's bytes unchanged (OpDef::in_place at offset 0).
    const OpDef* def = OpRegistry::global().find(op);
    if (def && def->in_place) {
      std::optional<std::vector<size_t>> at =
          def->in_place({out.type_of(n.inputs[0])}, def->normalize_attrs(n.attrs, n.name));
      if (at && *at == std::vector<size_t>{0}) return fwd(n.inputs[0]);
    }
  }
  if (op == "pad" && out.type_of(n.inputs[0]) == n.outputs[0]) {
    auto zero = [](const Ints& v) {
      return std::all_of(v.begin(), v.end(), [](int64_t p) { return p == 0; });
    };
    if (zero(n.attrs.get_ints("pad_before")) && zero(n.attrs.get_ints("pad_after")))
      return fwd(n.inputs[0]);
  }
  const Move kind = move_kind(n);
  if (kind == Move::kReshape) {
    Entry x = n.inputs[0];
    if (out.type_of(x) == n.outputs[0]) return fwd(x);
    const Node& p = out.node(x.node);
    if (move_kind(p) == Move::kReshape) {
      Entry inner = p.inputs[0];
      if (out.type_of(inner) == n.outputs[0]) return fwd(inner);
      n.op = "reshape";
      n.inputs[0] = inner;
      n.attrs = Attrs();
      n.attrs.set("newshape", n.outputs[0].shape);
    }
    return {};
  }
  if (kind == Move::kTranspose) {
    Entry x = n.inputs[0];
    size_t rank = out.type_of(x).shape.size();
    std::vector<int64_t> perm = permutation(n, rank);
    if (is_identity_perm(perm)) return fwd(x);
    const Node& p = out.node(x.node);
    if (move_kind(p) == Move::kTranspose) {
      std::vector<int64_t> q = permutation(p, rank), c(rank);
      for (size_t d = 0; d < rank; ++d) c[d] = q[static_cast<size_t>(perm[d])];
      if (is_identity_perm(c)) return fwd(p.inputs[0]);
      n.inputs[0] = p.inputs[0];
      n.attrs.set("axes", c);
    }
    return {};
  }
  bool binary = n.inputs.size() == 2;
  if (!binary) return {};
  Entry a = n.inputs[0], b = n.inputs[1];
  auto same = [&](Entry e) { return out.type_of(e) == n.outputs[0]; };
  if (op == "multiply") {
    if (is_constant_all(out, b, 1.0) && same(a)) return fwd(a);
    if (is_constant_all(out, a, 1.0) && same(b)) return fwd(b);
  } else if (op == "add") {
    if (is_constant_all(out, b, 0.0) && same(a)) return fwd(a);
    if (is_constant_all(out, a, 0.0) && same(b)) return fwd(b);
  } else if (op == "subtract") {
    if (is_constant_all(out, b, 0.0) && same(a)) return fwd(a);
  } else if (op == "divide") {
    if (is_constant_all(out, b, 1.0) && same(a)) return fwd(a);
  } else if (op == "power" && same(a)) {
    if (is_constant_all(out, b, 1.0)) return fwd(a);
    if (is_constant_all(out, b, 2.0)) {  // x·x is pow(x, 2) correctly rounded, without libm
      n.op = "multiply";
      n.inputs = {a, a};
    }
  }
  return {};
}

/// conv2d(pad(x)) where the pad adds zeros to H and W only → conv2d(x) with those zeros added
/// to its padding (TensorFlow exports a strided "SAME" convolution as an explicit asymmetric
/// Pad, a kernel of its own that copies the whole map).
void absorb_zero_pad(const Graph& out, Node& n) {
  const Node& p = out.node(n.inputs[0].node);
  if (!p.is_op() || p.op != "pad" || (p.attrs.has("value") && p.attrs.get_float("value") != 0.0))
    return;
  const Ints before = p.attrs.get_ints("pad_before"), after = p.attrs.get_ints("pad_after");
  if (before.size() != 4 || after.size() != 4) return;
  for (size_t d = 0; d < 4; ++d)
    if (d < 2 ? (before[d] != 0 || after[d] != 0) : (before[d] < 0 || after[d] < 0)) return;
  const topi::Padding2D pd = detail::conv_params(n.attrs).padding;
  n.attrs.set("padding", Ints{pd.top + before[2], pd.left + before[3], pd.bottom + after[2],
                              pd.right + after[3]});
  n.inputs[0] = p.inputs[0];
}

/// Output positions [begin, end) along one axis whose kernel taps reading data are [lo, hi]
/// (lo > hi: none does).
struct Band {
  int64_t begin, end, lo, hi;
};

/// The bands of one axis: consecutive output positions with the same range of data-reading taps
/// (tap k reads o*stride - pad_before + k*dilation; a contiguous range for each position).
std::vector<Band> tap_bands(int64_t in, int64_t out, int64_t stride, int64_t pad_before,
                            int64_t dilation, int64_t taps) {
  std::vector<Band> r;
  for (int64_t o = 0; o < out; ++o) {
    int64_t lo = taps, hi = -1;
    for (int64_t k = 0; k < taps; ++k) {
      const int64_t i = o * stride - pad_before + k * dilation;
      if (i >= 0 && i < in) {
        lo = std::min(lo, k);
        hi = std::max(hi, k);
      }
    }
    if (!r.empty() && r.back().lo == lo && r.back().hi == hi) {
      r.back().end = o + 1;
    } else {
      r.push_back({o, o + 1, lo, hi});
    }
  }
  return r;
}

/// What the two tap rewrites need of a conv2d node with a constant float32 kernel (copies:
/// adding nodes to the graph moves its nodes).
struct ConvTaps {
  runtime::NDArray w;
  std::string wname;
  TensorType x;
  Ints y, ks;
  topi::Conv2DParams p;
  std::vector<Band> rows, cols;
};

std::optional<ConvTaps> conv_taps(const Graph& out, const Node& n) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1) return std::nullopt;
  const Node& wn = out.node(n.inputs[1].node);
  const TensorType& x = out.type_of(n.inputs[0]);
  const Ints& y = n.outputs[0].shape;
  if (!wn.is_constant() || wn.value.ndim() != 4 || wn.value.dtype() != DataType::Float(32) ||
      x.shape.size() != 4 || y.size() != 4) {
    return std::nullopt;
  }
  ConvTaps t{wn.value, wn.name, x, y, wn.value.shape(), detail::conv_params(n.attrs), {}, {}};
  t.rows = tap_bands(x.shape[2], y[2], t.p.stride_h, t.p.padding.top, t.p.dilation_h, t.ks[2]);
  t.cols = tap_bands(x.shape[3], y[3], t.p.stride_w, t.p.padding.left, t.p.dilation_w, t.ks[3]);
  return t;
}

/// Kernel taps [h0, h0 + kh) x [w0, w0 + kw) of an OIHW float32 kernel.
runtime::NDArray kernel_taps(const runtime::NDArray& w, int64_t h0, int64_t kh, int64_t w0,
                             int64_t kw) {
  const Ints& ks = w.shape();
  runtime::NDArray r = runtime::NDArray::empty({ks[0], ks[1], kh, kw}, w.dtype());
  const float* src = w.data_as<float>();
  float* dst = r.data_as<float>();
  for (int64_t oc = 0; oc < ks[0] * ks[1]; ++oc)
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) *dst++ = src[(oc * ks[2] + h0 + i) * ks[3] + w0 + j];
  return r;
}

/// The first and last taps of an axis that read data for some output position; {1, 0} when
/// none does.
std::pair<int64_t, int64_t> reading_taps(const std::vector<Band>& bands) {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = -1;
  for (const Band& b : bands) {
    if (b.lo > b.hi) continue;
    lo = std::min(lo, b.lo);
    hi = std::max(hi, b.hi);
  }
  return hi < 0 ? std::pair<int64_t, int64_t>{1, 0} : std::pair<int64_t, int64_t>{lo, hi};
}

/// Crops the constant float32 kernel of conv2d node `n` to the taps that read data (file
/// comment), adding the cropped kernel to `out`; false when every tap reads data, none does,
/// or the cropped padding would be negative.
bool crop_conv_taps(Graph& out, Node& n) {
  std::optional<ConvTaps> t = conv_taps(out, n);
  if (!t) return false;
  const topi::Conv2DParams& p = t->p;
  const Ints& ks = t->ks;
  const auto [h0, h1] = reading_taps(t->rows);
  const auto [w0, w1] = reading_taps(t->cols);
  if (h0 > h1 || w0 > w1 || (h0 == 0 && h1 == ks[2] - 1 && w0 == 0 && w1 == ks[3] - 1)) {
    return false;
  }
  const int64_t top = p.padding.top - h0 * p.dilation_h;
  const int64_t bottom = p.padding.bottom - (ks[2] - 1 - h1) * p.dilation_h;
  const int64_t left = p.padding.left - w0 * p.dilation_w;
  const int64_t right = p.padding.right - (ks[3] - 1 - w1) * p.dilation_w;
  if (top < 0 || bottom < 0 || left < 0 || right < 0) return false;
  const int64_t kh = h1 - h0 + 1, kw = w1 - w0 + 1;
  n.inputs[1] = out.add_constant(t->wname + "_taps" + std::to_string(out.num_nodes()),
                                 kernel_taps(t->w, h0, kh, w0, kw));
  n.attrs.set("padding", Ints{top, left, bottom, right});
  n.attrs.set("dilation", Ints{kh == 1 ? 1 : p.dilation_h, kw == 1 ? 1 : p.dilation_w});
  return true;
}

/// Adds an op node with a known output type to `out`.
Entry add_typed(Graph& out, const std::string& op, std::vector<Entry> inputs, Attrs attrs,
                const std::string& name, TensorType type) {
  Node m;
  m.op = op;
  m.name = name;
  m.inputs = std::move(inputs);
  m.attrs = std::move(attrs);
  m.outputs = {std::move(type)};
  return Entry{out.add_node(std::move(m)), 0};
}

/// The band decomposition of conv2d node `n` (file comment), its result's entry; nullopt
/// when it does not apply or would save less than half the multiply-adds.
std::optional<Entry> band_conv(Graph& out, const Node& n) {
  std::optional<ConvTaps> t = conv_taps(out, n);
  if (!t) return std::nullopt;
  const topi::Conv2DParams& p = t->p;
  const Ints &xs = t->x.shape, &ys = t->y, &ks = t->ks;
  const std::vector<Band>&rows = t->rows, &cols = t->cols;
  auto has_no_taps = [](const Band& b) { return b.lo > b.hi; };
  if (rows.size() > 3 || cols.size() > 3 || rows.size() * cols.size() < 2 ||
      std::any_of(rows.begin(), rows.end(), has_no_taps) ||
      std::any_of(cols.begin(), cols.end(), has_no_taps)) {
    return std::nullopt;
  }
  int64_t useful = 0;
  for (const Band& r : rows)
    for (const Band& c : cols)
      useful += (r.end - r.begin) * (r.hi - r.lo + 1) * (c.end - c.begin) * (c.hi - c.lo + 1);
  // At most half the multiply-adds, and a saving worth the extra kernels (a million or more).
  const int64_t all = ys[2] * ys[3] * ks[2] * ks[3];
  if (2 * useful > all || (all - useful) * ys[0] * ks[0] * ks[1] < (int64_t{1} << 20))
    return std::nullopt;
  std::vector<Entry> row_parts;
  int piece = 0;
  for (const Band& r : rows) {
    std::vector<Entry> parts;
    for (const Band& c : cols) {
      const std::string tag = n.name + "_band" + std::to_string(piece++);
      // The input rows and columns the band reads (all inside the input: its taps read data).
      const int64_t i0 = r.begin * p.stride_h - p.padding.top + r.lo * p.dilation_h;
      const int64_t i1 = (r.end - 1) * p.stride_h - p.padding.top + r.hi * p.dilation_h + 1;
      const int64_t j0 = c.begin * p.stride_w - p.padding.left + c.lo * p.dilation_w;
      const int64_t j1 = (c.end - 1) * p.stride_w - p.padding.left + c.hi * p.dilation_w + 1;
      Entry slice = n.inputs[0];
      if (i0 != 0 || j0 != 0 || i1 != xs[2] || j1 != xs[3]) {
        Attrs sa;
        sa.set("begin", Ints{i0, j0});
        sa.set("end", Ints{i1, j1});
        sa.set("strides", Ints{1, 1});
        sa.set("axes", Ints{2, 3});
        slice = add_typed(out, "strided_slice", {n.inputs[0]}, sa, tag + "_input",
                          TensorType{{xs[0], xs[1], i1 - i0, j1 - j0}, t->x.dtype});
      }
      const int64_t kh = r.hi - r.lo + 1, kw = c.hi - c.lo + 1;
      Attrs ca = n.attrs;
      ca.set("padding", Ints{0, 0, 0, 0});
      ca.set("dilation", Ints{kh == 1 ? 1 : p.dilation_h, kw == 1 ? 1 : p.dilation_w});
      Entry wk = out.add_constant(t->wname + "_" + tag + std::to_string(out.num_nodes()),
                                  kernel_taps(t->w, r.lo, kh, c.lo, kw));
      parts.push_back(add_typed(
          out, "conv2d", {slice, wk}, ca, tag,
          TensorType{{ys[0], ys[1], r.end - r.begin, c.end - c.begin}, n.outputs[0].dtype}));
    }
    if (parts.size() == 1) {
      row_parts.push_back(parts[0]);
    } else {
      Attrs cat;
      cat.set("axis", int64_t{3});
      row_parts.push_back(
          add_typed(out, "concat", parts, cat, n.name + "_rows" + std::to_string(r.begin),
                    TensorType{{ys[0], ys[1], r.end - r.begin, ys[3]}, n.outputs[0].dtype}));
    }
  }
  if (row_parts.size() == 1) return row_parts[0];
  Attrs cat;
  cat.set("axis", int64_t{2});
  return add_typed(out, "concat", row_parts, cat, n.name, n.outputs[0]);
}

/// A constant's shape with `rank` axes (ones prepended); nullopt when it has more.
std::optional<Ints> padded_shape(const Ints& s, size_t rank) {
  if (s.size() > rank) return std::nullopt;
  Ints r(rank - s.size(), 1);
  r.insert(r.end(), s.begin(), s.end());
  return r;
}

/// The axes of a reshape from shape `from` to shape `to`, cut into consecutive groups of equal
/// product: group g is from's axes [from[g].first, from[g].second) and to's axes
/// [to[g].first, to[g].second). nullopt when the shapes hold different element counts.
struct ReshapeGroups {
  std::vector<std::pair<size_t, size_t>> from, to;  // [begin, end) of each group
};
std::optional<ReshapeGroups> reshape_groups(const Ints& from, const Ints& to) {
  ReshapeGroups gs;
  size_t i = 0, j = 0;
  while (i < from.size() || j < to.size()) {
    const size_t i0 = i, j0 = j;
    int64_t pi = i < from.size() ? from[i++] : 1, pj = j < to.size() ? to[j++] : 1;
    while (pi != pj) {
      if (pi < pj && i < from.size()) {
        pi *= from[i++];
      } else if (pj < pi && j < to.size()) {
        pj *= to[j++];
      } else {
        return std::nullopt;
      }
    }
    gs.from.emplace_back(i0, i);
    gs.to.emplace_back(j0, j);
  }
  return gs;
}

/// The shape `c` (of the move's output rank) must have to broadcast against the move's input
/// (type `from`) as it broadcasts against the move's output (type `to`): the transpose undone,
/// or each axis of the reshape that `c` does not broadcast over kept as it is. nullopt when c's
/// values would have to be reordered (a transpose moving two of its non-unit extents past each
/// other) or a reshape merges or splits an axis that c varies along.
std::optional<Ints> unmoved_shape(const Node& move, const Ints& c, const Ints& from,
                                  const Ints& to) {
  if (move_kind(move) == Move::kTranspose) {
    const std::vector<int64_t> p = permutation(move, from.size());
    Ints r(from.size(), 1);
    int64_t last = -1;
    for (size_t k = 0; k < p.size(); ++k) {
      r[static_cast<size_t>(p[k])] = c[k];
      if (c[k] == 1) continue;
      if (p[k] < last) return std::nullopt;
      last = p[k];
    }
    return r;
  }
  // A reshape: c may vary only along a group of equal product that is one axis (ignoring unit
  // axes) on both sides.
  std::optional<ReshapeGroups> gs = reshape_groups(from, to);
  if (!gs) return std::nullopt;
  Ints r(from.size(), 1);
  for (size_t g = 0; g < gs->from.size(); ++g) {
    const auto [i0, i] = gs->from[g];
    const auto [j0, j] = gs->to[g];
    std::optional<size_t> vary;
    for (size_t k = j0; k < j; ++k)
      if (c[k] != 1) {
        if (vary) return std::nullopt;
        vary = k;
      }
    if (!vary) continue;
    std::optional<size_t> axis;
    for (size_t k = i0; k < i; ++k)
      if (from[k] != 1) {
        if (axis) return std::nullopt;
        axis = k;
      }
    if (!axis || from[*axis] != to[*vary]) return std::nullopt;
    r[*axis] = c[*vary];
  }
  return r;
}

/// Sinks transposes and reshapes below element-wise ops (the file comment's last rule).
class MoveSinker {
 public:
  explicit MoveSinker(const Graph& g) : uses_(detail::use_counts(g)), names_(g) {}

  /// New node `m` stands for old node `old`: it has old's readers.
  void added(int m, int old) { set_readers(m, uses_[static_cast<size_t>(old)]); }
  int readers(int old) const { return uses_[static_cast<size_t>(old)]; }
  /// Old node `old` forwarded to new entry `e`: e gains old's readers.
  void forwarded(Entry e, int old) {
    if (static_cast<size_t>(e.node) >= out_uses_.size()) return;
    out_uses_[static_cast<size_t>(e.node)] += uses_[static_cast<size_t>(old)] - 1;
  }

  /// For move node `n` of a concat that nothing else reads, some of whose operands are moves:
  /// the concat of the moved operands along the moved axis (m(concat(x, y)) → concat(m(x),
  /// m(y))), where m(y) cancels or merges with y's move (a 3-D UNet's skip concat between two
  /// convolutions over [N·D, C, H, W]); nullopt otherwise.
  std::optional<Entry> hoist_above_concat(Graph& out, const Node& n, int readers) {
    const Move kind = move_kind(n);
    if (kind == Move::kNone) return std::nullopt;
    const Entry c = n.inputs[0];
    const Node cat = out.node(c.node);  // a copy: adding nodes may move the graph's nodes
    const int cat_readers =
        static_cast<size_t>(c.node) < out_uses_.size() ? out_uses_[static_cast<size_t>(c.node)] : 1;
    const OpDef* def = cat.is_op() ? OpRegistry::global().find(cat.op) : nullptr;
    if (!def || !def->joins || cat.num_outputs() != 1 || cat_readers != 1) return std::nullopt;
    const bool any_move = std::any_of(cat.inputs.begin(), cat.inputs.end(), [&](Entry e) {
      return move_kind(out.node(e.node)) != Move::kNone;
    });
    if (!any_move) return std::nullopt;
    const Ints& in = cat.outputs[0].shape;
    const Ints& to = n.outputs[0].shape;
    int64_t axis = cat.attrs.get_int("axis");
    if (axis < 0) axis += static_cast<int64_t>(in.size());
    if (axis < 0 || axis >= static_cast<int64_t>(in.size())) return std::nullopt;
    int64_t new_axis = -1;
    if (kind == Move::kTranspose) {
      const std::vector<int64_t> p = permutation(n, in.size());
      new_axis = std::find(p.begin(), p.end(), axis) - p.begin();
    } else {  // the axis keeps its extent and what lies before and after it
      auto prod = [](const Ints& v, size_t b, size_t e) {
        int64_t r = 1;
        for (size_t k = b; k < e; ++k) r *= v[k];
        return r;
      };
      const size_t a = static_cast<size_t>(axis);
      const int64_t before = prod(in, 0, a);
      for (size_t b = 0; b < to.size(); ++b)
        if (to[b] == in[a] && prod(to, 0, b) == before &&
            prod(to, b + 1, to.size()) == prod(in, a + 1, in.size()))
          new_axis = static_cast<int64_t>(b);
      if (new_axis < 0) return std::nullopt;
    }
    Node r = cat;
    r.name = n.name;
    r.attrs.set("axis", new_axis);
    r.outputs = n.outputs;
    for (size_t k = 0; k < cat.inputs.size(); ++k) {
      Node m = n;  // the move, of this operand
      m.inputs = {cat.inputs[k]};
      const TensorType t = out.type_of(cat.inputs[k]);
      Ints shape = to;
      if (kind == Move::kTranspose) {
        const std::vector<int64_t> p = permutation(n, in.size());
        for (size_t d = 0; d < p.size(); ++d) shape[d] = t.shape[static_cast<size_t>(p[d])];
      } else {
        shape[static_cast<size_t>(new_axis)] = t.shape[static_cast<size_t>(axis)];
        m.op = "reshape";
        m.attrs = Attrs();
        m.attrs.set("newshape", shape);
      }
      m.outputs = {TensorType{shape, t.dtype}};
      Rewrite rw = simplify_node(out, m);
      r.inputs[k] = rw.forward ? rw.entry : Entry{out.add_node(std::move(m)), 0};
    }
    const int ri = out.add_node(std::move(r));
    set_readers(ri, readers);
    return Entry{ri, 0};
  }

  /// For op node `n` (inputs in `out`, `readers` readers of its result): the moved result
  /// m(f(...)) added to `out`, or nullopt when no move sinks. f sinks further moves below it
  /// (f(m1(m2(x))) → m1(m2(f(x)))).
  std::optional<Entry> sink(Graph& out, const Node& n, int readers) {
    const OpDef* def = OpRegistry::global().find(n.op);
    if (!def || def->find_attr("axis") || n.num_outputs() != 1) return std::nullopt;
    if (def->pattern == topi::OpPattern::kCommReduce) return sink_reduce(out, n, readers);
    const bool unary = def->pattern == topi::OpPattern::kElemWise && n.inputs.size() == 1;
    const bool nary = def->pattern == topi::OpPattern::kBroadcast && n.inputs.size() >= 2;
    if (!unary && !nary) return std::nullopt;
    const TensorType& ot = n.outputs[0];
    auto move_of = [&](Entry e) -> const Node* {
      const Node& m = out.node(e.node);
      return move_kind(m) != Move::kNone ? &m : nullptr;
    };
    // A transpose sinks only from its one reader (else it would be computed twice); a reshape
    // is free (a view, or index arithmetic where it is fused) and sinks from every reader.
    auto may_sink = [&](Entry e) {
      if (move_kind(out.node(e.node)) == Move::kReshape) return true;
      return static_cast<size_t>(e.node) < out_uses_.size() &&
             out_uses_[static_cast<size_t>(e.node)] == 1;
    };
    // The first operand that is moved and not broadcast sets the move; every other operand is
    // moved the same way, a constant, or (below a reshape) a broadcast tensor reshaped to
    // broadcast as it did: a reshape is free.
    const Node* move = nullptr;
    for (const Entry& e : n.inputs)
      if (const Node* m = move_of(e); m && out.type_of(e).shape == ot.shape) {
        move = m;
        break;
      }
    if (!move) return std::nullopt;
    const Node m = *move;  // adding a node may move the graph's nodes
    const Ints from = out.type_of(m.inputs[0]).shape;
    std::vector<bool> moved(n.inputs.size(), false);
    std::vector<Ints> unmoved(n.inputs.size());  // the other operands' shapes below the move
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Node* mk = move_of(n.inputs[k]);
      if (mk && mk->op == m.op && mk->attrs == m.attrs &&
          out.type_of(n.inputs[k]).shape == ot.shape && out.type_of(mk->inputs[0]).shape == from) {
        moved[k] = true;
        continue;
      }
      // A tensor reshaped must broadcast (else its reshape would be sunk again, and back).
      if (!out.node(n.inputs[k].node).is_constant() &&
          (move_kind(m) != Move::kReshape || out.type_of(n.inputs[k]).numel() >= ot.numel()))
        return std::nullopt;
      std::optional<Ints> cs = padded_shape(out.type_of(n.inputs[k]).shape, ot.shape.size());
      std::optional<Ints> cu = cs ? unmoved_shape(m, *cs, from, ot.shape) : std::nullopt;
      if (!cu) return std::nullopt;
      unmoved[k] = *cu;
    }
    if (std::count(moved.begin(), moved.end(), true) == 1) {
      const size_t k =
          static_cast<size_t>(std::find(moved.begin(), moved.end(), true) - moved.begin());
      if (!may_sink(n.inputs[k])) return std::nullopt;
    }
    Node f = n;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Entry e = n.inputs[k];
      if (moved[k]) {
        f.inputs[k] = out.node(e.node).inputs[0];
      } else if (out.node(e.node).is_constant()) {
        const Node& cn = out.node(e.node);
        runtime::NDArray v = runtime::NDArray::empty(unmoved[k], cn.value.dtype());
        v.copy_from(cn.value.data(), cn.value.nbytes());
        const std::string suffix = "_unmoved";
        const bool again =
            cn.name.size() > suffix.size() &&
            cn.name.compare(cn.name.size() - suffix.size(), suffix.size(), suffix) == 0;
        const std::string name = names_(again ? cn.name : cn.name + suffix);
        f.inputs[k] = out.add_constant(name, std::move(v));
      } else {
        f.inputs[k] = reshaped(out, e, unmoved[k]);
      }
    }
    return add_moved(out, std::move(f), std::move(m), n, readers);
  }

 private:
  /// Reduction `n` of a reshape r(m(x)) where each axis of m(x) that r reduces spans whole
  /// axes of x (a squeeze, or GroupNorm's [N, 1, C·H·W] view of one group): the same reduction
  /// of x over those axes (keeping them) and a reshape of the result to n's shape; nullopt
  /// otherwise.
  std::optional<Entry> sink_reduce(Graph& out, const Node& n, int readers) {
    if (n.inputs.size() != 1 || !n.attrs.has("axes") || !n.attrs.has("keepdims"))
      return std::nullopt;
    const Node& mv = out.node(n.inputs[0].node);
    if (move_kind(mv) != Move::kReshape) return std::nullopt;
    const Entry x = mv.inputs[0];
    const Ints from = out.type_of(x).shape, to = out.type_of(n.inputs[0]).shape;
    std::vector<bool> reduced(to.size(), n.attrs.get_ints("axes").empty());
    for (int64_t a : n.attrs.get_ints("axes")) {
      if (a < 0) a += static_cast<int64_t>(to.size());
      if (a < 0 || a >= static_cast<int64_t>(to.size())) return std::nullopt;
      reduced[static_cast<size_t>(a)] = true;
    }
    // In each group of equal product the non-unit axes of m(x) are all reduced (the group's
    // axes of x are) or all kept.
    std::optional<ReshapeGroups> gs = reshape_groups(from, to);
    if (!gs) return std::nullopt;
    Ints new_axes;
    Ints shape = from;
    for (size_t g = 0; g < gs->from.size(); ++g) {
      const auto [i0, i] = gs->from[g];
      const auto [j0, j] = gs->to[g];
      bool any_reduced = false, any_kept = false;
      for (size_t k = j0; k < j; ++k)
        if (to[k] != 1) (reduced[k] ? any_reduced : any_kept) = true;
      if (any_reduced && any_kept) return std::nullopt;
      if (!any_reduced) continue;
      for (size_t k = i0; k < i; ++k)
        if (from[k] != 1) {
          new_axes.push_back(static_cast<int64_t>(k));
          shape[k] = 1;
        }
    }
    if (new_axes.empty()) return std::nullopt;
    std::sort(new_axes.begin(), new_axes.end());
    const TensorType ot = n.outputs[0];
    Node r = n;
    r.inputs = {x};
    r.attrs.set("axes", new_axes).set("keepdims", int64_t{1});
    r.outputs = {TensorType{shape, ot.dtype}};
    const Entry re{out.add_node(std::move(r)), 0};
    if (shape == ot.shape) return re;
    Node m;  // named as n, as add_moved names its moves
    m.op = "reshape";
    m.name = n.name;
    m.attrs.set("newshape", ot.shape);
    m.inputs = {re};
    m.outputs = {ot};
    const int mi = out.add_node(std::move(m));
    set_readers(mi, readers);
    return Entry{mi, 0};
  }

  /// Tensor `e` of `out` as `shape` (same elements): itself, the input of the reshape that
  /// made it when that has the shape, or a new reshape.
  Entry reshaped(Graph& out, Entry e, const Ints& shape) {
    const TensorType t = out.type_of(e);
    if (t.shape == shape) return e;
    const Node& p = out.node(e.node);
    if (move_kind(p) == Move::kReshape && out.type_of(p.inputs[0]).shape == shape)
      return p.inputs[0];
    Node r;
    r.op = "reshape";
    r.name = names_(p.name + "_unmoved");
    r.attrs.set("newshape", shape);
    r.inputs = {e};
    r.outputs = {TensorType{shape, t.dtype}};
    return Entry{out.add_node(std::move(r)), 0};
  }

  /// Adds f (on the unmoved operands; moves below it sunk too) and move m of its result, in
  /// place of `n`, whose result has `readers` readers; returns m's entry.
  Entry add_moved(Graph& out, Node f, Node m, const Node& n, int readers) {
    const TensorType ot = n.outputs[0];
    f.outputs = {TensorType{out.type_of(m.inputs[0]).shape, ot.dtype}};
    std::optional<Entry> fe = sink(out, f, 1);
    if (!fe) fe = Entry{out.add_node(std::move(f)), 0};
    m.name = n.name;
    m.inputs = {*fe};
    m.outputs = {ot};
    const int r = out.add_node(std::move(m));
    set_readers(r, readers);
    return Entry{r, 0};
  }

  void set_readers(int m, int readers) {
    if (static_cast<size_t>(m) >= out_uses_.size()) out_uses_.resize(static_cast<size_t>(m) + 1, 1);
    out_uses_[static_cast<size_t>(m)] = readers;
  }

  std::vector<int> uses_;      // readers of each old node
  std::vector<int> out_uses_;  // readers of each new node (1 for nodes added without `added`)
  detail::NameGen names_;
};

}  // namespace

Graph simplify(const Graph& g) {
  Graph out;
  detail::EntryMap map(g);
  MoveSinker sinker(g);
  for (int i = 0; i < g.num_nodes(); ++i) {
    Node n = map.remap(g.node(i));
    if (n.is_op()) {
      for (const TensorType& t : n.outputs) {
        KILN_USER_CHECK(t.known())
            << "simplify: " << detail::describe_node(g, i) << " has no type; run infer_types first";
      }
      Rewrite r;
      if (n.op == "conv2d") {
        absorb_zero_pad(out, n);
        crop_conv_taps(out, n);
        if (std::optional<Entry> e = band_conv(out, n)) r = Rewrite{true, *e};
      }
      if (!r.forward) r = simplify_node(out, n);
      if (!r.forward) {
        std::optional<Entry> e = sinker.hoist_above_concat(out, n, sinker.readers(i));
        if (!e) e = sinker.sink(out, n, sinker.readers(i));
        if (e) r = Rewrite{true, *e};
      } else {
        sinker.forwarded(r.entry, i);
      }
      if (r.forward) {
        map.set(i, 0, r.entry);
        continue;
      }
    }
    int outs = n.num_outputs();
    const int m = out.add_node(std::move(n));
    sinker.added(m, i);
    map.set_node(i, m, outs);
  }
  out.set_outputs(map.outputs(g));
  return out;
}

}  // namespace kiln::graph
