/// \file pipeline.h
/// \brief The tir lowering recipe: the passes from a te loop nest to code-generator input, in
/// order, written once in pipeline.cc (STYLE.md item 6).
///
/// Each pass runs through the shared instrumented runner (support/pass_runner.h), which times
/// it, verifies the IR after it (when `verify` is set), notes when it changed nothing, and dumps
/// the IR after it when the environment variable KILN_DUMP_AFTER names it (or is "all"), to
/// stderr or to `dump`.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/support/pass_runner.h"
#include "kiln/tir/function.h"
#include "kiln/tir/transform.h"

namespace kiln::tir {

/// What happened in one pass of a pipeline run (the shared runner's record).
using kiln::PassRecord;

/// The runner's options (verify, dump, dump_after, records: support/pass_runner.h) and the
/// passes' own.
struct PipelineOptions : PassRunOptions<PrimFunc> {
  /// Argument tensors (producer -> buffer) for storage_flatten.
  ExternBufferMap extern_buffers;
  VectorizeOptions vectorize;
  UnrollOptions unroll;
};

/// Runs the passes in pipeline_pass_names() order.
PrimFunc run_pipeline(PrimFunc f, const PipelineOptions& opt);

/// The names of the pipeline's passes, in the order they run.
const std::vector<std::string>& pipeline_pass_names();

}  // namespace kiln::tir
