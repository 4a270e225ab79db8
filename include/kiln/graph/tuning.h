/// \file tuning.h
/// \brief The graph compiler's side of auto-tuning: the task of one workload (what the
/// strategies' `task` hooks and layout hooks call, so the workload key is built in one place), and
/// the configs a tuning log gives the workloads when a model is compiled.
///
///   graph::BuildOptions bo;
///   bo.tuning_records = autotune::load_records("model.jsonl").records;
///   graph::CompiledModule m = graph::build_module(g, target, bo);  // m.tuning_report
///
/// Whole-model tuning -- extracting a model's tasks (tuning/tasks.h), the in-network check
/// (tuning/network_check.h), the tools' log writing -- is the `tuning` layer above graph: it
/// compiles models, and the graph layer must not depend on it. These task functions stay here
/// because the strategies (src/graph/strategy/) call them, and a layer below cannot call up.
///
/// Workloads are keyed by their logical NCHW shapes and attributes, so the tuned config's
/// schedule applies before and after layout alteration. The channel blocks stay the default ones
/// (see conv2d_task). Grouped convolutions (not depthwise) yield conv2d_grouped_nchwc tasks
/// (conv2d_grouped_task).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/autotune/record.h"
#include "kiln/autotune/space.h"
#include "kiln/autotune/task.h"
#include "kiln/graph/graph.h"
#include "kiln/target/target.h"
#include "kiln/topi/batch_matmul.h"
#include "kiln/topi/conv2d.h"
#include "kiln/topi/dense.h"

namespace kiln::graph {

/// The task of one workload: the tunable implementations' task functions (strategy/cpu.cc) and
/// the layout hooks that record it on the nodes they make call these, so the keys agree. In a graph
/// the channel blocks are the default ones (kDefault: tuned layers keep the layout their untuned
/// neighbours use, so tuning adds no layout transforms); kTuned lets the config choose them too (a
/// layer tuned alone, as in kiln-bench-tuners). Both spaces share the key: a record made in the
/// larger space applies when its blocks are the default ones.
autotune::Task conv2d_task(const topi::Conv2DWorkload& wl, const Target& target,
                           topi::ChannelBlocks blocks = topi::ChannelBlocks::kDefault);
autotune::Task depthwise_conv2d_task(const topi::Conv2DWorkload& wl, const Target& target,
                                     topi::ChannelBlocks blocks = topi::ChannelBlocks::kDefault);
/// Winograd F(m x m, 3 x 3) for a 3x3 stride-1 workload (topi/conv2d_winograd.h), default
/// channel blocks; its key differs from conv2d_task's (another template), so each algorithm
/// keeps its own records.
autotune::Task conv2d_winograd_task(const topi::Conv2DWorkload& wl, const Target& target);
/// A grouped convolution (1 < groups, not depthwise; topi/conv2d_grouped.h): its channel blocks
/// are pinned to the default ones, the schedule knobs are conv2d_nchwc's.
autotune::Task conv2d_grouped_task(const topi::Conv2DWorkload& wl, const Target& target);
autotune::Task dense_task(const topi::DenseWorkload& wl, const Target& target);
/// A batched product (topi::batch_matmul_template; attention's Q·Kᵀ and P·V).
autotune::Task batch_matmul_task(const topi::BatchMatmulWorkload& wl, const Target& target);
/// The ONNX-form LSTM cell (topi::lstm_cell_onnx_template) of batch B and hidden size H.
autotune::Task lstm_cell_task(int64_t batch, int64_t hidden, const Target& target);

struct OpCall;
/// The rule-based scheduler's task for an op node without a template (topi/auto_schedule.h;
/// the implementation opaque.generic): the node's compute on placeholders of its input types,
/// scheduled by auto_schedule with the config's knobs (tile_x, tile_y, tile_k, unroll_k per
/// reduction). Template "auto_schedule"; the workload is the op, its attributes and its input
/// types, which determine the compute and so the knobs.
autotune::Task generic_task(const OpCall& call);

/// Looks up tuned configs for build_module and reports what it used.
class TunedConfigs {
 public:
  TunedConfigs() = default;
  /// `threads`: the thread count the records must have been measured with.
  explicit TunedConfigs(std::vector<autotune::Record> records, int threads = 1)
      : records_(std::move(records)), threads_(threads) {}

  /// True when there are records to look in.
  bool empty() const { return records_.empty(); }
  /// The best logged config of `task`, or nothing (use the fallback). The first lookup of each
  /// workload is noted for report(); later ones return the same answer from a cache.
  std::optional<autotune::Config> lookup(const autotune::Task& task);
  /// `task`'s best logged record (autotune::best_record); not noted for report() (it compares
  /// algorithms before one is looked up).
  autotune::BestRecord best(const autotune::Task& task,
                            autotune::Protocol protocol = autotune::Protocol::kPreferNetwork) const;
  /// One line per looked-up workload: "tuned conv2d_nchwc(...): used 40 records (3 failed)" or
  /// "default conv2d_nchwc(...): no records" — and a first summary line.
  std::vector<std::string> report() const;

 private:
  std::vector<autotune::Record> records_;
  int threads_ = 1;
  std::map<std::string, std::optional<autotune::Config>> cache_;
  std::vector<std::string> lines_;
  int tuned_ = 0, fallback_ = 0;
};

}  // namespace kiln::graph
