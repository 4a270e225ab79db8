/// \file transform.h
/// \brief Graph passes, one per file in src/graph/, and the recipe that runs them.
///
/// Every pass is a plain function `Graph f(const Graph&)` that returns a new graph and leaves
/// its argument alone. Each iterates over the node vector in topological order (never
/// recursing), so it handles graphs of any depth. Passes other than infer_types require a
/// typed graph (infer_types run before) and guarantee a typed graph.
#pragma once

#include "kiln/graph/graph.h"

namespace kiln::graph {

/// Type/shape inference. Requires: nothing. Guarantees: every op's attributes are checked
/// against its schema and completed with defaults, and every output has its type. Errors
/// (user errors) name the node and the op: unknown op, bad input count, unknown / missing /
/// mistyped attribute, and shape or dtype mismatches (with both shapes).
Graph infer_types(const Graph& g);

/// Dead-code elimination: removes op and constant nodes that no result depends on. Graph
/// inputs are kept (they are the graph's interface) even when unused.
Graph dead_code_elimination(const Graph& g);

/// Common-subexpression elimination: an op node with the same op, the same input entries
/// (after merging) and equal attributes as an earlier node is replaced by that node. Does
/// not merge constants.
Graph common_subexpression_elimination(const Graph& g);

/// Constant folding: an op node whose inputs are all constants is evaluated at compile time
/// (its compute built with kiln::build for the host and run) and replaced by constant nodes,
/// one per output, named "<node name or op>_folded<N>". Iterative in topological order, so
/// whole constant sub-graphs fold (e.g. constant → reshape → add). Unused constants are left
/// for dead_code_elimination.
Graph constant_folding(const Graph& g);

/// Algebraic simplification: removes identity and dropout, reshapes to the same shape,
/// transposes by the identity permutation, x·1, 1·x, x/1, x+0, 0+x, x−0 (the constant all
/// ones / zeros and the result of x's type); merges transpose∘transpose into one transpose
/// (or nothing) and reshape∘reshape into one reshape. Leaves the bypassed nodes for
/// dead_code_elimination.
Graph simplify(const Graph& g);

/// The recipe: opt_level 0 runs infer_types only; >= 1 runs infer_types, simplify,
/// constant_folding, simplify, common_subexpression_elimination, dead_code_elimination.
/// Every step is verified; `KILN_DUMP_AFTER=<pass name>` (or `all`) prints the graph after
/// that pass to stderr.
Graph optimize(Graph g, int opt_level = 2);

}  // namespace kiln::graph
