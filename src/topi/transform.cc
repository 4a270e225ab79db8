// Shape operators as injective te computes: each output index is mapped back to one input
// index. reshape goes through the row-major flat position (or maps the axes one to one when
// it only adds or removes unit extents); concat and pad choose between inputs (or the pad
// value) with select over clamped, always in-bounds indices; strided_slice normalizes
// begin/end/stride like numpy and ONNX and reads start + i * step; take reads its indices
// through an extern stage that wraps negatives and makes the kernel fail on an index out of
// range (never a clamp); layout_transform maps the logical channel between plain and blocked
// layouts.
#include "kiln/topi/transform.h"

#include <algorithm>
#include <limits>
#include <regex>

#include "kiln/runtime/c_runtime_api.h"
#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using detail::ci;
using detail::shape_text;

namespace {

std::string injective_tag(const std::string& op) { return detail::tag_of(tag::kInjective, op); }

Expr clamp(Expr v, int64_t lo, int64_t hi) {
  return ir::min(ir::max(v, make_const(v.dtype(), lo)), make_const(v.dtype(), hi));
}

te::Tensor reshape_impl(const te::Tensor& x, const std::vector<int64_t>& in,
                        const std::vector<int64_t>& out, const std::string& op,
                        const std::string& name) {
  std::vector<int64_t> in_stride(in.size(), 1);
  for (size_t d = in.size(); d-- > 1;) in_stride[d - 1] = in_stride[d] * in[d];
  return te::compute(
      detail::to_exprs(out),
      [&](const std::vector<Var>& i) {
        if (in == out) return x(std::vector<Expr>(i.begin(), i.end()));
        // Only unit extents added or removed ([M, N] ↔ [1, M, N]): the non-unit axes map one to
        // one, with no flat index (its floordiv / floormod defeat bound inference when the
        // reshape is inlined into a dense's epilogue).
        std::vector<size_t> in_axes, out_axes;
        for (size_t d = 0; d < in.size(); ++d)
          if (in[d] != 1) in_axes.push_back(d);
        for (size_t d = 0; d < out.size(); ++d)
          if (out[d] != 1) out_axes.push_back(d);
        bool unit_only = in_axes.size() == out_axes.size();
        for (size_t k = 0; unit_only && k < in_axes.size(); ++k)
          unit_only = in[in_axes[k]] == out[out_axes[k]];
        if (unit_only) {
          std::vector<Expr> idx(in.size(), ci(0));
          for (size_t k = 0; k < in_axes.size(); ++k) idx[in_axes[k]] = i[out_axes[k]];
          return x(idx);
        }
        Expr flat = ci(0);
        for (size_t d = 0; d < out.size(); ++d)
          flat = d == 0 ? Expr(i[0]) : flat * ci(out[d]) + i[d];
        std::vector<Expr> idx;
        for (size_t d = 0; d < in.size(); ++d) {
          Expr v = in_stride[d] == 1 ? flat : floordiv(flat, ci(in_stride[d]));
          idx.push_back(d == 0 ? v : floormod(v, ci(in[d])));
        }
        return x(idx);
      },
      name, injective_tag(op));
}

}  // namespace

te::Tensor reshape(const te::Tensor& x, const std::vector<int64_t>& newshape,
                   const std::string& name) {
  std::vector<int64_t> in = detail::const_shape(x, "reshape");
  std::vector<int64_t> out = newshape;
  int infer = -1;
  int64_t known = 1;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 0) {
      KILN_USER_CHECK(d < in.size())
          << "reshape: newshape " << shape_text(newshape) << " copies dimension " << d
          << " (0) that input " << shape_text(in) << " does not have";
      out[d] = in[d];
    } else if (out[d] == -1) {
      KILN_USER_CHECK(infer < 0) << "reshape: newshape " << shape_text(newshape)
                                 << " has more than one -1";
      infer = static_cast<int>(d);
      continue;
    } else {
      KILN_USER_CHECK(out[d] > 0) << "reshape: newshape " << shape_text(newshape)
                                  << " has an invalid dimension " << out[d];
    }
    known = mul_saturating(known, out[d]);  // an overflow fails the checks below
  }
  int64_t n = detail::numel(in);
  if (infer >= 0) {
    KILN_USER_CHECK(known > 0 && n % known == 0)
        << "reshape: cannot infer the -1 in " << shape_text(newshape) << " for input "
        << shape_text(in) << " (" << n << " elements)";
    out[infer] = n / known;
  }
  KILN_USER_CHECK(detail::numel(out) == n)
      << "reshape: cannot reshape " << shape_text(in) << " (" << n << " elements) to "
      << shape_text(out) << " (" << detail::numel(out) << " elements)";
  return reshape_impl(x, in, out, "reshape", name);
}

