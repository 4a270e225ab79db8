// Helpers of the convolution family: padding and attribute checks with user errors, the
// convolution output-extent formula, a spatial zero-padding stage (if_then_else on the
// in-bounds condition, so only in-range elements are ever read), NCHW[x]c shape arithmetic,
// and schedule plumbing: finding an operator's main stage by its tag in a fused group and
// inlining the injective stages around it.
#include "kiln/topi/nn_util.h"

#include <sstream>
#include <unordered_set>

#include "kiln/topi/op_pattern.h"
#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using detail::ci;

Padding2D Padding2D::from(const std::vector<int64_t>& v, const std::string& op) {
  for (int64_t x : v)
    KILN_USER_CHECK(x >= 0) << op << ": padding " << shape_str(v) << " has a negative value";
  if (v.size() == 1) return all(v[0]);
  if (v.size() == 2) return hw(v[0], v[1]);
  if (v.size() == 4) return {v[0], v[1], v[2], v[3]};
  KILN_ERROR << op << ": padding " << shape_str(v)
             << " must have 1 (all sides), 2 (h, w) or 4 (top, left, bottom, right) values";
}

std::string Padding2D::str() const {
  std::ostringstream os;
  os << "(" << top << ", " << left << ", " << bottom << ", " << right << ")";
  return os.str();
}

std::string Conv2DParams::str() const {
  std::ostringstream os;
  os << "strides (" << stride_h << ", " << stride_w << "), padding " << padding.str()
     << ", dilation (" << dilation_h << ", " << dilation_w << "), groups " << groups;
  return os.str();
}

int64_t conv_out_extent(int64_t in, int64_t k, int64_t stride, int64_t dilation, int64_t pad_before,
                        int64_t pad_after) {
  int64_t span = in + pad_before + pad_after - dilation * (k - 1) - 1;
  if (span < 0) return 0;
  return span / stride + 1;
}

void check_conv_params(const Conv2DParams& p, const std::string& op) {
  KILN_USER_CHECK(p.stride_h > 0 && p.stride_w > 0)
      << op << ": strides must be positive, got (" << p.stride_h << ", " << p.stride_w << ")";
  KILN_USER_CHECK(p.dilation_h > 0 && p.dilation_w > 0)
      << op << ": dilation must be positive, got (" << p.dilation_h << ", " << p.dilation_w << ")";
  const Padding2D& q = p.padding;
  KILN_USER_CHECK(q.top >= 0 && q.left >= 0 && q.bottom >= 0 && q.right >= 0)
      << op << ": padding must be non-negative, got " << q.str();
  KILN_USER_CHECK(p.groups > 0) << op << ": groups must be positive, got " << p.groups;
}

te::Tensor pad_spatial(const te::Tensor& x, int h_axis, const Padding2D& p,
                       const std::string& name) {
  if (p.is_zero()) return x;
  std::vector<int64_t> in = static_shape(x, "pad_spatial");
  KILN_ICHECK(h_axis >= 0 && h_axis + 1 < static_cast<int>(in.size()));
  std::vector<int64_t> out = in;
  out[h_axis] += p.top + p.bottom;
  out[h_axis + 1] += p.left + p.right;
  const int64_t H = in[h_axis], W = in[h_axis + 1];
  return te::compute(
      detail::to_exprs(out),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx(i.begin(), i.end());
        Expr h = i[h_axis], w = i[h_axis + 1];
        std::vector<Expr> conds;
        if (p.top > 0) conds.push_back(h >= ci(p.top));
        if (p.bottom > 0) conds.push_back(h < ci(H + p.top));
        if (p.left > 0) conds.push_back(w >= ci(p.left));
        if (p.right > 0) conds.push_back(w < ci(W + p.left));
        idx[h_axis] = h - ci(p.top);
        idx[h_axis + 1] = w - ci(p.left);
        Expr cond = conds[0];
        for (size_t k = 1; k < conds.size(); ++k) cond = cond && conds[k];
        return if_then_else(likely(cond), x(idx), make_zero(x->dtype));
      },
      name, detail::tag_of(tag::kInjective, "pad"));
}

std::vector<int64_t> nchwc_shape(const std::vector<int64_t>& nchw, int64_t bn,
                                 const std::string& op) {
  KILN_USER_CHECK(nchw.size() == 4) << op << ": expected an NCHW shape, got " << shape_str(nchw);
  KILN_USER_CHECK(bn > 0 && nchw[1] % bn == 0)
      << op << ": channel block " << bn << " does not divide the " << nchw[1]
      << " channels of shape " << shape_str(nchw);
  return {nchw[0], nchw[1] / bn, nchw[2], nchw[3], bn};
}

std::string nchwc_layout(int64_t bn) { return "NCHW" + std::to_string(bn) + "c"; }

std::vector<int64_t> static_shape(const te::Tensor& t, const std::string& op) {
  return detail::const_shape(t, op);
}

std::string shape_str(const std::vector<int64_t>& s) { return detail::shape_text(s); }

te::Tensor find_tagged(const std::vector<te::Tensor>& outs, const std::string& tag) {
  std::vector<te::Operation> ops;
  for (const te::Tensor& t : outs) ops.push_back(t.op());
  for (const te::Operation& op : te::post_dfs_order(ops))
    if (op->kind == te::OpKind::kCompute && op->tag == tag) return op.output(0);
  return te::Tensor();
}

void inline_injective_consumers(te::Schedule& s, const std::vector<te::Tensor>& outs,
                                const std::vector<te::Tensor>& keep) {
  std::vector<te::Operation> out_ops;
  std::unordered_set<const te::OperationNode*> fixed;
  for (const te::Tensor& t : outs) {
    out_ops.push_back(t.op());
    fixed.insert(t.op().get());
  }
  // Everything that feeds a kept stage stays as it is (the main stage schedules its inputs).
  std::vector<te::Operation> keep_ops;
  for (const te::Tensor& t : keep) keep_ops.push_back(t.op());
  for (const te::Operation& op : te::post_dfs_order(keep_ops)) fixed.insert(op.get());
  for (const te::Operation& op : te::post_dfs_order(out_ops)) {
    if (fixed.count(op.get()) || op->kind != te::OpKind::kCompute) continue;
    const auto* c = static_cast<const te::ComputeOpNode*>(op.get());
    if (!c->reduce_axis.empty() || !is_injective_tag(op->tag)) continue;
    s[op].compute_inline();
  }
}

int64_t largest_divisor_at_most(int64_t n, int64_t bound) {
  for (int64_t d = std::min(n, bound); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

int64_t channel_block(int64_t C, int64_t lanes) {
  int64_t p = 1;
  while (p * 2 <= lanes && C % (p * 2) == 0) p *= 2;
  return p * 2 >= lanes && p > 1 ? p : largest_divisor_at_most(C, lanes);
}

}  // namespace kiln::topi
