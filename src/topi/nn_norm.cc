// Softmax, log-softmax, batch norm and layer norm as te computes. Softmax-like ops reduce the
// max along the axis, then sum exp(x - max); a softmax over a last axis of up to
// kSoftmaxRowCache elements stores exp(x - max) per row (a stage the schedule keeps at the
// row loop, in L1) and the sum and the output read it: one exp per element instead of two
// (exp is most of the cost: ViT's softmax ran at 30% of the roofline). Longer rows and other
// axes recompute the exponential in the output rather than store a full-size buffer. Layer norm
// takes the mean and then the mean of squared deviations (two passes, stable for large offsets).
#include "kiln/topi/nn_norm.h"

#include <limits>

#include "lane_reduce.h"
#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT

namespace {

/// Output index i with `k` placed at `axis` (the input index of the reduction over axis).
std::vector<Expr> with_axis(const std::vector<Var>& i, int axis, Expr k) {
  std::vector<Expr> r(i.begin(), i.end());
  r.insert(r.begin() + axis, k);
  return r;
}
std::vector<Expr> without_axis(const std::vector<Var>& i, int axis) {
  std::vector<Expr> r;
  for (size_t d = 0; d < i.size(); ++d)
    if (static_cast<int>(d) != axis) r.push_back(i[d]);
  return r;
}

/// The longest last axis whose exponentials a softmax stores per row (16 KiB of float32).
constexpr int64_t kSoftmaxRowCache = 4096;

te::Tensor softmax_impl(const te::Tensor& x, int axis, bool log_form, const std::string& op,
                        const std::string& name) {
  std::vector<int64_t> shape = detail::const_shape(x, op);
  KILN_USER_CHECK(x->dtype.is_float()) << op << ": needs a floating-point input, got " << x->dtype;
  KILN_USER_CHECK(!shape.empty()) << op << ": input must have rank >= 1";
  int ax = detail::normalize_axis(axis, shape, op);
  std::vector<int64_t> red_shape = shape;
  red_shape.erase(red_shape.begin() + ax);
  static const te::Reducer max_r = te::comm_reducer(
      [](Expr a, Expr b) { return detail::nan_max(a, b); },
      [](DataType t) { return make_const(t, -std::numeric_limits<double>::infinity()); }, "max");
  te::Tensor mx, sm, ex;
  if (ax == static_cast<int>(shape.size()) - 1) {
    // Along the contiguous axis: two-stage reductions the schedule vectorizes (lane_reduce.h).
    const int64_t L = shape[ax];
    mx = detail::innermost_reduce(
        red_shape, L, [&](const std::vector<Var>& i, Expr k) { return x(with_axis(i, ax, k)); },
        [](Expr v, std::vector<IterVar> k, Expr w) { return max_r(v, std::move(k), w); },
        name + ".max", detail::tag_of(tag::kCommReduce, "max"));
    if (!log_form && L <= kSoftmaxRowCache) {
      ex = te::compute(
          x->shape,
          [&](const std::vector<Var>& i) {
            return ir::exp(x(std::vector<Expr>(i.begin(), i.end())) - mx(without_axis(i, ax)));
          },
          name + ".exp", tag::kSoftmaxExp);
    }
    sm = detail::innermost_reduce(
        red_shape, L,
        [&](const std::vector<Var>& i, Expr k) {
          if (ex.defined()) return ex(with_axis(i, ax, k));
          return ir::exp(x(with_axis(i, ax, k)) - mx(std::vector<Expr>(i.begin(), i.end())));
        },
        [](Expr v, std::vector<IterVar> k, Expr w) { return te::sum(v, std::move(k), w); },
        name + ".sum", detail::tag_of(tag::kCommReduce, "sum"));
  } else {
    auto k1 = te::reduce_axis(Range(detail::ci(0), detail::ci(shape[ax])), "k");
    mx = te::compute(
        detail::to_exprs(red_shape),
        [&](const std::vector<Var>& i) { return max_r(x(with_axis(i, ax, k1->var)), {k1}); },
        name + ".max", detail::tag_of(tag::kCommReduce, "max"));
    auto k2 = te::reduce_axis(Range(detail::ci(0), detail::ci(shape[ax])), "k");
    sm = te::compute(
        detail::to_exprs(red_shape),
        [&](const std::vector<Var>& i) {
          std::vector<Expr> ri(i.begin(), i.end());
          return te::sum(ir::exp(x(with_axis(i, ax, k2->var)) - mx(ri)), {k2});
        },
        name + ".sum", detail::tag_of(tag::kCommReduce, "sum"));
  }
  return te::compute(
      x->shape,
      [&](const std::vector<Var>& i) {
        Expr v = x(std::vector<Expr>(i.begin(), i.end())) - mx(without_axis(i, ax));
        if (log_form) return v - ir::log(sm(without_axis(i, ax)));
        // Times the reciprocal, which LLVM hoists out of the row loop: one division per row
        // instead of one per element.
        Expr e = ex.defined() ? ex(std::vector<Expr>(i.begin(), i.end())) : ir::exp(v);
        return e * (make_const(x->dtype, 1.0) / sm(without_axis(i, ax)));
      },
      name, log_form ? tag::kLogSoftmaxOutput : tag::kSoftmaxOutput);
}

}  // namespace

