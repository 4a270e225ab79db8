/// \file network_check.h
/// \brief Timing tuned configs inside the compiled model, after `kiln tune`.
///
/// The tuner times a kernel alone, on arguments rotated through the cache; inside a model the
/// same kernel meets its input fresh from the previous layer, its weights where the rest of
/// the model left them, and its neighbours' code. The two can rank configs differently (in
/// ResNet-18 the tuner's best config for the 7x7x512 conv2d ran 20% slower than the default one
/// inside the model, and Winograd had been ranked ahead of the direct kernel, the reverse of the
/// model). check_in_network settles each workload's choice where it counts:
///
///   1. For every workload it takes a few candidates: the tuner's best config, the default, the
///      runners-up, and for a 3x3 convolution both algorithms (direct and Winograd).
///   2. It compiles the model once per variant: variant k gives every workload its k-th
///      candidate (cycling through shorter lists).
///   3. It profiles the variants in turn, `rounds` times (interleaved, so the machine's slow
///      spells fall on every variant alike), and attributes each kernel's time to its
///      workload's candidate (CompiledModule::kernel_masters).
///   4. Each candidate's time per call in each round becomes a record with
///      Record::kNetworkProtocol; autotune::best_record prefers these when it picks a config,
///      and compares configs by their fastest round: the machine's slow periods (here 0.7-1.3 s
///      each, up to 10 s, a quarter to two thirds of the time) slow some kernels more than others
///      (ResNet-18's direct 7x7x512 conv2d 1.45x, its Winograd 1.1x: a check made in one
///      picked Winograd, 20% slower in the fast state), so many short rounds, the fastest of
///      each candidate counted, rank the candidates in the fast state.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/autotune/record.h"
#include "kiln/graph/graph.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/target/target.h"
#include "kiln/tuning/tasks.h"

namespace kiln::tuning {

struct NetworkCheckOptions {
  int candidates = 4;  ///< configs per workload (and model variants compiled), at least 2
  int rounds = 12;     ///< profiles of each variant, interleaved
  int runs = 4;        ///< model runs per profile
  int threads = 1;     ///< the thread count the tasks' records were tuned with
  /// Gives the model its inputs (required): random values of the inputs' types and shapes.
  std::function<void(runtime::GraphExecutor&)> set_inputs;
  /// Told what is being done ("compiling variant 2/4", "round 3/5").
  std::function<void(const std::string&)> progress;
};

struct NetworkCheckResult {
  /// One per candidate per round (more for a candidate that several variants share): its time
  /// per call inside the model, Record::kNetworkProtocol. For the caller to append to its log.
  std::vector<autotune::Record> records;
  /// Per workload with more than one candidate: each candidate's fastest round in the model
  /// and which one is fastest there.
  std::vector<std::string> lines;
  int variants = 0;
  double seconds = 0;
};

/// The tasks of `tasks` that share a workload string (direct and Winograd of one convolution),
/// in graph order; within one, the task the compiler picks untuned first.
struct Workload {
  std::string key;
  std::vector<size_t> tasks;  ///< indices into the task list
};
std::vector<Workload> group_workloads(const std::vector<TuningTask>& tasks);

/// One way to compute a workload inside the model: one of its tasks and a config of it.
struct Choice {
  size_t task = 0;
  autotune::Config config = autotune::Config::fallback();
  std::vector<double> per_round_ms;  ///< filled by time_in_network: ms per call in each round
};

/// The records of `choice`'s in-network times (one per round, Record::kNetworkProtocol), appended
/// to `out`.
void append_network_records(const autotune::Task& task, const Choice& choice,
                            std::vector<autotune::Record>& out);

/// The mechanism under check_in_network (and tuning/fidelity.h): compiles `g` once per variant,
/// variant k giving workload w its choice `choices[w][k % choices[w].size()]` (forced through
/// fake records), profiles the variants in `opt.rounds` interleaved rounds of `opt.runs` runs,
/// and appends each choice's time per call to its per_round_ms (one entry per variant that used
/// it per round; workloads with one choice are not timed). Returns the number of variants.
int time_in_network(const graph::Graph& g, const Target& target,
                    const std::vector<TuningTask>& tasks, const std::vector<Workload>& workloads,
                    std::vector<std::vector<Choice>>& choices, const NetworkCheckOptions& opt);

/// Times the candidates of every task of `tasks` (extract_tuning_tasks of `g`, their targets
/// carrying opt.threads) inside `g` compiled for `target`, as described above. `records`: the
/// tuning log. Throws kiln::Error when the model does not compile or run.
NetworkCheckResult check_in_network(const graph::Graph& g, const Target& target,
                                    const std::vector<TuningTask>& tasks,
                                    const std::vector<autotune::Record>& records,
                                    const NetworkCheckOptions& opt);

}  // namespace kiln::tuning
