// Error tests end to end: a compiled function called with a wrong argument count, type,
// rank, dtype or shape returns the packed API's documented message (tir/packed_api.h) and
// touches no memory; schedule primitives used wrongly throw kiln::Error naming the stage and
// the axis.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "e2e/e2e_util.h"

namespace kiln::e2e {
namespace {

using namespace kiln::te;  // NOLINT
using ir::Var;

const DataType f32 = DataType::Float(32);

void expect_error_has(const std::string& msg, const std::vector<std::string>& parts) {
  for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
}

// ---------------------------------------------------------------------------------------------
// Argument checks of a built function

class E2EArgErrors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Tensor A = placeholder({4, 6}, f32, "A");
    Tensor B = placeholder({4, 6}, f32, "B");
    Tensor C = compute(
        {4, 6}, [&](Var i, Var j) { return A(i, j) + B(i, j); }, "C");
    module_ = new runtime::Module(build_host(create_schedule({C}), {A, B, C}, "f"));
  }
  static void TearDownTestSuite() {
    delete module_;
    module_ = nullptr;
  }
  runtime::PackedFunc fn() const { return module_->get_function("f"); }
  static runtime::Module* module_;
};
runtime::Module* E2EArgErrors::module_ = nullptr;

TEST_F(E2EArgErrors, GoodCallWorks) {
  NDArray a = random_array({4, 6}, f32, 1), b = random_array({4, 6}, f32, 2);
  NDArray c = poisoned({4, 6}, f32);
  fn()(a, b, c);
  EXPECT_TRUE(all_close(c, reference({4, 6}, f32, [&](const std::vector<int64_t>& ix) {
                          return at(a, ix) + at(b, ix);
                        })));
}

TEST_F(E2EArgErrors, WrongCount) {
  NDArray a = random_array({4, 6}, f32, 1), b = random_array({4, 6}, f32, 2);
  EXPECT_EQ(error_of([&] { fn()(a, b); }), "f: expected 3 arguments, got 2");
  NDArray c = poisoned({4, 6}, f32);
  EXPECT_EQ(error_of([&] { call(fn(), {a, b, c, c}); }), "f: expected 3 arguments, got 4");
  EXPECT_EQ(error_of([&] { fn()(); }), "f: expected 3 arguments, got 0");
}

TEST_F(E2EArgErrors, WrongTypeCode) {
  NDArray a = random_array({4, 6}, f32, 1), c = poisoned({4, 6}, f32);
  EXPECT_EQ(error_of([&] { fn()(a, 5, c); }),
            "f: argument 1 (B): type code expected array, got int");
  EXPECT_EQ(error_of([&] { fn()(a, 2.5, c); }),
            "f: argument 1 (B): type code expected array, got float");
  EXPECT_EQ(error_of([&] { fn()(nullptr, a, c); }),
            "f: argument 0 (A): type code expected array, got null");
}

TEST_F(E2EArgErrors, WrongRank) {
  NDArray a1 = random_array({24}, f32, 1), b = random_array({4, 6}, f32, 2);
  NDArray c = poisoned({4, 6}, f32);
  EXPECT_EQ(error_of([&] { fn()(a1, b, c); }), "f: argument 0 (A): ndim expected 2, got 1");
  NDArray c3 = poisoned({4, 6, 1}, f32);
  EXPECT_EQ(error_of([&] { fn()(b, b, c3); }), "f: argument 2 (C): ndim expected 2, got 3");
}

TEST_F(E2EArgErrors, WrongDtype) {
  NDArray ai = random_array({4, 6}, DataType::Int(32), 1, -5, 5);
  NDArray b = random_array({4, 6}, f32, 2), c = poisoned({4, 6}, f32);
  EXPECT_EQ(error_of([&] { fn()(ai, b, c); }),
            "f: argument 0 (A): dtype expected float32, got int32");
  NDArray c64 = poisoned({4, 6}, DataType::Float(64));
  EXPECT_EQ(error_of([&] { fn()(b, b, c64); }),
            "f: argument 2 (C): dtype expected float32, got float64");
}

TEST_F(E2EArgErrors, WrongShapeLeavesOutputUntouched) {
  NDArray a = random_array({4, 6}, f32, 1), b = random_array({4, 6}, f32, 2);
  NDArray c = poisoned({4, 5}, f32);
  EXPECT_EQ(error_of([&] { fn()(a, b, c); }), "f: argument 2 (C): shape[1] expected 6, got 5");
  for (int64_t i = 0; i < c.numel(); ++i) EXPECT_TRUE(std::isnan(c.data_as<float>()[i]));
  NDArray b2 = random_array({3, 6}, f32, 3), c2 = poisoned({4, 6}, f32);
  EXPECT_EQ(error_of([&] { fn()(a, b2, c2); }), "f: argument 1 (B): shape[0] expected 4, got 3");
}

