// Reductions. The requested axes are normalized (negatives wrap, duplicates rejected); one
// reduce_axis is made per reduced dimension and the output keeps the other dimensions (or
// size-1 ones with keepdims). argmax/argmin are tuple reductions over (flat index, value)
// whose combiner prefers the larger (smaller) value and, on equal values, the smaller index,
// so the result is the first occurrence whatever order the loops visit elements in. Float
// max / min (and argmax / argmin) treat NaN as PyTorch does: a NaN anywhere in the reduced
// elements gives NaN (its index), whatever its position (detail::nan_max).
#include "kiln/topi/reduction.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "index_analysis.h"
#include "lane_reduce.h"
#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT

namespace {

struct ReducePlan {
  std::vector<int64_t> in_shape, out_shape;
  std::vector<bool> reduced;  ///< per input dimension
};

ReducePlan plan_reduce(const te::Tensor& x, const std::vector<int>& axes, bool keepdims,
                       const std::string& op) {
  ReducePlan p;
  p.in_shape = detail::const_shape(x, op);
  p.reduced.assign(p.in_shape.size(), axes.empty());
  for (int a : axes) {
    int n = detail::normalize_axis(a, p.in_shape, op);
    KILN_USER_CHECK(!p.reduced[n]) << op << ": axis " << a << " is listed twice (shape "
                                   << detail::shape_text(p.in_shape) << ")";
    p.reduced[n] = true;
  }
  for (size_t d = 0; d < p.in_shape.size(); ++d) {
    if (!p.reduced[d])
      p.out_shape.push_back(p.in_shape[d]);
    else if (keepdims)
      p.out_shape.push_back(1);
  }
  return p;
}

/// Builds the reduce axes and a function mapping output indices to the input index.
struct ReduceAxes {
  std::vector<IterVar> axes;
  std::function<std::vector<Expr>(const std::vector<Var>&)> input_index;
  Expr flat_index;  ///< row-major position within the reduced dimensions
};

ReduceAxes make_axes(const ReducePlan& p, bool keepdims) {
  ReduceAxes r;
  std::vector<int> rdims;
  for (size_t d = 0; d < p.in_shape.size(); ++d) {
    if (!p.reduced[d]) continue;
    r.axes.push_back(te::reduce_axis(Range(detail::ci(0), detail::ci(p.in_shape[d])),
                                     "k" + std::to_string(r.axes.size())));
    rdims.push_back(static_cast<int>(d));
  }
  Expr flat = detail::ci(0);
  for (size_t j = 0; j < r.axes.size(); ++j)
    flat = j == 0 ? Expr(r.axes[j]->var) : flat * detail::ci(p.in_shape[rdims[j]]) + r.axes[j]->var;
  r.flat_index = flat;
  ReducePlan plan = p;
  std::vector<IterVar> axes = r.axes;
  r.input_index = [plan, axes, keepdims](const std::vector<Var>& out) {
    std::vector<Expr> idx;
    size_t o = 0, k = 0;
    for (size_t d = 0; d < plan.in_shape.size(); ++d) {
      if (plan.reduced[d]) {
        idx.push_back(axes[k++]->var);
        if (keepdims) ++o;
      } else {
        idx.push_back(out[o++]);
      }
    }
    return idx;
  };
  return r;
}

using detail::ReduceWhere;

te::Tensor reduce(const te::Tensor& x, const std::vector<int>& axes, bool keepdims,
                  const std::string& op, const std::string& name, const ReduceWhere& f) {
  ReducePlan p = plan_reduce(x, axes, keepdims, op);
  const size_t rank = p.in_shape.size();
  // Along the contiguous axis: a vectorizable partial stage that also reduces the other reduced
  // dimensions, then its lanes (lane_reduce.h). Not when x's producers read that axis with a
  // stride (a layout transform from NCHW16c): the schedule then vectorizes the kept axes, along
  // which those loads are contiguous.
  auto last_is_contiguous = [&] {
    std::vector<Expr> idx;
    for (size_t d = 0; d + 1 < rank; ++d) idx.push_back(Var("i" + std::to_string(d)));
    Var k("k");
    idx.push_back(k);
    return detail::contiguous_in(x(idx), k);
  };
  std::vector<int64_t> outer;
  for (size_t d = 0; d + 1 < rank; ++d)
    if (p.reduced[d]) outer.push_back(p.in_shape[d]);
  // Integers too (not bool): their sums, products, maxima and minima do not depend on the
  // order (a sort's ranks count comparisons as int64: 0.55 -> 0.44 ms for 64 rows of 256).
  if (rank >= 1 && p.reduced[rank - 1] &&
      (x->dtype.is_float() || x->dtype.is_int() || x->dtype.is_uint()) &&
      detail::two_stage(p.in_shape[rank - 1], outer) && last_is_contiguous()) {
    return detail::innermost_reduce(
        p.out_shape, outer, p.in_shape[rank - 1],
        [&](const std::vector<Var>& i, const std::vector<Var>& o, Expr k) {
          std::vector<Expr> idx;
          size_t io = 0, oo = 0;
          for (size_t d = 0; d + 1 < rank; ++d) {
            if (!p.reduced[d])
              idx.push_back(i[io++]);
            else
              idx.push_back(o[oo++]);
            if (p.reduced[d] && keepdims) ++io;
          }
          idx.push_back(k);
          return x(idx);
        },
        f, name, detail::tag_of(tag::kCommReduce, op));
  }
  ReduceAxes r = make_axes(p, keepdims);
  return te::compute(
      detail::to_exprs(p.out_shape),
      [&](const std::vector<Var>& i) { return f(x(r.input_index(i)), r.axes, Expr()); }, name,
      detail::tag_of(tag::kCommReduce, op));
}

Expr lowest(DataType t) {
  return t.is_float() ? make_const(t, -std::numeric_limits<double>::infinity()) : min_value(t);
}
Expr highest(DataType t) {
  return t.is_float() ? make_const(t, std::numeric_limits<double>::infinity()) : max_value(t);
}

te::Tensor arg_reduce(const te::Tensor& x, const std::vector<int>& axes, bool keepdims,
                      DataType index_dtype, bool is_max, const std::string& op,
                      const std::string& name) {
  KILN_USER_CHECK(index_dtype == DataType::Int(32) || index_dtype == DataType::Int(64))
      << op << ": index dtype must be int32 or int64, got " << index_dtype;
  ReducePlan p = plan_reduce(x, axes, keepdims, op);
  ReduceAxes r = make_axes(p, keepdims);
  te::Reducer reducer(
      [is_max](const std::vector<Expr>& a, const std::vector<Expr>& b) {
        Expr better = is_max ? b[1] > a[1] : b[1] < a[1];
        Expr take_b = better || (b[1] == a[1] && b[0] < a[0]);
        if (b[1].dtype().is_float()) {
          // NaN is the extreme of both (PyTorch): a NaN b wins over a non-NaN a, and of two
          // NaNs the one at the lower index.
          Expr a_nan = a[1] != a[1], b_nan = b[1] != b[1];
          take_b = (b_nan && (!a_nan || b[0] < a[0])) || (!a_nan && take_b);
        }
        return std::vector<Expr>{select(take_b, b[0], a[0]), select(take_b, b[1], a[1])};
      },
      [is_max](const std::vector<DataType>& t) {
        return std::vector<Expr>{max_value(t[0]), is_max ? lowest(t[1]) : highest(t[1])};
      },
      op);
  std::vector<te::Tensor> outs = te::compute_multi(
      detail::to_exprs(p.out_shape),
      [&](const std::vector<Var>& i) {
        return reducer({cast(index_dtype, r.flat_index), x(r.input_index(i))}, r.axes);
      },
      name, detail::tag_of(tag::kCommReduceIdx, op));
  return outs[0];
}

}  // namespace

