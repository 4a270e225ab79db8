// Deployment: a library exported by the compiler (tests/deploy/export_fixture.cc) is loaded
// by a program linked with the runtime only, called on random data, and checked against a
// naive reference; a wrong call fails with the generated argument check's message. The
// library's directory comes from the environment variable KILN_DEPLOY_DIR (default
// build/deploy).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

#include "kiln/runtime/module.h"
#include "kiln/runtime/ndarray.h"
#include "kiln/support/error.h"

namespace kiln::runtime {
namespace {

std::string library_path() {
  const char* dir = std::getenv("KILN_DEPLOY_DIR");
  return std::string(dir && *dir ? dir : "build/deploy") + "/add.so";
}

NDArray random_array(uint32_t seed) {
  NDArray a = NDArray::empty({16, 64}, DataType::Float(32));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-10.f, 10.f);
  for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = dist(rng);
  return a;
}

TEST(Deploy, LoadAndRun) {
  Module m = Module::load(library_path());
  EXPECT_EQ(m.function_names(), std::vector<std::string>{"add_one"});
  PackedFunc f = m.get_function("add_one");
  NDArray a = random_array(1), b = random_array(2);
  NDArray c = NDArray::empty({16, 64}, DataType::Float(32));
  for (int64_t i = 0; i < c.numel(); ++i) {
    c.data_as<float>()[i] = std::numeric_limits<float>::quiet_NaN();
  }
  f(a, b, c);
  for (int64_t i = 0; i < c.numel(); ++i) {
    ASSERT_EQ(c.data_as<float>()[i], a.data_as<float>()[i] + b.data_as<float>()[i] + 1.0f) << i;
  }
}

TEST(Deploy, WrongShapeIsAnError) {
  Module m = Module::load(library_path());
  PackedFunc f = m.get_function("add_one");
  NDArray a = random_array(3), b = random_array(4);
  NDArray c = NDArray::empty({16, 32}, DataType::Float(32));
  std::string msg;
  try {
    f(a, b, c);
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_EQ(msg, "add_one: argument 2 (C): shape[1] expected 64, got 32");
}

}  // namespace
}  // namespace kiln::runtime