TEST(E2EBuildErrors, BindOnCpuIsRejectedClearly) {
  Tensor A = placeholder({64}, f32, "A");
  Tensor C = compute(
      {64}, [&](Var i) { return A(i) * 2.0f; }, "C");
  auto s = create_schedule({C});
  auto [o, i] = s[C].split(C->axis[0], 16);
  s[C].bind(o, thread_axis("blockIdx.x"));
  s[C].bind(i, thread_axis("threadIdx.x"));
  std::string msg = error_of([&] { build_host(s, {A, C}, "f"); });
  // The message names the loop, the thread axis and why it cannot run on a CPU.
  expect_error_has(msg, {"i.outer", "bound to GPU thread 'blockIdx.x'", "CPU"});
}

// ---------------------------------------------------------------------------------------------
// Schedule primitive misuse

struct Mm {
  Tensor A, B, P, C;
  IterVar k;
  Mm() {
    A = placeholder({8, 8}, f32, "A");
    B = placeholder({8, 8}, f32, "B");
    P = compute(
        {8, 8}, [&](Var i, Var j) { return A(i, j) + 1.0f; }, "P");
    k = reduce_axis({0, 8}, "k");
    C = compute(
        {8, 8}, [&](Var i, Var j) { return te::sum(P(i, k) * B(k, j), {k}); }, "C");
  }
};

TEST(E2EScheduleErrors, SplitOfNonLeaf) {
  Mm m;
  auto s = create_schedule({m.C});
  s[m.C].split(m.C->axis[0], 4);
  expect_error_has(error_of([&] { s[m.C].split(m.C->axis[0], 2); }),
                   {"split", "axis 'i'", "stage 'C'", "not a loop"});
}

TEST(E2EScheduleErrors, FuseNonAdjacent) {
  Mm m;
  auto s = create_schedule({m.C});
  // Leaves: i, j, k — i and k are not adjacent.
  expect_error_has(error_of([&] { s[m.C].fuse(m.C->axis[0], m.C->reduce_axis[0]); }),
                   {"fuse", "'i'", "'k'", "stage 'C'", "adjacent"});
  // Inner before outer is not adjacent in the required order either.
  expect_error_has(error_of([&] { s[m.C].fuse(m.C->axis[1], m.C->axis[0]); }),
                   {"fuse", "'j'", "'i'", "stage 'C'"});
}

TEST(E2EScheduleErrors, ComputeAtNonConsumer) {
  Mm m;
  Tensor D = compute(
      {8, 8}, [&](Var i, Var j) { return m.A(i, j) * 2.0f; }, "D");
  auto s = create_schedule({m.C, D});
  // D does not read P.
  expect_error_has(error_of([&] { s[m.P].compute_at(s[D], D->axis[0]); }),
                   {"compute_at", "stage 'D'", "'P'"});
  // Axis of another stage.
  expect_error_has(error_of([&] { s[m.P].compute_at(s[m.C], D->axis[0]); }),
                   {"compute_at", "axis 'i'", "stage 'C'"});
}

TEST(E2EScheduleErrors, ComputeInlineOfReductionOrOutput) {
  Mm m;
  Tensor E = compute(
      {8, 8}, [&](Var i, Var j) { return m.C(i, j) * 2.0f; }, "E");
  auto s = create_schedule({E});
  expect_error_has(error_of([&] { s[m.C].compute_inline(); }),
                   {"compute_inline", "stage 'C'", "reduction"});
  expect_error_has(error_of([&] { s[E].compute_inline(); }),
                   {"compute_inline", "stage 'E'", "output"});
}

TEST(E2EScheduleErrors, ParallelOnReductionAxis) {
  Mm m;
  auto s = create_schedule({m.C});
  expect_error_has(error_of([&] { s[m.C].parallel(m.C->reduce_axis[0]); }),
                   {"parallel", "axis 'k'", "stage 'C'", "reduction"});
}

TEST(E2EScheduleErrors, ReorderWithDuplicates) {
  Mm m;
  auto s = create_schedule({m.C});
  expect_error_has(error_of([&] {
                     s[m.C].reorder({m.C->axis[1], m.C->axis[1]});
                   }),
                   {"reorder", "axis 'j'", "twice", "stage 'C'"});
}

TEST(E2EScheduleErrors, CacheWriteAfterSplit) {
  Mm m;
  auto s = create_schedule({m.C});
  s[m.C].split(m.C->axis[1], 4);
  expect_error_has(error_of([&] { s.cache_write(m.C, "local"); }),
                   {"cache_write", "stage 'C'", "before"});
}

TEST(E2EScheduleErrors, VectorizeNonLeafAndSplitBadFactor) {
  Mm m;
  auto s = create_schedule({m.C});
  auto [o, i] = s[m.C].split(m.C->axis[1], 4);
  expect_error_has(error_of([&] { s[m.C].vectorize(m.C->axis[1]); }),
                   {"vectorize", "axis 'j'", "stage 'C'"});
  expect_error_has(error_of([&] { s[m.C].split(o, 0); }),
                   {"split", "positive", "j.outer", "stage 'C'"});
}

}  // namespace
}  // namespace kiln::e2e
