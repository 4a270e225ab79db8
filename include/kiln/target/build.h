/// \file build.h
/// \brief From lowered PrimFuncs to a callable module.
#pragma once

#include <vector>

#include "kiln/runtime/module.h"
#include "kiln/target/target.h"
#include "kiln/tir/function.h"
#include "kiln/tir/lower.h"

namespace kiln {

/// Wraps each function in the packed API (tir::make_packed_api; skipped for functions whose
/// attr packed_api is already "1") and compiles them all for `target` into one module whose
/// functions are called by name with NDArrays and scalars.
runtime::Module build(const std::vector<tir::PrimFunc>& funcs, const Target& target);

/// Lowers one schedule (tir::lower) and compiles it: the paper's `build(s, [A, B, C], target)`.
/// The module has one function, `name`, taking `args` in order.
runtime::Module build(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                      const Target& target, const std::string& name,
                      const tir::LowerOptions& opt = {});

}  // namespace kiln
