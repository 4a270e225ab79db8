// What lower() derives from the schedule besides loops: fast-math only where a pragma asks.
#include <gtest/gtest.h>

#include "kiln/tir/lower.h"

namespace kiln::te {
namespace {

TEST(Lower, FastMathOnlyWithThePragma) {
  auto A = placeholder({64}, DataType::Float(32), "A");
  auto B = compute(
      {64}, [&](Var i) { return A(i) * 2.0f + 1.0f; }, "B");
  auto s = create_schedule({B});
  EXPECT_EQ(tir::lower(s, {A, B}, "f").attr("fast_math"), "");
  s[B].pragma(B->axis[0], "fast_math");
  EXPECT_EQ(tir::lower(s, {A, B}, "f").attr("fast_math"), "1");
}

}  // namespace
}  // namespace kiln::te
