// conv2d_transpose in NCHW as a stride-1 convolution: the input dilated by the stride and
// padded by dilation * (K - 1) - pad on each side (output_padding added at the bottom / right)
// is one stage, dpad[n, c, yy, xx] = data[n, c, (yy - bt) / sh, (xx - bl) / sw] where the
// divisions are exact and in range, else 0 (only existing elements are read); the output sums
// dpad[n, c, y + kh*dh, x + kw*dw] * kernel[c, o, KH-1-kh, KW-1-kw] (the kernel flipped and
// its channel axes swapped by indexing, no copy). Untuned it is scheduled by the rule-based
// scheduler (auto_schedule.h), the dilated input at root; the tunable template keeps the NCHW
// row schedule of conv2d (conv2d.cc). With groups, output channel o reads input channels
// (o / Og)·Cg .. + Cg and kernel column o mod Og. The zeros of the dilated input
// cost stride^2 times the useful multiply-adds: a reasonable schedule for DCGAN's small layers,
// not a fast one (a sub-pixel decomposition into stride^2 convolutions would avoid it).
#include "kiln/topi/conv2d_transpose.h"

#include "conv2d_common.h"
#include "kiln/topi/auto_schedule.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using autotune::Config;
using detail::ci;

namespace {
constexpr const char* kOp = "conv2d_transpose_nchw";
}  // namespace

std::vector<int64_t> conv2d_transpose_nchw_shape(const std::vector<int64_t>& d,
                                                 const std::vector<int64_t>& k,
                                                 const Conv2DParams& p, int64_t oph, int64_t opw) {
  check_conv_params(p, kOp);
  KILN_USER_CHECK(d.size() == 4 && k.size() == 4)
      << kOp << ": expected data [N, C, H, W] and kernel [C, O, KH, KW], got data " << shape_str(d)
      << " and kernel " << shape_str(k);
  KILN_USER_CHECK(k[0] == d[1]) << kOp << ": kernel " << shape_str(k) << " has " << k[0]
                                << " input channels, data " << shape_str(d) << " has " << d[1];
  KILN_USER_CHECK(d[1] % p.groups == 0)
      << kOp << ": " << d[1] << " input channels do not split into " << p.groups << " groups";
  KILN_USER_CHECK(oph >= 0 && opw >= 0 && (oph < p.stride_h || oph < p.dilation_h) &&
                  (opw < p.stride_w || opw < p.dilation_w))
      << kOp << ": output_padding (" << oph << ", " << opw
      << ") must be non-negative and smaller than the stride or the dilation (" << p.str() << ")";
  int64_t oh = (d[2] - 1) * p.stride_h - p.padding.top - p.padding.bottom +
               p.dilation_h * (k[2] - 1) + oph + 1;
  int64_t ow = (d[3] - 1) * p.stride_w - p.padding.left - p.padding.right +
               p.dilation_w * (k[3] - 1) + opw + 1;
  KILN_USER_CHECK(oh > 0 && ow > 0)
      << kOp << ": the output would be empty (" << oh << "x" << ow << ") for data " << shape_str(d)
      << ", kernel " << shape_str(k) << ", padding " << p.padding.str();
  return {d[0], k[1] * p.groups, oh, ow};
}

