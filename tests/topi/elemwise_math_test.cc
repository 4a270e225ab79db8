// The trigonometric / hyperbolic element-wise operators, round_even and isnan against the C
// library on seeded random inputs (within each function's domain), in float32 and float64,
// with the default schedule and schedule_injective (which vectorizes: the libm calls are
// scalarized per lane).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/topi/elemwise.h"
#include "topi/topi_test_util.h"

namespace kiln::topi::testing {
namespace {

struct MathCase {
  std::string name;
  te::Tensor (*op)(const te::Tensor&, const std::string&);
  double (*ref)(double);
  double lo, hi;  // input range
};

void run_case(const MathCase& c, const Shape& shape, DataType t, uint32_t seed) {
  SCOPED_TRACE(c.name + " " + t.str());
  te::Tensor X = input(shape, t, "X");
  NDArray x = random_array(shape, t, seed, c.lo, c.hi);
  te::Tensor y = c.op(X, c.name);
  NDArray want = reference(shape, t, [&](const Shape& i) { return c.ref(at(x, i)); });
  check({X}, {y}, {x}, {want}, schedule_injective, {2e-5, 2e-5});
}

TEST(TopiElemwiseMath, TrigAndHyperbolic) {
  const MathCase cases[] = {
      {"sin", sin, [](double v) { return std::sin(v); }, -6, 6},
      {"cos", cos, [](double v) { return std::cos(v); }, -6, 6},
      {"tan", tan, [](double v) { return std::tan(v); }, -1.4, 1.4},
      {"asin", asin, [](double v) { return std::asin(v); }, -0.99, 0.99},
      {"acos", acos, [](double v) { return std::acos(v); }, -0.99, 0.99},
      {"atan", atan, [](double v) { return std::atan(v); }, -10, 10},
      {"sinh", sinh, [](double v) { return std::sinh(v); }, -4, 4},
      {"cosh", cosh, [](double v) { return std::cosh(v); }, -4, 4},
      {"asinh", asinh, [](double v) { return std::asinh(v); }, -20, 20},
      {"acosh", acosh, [](double v) { return std::acosh(v); }, 1.01, 20},
      {"atanh", atanh, [](double v) { return std::atanh(v); }, -0.95, 0.95},
  };
  uint32_t seed = 5;
  for (const MathCase& c : cases) {
    run_case(c, {3, 37}, DataType::Float(32), seed++);
    run_case(c, {41}, DataType::Float(64), seed++);
  }
}

TEST(TopiElemwiseMath, RoundHalfToEven) {
  // Halves exactly (k + 0.5) and random values: ties go to the even neighbour.
  Shape shape{64};
  te::Tensor X = input(shape, f32, "X");
  NDArray x = random_array(shape, f32, 9, -8, 8);
  for (int64_t k = 0; k < 16; ++k) x.data_as<float>()[k] = static_cast<float>(k - 8) + 0.5f;
  NDArray want = reference(shape, f32, [&](const Shape& i) {
    return static_cast<double>(std::nearbyint(static_cast<float>(at(x, i))));
  });
  EXPECT_EQ(want.data_as<float>()[8 + 2], 2.0f);  // 2.5 -> 2 (the reference itself)
  check({X}, {round_even(X)}, {x}, {want}, schedule_injective, {0, 0});
}

TEST(TopiElemwiseMath, IsNaN) {
  Shape shape{4, 9};
  te::Tensor X = input(shape, f32, "X");
  NDArray x = random_array(shape, f32, 13, -5, 5);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t k = 0; k < x.numel(); k += 3) x.data_as<float>()[k] = nan;
  x.data_as<float>()[1] = std::numeric_limits<float>::infinity();
  NDArray want = reference(shape, boolean, [&](const Shape& i) { return std::isnan(at(x, i)); });
  check({X}, {isnan(X)}, {x}, {want}, schedule_injective, {0, 0});
}

TEST(TopiElemwiseMath, Errors) {
  te::Tensor I = input({4}, i32, "I");
  EXPECT_NE(error_of([&] { sin(I); }).find("sin: needs a floating-point input, got int32"),
            std::string::npos);
  EXPECT_NE(error_of([&] { atanh(I); }).find("atanh: needs a floating-point input"),
            std::string::npos);
  EXPECT_NE(error_of([&] { round_even(I); }).find("round_even: needs a floating-point input"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::topi::testing
