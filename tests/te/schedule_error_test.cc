// Every schedule primitive's failure, matched against its message (STYLE.md item 9).
#include <gtest/gtest.h>

#include <functional>

#include "common/error.h"
#include "kiln/te/schedule.h"
#include "kiln/tir/lower.h"

namespace kiln::te {
namespace {

using ::kiln::testing::error_of;

#define EXPECT_ERROR(stmt, substr) EXPECT_THAT_ERROR(error_of([&] { stmt; }), substr)
#define EXPECT_THAT_ERROR(msg, substr) \
  EXPECT_NE(msg.find(substr), std::string::npos) << "message: " << msg

struct Fixture {
  Tensor A = placeholder({16, 16}, DataType::Float(32), "A");
  IterVar k = reduce_axis({0, 16}, "k");
  Tensor P = compute(
      {16, 16}, [&](Var i, Var j) { return A(i, j) + 1.0f; }, "P");
  Tensor R = compute(
      {16}, [&](Var i) { return sum(P(i, k), {k}); }, "R");
  Tensor Q = compute(
      {16}, [&](Var i) { return A(i, 0) * 3.0f; }, "Q");
  Schedule s = create_schedule({R});
};

TEST(ScheduleErrors, SplitNonLeaf) {
  Fixture f;
  auto i = f.R->axis[0];
  f.s[f.R].split(i, 4);
  EXPECT_ERROR(f.s[f.R].split(i, 2), "split: axis 'i' is not a loop of stage 'R'");
}

TEST(ScheduleErrors, SplitBadFactor) {
  Fixture f;
  EXPECT_ERROR(f.s[f.R].split(f.R->axis[0], 0), "split: factor must be positive, got 0");
}

TEST(ScheduleErrors, SplitAxisOfOtherStage) {
  Fixture f;
  EXPECT_ERROR(f.s[f.R].split(f.P->axis[0], 2), "axis 'i' is not a loop of stage 'R'");
}

TEST(ScheduleErrors, FuseNotAdjacent) {
  Fixture f;
  EXPECT_ERROR(f.s[f.P].fuse(f.P->axis[1], f.P->axis[0]),
               "fuse: axes 'j' and 'i' of stage 'P' must be adjacent loops");
}

TEST(ScheduleErrors, FuseReduceWithSpatial) {
  Fixture f;
  EXPECT_ERROR(f.s[f.R].fuse(f.R->axis[0], f.k),
               "fuse: cannot fuse a reduction axis with a data-parallel axis");
}

TEST(ScheduleErrors, ReorderDuplicate) {
  Fixture f;
  EXPECT_ERROR(f.s[f.P].reorder({f.P->axis[0], f.P->axis[0]}),
               "reorder: axis 'i' appears twice (stage 'P')");
}

TEST(ScheduleErrors, ComputeAtNonConsumer) {
  Fixture f;
  Schedule s = create_schedule({f.R, f.Q});
  EXPECT_ERROR(s[f.P].compute_at(s[f.Q], f.Q->axis[0]),
               "compute_at: stage 'Q' does not read stage 'P'");
}

TEST(ScheduleErrors, ComputeAtForeignAxis) {
  Fixture f;
  EXPECT_ERROR(f.s[f.P].compute_at(f.s[f.R], f.P->axis[0]),
               "compute_at: axis 'i' is not a loop of stage 'R'");
}

TEST(ScheduleErrors, ComputeAtOutput) {
  Fixture f;
  EXPECT_ERROR(f.s[f.R].compute_at(f.s[f.P], f.P->axis[0]), "compute_at: stage 'R' is an output");
}

TEST(ScheduleErrors, InlineReductionOrOutput) {
  Fixture f;
  EXPECT_ERROR(f.s[f.R].compute_inline(), "compute_inline: stage 'R' is an output");
  auto T = compute(
      {16}, [&](Var i) { return f.R(i) * 2.0f; }, "T");
  Schedule s = create_schedule({T});
  EXPECT_ERROR(s[f.R].compute_inline(),
               "compute_inline: stage 'R' is a reduction and cannot be inlined");
  EXPECT_ERROR(s[f.A].compute_inline(), "compute_inline: stage 'A' is not a compute stage");
}

TEST(ScheduleErrors, ParallelReduction) {
  Fixture f;
  EXPECT_ERROR(f.s[f.R].parallel(f.k), "parallel: axis 'k' of stage 'R' is a reduction axis");
}

TEST(ScheduleErrors, CacheWriteAfterScheduling) {
  Fixture f;
  f.s[f.R].split(f.R->axis[0], 4);
  EXPECT_ERROR(f.s.cache_write(f.R, "local"),
               "cache_write: stage 'R' already has schedule primitives applied");
}

TEST(ScheduleErrors, CacheReadOfNonReader) {
  Fixture f;
  Schedule s = create_schedule({f.R, f.Q});
  EXPECT_ERROR(s.cache_read(f.P, "local", {f.Q}), "cache_read: stage 'Q' does not read tensor P");
}

TEST(ScheduleErrors, PrefetchIndexAndLocality) {
  Fixture f;
  auto i = f.R->axis[0];
  EXPECT_ERROR(f.s[f.R].prefetch(f.A, i, {i->var}),
               "prefetch: tensor 'A' has 2 dimensions, got 1 indices (stage 'R', axis 'i')");
  EXPECT_ERROR(f.s[f.R].prefetch(f.A, i, {i->var, 0}, 4),
               "prefetch: locality 4 is not 0..3 (stage 'R', axis 'i')");
  auto [o, in] = f.s[f.R].split(i, 4);
  EXPECT_ERROR(f.s[f.R].prefetch(f.A, i, {i->var, 0}),
               "prefetch: axis 'i' is not a loop of stage 'R'");
}

TEST(ScheduleErrors, BadScopeAndAlign) {
  Fixture f;
  EXPECT_ERROR(f.s[f.P].set_scope("texture"), "set_scope: unknown storage scope 'texture'");
  EXPECT_ERROR(f.s[f.P].storage_align(f.P->axis[1], 0, 0),
               "storage_align: need factor > 0 and 0 <= offset < factor");
}

TEST(ScheduleErrors, AttachedToLoopThatWasSplitLater) {
  Fixture f;
  f.s[f.P].compute_at(f.s[f.R], f.k);
  f.s[f.R].split(f.k, 4);
  EXPECT_ERROR(tir::lower(f.s, {f.A, f.R}, "f"),
               "stage 'P' is computed at axis 'k' of stage 'R', which is no longer one of its "
               "loops");
}

TEST(ScheduleErrors, MissingInputArgument) {
  Fixture f;
  EXPECT_ERROR(tir::lower(f.s, {f.R}, "f"),
               "lower f: input tensor A is read by the schedule but is not among the arguments");
}

TEST(TensorErrors, WrongIndexCountAndBadLambda) {
  Fixture f;
  EXPECT_ERROR(f.A(Expr(1)), "tensor A has 2 dimensions but is indexed with 1 indices");
  EXPECT_ERROR(compute(
                   {4, 4}, [&](Var i) { return f.A(i, i); }, "X"),
               "compute: the lambda's parameter count does not match the shape's 2 dimensions");
  EXPECT_ERROR(compute(
                   {4}, [&](Var i) { return sum(f.A(i, f.k), {f.k}) + 1.0f; }, "Y"),
               "compute Y: a reduction must be the whole body");
}

}  // namespace
}  // namespace kiln::te
