// Configs that exercise a template's whole space cheaply: shared by the operator tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kiln/autotune/space.h"

namespace kiln::testing {

/// Configs of `space` that together take every candidate of every knob (config j picks
/// candidate j % n_i of knob i), plus `extra` random points (seeded).
inline std::vector<autotune::Config> covering_configs(const autotune::ConfigSpace& space,
                                                      int extra = 0) {
  size_t most = 1;
  for (const auto& k : space.knobs()) most = std::max(most, k.candidates.size());
  std::vector<autotune::Config> r;
  for (size_t j = 0; j < most; ++j) {
    std::vector<uint32_t> choice;
    for (const auto& k : space.knobs())
      choice.push_back(static_cast<uint32_t>(j % k.candidates.size()));
    r.push_back(space.at(choice));
  }
  std::mt19937_64 rng(42);
  for (int i = 0; i < extra; ++i) r.push_back(space.random(rng));
  return r;
}

}  // namespace kiln::testing
