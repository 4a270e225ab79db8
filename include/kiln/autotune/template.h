/// \file template.h
/// \brief Schedule templates: a function from a Config to a schedule and its arguments, run in
/// define mode to get its space and in apply / fallback mode to get a schedule.
///
///   Template t{"dense_tiled", "1", [=](Config& cfg) { ...; return Instance{s, {A, B, C}}; }};
///   ConfigSpace space = define_space(t);
///   Instance inst = instantiate(t, space.get(42));       // or Config::fallback()
///   auto mod = kiln::build(inst.sch, inst.args, Target::host(), "f");
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/autotune/space.h"

namespace kiln::autotune {

/// What a template produces: the schedule, the function's arguments in call order, and the
/// config it was scheduled with (for fallback mode: the point the defaults chose).
struct Instance {
  te::Schedule sch;
  std::vector<te::Tensor> args;
  Config config = Config::fallback();
  /// Per argument: whether it is a constant of the model (a weight, a bias). Measurements
  /// rotate these through copies, so that a call finds them where a network leaves them (read
  /// one model run earlier: in L3 or DRAM), and keep one copy of every other argument, hot in
  /// the cache as a producer leaves an activation (MeasureOptions::rotate_bytes). Empty: every
  /// argument is rotated (a kernel with no notion of weights).
  std::vector<bool> weights = {};
};

/// The template body: declares knobs on the config while it schedules. It builds its compute
/// afresh on every call (tensors are not shared between instances).
using TemplateFn = std::function<Instance(Config&)>;

/// A named, versioned template. Tuning records are keyed by name and version: change the
/// version whenever the knobs or their meaning change.
struct Template {
  std::string name;
  std::string version;
  TemplateFn fn;
};

/// Runs `fn` in define mode and returns the space of its knobs.
ConfigSpace define_space(const TemplateFn& fn);
ConfigSpace define_space(const Template& t);

/// Runs `fn` with a copy of `cfg` (apply or fallback mode); the returned instance's config is
/// that copy after the run. Throws when cfg is in define mode, or (apply mode) when the template
/// defines a knob the space lacks or with other candidates.
Instance instantiate(const TemplateFn& fn, const Config& cfg);
Instance instantiate(const Template& t, const Config& cfg);

}  // namespace kiln::autotune