namespace detail {

Expr nan_max_reduce(Expr source, std::vector<IterVar> axis, Expr where) {
  static const te::Reducer r = te::comm_reducer(nan_max, lowest, "max");
  return r(std::move(source), std::move(axis), std::move(where));
}

Expr nan_min_reduce(Expr source, std::vector<IterVar> axis, Expr where) {
  static const te::Reducer r = te::comm_reducer(nan_min, highest, "min");
  return r(std::move(source), std::move(axis), std::move(where));
}

}  // namespace detail

te::Tensor sum(const te::Tensor& x, const std::vector<int>& axes, bool keepdims,
               const std::string& name) {
  return reduce(x, axes, keepdims, "sum", name,
                [](Expr v, std::vector<IterVar> k, Expr w) { return te::sum(v, k, w); });
}

te::Tensor mean(const te::Tensor& x, const std::vector<int>& axes, bool keepdims,
                const std::string& name) {
  ReducePlan p = plan_reduce(x, axes, keepdims, "mean");
  int64_t count = 1;
  for (size_t d = 0; d < p.in_shape.size(); ++d)
    if (p.reduced[d]) count *= p.in_shape[d];
  te::Tensor s = reduce(x, axes, keepdims, "mean", name + ".sum",
                        [](Expr v, std::vector<IterVar> k, Expr w) { return te::sum(v, k, w); });
  return te::compute(
      s->shape,
      [&](const std::vector<Var>& i) {
        Expr v = s(std::vector<Expr>(i.begin(), i.end()));
        return v / make_const(v.dtype(), count);
      },
      name, detail::tag_of(tag::kElemWise, "mean"));
}

te::Tensor max(const te::Tensor& x, const std::vector<int>& axes, bool keepdims,
               const std::string& name) {
  return reduce(x, axes, keepdims, "max", name, [](Expr v, std::vector<IterVar> k, Expr w) {
    return detail::nan_max_reduce(v, std::move(k), w);
  });
}

