// Knobs shared by the register-blocked GEMM-like templates (dense, batch_matmul): the panel
// width of the packed operand (tile_x), the register tile's rows (tile_y), the split of k and
// unrolling, with the fallback rules measured for them (docs/gemm-schedule.md). The fallbacks
// size the register tile by the target's vector registers and lanes: 6 rows x 64 columns (24
// accumulators) with AVX-512's 32 zmm of 16 floats, 6 x 16 (12) with AVX2's 16 ymm of 8.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kiln/autotune/space.h"
#include "kiln/target/target.h"
#include "topi_util.h"

namespace kiln::topi::detail {

/// The row candidates of tile_y for M rows.
inline std::vector<int64_t> row_tile_candidates(int64_t M) {
  return filter_leq({1, 2, 3, 4, 6, 8}, M);
}

/// The fallback rows of a register tile nb floats wide: 6 with three or more vectors a row,
/// else 8, and no more than `registers` hold (rows x v accumulators + the v vectors of a k step
/// + one broadcast); 0 when not even one row fits. `lanes` floats a vector.
inline int64_t fallback_rows(int64_t M, int64_t nb, int64_t lanes, int64_t registers) {
  const int64_t v = (nb + lanes - 1) / lanes, want = v >= 3 ? 6 : 8;
  int64_t mr = 0;
  for (int64_t r : row_tile_candidates(M))
    if (r <= want && r * v + v + 1 <= registers) mr = r;
  return mr;
}

/// The target's float32 lanes and vector registers.
inline std::pair<int64_t, int64_t> vector_file(const Target& target) {
  return {std::max(1, std::min(16, target.vector_bits() / 32)), target.vector_registers()};
}

/// tile_x: panel width in floats (a multiple of 16, at most N rounded up; a divisor of N when N
/// is a multiple of 16). Fallback: for one row
/// (M = 1, a GEMV, whose k-step vectors fold into the FMAs) the widest; else the width whose
/// fallback register tile holds the most accumulators, ties to the wider (64 with AVX-512, 16
/// with AVX2, where 64 columns are 8 vectors a row: 6 x 8 accumulators would spill).
inline int64_t define_panel_width(autotune::Config& cfg, int64_t M, int64_t N,
                                  const Target& target) {
  std::vector<int64_t> c = filter_leq({16, 32, 48, 64}, (N + 15) / 16 * 16);
  // N a multiple of 16 (batch_matmul pads to one): only widths that divide it, no partial panel.
  if (N % 16 == 0) std::erase_if(c, [N](int64_t nb) { return N % nb != 0; });
  cfg.define_knob("tile_x", c);
  if (cfg.is_fallback()) {
    int64_t best = c.back(), most = 0;
    if (M > 1) {
      auto [lanes, registers] = vector_file(target);
      for (int64_t nb : c) {
        const int64_t acc = fallback_rows(M, nb, lanes, registers) * ((nb + lanes - 1) / lanes);
        if (acc >= most) {
          most = acc;
          best = nb;
        }
      }
      if (most == 0) best = c.front();
    }
    cfg.fallback_knob("tile_x", best);
  }
  return cfg.knob("tile_x");
}

/// tile_y (rows of the register tile), tile_k, unroll; returns tile_y. Fallback: as many rows
/// as keep the accumulators within the register file for panel width nb (fallback_rows; at
/// least one), k split by 4 and unrolled for a single row (M = 1, a GEMV), else unsplit.
inline int64_t define_row_tile(autotune::Config& cfg, int64_t M, int64_t K, int64_t nb,
                               const Target& target) {
  std::vector<int64_t> ys = row_tile_candidates(M);
  cfg.define_knob("tile_y", ys);
  cfg.define_split("tile_k", K, 2, autotune::SplitPolicy::kFactors, 16);
  cfg.define_bool("unroll");
  if (cfg.is_fallback()) {
    auto [lanes, registers] = vector_file(target);
    const int64_t mr = std::max(ys.front(), fallback_rows(M, nb, lanes, registers));
    cfg.fallback_knob("tile_y", mr);
    cfg.fallback_split("tile_k", {-1, M == 1 ? 4 : 1});
    cfg.fallback_knob("unroll", M == 1 ? 1 : 0);
  }
  return cfg.knob("tile_y");
}

}  // namespace kiln::topi::detail
