// GraphExecutor without the compiler: the test writes graph.json and params.bin by hand and
// compiles lib.so from a small C file with `cc -shared -fPIC` (skipped when there is no C
// compiler), holding packed functions add, relu, rowsum and one that always fails. The graph
// x → add(w) → relu → add(w) → relu → {y, rowsum(y)} shares storage between dead and new
// entries; its outputs are compared with a plain C++ reference on random inputs, over several
// runs. Then the errors: wrong input shape / dtype, unknown input and output names, an input
// never set, a missing function, a kernel's failure, and malformed graphs, each named.
#include "kiln/runtime/graph_executor.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "common/error.h"
#include "kiln/runtime/params.h"
#include "kiln/support/error.h"

namespace kiln::runtime {
namespace {

using ::kiln::testing::error_of;
using json = nlohmann::json;

constexpr const char* kLibSource = R"(
#include <stdint.h>
#include <stdio.h>
typedef union { int64_t v_int64; double v_float64; void* v_handle; const char* v_str; } V;
typedef struct { void* data; int32_t dt, di; int32_t ndim; uint8_t c, b; uint16_t l;
                 int64_t* shape; int64_t* strides; uint64_t off; } A;
void kiln_set_last_error(const char*);
#define EXPORT __attribute__((visibility("default")))
static int64_t numel(const A* a) {
  int64_t n = 1;
  for (int i = 0; i < a->ndim; ++i) n *= a->shape[i];
  return n;
}
static int check(const char* f, const V* a, const int32_t* c, int32_t n, int32_t want) {
  char msg[128];
  if (n != want) {
    snprintf(msg, sizeof msg, "%s: expected %d arguments, got %d", f, want, n);
    kiln_set_last_error(msg);
    return -1;
  }
  for (int i = 0; i < n; ++i) {
    const A* t = (const A*)a[i].v_handle;
    if (c[i] != 7 || t->c != 2 || t->b != 32 || t->l != 1 || t->strides || t->off) {
      snprintf(msg, sizeof msg, "%s: argument %d is not a compact float32 array", f, i);
      kiln_set_last_error(msg);
      return -1;
    }
  }
  return 0;
}
EXPORT int32_t add(const V* a, const int32_t* c, int32_t n) {
  if (check("add", a, c, n, 3)) return -1;
  const A *x = a[0].v_handle, *y = a[1].v_handle, *z = a[2].v_handle;
  if (numel(x) != numel(z) || numel(y) != numel(z)) {
    kiln_set_last_error("add: shapes differ");
    return -1;
  }
  for (int64_t i = 0; i < numel(z); ++i)
    ((float*)z->data)[i] = ((float*)x->data)[i] + ((float*)y->data)[i];
  return 0;
}
EXPORT int32_t relu(const V* a, const int32_t* c, int32_t n) {
  if (check("relu", a, c, n, 2)) return -1;
  const A *x = a[0].v_handle, *z = a[1].v_handle;
  for (int64_t i = 0; i < numel(z); ++i) {
    float v = ((float*)x->data)[i];
    ((float*)z->data)[i] = v > 0 ? v : 0;
  }
  return 0;
}
EXPORT int32_t rowsum(const V* a, const int32_t* c, int32_t n) {
  if (check("rowsum", a, c, n, 2)) return -1;
  const A *x = a[0].v_handle, *z = a[1].v_handle;
  if (x->ndim != 2 || z->ndim != 1 || z->shape[0] != x->shape[0]) {
    kiln_set_last_error("rowsum: bad shapes");
    return -1;
  }
  for (int64_t r = 0; r < x->shape[0]; ++r) {
    float s = 0;
    for (int64_t k = 0; k < x->shape[1]; ++k) s += ((float*)x->data)[r * x->shape[1] + k];
    ((float*)z->data)[r] = s;
  }
  return 0;
}
EXPORT int32_t bad(const V* a, const int32_t* c, int32_t n) {
  kiln_set_last_error("bad: always fails");
  return -1;
}
EXPORT const char __kiln_func_names[] = "add\0relu\0rowsum\0bad\0";
)";

json op(const std::string& name, const std::string& func, std::vector<std::pair<int, int>> ins) {
  json inputs = json::array();
  for (auto [n, i] : ins) inputs.push_back({n, i, 0});
  return {{"op", "kiln_op"},
          {"name", name},
          {"inputs", inputs},
          {"attrs", {{"func_name", func}, {"num_inputs", ins.size()}, {"num_outputs", 1}}}};
}

/// x, w: [R, C] float32; y = relu(relu(x + w) + w); rowsum = sum(y, axis 1).
json base_graph() {
  const int R = 4, C = 5;
  json g;
  g["version"] = 1;
  g["nodes"] = {
      {{"op", "null"}, {"name", "x"}, {"inputs", json::array()}},
      {{"op", "null"}, {"name", "w"}, {"inputs", json::array()}},
      op("add0", "add", {{0, 0}, {1, 0}}),
      op("relu0", "relu", {{2, 0}}),
      op("add1", "add", {{3, 0}, {1, 0}}),
      op("relu1", "relu", {{4, 0}}),
      op("sum", "rowsum", {{5, 0}}),
  };
  g["arg_nodes"] = {0, 1};
  g["inputs"] = {"x"};
  g["heads"] = {{5, 0, 0}, {6, 0, 0}};
  g["outputs"] = {"y", "rowsum"};
  g["node_row_ptr"] = {0, 1, 2, 3, 4, 5, 6, 7};
  json s = {R, C};
  g["attrs"]["shape"] = {s, s, s, s, s, s, {R}};
  g["attrs"]["dtype"] = std::vector<std::string>(7, "float32");
  // add0 → 2, relu0 → 3, add1 reuses 2 (add0 is dead), relu1 → 3 (relu0 dead), sum → 2.
  g["attrs"]["storage_id"] = {0, 1, 2, 3, 2, 3, 2};
  return g;
}

class GraphExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "kiln_graph_executor_test_" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/lib.c") << kLibSource;
    std::string cmd =
        "cc -shared -fPIC -O1 -o " + dir_ + "/lib.so " + dir_ + "/lib.c > /dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "no C compiler to build a test library";
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    w_ = NDArray::empty({4, 5}, DataType::Float(32));
    for (int i = 0; i < 20; ++i) w_.data_as<float>()[i] = u(rng);
    write_module(base_graph(), {{"w", w_}});
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void write_module(const json& g, const std::map<std::string, NDArray>& params) {
    std::ofstream(dir_ + "/graph.json") << g.dump(2);
    save_params(dir_ + "/params.bin", params);
  }
  /// The error of create() on graph `g` (the test's lib and params).
  std::string create_error(const json& g, std::map<std::string, NDArray> params = {}) {
    if (params.empty()) params = {{"w", w_}};
    Module lib = Module::load(dir_ + "/lib.so");
    return error_of([&] { GraphExecutor::create(g.dump(), lib, params, "g.json"); });
  }

