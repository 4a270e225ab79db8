// Private helpers shared by the topi operator files of this family (elemwise, broadcast,
// reduction, norm, transform): static shapes as integers, shape text for error messages, axis
// normalization, and numpy broadcasting of indices.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/support/error.h"
#include "kiln/support/saturating.h"
#include "kiln/te/tensor.h"

namespace kiln::topi::detail {

using namespace kiln::ir;  // NOLINT

/// "[2, 3]".
inline std::string shape_text(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

/// The static shape of `t`; a user error naming `op` when an extent is not a constant.
inline std::vector<int64_t> const_shape(const te::Tensor& t, const std::string& op) {
  KILN_USER_CHECK(t.defined()) << op << ": input tensor is undefined";
  std::vector<int64_t> s;
  for (size_t d = 0; d < t->shape.size(); ++d) {
    auto v = as_const_int(t->shape[d]);
    KILN_USER_CHECK(v.has_value()) << op << ": dimension " << d << " of " << t.name()
                                   << " is not a constant (topi needs static shapes)";
    s.push_back(*v);
  }
  return s;
}

/// An int32 index constant.
inline Expr ci(int64_t v) { return Expr(static_cast<int32_t>(v)); }

inline std::vector<Expr> to_exprs(const std::vector<int64_t>& s) {
  std::vector<Expr> r;
  for (int64_t v : s) r.push_back(ci(v));
  return r;
}

/// The element count of a shape; INT64_MAX when it overflows (the caller's size check fails).
inline int64_t numel(const std::vector<int64_t>& s) { return numel_saturating(s); }

/// `axis` in [-ndim, ndim) made non-negative; a user error naming `op` and the shape otherwise.
inline int normalize_axis(int64_t axis, const std::vector<int64_t>& shape, const std::string& op,
                          int extra = 0) {
  int64_t n = static_cast<int64_t>(shape.size()) + extra;
  KILN_USER_CHECK(axis >= -n && axis < n)
      << op << ": axis " << axis << " is out of range for a tensor of rank " << shape.size()
      << " (shape " << shape_text(shape) << ")";
  return static_cast<int>(axis < 0 ? axis + n : axis);
}

/// The numpy broadcast of two shapes; a user error "op: cannot broadcast shapes A and B".
inline std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a,
                                             const std::vector<int64_t>& b, const std::string& op) {
  size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_USER_CHECK(x == y || x == 1 || y == 1)
        << op << ": cannot broadcast shapes " << shape_text(a) << " and " << shape_text(b);
    out[i] = x == 1 ? y : x;
  }
  return out;
}

/// Indices into a tensor of shape `in` read at output index `idx` under numpy broadcasting
/// (trailing dimensions aligned; size-1 dimensions read element 0).
inline std::vector<Expr> broadcast_index(const std::vector<Var>& idx,
                                         const std::vector<int64_t>& in) {
  std::vector<Expr> r;
  size_t off = idx.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == 1)
      r.push_back(make_zero(idx[off + d].dtype()));
    else
      r.push_back(idx[off + d]);
  }
  return r;
}

// NaN-propagating extrema (PyTorch's and ONNX Runtime's semantics: a NaN operand gives NaN).
// The IR's float Max / Min are compare-and-select (x86 maxps / minps) and drop a NaN in one of
// the two positions, so every max-like op of the operator library goes through these instead.
// Integers have no NaN and keep plain Max / Min.

/// max(a, b), NaN when either is NaN. Floats: `b > a ? b : a` (one maxps(b, a) on x86) keeps
/// a NaN a, and a NaN b is chosen by the outer select. As a reduction's combiner (a the
/// accumulator) the test on b does not depend on the accumulator, so the loop-carried chain is
/// a maxps and a blend.
inline Expr nan_max(Expr a, Expr b) {
  if (!a.dtype().is_float()) return ir::max(std::move(a), std::move(b));
  return select(b != b, b, select(b > a, b, a));
}
/// min(a, b), NaN when either is NaN (the same form with minps).
inline Expr nan_min(Expr a, Expr b) {
  if (!a.dtype().is_float()) return ir::min(std::move(a), std::move(b));
  return select(b != b, b, select(b < a, b, a));
}
/// max(x, c) for a `c` that is never NaN (a constant bound): x when x is NaN. One maxps(c, x)
/// on x86, as cheap as the plain max.
inline Expr max_bound(Expr x, Expr c) {
  if (!x.dtype().is_float()) return ir::max(std::move(x), std::move(c));
  return select(x < c, c, x);
}
/// min(x, c) for a `c` that is never NaN: x when x is NaN (one minps(c, x)).
inline Expr min_bound(Expr x, Expr c) {
  if (!x.dtype().is_float()) return ir::min(std::move(x), std::move(c));
  return select(x > c, c, x);
}
/// The max reduction with nan_max as its combiner (identity: -inf, or the lowest integer).
Expr nan_max_reduce(Expr source, std::vector<te::IterVar> axis, Expr where = Expr());
/// The min reduction with nan_min as its combiner (identity: +inf, or the highest integer).
Expr nan_min_reduce(Expr source, std::vector<te::IterVar> axis, Expr where = Expr());

/// "op" + "," + name for tags like "elemwise,relu".
inline std::string tag_of(const char* kind, const std::string& name) {
  return std::string(kind) + "," + name;
}

/// The candidates not above `bound`, or the smallest one when none is.
inline std::vector<int64_t> filter_leq(const std::vector<int64_t>& c, int64_t bound) {
  std::vector<int64_t> r;
  for (int64_t v : c)
    if (v <= bound) r.push_back(v);
  if (r.empty()) r.push_back(c.front());
  return r;
}

/// The constant extent of a loop axis, or -1 when it is not a constant.
inline int64_t extent_of(const IterVar& iv) {
  auto v = as_const_int(iv->dom->extent);
  return v ? *v : -1;
}

/// The product of the axes' constant extents, or -1 when one of them is not a constant.
inline int64_t product(const std::vector<IterVar>& axes) {
  int64_t n = 1;
  for (const IterVar& iv : axes) {
    int64_t e = extent_of(iv);
    if (e < 0) return -1;
    n *= e;
  }
  return n;
}

}  // namespace kiln::topi::detail
