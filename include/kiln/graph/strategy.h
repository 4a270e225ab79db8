/// \file strategy.h
/// \brief Op strategies: which implementation an op gets on a target, decided once and recorded
/// on the node (TVM's OpStrategy).
///
/// An *implementation* is registered once, by name ("conv2d_nchwc.x86"): how to schedule a fused
/// group whose master node runs it, optionally the tuning task of a node it would compute (a
/// tunable template, its workload key built from the node) and optionally a layout hook that
/// rewrites the node for it (packing weights, blocking layouts). A *strategy* is registered per
/// (op, target key): given a node and the target, it lists the implementations that apply, each
/// with a priority. The target's keys are tried most specific first ("x86", then "cpu"), then
/// the key "generic"; an op with no strategy at all gets the implementation of its pattern
/// kind (injective, reduction or opaque schedules).
///
/// The layout pass (alter_op_layout) asks the strategy once per node and picks: among tunable
/// implementations with records in the tuning log the fastest, else the highest priority whose
/// layout hook accepts the node. It records the choice on the node it emits (Node::impl: the
/// implementation's name and its tuning task); select_implementations records the highest
/// priority choice on every node that has none. build_module and extract_tuning_tasks read the
/// record; nothing after the choice looks at op names.
///
///   // an op's strategy for CPUs, in its registration:
///   register_strategy("my_op", "cpu", [](const OpCall& call) {
///     return std::vector<Choice>{{"my_op.cpu", 10}};
///   });
///   register_implementation({"my_op.cpu", my_schedule, my_task, nullptr, "my_op"});
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/autotune/space.h"
#include "kiln/autotune/task.h"
#include "kiln/graph/graph.h"
#include "kiln/runtime/ndarray.h"
#include "kiln/target/target.h"
#include "kiln/te/schedule.h"

namespace kiln::graph {

class TunedConfigs;

/// What a strategy, a task function and a layout hook see of one op node.
struct OpCall {
  const Graph& graph;  ///< the graph the node is in (typed)
  int index;           ///< the node's index
  const Target& target;

