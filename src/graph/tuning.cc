// The task of one workload and the lookup of tuned configs (tuning.h). A task's workload string
// is the logical workload (Conv2DWorkload::str, or M/N/K for dense), independent of the block
// sizes a config picks, so the same key names the workload before and after layout alteration.

#include "kiln/graph/tuning.h"

#include <map>

#include "kiln/graph/op_registry.h"
#include "kiln/graph/strategy.h"
#include "kiln/graph/transform.h"
#include "kiln/topi/auto_schedule.h"
#include "kiln/topi/conv2d_grouped.h"
#include "kiln/topi/conv2d_winograd.h"
#include "kiln/topi/depthwise_conv2d.h"
#include "kiln/topi/lstm.h"

namespace kiln::graph {

autotune::Task conv2d_task(const topi::Conv2DWorkload& wl, const Target& target,
                           topi::ChannelBlocks blocks) {
  return autotune::Task::make(topi::conv2d_nchwc_template(wl, {}, target, blocks), target,
                              wl.str());
}

autotune::Task depthwise_conv2d_task(const topi::Conv2DWorkload& wl, const Target& target,
                                     topi::ChannelBlocks blocks) {
  // With the bias and relu the network fuses: for a memory-bound kernel the epilogue is a
  // visible part of its time (MobileNet-v2: in-network / isolated 1.15-1.56x without it).
  return autotune::Task::make(topi::depthwise_conv2d_nchwc_template(wl, target, true, blocks),
                              target, "depthwise " + wl.str());
}

autotune::Task conv2d_grouped_task(const topi::Conv2DWorkload& wl, const Target& target) {
  return autotune::Task::make(topi::conv2d_grouped_nchwc_template(wl, {}, target), target,
                              wl.str());
}

autotune::Task conv2d_winograd_task(const topi::Conv2DWorkload& wl, const Target& target) {
  return autotune::Task::make(topi::conv2d_winograd_nchwc_template(wl, {}, target), target,
                              wl.str());
}

autotune::Task dense_task(const topi::DenseWorkload& wl, const Target& target) {
  return autotune::Task::make(
      topi::dense_template(wl, target), target,
      "dense M" + std::to_string(wl.M) + " N" + std::to_string(wl.N) + " K" + std::to_string(wl.K));
}

autotune::Task batch_matmul_task(const topi::BatchMatmulWorkload& wl, const Target& target) {
  return autotune::Task::make(topi::batch_matmul_template(wl, target), target,
                              "batch_matmul B" + std::to_string(wl.batch) + " M" +
                                  std::to_string(wl.M) + " N" + std::to_string(wl.N) + " K" +
                                  std::to_string(wl.K) + (wl.transpose_b ? " NT" : ""));
}

autotune::Task lstm_cell_task(int64_t batch, int64_t hidden, const Target& target) {
  return autotune::Task::make(
      topi::lstm_cell_onnx_template({batch, 1, hidden}, target), target,
      "lstm_cell B" + std::to_string(batch) + " H" + std::to_string(hidden));
}

std::optional<autotune::Config> TunedConfigs::lookup(const autotune::Task& task) {
  auto it = cache_.find(task.key());
  if (it != cache_.end()) return it->second;
  autotune::BestRecord b = autotune::best_record(records_, autotune::with_threads(task, threads_));
  std::optional<autotune::Config> r;
  if (b.best) {
    r = b.config;
    ++tuned_;
    lines_.push_back("tuned   " + task.key() + ": " + b.summary());
  } else {
    ++fallback_;
    lines_.push_back("default " + task.key() + ": " + b.summary());
  }
  cache_.emplace(task.key(), r);
  return r;
}

autotune::BestRecord TunedConfigs::best(const autotune::Task& task,
                                        autotune::Protocol protocol) const {
  return autotune::best_record(records_, autotune::with_threads(task, threads_), protocol);
}

std::vector<std::string> TunedConfigs::report() const {
  std::vector<std::string> r{"tuning log: " + std::to_string(tuned_) + " workload(s) tuned, " +
                             std::to_string(fallback_) + " with default configs"};
  r.insert(r.end(), lines_.begin(), lines_.end());
  return r;
}

// --- The rule-based scheduler's task (generic_task) --------------------------------------

autotune::Task generic_task(const OpCall& call) {
  const Node& n = call.node();
  // Only where the rule-based scheduler is the node's only implementation: when a template's
  // layout hook may take the node, that template's task is the one to tune.
  KILN_USER_CHECK(strategy_choices(call).size() == 1)
      << "'" << n.name << "': a template covers this " << n.op << " node";
  std::vector<TensorType> types;
  for (size_t k = 0; k < n.inputs.size(); ++k) types.push_back(call.input_type(k));
  const std::string op = n.op;
  const Attrs attrs = n.attrs;
  const Target target = call.target;
  std::string workload = op + "(" + attrs.str() + ")";
  for (const TensorType& t : types) workload += " " + t.str();
  autotune::Template t{"auto_schedule", "1", [op, attrs, types, target](autotune::Config& cfg) {
                         std::vector<te::Tensor> ins = placeholders_for(types);
                         std::vector<te::Tensor> outs =
                             OpRegistry::global().get(op).compute(ins, attrs, op);
                         te::Schedule s = te::create_schedule(outs);
                         topi::auto_schedule(cfg, s, outs, target);
                         std::vector<te::Tensor> args = ins;
                         args.insert(args.end(), outs.begin(), outs.end());
                         return autotune::Instance{s, args, cfg};
                       }};
  return autotune::Task::make(t, target, workload);
}

}  // namespace kiln::graph