std::vector<int> transpose_permutation(const std::vector<int64_t>& in,
                                       const std::vector<int>& axes) {
  std::vector<int> perm;
  if (axes.empty()) {
    for (size_t d = in.size(); d-- > 0;) perm.push_back(static_cast<int>(d));
  } else {
    KILN_USER_CHECK(axes.size() == in.size())
        << "transpose: " << axes.size() << " axes given for input " << shape_text(in) << " of rank "
        << in.size();
    std::vector<bool> seen(in.size(), false);
    for (int a : axes) {
      int n = detail::normalize_axis(a, in, "transpose");
      KILN_USER_CHECK(!seen[n]) << "transpose: axis " << a << " repeats; axes must be a "
                                << "permutation of the " << in.size() << " dimensions";
      seen[n] = true;
      perm.push_back(n);
    }
  }
  return perm;
}

te::Tensor transpose(const te::Tensor& x, const std::vector<int>& axes, const std::string& name) {
  std::vector<int64_t> in = detail::const_shape(x, "transpose");
  const std::vector<int> perm = transpose_permutation(in, axes);
  std::vector<int64_t> out;
  for (int p : perm) out.push_back(in[p]);
  return te::compute(
      detail::to_exprs(out),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx(in.size());
        for (size_t d = 0; d < perm.size(); ++d) idx[perm[d]] = i[d];
        return x(idx);
      },
      name, injective_tag("transpose"));
}

te::Tensor concat(const std::vector<te::Tensor>& xs, int axis, const std::string& name) {
  KILN_USER_CHECK(!xs.empty()) << "concat: no input tensors";
  std::vector<std::vector<int64_t>> shapes;
  for (const te::Tensor& t : xs) shapes.push_back(detail::const_shape(t, "concat"));
  const std::vector<int64_t>& s0 = shapes[0];
  int ax = detail::normalize_axis(axis, s0, "concat");
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (size_t j = 0; j < xs.size(); ++j) {
    KILN_USER_CHECK(xs[j]->dtype == xs[0]->dtype)
        << "concat: input " << j << " has dtype " << xs[j]->dtype << ", input 0 has "
        << xs[0]->dtype;
    bool ok = shapes[j].size() == s0.size();
    for (size_t d = 0; ok && d < s0.size(); ++d)
      ok = static_cast<int>(d) == ax || shapes[j][d] == s0[d];
    KILN_USER_CHECK(ok) << "concat: input " << j << " has shape " << shape_text(shapes[j])
                        << ", incompatible with " << shape_text(s0) << " along axis " << ax;
    offsets.push_back(total);
    total += shapes[j][ax];
  }
  std::vector<int64_t> out = s0;
  out[ax] = total;
  return te::compute(
      detail::to_exprs(out),
      [&](const std::vector<Var>& i) {
        auto read = [&](size_t j) {
          std::vector<Expr> idx(i.begin(), i.end());
          Expr local = i[ax] - ci(offsets[j]);
          idx[ax] = xs.size() == 1 ? local : clamp(local, 0, shapes[j][ax] - 1);
          return xs[j](idx);
        };
        Expr v = read(xs.size() - 1);
        for (size_t j = xs.size() - 1; j-- > 0;)
          v = select(likely(i[ax] < ci(offsets[j + 1])), read(j), v);  // loop_partition cuts
        return v;
      },
      name, injective_tag("concat"));
}

std::vector<te::Tensor> split_sizes(const te::Tensor& x, const std::vector<int64_t>& sizes,
                                    int axis, const std::string& name) {
  std::vector<int64_t> in = detail::const_shape(x, "split");
  int ax = detail::normalize_axis(axis, in, "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    KILN_USER_CHECK(s > 0) << "split: part sizes must be positive, got " << shape_text(sizes);
    total += s;
  }
  KILN_USER_CHECK(!sizes.empty() && total == in[ax])
      << "split: part sizes " << shape_text(sizes) << " do not sum to the size " << in[ax]
      << " of axis " << ax << " (shape " << shape_text(in) << ")";
  std::vector<te::Tensor> outs;
  int64_t off = 0;
  for (size_t p = 0; p < sizes.size(); ++p) {
    std::vector<int64_t> out = in;
    out[ax] = sizes[p];
    outs.push_back(te::compute(
        detail::to_exprs(out),
        [&](const std::vector<Var>& i) {
          std::vector<Expr> idx(i.begin(), i.end());
          idx[ax] = i[ax] + ci(off);
          return x(idx);
        },
        name + "." + std::to_string(p), injective_tag("split")));
    off += sizes[p];
  }
  return outs;
}

