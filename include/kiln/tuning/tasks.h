/// \file tasks.h
/// \brief Whole-model tuning, step one: the tunable workloads (tasks) of a model.
///
///   std::vector<tuning::TuningTask> tasks = tuning::extract_tuning_tasks(g, target);
///   for (auto& t : tasks) autotune::tune(t.task, *autotune::make_tuner("xgb", t.task), opt);
///   ...
///   graph::BuildOptions bo;
///   bo.tuning_records = autotune::load_records("model.jsonl").records;
///   graph::CompiledModule m = graph::build_module(g, target, bo);  // m.tuning_report
///
/// The `tuning` layer sits above `graph` (DESIGN.md): it runs the graph passes and compiles whole
/// models (network_check.h), while the graph layer knows nothing of it. What stays in graph is
/// what the compiler itself needs: the task functions that build one workload's task
/// (graph/tuning.h: conv2d_task, dense_task, …, called by the strategies' `task` hooks, so the
/// workload key is built in one place) and the lookup of tuned configs during a build
/// (graph::TunedConfigs).
///
/// A task is the tuning task of a tunable implementation (graph/strategy.h,
/// Implementation::task) that a node's strategy offers: today the CPU templates conv2d_nchwc
/// (groups 1), Winograd, depthwise_conv2d_nchwc (multiplier 1), conv2d_grouped_nchwc,
/// dense_packed, batch_matmul and the packed LSTM cell, for the workload of a node with constant
/// weights after the graph passes (batch-norm folding included). Workloads are keyed by their
/// logical NCHW shapes and attributes, so the tuned config's schedule applies before and after
/// layout alteration; the channel blocks stay the default ones (graph::conv2d_task).
#pragma once

#include <string>
#include <vector>

#include "kiln/autotune/task.h"
#include "kiln/graph/graph.h"
#include "kiln/target/target.h"

namespace kiln::tuning {

/// A tunable workload of a model.
struct TuningTask {
  autotune::Task task;
  std::string op;  ///< the implementation's tuning label: "conv2d", "conv2d_winograd", "dense", …
  std::vector<std::string> nodes;  ///< the graph nodes with this workload (names or "%i")
};

/// The unique tunable workloads of `g` (typed or not), in graph order: the graph is optimized
/// at opt_level 1 first (so folded batch norms and constant weights are what is tuned). Every
/// tunable implementation a node's strategy offers yields a task, the one the compiler would
/// pick untuned first: a 3x3 stride-1 convolution that Winograd could compute yields two (op
/// "conv2d" and "conv2d_winograd"); compiling with a log that has records of both uses the
/// faster.
std::vector<TuningTask> extract_tuning_tasks(const graph::Graph& g, const Target& target);

/// How a whole-model time budget (`kiln tune --minutes`) is shared: task i of `selected` is given
/// weight[i] / (the sum of the weights of the tasks not yet tuned) of the time left when it starts,
/// so time a task leaves unused goes to the ones after it. A task's weight is its share of the
/// model's arithmetic (flops × the nodes computing it), at least a quarter of the mean weight so
/// that small tasks are still tuned: the convolutions that take most of the model's time get most
/// of the tuning time (the first-order form of Ansor's task scheduler). Weights sum to 1.
std::vector<double> budget_weights(const std::vector<TuningTask>& tasks,
                                   const std::vector<size_t>& selected);

}  // namespace kiln::tuning
