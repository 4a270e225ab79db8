// Tuning tasks of a graph and the lookup of tuned configs (tuning.h). A task's workload string
// is the logical workload (Conv2DWorkload::str, or M/N/K for dense), independent of the block
// sizes a config picks, so the same key names the workload before and after layout alteration.

#include "kiln/graph/tuning.h"

#include <map>

#include "kiln/graph/transform.h"
#include "kiln/topi/conv2d_winograd.h"
#include "kiln/topi/depthwise_conv2d.h"
#include "kiln/topi/lstm.h"
#include "op_attrs.h"

namespace kiln::graph {

autotune::Task conv2d_task(const topi::Conv2DWorkload& wl, const Target& target,
                           topi::ChannelBlocks blocks) {
  return autotune::Task::make(topi::conv2d_nchwc_template(wl, {}, target, blocks), target,
                              wl.str());
}

autotune::Task depthwise_conv2d_task(const topi::Conv2DWorkload& wl, const Target& target,
                                     topi::ChannelBlocks blocks) {
  return autotune::Task::make(topi::depthwise_conv2d_nchwc_template(wl, target, false, blocks),
                              target, "depthwise " + wl.str());
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

autotune::Task lstm_cell_task(int64_t batch, int64_t hidden, const Target& target) {
  return autotune::Task::make(
      topi::lstm_cell_onnx_template({batch, 1, hidden}, target), target,
      "lstm_cell B" + std::to_string(batch) + " H" + std::to_string(hidden));
}

std::vector<TuningTask> extract_tuning_tasks(const Graph& input, const Target& target) {
  Graph g = optimize(input, 1, target);
  std::vector<TuningTask> tasks;
  std::map<std::string, size_t> index;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_op() && n.op == "lstm_cell" && g.node(n.inputs[3].node).is_constant() &&
        g.type_of(n.inputs[1]).dtype == DataType::Float(32)) {
      // The recurrent product and gate math of an LSTM step (alter_op_layout packs R for it).
      const TensorType& ht = g.type_of(n.inputs[1]);
      autotune::Task task = lstm_cell_task(ht.shape[0], ht.shape[1], target);
      auto [it, fresh] = index.emplace(task.key(), tasks.size());
      if (fresh) tasks.push_back(TuningTask{std::move(task), "lstm_cell", {}});
      tasks[it->second].nodes.push_back(n.name.empty() ? "%" + std::to_string(i) : n.name);
      continue;
    }
    if (!n.is_op() || (n.op != "conv2d" && n.op != "dense")) continue;
    if (!g.node(n.inputs[1].node).is_constant()) continue;
    const TensorType& xt = g.type_of(n.inputs[0]);
    const TensorType& wt = g.type_of(n.inputs[1]);
    if (xt.dtype != DataType::Float(32)) continue;
    std::optional<autotune::Task> task, second;
    std::string op, second_op;
    try {
      if (n.op == "dense") {
        if (xt.shape.size() != 2) continue;
        task = dense_task(topi::DenseWorkload{xt.shape[0], wt.shape[0], xt.shape[1]}, target);
        op = "dense";
      } else {
        topi::Conv2DWorkload wl{
            xt.shape[0], xt.shape[1], xt.shape[2], xt.shape[3],
            wt.shape[0], wt.shape[2], wt.shape[3], detail::conv_params(n.attrs)};
        const bool dw = wl.params.groups > 1 && wl.params.groups == wl.in_channel &&
                        wl.out_channel == wl.in_channel;
        if (wl.params.groups != 1 && !dw) continue;
        if (dw) {
          task = depthwise_conv2d_task(wl, target);
          op = "depthwise_conv2d";
        } else if (topi::prefer_winograd(wl, target)) {
          task = conv2d_winograd_task(wl, target);
          op = "conv2d_winograd";
          second = conv2d_task(wl, target);
          second_op = "conv2d";
        } else {
          task = conv2d_task(wl, target);
          op = "conv2d";
          if (topi::winograd_candidate(wl)) {
            second = conv2d_winograd_task(wl, target);
            second_op = "conv2d_winograd";
          }
        }
      }
    } catch (const Error&) {
      continue;  // a workload the templates do not cover is compiled with its NCHW schedule
    }
    std::string where = n.name.empty() ? "%" + std::to_string(i) : n.name;
    auto add = [&](autotune::Task&& t, const std::string& kind) {
      auto [it, fresh] = index.emplace(t.key(), tasks.size());
      if (fresh) tasks.push_back(TuningTask{std::move(t), kind, {}});
      tasks[it->second].nodes.push_back(where);
    };
    add(std::move(*task), op);
    if (second) add(std::move(*second), second_op);
  }
  return tasks;
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

}  // namespace kiln::graph
