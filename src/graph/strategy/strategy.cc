// Op strategies (strategy.h): the implementation table (name → Implementation), the strategy
// table ((op, target key) → FStrategy), the lookup that turns a node and a target into ordered
// choices, and select_implementations, which records the first choice that needs no layout
// hook on every op node without one. Ops with no strategy for any of the target's keys get the
// implementation of their fusion pattern kind, registered here: topi's injective or reduction
// schedule, or the rule-based scheduler (topi/auto_schedule.h) for out-fusable and opaque ops.
#include "kiln/graph/strategy.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "builtin.h"
#include "kiln/graph/op_registry.h"
#include "kiln/graph/tuning.h"
#include "kiln/support/error.h"
#include "kiln/topi/auto_schedule.h"
#include "kiln/topi/schedule_gpu.h"
#include "kiln/topi/schedule_injective.h"

namespace kiln::graph {

namespace {

struct Tables {
  std::recursive_mutex mu;
  std::map<std::string, Implementation> impls;
  std::map<std::pair<std::string, std::string>, FStrategy> strategies;  // (op, key)
  bool builtins_done = false;
};

Tables& raw_tables() {
  static Tables* t = new Tables;
  return *t;
}

/// The tables with the built-in strategies registered (once, on first use).
Tables& tables() {
  Tables& t = raw_tables();
  std::lock_guard<std::recursive_mutex> lock(t.mu);
  if (!t.builtins_done) {
    t.builtins_done = true;
    register_builtin_strategies();
  }
  return t;
}

/// The default schedule of a group whose master has no template: the rule-based scheduler
/// (topi/auto_schedule.h: inlined producers, tiled and vectorized reductions with a local
/// accumulator, parallel outer tiles), with the knobs of `cfg`. Correct for any compute.
te::Schedule schedule_generic(const std::vector<te::Tensor>& outs, const Target& target,
                              autotune::Config& cfg) {
  return topi::auto_schedule(outs, target, cfg);
}

/// The implementation of an op's pattern kind; on GPUs the fallback for every kind.
const char* pattern_impl(topi::OpPattern p, const Target& target) {
  if (target.has_key("gpu")) return "fallback.gpu";
  if (p <= topi::OpPattern::kInjective) return "injective.generic";
  if (p == topi::OpPattern::kCommReduce) return "reduce.generic";
  return "opaque.generic";
}

}  // namespace

const runtime::NDArray* OpCall::constant(size_t k) const {
  const Node& p = graph.node(node().inputs.at(k).node);
  return p.is_constant() ? &p.value : nullptr;
}

bool OpCall::is_f32_constant(size_t k) const {
  const runtime::NDArray* c = constant(k);
  return c && c->dtype() == DataType::Float(32);
}

bool is_epilogue_shape(const std::vector<int64_t>& master, const std::vector<int64_t>& out) {
  if (out == master) return true;
  // A 2-D master's [M, N] with unit extents added before N: dense → reshape [1, M, N] → ….
  if (master.size() != 2 || out.size() < 2 || out.back() != master[1]) return false;
  std::vector<int64_t> rows;
  for (size_t d = 0; d + 1 < out.size(); ++d)
    if (out[d] != 1) rows.push_back(out[d]);
  return rows.empty() ? master[0] == 1 : rows == std::vector<int64_t>{master[0]};
}

bool ScheduleInput::epilogue_shape() const {
  return is_epilogue_shape(tensor_type(main).shape, tensor_type(outs[0]).shape);
}

te::Schedule schedule_by_pattern(const ScheduleInput& in) {
  if (in.target.has_key("gpu")) return topi::schedule_gpu_fallback(in.outs, in.target);
  topi::OpPattern p = OpRegistry::global().get(in.master.op).pattern;
  if (p <= topi::OpPattern::kInjective) return topi::schedule_injective(in.outs, in.target);
  if (p == topi::OpPattern::kCommReduce) return topi::schedule_reduce(in.outs, in.target);
  // A fresh fallback config: `in.config` may be a template's tuned config (of another space)
  // when the template falls back here.
  autotune::Config cfg = autotune::Config::fallback();
  return schedule_generic(in.outs, in.target, cfg);
}

void register_implementation(Implementation impl) {
  KILN_ICHECK(!impl.name.empty()) << "register_implementation: an implementation needs a name";
  KILN_ICHECK(static_cast<bool>(impl.schedule))
      << "register_implementation: '" << impl.name << "' has no schedule";
  if (impl.tuning_label.empty()) impl.tuning_label = impl.name;
  Tables& t = tables();  // the built-ins first, so a name they use is refused
  std::lock_guard<std::recursive_mutex> lock(t.mu);
  KILN_ICHECK(!t.impls.count(impl.name))
      << "register_implementation: '" << impl.name << "' is registered already";
  std::string name = impl.name;
  t.impls.emplace(name, std::move(impl));
}

const Implementation& implementation(const std::string& name) {
  Tables& t = tables();
  std::lock_guard<std::recursive_mutex> lock(t.mu);
  auto it = t.impls.find(name);
  KILN_ICHECK(it != t.impls.end()) << "no implementation called '" << name << "'";
  return it->second;
}

void register_strategy(const std::string& op, const std::string& key, FStrategy strategy) {
  Tables& t = tables();
  std::lock_guard<std::recursive_mutex> lock(t.mu);
  auto [it, fresh] = t.strategies.emplace(std::make_pair(op, key), std::move(strategy));
  KILN_ICHECK(fresh) << "register_strategy: op '" << op << "' has a strategy for key '" << key
                     << "' already";
}

namespace {

/// The choices of the op's strategy for `call` (the first of the target's keys, then
/// "generic", that has one), highest priority first; no last resort added.
std::vector<Choice> own_choices(const OpCall& call) {
  Tables& t = tables();
  const Node& n = call.node();
  std::vector<std::string> keys = call.target.keys();
  keys.push_back("generic");
  std::vector<Choice> r;
  {
    std::lock_guard<std::recursive_mutex> lock(t.mu);
    for (const std::string& key : keys) {
      auto it = t.strategies.find({n.op, key});
      if (it == t.strategies.end()) continue;
      r = it->second(call);
      for (const Choice& c : r)
        KILN_ICHECK(t.impls.count(c.impl)) << "the strategy of op '" << n.op << "' for key '" << key
                                           << "' names unknown implementation '" << c.impl << "'";
      break;
    }
  }
  std::stable_sort(r.begin(), r.end(),
                   [](const Choice& a, const Choice& b) { return a.priority > b.priority; });
  return r;
}

}  // namespace

bool has_own_implementation(const OpCall& call) { return !own_choices(call).empty(); }

std::vector<Choice> strategy_choices(const OpCall& call) {
  std::vector<Choice> r = own_choices(call);
  const Node& n = call.node();
  // The pattern kind's implementation is the last resort when every choice needs a rewrite
  // (or there is none).
  if (std::all_of(r.begin(), r.end(), [](const Choice& c) { return c.rewrite; }))
    r.push_back(
        Choice{pattern_impl(OpRegistry::global().get(n.op).pattern, call.target), -1000, false});
  return r;
}

Graph select_implementations(const Graph& g, const Target& target) {
  Graph r = g;
  for (int i = 0; i < r.num_nodes(); ++i) {
    const Node& n = r.node(i);
    if (!n.is_op() || !n.impl.name.empty()) continue;
    OpCall call{r, i, target};
    const std::vector<Choice> choices = strategy_choices(call);
    for (const Choice& c : choices) {
      if (c.rewrite) continue;  // taken by the layout pass only
      const Implementation& impl = implementation(c.impl);
      ImplChoice choice{impl.name, {}};
      if (impl.task) {
        try {
          auto task = std::make_shared<autotune::Task>(impl.task(call));
          choice.task = [task] { return *task; };
        } catch (const Error&) {
          // The template does not cover this node; the last resort (the pattern kind's
          // implementation) is recorded untunable rather than not at all.
          if (&c != &choices.back()) continue;
        }
      }
      r.mutable_node(i).impl = std::move(choice);
      break;
    }
  }
  return r;
}

void register_pattern_implementations() {
  register_implementation(
      {"injective.generic",
       [](const ScheduleInput& in) { return topi::schedule_injective(in.outs, in.target); },
       nullptr, nullptr, ""});
  register_implementation(
      {"reduce.generic",
       [](const ScheduleInput& in) { return topi::schedule_reduce(in.outs, in.target); }, nullptr,
       nullptr, ""});
  // The rule-based scheduler, tunable (generic_task): a tuned config is the master op's; a
  // fused group whose tiles declare other knobs (an epilogue of another shape) falls back.
  register_implementation({"opaque.generic",
                           [](const ScheduleInput& in) {
                             if (!in.config.is_fallback()) {
                               try {
                                 return schedule_generic(in.outs, in.target, in.config);
                               } catch (const Error&) {
                               }
                             }
                             autotune::Config cfg = autotune::Config::fallback();
                             return schedule_generic(in.outs, in.target, cfg);
                           },
                           generic_task, nullptr, "auto_schedule"});
  // GPUs: one thread per output element (topi/schedule_gpu.h) until an op has a template.
  register_implementation(
      {"fallback.gpu",
       [](const ScheduleInput& in) { return topi::schedule_gpu_fallback(in.outs, in.target); },
       nullptr, nullptr, ""});
}

}  // namespace kiln::graph
