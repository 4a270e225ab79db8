// The layout hook of grouped convolutions on CPUs (conv2d_grouped_nchwc.cpu): a conv2d node with
// 1 < groups that is not depthwise, float32 NCHW data and constant weights becomes
// conv2d_grouped_nchwc on NCHW<ic>c data, its weights packed here (in C++, so the pass compiles
// nothing) into [O/oc, R, KH, KW, ic, oc] by topi::pack_grouped_conv2d_weight, its output
// NCHW<oc>c. The blocks are topi::choose_grouped_conv2d_blocks's (the template's pinned
// tile_ic / tile_oc): the neighbours' lanes-wide blocks where they waste no multiply-add, so the
// 1x1 convolutions around a ResNeXt or RegNet block pass their blocked tensors straight through.
// The hook records the implementation and its tuning task on the node it emits.
#include "../layout_util.h"
#include "../op_attrs.h"
#include "builtin.h"
#include "kiln/graph/tuning.h"
#include "kiln/support/error.h"
#include "kiln/topi/conv2d_grouped.h"

namespace kiln::graph {

bool alter_conv2d_grouped(LayoutRewriter& rw) {
  const OpCall& call = rw.call();
  std::optional<topi::Conv2DWorkload> wl = conv2d_workload(call);
  if (!wl || wl->params.groups <= 1 || depthwise_multiplier(*wl) > 0) return false;
  try {
    const topi::Conv2DWorkload w = *wl;
    const Target target = call.target;
    autotune::Config cfg = rw.config([&] { return conv2d_grouped_task(w, target); });
    const topi::GroupedConv2DBlocks b = topi::define_conv2d_grouped_nchwc_knobs(cfg, w, target);
    if (b.ic_bn < 8 || b.oc_bn < 8) return false;  // too narrow for the vector micro-kernel
    const Node& n = call.node();
    Node r;
    r.op = "conv2d_grouped_nchwc";
    r.name = n.name;
    r.attrs.set("strides", n.attrs.get_ints("strides"));
    r.attrs.set("padding", n.attrs.get_ints("padding"));
    r.attrs.set("dilation", n.attrs.get_ints("dilation"));
    r.attrs.set("groups", w.params.groups);
    const std::string wname = call.graph.node(n.inputs[1].node).name;
    r.inputs = {
        rw.input(0, detail::blocked_layout(b.ic_bn)),
        rw.add_constant(wname + "_packed", topi::pack_grouped_conv2d_weight(*call.constant(1), b))};
    r.outputs = {detail::blocked_type(n.outputs[0], b.oc_bn)};
    r.impl = ImplChoice{"conv2d_grouped_nchwc.cpu",
                        [w, target] { return conv2d_grouped_task(w, target); }};
    rw.emit(std::move(r), detail::blocked_layout(b.oc_bn));
  } catch (const Error&) {
    return false;  // a workload the blocked template does not cover
  }
  return true;
}

}  // namespace kiln::graph
