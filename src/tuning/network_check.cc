// Timing tuned configs inside the compiled model (tuning/network_check.h): the candidates of
// each workload are chosen from the log, the model is compiled once per variant (variant k gives
// every workload its k-th candidate, forced through fake records), the variants are profiled in
// interleaved rounds, and each kernel's time is attributed to its workload's candidate.
#include "kiln/tuning/network_check.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include "kiln/graph/build_module.h"
#include "kiln/support/error.h"

namespace kiln::tuning {

using graph::BuildOptions;
using graph::CompiledModule;
using graph::Graph;

namespace {

using autotune::Config;
using autotune::Record;

/// A candidate of a workload: a choice and its label ("tuned", "default", "2nd", ...).
struct Candidate {
  Choice choice;
  std::string label;
};

const char* ordinal(size_t k) {
  static const char* names[] = {"tuned", "2nd", "3rd", "4th", "5th", "6th", "7th", "8th"};
  return k < 8 ? names[k] : "later";
}

/// The candidates of `slot`, at most `limit`: the tuner's best config of the faster algorithm,
/// the default (of the algorithm the compiler picks untuned), the other algorithm's best, then
/// runners-up, alternating between the algorithms.
std::vector<Candidate> choose_candidates(const Workload& slot, const std::vector<TuningTask>& tasks,
                                         const std::vector<Record>& records, int limit) {
  std::vector<Candidate> candidates;
  struct Ranked {
    size_t task;
    std::vector<autotune::RankedConfig> configs;
  };
  std::vector<Ranked> by_task;
  for (size_t t : slot.tasks)
    by_task.push_back(
        {t, autotune::rank_configs(records, tasks[t].task, autotune::Protocol::kIsolated)});
  // The faster algorithm first (a task without records last).
  std::stable_sort(by_task.begin(), by_task.end(), [](const Ranked& a, const Ranked& b) {
    if (a.configs.empty() != b.configs.empty()) return b.configs.empty();
    return !a.configs.empty() && a.configs[0].median_s < b.configs[0].median_s;
  });
  const bool pair = slot.tasks.size() > 1;
  auto label = [&](size_t t, const std::string& role) {
    return pair ? tasks[t].task.name + " " + role : role;
  };
  auto add = [&](size_t t, const Config& c, const std::string& role) {
    for (Candidate& have : candidates) {
      if (have.choice.task != t || have.choice.config.index() != c.index()) continue;
      if (role == "default") have.label += " (the default)";
      return;
    }
    if (static_cast<int>(candidates.size()) < limit)
      candidates.push_back(Candidate{Choice{t, c, {}}, label(t, role)});
  };
  if (!by_task[0].configs.empty()) add(by_task[0].task, by_task[0].configs[0].config, "tuned");
  const size_t first = slot.tasks[0];
  add(first, tasks[first].task.default_config(), "default");
  for (size_t k = 0; static_cast<int>(candidates.size()) < limit; ++k) {
    bool any = false;
    for (const Ranked& r : by_task) {
      if (k >= r.configs.size()) continue;
      any = true;
      add(r.task, r.configs[k].config, ordinal(k));
    }
    if (!any) break;
  }
  return candidates;
}

/// The entry of `node` in `by_node`, or of the name it was derived from: layout alteration
/// names the nodes it adds after the node they compute ("/fc/Gemm" -> "/fc/Gemm_padded" ->
/// "/fc/Gemm_padded_matmul"), so suffixes after '_' are dropped until a name matches.
std::map<std::string, size_t>::const_iterator find_node(
    const std::map<std::string, size_t>& by_node, std::string node) {
  for (;;) {
    auto it = by_node.find(node);
    if (it != by_node.end()) return it;
    const size_t cut = node.rfind('_');
    if (cut == std::string::npos || cut == 0) return by_node.end();
    node.resize(cut);
  }
}

}  // namespace

std::vector<Workload> group_workloads(const std::vector<TuningTask>& tasks) {
  std::vector<Workload> workloads;
  std::map<std::string, size_t> index;
  for (size_t t = 0; t < tasks.size(); ++t) {
    auto [it, fresh] = index.emplace(tasks[t].task.workload, workloads.size());
    if (fresh) workloads.push_back(Workload{tasks[t].task.workload, {}});
    workloads[it->second].tasks.push_back(t);
  }
  return workloads;
}

void append_network_records(const autotune::Task& task, const Choice& choice,
                            std::vector<Record>& out) {
  for (double ms : choice.per_round_ms) {
    autotune::MeasureResult r;
    r.mean_s = ms * 1e-3;
    r.runs = {r.mean_s};
    Record rec = Record::make(task, choice.config, r);
    rec.protocol = Record::kNetworkProtocol;
    out.push_back(std::move(rec));
  }
}

int time_in_network(const Graph& g, const Target& target, const std::vector<TuningTask>& tasks,
                    const std::vector<Workload>& workloads,
                    std::vector<std::vector<Choice>>& choices, const NetworkCheckOptions& opt) {
  KILN_USER_CHECK(opt.rounds >= 1 && opt.runs >= 1 && static_cast<bool>(opt.set_inputs) &&
                  choices.size() == workloads.size())
      << "time_in_network: needs 1 round, 1 run, set_inputs and choices for every workload";
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  std::map<std::string, size_t> workload_of_node;
  size_t variants = 1;
  for (size_t w = 0; w < workloads.size(); ++w) {
    KILN_USER_CHECK(!choices[w].empty())
        << "time_in_network: workload " << workloads[w].key << " has no choice";
    variants = std::max(variants, choices[w].size());
    for (size_t t : workloads[w].tasks)
      for (const std::string& n : tasks[t].nodes) workload_of_node[n] = w;
  }

  // One compiled model per variant.
  struct Variant {
    CompiledModule module;
    runtime::GraphExecutor exec;
  };
  std::vector<std::unique_ptr<Variant>> vs;
  for (size_t v = 0; v < variants; ++v) {
    say("compiling variant " + std::to_string(v + 1) + "/" + std::to_string(variants));
    auto var = std::make_unique<Variant>();
    BuildOptions bo;
    bo.tuning_threads = opt.threads;
    for (size_t w = 0; w < workloads.size(); ++w) {
      const Choice& c = choices[w][v % choices[w].size()];
      autotune::MeasureResult fast;
      fast.mean_s = 1e-3;
      bo.tuning_records.push_back(Record::make(tasks[c.task].task, c.config, fast));
      // The other algorithm, slower on paper, so that the compiler picks this one.
      for (size_t t : workloads[w].tasks) {
        if (t == c.task) continue;
        autotune::MeasureResult slow;
        slow.mean_s = 1.0;
        bo.tuning_records.push_back(
            Record::make(tasks[t].task, tasks[t].task.default_config(), slow));
      }
    }
    var->module = build_module(g, target, bo);
    var->exec = runtime::GraphExecutor::create(var->module.graph_json, var->module.lib,
                                               var->module.params, "network check");
    opt.set_inputs(var->exec);
    var->exec.run();  // warm-up
    vs.push_back(std::move(var));
  }

  // Interleaved profiles.
  for (int round = 0; round < opt.rounds; ++round) {
    say("round " + std::to_string(round + 1) + "/" + std::to_string(opt.rounds));
    for (size_t v = 0; v < vs.size(); ++v) {
      Variant& var = *vs[v];
      std::vector<runtime::NodeTime> times = var.exec.profile(opt.runs);
      // A workload's time per node: the kernels computing a node of it (a dense padded to
      // whole panels is two: the product and the slice) summed, over the nodes.
      std::vector<double> sum(workloads.size(), 0);
      std::vector<std::set<std::string>> nodes(workloads.size());
      for (const runtime::NodeTime& n : times) {
        auto m = var.module.kernel_masters.find(n.node);
        if (m == var.module.kernel_masters.end()) continue;
        auto w = find_node(workload_of_node, m->second);
        if (w == workload_of_node.end()) continue;
        sum[w->second] += n.ms;
        nodes[w->second].insert(w->first);
      }
      for (size_t w = 0; w < workloads.size(); ++w) {
        if (nodes[w].empty() || choices[w].size() < 2) continue;
        choices[w][v % choices[w].size()].per_round_ms.push_back(
            sum[w] / static_cast<double>(nodes[w].size()));
      }
    }
  }
  return static_cast<int>(variants);
}

NetworkCheckResult check_in_network(const Graph& g, const Target& target,
                                    const std::vector<TuningTask>& tasks,
                                    const std::vector<Record>& records,
                                    const NetworkCheckOptions& opt) {
  KILN_USER_CHECK(opt.candidates >= 2 && opt.rounds >= 1 && opt.runs >= 1)
      << "check_in_network: needs at least 2 candidates, 1 round and 1 run (got " << opt.candidates
      << ", " << opt.rounds << ", " << opt.runs << ")";
  KILN_USER_CHECK(static_cast<bool>(opt.set_inputs))
      << "check_in_network: set_inputs must give the model its inputs";
  const auto t0 = std::chrono::steady_clock::now();

  const std::vector<Workload> workloads = group_workloads(tasks);
  std::vector<std::vector<Candidate>> candidates;
  std::vector<std::vector<Choice>> choices;
  for (const Workload& w : workloads) {
    candidates.push_back(choose_candidates(w, tasks, records, opt.candidates));
    choices.emplace_back();
    for (const Candidate& c : candidates.back()) choices.back().push_back(c.choice);
  }
  NetworkCheckResult res;
  res.variants = time_in_network(g, target, tasks, workloads, choices, opt);

  for (size_t w = 0; w < workloads.size(); ++w) {
    if (choices[w].size() < 2 || choices[w][0].per_round_ms.empty()) continue;
    std::string line = workloads[w].key + ":";
    size_t best = 0;
    double best_ms = 0;
    for (size_t k = 0; k < choices[w].size(); ++k) {
      const Choice& c = choices[w][k];
      append_network_records(tasks[c.task].task, c, res.records);
      const double m = c.per_round_ms.empty()
                           ? 0
                           : *std::min_element(c.per_round_ms.begin(), c.per_round_ms.end());
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s %s %.3f ms", k ? "," : "", candidates[w][k].label.c_str(),
                    m);
      line += buf;
      if (k == 0 || m < best_ms) {
        best = k;
        best_ms = m;
      }
    }
    res.lines.push_back(line + " -> " + candidates[w][best].label);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace kiln::tuning
