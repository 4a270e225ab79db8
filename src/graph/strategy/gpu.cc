// GPU strategies (targets with the key "gpu": cuda, opencl): the templates of
// topi/schedule_gpu.h where they apply, the one-thread-per-element fallback otherwise.
#include "../op_attrs.h"
#include "builtin.h"
#include "kiln/topi/schedule_gpu.h"

namespace kiln::graph {
namespace {

using GpuTemplate = te::Schedule (*)(const std::vector<te::Tensor>&, const Target&);

/// An implementation running GPU template `schedule`, or the fallback for a group the template
/// refuses (another epilogue shape, two outputs).
Implementation template_or_fallback(const std::string& name, GpuTemplate schedule) {
  return {name,
          [schedule](const ScheduleInput& in) {
            try {
              return schedule(in.outs, in.target);
            } catch (const Error&) {
              return topi::schedule_gpu_fallback(in.outs, in.target);
            }
          },
          nullptr, nullptr, ""};
}

/// Op `from` on a GPU: the node is rewritten into op `to` (same inputs, attributes and
/// outputs, te computes), which the fallback runs.
void register_rewrite_to(const std::string& from, const std::string& to) {
  Implementation impl = template_or_fallback(to + ".gpu", topi::schedule_gpu_fallback);
  impl.alter_layout = [to](LayoutRewriter& rw) {
    const Node& n = rw.call().node();
    Node r;
    r.op = to;
    r.name = n.name;
    r.attrs = n.attrs;
    r.inputs = {rw.input(0, "")};
    r.outputs = n.outputs;
    rw.emit(std::move(r), "");
    return true;
  };
  register_implementation(impl);
  register_strategy(from, "gpu", [to](const OpCall&) {
    return std::vector<Choice>{Choice{to + ".gpu", 10, /*rewrite=*/true}};
  });
}

}  // namespace

void register_gpu_strategies() {
  // Dense: shared-memory tiles when M, N and K are multiples of the tile (every thread of a
  // block must reach every barrier); a group the template cannot take falls back.
  register_implementation(template_or_fallback("dense_tiled.gpu", topi::schedule_dense_gpu));
  register_strategy("dense", "gpu", [](const OpCall& c) {
    std::vector<Choice> r;
    const TensorType& x = c.input_type(0);
    const TensorType& w = c.input_type(1);
    const int64_t t = topi::kGpuDenseTile;
    if (x.shape.size() == 2 && w.shape.size() == 2 && x.shape[0] % t == 0 && w.shape[0] % t == 0 &&
        x.shape[1] % t == 0)
      r.push_back(Choice{"dense_tiled.gpu", 10});
    r.push_back(Choice{"fallback.gpu", 0});
    return r;
  });
  // TopK: the CPU kernel calls the runtime's sort, which a GPU kernel cannot; the layout pass
  // rewrites the node into topk_ranks (rank counting, te computes), which the fallback runs.
  register_rewrite_to("topk", "topk_ranks");
  // CumSum: the CPU kernel is a scan whose loops run on the CPU's thread pool; the node becomes
  // cumsum_sums (each element sums its part of the axis), which the fallback runs.
  register_rewrite_to("cumsum", "cumsum_sums");
  // Conv2d (NCHW, groups = 1): shared-memory tiles of the padded input and the weights, a
  // register tile per thread; tile sizes are divisors of the output's, so any static shape
  // fits. A group the template cannot take (another epilogue shape, two outputs) falls back.
  register_implementation(template_or_fallback("conv2d_tiled.gpu", topi::schedule_conv2d_gpu));
  register_strategy("conv2d", "gpu", [](const OpCall& c) {
    std::vector<Choice> r;
    const TensorType& x = c.input_type(0);
    const TensorType& w = c.input_type(1);
    if (x.dtype == DataType::Float(32) && x.shape.size() == 4 && w.shape.size() == 4 &&
        detail::conv_params(c.node().attrs).groups == 1)
      r.push_back(Choice{"conv2d_tiled.gpu", 10});
    r.push_back(Choice{"fallback.gpu", 0});
    return r;
  });
}

}  // namespace kiln::graph
