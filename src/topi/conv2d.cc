// conv2d in NCHW: the shape rule, the compute (a padding stage, then a sum over input
// channels of the group and the kernel window, with strides and dilation applied to the
// padded input's indices) and a simple reference schedule, the tunable template: output rows
// in parallel over (n * oc [* oh]), each row accumulated in a local buffer computed at the row
// loop with the reduction outside and the row (ow) inside, split and vectorized. The untuned
// NCHW fallback is the rule-based scheduler (auto_schedule.h), which measured faster; the fast
// path is conv2d_nchwc (conv2d_nchwc.cc).
#include "kiln/topi/conv2d.h"

#include <cmath>
#include <sstream>

#include "conv2d_common.h"
#include "kiln/topi/auto_schedule.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using autotune::Annotation;
using autotune::Config;
using autotune::SplitPolicy;
using detail::ci;

// ---------------------------------------------------------------------------------------------
// Workload

int64_t Conv2DWorkload::out_height() const {
  return conv_out_extent(height, kernel_h, params.stride_h, params.dilation_h, params.padding.top,
                         params.padding.bottom);
}
int64_t Conv2DWorkload::out_width() const {
  return conv_out_extent(width, kernel_w, params.stride_w, params.dilation_w, params.padding.left,
                         params.padding.right);
}
std::vector<int64_t> Conv2DWorkload::data_shape() const {
  return {batch, in_channel, height, width};
}
std::vector<int64_t> Conv2DWorkload::kernel_shape() const {
  return {out_channel, in_channel / std::max<int64_t>(params.groups, 1), kernel_h, kernel_w};
}
std::vector<int64_t> Conv2DWorkload::out_shape() const {
  return {batch, out_channel, out_height(), out_width()};
}
double Conv2DWorkload::flops() const {
  return 2.0 * batch * out_channel * out_height() * out_width() *
         (in_channel / std::max<int64_t>(params.groups, 1)) * kernel_h * kernel_w;
}
std::string Conv2DWorkload::str() const {
  std::ostringstream os;
  os << "conv2d N" << batch << " C" << in_channel << " H" << height << " W" << width << " O"
     << out_channel << " K" << kernel_h << "x" << kernel_w << " " << params.str();
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// Shape rule and compute

std::vector<int64_t> conv2d_nchw_shape(const std::vector<int64_t>& data,
                                       const std::vector<int64_t>& kernel, const Conv2DParams& p) {
  const char* op = "conv2d_nchw";
  check_conv_params(p, op);
  KILN_USER_CHECK(data.size() == 4 && kernel.size() == 4)
      << op << ": expected data [N, C, H, W] and kernel [O, C/groups, KH, KW], got data "
      << shape_str(data) << " and kernel " << shape_str(kernel);
  const int64_t C = data[1], O = kernel[0], g = p.groups;
  KILN_USER_CHECK(C % g == 0 && O % g == 0)
      << op << ": groups " << g << " must divide the " << C << " input channels (data "
      << shape_str(data) << ") and the " << O << " output channels (kernel " << shape_str(kernel)
      << ")";
  KILN_USER_CHECK(kernel[1] == C / g)
      << op << ": kernel " << shape_str(kernel) << " has " << kernel[1]
      << " input channels per group, but data " << shape_str(data) << " with groups " << g
      << " has " << C / g;
  KILN_USER_CHECK(kernel[2] > 0 && kernel[3] > 0)
      << op << ": kernel " << shape_str(kernel) << " has an empty window";
  int64_t oh = conv_out_extent(data[2], kernel[2], p.stride_h, p.dilation_h, p.padding.top,
                               p.padding.bottom);
  int64_t ow = conv_out_extent(data[3], kernel[3], p.stride_w, p.dilation_w, p.padding.left,
                               p.padding.right);
  KILN_USER_CHECK(oh > 0 && ow > 0)
      << op << ": the kernel " << shape_str(kernel) << " (dilation (" << p.dilation_h << ", "
      << p.dilation_w << ")) does not fit the padded input: data " << shape_str(data)
      << ", padding " << p.padding.str();
  return {data[0], O, oh, ow};
}

te::Tensor conv2d_nchw(const te::Tensor& data, const te::Tensor& kernel, const Conv2DParams& p,
                       const std::string& name) {
  std::vector<int64_t> ds = static_shape(data, "conv2d_nchw");
  std::vector<int64_t> ks = static_shape(kernel, "conv2d_nchw");
  std::vector<int64_t> os = conv2d_nchw_shape(ds, ks, p);
  te::Tensor pad = pad_spatial(data, 2, p.padding, name + "_pad");
  const int64_t cpg = ks[1], opg = os[1] / p.groups;
  te::IterVar rc = te::reduce_axis({0, static_cast<int32_t>(cpg)}, "rc");
  te::IterVar kh = te::reduce_axis({0, static_cast<int32_t>(ks[2])}, "kh");
  te::IterVar kw = te::reduce_axis({0, static_cast<int32_t>(ks[3])}, "kw");
  return te::compute(
      detail::to_exprs(os),
      [&](Var n, Var o, Var y, Var x) {
        Expr c = p.groups == 1 ? Expr(rc->var) : floordiv(o, ci(opg)) * ci(cpg) + rc->var;
        Expr h = y * ci(p.stride_h) + kh->var * ci(p.dilation_h);
        Expr w = x * ci(p.stride_w) + kw->var * ci(p.dilation_w);
        return te::sum(pad(n, c, h, w) * kernel(o, rc, kh, kw), {rc, kh, kw});
      },
      name, "conv2d_nchw");
}

// ---------------------------------------------------------------------------------------------
// Reference schedule

namespace detail {

void schedule_nchw_rows(Config& cfg, te::Schedule& s, const te::Tensor& out, const char* op_tag,
                        const Target& target) {
  const std::string who = std::string("schedule_") + op_tag;
  te::Tensor conv = find_tagged({out}, op_tag);
  KILN_USER_CHECK(conv.defined()) << who << ": no " << op_tag << " stage feeds output '"
                                  << out.name() << "'";
  std::vector<int64_t> os = static_shape(conv, who);
  KILN_USER_CHECK(static_shape(out, who) == os)
      << who << ": output '" << out.name() << "' must have the convolution's shape "
      << shape_str(os);
  const int64_t OW = os[3];
  const int64_t lanes = std::max(1, target.vector_bits() / 32);
  cfg.define_split("tile_ow", OW, 2, SplitPolicy::kPowerOfTwo, 64, /*no_tail=*/false);
  cfg.define_bool("vectorize");
  cfg.define_bool("parallel_rows");
  if (cfg.is_fallback()) {
    cfg.fallback_split("tile_ow", {-1, lanes});
    cfg.fallback_knob("vectorize", 1);
    cfg.fallback_knob("parallel_rows", os[0] * os[1] < 8 ? 1 : 0);
  }

  inline_injective_consumers(s, {out}, {conv});
  // Padding (and conv2d_transpose's dilated input) at root, rows in parallel.
  for (const te::Tensor& in : inputs_of(conv))
    if (in.op()->kind == te::OpKind::kCompute && in.ndim() == 4 && is_injective_tag(in.op()->tag))
      schedule_pad_root(s, in, false);

  te::Tensor acc = accumulator(s, conv, out);
  te::Stage so = s[out];
  auto ax = so.op_axis();
  te::IterVar row;
  if (cfg.knob("parallel_rows")) {
    row = so.fuse({ax[0], ax[1], ax[2]});
    so.parallel(row);
  } else {
    te::IterVar f = so.fuse(ax[0], ax[1]);
    so.parallel(f);
    row = ax[2];
  }
  auto x = cfg.split("tile_ow").apply(so, ax[3]);
  if (cfg.knob("vectorize")) so.vectorize(x[1]);

  te::Stage sa = s[acc];
  sa.compute_at(so, row);
  auto aax = sa.op_axis();
  std::vector<te::IterVar> order = sa.op_reduce_axis();
  auto ax_ = cfg.split("tile_ow").apply(sa, aax[3]);
  order.push_back(ax_[0]);
  order.push_back(ax_[1]);
  sa.reorder(order);
  if (cfg.knob("vectorize")) sa.vectorize(ax_[1]);
}

}  // namespace detail

void schedule_conv2d_nchw(Config& cfg, te::Schedule& s, const te::Tensor& out,
                          const Target& target) {
  detail::schedule_nchw_rows(cfg, s, out, "conv2d_nchw", target);
}

te::Schedule schedule_conv2d_nchw(const std::vector<te::Tensor>& outs, const Target& target) {
  KILN_USER_CHECK(!outs.empty()) << "schedule_conv2d_nchw: no outputs";
  KILN_USER_CHECK(find_tagged({outs[0]}, "conv2d_nchw").defined())
      << "schedule_conv2d_nchw: no conv2d_nchw stage feeds output '" << outs[0].name() << "'";
  // The rule-based scheduler's register tile (output channels x a row of columns, padding at
  // the root) measured 4-12x faster than the row schedule above on every shape tried
  // (docs/auto-schedule.md); the row schedule stays as the tunable template.
  return auto_schedule(outs, target);
}

autotune::Template conv2d_nchw_template(const Conv2DWorkload& wl, const Target& target) {
  return {"conv2d_nchw", "1", [wl, target](Config& cfg) {
            te::Tensor data =
                te::placeholder(detail::to_exprs(wl.data_shape()), DataType::Float(32), "data");
            te::Tensor kernel =
                te::placeholder(detail::to_exprs(wl.kernel_shape()), DataType::Float(32), "kernel");
            te::Tensor out = conv2d_nchw(data, kernel, wl.params);
            te::Schedule s = te::create_schedule({out});
            schedule_conv2d_nchw(cfg, s, out, target);
            return autotune::Instance{s, {data, kernel, out}, cfg, {false, true, false}};
          }};
}

}  // namespace kiln::topi
