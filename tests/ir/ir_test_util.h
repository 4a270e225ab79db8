// Shared helpers for the IR unit tests.
#pragma once

#include <string>
#include <vector>

#include "common/error.h"
#include "common/producer.h"
#include "kiln/ir/expr.h"

namespace kiln::ir::testing {

using ::kiln::testing::make_producer;

/// Runs `f` and returns the message of the kiln::Error it throws ("" if none).
using ::kiln::testing::error_of;

}  // namespace kiln::ir::testing