te::Tensor softmax(const te::Tensor& x, int axis, const std::string& name) {
  return softmax_impl(x, axis, false, "softmax", name);
}

te::Tensor log_softmax(const te::Tensor& x, int axis, const std::string& name) {
  return softmax_impl(x, axis, true, "log_softmax", name);
}

te::Tensor batch_norm(const te::Tensor& x, const te::Tensor& gamma, const te::Tensor& beta,
                      const te::Tensor& moving_mean, const te::Tensor& moving_var, double eps,
                      const std::string& name) {
  std::vector<int64_t> shape = detail::const_shape(x, "batch_norm");
  KILN_USER_CHECK(shape.size() >= 2)
      << "batch_norm: input must have rank >= 2 (N, C, ...), got " << detail::shape_text(shape);
  KILN_USER_CHECK(x->dtype.is_float())
      << "batch_norm: needs a floating-point input, got " << x->dtype;
  const std::pair<const char*, const te::Tensor*> params[] = {
      {"gamma", &gamma}, {"beta", &beta}, {"mean", &moving_mean}, {"var", &moving_var}};
  for (const auto& [what, p] : params) {
    std::vector<int64_t> s = detail::const_shape(*p, "batch_norm");
    KILN_USER_CHECK(s.size() == 1 && s[0] == shape[1])
        << "batch_norm: " << what << " must have shape [" << shape[1] << "] (channels of input "
        << detail::shape_text(shape) << "), got " << detail::shape_text(s);
    KILN_USER_CHECK((*p)->dtype == x->dtype)
        << "batch_norm: " << what << " has dtype " << (*p)->dtype << ", input " << x->dtype;
  }
  return te::compute(
      x->shape,
      [&](const std::vector<Var>& i) {
        Expr c = i[1];
        DataType t = x->dtype;
        Expr inv = ir::rsqrt(moving_var(c) + make_const(t, eps));
        return (x(std::vector<Expr>(i.begin(), i.end())) - moving_mean(c)) * inv * gamma(c) +
               beta(c);
      },
      name, detail::tag_of(tag::kInjective, "batch_norm"));
}

