// Convolution, transposed convolution and pooling over 3-D (NCDHW) windows, and max pooling's
// argmax over 1- to 3-D windows. conv3d is conv2d_nchw with one more spatial axis: a padding
// stage, then one reduction over (input channel of the group, kd, kh, kw). The transposed
// convolution is a gather (output z reads input (z + pad - k·dilation) / stride when that is a
// whole number inside the input) under the reduction's `where` condition, so no zero-dilated
// copy of the input is made. Pooling generalizes pooling.cc's windowed reduction to any number
// of spatial axes: per axis the tap's input position, the condition that it is taken, and the
// closed-form count of counted taps for the average. The argmax is a second reduction: the
// minimum row-major flat index among the window taps equal to the window's maximum (the first
// maximum in window order, as ONNX's reference picks), converted to column-major for
// storage_order 1 by an element-wise stage.
#include "kiln/topi/conv_nd.h"

#include <algorithm>
#include <functional>

#include "conv2d_common.h"
#include "kiln/topi/auto_schedule.h"
#include "kiln/topi/nn_util.h"
#include "kiln/topi/transform.h"
#include "pool_window.h"
#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using detail::and_opt;
using detail::AxisWindow;
using detail::ci;
using detail::shape_text;
using detail::window_axis;

namespace {

void check_params(const ConvNdParams& p, size_t sp, const std::string& op, bool transpose) {
  KILN_USER_CHECK(p.strides.size() == sp && p.dilation.size() == sp && p.padding.size() == 2 * sp &&
                  (!transpose || p.output_padding.size() == sp))
      << op << ": strides " << shape_text(p.strides) << ", dilation " << shape_text(p.dilation)
      << (transpose ? ", output_padding " + shape_text(p.output_padding) : std::string())
      << " need " << sp << " values and padding " << shape_text(p.padding) << " " << 2 * sp;
  for (size_t d = 0; d < sp; ++d) {
    KILN_USER_CHECK(p.strides[d] > 0 && p.dilation[d] > 0)
        << op << ": strides " << shape_text(p.strides) << " and dilation " << shape_text(p.dilation)
        << " must be positive";
    KILN_USER_CHECK(p.padding[d] >= 0 && p.padding[d + sp] >= 0)
        << op << ": padding " << shape_text(p.padding) << " must be non-negative";
  }
  KILN_USER_CHECK(p.groups > 0) << op << ": groups must be positive, got " << p.groups;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// conv3d

std::vector<int64_t> conv3d_ncdhw_shape(const std::vector<int64_t>& ds,
                                        const std::vector<int64_t>& ks, const ConvNdParams& p) {
  const char* op = "conv3d";
  KILN_USER_CHECK(ds.size() == 5 && ks.size() == 5)
      << op << ": data " << shape_text(ds) << " and kernel " << shape_text(ks)
      << " must both be 5-D (NCDHW, OIDHW)";
  check_params(p, 3, op, false);
  KILN_USER_CHECK(ds[1] % p.groups == 0 && ks[0] % p.groups == 0 && ks[1] * p.groups == ds[1])
      << op << ": data " << shape_text(ds) << " and kernel " << shape_text(ks)
      << " do not match for groups " << p.groups << " (kernel dim 1 must be C / groups)";
  std::vector<int64_t> os{ds[0], ks[0]};
  for (size_t d = 0; d < 3; ++d) {
    int64_t o = conv_out_extent(ds[2 + d], ks[2 + d], p.strides[d], p.dilation[d], p.padding[d],
                                p.padding[d + 3]);
    KILN_USER_CHECK(o > 0) << op << ": kernel " << shape_text(ks) << " (dilation "
                           << shape_text(p.dilation) << ") is larger than the padded input "
                           << shape_text(ds) << " (padding " << shape_text(p.padding) << ")";
    os.push_back(o);
  }
  return os;
}

te::Tensor conv3d_ncdhw(const te::Tensor& data, const te::Tensor& kernel, const ConvNdParams& p,
                        const std::string& name) {
  std::vector<int64_t> ds = detail::const_shape(data, "conv3d");
  std::vector<int64_t> ks = detail::const_shape(kernel, "conv3d");
  std::vector<int64_t> os = conv3d_ncdhw_shape(ds, ks, p);
  KILN_USER_CHECK(data->dtype == kernel->dtype)
      << "conv3d: dtype mismatch: data " << data->dtype << " and kernel " << kernel->dtype;
  bool padded = std::any_of(p.padding.begin(), p.padding.end(), [](int64_t v) { return v != 0; });
  te::Tensor pad = data;
  if (padded) {
    pad = topi::pad(data, {0, 0, p.padding[0], p.padding[1], p.padding[2]},
                    {0, 0, p.padding[3], p.padding[4], p.padding[5]}, 0.0, name + "_pad");
  }
  const int64_t cpg = ks[1], opg = os[1] / p.groups;
  te::IterVar rc = te::reduce_axis({0, ci(cpg)}, "rc");
  te::IterVar kd = te::reduce_axis({0, ci(ks[2])}, "kd");
  te::IterVar kh = te::reduce_axis({0, ci(ks[3])}, "kh");
  te::IterVar kw = te::reduce_axis({0, ci(ks[4])}, "kw");
  return te::compute(
      detail::to_exprs(os),
      [&](Var n, Var o, Var z, Var y, Var x) {
        Expr c = p.groups == 1 ? Expr(rc->var) : floordiv(o, ci(opg)) * ci(cpg) + rc->var;
        Expr dd = z * ci(p.strides[0]) + kd->var * ci(p.dilation[0]);
        Expr hh = y * ci(p.strides[1]) + kh->var * ci(p.dilation[1]);
        Expr ww = x * ci(p.strides[2]) + kw->var * ci(p.dilation[2]);
        return te::sum(pad(n, c, dd, hh, ww) * kernel(o, rc, kd, kh, kw), {rc, kd, kh, kw});
      },
      name, "conv3d_ncdhw");
}

// ---------------------------------------------------------------------------------------------
// conv3d_transpose

std::vector<int64_t> conv3d_transpose_ncdhw_shape(const std::vector<int64_t>& ds,
                                                  const std::vector<int64_t>& ks,
                                                  const ConvNdParams& p) {
  const char* op = "conv3d_transpose";
  KILN_USER_CHECK(ds.size() == 5 && ks.size() == 5)
      << op << ": data " << shape_text(ds) << " and kernel " << shape_text(ks)
      << " must both be 5-D (NCDHW, IODHW)";
  check_params(p, 3, op, true);
  KILN_USER_CHECK(ks[0] == ds[1] && ds[1] % p.groups == 0)
      << op << ": data " << shape_text(ds) << " and kernel " << shape_text(ks)
      << " do not match for groups " << p.groups << " (kernel dim 0 must be C)";
  std::vector<int64_t> os{ds[0], ks[1] * p.groups};
  for (size_t d = 0; d < 3; ++d) {
    int64_t o = p.strides[d] * (ds[2 + d] - 1) + p.output_padding[d] +
                p.dilation[d] * (ks[2 + d] - 1) + 1 - p.padding[d] - p.padding[d + 3];
    KILN_USER_CHECK(o > 0) << op << ": empty output for data " << shape_text(ds) << ", kernel "
                           << shape_text(ks) << ", padding " << shape_text(p.padding);
    os.push_back(o);
  }
  return os;
}

te::Tensor conv3d_transpose_ncdhw(const te::Tensor& data, const te::Tensor& kernel,
                                  const ConvNdParams& p, const std::string& name) {
  std::vector<int64_t> ds = detail::const_shape(data, "conv3d_transpose");
  std::vector<int64_t> ks = detail::const_shape(kernel, "conv3d_transpose");
  std::vector<int64_t> os = conv3d_transpose_ncdhw_shape(ds, ks, p);
  KILN_USER_CHECK(data->dtype == kernel->dtype) << "conv3d_transpose: dtype mismatch: data "
                                                << data->dtype << " and kernel " << kernel->dtype;
  const int64_t cpg = ds[1] / p.groups, opg = ks[1];
  te::IterVar rc = te::reduce_axis({0, ci(cpg)}, "rc");
  std::vector<te::IterVar> rk;
  for (const char* n : {"kd", "kh", "kw"})
    rk.push_back(te::reduce_axis({0, ci(ks[2 + rk.size()])}, n));
  return te::compute(
      detail::to_exprs(os),
      [&](const std::vector<Var>& i) {
        Expr c = p.groups == 1 ? Expr(rc->var) : floordiv(i[1], ci(opg)) * ci(cpg) + rc->var;
        Expr oc = p.groups == 1 ? Expr(i[1]) : floormod(i[1], ci(opg));
        std::vector<Expr> xi{i[0], c}, wi{c, oc};
        Expr cond;
        for (size_t d = 0; d < 3; ++d) {
          Expr t = i[2 + d] + ci(p.padding[d]) - rk[d]->var * ci(p.dilation[d]);
          int64_t s = p.strides[d];
          Expr q = s == 1 ? t : floordiv(t, ci(s));
          if (s != 1) cond = and_opt(cond, floormod(t, ci(s)) == ci(0));
          cond = and_opt(cond, t >= ci(0));
          cond = and_opt(cond, q < ci(ds[2 + d]));
          xi.push_back(q);
          wi.push_back(rk[d]->var);
        }
        std::vector<te::IterVar> axes{rc, rk[0], rk[1], rk[2]};
        return te::sum(data(xi) * kernel(wi), axes, cond);
      },
      name, "conv3d_transpose_ncdhw");
}

// ---------------------------------------------------------------------------------------------
// conv3d schedule

te::Schedule schedule_conv3d_ncdhw(const std::vector<te::Tensor>& outs, const Target& target) {
  const char* who = "schedule_conv3d_ncdhw";
  KILN_USER_CHECK(!outs.empty()) << who << ": no outputs";
  te::Schedule s = te::create_schedule(outs);
  const te::Tensor& out = outs[0];
  te::Tensor conv = find_tagged({out}, "conv3d_ncdhw");
  KILN_USER_CHECK(conv.defined()) << who << ": no conv3d_ncdhw stage feeds output '" << out.name()
                                  << "'";
  std::vector<int64_t> os = detail::const_shape(conv, who);
  KILN_USER_CHECK(detail::const_shape(out, who) == os)
      << who << ": output '" << out.name() << "' must have the convolution's shape "
      << shape_text(os);
  const int64_t lanes = std::max(1, target.vector_bits() / 32);
  // An output width that a vector of 4, 8 or 16 lanes divides: the rule-based scheduler's
  // register tile (output channels x the row) measured 4-11x faster than the row schedule
  // below; other widths leave it a scalar tile, measured 2.2x slower (docs/auto-schedule.md).
  if (os[4] % 4 == 0 && os[4] >= 4) return auto_schedule(outs, target);

  inline_injective_consumers(s, {out}, {conv});
  // The padding at the root: batch, channel and depth fused and parallel.
  for (const te::Tensor& in : detail::inputs_of(conv)) {
    if (in.op()->kind != te::OpKind::kCompute || !is_injective_tag(in.op()->tag)) continue;
    te::Stage sp = s[in];
    auto ax = sp.op_axis();
    sp.parallel(sp.fuse({ax[0], ax[1], ax[2]}));
  }
  te::Tensor acc = detail::accumulator(s, conv, out);
  te::Stage so = s[out];
  auto ax = so.op_axis();
  te::IterVar row = so.fuse({ax[0], ax[1], ax[2], ax[3]});
  so.parallel(row);
  auto [xo, xi] = so.split(ax[4], ci(lanes));
  so.vectorize(xi);

  te::Stage sa = s[acc];
  sa.compute_at(so, row);
  auto aax = sa.op_axis();
  std::vector<te::IterVar> order = sa.op_reduce_axis();
  auto [axo, axi] = sa.split(aax[4], ci(lanes));
  order.push_back(axo);
  order.push_back(axi);
  sa.reorder(order);
  sa.vectorize(axi);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Pooling

namespace {

struct Windows {
  std::vector<int64_t> shape, oshape;
  std::vector<AxisWindow> axes;
};

Windows windows(const te::Tensor& x, const PoolNdAttrs& a, const std::string& op) {
  Windows w;
  w.shape = detail::const_shape(x, op);
  KILN_USER_CHECK(w.shape.size() >= 3 && w.shape.size() <= 5)
      << op << ": input " << shape_text(w.shape) << " must have 1 to 3 spatial axes after N and C";
  const size_t sp = w.shape.size() - 2;
  KILN_USER_CHECK(a.kernel.size() == sp && a.stride.size() == sp && a.dilation.size() == sp &&
                  a.padding.size() == 2 * sp)
      << op << ": kernel " << shape_text(a.kernel) << ", stride " << shape_text(a.stride)
      << " and dilation " << shape_text(a.dilation) << " need " << sp << " values and padding "
      << shape_text(a.padding) << " " << 2 * sp << " for input " << shape_text(w.shape);
  KILN_USER_CHECK(x->dtype.is_float()) << op << ": needs floating-point input, got " << x->dtype;
  w.oshape = {w.shape[0], w.shape[1]};
  for (size_t d = 0; d < sp; ++d) {
    KILN_USER_CHECK(a.kernel[d] > 0 && a.stride[d] > 0 && a.dilation[d] > 0 && a.padding[d] >= 0 &&
                    a.padding[d + sp] >= 0)
        << op << ": kernel " << shape_text(a.kernel) << ", stride " << shape_text(a.stride)
        << " and dilation " << shape_text(a.dilation) << " must be positive and padding "
        << shape_text(a.padding) << " non-negative";
    w.axes.push_back(window_axis(w.shape[2 + d], a.kernel[d], a.stride[d], a.padding[d],
                                 a.padding[d + sp], a.dilation[d], a.ceil_mode,
                                 a.count_include_pad));
    KILN_USER_CHECK(w.axes.back().out > 0)
        << op << ": empty output for input " << shape_text(w.shape) << ", kernel "
        << shape_text(a.kernel) << ", padding " << shape_text(a.padding);
    w.oshape.push_back(w.axes.back().out);
  }
  return w;
}

}  // namespace

te::Tensor pool_nd(const te::Tensor& x, PoolType type, const PoolNdAttrs& a,
                   const std::string& name) {
  const std::string op = std::string(pool_type_name(type)) + "_pool_nd";
  Windows w = windows(x, a, op);
  const size_t sp = w.axes.size();
  std::vector<te::IterVar> r;
  for (size_t d = 0; d < sp; ++d)
    r.push_back(te::reduce_axis({0, ci(w.axes[d].taps)}, "r" + std::to_string(d)));
  const bool is_max = type == PoolType::kMax;
  te::Tensor red = te::compute(
      detail::to_exprs(w.oshape),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx{i[0], i[1]};
        Expr where;
        for (size_t d = 0; d < sp; ++d) {
          idx.push_back(w.axes[d].pos(i[2 + d], r[d]->var));
          where = and_opt(where, w.axes[d].take(i[2 + d], r[d]->var));
        }
        return is_max ? detail::nan_max_reduce(x(idx), r, where) : te::sum(x(idx), r, where);
      },
      is_max ? name : name + "_sum", tag::kPool);
  if (is_max) return red;
  return te::compute(
      detail::to_exprs(w.oshape),
      [&](const std::vector<Var>& i) {
        Expr n = w.axes[0].count(i[2]);
        for (size_t d = 1; d < sp; ++d) n = n * w.axes[d].count(i[2 + d]);
        return red(std::vector<Expr>(i.begin(), i.end())) *
               (make_one(x->dtype) / cast(x->dtype, n));
      },
      name, tag::kPoolAvg);
}

te::Tensor max_pool_nd_indices(const te::Tensor& x, const PoolNdAttrs& a, int storage_order,
                               const std::string& name) {
  const std::string op = "max_pool_indices";
  KILN_USER_CHECK(storage_order == 0 || storage_order == 1)
      << op << ": storage_order must be 0 or 1, got " << storage_order;
  PoolNdAttrs am = a;
  am.count_include_pad = false;
  Windows w = windows(x, am, op);
  const size_t sp = w.axes.size();
  te::Tensor mx = pool_nd(x, PoolType::kMax, am, name + "_max");
  const DataType i64 = DataType::Int(64);
  auto c64 = [&](int64_t v) { return make_const(i64, v); };
  std::vector<te::IterVar> r;
  for (size_t d = 0; d < sp; ++d)
    r.push_back(te::reduce_axis({0, ci(w.axes[d].taps)}, "r" + std::to_string(d)));
  // Row-major flat index over the whole input; the minimum among the taps equal to the max.
  te::Tensor first = te::compute(
      detail::to_exprs(w.oshape),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx{i[0], i[1]};
        Expr where;
        Expr flat = cast(i64, i[0]) * c64(w.shape[1]) + cast(i64, i[1]);
        for (size_t d = 0; d < sp; ++d) {
          Expr p = w.axes[d].pos(i[2 + d], r[d]->var);
          idx.push_back(p);
          where = and_opt(where, w.axes[d].take(i[2 + d], r[d]->var));
          flat = flat * c64(w.shape[2 + d]) + cast(i64, p);
        }
        // A NaN maximum (nan_max_reduce) is matched by the NaN taps: the first NaN, as PyTorch.
        Expr v = x(idx), m = mx(std::vector<Expr>(i.begin(), i.end()));
        Expr hit = v.dtype().is_float() ? (v == m || (v != v && m != m)) : v == m;
        where = and_opt(where, hit);
        return te::min(flat, r, where);
      },
      storage_order == 0 ? name : name + "_rowmajor", "comm_reduce,max_pool_indices");
  if (storage_order == 0) return first;
  // Column-major spatial part: the first spatial axis varies fastest.
  int64_t plane = 1;
  for (size_t d = 0; d < sp; ++d) plane *= w.shape[2 + d];
  return te::compute(
      detail::to_exprs(w.oshape),
      [&](const std::vector<Var>& i) {
        Expr f = first(std::vector<Expr>(i.begin(), i.end()));
        Expr nc = floordiv(f, c64(plane)), rest = floormod(f, c64(plane));
        Expr col = make_const(i64, int64_t{0}), stride_c = c64(1);
        int64_t inner = plane;
        for (size_t d = 0; d < sp; ++d) {
          inner /= w.shape[2 + d];
          Expr coord = floormod(floordiv(rest, c64(inner)), c64(w.shape[2 + d]));
          col = col + coord * stride_c;
          stride_c = stride_c * c64(w.shape[2 + d]);
        }
        return nc * c64(plane) + col;
      },
      name, detail::tag_of(tag::kInjective, "max_pool_indices_colmajor"));
}

}  // namespace kiln::topi