  const Node& node() const { return graph.node(index); }
  /// The type of input `k`.
  const TensorType& input_type(size_t k) const { return graph.type_of(node().inputs.at(k)); }
  /// The value of input `k` when it is a constant, else nullptr.
  const runtime::NDArray* constant(size_t k) const;
  /// True when input `k` is a float32 constant.
  bool is_f32_constant(size_t k) const;
};

/// What an implementation's schedule sees: a fused group whose master node runs it.
struct ScheduleInput {
  const Node& master;
  te::Tensor main;               ///< the master's (first) output tensor
  std::vector<te::Tensor> outs;  ///< the kernel's outputs (the group's exposed tensors)
  const Target& target;
  mutable autotune::Config config;  ///< the tuned config of the node's task, else fallback
  /// is_epilogue_shape of the master's and the kernel's first output's shapes: the templates
  /// that assume it fall back to schedule_by_pattern otherwise; fuse_ops only builds epilogues
  /// that pass.
  bool epilogue_shape() const;
};

/// Whether a kernel whose master writes `master` may write its epilogue's result of shape `out`
/// in the master's template: the same shape, or for a 2-D master [M, N] (a dense) that shape
/// with unit extents added before the last axis ([1, M, N], [M, 1, N]: the epilogue went
/// through a reshape that keeps the element order; the template tiles the M and N axes).
bool is_epilogue_shape(const std::vector<int64_t>& master, const std::vector<int64_t>& out);

/// The schedule of a group by its master's pattern kind: topi's injective or reduction
/// schedule, else the rule-based scheduler (topi/auto_schedule.h) with its fallback knobs.
te::Schedule schedule_by_pattern(const ScheduleInput& in);

/// What a layout hook may do: the alter_op_layout walk, rewriting old node `call.index` into
/// the new graph. Layouts are "" (NCHW) or "NCHW<b>c".
class LayoutRewriter {
 public:
  virtual ~LayoutRewriter() = default;
  /// The node being rewritten, in the old graph.
  virtual const OpCall& call() const = 0;
  /// The new-graph entry of the node's input `k` in `layout` (a layout_transform added, once
  /// per tensor and layout, when its producer wrote another layout).
  virtual Entry input(size_t k, const std::string& layout) = 0;
  /// The new-graph entry `e`, of logical NCHW type `t`, in `layout`.
  virtual Entry as_layout(Entry e, const TensorType& t, const std::string& layout) = 0;
  /// The layout a new-graph entry is in.
  virtual const std::string& layout_of(Entry e) const = 0;
  /// The layout the producer of the node's input `k` wrote (nothing is added).
  virtual const std::string& input_layout(size_t k) = 0;
  /// True when the producer of the node's input `k` is an injective op that computes its output
  /// (not a view of its inputs, as an in-place concat is): a layout_transform of that output
  /// fuses into the producer's kernel and costs no pass of its own.
  virtual bool input_producer_fuses(size_t k) = 0;
  /// A new constant named after `base` (made unique).
  virtual Entry add_constant(const std::string& base, runtime::NDArray value) = 0;
  /// Adds a helper node to the new graph (its inputs new-graph entries); its first output is in
  /// `layout`.
  virtual Entry add(Node n, const std::string& layout) = 0;
  /// Adds the node's replacement (it computes the old node's outputs, first one in `layout`).
  virtual void emit(Node n, const std::string& layout) = 0;
  /// The tuned config of `task` when the tuning log has one, else the fallback; `make` is only
  /// called when there is a log.
  virtual autotune::Config config(const std::function<autotune::Task()>& make) = 0;
  /// A cache for packed constants shared between nodes (one packed copy of a weight that
  /// several nodes read): `key` → entry.
  virtual std::optional<Entry> cached(const std::string& key) const = 0;
  virtual void cache(const std::string& key, Entry e) = 0;
};

/// One implementation of an op (or of several ops' nodes: a layout hook may emit another op
/// whose node runs it).
struct Implementation {
  /// Unique, "<what>.<target key>", e.g. "conv2d_nchwc.x86".
  std::string name;
  /// The schedule of a fused group whose master runs this implementation.
  std::function<te::Schedule(const ScheduleInput&)> schedule;
  /// Optional: the tuning task of a node (before layout alteration) this implementation would
  /// compute; the one place its workload key is built. Throws kiln::Error when the template
  /// does not cover the node.
  std::function<autotune::Task(const OpCall&)> task;
  /// Optional: rewrites the node for this implementation (alter_op_layout); false when it does
  /// not apply (the next choice is tried), after adding nothing.
  std::function<bool(LayoutRewriter&)> alter_layout;
  /// What `kiln tune` calls its tasks ("conv2d", "conv2d_winograd", …); defaults to the name.
  std::string tuning_label;
};

/// An implementation a strategy offers for one node, with its priority (higher first).
struct Choice {
  std::string impl;
  int priority = 10;
  /// True when the node must be rewritten by the implementation's layout hook to run it (only
  /// the layout pass can take such a choice); false when the node runs it as it is.
  bool rewrite = false;
};

/// The implementations that apply to a node on a target, in any order.
using FStrategy = std::function<std::vector<Choice>(const OpCall&)>;

/// Registers an implementation; an internal error when the name is taken or the schedule
/// missing.
void register_implementation(Implementation impl);
/// The implementation called `name`; an internal error naming it otherwise.
const Implementation& implementation(const std::string& name);
/// Registers `op`'s strategy for targets with key `key` ("x86", "cpu", "gpu", "generic", or a
/// test kind's own key). An internal error when one is registered already for (op, key).
void register_strategy(const std::string& op, const std::string& key, FStrategy strategy);

/// The choices for node `call`, highest priority first (stable): the strategy of the first of
/// the target's keys (then "generic") that has one for the op; the op's pattern kind's
/// implementation last when no choice runs the node as it is.
std::vector<Choice> strategy_choices(const OpCall& call);
/// True when the op's strategy offers node `call` an implementation of its own on the target,
/// not only its pattern kind's last resort: quantize_realize asks it of an integer product it
/// could also compute through the float product (a faster path where no integer kernel runs).
bool has_own_implementation(const OpCall& call);

/// Records the strategy's first choice (Node::impl) on every op node that has none; the
/// tuning task of a tunable choice is recorded with it. Run by optimize() at every level.
Graph select_implementations(const Graph& g, const Target& target);

/// Registers the built-in implementations and strategies (src/graph/strategy/); called once
/// on first use of the tables above.
void register_builtin_strategies();

}  // namespace kiln::graph