std::vector<te::Tensor> split(const te::Tensor& x, int sections, int axis,
                              const std::string& name) {
  std::vector<int64_t> in = detail::const_shape(x, "split");
  int ax = detail::normalize_axis(axis, in, "split");
  KILN_USER_CHECK(sections > 0 && in[ax] % sections == 0)
      << "split: axis " << ax << " of size " << in[ax] << " cannot be split into " << sections
      << " equal sections (shape " << shape_text(in) << ")";
  return split_sizes(x, std::vector<int64_t>(sections, in[ax] / sections), ax, name);
}

std::vector<te::Tensor> split_at(const te::Tensor& x, const std::vector<int64_t>& indices, int axis,
                                 const std::string& name) {
  std::vector<int64_t> in = detail::const_shape(x, "split");
  int ax = detail::normalize_axis(axis, in, "split");
  std::vector<int64_t> sizes;
  int64_t prev = 0;
  for (int64_t v : indices) {
    KILN_USER_CHECK(v > prev && v < in[ax])
        << "split: indices " << shape_text(indices) << " must be ascending and inside (0, "
        << in[ax] << ") for axis " << ax << " of shape " << shape_text(in);
    sizes.push_back(v - prev);
    prev = v;
  }
  sizes.push_back(in[ax] - prev);
  return split_sizes(x, sizes, ax, name);
}

te::Tensor pad(const te::Tensor& x, const std::vector<int64_t>& pad_before,
               const std::vector<int64_t>& pad_after, double value, const std::string& name) {
  std::vector<int64_t> in = detail::const_shape(x, "pad");
  KILN_USER_CHECK(pad_before.size() <= in.size() && pad_after.size() <= in.size())
      << "pad: " << pad_before.size() << " / " << pad_after.size()
      << " padding values given for input " << shape_text(in) << " of rank " << in.size();
  std::vector<int64_t> b(in.size(), 0), a(in.size(), 0), out = in;
  for (size_t d = 0; d < in.size(); ++d) {
    if (d < pad_before.size()) b[d] = pad_before[d];
    if (d < pad_after.size()) a[d] = pad_after[d];
    KILN_USER_CHECK(b[d] >= 0 && a[d] >= 0)
        << "pad: negative padding " << shape_text(pad_before) << " / " << shape_text(pad_after);
    out[d] += b[d] + a[d];
  }
  return te::compute(
      detail::to_exprs(out),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx;
        Expr inside;
        for (size_t d = 0; d < in.size(); ++d) {
          if (b[d] == 0 && a[d] == 0) {
            idx.push_back(i[d]);
            continue;
          }
          Expr c = b[d] == 0   ? i[d] < ci(b[d] + in[d])
                   : a[d] == 0 ? i[d] >= ci(b[d])
                               : (i[d] >= ci(b[d]) && i[d] < ci(b[d] + in[d]));
          inside = inside.defined() ? (inside && c) : c;
          idx.push_back(clamp(i[d] - ci(b[d]), 0, in[d] - 1));
        }
        Expr v = x(idx);
        if (!inside.defined()) return v;
        return select(inside, v, make_const(x->dtype, value));
      },
      name, injective_tag("pad"));
}

