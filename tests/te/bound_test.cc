// Bound inference: ranges of root and derived axes through split, fuse and compute_at.
#include <gtest/gtest.h>

#include "kiln/arith/analyzer.h"
#include "kiln/ir/printer.h"
#include "kiln/te/schedule_ops.h"

namespace kiln::te {
namespace {

std::string range_str(const BoundMap& b, const IterVar& iv) {
  auto it = b.find(iv.get());
  if (it == b.end()) return "<none>";
  return "[" + to_string(arith::simplify(it->second->min)) + ", " +
         to_string(arith::simplify(it->second->extent)) + "]";
}

TEST(InferBound, SplitAndFuse) {
  auto A = placeholder({37, 12}, DataType::Float(32), "A");
  auto B = compute(
      {37, 12}, [&](Var i, Var j) { return A(i, j) * 2.0f; }, "B");
  auto s = create_schedule({B});
  auto [io, ii] = s[B].split(B->axis[0], 8);
  auto [jo, ji] = s[B].split_nparts(B->axis[1], 3);
  auto f = s[B].fuse(ii, jo);
  BoundMap b = infer_bound(s);
  EXPECT_EQ(range_str(b, B->axis[0]), "[0, 37]");
  EXPECT_EQ(range_str(b, io), "[0, 5]");  // ceil(37 / 8)
  EXPECT_EQ(range_str(b, ii), "[0, 8]");
  EXPECT_EQ(range_str(b, jo), "[0, 3]");
  EXPECT_EQ(range_str(b, ji), "[0, 4]");
  EXPECT_EQ(range_str(b, f), "[0, 24]");
}

TEST(InferBound, FactorLargerThanExtent) {
  auto A = placeholder({5}, DataType::Float(32), "A");
  auto B = compute(
      {5}, [&](Var i) { return A(i) + 1.0f; }, "B");
  auto s = create_schedule({B});
  auto [io, ii] = s[B].split(B->axis[0], 16);
  BoundMap b = infer_bound(s);
  EXPECT_EQ(range_str(b, io), "[0, 1]");
  EXPECT_EQ(range_str(b, ii), "[0, 5]");
}

TEST(InferBound, ComputeAtGivesSymbolicRegion) {
  // B reads a 3-wide window of P; P computed per tile of 4 outputs of B.
  auto A = placeholder({64}, DataType::Float(32), "A");
  auto P = compute(
      {66}, [&](Var i) { return A(min(i, 63)) * 2.0f; }, "P");
  auto B = compute(
      {64}, [&](Var i) { return P(i) + P(i + 1) + P(i + 2); }, "B");
  auto s = create_schedule({B});
  auto [io, ii] = s[B].split(B->axis[0], 4);
  s[P].compute_at(s[B], io);
  BoundMap b = infer_bound(s);
  // Region of P needed by one tile: [io*4, io*4 + 3 + 2] -> 6 elements starting at io*4.
  EXPECT_EQ(range_str(b, P->axis[0]), "[" + to_string(arith::simplify(io->var * 4)) + ", 6]");
}

TEST(InferBound, ComputeRootGetsWholeRegionAndClampsToDomain) {
  auto A = placeholder({16}, DataType::Float(32), "A");
  auto P = compute(
      {16}, [&](Var i) { return A(i) * 2.0f; }, "P");
  // Reads P at i - 1 and i + 1: the region [-1, 16] is clamped to P's domain [0, 15].
  auto B = compute(
      {16},
      [&](Var i) {
        return if_then_else(i >= 1, P(i - 1), 0.0f) + if_then_else(i < 15, P(i + 1), 0.0f);
      },
      "B");
  auto s = create_schedule({B});
  BoundMap b = infer_bound(s);
  EXPECT_EQ(range_str(b, P->axis[0]), "[0, 16]");
}

TEST(InferBound, ReductionAxesKeepTheirDomain) {
  auto A = placeholder({8, 20}, DataType::Float(32), "A");
  auto k = reduce_axis({0, 20}, "k");
  auto B = compute(
      {8}, [&](Var i) { return sum(A(i, k), {k}); }, "B");
  auto s = create_schedule({B});
  auto [ko, ki] = s[B].split(k, 6);
  BoundMap b = infer_bound(s);
  EXPECT_EQ(range_str(b, k), "[0, 20]");
  EXPECT_EQ(range_str(b, ko), "[0, 4]");
  EXPECT_EQ(range_str(b, ki), "[0, 6]");
}

}  // namespace
}  // namespace kiln::te
