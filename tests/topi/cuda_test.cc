// CUDA code generation, tested without a GPU: te computes scheduled for a GPU (by hand and by
// topi::schedule_gpu_fallback) are split into kernels and host code, compiled to PTX by LLVM's
// NVPTX back end and assembled by CUDA's ptxas for sm_90 and sm_75 (any ptxas error fails the
// test; where ptxas is not installed the check is skipped with that reason). The host/device
// split is checked against golden TIR, the host code's checks and the errors against their
// messages. Numerics on a GPU: scripts/gpu-check.sh (the device tool) and CUDA.RunsOnTheGpu,
// which runs where a CUDA device is present and says why it is skipped elsewhere.
#include <gtest/gtest.h>

#include <functional>

#include "common/error.h"
#include "common/golden.h"
#include "common/ptxas.h"
#include "kiln/runtime/device_api.h"
#include "kiln/target/codegen.h"
#include "kiln/tir/transform.h"
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
using kiln::testing::find_ptxas;
using kiln::testing::ptxas;

const Target& cuda90() {
  static Target t("cuda -arch=sm_90");
  return t;
}

TEST(CUDA, SplitHostDeviceGolden) {
  te::Tensor a = te::placeholder({1000}, f32, "A");
  te::Tensor b = te::compute(
      {1000}, [&](const std::vector<Var>& i) { return a(i[0]) * 2.f + 1.f; }, "B", "elemwise");
  te::Schedule s = te::create_schedule({b});
  auto [bx, tx] = s[b].split(s[b].op_axis()[0], make_const(DataType::Int(32), 256));
  s[b].bind(bx, te::thread_axis("blockIdx.x"));
  s[b].bind(tx, te::thread_axis("threadIdx.x"));
  tir::HostDeviceSplit split = tir::split_host_device(tir::lower(s, {a, b}, "affine"));
  ASSERT_EQ(split.kernels.size(), 1u);
  std::string text = tir::to_string(split.host) + "\n" + tir::to_string(split.kernels[0]);
  for (const auto& [k, v] : split.kernels[0]->attrs) text += "\nattr " + k + " = " + v;
  KILN_EXPECT_GOLDEN("cuda_split_host_device", text);
}

// Cooperative fetching into shared memory and the barriers storage_sync places: in the dense
// template's kernel, one barrier between the tiles' copies and the products that read them,
// one at the end of the reduction step (before the next step's copies overwrite the tiles),
// none inside the 16-step product loop; the copies' regions are the block's 16x16 tiles.
TEST(CUDA, SharedMemoryTilesAndBarriersGolden) {
  // The product as the output (accumulated in place), then with an epilogue (accumulated in a
  // register per thread: the tiles' regions are relaxed over the threads of the block).
  te::Tensor x = te::placeholder({32, 32}, f32, "X");
  te::Tensor w = te::placeholder({32, 32}, f32, "W");
  te::Tensor b = te::placeholder({32}, f32, "bias");
  std::string text;
  for (te::Tensor y : {dense(x, w), relu(dense(x, w, b))}) {
    std::vector<te::Tensor> args{x, w, y};
    if (y.op()->name == "relu") args = {x, w, b, y};
    tir::PrimFunc f = tir::lower(schedule_dense_gpu({y}, cuda90()), args, "mm");
    tir::HostDeviceSplit split = tir::split_host_device(f);
    ASSERT_EQ(split.kernels.size(), 1u);
    text += tir::to_string(tir::storage_sync(split.kernels[0])) + "\n";
  }
  KILN_EXPECT_GOLDEN("cuda_dense_tiled_barriers", text);
}

// No shared memory, no barrier: the fallback's kernels come back unchanged.
TEST(CUDA, NoBarrierWithoutSharedMemory) {
  for (const GpuGroup& g : gpu_groups()) {
    if (g.shared_memory) continue;
    std::vector<te::Tensor> args = g.inputs;
    args.insert(args.end(), g.outs.begin(), g.outs.end());
    tir::HostDeviceSplit split =
        tir::split_host_device(tir::lower(schedule_gpu_fallback(g.outs, cuda90()), args, g.name));
    for (const tir::PrimFunc& k : split.kernels) EXPECT_TRUE(tir::storage_sync(k).same_as(k));
  }
}

// An extern stage (Gather's index check, hand-written loops) runs on one GPU thread, its
// argument check a trap in the kernel; the result stays a GPU function that ptxas accepts.
TEST(CUDA, ExternStagesRunOnOneThread) {
  te::Tensor x = te::placeholder({10, 4}, f32, "X");
  te::Tensor idx = te::placeholder({3}, i64, "I");
  te::Tensor y = take(x, idx, 0);
  tir::PrimFunc f = tir::lower(schedule_gpu_fallback({y}, cuda90()), {x, idx, y}, "gather");
  tir::PrimFunc bound = tir::bind_extern_stages(f);
  tir::HostDeviceSplit split = tir::split_host_device(bound);
  ASSERT_EQ(split.kernels.size(), 2u) << tir::to_string(bound);
  const std::string k0 = tir::to_string(split.kernels[0]);
  EXPECT_EQ(split.kernels[0].attr("launch"), "1,1,1,1,1,1") << k0;
  EXPECT_NE(k0.find("// attr extern_scope = \"take_indices\""), std::string::npos) << k0;
  EXPECT_NE(k0.find("kiln.arg_check"), std::string::npos) << k0;
  runtime::Module m = build(schedule_gpu_fallback({y}, cuda90()), {x, idx, y}, cuda90(), "gather");
  std::string ptx = codegen::get_source(m, "ptx");
  EXPECT_NE(ptx.find("trap;"), std::string::npos);
  if (!find_ptxas().empty()) EXPECT_EQ(ptxas(ptx, "sm_90"), "");
}

