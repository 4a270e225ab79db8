// Binary / ternary broadcast operators against naive C++ with numpy broadcasting, including
// size-1 dimensions on either side and rank mismatch; error messages for bad shapes/dtypes.
#include "kiln/topi/broadcast.h"

#include <gtest/gtest.h>

#include <cmath>

#include "topi/topi_test_util.h"

namespace kiln::topi::testing {
namespace {

using BinOp = std::function<te::Tensor(const te::Tensor&, const te::Tensor&)>;
struct BinCase {
  std::string name;
  BinOp op;
  std::function<double(double, double)> ref;
  DataType out;
};

Shape bshape(const Shape& a, const Shape& b) { return broadcast_shape(a, b); }

void run_binary(const std::vector<BinCase>& cases, const Shape& sa, const Shape& sb, DataType t,
                uint32_t seed, double lo, double hi) {
  SCOPED_TRACE(::testing::Message()
               << runtime::shape_str(sa) << " with " << runtime::shape_str(sb) << " " << t);
  te::Tensor A = input(sa, t, "A"), B = input(sb, t, "B");
  NDArray a = random_array(sa, t, seed, lo, hi), b = random_array(sb, t, seed + 100, lo, hi);
  Shape so = bshape(sa, sb);
  std::vector<te::Tensor> outs;
  std::vector<NDArray> want;
  for (const BinCase& c : cases) {
    outs.push_back(c.op(A, B));
    EXPECT_EQ(shape_of(outs.back()), so);
    want.push_back(reference(
        so, c.out, [&](const Shape& i) { return c.ref(bcast_at(a, i), bcast_at(b, i)); }));
  }
  check({A, B}, outs, {a, b}, want, schedule_injective, {2e-5, 2e-5});
}

std::vector<BinCase> arith_cases(DataType t) {
  std::vector<BinCase> c = {
      {"add", [](auto& a, auto& b) { return add(a, b); }, [](double x, double y) { return x + y; },
       t},
      {"subtract", [](auto& a, auto& b) { return subtract(a, b); },
       [](double x, double y) { return x - y; }, t},
      {"multiply", [](auto& a, auto& b) { return multiply(a, b); },
       [](double x, double y) { return x * y; }, t},
      {"maximum", [](auto& a, auto& b) { return maximum(a, b); },
       [](double x, double y) { return std::max(x, y); }, t},
      {"minimum", [](auto& a, auto& b) { return minimum(a, b); },
       [](double x, double y) { return std::min(x, y); }, t},
  };
  if (t.is_float()) {
    c.push_back({"divide", [](auto& a, auto& b) { return divide(a, b); },
                 [](double x, double y) { return static_cast<float>(x) / static_cast<float>(y); },
                 t});
  } else {
    c.push_back({"floor_divide", [](auto& a, auto& b) { return divide(a, b); },
                 [](double x, double y) { return std::floor(x / y); }, t});
  }
  return c;
}

std::vector<BinCase> compare_cases() {
  return {
      {"equal", [](auto& a, auto& b) { return equal(a, b); },
       [](double x, double y) { return x == y; }, boolean},
      {"not_equal", [](auto& a, auto& b) { return not_equal(a, b); },
       [](double x, double y) { return x != y; }, boolean},
      {"less", [](auto& a, auto& b) { return less(a, b); },
       [](double x, double y) { return x < y; }, boolean},
      {"less_equal", [](auto& a, auto& b) { return less_equal(a, b); },
       [](double x, double y) { return x <= y; }, boolean},
      {"greater", [](auto& a, auto& b) { return greater(a, b); },
       [](double x, double y) { return x > y; }, boolean},
      {"greater_equal", [](auto& a, auto& b) { return greater_equal(a, b); },
       [](double x, double y) { return x >= y; }, boolean},
      {"logical_and", [](auto& a, auto& b) { return logical_and(a, b); },
       [](double x, double y) { return x != 0 && y != 0; }, boolean},
  };
}

const std::vector<std::pair<Shape, Shape>> kShapePairs = {
    {{3, 13}, {3, 13}},   // same shape
    {{3, 13}, {13}},      // rank mismatch
    {{7, 1}, {1, 13}},    // both stretch
    {{2, 1, 5}, {3, 1}},  // mixed, rank mismatch
    {{1}, {7}},           // scalar-like
    {{64, 1}, {64, 97}},  // large (parallel path)
};

TEST(TopiBroadcast, FloatArithmetic) {
  uint32_t seed = 1;
  for (auto& [sa, sb] : kShapePairs) run_binary(arith_cases(f32), sa, sb, f32, seed++, -2, 2);
}

TEST(TopiBroadcast, IntArithmeticFloorDivide) {
  run_binary(arith_cases(i32), {5, 1}, {1, 11}, i32, 7, -20, 20);
  run_binary(arith_cases(i32), {9}, {4, 9}, i32, 8, -20, 20);
}

TEST(TopiBroadcast, Power) {
  // Positive bases keep pow real.
  std::vector<BinCase> c = {{"power", [](auto& a, auto& b) { return power(a, b); },
                             [](double x, double y) { return std::pow(x, y); }, f32}};
  run_binary(c, {4, 7}, {7}, f32, 9, 0.1, 3);
}

TEST(TopiBroadcast, ComparisonsProduceBool) {
  // Integer inputs in a small range make ties (equal) common.
  run_binary(compare_cases(), {3, 13}, {13}, i32, 21, -3, 3);
  run_binary(compare_cases(), {2, 1, 7}, {3, 1}, f32, 22, -1, 1);
}

TEST(TopiBroadcast, LogicalOps) {
  te::Tensor A = input({4, 9}, boolean, "A"), B = input({9}, boolean, "B");
  NDArray a = random_array({4, 9}, boolean, 1), b = random_array({9}, boolean, 2);
  std::vector<te::Tensor> outs = {logical_and(A, B), logical_or(A, B), logical_xor(A, B),
                                  logical_not(A)};
  auto ref = [&](std::function<double(double, double)> f) {
    return reference({4, 9}, boolean,
                     [&](const Shape& i) { return f(bcast_at(a, i), bcast_at(b, i)); });
  };
  check({A, B}, outs, {a, b},
        {ref([](double x, double y) { return x && y; }),
         ref([](double x, double y) { return x || y; }),
         ref([](double x, double y) { return (x != 0) != (y != 0); }),
         ref([](double x, double) { return !x; })});
}

TEST(TopiBroadcast, WhereThreeWay) {
  for (const auto& shapes : std::vector<std::vector<Shape>>{
           {{3, 1}, {1, 13}, {13}}, {{7}, {7}, {7}}, {{1, 5}, {4, 1}, {1}}, {{50, 1}, {90}, {1}}}) {
    const Shape &sc = shapes[0], &sa = shapes[1], &sb = shapes[2];
    te::Tensor C = input(sc, boolean, "C"), A = input(sa, f32, "A"), B = input(sb, f32, "B");
    NDArray c = random_array(sc, boolean, 3), a = random_array(sa, f32, 4),
            b = random_array(sb, f32, 5);
    te::Tensor W = where(C, A, B);
    Shape so = bshape(bshape(sc, sa), sb);
    ASSERT_EQ(shape_of(W), so);
    NDArray want = reference(
        so, f32, [&](const Shape& i) { return bcast_at(c, i) ? bcast_at(a, i) : bcast_at(b, i); });
    check({C, A, B}, {W}, {c, a, b}, {want});
  }
  // A float condition (non-zero is true).
  te::Tensor C = input({6}, f32, "C"), A = input({6}, f32, "A");
  NDArray c = random_array({6}, f32, 6), a = random_array({6}, f32, 7);
  set_element(c, 2, 0.0);
  NDArray want =
      reference({6}, f32, [&](const Shape& i) { return at(c, i) != 0 ? at(a, i) : at(c, i); });
  check({C, A}, {where(C, A, C)}, {c, a}, {want});
}

TEST(TopiBroadcast, BroadcastToAndExpand) {
  te::Tensor X = input({3, 1}, f32, "X");
  NDArray x = random_array({3, 1}, f32, 8);
  te::Tensor Y = broadcast_to(X, {2, 3, 5});
  te::Tensor Z = expand(X, {1, 4});  // bidirectional: [3, 4]
  ASSERT_EQ(shape_of(Z), (Shape{3, 4}));
  check({X}, {Y, Z}, {x},
        {reference({2, 3, 5}, f32,
                   [&](const Shape& i) {
                     return at(x, {i[1], 0});
                   }),
         reference({3, 4}, f32, [&](const Shape& i) {
           return at(x, {i[0], 0});
         })});
}

TEST(TopiBroadcast, Errors) {
  te::Tensor A = input({2, 3}, f32, "A"), B = input({4}, f32, "B"), I = input({2, 3}, i32, "I");
  EXPECT_EQ(error_of([&] { add(A, B); }), "add: cannot broadcast shapes [2, 3] and [4]");
  EXPECT_EQ(error_of([&] { multiply(A, I); }), "multiply: dtype mismatch: float32 and int32");
  EXPECT_EQ(error_of([&] { where(A, A, B); }),
            "where: cannot broadcast shapes [2, 3], [2, 3] and [4]");
  EXPECT_EQ(error_of([&] {
              broadcast_to(A, {3, 3});
            }),
            "broadcast_to: cannot broadcast shape [2, 3] to [3, 3]");
  EXPECT_NE(error_of([&] { power(I, I); }).find("power: needs floating-point inputs"),
            std::string::npos);
  EXPECT_EQ(error_of([&] {
              broadcast_shape({2, 3}, {3, 2}, "f");
            }),
            "f: cannot broadcast shapes [2, 3] and [3, 2]");
}

}  // namespace
}  // namespace kiln::topi::testing