SliceWindow strided_slice_window(const std::vector<int64_t>& in, const std::vector<int64_t>& begin,
                                 const std::vector<int64_t>& end,
                                 const std::vector<int64_t>& strides,
                                 const std::vector<int>& axes) {
  KILN_USER_CHECK(begin.size() == end.size() &&
                  (strides.empty() || strides.size() == begin.size()) &&
                  (axes.empty() || axes.size() == begin.size()) && begin.size() <= in.size())
      << "strided_slice: begin " << shape_text(begin) << ", end " << shape_text(end)
      << " and strides " << shape_text(strides) << " must have one entry per sliced axis (input "
      << shape_text(in) << ")";
  std::vector<int64_t> start(in.size(), 0), step(in.size(), 1), out = in;
  std::vector<bool> seen(in.size(), false);
  for (size_t j = 0; j < begin.size(); ++j) {
    int ax =
        axes.empty() ? static_cast<int>(j) : detail::normalize_axis(axes[j], in, "strided_slice");
    KILN_USER_CHECK(!seen[ax]) << "strided_slice: axis " << ax << " is sliced twice";
    seen[ax] = true;
    int64_t n = in[ax], s = strides.empty() ? 1 : strides[j];
    KILN_USER_CHECK(s != 0) << "strided_slice: stride of axis " << ax << " is 0";
    int64_t bg = begin[j], en = end[j];
    if (bg < 0) bg += n;
    if (en < 0) en += n;
    int64_t len;
    if (s > 0) {
      bg = std::clamp<int64_t>(bg, 0, n);
      en = std::clamp<int64_t>(en, 0, n);
      len = en > bg ? (en - bg + s - 1) / s : 0;
    } else {
      bg = std::clamp<int64_t>(bg, 0, n - 1);
      en = std::clamp<int64_t>(en, -1, n - 1);
      len = bg > en ? (bg - en + (-s) - 1) / (-s) : 0;
    }
    KILN_USER_CHECK(len > 0) << "strided_slice: the slice of axis " << ax << " (begin " << begin[j]
                             << ", end " << end[j] << ", stride " << s << ") of shape "
                             << shape_text(in) << " is empty";
    start[ax] = bg;
    step[ax] = s;
    out[ax] = len;
  }
  return SliceWindow{start, step, out};
}

te::Tensor strided_slice(const te::Tensor& x, const std::vector<int64_t>& begin,
                         const std::vector<int64_t>& end, const std::vector<int64_t>& strides,
                         const std::vector<int>& axes, const std::string& name) {
  std::vector<int64_t> in = detail::const_shape(x, "strided_slice");
  const SliceWindow w = strided_slice_window(in, begin, end, strides, axes);
  const std::vector<int64_t>&start = w.start, &step = w.step, &out = w.extent;
  return te::compute(
      detail::to_exprs(out),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx;
        for (size_t d = 0; d < in.size(); ++d) {
          Expr v = step[d] == 1 ? Expr(i[d]) : i[d] * ci(step[d]);
          idx.push_back(start[d] == 0 ? v : v + ci(start[d]));
        }
        return x(idx);
      },
      name, injective_tag("strided_slice"));
}

namespace {

/// The indices of a take, checked at run time: an extern stage that copies them into int32
/// with negatives wrapped (i + n) and, at the first index outside [-n, n), makes the kernel
/// return an error naming the axis, its extent and the index (the executor adds the node).
te::Tensor checked_take_indices(const te::Tensor& indices, const std::vector<int64_t>& is, int axis,
                                int64_t n, const std::string& name, const char* op = "take") {
  const int64_t count = detail::numel(is);
  const DataType it = indices->dtype;
  std::ostringstream prefix;
  prefix << op << ": index out of range for axis " << axis << " of extent " << n
         << " (indices must lie in [" << -n << ", " << n - 1 << "]), got ";
  const std::string msg = prefix.str();
  return te::extern_op(
      {detail::to_exprs(is)}, {DataType::Int(32)}, {indices},
      [=](const std::vector<Buffer>& ins, const std::vector<Buffer>& outs) {
        const DataType i32 = DataType::Int(32), i64 = DataType::Int(64);
        Var k("k", i32);
        Expr v = Load::make(it, ins[0]->data, k);
        Expr ok, w;
        if (it.is_uint()) {
          ok = v < make_const(it, n);
          w = cast(i32, v);
        } else {
          Expr v64 = cast(i64, v);
          ok = v64 >= make_const(i64, -n) && v64 < make_const(i64, n);
          w = cast(i32, select(v64 < make_const(i64, 0), v64 + make_const(i64, n), v64));
        }
        Stmt check = Evaluate::make(
            Call::make(i32, builtin::kArgCheck,
                       {ok, StringImm::make(msg), IntImm::make(i32, kKilnGotInt), cast(i64, v)},
                       CallKind::kIntrinsic));
        Stmt body = SeqStmt::make({check, Store::make(outs[0]->data, w, k)});
        return For::make(k, ci(0), ci(count), ForKind::kSerial, body);
      },
      name + "_indices")[0];
}

}  // namespace

