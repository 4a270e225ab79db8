/// \file feature.h
/// \brief Features of a candidate's loop program for the cost model (TVM paper section 5.2).
///
/// The program analysed is the lowered loop program before vectorization and unrolling
/// (lower_for_features: tir::lower's loop nests, storage_flatten, simplify), so every loop is
/// still a loop with its annotation (serial, parallel, vectorized, unrolled) and every buffer
/// access is a Load / Store with a flat index.
///
/// The statement described loop by loop is the heaviest store (most executions; for a matmul the
/// reduction update). For each loop level around it, innermost first, and each buffer it touches:
///  - extent of the loop, one-hot annotation, iterations of the loop and everything inside it
///    ("bottom-up"), iterations of everything outside and including it ("top-down");
///  - per buffer: the stride of its flat index in this loop's variable, the touch count (distinct
///    elements touched by one execution of this loop, i.e. this loop and the loops inside it), and
///    the reuse ratio (accesses made by that execution / touch count).
/// Touch counts of an affine index sum(c_i * v_i) over loops with extents e_i are
/// min(prod_{c_i != 0} e_i, 1 + sum |c_i| (e_i - 1)); a variable used non-affinely (divisions,
/// modulo) counts as touching a new element every iteration.
/// Plus whole-program values: arithmetic operations, bytes accessed, footprint, arithmetic
/// intensity (operations per footprint byte), loop depth, number of stores.
///
/// The vector has a fixed length kFeatureLength: kFeatureGlobal whole-program values, then
/// kFeatureLoopLevels levels (innermost first, zero-padded) of kFeaturePerLevel values each; the
/// buffers of a level are in slot order (the stored buffer, then the loaded ones by access count,
/// then by first appearance; at most kFeatureBuffers). Counts enter as log2(1 + x).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/autotune/template.h"
#include "kiln/tir/function.h"

namespace kiln::autotune {

constexpr int kFeatureGlobal = 6;
constexpr int kFeatureLoopLevels = 8;
constexpr int kFeatureBuffers = 4;
/// Per buffer: stride, touch count, reuse ratio.
constexpr int kFeaturePerBuffer = 3;
/// Per level: extent, 4 one-hot annotations, bottom-up, top-down, then the buffers.
constexpr int kFeaturePerLevel = 7 + kFeatureBuffers * kFeaturePerBuffer;
constexpr int kFeatureLength = kFeatureGlobal + kFeatureLoopLevels * kFeaturePerLevel;

/// One loop around the heaviest store.
struct LoopFeature {
  std::string var;
  int64_t extent = 1;  ///< 1 when not constant
  ir::ForKind kind = ir::ForKind::kSerial;
  double bottom_up = 1;  ///< product of extents of this loop and the loops inside it
  double top_down = 1;   ///< product of extents of this loop and the loops outside it
};

/// One buffer accessed by the heaviest store; vectors are indexed like `loops` (outermost first).
struct BufferFeature {
  std::string name;
  int elem_bytes = 0;
  int accesses = 0;             ///< loads and stores of it per execution of the statement
  std::vector<int64_t> stride;  ///< |coefficient| of the loop variable in the flat index
  std::vector<double> touch;    ///< distinct elements touched by one execution of the loop
  std::vector<double> reuse;    ///< accesses by one execution of the loop / touch
};

/// The analysis behind the feature vector (raw numbers, no logarithms).
struct LoopProgramFeatures {
  std::vector<LoopFeature> loops;      ///< around the heaviest store, outermost first
  std::vector<BufferFeature> buffers;  ///< slot order
  double flops = 0;                    ///< arithmetic operations executed by all stores
  double bytes_accessed = 0;           ///< bytes loaded and stored by all stores
  double footprint_bytes = 0;       ///< distinct bytes touched (per buffer, the largest footprint)
  double arithmetic_intensity = 0;  ///< flops / footprint_bytes
  int num_stores = 0;

  /// The fixed-length vector described in the file comment.
  std::vector<float> to_vector() const;
};

/// Lowers `inst` for feature extraction: loop nests, storage_flatten, simplify (no
/// vectorization or unrolling, so annotations are still on the loops).
tir::PrimFunc lower_for_features(const Instance& inst);

/// Analyses a lowered (flattened) loop program.
LoopProgramFeatures analyze_loop_program(const tir::PrimFunc& f);

/// analyze_loop_program(lower_for_features(inst)).to_vector().
std::vector<float> extract_features(const Instance& inst);

/// Arithmetic operations of one run of `f` (LoopProgramFeatures::flops).
double count_flops(const tir::PrimFunc& f);

/// A name for every position of the vector ("g.flops", "l0.extent", "l0.b1.reuse", ...).
const std::vector<std::string>& feature_names();

}  // namespace kiln::autotune