te::Tensor min(const te::Tensor& x, const std::vector<int>& axes, bool keepdims,
               const std::string& name) {
  return reduce(x, axes, keepdims, "min", name, [](Expr v, std::vector<IterVar> k, Expr w) {
    return detail::nan_min_reduce(v, std::move(k), w);
  });
}

te::Tensor prod(const te::Tensor& x, const std::vector<int>& axes, bool keepdims,
                const std::string& name) {
  return reduce(x, axes, keepdims, "prod", name,
                [](Expr v, std::vector<IterVar> k, Expr w) { return te::prod(v, k, w); });
}

te::Tensor argmax(const te::Tensor& x, const std::vector<int>& axes, bool keepdims,
                  DataType index_dtype, const std::string& name) {
  return arg_reduce(x, axes, keepdims, index_dtype, true, "argmax", name);
}

te::Tensor argmin(const te::Tensor& x, const std::vector<int>& axes, bool keepdims,
                  DataType index_dtype, const std::string& name) {
  return arg_reduce(x, axes, keepdims, index_dtype, false, "argmin", name);
}

namespace {
/// cumsum's input shape and normalized axis, checked.
std::pair<std::vector<int64_t>, size_t> cumsum_shape(const te::Tensor& x, int axis) {
  std::vector<int64_t> s = detail::const_shape(x, "cumsum");
  KILN_USER_CHECK(!s.empty()) << "cumsum: the input must have rank >= 1, got a scalar";
  KILN_USER_CHECK(!x->dtype.is_bool() && x->dtype.lanes() == 1)
      << "cumsum: element type " << x->dtype << " is not supported";
  return {s, static_cast<size_t>(detail::normalize_axis(axis, s, "cumsum"))};
}
}  // namespace

te::Tensor cumsum(const te::Tensor& x, int axis, bool exclusive, bool reverse,
                  const std::string& name) {
  const auto [s, ax] = cumsum_shape(x, axis);
  const int64_t total = detail::numel(s);
  KILN_USER_CHECK(total < (int64_t{1} << 31))
      << "cumsum: " << detail::shape_text(s) << " has 2^31 or more elements";
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < ax; ++d) outer *= s[d];
  for (size_t d = ax + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t n = s[ax];
  const DataType t = x->dtype;
  using detail::ci;
  auto body = [=](const std::vector<Buffer>& ins, const std::vector<Buffer>& outs) -> Stmt {
    if (total == 0) return Evaluate::make(ci(0));
    Var o("o"), i("i"), k("k");
    // Element k of row o at position j along the axis; scan step i visits position j(i).
    auto at = [&](Expr j) { return o * ci(n * inner) + j * ci(inner) + k; };
    auto pos = [&](Expr step) { return reverse ? ci(n - 1) - step : step; };
    auto in = [&](Expr j) { return Load::make(t, ins[0]->data, at(std::move(j))); };
    auto out = [&](Expr j) { return Load::make(t, outs[0]->data, at(std::move(j))); };
    Expr first = exclusive ? make_zero(t) : in(pos(ci(0)));
    Expr next = out(pos(i - ci(1))) + (exclusive ? in(pos(i - ci(1))) : in(pos(i)));
    auto loop = [](Var v, int64_t lo, int64_t hi, Stmt b, ForKind kind = ForKind::kSerial) {
      return For::make(v, ci(lo), ci(hi - lo), kind, std::move(b));
    };
    Stmt row = SeqStmt::make(
        {loop(k, 0, inner, Store::make(outs[0]->data, first, at(pos(ci(0))))),
         loop(i, 1, n, loop(k, 0, inner, Store::make(outs[0]->data, next, at(pos(i)))))});
    const bool parallel = outer > 1 && total >= 4096;
    return loop(o, 0, outer, row, parallel ? ForKind::kParallel : ForKind::kSerial);
  };
  return te::extern_op({detail::to_exprs(s)}, {t}, {x}, body, name)[0];
}

te::Tensor cumsum_by_sum(const te::Tensor& x, int axis, bool exclusive, bool reverse,
                         const std::string& name) {
  const auto [s, ax] = cumsum_shape(x, axis);
  const int64_t n = s[ax];
  te::IterVar k = te::reduce_axis(Range(Expr(0), detail::ci(n)), "k");
  return te::compute(
      detail::to_exprs(s),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> at(i.begin(), i.end());
        at[ax] = k->var;
        Expr in = reverse ? (exclusive ? k->var > i[ax] : k->var >= i[ax])
                          : (exclusive ? k->var < i[ax] : k->var <= i[ax]);
        return te::sum(x(at), {k}, in);
      },
      name, detail::tag_of(tag::kCommReduce, "cumsum"));
}

}  // namespace kiln::topi