te::Tensor take(const te::Tensor& x, const te::Tensor& indices, int axis, const std::string& name) {
  std::vector<int64_t> in = detail::const_shape(x, "take");
  std::vector<int64_t> is = detail::const_shape(indices, "take");
  KILN_USER_CHECK(indices->dtype.is_int() || indices->dtype.is_uint())
      << "take: indices must be integers, got " << indices->dtype;
  int ax = detail::normalize_axis(axis, in, "take");
  std::vector<int64_t> out(in.begin(), in.begin() + ax);
  out.insert(out.end(), is.begin(), is.end());
  out.insert(out.end(), in.begin() + ax + 1, in.end());
  int64_t n = in[ax];
  KILN_USER_CHECK(n > 0) << "take: axis " << ax << " of " << shape_text(in)
                         << " is empty, so no index is valid";
  size_t r = is.size();
  te::Tensor checked = checked_take_indices(indices, is, ax, n, name);
  return te::compute(
      detail::to_exprs(out),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> ii(i.begin() + ax, i.begin() + ax + static_cast<ptrdiff_t>(r));
        // Already in [0, n): the clamp only tells bound inference so.
        Expr v = clamp(checked(ii), 0, n - 1);
        std::vector<Expr> idx(i.begin(), i.begin() + ax);
        idx.push_back(v);
        idx.insert(idx.end(), i.begin() + ax + static_cast<ptrdiff_t>(r), i.end());
        return x(idx);
      },
      name, injective_tag("take"));
}

te::Tensor gather_elements(const te::Tensor& x, const te::Tensor& indices, int axis,
                           const std::string& name) {
  std::vector<int64_t> in = detail::const_shape(x, "gather_elements");
  std::vector<int64_t> is = detail::const_shape(indices, "gather_elements");
  KILN_USER_CHECK(indices->dtype.is_int() || indices->dtype.is_uint())
      << "gather_elements: indices must be integers, got " << indices->dtype;
  KILN_USER_CHECK(is.size() == in.size()) << "gather_elements: indices " << shape_text(is)
                                          << " must have the rank of the data " << shape_text(in);
  const int ax = detail::normalize_axis(axis, in, "gather_elements");
  for (size_t d = 0; d < in.size(); ++d)
    KILN_USER_CHECK(static_cast<int>(d) == ax || is[d] <= in[d])
        << "gather_elements: indices " << shape_text(is) << " exceed the data " << shape_text(in)
        << " on axis " << d;
  const int64_t n = in[static_cast<size_t>(ax)];
  KILN_USER_CHECK(n > 0 || detail::numel(is) == 0)
      << "gather_elements: axis " << ax << " of " << shape_text(in)
      << " is empty, so no index is valid";
  te::Tensor checked =
      checked_take_indices(indices, is, ax, std::max<int64_t>(n, 1), name, "gather_elements");
  return te::compute(
      detail::to_exprs(is),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx(i.begin(), i.end());
        // Already in [0, n): the clamp only tells bound inference so.
        idx[static_cast<size_t>(ax)] =
            clamp(checked(std::vector<Expr>(i.begin(), i.end())), 0, std::max<int64_t>(n, 1) - 1);
        return x(idx);
      },
      name, injective_tag("gather_elements"));
}

te::Tensor squeeze(const te::Tensor& x, const std::vector<int>& axes, const std::string& name) {
  std::vector<int64_t> in = detail::const_shape(x, "squeeze");
  std::vector<bool> drop(in.size(), false);
  if (axes.empty()) {
    for (size_t d = 0; d < in.size(); ++d) drop[d] = in[d] == 1;
  } else {
    for (int a : axes) {
      int n = detail::normalize_axis(a, in, "squeeze");
      KILN_USER_CHECK(in[n] == 1) << "squeeze: cannot squeeze axis " << a << " of size " << in[n]
                                  << " (shape " << shape_text(in) << ")";
      drop[n] = true;
    }
  }
  std::vector<int64_t> out;
  for (size_t d = 0; d < in.size(); ++d)
    if (!drop[d]) out.push_back(in[d]);
  return te::compute(
      detail::to_exprs(out),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx;
        size_t o = 0;
        for (size_t d = 0; d < in.size(); ++d) idx.push_back(drop[d] ? ci(0) : Expr(i[o++]));
        return x(idx);
      },
      name, injective_tag("squeeze"));
}

namespace {
te::Tensor insert_ones(const te::Tensor& x, const std::vector<int64_t>& in,
                       const std::vector<bool>& is_new, const std::string& op,
                       const std::string& name) {
  std::vector<int64_t> out;
  size_t k = 0;
  for (bool nw : is_new) out.push_back(nw ? 1 : in[k++]);
  return te::compute(
      detail::to_exprs(out),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx;
        for (size_t d = 0; d < is_new.size(); ++d)
          if (!is_new[d]) idx.push_back(i[d]);
        return x(idx);
      },
      name, injective_tag(op));
}
}  // namespace

