// Private helpers shared by the convolution schedules (conv2d.cc, conv2d_nchwc.cc,
// depthwise_conv2d.cc, conv2d_transpose.cc): the accumulator stage of a main stage, the
// schedule of a root padding stage, the NCHW row schedule.
#pragma once

#include <algorithm>
#include <functional>

#include "kiln/autotune/space.h"
#include "kiln/autotune/template.h"
#include "kiln/target/target.h"
#include "kiln/te/schedule.h"
#include "kiln/topi/conv2d.h"
#include "kiln/topi/op_pattern.h"
#include "topi_util.h"

namespace kiln::topi::detail {

/// The tag of pad_spatial's stage.
inline std::string pad_tag() { return tag_of(tag::kInjective, "pad"); }

/// True when `t` is a padding stage made by pad_spatial.
inline bool is_pad(const te::Tensor& t) {
  return t.op()->kind == te::OpKind::kCompute && t.op()->tag == pad_tag();
}

/// The accumulator stage of a complex op's main stage `main` whose group output is `out`:
/// `main` itself in local scope when element-wise stages follow it, else a cache_write.
inline te::Tensor accumulator(te::Schedule& s, const te::Tensor& main, const te::Tensor& out) {
  if (main.op().same_as(out.op())) return s.cache_write(main, "local");
  s[main].set_scope("local");
  return main;
}

/// Schedules a root padding stage of a 4-d (NCHW) or 5-d (NCHWc) tensor: the axes up to the
/// row fused and parallel; the innermost axis vectorized when asked (a channel block).
inline void schedule_pad_root(te::Schedule& s, const te::Tensor& pad, bool vectorize_last) {
  te::Stage sp = s[pad];
  auto ax = sp.op_axis();
  te::IterVar f = sp.fuse({ax[0], ax[1], ax[2]});
  sp.parallel(f);
  if (vectorize_last) sp.vectorize(ax.back());
}

/// Vectorizes a channel-block axis of `extent`: split by the lanes (outer part unrolled) when
/// it is a wider multiple of them.
inline void vectorize_block(te::Stage& st, const te::IterVar& iv, int64_t extent, int64_t lanes) {
  if (extent > lanes && extent % lanes == 0) {
    auto [o, i] = st.split(iv, ci(lanes));
    st.unroll(o);
    st.vectorize(i);
  } else {
    st.vectorize(iv);
  }
}

/// Output-channel chunks that one register tile covers: the largest of `want` and its halvings
/// (3 -> 1, 4 -> 2 -> 1) dividing `chunks`.
inline int64_t oc_chunks_per_tile(int64_t want, int64_t chunks) {
  int64_t r = std::max<int64_t>(1, want);
  while (r > 1 && chunks % r != 0) r /= 2;
  return r;
}

/// The input tensors of a compute stage, in first-use order.
inline std::vector<te::Tensor> inputs_of(const te::Tensor& t) { return t.op()->input_tensors(); }

/// `conv` ([N, O/y, OH, OW, y]) followed by the element-wise epilogue `ep` (conv2d_nchwc.cc):
/// `conv` itself when `ep` is empty, else one stage "<name>_epilogue" tagged
/// "elemwise,conv2d_epilogue". User errors name `op` (bias or residual of the wrong shape).
te::Tensor conv_epilogue(const te::Tensor& conv, const EpilogueSpec& ep, const std::string& name,
                         const char* op);

/// The output shape [N, O/y, OH, OW, y] of a blocked convolution of data d [N, C/x, H, W, x] by a
/// packed kernel k [O/y, ·, KH, KW, ·, y]; a user error naming `op` when the kernel does not
/// fit the padded input (the channel checks are the caller's).
std::vector<int64_t> nchwc_output_shape(const std::vector<int64_t>& d,
                                        const std::vector<int64_t>& k, const Conv2DParams& p,
                                        const char* op);

/// The blocked direct convolution's main stage, tagged `tag`, with its spatial padding:
/// out[n, ob, y, x, oi] = Σ over (rco, kh, kw, rci) of pad(data)[n, input_block(ob, rco),
/// y·stride + kh·dilation, x·stride + kw·dilation, rci] · kernel[ob, rco, kh, kw, rci, oi], for
/// data [N, C/x, H, W, x], kernel [O/y, C'/x, KH, KW, x, y] and output shape `os`.
/// conv2d_nchwc reads input block rco; conv2d_grouped_nchwc its group's blocks from an offset.
te::Tensor conv2d_nchwc_main(const te::Tensor& data, const te::Tensor& kernel,
                             const std::vector<int64_t>& os, const Conv2DParams& p,
                             const std::function<ir::Expr(ir::Var ob, ir::Var rco)>& input_block,
                             const std::string& name, const std::string& tag);

/// A template instance of a convolution-like op: placeholders "data" and `kernel_name`
/// (float32, the given shapes), then the epilogue's inputs that `ep` asks for ("bias" [O],
/// "residual" of `out_shape`), then the output of `compute(data, kernel, spec)` scheduled by
/// `schedule(cfg, s, out)`; the instance's args in that order.
autotune::Instance conv_template_instance(
    autotune::Config& cfg, const std::vector<int64_t>& data_shape,
    const std::vector<int64_t>& kernel_shape, const char* kernel_name, int64_t out_channel,
    const std::vector<int64_t>& out_shape, const EpilogueFlags& ep,
    const std::function<te::Tensor(const te::Tensor&, const te::Tensor&, const EpilogueSpec&)>&
        compute,
    const std::function<void(autotune::Config&, te::Schedule&, const te::Tensor&)>& schedule);

/// The reference schedule of an NCHW convolution-like stage tagged `op_tag` feeding `out`
/// (conv2d.cc): output rows parallel over n*oc (knob parallel_rows: n*oc*oh), each row
/// accumulated in a local buffer at the row loop, reduction loops outside the row, the row
/// split by tile_ow and vectorized (knob vectorize); root padding stages parallel.
void schedule_nchw_rows(autotune::Config& cfg, te::Schedule& s, const te::Tensor& out,
                        const char* op_tag, const Target& target);

}  // namespace kiln::topi::detail
