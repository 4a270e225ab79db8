// OpenCL code generation, run on this CPU through PoCL: te computes scheduled for a GPU (by
// hand and by topi::schedule_gpu_fallback) are split into kernels and host code, printed as
// OpenCL C, built by the OpenCL driver and run; each output is compared with the unscheduled
// loops on the CPU (random inputs, poisoned outputs). The generated source is checked against
// golden text (shared-memory tiles and barriers), errors against their messages. Where no
// OpenCL device with SVM exists, the numeric tests are skipped with the runtime's reason.
#include "common/opencl.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "common/error.h"
#include "common/golden.h"
#include "kiln/runtime/device_api.h"
#include "kiln/target/codegen.h"
#include "kiln/topi/conv2d.h"
#include "kiln/topi/dense.h"
#include "kiln/topi/elemwise.h"
#include "kiln/topi/nn_norm.h"
#include "kiln/topi/schedule_gpu.h"
#include "kiln/topi/transform.h"
#include "topi/gpu_groups.h"
#include "topi/topi_test_util.h"

namespace kiln::topi::testing {
namespace {

using ir::make_const;
using ir::Var;
using kiln::testing::error_of;
using kiln::testing::opencl_device;

const Target& opencl() {
  static Target t("opencl");
  return t;
}
const runtime::Device kGpu{kKilnOpenCL, 0};

#define KILN_REQUIRE_OPENCL()                                              \
  do {                                                                     \
    std::string why;                                                       \
    if (!opencl_device(&why)) GTEST_SKIP() << "no OpenCL device: " << why; \
  } while (0)

TEST(OpenCL, DenseTilesAndBarriersGolden) {
  te::Tensor x = te::placeholder({32, 32}, f32, "X");
  te::Tensor w = te::placeholder({32, 32}, f32, "W");
  te::Tensor b = te::placeholder({32}, f32, "bias");
  te::Tensor y = relu(dense(x, w, b));
  runtime::Module m = build(schedule_dense_gpu({y}, opencl()), {x, w, b, y}, opencl(), "mm");
  KILN_EXPECT_GOLDEN("opencl_dense_tiled", codegen::get_source(m, "cl"));
}

TEST(OpenCL, RunsScheduledGroups) {
  KILN_REQUIRE_OPENCL();
  uint32_t seed = 20;
  for (const GpuGroup& g : gpu_groups()) {
    SCOPED_TRACE(g.name);
    std::vector<NDArray> data;
    for (const te::Tensor& t : g.inputs) data.push_back(random_array(shape_of(t), f32, ++seed));
    std::vector<NDArray> want = run(te::create_schedule(g.outs), g.inputs, g.outs, data);
    std::vector<NDArray> got =
        run(g.schedule(g.outs, opencl()), g.inputs, g.outs, data, opencl(), kGpu);
    for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(all_close(got[k], want[k]));
  }
}

// Gather's index check runs inside a kernel: an index out of range sets the kernels' error
// flag, which the runtime reports at synchronize (OpenCL kernels cannot trap).
TEST(OpenCL, RunTimeCheckInAKernelIsReported) {
  KILN_REQUIRE_OPENCL();
  te::Tensor x = te::placeholder({10, 4}, f32, "X");
  te::Tensor idx = te::placeholder({3}, i64, "I");
  te::Tensor y = take(x, idx, 0);
  NDArray xs = random_array({10, 4}, f32, 3);
  NDArray good = NDArray::empty({3}, i64);
  int64_t gv[] = {0, 9, -1};
  std::memcpy(good.data(), gv, sizeof(gv));
  std::vector<NDArray> want = run(te::create_schedule({y}), {x, idx}, {y}, {xs, good});
  std::vector<NDArray> got =
      run(schedule_gpu_fallback({y}, opencl()), {x, idx}, {y}, {xs, good}, opencl(), kGpu);
  EXPECT_TRUE(all_close(got[0], want[0]));
  NDArray bad = NDArray::empty({3}, i64);
  int64_t bv[] = {0, 10, 1};
  std::memcpy(bad.data(), bv, sizeof(bv));
  std::string msg = error_of([&] {
    run(schedule_gpu_fallback({y}, opencl()), {x, idx}, {y}, {xs, bad}, opencl(), kGpu);
  });
  EXPECT_NE(msg.find("OpenCL: a run-time check inside a kernel failed"), std::string::npos) << msg;
  // The flag is cleared: the next run is clean.
  got = run(schedule_gpu_fallback({y}, opencl()), {x, idx}, {y}, {xs, good}, opencl(), kGpu);
  EXPECT_TRUE(all_close(got[0], want[0]));
}

TEST(OpenCL, Errors) {
  te::Tensor a = te::placeholder({64}, f32, "A");
  te::Tensor b = te::compute(
      {64}, [&](const std::vector<Var>& i) { return a(i[0]) + 1.f; }, "B");
  std::string msg = error_of([&] { build(te::create_schedule({b}), {a, b}, opencl(), "plain"); });
  EXPECT_NE(
      msg.find("codegen opencl: function 'plain' reads or writes memory outside a GPU kernel"),
      std::string::npos)
      << msg;
  te::Schedule s = te::create_schedule({b});
  auto [bx, tx] = s[b].split(s[b].op_axis()[0], make_const(DataType::Int(32), 16));
  auto [txo, txi] = s[b].split(tx, make_const(DataType::Int(32), 4));
  s[b].bind(bx, te::thread_axis("blockIdx.x"));
  s[b].bind(txo, te::thread_axis("threadIdx.x"));
  s[b].vectorize(txi);
  msg = error_of([&] { build(s, {a, b}, opencl(), "vec"); });
  EXPECT_NE(msg.find("codegen opencl: kernel 'vec_kernel0': vector"), std::string::npos) << msg;
}

// The GPU verifier: a block over the target's thread or shared-memory limit is refused before
// code generation, naming the kernel, the amount and the option that sets the limit.
TEST(OpenCL, KernelsOverTheTargetsLimitsAreRefused) {
  te::Tensor a = te::placeholder({4096}, f32, "A");
  te::Tensor b = te::compute(
      {4096}, [&](const std::vector<Var>& i) { return a(i[0]) * 3.f; }, "B");
  te::Schedule s = te::create_schedule({b});
  auto [bx, tx] = s[b].split(s[b].op_axis()[0], make_const(DataType::Int(32), 512));
  s[b].bind(bx, te::thread_axis("blockIdx.x"));
  s[b].bind(tx, te::thread_axis("threadIdx.x"));
  std::string msg = error_of([&] { build(s, {a, b}, opencl(), "wide"); });
  EXPECT_NE(msg.find("kernel 'wide_kernel0' uses 512 threads per block; the target allows 256 "
                     "(-max_threads_per_block)"),
            std::string::npos)
      << msg;
  build(s, {a, b}, Target("opencl -max_threads_per_block=512"), "wide");  // allowed there
  // The dense template's two 16x16 float tiles: 2048 bytes of shared memory per block.
  te::Tensor x = te::placeholder({32, 32}, f32, "X");
  te::Tensor w = te::placeholder({32, 32}, f32, "W");
  te::Tensor y = dense(x, w);
  Target small("opencl -max_shared_memory_per_block=1024");
  msg = error_of([&] { build(schedule_dense_gpu({y}, small), {x, w, y}, small, "mm"); });
  EXPECT_NE(msg.find("kernel 'mm_kernel0' uses 2048 bytes of shared memory per block; the "
                     "target allows 1024 (-max_shared_memory_per_block)"),
            std::string::npos)
      << msg;
}

TEST(OpenCL, NoDeviceIsAClearErrorOrArraysLiveThere) {
  std::string why;
  if (opencl_device(&why)) {
    NDArray a = random_array({5}, f32, 4);
    NDArray back = a.to(kGpu).to(runtime::Device::cpu());
    EXPECT_TRUE(all_close(back, a));
    EXPECT_FALSE(runtime::device_name(kGpu).empty());
    return;
  }
  std::string msg = error_of([] { NDArray::empty({3}, f32, kGpu); });
  EXPECT_EQ(msg.rfind("no OpenCL device: ", 0), 0u) << msg;
}

}  // namespace
}  // namespace kiln::topi::testing

