// Pooling: windowed, global and adaptive max / average pooling over H and W in NCHW and NCHW[x]c.
// All three are one windowed reduction: output (oh, ow) reads input rows pos_h(oh, rh) and
// columns pos_w(ow, rw) for taps (rh, rw) of a reduce domain, under a `where` condition that
// drops taps outside the input (padding, ceil_mode overhang) or outside a variable-size adaptive
// window. Max reduces with max; average sums, and a second stage multiplies by 1 / count where
// count is the closed-form number of counted taps per axis (taps in [lo, hi) with
// lo/hi = the padded or the unpadded input, so no second reduction is needed). The schedule
// fuses batch, channel and output row into one parallel loop and vectorizes either the output
// row (NCHW, split by the lanes, under the window loops) or the channel block (NCHWc). Padded
// NCHW windows read a padded copy of the rows each output row needs (computed at the row), so
// no vector load is guarded per lane.
#include "kiln/topi/pooling.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "pool_window.h"
#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using autotune::Config;
using detail::and_opt;
using detail::AxisWindow;
using detail::ci;
using detail::window_axis;

const char* pool_type_name(PoolType t) { return t == PoolType::kMax ? "max" : "avg"; }

int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                         int64_t pad_end, int64_t dilation, bool ceil_mode) {
  int64_t span = in + pad_begin + pad_end - dilation * (kernel - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  // A last window starting inside the end padding is dropped (PyTorch).
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

namespace detail {

AxisWindow window_axis(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d,
                       bool ceil_mode, bool include_pad) {
  AxisWindow a;
  a.out = pool_output_size(in, k, s, pb, pe, d, ceil_mode);
  a.taps = k;
  a.pad_begin = pb;
  a.padded = std::max(in + pb, (a.out - 1) * s + (k - 1) * d + 1);
  a.pos = [=](Expr o, Expr r) { return o * ci(s) - ci(pb) + r * ci(d); };
  const bool lo_check = pb > 0;
  const bool hi_check = (a.out - 1) * s - pb + (k - 1) * d >= in;
  a.take = [=](Expr o, Expr r) {
    Expr p = o * ci(s) - ci(pb) + r * ci(d);
    Expr c;
    if (lo_check) c = p >= ci(0);
    if (hi_check) c = and_opt(c, p < ci(in));
    return c;
  };
  const int64_t lo = include_pad ? -pb : 0, hi = include_pad ? in + pe : in;
  const bool all_counted = -pb >= lo && (a.out - 1) * s - pb + (k - 1) * d < hi;
  a.count = [=](Expr o) -> Expr {
    if (all_counted) return ci(k);
    // Taps r in [0, k) with lo <= start + r*d < hi: [ceil((lo-start)/d), ceil((hi-start)/d)).
    Expr start = o * ci(s) - ci(pb);
    Expr first = max(ci(0), floordiv(ci(lo) - start + ci(d - 1), ci(d)));
    Expr last = min(ci(k), floordiv(ci(hi) - start + ci(d - 1), ci(d)));
    return max(last - first, ci(0));
  };
  return a;
}

}  // namespace detail

namespace {

/// The parsed layout: cblock 0 for NCHW, x for NCHW<x>c.
struct Layout {
  int64_t cblock = 0;
  int64_t N = 0, C = 0, H = 0, W = 0;  ///< C counts channel blocks in NCHWc
  std::vector<int64_t> shape;
};

Layout parse_layout(const te::Tensor& x, const std::string& layout, const std::string& op) {
  Layout L;
  L.shape = detail::const_shape(x, op);
  if (layout != "NCHW") {
    bool ok = layout.size() > 5 && layout.rfind("NCHW", 0) == 0 && layout.back() == 'c';
    int64_t v = 0;
    for (size_t i = 4; ok && i + 1 < layout.size(); ++i) {
      ok = std::isdigit(static_cast<unsigned char>(layout[i])) != 0;
      v = v * 10 + (layout[i] - '0');
    }
    KILN_USER_CHECK(ok && v > 0) << op << ": unsupported layout '" << layout
                                 << "' (expected NCHW or NCHW<x>c, e.g. NCHW16c)";
    L.cblock = v;
  }
  size_t rank = L.cblock ? 5 : 4;
  KILN_USER_CHECK(L.shape.size() == rank && (!L.cblock || L.shape[4] == L.cblock))
      << op << ": input shape " << detail::shape_text(L.shape) << " does not match layout "
      << layout;
  // Max pooling also takes integers (ONNX MaxPool's int8 / uint8; quantized models).
  const bool max = op.rfind("max", 0) == 0 || op.rfind("global_max", 0) == 0;
  KILN_USER_CHECK(x->dtype.is_float() || (max && x->dtype.is_integer()))
      << op << ": needs floating-point input, got " << x->dtype;
  L.N = L.shape[0];
  L.C = L.shape[1];
  L.H = L.shape[2];
  L.W = L.shape[3];
  return L;
}

AxisWindow adaptive_axis(int64_t in, int64_t out) {
  AxisWindow a;
  a.out = out;
  int64_t taps = 0;
  bool uniform = true;
  auto start_of = [=](int64_t o) { return o * in / out; };
  auto end_of = [=](int64_t o) { return ((o + 1) * in + out - 1) / out; };
  for (int64_t o = 0; o < out; ++o) taps = std::max(taps, end_of(o) - start_of(o));
  for (int64_t o = 0; o < out; ++o) uniform &= end_of(o) - start_of(o) == taps;
  a.taps = taps;
  auto start = [=](Expr o) { return floordiv(o * ci(in), ci(out)); };
  auto end = [=](Expr o) { return floordiv((o + ci(1)) * ci(in) + ci(out - 1), ci(out)); };
  a.pos = [=](Expr o, Expr r) { return start(o) + r; };
  a.take = [=](Expr o, Expr r) { return uniform ? Expr() : r < end(o) - start(o); };
  a.count = [=](Expr o) { return uniform ? ci(taps) : end(o) - start(o); };
  return a;
}

te::Tensor make_pool(const te::Tensor& x, const Layout& L, PoolType type, const AxisWindow& ah,
                     const AxisWindow& aw, const std::string& name, const std::string& op) {
  KILN_USER_CHECK(ah.out > 0 && aw.out > 0 && ah.taps > 0 && aw.taps > 0)
      << op << ": empty output for input " << detail::shape_text(L.shape) << " (output " << ah.out
      << " x " << aw.out << ")";
  std::vector<Expr> oshape{ci(L.N), ci(L.C), ci(ah.out), ci(aw.out)};
  if (L.cblock) oshape.push_back(ci(L.cblock));
  auto rh = te::reduce_axis({0, ci(ah.taps)}, "rh");
  auto rw = te::reduce_axis({0, ci(aw.taps)}, "rw");
  const bool is_max = type == PoolType::kMax;
  // NCHW rows are vectorized along W, where a tap's condition differs per lane: a padded copy
  // of the rows (max: -inf, avg: 0) lets every tap load whole vectors unguarded.
  const bool padded = !L.cblock && ah.padded && aw.padded && x->dtype.is_float() &&
                      (ah.take(ci(0), ci(0)).defined() || aw.take(ci(0), ci(0)).defined());
  te::Tensor src = x;
  if (padded) {
    const double fill = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
    src = te::compute(
        {ci(L.N), ci(L.C), ci(ah.padded), ci(aw.padded)},
        [&](const std::vector<Var>& i) {
          Expr h = i[2] - ci(ah.pad_begin), w = i[3] - ci(aw.pad_begin);
          Expr in = h >= ci(0) && h < ci(L.H) && w >= ci(0) && w < ci(L.W);
          return if_then_else(in, x({i[0], i[1], h, w}), make_const(x->dtype, fill));
        },
        name + "_pad", tag::kPoolPad);
  }
  te::Tensor red = te::compute(
      oshape,
      [&](const std::vector<Var>& i) {
        Expr h = ah.pos(i[2], rh->var), w = aw.pos(i[3], rw->var);
        if (padded) h = h + ci(ah.pad_begin), w = w + ci(aw.pad_begin);
        std::vector<Expr> idx{i[0], i[1], h, w};
        if (L.cblock) idx.push_back(i[4]);
        Expr where = padded ? Expr() : and_opt(ah.take(i[2], rh->var), aw.take(i[3], rw->var));
        return is_max ? detail::nan_max_reduce(src(idx), {rh, rw}, where)
                      : te::sum(src(idx), {rh, rw}, where);
      },
      is_max ? name : name + "_sum", tag::kPool);
  if (is_max) return red;
  return te::compute(
      oshape,
      [&](const std::vector<Var>& i) {
        Expr n = ah.count(i[2]) * aw.count(i[3]);
        return red(std::vector<Expr>(i.begin(), i.end())) *
               (make_one(x->dtype) / cast(x->dtype, n));
      },
      name, tag::kPoolAvg);
}

}  // namespace

te::Tensor pool2d(const te::Tensor& x, PoolType type, const Pool2DAttrs& a,
                  const std::string& layout, const std::string& name) {
  const std::string op = std::string(pool_type_name(type)) + "_pool2d";
  Layout L = parse_layout(x, layout, op);
  KILN_USER_CHECK(a.kernel.size() == 2 && a.stride.size() == 2 && a.dilation.size() == 2 &&
                  a.padding.size() == 4)
      << op << ": kernel, stride and dilation need 2 values and padding 4 (top, left, bottom, "
      << "right)";
  for (int d = 0; d < 2; ++d) {
    KILN_USER_CHECK(a.kernel[d] > 0 && a.stride[d] > 0 && a.dilation[d] > 0)
        << op << ": kernel " << detail::shape_text(a.kernel) << ", stride "
        << detail::shape_text(a.stride) << " and dilation " << detail::shape_text(a.dilation)
        << " must be positive";
  }
  for (int d = 0; d < 4; ++d) {
    KILN_USER_CHECK(a.padding[d] >= 0 &&
                    a.padding[d] <= ((a.kernel[d % 2] - 1) * a.dilation[d % 2] + 1) / 2)
        << op << ": padding " << detail::shape_text(a.padding)
        << " must be non-negative and at most half the (dilated) kernel "
        << detail::shape_text(a.kernel);
  }
  AxisWindow ah = window_axis(L.H, a.kernel[0], a.stride[0], a.padding[0], a.padding[2],
                              a.dilation[0], a.ceil_mode, a.count_include_pad);
  AxisWindow aw = window_axis(L.W, a.kernel[1], a.stride[1], a.padding[1], a.padding[3],
                              a.dilation[1], a.ceil_mode, a.count_include_pad);
  return make_pool(x, L, type, ah, aw, name, op);
}

te::Tensor global_pool2d(const te::Tensor& x, PoolType type, const std::string& layout,
                         const std::string& name) {
  const std::string op = std::string("global_") + pool_type_name(type) + "_pool2d";
  Layout L = parse_layout(x, layout, op);
  return make_pool(x, L, type, adaptive_axis(L.H, 1), adaptive_axis(L.W, 1), name, op);
}

te::Tensor adaptive_pool2d(const te::Tensor& x, PoolType type, std::vector<int64_t> output_size,
                           const std::string& layout, const std::string& name) {
  const std::string op = std::string("adaptive_") + pool_type_name(type) + "_pool2d";
  Layout L = parse_layout(x, layout, op);
  KILN_USER_CHECK(output_size.size() == 2 && output_size[0] > 0 && output_size[1] > 0)
      << op << ": output size must be 2 positive values, got " << detail::shape_text(output_size);
  return make_pool(x, L, type, adaptive_axis(L.H, output_size[0]),
                   adaptive_axis(L.W, output_size[1]), name, op);
}

// ---------------------------------------------------------------------------------------------
// Schedule

void schedule_pool(Config& cfg, te::Schedule& s, const te::Tensor& out, const Target& target) {
  cfg.define_bool("vec");
  cfg.define_bool("unroll_window");
  if (cfg.is_fallback()) {
    cfg.fallback_knob("vec", 1);
    cfg.fallback_knob("unroll_window", 1);
  }
  const bool vec = cfg.knob("vec") != 0, unroll = cfg.knob("unroll_window") != 0;

  te::Operation pool, pad;
  for (const te::Operation& op : te::post_dfs_order({out.op()})) {
    if (op->tag == tag::kPool) pool = op;
    if (op->tag == tag::kPoolPad) pad = op;
  }
  KILN_USER_CHECK(pool.defined()) << "schedule_pool: no pooling stage under " << out.name();
  for (const te::Operation& op : te::post_dfs_order({out.op()})) {
    if (op.same_as(out.op()) || op.same_as(pool) || op->kind != te::OpKind::kCompute) continue;
    if (is_injective_tag(op->tag) || op->tag == tag::kPoolAvg) s[op].compute_inline();
  }
  const bool blocked = out.ndim() == 5;
  const int64_t OW = *as_const_int(out->shape[3]);
  const int lanes = std::max(1, std::min(16, target.vector_bits() / out->dtype.bits()));

  // Output stage: (n, c, oh) fused and parallel; the row (NCHW) or channel block vectorized.
  te::Stage so = s[out];
  auto oax = so.op_axis();
  te::IterVar outer = so.fuse({oax[0], oax[1], oax[2]});
  so.parallel(outer);
  te::Stage sp = s[pool];
  auto pax = sp.op_axis();
  auto rax = sp.op_reduce_axis();
  if (!pool.same_as(out.op())) sp.compute_at(so, outer);
  if (blocked) {
    if (vec) {
      if (!pool.same_as(out.op())) so.vectorize(oax[4]);
      sp.reorder({pax[3], rax[0], rax[1], pax[4]});
      sp.vectorize(pax[4]);
    }
  } else if (vec && OW > 1) {
    // A row at least a vector long ends in a whole vector shifted inwards (no masked tail).
    const bool shift = OW >= lanes;
    if (!pool.same_as(out.op())) so.vectorize(so.split(oax[3], ci(lanes), shift).second);
    auto [wo, wi] = sp.split(pax[3], ci(lanes), shift);
    sp.reorder({wo, rax[0], rax[1], wi});
    sp.vectorize(wi);
  }
  if (pad.defined()) {
    // The padded rows the output row reads, copied once per row.
    te::Stage sd = s[pad];
    sd.compute_at(so, outer);
    if (vec) {
      te::IterVar w = sd.op_axis()[3];
      const int64_t PW = *as_const_int(w->dom->extent);
      if (PW > 1) sd.vectorize(sd.split(w, ci(lanes), PW >= lanes).second);
    }
  }
  const int64_t taps = *as_const_int(rax[0]->dom->extent) * *as_const_int(rax[1]->dom->extent);
  if (unroll && taps <= 16) {
    sp.unroll(rax[0]);
    sp.unroll(rax[1]);
  }
}

te::Schedule schedule_pool(const std::vector<te::Tensor>& outs, const Target& target) {
  KILN_USER_CHECK(outs.size() == 1) << "schedule_pool: expects one output, got " << outs.size();
  te::Schedule s = te::create_schedule(outs);
  Config cfg = Config::fallback();
  schedule_pool(cfg, s, outs[0], target);
  return s;
}

autotune::Template pool_template(const PoolWorkload& w, const Target& target) {
  return autotune::Template{"pool2d_cpu", "1", [w, target](Config& cfg) {
                              std::vector<Expr> shape;
                              for (int64_t v : w.shape) shape.push_back(ci(v));
                              te::Tensor x = te::placeholder(shape, DataType::Float(32), "x");
                              te::Tensor out;
                              if (w.kind == PoolWorkload::kWindow)
                                out = pool2d(x, w.type, w.attrs, w.layout);
                              else if (w.kind == PoolWorkload::kGlobal)
                                out = global_pool2d(x, w.type, w.layout);
                              else
                                out = adaptive_pool2d(x, w.type, w.output_size, w.layout);
                              te::Schedule s = te::create_schedule({out});
                              schedule_pool(cfg, s, out, target);
                              return autotune::Instance{s, {x, out}, cfg};
                            }};
}

}  // namespace kiln::topi