  std::string dir_;
  NDArray w_;
};

TEST_F(GraphExecutorTest, RunsAgainstReference) {
  GraphExecutor ex = GraphExecutor::load(dir_);
  EXPECT_EQ(ex.num_inputs(), 1);
  EXPECT_EQ(ex.num_outputs(), 2);
  EXPECT_EQ(ex.input_names(), std::vector<std::string>{"x"});
  EXPECT_EQ(ex.output_names(), (std::vector<std::string>{"y", "rowsum"}));
  EXPECT_EQ(ex.param_names(), std::vector<std::string>{"w"});
  EXPECT_EQ(ex.num_nodes(), 7);
  EXPECT_EQ(ex.num_op_nodes(), 5);
  EXPECT_EQ(ex.storage_bytes(), 4u * 80u);  // four buffers of 4x5 float32
  EXPECT_EQ(ex.input_info(0).shape, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(ex.output_info(1).dtype, DataType::Float(32));
  EXPECT_EQ(ex.output_info(1).name, "rowsum");

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (int trial = 0; trial < 3; ++trial) {
    NDArray x = NDArray::empty({4, 5}, DataType::Float(32));
    for (int i = 0; i < 20; ++i) x.data_as<float>()[i] = u(rng);
    ex.set_input("x", x);
    ex.run();
    NDArray y = ex.get_output("y"), s = ex.get_output(1);
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{4, 5}));
    ASSERT_EQ(s.shape(), (std::vector<int64_t>{4}));
    const float* xp = x.data_as<float>();
    const float* wp = w_.data_as<float>();
    for (int r = 0; r < 4; ++r) {
      float sum = 0;
      for (int c = 0; c < 5; ++c) {
        int i = r * 5 + c;
        float ref = std::max(std::max(xp[i] + wp[i], 0.f) + wp[i], 0.f);
        EXPECT_EQ(y.data_as<float>()[i], ref) << trial << " " << i;
        sum += ref;
      }
      EXPECT_FLOAT_EQ(s.data_as<float>()[r], sum) << trial << " " << r;
    }
    // The input survives the run (its storage is never reused).
    NDArray back = ex.get_input("x");
    EXPECT_EQ(std::memcmp(back.data(), x.data(), x.nbytes()), 0);
  }
}

