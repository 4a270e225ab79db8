// Knobs shared by the register-blocked GEMM-like templates (dense, batch_matmul): the panel
// width of the packed operand (tile_x), the register tile's rows (tile_y), the split of k and
// unrolling, with the fallback rules measured for them (docs/gemm-schedule.md).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/autotune/space.h"
#include "topi_util.h"

namespace kiln::topi::detail {

/// tile_x: panel width in floats (a multiple of 16 lanes, at most N rounded up); fallback the
/// widest.
inline int64_t define_panel_width(autotune::Config& cfg, int64_t N) {
  std::vector<int64_t> c = filter_leq({16, 32, 48, 64}, (N + 15) / 16 * 16);
  cfg.define_knob("tile_x", c);
  if (cfg.is_fallback()) cfg.fallback_knob("tile_x", c.back());
  return cfg.knob("tile_x");
}

/// tile_y (rows of the register tile), tile_k, unroll; returns tile_y. Fallback: as many rows
/// as keep the accumulators within the register file for panel width nb (6 for nb >= 48, else
/// 8), k split by 4 and unrolled for a single row (M = 1, a GEMV), else unsplit.
inline int64_t define_row_tile(autotune::Config& cfg, int64_t M, int64_t K, int64_t nb) {
  std::vector<int64_t> ys = filter_leq({1, 2, 3, 4, 6, 8}, M);
  cfg.define_knob("tile_y", ys);
  cfg.define_split("tile_k", K, 2, autotune::SplitPolicy::kFactors, 16);
  cfg.define_bool("unroll");
  if (cfg.is_fallback()) {
    const int64_t want = nb >= 48 ? 6 : 8;
    int64_t mr = ys.front();
    for (int64_t v : ys)
      if (v <= want) mr = v;
    cfg.fallback_knob("tile_y", mr);
    cfg.fallback_split("tile_k", {-1, M == 1 ? 4 : 1});
    cfg.fallback_knob("unroll", M == 1 ? 1 : 0);
  }
  return cfg.knob("tile_y");
}

}  // namespace kiln::topi::detail
