// Task extraction (tuning/tasks.h): the graph is optimized at opt_level 1, then every op node's
// strategy choices are walked and each tunable implementation's task hook builds the node's task;
// tasks with the same workload key are merged and list every node that shares them.

#include "kiln/tuning/tasks.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>

#include "kiln/graph/strategy.h"
#include "kiln/graph/transform.h"
#include "kiln/support/error.h"

namespace kiln::tuning {

using graph::Graph;

std::vector<TuningTask> extract_tuning_tasks(const Graph& input, const Target& target) {
  Graph g = graph::optimize(input, 1, target);
  std::vector<TuningTask> tasks;
  std::map<std::string, size_t> index;
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (!g.node(i).is_op()) continue;
    const graph::OpCall call{g, i, target};
    const std::string where = g.node(i).name.empty() ? "%" + std::to_string(i) : g.node(i).name;
    // Every tunable implementation the strategy offers, the one the compiler picks untuned
    // first.
    for (const graph::Choice& c : graph::strategy_choices(call)) {
      const graph::Implementation& impl = graph::implementation(c.impl);
      if (!impl.task) continue;
      std::optional<autotune::Task> task;
      try {
        task = impl.task(call);
      } catch (const Error&) {
        continue;  // a workload the template does not cover
      }
      auto [it, fresh] = index.emplace(task->key(), tasks.size());
      if (fresh) tasks.push_back(TuningTask{std::move(*task), impl.tuning_label, {}});
      tasks[it->second].nodes.push_back(where);
    }
  }
  return tasks;
}

std::vector<double> budget_weights(const std::vector<TuningTask>& tasks,
                                   const std::vector<size_t>& selected) {
  std::vector<double> w;
  for (size_t i : selected) {
    KILN_ICHECK(i < tasks.size()) << "budget_weights: no task " << i;
    w.push_back(std::max(tasks[i].task.flops, 1.0) * static_cast<double>(tasks[i].nodes.size()));
  }
  if (w.empty()) return w;
  const double floor =
      0.25 * std::accumulate(w.begin(), w.end(), 0.0) / static_cast<double>(w.size());
  for (double& x : w) x = std::max(x, floor);
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w) x /= sum;
  return w;
}

}  // namespace kiln::tuning