namespace kiln::topi::testing {
namespace {

/// A matmul with 2x2 virtual threads per GPU thread, each virtual thread a 2x2 register tile
/// accumulated in `local` memory: block (by, bx) of 8x8 outputs, vthreads (vy, vx), threads
/// (ty, tx), inner (yi, xi).
te::Schedule vthread_matmul(const te::Tensor& c) {
  te::Schedule s = te::create_schedule({c});
  te::Tensor cl = s.cache_write(c, "local");
  auto i32c = [](int v) { return make_const(DataType::Int(32), v); };
  auto [by, i1] = s[c].split(s[c].op_axis()[0], i32c(8));
  auto [bx, j1] = s[c].split(s[c].op_axis()[1], i32c(8));
  auto [vy, i2] = s[c].split_nparts(i1, i32c(2));
  auto [vx, j2] = s[c].split_nparts(j1, i32c(2));
  auto [ty, yi] = s[c].split(i2, i32c(2));
  auto [tx, xi] = s[c].split(j2, i32c(2));
  s[c].reorder({by, bx, vy, vx, ty, tx, yi, xi});
  s[c].bind(by, te::thread_axis("blockIdx.y"));
  s[c].bind(bx, te::thread_axis("blockIdx.x"));
  s[c].bind(vy, te::thread_axis("vthread"));
  s[c].bind(vx, te::thread_axis("vthread"));
  s[c].bind(ty, te::thread_axis("threadIdx.y"));
  s[c].bind(tx, te::thread_axis("threadIdx.x"));
  s[cl].compute_at(s[c], tx);
  return s;
}

te::Tensor matmul(const te::Tensor& a, const te::Tensor& b) {
  te::IterVar k = te::reduce_axis({0, a->shape[1]}, "k");
  return te::compute(
      {a->shape[0], b->shape[1]},
      [&](const std::vector<Var>& i) { return te::sum(a(i[0], k->var) * b(k->var, i[1]), {k}); },
      "C");
}

// Virtual threads: the vthread loops disappear; every statement that depends on them is written
// once per virtual thread, side by side (the four accumulator updates of one k step together),
// and the local accumulator gets one 2x2 copy per virtual thread (16 floats).
TEST(VirtualThread, LoweringGolden) {
  te::Tensor a = te::placeholder({16, 4}, f32, "A");
  te::Tensor b = te::placeholder({4, 16}, f32, "B");
  te::Tensor c = matmul(a, b);
  tir::PrimFunc f = tir::lower(vthread_matmul(c), {a, b, c}, "vmm");
  KILN_EXPECT_GOLDEN("vthread_matmul", tir::to_string(f));
}

TEST(VirtualThread, RunsOnOpenCL) {
  te::Tensor a = te::placeholder({32, 24}, f32, "A");
  te::Tensor b = te::placeholder({24, 48}, f32, "B");
  te::Tensor c = matmul(a, b);
  std::vector<NDArray> data = {random_array({32, 24}, f32, 7), random_array({24, 48}, f32, 8)};
  std::vector<NDArray> want = run(te::create_schedule({c}), {a, b}, {c}, data);
  std::string why;
  if (!opencl_device(&why)) GTEST_SKIP() << "no OpenCL device: " << why;
  EXPECT_TRUE(all_close(
      run(vthread_matmul(c), {a, b}, {c}, data, Target("opencl"), {kKilnOpenCL, 0})[0], want[0]));
}

}  // namespace
}  // namespace kiln::topi::testing