te::Tensor conv2d_transpose_nchw(const te::Tensor& data, const te::Tensor& kernel,
                                 const Conv2DParams& p, int64_t oph, int64_t opw,
                                 const std::string& name) {
  std::vector<int64_t> ds = static_shape(data, kOp), ks = static_shape(kernel, kOp);
  std::vector<int64_t> os = conv2d_transpose_nchw_shape(ds, ks, p, oph, opw);
  const int64_t KH = ks[2], KW = ks[3];
  const int64_t bt = p.dilation_h * (KH - 1) - p.padding.top;
  const int64_t bl = p.dilation_w * (KW - 1) - p.padding.left;
  const int64_t sh = p.stride_h, sw = p.stride_w, H = ds[2], W = ds[3];
  std::vector<int64_t> dps = {ds[0], ds[1], os[2] + p.dilation_h * (KH - 1),
                              os[3] + p.dilation_w * (KW - 1)};
  te::Tensor dpad = te::compute(
      detail::to_exprs(dps),
      [&](Var n, Var c, Var yy, Var xx) {
        Expr y = yy - ci(bt), x = xx - ci(bl);
        Expr cond =
            y >= ci(0) && x >= ci(0) && y < ci((H - 1) * sh + 1) && x < ci((W - 1) * sw + 1);
        if (sh > 1) cond = cond && floormod(y, ci(sh)) == ci(0);
        if (sw > 1) cond = cond && floormod(x, ci(sw)) == ci(0);
        Expr iy = sh > 1 ? floordiv(y, ci(sh)) : y, ix = sw > 1 ? floordiv(x, ci(sw)) : x;
        return if_then_else(cond, data(n, c, iy, ix), make_zero(data->dtype));
      },
      name + "_dilate_pad", detail::tag_of(tag::kInjective, "dilate_pad"));
  // Output channel o of group g = o / Og reads the group's input channels g·Cg + rc and
  // kernel column o mod Og.
  const int64_t Cg = ds[1] / p.groups, Og = ks[1];
  te::IterVar rc = te::reduce_axis({0, static_cast<int32_t>(Cg)}, "rc");
  te::IterVar kh = te::reduce_axis({0, static_cast<int32_t>(KH)}, "kh");
  te::IterVar kw = te::reduce_axis({0, static_cast<int32_t>(KW)}, "kw");
  return te::compute(
      detail::to_exprs(os),
      [&](Var n, Var o, Var y, Var x) {
        Expr c = p.groups == 1 ? Expr(rc->var) : floordiv(o, ci(Og)) * ci(Cg) + rc->var;
        Expr oo = p.groups == 1 ? Expr(o) : floormod(o, ci(Og));
        return te::sum(dpad(n, c, y + kh->var * ci(p.dilation_h), x + kw->var * ci(p.dilation_w)) *
                           kernel(c, oo, ci(KH - 1) - kh->var, ci(KW - 1) - kw->var),
                       {rc, kh, kw});
      },
      name, kOp);
}

void schedule_conv2d_transpose_nchw(Config& cfg, te::Schedule& s, const te::Tensor& out,
                                    const Target& target) {
  detail::schedule_nchw_rows(cfg, s, out, kOp, target);
}

te::Schedule schedule_conv2d_transpose_nchw(const std::vector<te::Tensor>& outs,
                                            const Target& target) {
  KILN_USER_CHECK(!outs.empty()) << "schedule_conv2d_transpose_nchw: no outputs";
  KILN_USER_CHECK(find_tagged({outs[0]}, kOp).defined())
      << "schedule_conv2d_transpose_nchw: no " << kOp << " stage feeds output '" << outs[0].name()
      << "'";
  // The rule-based scheduler measured 3-10x faster than the row schedule above (which stays
  // as the tunable template); docs/auto-schedule.md.
  return auto_schedule(outs, target);
}

autotune::Template conv2d_transpose_nchw_template(const Conv2DTransposeWorkload& wl,
                                                  const Target& target) {
  return {
      kOp, "1", [wl, target](Config& cfg) {
        const Conv2DWorkload& w = wl.conv;
        const DataType f32 = DataType::Float(32);
        te::Tensor data = te::placeholder(detail::to_exprs(w.data_shape()), f32, "data");
        te::Tensor kernel = te::placeholder(
            detail::to_exprs({w.in_channel, w.out_channel, w.kernel_h, w.kernel_w}), f32, "kernel");
        te::Tensor out =
            conv2d_transpose_nchw(data, kernel, w.params, wl.output_padding_h, wl.output_padding_w);
        te::Schedule s = te::create_schedule({out});
        schedule_conv2d_transpose_nchw(cfg, s, out, target);
        return autotune::Instance{s, {data, kernel, out}, cfg, {false, true, false}};
      }};
}

}  // namespace kiln::topi
