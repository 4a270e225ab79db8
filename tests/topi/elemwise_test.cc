// Element-wise unary operators against naive C++ on seeded random inputs, built with the
// default schedule and with schedule_injective; all ops of a dtype share one build per shape.
#include "kiln/topi/elemwise.h"

#include <gtest/gtest.h>

#include <cmath>

#include "topi/topi_test_util.h"

namespace kiln::topi::testing {
namespace {

struct UnaryCase {
  std::string name;
  std::function<te::Tensor(const te::Tensor&)> op;
  std::function<double(double)> ref;
  DataType out = f32;
};

double sgn(double v) { return v > 0 ? 1 : v < 0 ? -1 : 0; }

std::vector<UnaryCase> float_cases() {
  return {
      {"relu", [](auto& x) { return relu(x); }, [](double v) { return std::max(v, 0.0); }},
      {"leaky_relu", [](auto& x) { return leaky_relu(x, 0.1); },
       [](double v) { return v > 0 ? v : 0.1 * v; }},
      {"clip", [](auto& x) { return clip(x, -0.5, 0.25); },
       [](double v) { return std::min(std::max(v, -0.5), 0.25); }},
      {"sigmoid", [](auto& x) { return sigmoid(x); },
       [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"tanh", [](auto& x) { return tanh(x); }, [](double v) { return std::tanh(v); }},
      {"exp", [](auto& x) { return exp(x); }, [](double v) { return std::exp(v); }},
      {"log_abs", [](auto& x) { return log(abs(x)); },
       [](double v) { return std::log(std::abs(v)); }},
      {"sqrt_abs", [](auto& x) { return sqrt(abs(x)); },
       [](double v) { return std::sqrt(std::abs(v)); }},
      {"rsqrt_abs", [](auto& x) { return rsqrt(abs(x)); },
       [](double v) { return 1 / std::sqrt(std::abs(v)); }},
      {"erf", [](auto& x) { return erf(x); }, [](double v) { return std::erf(v); }},
      {"gelu", [](auto& x) { return gelu(x); },
       [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {"abs", [](auto& x) { return abs(x); }, [](double v) { return std::abs(v); }},
      {"negative", [](auto& x) { return negative(x); }, [](double v) { return -v; }},
      {"floor", [](auto& x) { return floor(x); },
       [](double v) { return std::floor(static_cast<float>(v)); }},
      {"ceil", [](auto& x) { return ceil(x); },
       [](double v) { return std::ceil(static_cast<float>(v)); }},
      {"round", [](auto& x) { return round(x); },
       [](double v) { return std::round(static_cast<float>(v)); }},
      {"sign", [](auto& x) { return sign(x); }, sgn},
      {"reciprocal", [](auto& x) { return reciprocal(x); }, [](double v) { return 1 / v; }},
      {"softplus", [](auto& x) { return softplus(x); },
       [](double v) { return std::log1p(std::exp(v)); }},
      {"hard_sigmoid", [](auto& x) { return hard_sigmoid(x); },
       [](double v) { return std::min(std::max(0.2 * v + 0.5, 0.0), 1.0); }},
      {"identity", [](auto& x) { return identity(x); }, [](double v) { return v; }},
      {"cast_i32", [](auto& x) { return cast(x, i32); },
       [](double v) { return std::trunc(static_cast<float>(v)); }, i32},
      {"cast_bool", [](auto& x) { return cast(x, boolean); },
       [](double v) { return static_cast<float>(v) != 0; }, boolean},
  };
}

void run_cases(const std::vector<UnaryCase>& cases, const Shape& shape, DataType in_t,
               uint32_t seed, double lo, double hi, bool with_bool) {
  te::Tensor X = input(shape, in_t, "X");
  NDArray x = random_array(shape, in_t, seed, lo, hi);
  std::vector<te::Tensor> outs;
  std::vector<NDArray> want;
  for (const UnaryCase& c : cases) {
    if (!with_bool && c.out.is_bool()) continue;
    outs.push_back(c.op(X));
    want.push_back(reference(shape, c.out, [&](const Shape& i) { return c.ref(at(x, i)); }));
  }
  check({X}, outs, {x}, want, schedule_injective, {2e-5, 2e-5});
}

TEST(TopiElemwise, FloatOpsOddShapes) {
  uint32_t seed = 1;
  for (const Shape& s : std::vector<Shape>{{7}, {3, 13}, {1, 5, 1}}) {
    SCOPED_TRACE(::testing::Message() << "shape " << runtime::shape_str(s));
    run_cases(float_cases(), s, f32, seed++, -3, 3, true);
  }
}

TEST(TopiElemwise, FloatOpsLargeParallelShape) {
  // > kParallelThreshold elements: the topi schedule takes its parallel path. No bool outputs,
  // so the injective schedule vectorizes.
  run_cases(float_cases(), {37, 129}, f32, 11, -3, 3, false);
}

TEST(TopiElemwise, IntegerOps) {
  std::vector<UnaryCase> cases = {
      {"relu", [](auto& x) { return relu(x); }, [](double v) { return std::max(v, 0.0); }, i32},
      {"clip", [](auto& x) { return clip(x, -3, 4); },
       [](double v) { return std::min(std::max(v, -3.0), 4.0); }, i32},
      {"abs", [](auto& x) { return abs(x); }, [](double v) { return std::abs(v); }, i32},
      {"negative", [](auto& x) { return negative(x); }, [](double v) { return -v; }, i32},
      {"sign", [](auto& x) { return sign(x); }, sgn, i32},
      {"cast_f32", [](auto& x) { return cast(x, f32); }, [](double v) { return v; }, f32},
      {"cast_i64", [](auto& x) { return cast(x, i64); }, [](double v) { return v; }, i64},
  };
  run_cases(cases, {5, 19}, i32, 3, -9, 9, false);
}

TEST(TopiElemwise, TagsAndNames) {
  te::Tensor X = input({4}, f32, "X");
  te::Tensor y = relu(X, "my_relu");
  EXPECT_EQ(y.op()->tag, "elemwise,relu");
  EXPECT_EQ(y.op()->name, "my_relu");
  EXPECT_TRUE(is_injective_tag(gelu(X).op()->tag));
}

TEST(TopiElemwise, Errors) {
  te::Tensor I = input({4}, i32, "I");
  te::Tensor X = input({4}, f32, "X");
  EXPECT_NE(error_of([&] { sigmoid(I); }).find("sigmoid: needs a floating-point input, got int32"),
            std::string::npos);
  EXPECT_NE(error_of([&] { clip(X, 1, 0); }).find("clip: min 1 is greater than max 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] { cast(X, DataType::Handle()); }).find("cast: cannot cast to handle"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::topi::testing
