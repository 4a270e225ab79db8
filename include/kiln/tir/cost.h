/// \file cost.h
/// \brief What one call of a lowered function costs, for the roofline of `kiln bench
/// --profile`: floating-point operations executed and the bytes of its buffer arguments.
///
///   tir::KernelCost c = tir::kernel_cost(func);   // c.flops, c.bytes
#pragma once

#include "kiln/tir/function.h"

namespace kiln::tir {

struct KernelCost {
  /// Floating-point operations: each float add, subtract, multiply, divide, min or max and
  /// each float math call (exp, sqrt, …) counts one per vector lane, times the trip counts of
  /// the loops around it (a loop of non-constant extent by its constant upper bound). Both
  /// branches of a condition count (an upper bound for guarded tails).
  double flops = 0;
  /// The compulsory traffic: the bytes of the function's buffer parameters (inputs read once,
  /// outputs written once).
  double bytes = 0;
};

/// The cost of one call of `f` (a function before or after the packed API wrapping).
KernelCost kernel_cost(const PrimFunc& f);

}  // namespace kiln::tir
