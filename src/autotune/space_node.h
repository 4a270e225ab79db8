// Internal: the storage behind a ConfigSpace handle, and knob candidate enumeration, shared by
// space.cc and config.cc.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/autotune/space.h"

namespace kiln::autotune::detail {

struct SpaceNode {
  std::vector<Knob> knobs;
  std::unordered_map<std::string, int> by_name;

  void add(Knob k) {
    by_name.emplace(k.name, static_cast<int>(knobs.size()));
    knobs.push_back(std::move(k));
  }
};

/// Candidate values of each knob kind (space.cc). Each checks its arguments and names `name`.
Knob make_split_knob(const std::string& name, int64_t extent, int num_outputs, SplitPolicy policy,
                     int64_t max_factor, bool no_tail);
Knob make_reorder_knob(const std::string& name, int num_axes, ReorderPolicy policy,
                       const std::vector<std::vector<int64_t>>& candidates);
Knob make_annotate_knob(const std::string& name, int num_axes, AnnotatePolicy policy);
Knob make_choice_knob(const std::string& name, const std::vector<int64_t>& candidates);

/// The split candidate whose inner factors are the largest under `bounds` (innermost first;
/// -1 = unbounded; bounds[0] is ignored: the first factor is the rest).
uint32_t pick_split(const Knob& k, const std::vector<int64_t>& bounds);

/// ceil(extent / product(factors[1:])): the first factor of a split.
int64_t split_rest(int64_t extent, const std::vector<int64_t>& factors);

}  // namespace kiln::autotune::detail