te::Tensor layer_norm(const te::Tensor& x, const te::Tensor& gamma, const te::Tensor& beta,
                      double eps, const std::string& name) {
  std::vector<int64_t> shape = detail::const_shape(x, "layer_norm");
  std::vector<int64_t> gs = detail::const_shape(gamma, "layer_norm");
  std::vector<int64_t> bs = detail::const_shape(beta, "layer_norm");
  KILN_USER_CHECK(x->dtype.is_float())
      << "layer_norm: needs a floating-point input, got " << x->dtype;
  size_t r = gs.size();
  bool ok = r >= 1 && r <= shape.size() &&
            std::equal(gs.begin(), gs.end(), shape.end() - static_cast<ptrdiff_t>(r));
  KILN_USER_CHECK(ok) << "layer_norm: gamma shape " << detail::shape_text(gs)
                      << " must equal the trailing dimensions of input "
                      << detail::shape_text(shape);
  KILN_USER_CHECK(bs == gs) << "layer_norm: beta shape " << detail::shape_text(bs)
                            << " must equal gamma shape " << detail::shape_text(gs);
  KILN_USER_CHECK(gamma->dtype == x->dtype && beta->dtype == x->dtype)
      << "layer_norm: gamma/beta dtypes must match input " << x->dtype;
  size_t lead = shape.size() - r;
  std::vector<int64_t> red_shape(shape.begin(), shape.begin() + static_cast<ptrdiff_t>(lead));
  int64_t count = detail::numel(gs);
  DataType t = x->dtype;
  auto make_axes = [&]() {
    std::vector<IterVar> ks;
    for (size_t d = 0; d < r; ++d)
      ks.push_back(
          te::reduce_axis(Range(detail::ci(0), detail::ci(gs[d])), "k" + std::to_string(d)));
    return ks;
  };
  auto index = [&](const std::vector<Var>& i, const std::vector<IterVar>& ks) {
    std::vector<Expr> idx(i.begin(), i.end());
    for (const IterVar& k : ks) idx.push_back(k->var);
    return idx;
  };
  Expr inv_n = make_const(t, 1.0 / static_cast<double>(count));
  te::Tensor s1, s2;
  if (r == 1) {
    // One normalized axis, the contiguous one: two-stage sums the schedule vectorizes.
    auto at = [&](const std::vector<Var>& i, Expr k) {
      std::vector<Expr> idx(i.begin(), i.end());
      idx.push_back(k);
      return x(idx);
    };
    auto sum_r = [](Expr v, std::vector<IterVar> k, Expr w) { return te::sum(v, std::move(k), w); };
    s1 = detail::innermost_reduce(red_shape, gs[0], at, sum_r, name + ".sum",
                                  detail::tag_of(tag::kCommReduce, "sum"));
    s2 = detail::innermost_reduce(
        red_shape, gs[0],
        [&](const std::vector<Var>& i, Expr k) {
          Expr d = at(i, k) - s1(std::vector<Expr>(i.begin(), i.end())) * inv_n;
          return d * d;
        },
        sum_r, name + ".sqsum", detail::tag_of(tag::kCommReduce, "sum"));
  } else {
    std::vector<IterVar> k1 = make_axes();
    s1 = te::compute(
        detail::to_exprs(red_shape),
        [&](const std::vector<Var>& i) { return te::sum(x(index(i, k1)), k1); }, name + ".sum",
        detail::tag_of(tag::kCommReduce, "sum"));
    std::vector<IterVar> k2 = make_axes();
    s2 = te::compute(
        detail::to_exprs(red_shape),
        [&](const std::vector<Var>& i) {
          Expr d = x(index(i, k2)) - s1(std::vector<Expr>(i.begin(), i.end())) * inv_n;
          return te::sum(d * d, k2);
        },
        name + ".sqsum", detail::tag_of(tag::kCommReduce, "sum"));
  }
  return te::compute(
      x->shape,
      [&](const std::vector<Var>& i) {
        std::vector<Expr> lead_i(i.begin(), i.begin() + static_cast<ptrdiff_t>(lead));
        std::vector<Expr> tail_i(i.begin() + static_cast<ptrdiff_t>(lead), i.end());
        Expr m = s1(lead_i) * inv_n;
        Expr inv_std = ir::rsqrt(s2(lead_i) * inv_n + make_const(t, eps));
        return (x(std::vector<Expr>(i.begin(), i.end())) - m) * inv_std * gamma(tail_i) +
               beta(tail_i);
      },
      name, tag::kLayerNormOutput);
}

}  // namespace kiln::topi
