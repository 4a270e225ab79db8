/// \file pipeline.h
/// \brief The tir lowering recipe: the passes from a te loop nest to code-generator input, in
/// order, written once in pipeline.cc (STYLE.md item 6).
///
/// Each pass runs through one helper that times it, verifies the IR after it (when
/// `verify` is set), notes when it changed nothing, and dumps the IR after it when the
/// environment variable KILN_DUMP_AFTER names it (or is "all"), to stderr or to `dump`.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/tir/function.h"
#include "kiln/tir/transform.h"

namespace kiln::tir {

/// What happened in one pass of a pipeline run.
struct PassRecord {
  std::string name;
  double ms = 0;         ///< wall time of the pass
  bool changed = false;  ///< false when the output is structurally equal to the input
};

struct PipelineOptions {
  /// Argument tensors (producer -> buffer) for storage_flatten.
  ExternBufferMap extern_buffers;
  /// Runs tir::verify after every pass.
  bool verify = true;
  VectorizeOptions vectorize;
  UnrollOptions unroll;
  /// Receives the IR after each pass selected by KILN_DUMP_AFTER (or, when `dump_after` is
  /// set, by it instead of the environment); when unset the text goes to stderr.
  std::function<void(const std::string& pass, const PrimFunc& f)> dump;
  /// Overrides KILN_DUMP_AFTER when non-empty: a pass name, or "all".
  std::string dump_after;
  /// When set, one record per pass is appended.
  std::vector<PassRecord>* records = nullptr;
};

/// Runs the passes in pipeline_pass_names() order.
PrimFunc run_pipeline(PrimFunc f, const PipelineOptions& opt);

/// The names of the pipeline's passes, in the order they run.
const std::vector<std::string>& pipeline_pass_names();

}  // namespace kiln::tir
