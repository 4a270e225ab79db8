/// \file test_util.h
/// \brief Helpers for the arith unit tests: compare simplified IR with an expected tree by
/// structural equality and print both on mismatch.
#pragma once

#include <gtest/gtest.h>

#include "kiln/arith/analyzer.h"
#include "kiln/ir/op.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/structural.h"

namespace kiln::arith::testing {

inline ::testing::AssertionResult same_ir(const ir::Expr& got, const ir::Expr& want) {
  if (ir::structural_equal(got, want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "got " << ir::to_string(got) << ", want " << ir::to_string(want);
}
inline ::testing::AssertionResult same_ir(const ir::Stmt& got, const ir::Stmt& want) {
  if (ir::structural_equal(got, want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got\n"
                                       << ir::to_string(got) << "want\n"
                                       << ir::to_string(want);
}

}  // namespace kiln::arith::testing