TEST_F(GraphExecutorTest, InputErrors) {
  GraphExecutor ex = GraphExecutor::load(dir_);
  EXPECT_EQ(error_of([&] { ex.run(); }), "run: input 'x' was not set (call set_input first)");
  EXPECT_EQ(error_of([&] {
              ex.set_input("x", NDArray::empty({4, 6}, DataType::Float(32)));
            }),
            "set_input 'x': shape expected [4, 5], got [4, 6]");
  EXPECT_EQ(error_of([&] {
              ex.set_input("x", NDArray::empty({4, 5}, DataType::Int(32)));
            }),
            "set_input 'x': dtype expected float32, got int32");
  EXPECT_EQ(error_of([&] {
              ex.set_input("data", NDArray::empty({4, 5}, DataType::Float(32)));
            }),
            "set_input: unknown input 'data'; the graph's inputs are: x");
  EXPECT_EQ(error_of([&] {
              ex.set_input("w", NDArray::empty({4, 5}, DataType::Float(32)));
            }),
            "set_input: unknown input 'w'; the graph's inputs are: x");
  EXPECT_EQ(error_of([&] {
              ex.set_input(1, NDArray::empty({4, 5}, DataType::Float(32)));
            }),
            "set_input: input index 1 out of range; the graph has 1 input(s)");
  EXPECT_EQ(error_of([&] { ex.get_output("z"); }),
            "get_output: unknown output 'z'; the graph's outputs are: y, rowsum");
  EXPECT_EQ(error_of([] { GraphExecutor().run(); }),
            "GraphExecutor::run: the executor is undefined");
}

// KILN_MAX_MEMORY_MB caps the memory plan before anything is allocated (the fuzz targets set it;
// a 40 TB tensor in a tampered graph.json had reached the allocator).
TEST_F(GraphExecutorTest, MemoryPlanBeyondTheCapIsRefused) {
  json g = base_graph();
  g["attrs"]["storage_offset"] = {0, 0, 0, 1 << 20, 0, 0, 0};
  ::setenv("KILN_MAX_MEMORY_MB", "1", 1);
  std::string msg = create_error(g);
  ::unsetenv("KILN_MAX_MEMORY_MB");
  EXPECT_EQ(msg.rfind("graph 'g.json': the memory plan needs 10", 0), 0u) << msg;
  EXPECT_NE(msg.find(" bytes of storage, more than KILN_MAX_MEMORY_MB allows (1048576 bytes)"),
            std::string::npos)
      << msg;
  Module lib = Module::load(dir_ + "/lib.so");
  EXPECT_NO_THROW(GraphExecutor::create(g.dump(), lib, {{"w", w_}}));  // no cap: it fits
}

TEST_F(GraphExecutorTest, MissingFunctionAtLoad) {
  json g = base_graph();
  g["nodes"][3]["attrs"]["func_name"] = "conv2d";
  write_module(g, {{"w", w_}});
  std::string msg = error_of([&] { GraphExecutor::load(dir_); });
  EXPECT_EQ(msg, "graph '" + dir_ +
                     "/graph.json': node 3 ('relu0'): function 'conv2d' not found "
                     "in module shared_library '" +
                     dir_ + "/lib.so'; it has: add, relu, rowsum, bad");
}

