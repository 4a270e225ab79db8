/// \file transform.h
/// \brief Every graph pass, one pass per file in src/graph/transform/, and the recipe that runs
/// them (src/graph/optimize.cc).
///
/// Every pass is a plain function `Graph f(const Graph&)` that returns a new graph and leaves
/// its argument alone. Each iterates over the node vector in topological order (never
/// recursing), so it handles graphs of any depth. The comment of each pass says what it requires
/// of its input and what it guarantees of its output; every pass guarantees the invariants of
/// Graph::verify (topological order, valid entries, named inputs and constants), which the recipe
/// checks after each pass. Passes other than infer_types require a typed graph (infer_types run
/// before) and guarantee a typed graph.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "kiln/graph/graph.h"
#include "kiln/support/pass_runner.h"
#include "kiln/target/target.h"

namespace kiln::graph {

class TunedConfigs;  // tuning.h

/// Type/shape inference (transform/infer_types.cc). Requires: nothing. Guarantees: every op's
/// attributes are checked against its schema and completed with defaults, and every output has
/// its type. Errors (user errors) name the node and the op: unknown op, bad input count, unknown
/// / missing / mistyped attribute, and shape or dtype mismatches (with both shapes).
Graph infer_types(const Graph& g);

/// infer_types in place over nodes `first`.. of `g`, whose earlier nodes are typed already (a
/// graph that grows: the ONNX importer types each new node once instead of the whole graph).
void infer_types_from(Graph& g, int first);

/// float16 computed in float32 (transform/float16_in_float32.cc), for CPU targets: float16
/// inputs are cast to float32, float16 constants become float32, a cast to float16 keeps its
/// rounding (then back to float32), float16 results are cast back; every op computes in
/// float32. Requires: a typed graph. Guarantees: a typed graph with the same inputs and result
/// types, no float16 arithmetic. A graph without float16 is returned as it is.
Graph float16_in_float32(const Graph& g);

/// Dead-code elimination (transform/dead_code_elimination.cc): removes op and constant nodes
/// that no result depends on. Graph inputs are kept (they are the graph's interface) even when
/// unused. Requires: a typed graph. Guarantees: every op and constant node reaches a result.
Graph dead_code_elimination(const Graph& g);

/// Common-subexpression elimination (transform/common_subexpression_elimination.cc): an op node
/// with the same op, the same input entries (after merging) and equal attributes as an earlier
/// node is replaced by that node. Does not merge constants. Requires: a typed graph. Guarantees:
/// no two op nodes with the same op, inputs and attributes (the replaced ones are left for
/// dead_code_elimination).
Graph common_subexpression_elimination(const Graph& g);

/// Constant folding (transform/constant_folding.cc): an op node whose inputs are all constants
/// is evaluated at compile time (its compute built with kiln::build for the host and run) and
/// replaced by constant nodes, one per output, named "<node name or op>_folded<N>". Iterative in
/// topological order, so whole constant sub-graphs fold (e.g. constant → reshape → add). Unused
/// constants are left for dead_code_elimination. Requires: a typed graph. Guarantees: no op node
/// reads only constants.
Graph constant_folding(const Graph& g);

/// Algebraic simplification (transform/simplify.cc): removes identity and dropout, reshapes to
/// the same shape, transposes by the identity permutation, x·1, 1·x, x/1, x+0, 0+x, x−0 (the
/// constant all ones / zeros and the result of x's type); merges transpose∘transpose into one
/// transpose (or nothing) and reshape∘reshape into one reshape. Leaves the bypassed nodes for
/// dead_code_elimination. Requires: a typed graph. Guarantees: the same results, every output
/// type unchanged.
Graph simplify(const Graph& g);

/// Batch-norm folding (transform/fold_batch_norm.cc): an inference batch_norm with constant
/// float32 parameters becomes multiply(x, s) → add(·, t) with per-channel constants (the add
/// keeps the batch_norm's name); then a multiply by a per-output-channel constant of a conv2d's
/// output — directly, or after a per-channel constant add (a conv bias) — is folded into the
/// convolution's weights (and that bias). Intermediate nodes must have no other reader and not
/// be graph results. The replaced constants are left for dead_code_elimination. Requires: a typed
/// graph. Guarantees: no batch_norm with constant float32 parameters remains.
Graph fold_batch_norm(const Graph& g);

/// Quantize realisation (transform/quantize_realize.cc): dequantize → conv2d / dense / 2-D
/// matmul (+ per-channel bias, + relu / clip) → quantize, with int8 constant weights (per tensor
/// or per output channel, zero point 0) and per-tensor uint8/int8 activations, becomes one
/// qnn_conv2d / qnn_dense (topi/qnn.h) on the quantized data: int32 accumulation, the bias in
/// int32, requantized by the float32 multiplier (s_x·s_w)/s_y with rounding half to even, the
/// activation folded into the saturation bounds. Other ops between quantize / dequantize stay
/// in float. Must run before constant_folding (which would fold the dequantized weights).
/// Requires: a typed graph. Guarantees: a typed graph with the same results (up to the
/// rounding of float32 convolution, which the integer form does not have); unused nodes
/// removed when anything changed. A product for which `target` has no integer kernel (its
/// strategy offers none) is computed by the float product on the integer values instead, then
/// requantised the same way (exact while the sums stay under 2^24).
Graph quantize_realize(const Graph& g, const Target& target);

/// Layout alteration for `target`'s CPU (transform/alter_layout.cc): conv2d with constant
/// weights → conv2d_nchwc (groups 1) or depthwise_conv2d_nchwc (depthwise, multiplier 1) on
/// NCHW<b>c tensors with weights packed at compile time, dense with constant weights →
/// dense_packed; blocks from the templates' default configs. Element-wise / broadcast ops and
/// pooling on blocked tensors stay blocked (per-channel constants re-laid out); other ops and
/// the graph's results get NCHW operands. layout_transform nodes appear only where producer and
/// consumer layouts differ, one per (tensor, layout). Node names are kept.
/// With `tuned` (non-empty), a workload's block sizes come from its best logged config
/// (tuning.h) instead of the default. Requires: a typed graph. Guarantees: every node it rewrote
/// carries its implementation (Node::impl) and task; the new nodes' types are set, and the
/// recipe runs infer_types after it to check them.
Graph alter_op_layout(const Graph& g, const Target& target, TunedConfigs* tuned = nullptr);

/// Operator fusion (transform/fuse.cc; the TVM paper, section 3, with TVM's post-dominator
/// analysis). Partitions the op nodes of a typed graph into groups, each compiled into ONE
/// kernel by build_module. Returns the groups in order of their first node; each lists op-node
/// indices in topological order, and every op node is in exactly one group. No recursion. A
/// node fuses with everything on its paths to its immediate post-dominator (so diamonds such as
/// SiLU x·sigmoid(x), GELU and residual adds fuse, chains as before) when the union of their
/// groups stays valid:
/// * convex, and only its last node is read outside it or is a graph result (so the group is
///   emitted at its last node); at most `max_group_size` nodes;
/// * injective ops (element-wise, broadcast, injective) fuse with each other;
/// * a reduction (the group's master) is its last node and takes injective inputs;
/// * an out-fusable op (conv2d, dense, pooling) is its first node (the master) and takes an
///   epilogue of element-wise / broadcast ops and, for a 2-D master, shape-only ops (reshape,
///   expand_dims, squeeze keeping the element order), every epilogue output having the
///   master's shape (2-D: behind leading unit extents); these groups are grown first;
/// * nothing fuses with an opaque op (softmax, …) or an op with a data-dependent shape;
/// * never costs: a value inlined into several uses may add at most a few float ops per output
///   element (a transcendental is too many), and a value read with a broadcast (the SE block's
///   [N,C,1,1] scale) is not recomputed per element when it comes from a master or costs more
///   than two float ops: the group reads it instead.
/// Requires: a typed graph whose op nodes carry their implementations (optimize's last step).
/// `alone`: op nodes that fuse with nothing (the views of plan_views, which run no kernel).
/// Guarantees: a partition of the op nodes into convex groups (build_module's input).
std::vector<std::vector<int>> fuse_ops(const Graph& g, int max_group_size = 16,
                                       const std::set<int>& alone = {});

/// One group per op node (what build_module uses at opt_level 0).
std::vector<std::vector<int>> partition_unfused(const Graph& g);

/// The groups as text, one line per group: "{conv2d %2, add %4, relu %5}" (for golden tests and
/// debugging).
std::string groups_str(const Graph& g, const std::vector<std::vector<int>>& groups);

/// Options of the recipe: the shared runner's (verify, dump, dump_after, records:
/// support/pass_runner.h) and the level's own.
struct OptimizeOptions : PassRunOptions<Graph> {
  int opt_level = 2;
  /// With records (non-empty), alter_op_layout takes a workload's block sizes from its best
  /// logged config.
  TunedConfigs* tuned = nullptr;
};

/// The recipe: opt_level 0 runs infer_types only; >= 1 runs infer_types, quantize_realize,
/// simplify,
/// constant_folding, simplify, common_subexpression_elimination, fold_batch_norm; >= 2 then
/// alter_op_layout for `target` (and infer_types to check it, and
/// common_subexpression_elimination to merge identical packed weights); finally
/// dead_code_elimination; at every level, select_implementations (strategy.h) last, so every op
/// node carries its implementation. Every step goes through the shared runner: it is verified
/// (Graph::verify), timed and recorded in `opt.records`, and `KILN_DUMP_AFTER=<pass name>` (or
/// `all`) prints the graph after that pass to stderr (or to `opt.dump`). The graph's result
/// names are kept.
Graph optimize(Graph g, const Target& target, const OptimizeOptions& opt);
/// optimize with the default options at `opt_level`.
Graph optimize(Graph g, int opt_level, const Target& target, TunedConfigs* tuned = nullptr);
/// optimize for the host CPU.
Graph optimize(Graph g, int opt_level = 2);

}  // namespace kiln::graph