TEST(CUDA, FallbackKernelsAssembleWithPtxas) {
  const std::string tool = find_ptxas();
  for (const GpuGroup& g : gpu_groups()) {
    SCOPED_TRACE(g.name);
    std::vector<te::Tensor> args = g.inputs;
    args.insert(args.end(), g.outs.begin(), g.outs.end());
    for (const char* arch : {"sm_90", "sm_75"}) {
      Target t(std::string("cuda -arch=") + arch);
      runtime::Module m = build(g.schedule(g.outs, t), args, t, g.name);
      std::string ptx = codegen::get_source(m, "ptx");
      EXPECT_NE(ptx.find(".entry " + g.name + "_kernel0"), std::string::npos) << ptx;
      EXPECT_NE(ptx.find("%tid.x"), std::string::npos);
      EXPECT_NE(ptx.find(std::string(".target ") + arch), std::string::npos);
      EXPECT_EQ(ptx.find("__nv_"), std::string::npos) << "libdevice calls must be linked in";
      EXPECT_EQ(m.function_names(), std::vector<std::string>{g.name});
      if (!tool.empty()) EXPECT_EQ(ptxas(ptx, arch), "");
    }
  }
  if (tool.empty())
    GTEST_SKIP() << "ptxas not found (KILN_PTXAS, /usr/local/cuda/bin): PTX built "
                    "but not assembled";
}

TEST(CUDA, HostCodeChecksTheDevice) {
  GpuGroup g = gpu_groups()[0];
  runtime::Module m =
      build(schedule_gpu_fallback(g.outs, cuda90()), {g.inputs[0], g.outs[0]}, cuda90(), "f");
  NDArray a = random_array({1000}, f32, 1), c = poisoned({1000}, f32);
  std::string msg = error_of([&] { call(m.get_function("f"), {a, c}); });
  EXPECT_NE(msg.find("f: argument 0 (A): device expected cuda, got cpu"), std::string::npos) << msg;
}

TEST(CUDA, Errors) {
  te::Tensor a = te::placeholder({64}, f32, "A");
  te::Tensor b = te::compute(
      {64}, [&](const std::vector<Var>& i) { return a(i[0]) + 1.f; }, "B");
  // No loop bound to a thread: the loop would run on the host over device memory.
  std::string msg = error_of([&] { build(te::create_schedule({b}), {a, b}, cuda90(), "plain"); });
  EXPECT_NE(msg.find("codegen cuda: function 'plain' reads or writes memory outside a GPU kernel"),
            std::string::npos)
      << msg;
  msg = error_of([&] {
    Target t("cuda -arch=sm_20");
    build(schedule_gpu_fallback({b}, t), {a, b}, t, "old");
  });
  EXPECT_NE(msg.find("option '-arch=sm_20': Kiln generates code for sm_75 to sm_90"),
            std::string::npos)
      << msg;
}

TEST(CUDA, NoDeviceIsAClearError) {
  std::string why;
  if (runtime::device_available(runtime::Device{kKilnCUDA, 0}, &why)) {
    NDArray a = NDArray::empty({3}, f32, runtime::Device{kKilnCUDA, 0});
    EXPECT_EQ(a.device().str(), "cuda:0");
    GTEST_SKIP() << "a CUDA device is present: nothing to refuse";
  }
  EXPECT_FALSE(why.empty());
  std::string msg = error_of([] { NDArray::empty({3}, f32, runtime::Device{kKilnCUDA, 0}); });
  EXPECT_EQ(msg.rfind("no CUDA device: ", 0), 0u) << msg;
  EXPECT_NE(msg.find(why), std::string::npos) << msg;
}

TEST(CUDA, RunsOnTheGpu) {
  std::string why;
  if (!runtime::device_available(runtime::Device{kKilnCUDA, 0}, &why))
    GTEST_SKIP() << "no CUDA device: " << why;
  const runtime::Device gpu{kKilnCUDA, 0};
  uint32_t seed = 10;
  for (const GpuGroup& g : gpu_groups()) {
    SCOPED_TRACE(g.name);
    std::vector<te::Tensor> args = g.inputs;
    args.insert(args.end(), g.outs.begin(), g.outs.end());
    std::vector<NDArray> host_in;
    for (const te::Tensor& t : g.inputs) host_in.push_back(random_array(shape_of(t), f32, ++seed));
    std::vector<NDArray> want = run(te::create_schedule(g.outs), g.inputs, g.outs, host_in);
    runtime::Module m = build(g.schedule(g.outs, cuda90()), args, cuda90(), g.name);
    std::vector<NDArray> dev;
    for (const NDArray& h : host_in) dev.push_back(h.to(gpu));
    std::vector<NDArray> outs;
    for (const te::Tensor& t : g.outs) {
      outs.push_back(poisoned(shape_of(t), f32).to(gpu));
      dev.push_back(outs.back());
    }
    call(m.get_function(g.name), dev);
    runtime::device_synchronize(gpu);
    for (size_t k = 0; k < outs.size(); ++k)
      EXPECT_TRUE(all_close(outs[k].to(runtime::Device::cpu()), want[k]));
  }
}

}  // namespace
}  // namespace kiln::topi::testing