TEST_F(GraphExecutorTest, KernelErrorNamesNode) {
  json g = base_graph();
  g["nodes"][4]["attrs"]["func_name"] = "bad";
  write_module(g, {{"w", w_}});
  GraphExecutor ex = GraphExecutor::load(dir_);
  ex.set_input(0, NDArray::empty({4, 5}, DataType::Float(32)));
  EXPECT_EQ(error_of([&] { ex.run(); }), "run: node 4 ('add1'), function 'bad': bad: always fails");
}

TEST_F(GraphExecutorTest, LoadErrors) {
  std::string msg = error_of([&] { GraphExecutor::load(dir_ + "/nope"); });
  EXPECT_EQ(msg.find("module '" + dir_ + "/nope': not a directory"), 0u) << msg;
  std::filesystem::remove(dir_ + "/params.bin");
  EXPECT_EQ(error_of([&] { GraphExecutor::load(dir_); }),
            "graph '" + dir_ +
                "/graph.json': node 1 ('w'): param missing from params (an "
                "argument node not listed in \"inputs\" is a param)");
  std::filesystem::remove(dir_ + "/lib.so");
  msg = error_of([&] { GraphExecutor::load(dir_); });
  EXPECT_NE(msg.find("cannot load '" + dir_ + "/lib.so'"), std::string::npos) << msg;
  std::filesystem::remove(dir_ + "/graph.json");
  msg = error_of([&] { GraphExecutor::load(dir_); });
  EXPECT_EQ(msg, "graph '" + dir_ + "/graph.json': cannot open: No such file or directory");
}

// Tampered module directories (issue 26): a FIFO named graph.json is refused, not waited on;
// graph.json or params.bin linked to /dev/zero is refused, not read until memory runs out; a
// params.bin that is not one is refused from its first bytes.
TEST_F(GraphExecutorTest, NonRegularModuleFilesAreRefused) {
  namespace fs = std::filesystem;
  fs::rename(dir_ + "/graph.json", dir_ + "/graph.json.real");
  ASSERT_EQ(::mkfifo((dir_ + "/graph.json").c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { GraphExecutor::load(dir_); }),
            "graph '" + dir_ + "/graph.json': not a regular file (a FIFO)");
  fs::remove(dir_ + "/graph.json");
  fs::create_symlink("/dev/zero", dir_ + "/graph.json");
  EXPECT_EQ(error_of([&] { GraphExecutor::load(dir_); }),
            "graph '" + dir_ +
                "/graph.json': not a regular file (a symbolic link to '/dev/zero', a character "
                "device)");
  fs::remove(dir_ + "/graph.json");
  fs::create_directories(dir_ + "/graph.json");
  EXPECT_EQ(error_of([&] { GraphExecutor::load(dir_); }),
            "graph '" + dir_ + "/graph.json': not a regular file (a directory)");
  fs::remove(dir_ + "/graph.json");
  fs::rename(dir_ + "/graph.json.real", dir_ + "/graph.json");

  fs::remove(dir_ + "/params.bin");
  fs::create_symlink("/dev/zero", dir_ + "/params.bin");
  EXPECT_EQ(error_of([&] { GraphExecutor::load(dir_); }),
            "params file '" + dir_ +
                "/params.bin': not a regular file (a symbolic link to '/dev/zero', a character "
                "device)");
  fs::remove(dir_ + "/params.bin");
  ASSERT_EQ(::mkfifo((dir_ + "/params.bin").c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { GraphExecutor::load(dir_); }),
            "params file '" + dir_ + "/params.bin': not a regular file (a FIFO)");
  fs::remove(dir_ + "/params.bin");
  // A dangling link is a broken file, not an absent one.
  fs::create_symlink(dir_ + "/nowhere.bin", dir_ + "/params.bin");
  EXPECT_EQ(error_of([&] { GraphExecutor::load(dir_); }),
            "params file '" + dir_ + "/params.bin': cannot open: No such file or directory");
  fs::remove(dir_ + "/params.bin");
  std::ofstream(dir_ + "/params.bin") << "GARBAGE!" << std::string(1000, 'x');
  EXPECT_EQ(error_of([&] { GraphExecutor::load(dir_); }),
            "params file '" + dir_ +
                "/params.bin': bad magic (expected \"KILNPRM1\"; not a Kiln params file)");
}

