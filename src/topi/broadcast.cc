// Binary and ternary operators with numpy broadcasting. The output shape is the broadcast of
// the operands' static shapes; each operand is read at the output index with its leading
// dimensions dropped and its size-1 dimensions pinned to 0 (detail::broadcast_index).
// maximum / minimum propagate NaN like PyTorch (detail::nan_max).
#include "kiln/topi/broadcast.h"

#include <functional>

#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT

namespace {

using BinFn = std::function<Expr(Expr, Expr)>;

te::Tensor binary(const te::Tensor& a, const te::Tensor& b, const std::string& op,
                  const std::string& name, const BinFn& f, bool same_dtype = true) {
  std::vector<int64_t> sa = detail::const_shape(a, op), sb = detail::const_shape(b, op);
  if (same_dtype)
    KILN_USER_CHECK(a->dtype == b->dtype)
        << op << ": dtype mismatch: " << a->dtype << " and " << b->dtype;
  std::vector<int64_t> out = detail::broadcast_shapes(sa, sb, op);
  return te::compute(
      detail::to_exprs(out),
      [&](const std::vector<Var>& i) {
        return f(a(detail::broadcast_index(i, sa)), b(detail::broadcast_index(i, sb)));
      },
      name, detail::tag_of(tag::kBroadcast, op));
}

Expr truth(Expr v) { return v.dtype().is_bool() ? v : v != make_zero(v.dtype()); }

}  // namespace

std::vector<int64_t> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                     const std::string& op) {
  return detail::broadcast_shapes(a, b, op);
}

te::Tensor add(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return binary(a, b, "add", name, [](Expr x, Expr y) { return x + y; });
}
te::Tensor subtract(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return binary(a, b, "subtract", name, [](Expr x, Expr y) { return x - y; });
}
te::Tensor multiply(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return binary(a, b, "multiply", name, [](Expr x, Expr y) { return x * y; });
}
te::Tensor divide(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return binary(a, b, "divide", name, [](Expr x, Expr y) { return x / y; });
}
te::Tensor power(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  KILN_USER_CHECK(a.defined() && a->dtype.is_float())
      << "power: needs floating-point inputs, got " << (a.defined() ? a->dtype.str() : "?");
  return binary(a, b, "power", name, [](Expr x, Expr y) { return ir::pow(x, y); });
}
te::Tensor maximum(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return binary(a, b, "maximum", name, [](Expr x, Expr y) { return detail::nan_max(x, y); });
}
te::Tensor minimum(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return binary(a, b, "minimum", name, [](Expr x, Expr y) { return detail::nan_min(x, y); });
}
te::Tensor equal(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return binary(a, b, "equal", name, [](Expr x, Expr y) { return x == y; });
}
te::Tensor not_equal(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return binary(a, b, "not_equal", name, [](Expr x, Expr y) { return x != y; });
}
te::Tensor less(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return binary(a, b, "less", name, [](Expr x, Expr y) { return x < y; });
}
te::Tensor less_equal(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return binary(a, b, "less_equal", name, [](Expr x, Expr y) { return x <= y; });
}
te::Tensor greater(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return binary(a, b, "greater", name, [](Expr x, Expr y) { return x > y; });
}
te::Tensor greater_equal(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return binary(a, b, "greater_equal", name, [](Expr x, Expr y) { return x >= y; });
}
te::Tensor logical_and(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return binary(
      a, b, "logical_and", name, [](Expr x, Expr y) { return truth(x) && truth(y); }, false);
}
te::Tensor logical_or(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return binary(
      a, b, "logical_or", name, [](Expr x, Expr y) { return truth(x) || truth(y); }, false);
}
te::Tensor logical_xor(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return binary(
      a, b, "logical_xor", name, [](Expr x, Expr y) { return truth(x) != truth(y); }, false);
}
te::Tensor logical_not(const te::Tensor& a, const std::string& name) {
  detail::const_shape(a, "logical_not");
  return te::compute(
      a->shape,
      [&](const std::vector<Var>& i) { return !truth(a(std::vector<Expr>(i.begin(), i.end()))); },
      name, detail::tag_of(tag::kElemWise, "logical_not"));
}

te::Tensor where(const te::Tensor& cond, const te::Tensor& a, const te::Tensor& b,
                 const std::string& name) {
  std::vector<int64_t> sc = detail::const_shape(cond, "where"),
                       sa = detail::const_shape(a, "where"), sb = detail::const_shape(b, "where");
  KILN_USER_CHECK(a->dtype == b->dtype)
      << "where: dtype mismatch: " << a->dtype << " and " << b->dtype;
  std::vector<int64_t> out;
  try {
    out = detail::broadcast_shapes(detail::broadcast_shapes(sc, sa, "where"), sb, "where");
  } catch (const Error&) {
    KILN_ERROR << "where: cannot broadcast shapes " << detail::shape_text(sc) << ", "
               << detail::shape_text(sa) << " and " << detail::shape_text(sb);
  }
  return te::compute(
      detail::to_exprs(out),
      [&](const std::vector<Var>& i) {
        return select(truth(cond(detail::broadcast_index(i, sc))),
                      a(detail::broadcast_index(i, sa)), b(detail::broadcast_index(i, sb)));
      },
      name, detail::tag_of(tag::kBroadcast, "where"));
}

namespace {
te::Tensor broadcast_impl(const te::Tensor& x, const std::vector<int64_t>& out,
                          const std::string& op, const std::string& name) {
  std::vector<int64_t> sx = detail::const_shape(x, op);
  return te::compute(
      detail::to_exprs(out),
      [&](const std::vector<Var>& i) { return x(detail::broadcast_index(i, sx)); }, name,
      detail::tag_of(tag::kBroadcast, op));
}
}  // namespace

te::Tensor broadcast_to(const te::Tensor& x, const std::vector<int64_t>& shape,
                        const std::string& name) {
  std::vector<int64_t> sx = detail::const_shape(x, "broadcast_to");
  bool ok = shape.size() >= sx.size();
  for (size_t d = 0; ok && d < sx.size(); ++d) {
    int64_t want = shape[shape.size() - sx.size() + d];
    ok = sx[d] == want || sx[d] == 1;
  }
  for (int64_t v : shape) ok = ok && v > 0;
  KILN_USER_CHECK(ok) << "broadcast_to: cannot broadcast shape " << detail::shape_text(sx) << " to "
                      << detail::shape_text(shape);
  return broadcast_impl(x, shape, "broadcast_to", name);
}

te::Tensor expand(const te::Tensor& x, const std::vector<int64_t>& shape, const std::string& name) {
  std::vector<int64_t> sx = detail::const_shape(x, "expand");
  for (int64_t v : shape)
    KILN_USER_CHECK(v > 0) << "expand: shape " << detail::shape_text(shape)
                           << " has a non-positive dimension";
  return broadcast_impl(x, detail::broadcast_shapes(sx, shape, "expand"), "expand", name);
}

}  // namespace kiln::topi
