/// \file lower.h
/// \brief From a te schedule to a PrimFunc ready for code generation: bound inference, loop
/// nests (te/schedule_ops), then the tir pipeline (tir/pipeline.h).
///
///   auto s = te::create_schedule({C});
///   std::cout << tir::lower(s, {A, B, C}, "matmul");   // the loop program, readable
#pragma once

#include <string>
#include <vector>

#include "kiln/te/schedule.h"
#include "kiln/tir/function.h"
#include "kiln/tir/pipeline.h"

namespace kiln::tir {

struct LowerOptions {
  PipelineOptions pipeline;
  /// Stop after the loop nests are built (no tir passes): the schedule's direct image.
  bool nests_only = false;
};

/// Lowers `sch` to a function whose parameters are `args` (input and output tensors, in call
/// order). Tensors not in `args` are allocated inside the function. A `pragma(iv, "fast_math")`
/// on any stage sets the function attribute "fast_math" = "1", which lets the code generator
/// reassociate floating-point arithmetic; without it IEEE semantics are kept.
PrimFunc lower(const te::Schedule& sch, const std::vector<te::Tensor>& args,
               const std::string& name, const LowerOptions& opt = {});

}  // namespace kiln::tir

namespace kiln {
using tir::lower;
}  // namespace kiln