// A truncated lib.so is refused before dlopen maps it (where it raised SIGBUS), at every cut.
TEST_F(GraphExecutorTest, TruncatedLibraryIsRefused) {
  namespace fs = std::filesystem;
  const std::string lib = dir_ + "/lib.so";
  std::ifstream in(lib, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 4096u);
  for (size_t cut : {size_t{0}, size_t{3}, size_t{40}, size_t{64}, size_t{200}, bytes.size() / 4,
                     bytes.size() / 2, bytes.size() - 4096, bytes.size() - 1}) {
    fs::remove(lib);
    std::ofstream(lib, std::ios::binary) << bytes.substr(0, cut);
    std::string msg = error_of([&] { GraphExecutor::load(dir_); });
    EXPECT_EQ(msg.rfind("Module::load: cannot load '" + lib + "': ", 0), 0u) << cut << ": " << msg;
    if (cut < 4) {
      EXPECT_NE(msg.find("not a shared library (no ELF header"), std::string::npos) << msg;
    } else if (cut < 64) {
      EXPECT_NE(msg.find("truncated ELF header (the file has " + std::to_string(cut) + " bytes"),
                std::string::npos)
          << msg;
    } else {
      EXPECT_NE(msg.find("truncated or corrupt (" + std::to_string(cut) + " bytes): its "),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find("lies beyond the end of the file"), std::string::npos) << msg;
    }
  }
  fs::remove(lib);
  std::ofstream(lib, std::ios::binary) << bytes;
  EXPECT_EQ(GraphExecutor::load(dir_).num_op_nodes(), 5);  // the whole file still loads
}