te::Tensor expand_dims(const te::Tensor& x, int axis, int num_newaxis, const std::string& name) {
  std::vector<int64_t> in = detail::const_shape(x, "expand_dims");
  KILN_USER_CHECK(num_newaxis >= 0) << "expand_dims: num_newaxis " << num_newaxis << " is negative";
  int ax = detail::normalize_axis(axis, in, "expand_dims", 1);
  std::vector<bool> is_new(in.size() + num_newaxis, false);
  for (int j = 0; j < num_newaxis; ++j) is_new[ax + j] = true;
  return insert_ones(x, in, is_new, "expand_dims", name);
}

te::Tensor unsqueeze(const te::Tensor& x, const std::vector<int>& axes, const std::string& name) {
  std::vector<int64_t> in = detail::const_shape(x, "unsqueeze");
  std::vector<bool> is_new(in.size() + axes.size(), false);
  for (int a : axes) {
    int n = detail::normalize_axis(a, in, "unsqueeze", static_cast<int>(axes.size()));
    KILN_USER_CHECK(!is_new[n]) << "unsqueeze: axis " << a << " is listed twice";
    is_new[n] = true;
  }
  return insert_ones(x, in, is_new, "unsqueeze", name);
}

te::Tensor flatten(const te::Tensor& x, int axis, const std::string& name) {
  std::vector<int64_t> in = detail::const_shape(x, "flatten");
  int r = static_cast<int>(in.size());
  KILN_USER_CHECK(axis >= -r && axis <= r)
      << "flatten: axis " << axis << " is out of range [" << -r << ", " << r
      << "] for a tensor of rank " << r << " (shape " << shape_text(in) << ")";
  int ax = axis < 0 ? axis + r : axis;
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < in.size(); ++d) (static_cast<int>(d) < ax ? outer : inner) *= in[d];
  return reshape_impl(x, in, {outer, inner}, "flatten", name);
}

namespace {
/// 0 for "NCHW", b for "NCHW<b>c"; an error for anything else.
int64_t parse_block(const std::string& layout) {
  if (layout == "NCHW") return 0;
  static const std::regex re("NCHW([0-9]+)c");
  std::smatch m;
  if (std::regex_match(layout, m, re)) {
    int64_t b = std::stoll(m[1]);
    if (b > 0) return b;
  }
  KILN_ERROR << "layout_transform: unsupported layout '" << layout
             << "' (supported: NCHW and NCHW<b>c, e.g. NCHW16c)";
}
}  // namespace

te::Tensor layout_transform(const te::Tensor& x, const std::string& src_layout,
                            const std::string& dst_layout, const std::string& name) {
  std::vector<int64_t> in = detail::const_shape(x, "layout_transform");
  int64_t sb = parse_block(src_layout), db = parse_block(dst_layout);
  bool shape_ok = sb == 0 ? in.size() == 4 : (in.size() == 5 && in[4] == sb);
  KILN_USER_CHECK(shape_ok) << "layout_transform: input of layout " << src_layout
                            << " must have shape "
                            << (sb == 0 ? std::string("[N, C, H, W]")
                                        : "[N, C/" + std::to_string(sb) + ", H, W, " +
                                              std::to_string(sb) + "]")
                            << ", got " << shape_text(in);
  int64_t channels = sb == 0 ? in[1] : in[1] * sb;
  KILN_USER_CHECK(db == 0 || channels % db == 0)
      << "layout_transform: " << channels << " channels are not divisible by the block size " << db
      << " of " << dst_layout << " (input " << shape_text(in) << ")";
  std::vector<int64_t> out = {in[0], db == 0 ? channels : channels / db, in[2], in[3]};
  if (db) out.push_back(db);
  return te::compute(
      detail::to_exprs(out),
      [&](const std::vector<Var>& i) {
        Expr c = db == 0 ? Expr(i[1]) : i[1] * ci(db) + i[4];
        if (sb == 0) return x(i[0], c, i[2], i[3]);
        if (sb == db) return x(i[0], i[1], i[2], i[3], i[4]);
        return x(i[0], floordiv(c, ci(sb)), i[2], i[3], floormod(c, ci(sb)));
      },
      name, injective_tag("layout_transform"));
}

}  // namespace kiln::topi
