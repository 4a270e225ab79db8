/// \file measured.h
/// \brief Test helper: a successful measurement of `s` seconds (one repeat), for tuning tests
/// that feed the tuner or the log known times instead of timing anything.
#pragma once

#include "kiln/autotune/record.h"

namespace kiln::testing {

inline autotune::MeasureResult measured(double s) {
  autotune::MeasureResult r;
  r.mean_s = s;
  r.runs = {s};
  return r;
}

}  // namespace kiln::testing