TEST_F(GraphExecutorTest, MalformedGraphs) {
  using Edit = std::function<void(json&)>;
  const std::vector<std::pair<Edit, std::string>> cases = {
      {[](json& g) { g = json::parse("[1, 2]"); }, "the top level is not a JSON object"},
      {[](json& g) { g.erase("nodes"); }, "missing \"nodes\""},
      {[](json& g) {
         g["nodes"][3]["inputs"][0] = {4, 0};
       },
       "node 3 ('relu0'): input 0 [4,0] does not refer to an earlier node (nodes must be in "
       "topological order)"},
      {[](json& g) {
         g["nodes"][3]["inputs"][0] = {2, 1};
       },
       "node 3 ('relu0'): input 0 [2,1]: node 2 ('add0') has 1 output(s)"},
      {[](json& g) { g["nodes"][2]["attrs"]["num_inputs"] = 3; },
       "node 2 ('add0'): attrs.num_inputs is 3 but the node has 2 inputs"},
      {[](json& g) { g["nodes"][2]["attrs"]["num_inputs"] = "2"; }, ""},  // TVM's string form
      {[](json& g) { g["nodes"][5]["attrs"].erase("func_name"); },
       "node 5 ('relu1'): attrs: missing \"func_name\""},
      {[](json& g) { g["nodes"][5]["op"] = "tvm_op"; },
       "node 5 ('relu1'): unknown op \"tvm_op\" (expected \"null\", \"kiln_op\" or "
       "\"kiln_view\")"},
      {[](json& g) {
         g["nodes"][5] = {{"op", "kiln_view"}, {"name", "relu1"}, {"inputs", json::array()}};
       },
       "node 5 ('relu1'): a \"kiln_view\" node has inputs and 1 output"},
      {[](json& g) {
         g["attrs"]["storage_offset"] = {0, 0, 0};
       },
       "attrs.storage_offset has 3 elements, expected one per entry: 7"},
      {[](json& g) { g["attrs"]["storage_offset"] = {0, 0, 0, 4, 0, 0, 0}; },
       "entry 3: storage_offset 4 must be a non-negative multiple of 64 (kernels need aligned "
       "operands)"},
      {[](json& g) { g["attrs"]["storage_offset"] = {0, 0, 0, -64, 0, 0, 0}; },
       "entry 3: storage_offset -64 must be a non-negative multiple of 64 (kernels need "
       "aligned operands)"},
      {[](json& g) { g["attrs"]["storage_offset"] = {0, 0, 0, 1 << 20, 0, 0, 0}; },
       ""},  // storage 3 grows to hold it
      {[](json& g) { g["attrs"]["storage_offset"] = {0, 0, 0, int64_t{1} << 52, 0, 0, 0}; },
       "the memory plan needs 4503599627"},  // ... bytes, more than this machine's memory
      {[](json& g) { g["nodes"][6].erase("name"); }, "node 6: missing \"name\""},
      {[](json& g) { g["node_row_ptr"] = {0, 1, 2, 3, 4, 5, 6}; },
       "\"node_row_ptr\" has 7 elements, expected 8 (number of nodes + 1)"},
      {[](json& g) { g["attrs"]["storage_id"].erase(0); },
       "attrs.storage_id has 6 elements, expected one per entry: 7"},
      {[](json& g) { g["attrs"]["dtype"][3] = "flaot32"; },
       "entry 3 (node 3 'relu0' output 0): bad dtype 'flaot32'"},
      {[](json& g) {
         g["attrs"]["shape"][2] = {4, -5};
       },
       "entry 2 (node 2 'add0' output 0): negative extent in shape [4,-5]"},
      {[](json& g) { g["attrs"]["storage_id"][2] = 0; },
       "node 0 ('x'): argument storage_id 0 is shared with another entry (input and param "
       "storage must not be reused)"},
      {[](json& g) { g["arg_nodes"] = {0}; },
       "node 1 ('w'): a \"null\" node missing from arg_nodes"},
      {[](json& g) {
         g["arg_nodes"] = {0, 1, 2};
       },
       "arg_nodes: node 2 ('add0'): is a \"kiln_op\" node, not an argument (\"null\") node"},
      {[](json& g) {
         g["inputs"] = {"x", "data"};
       },
       "\"inputs\" names 'data', which is not an argument node"},
      {[](json& g) {
         g["heads"] = {{9, 0}};
       },
       "heads[0] [9,0] does not refer to a node output"},
      {[](json& g) { g["outputs"] = {"y"}; }, "\"outputs\" has 1 names for 2 heads"},
      {[](json& g) { g["version"] = 2; }, "unsupported version 2 (this runtime reads version 1)"},
      {[](json& g) {
         g["attrs"]["shape"][1] = {5, 4};
       },
       "node 1 ('w'): param is float32 [4, 5] in params, the graph expects float32 [5, 4]"},
  };
  for (const auto& [edit, expected] : cases) {
    json g = base_graph();
    edit(g);
    if (expected.empty()) {
      Module lib = Module::load(dir_ + "/lib.so");
      EXPECT_NO_THROW(GraphExecutor::create(g.dump(), lib, {{"w", w_}}));
      continue;
    }
    std::string msg = create_error(g);
    EXPECT_EQ(msg.rfind("graph 'g.json': " + expected, 0), 0u) << msg;
  }
  std::string msg = error_of([&] {
    GraphExecutor::create("{\"nodes\": [", Module::load(dir_ + "/lib.so"), {}, "g.json");
  });
  EXPECT_EQ(msg.rfind("graph 'g.json': invalid JSON: ", 0), 0u) << msg;
  NDArray extra = NDArray::empty({1}, DataType::Float(32));
  EXPECT_EQ(create_error(base_graph(), {{"w", w_}, {"bias", extra}}),
            "graph 'g.json': params has 'bias', which is not a param of the graph (its params: "
            "w)");
}

TEST_F(GraphExecutorTest, DefaultOutputNamesAndZeroSizeEntries) {
  json g = base_graph();
  g.erase("outputs");
  Module lib = Module::load(dir_ + "/lib.so");
  GraphExecutor ex = GraphExecutor::create(g.dump(), lib, {{"w", w_}});
  EXPECT_EQ(ex.output_names(), (std::vector<std::string>{"relu1", "sum"}));
  // An empty input: every kernel sees zero elements, outputs are empty.
  for (auto& s : g["attrs"]["shape"]) s = {0, 5};
  g["attrs"]["shape"][6] = {0};
  NDArray w0 = NDArray::empty({0, 5}, DataType::Float(32));
  GraphExecutor e0 = GraphExecutor::create(g.dump(), lib, {{"w", w0}});
  e0.set_input("x", NDArray::empty({0, 5}, DataType::Float(32)));
  e0.run();
  EXPECT_EQ(e0.get_output(1).shape(), std::vector<int64_t>{0});
  EXPECT_EQ(e0.storage_bytes(), 0u);
}

}  // namespace
}  // namespace kiln::runtime
