// GraphExecutor with a data-dependent (bounded) output, without the compiler: lib.so is
// compiled from a small C file (skipped without a C compiler) holding `positives`, which copies
// the positive elements of x float32 [N] into out float32 [N bound] densely and writes their
// count into extent int64 [1]; it fails unless it is called with the bound shape, so the test
// also checks that the executor restores the bound before every run. `overflow` claims an
// extent above the bound. The executor must return the actual shape, change it from run to
// run, report the bounded axis, and refuse malformed "bounded" entries and bad extents.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "common/error.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/support/error.h"

namespace kiln::runtime {
namespace {

using ::kiln::testing::error_of;
using json = nlohmann::json;

constexpr int kN = 16;

constexpr const char* kLibSource = R"(
#include <stdint.h>
typedef union { int64_t v_int64; double v_float64; void* v_handle; const char* v_str; } V;
typedef struct { void* data; int32_t dt, di; int32_t ndim; uint8_t c, b; uint16_t l;
                 int64_t* shape; int64_t* strides; uint64_t off; } A;
void kiln_set_last_error(const char*);
#define EXPORT __attribute__((visibility("default")))
EXPORT int32_t positives(const V* a, const int32_t* c, int32_t n) {
  const A *x = a[0].v_handle, *o = a[1].v_handle, *e = a[2].v_handle;
  if (n != 3 || o->ndim != 1 || o->shape[0] != x->shape[0]) {
    kiln_set_last_error("positives: called without the bound shape");
    return -1;
  }
  int64_t k = 0;
  for (int64_t i = 0; i < x->shape[0]; ++i) {
    float v = ((float*)x->data)[i];
    if (v > 0) ((float*)o->data)[k++] = v;
  }
  ((int64_t*)e->data)[0] = k;
  return 0;
}
EXPORT int32_t overflow(const V* a, const int32_t* c, int32_t n) {
  const A* e = a[2].v_handle;
  ((int64_t*)e->data)[0] = 1000;
  return 0;
}
EXPORT const char __kiln_func_names[] = "positives\0overflow\0";
)";

/// x float32 [N] -> positives -> (out float32 [N] bounded on axis 0, extent int64 [1]).
json bounded_graph(const std::string& func = "positives") {
  json g;
  g["version"] = 1;
  g["nodes"] = {{{"op", "null"}, {"name", "x"}, {"inputs", json::array()}},
                {{"op", "kiln_op"},
                 {"name", "pos"},
                 {"inputs", {{0, 0, 0}}},
                 {"attrs", {{"func_name", func}, {"num_inputs", 1}, {"num_outputs", 2}}}}};
  g["arg_nodes"] = {0};
  g["inputs"] = {"x"};
  g["heads"] = {{1, 0, 0}, {1, 1, 0}};
  g["outputs"] = {"out", "count"};
  g["node_row_ptr"] = {0, 1, 3};
  g["attrs"]["shape"] = {{kN}, {kN}, {1}};
  g["attrs"]["dtype"] = {"float32", "float32", "int64"};
  g["attrs"]["storage_id"] = {0, 1, 2};
  g["bounded"] = {{{"entry", 1}, {"axis", 0}, {"extent_entry", 2}}};
  return g;
}

class DynamicExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "kiln_dynamic_executor_test_" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/lib.c") << kLibSource;
    std::string cmd =
        "cc -shared -fPIC -O1 -o " + dir_ + "/lib.so " + dir_ + "/lib.c > /dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "no C compiler to build a test library";
    lib_ = Module::load(dir_ + "/lib.so");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string create_error(const json& g) {
    return error_of([&] { GraphExecutor::create(g.dump(), lib_, {}, "g.json"); });
  }

  std::string dir_;
  Module lib_;
};

TEST_F(DynamicExecutorTest, ReturnsTheActualShapeEveryRun) {
  GraphExecutor ex = GraphExecutor::create(bounded_graph().dump(), lib_, {}, "g.json");
  EXPECT_EQ(ex.output_info(0).bounded_axis, 0);
  EXPECT_EQ(ex.output_info(0).shape, std::vector<int64_t>{kN});
  EXPECT_EQ(ex.output_info(1).bounded_axis, -1);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  // Positive fractions from none to all, so the extent shrinks and grows between runs.
  for (double frac : {0.5, 0.0, 1.0, 0.25, 0.8}) {
    SCOPED_TRACE("fraction " + std::to_string(frac));
    NDArray x = NDArray::empty({kN}, DataType::Float(32));
    std::vector<float> want;
    for (int i = 0; i < kN; ++i) {
      float v = 0.1f + std::abs(u(rng));
      if (std::uniform_real_distribution<double>(0, 1)(rng) >= frac) v = -v;
      x.data_as<float>()[i] = v;
      if (v > 0) want.push_back(v);
    }
    ex.set_input("x", x);
    ex.run();
    NDArray out = ex.get_output("out");
    ASSERT_EQ(out.shape(), std::vector<int64_t>{static_cast<int64_t>(want.size())});
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(out.data_as<float>()[i], want[i]) << i;
    NDArray count = ex.get_output(1);
    EXPECT_EQ(count.data_as<int64_t>()[0], static_cast<int64_t>(want.size()));
  }
}

TEST_F(DynamicExecutorTest, RefusesAnExtentAboveTheBound) {
  GraphExecutor ex = GraphExecutor::create(bounded_graph("overflow").dump(), lib_, {}, "g.json");
  NDArray x = NDArray::empty({kN}, DataType::Float(32));
  for (int i = 0; i < kN; ++i) x.data_as<float>()[i] = static_cast<float>(i) - 3.5f;
  ex.set_input(0, x);
  std::string msg = error_of([&] { ex.run(); });
  EXPECT_NE(msg.find("node 1 ('pos'), function 'overflow': the kernel gave extent 1000 for axis 0"),
            std::string::npos)
      << msg;
}

TEST_F(DynamicExecutorTest, RefusesMalformedBoundedEntries) {
  json g = bounded_graph();
  g["bounded"][0]["axis"] = 1;
  std::string msg = create_error(g);
  EXPECT_NE(msg.find("bounded[0] axis 1 out of range for shape [16]"), std::string::npos) << msg;

  g = bounded_graph();
  g["bounded"][0]["extent_entry"] = 0;  // the input x: another node
  msg = create_error(g);
  EXPECT_NE(msg.find("must be two outputs of the same kiln_op node"), std::string::npos) << msg;

  g = bounded_graph();
  g["attrs"]["dtype"][2] = "int32";
  msg = create_error(g);
  EXPECT_NE(msg.find("extent_entry 2 must be int64"), std::string::npos) << msg;

  g = bounded_graph();
  g["bounded"][0]["entry"] = 7;
  msg = create_error(g);
  EXPECT_NE(msg.find("out of range [0, 3)"), std::string::npos) << msg;

  g = bounded_graph();
  g["bounded"].push_back(g["bounded"][0]);
  msg = create_error(g);
  EXPECT_NE(msg.find("bounded[1] entry 1 is listed twice"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln::runtime
