// Registry-wide check of the rule-based scheduler (topi/auto_schedule.h): every op of the graph
// OpRegistry whose compute can be built from its default attributes and one of a few generic
// input signatures (same-shaped tensors of rank 1, 2 and 4; convolution-, conv1d-, conv3d-,
// matmul- and batch-matmul-like operand lists; float32, then int32, then bool) is scheduled by
// auto_schedule and run against its unscheduled loop nest on seeded random inputs (never zero;
// integers 1 or 2 so that index-like operands stay in bounds) with poisoned outputs. Ops that
// need special inputs (required attributes, data-dependent shapes, index tensors of another
// rank, …) are skipped with the reason printed and counted; the test fails if fewer than half of
// the ops were checked, so a registry change that silently skips everything is caught.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "common/opencl.h"
#include "kiln/graph/op_registry.h"
#include "kiln/topi/auto_schedule.h"
#include "kiln/topi/schedule_gpu.h"
#include "topi/topi_test_util.h"

namespace kiln::graph {
namespace {

using topi::testing::all_close;
using topi::testing::random_array;
using topi::testing::run;
using Shape = std::vector<int64_t>;

/// Candidate input shapes for an op taking `n` inputs, most generic first.
std::vector<std::vector<Shape>> signatures(int n) {
  std::vector<std::vector<Shape>> r;
  auto same = [&](Shape s) { return std::vector<Shape>(static_cast<size_t>(n), s); };
  auto list = [&](std::vector<Shape> l) {
    if (static_cast<int>(l.size()) >= n) {
      l.resize(static_cast<size_t>(n));
      r.push_back(l);
    }
  };
  r.push_back(same({3, 4, 5, 7}));
  r.push_back(same({5, 7}));
  r.push_back(same({13}));
  list({{1, 4, 9, 9}, {6, 4, 3, 3}, {6}, {6}, {6}, {6}});  // conv2d, norms
  list({{1, 4, 11}, {6, 4, 3}, {6}});                      // conv1d
  list({{1, 2, 5, 6, 7}, {3, 2, 3, 3, 3}, {3}});           // conv3d
  list({{5, 6}, {6, 7}, {7}});                             // matmul
  list({{3, 5, 6}, {3, 6, 7}, {7}});                       // batched
  list({{3, 4, 5, 7}, {7}, {7}, {7}, {7}});                // broadcast last axis
  list({{3, 4, 5, 7}, {4}, {4}, {4}, {4}});                // per-channel
  list({{2, 3, 8}, {3, 8, 8}, {3, 8, 8}, {3, 16}});        // sequences
  list({{1, 6, 5, 5}, {6, 4, 3, 3}, {4}});                 // conv2d_transpose
  list({{1, 3, 4, 4, 4}, {3, 2, 2, 2, 2}, {2}});           // conv3d_transpose
  list({{1, 2, 5, 6}, {1, 4, 4, 2}});                      // grid_sample
  list({{1, 2, 6, 6, 8}, {2, 2, 3, 3, 8, 8}});             // conv2d_nchwc
  list({{1, 2, 6, 6, 8}, {2, 1, 3, 3, 1, 8}});             // depthwise_conv2d_nchwc
  list({{2, 32}, {2, 8}, {2, 8}});                         // lstm_cell
  list({{5, 6}, {2, 6, 16}});                              // dense_packed
  return r;
}

struct Outcome {
  bool checked = false;
  std::string why;  ///< the reason for a skip
};

/// Values for the required attributes of the ops that have some (the rest use defaults).
Attrs given_attrs(const std::string& op) {
  using Ints = std::vector<int64_t>;
  static const std::map<std::string, Attrs> table = {
      {"avg_pool2d",
       {{"pool_size", Ints{3, 3}}, {"strides", Ints{2, 1}}, {"padding", Ints{1, 1, 1, 1}}}},
      {"max_pool2d",
       {{"pool_size", Ints{3, 3}}, {"strides", Ints{2, 1}}, {"padding", Ints{1, 1, 1, 1}}}},
      {"avg_pool_nd",
       {{"pool_size", Ints{2, 3}},
        {"strides", Ints{1, 2}},
        {"padding", Ints{0, 1, 0, 1}},
        {"dilation", Ints{1, 1}}}},
      {"max_pool_nd",
       {{"pool_size", Ints{2, 3}},
        {"strides", Ints{1, 2}},
        {"padding", Ints{0, 1, 0, 1}},
        {"dilation", Ints{1, 1}}}},
      {"max_pool_nd_indices",
       {{"pool_size", Ints{2, 3}},
        {"strides", Ints{1, 2}},
        {"padding", Ints{0, 1, 0, 1}},
        {"dilation", Ints{1, 1}}}},
      {"cast", {{"dtype", std::string("float32")}}},
      {"channel_shuffle", {{"groups", int64_t{2}}}},
      {"clip", {{"a_min", -0.5}, {"a_max", 0.5}}},
      {"conv2d_grouped_nchwc", {{"groups", int64_t{2}}}},
      {"dense_packed", {{"units", int64_t{32}}}},
      {"dilate2d", {{"strides", Ints{2, 2}}}},
      {"expand_dims", {{"axis", int64_t{1}}}},
      {"pad", {{"pad_before", Ints{0, 1, 2, 0}}, {"pad_after", Ints{0, 0, 1, 3}}}},
      {"reshape", {{"shape", Ints{12, 35}}}},
      {"strided_slice", {{"begin", Ints{0, 1}}, {"end", Ints{3, 4}}}},
      {"unsqueeze", {{"axes", Ints{0}}}},
  };
  auto it = table.find(op);
  return it == table.end() ? Attrs{} : it->second;
}

/// How an op's outputs are scheduled and run: the rule-based scheduler on the host, or the GPU
/// fallback on the OpenCL device.
struct Variant {
  std::string name;
  std::function<te::Schedule(const std::vector<te::Tensor>&, const Target&)> schedule;
  Target target;
  runtime::Device device;
};

Outcome check_op(const OpDef& def, const Variant& v) {
  Attrs attrs;
  try {
    attrs = def.normalize_attrs(given_attrs(def.name), def.name);
  } catch (const Error& e) {
    return {false, "needs attributes"};
  }
  if (def.bounded) return {false, "data-dependent output shape"};
  const int lo = std::max(1, def.min_inputs);
  const int hi = def.max_inputs < 0 ? lo + 1 : def.max_inputs;
  std::string last = "no input signature fits";
  for (DataType dt : {DataType::Float(32), DataType::Int(32), DataType::Bool()}) {
    for (int n = lo; n <= std::min(hi, lo + 2); ++n) {
      for (const std::vector<Shape>& shapes : signatures(n)) {
        std::vector<TensorType> types;
        for (const Shape& s : shapes) types.push_back(TensorType{s, dt});
        std::vector<te::Tensor> ins, outs;
        try {
          def.infer(types, attrs);
          ins = placeholders_for(types);
          outs = def.compute(ins, attrs, def.name);
        } catch (const Error& e) {
          last = e.what();
          continue;
        }
        for (const te::Tensor& t : outs)
          if (t.op()->kind != te::OpKind::kCompute) return {false, "an output is not a compute"};
        std::vector<runtime::NDArray> data;
        uint32_t seed = 11;
        for (const te::Tensor& t : ins)
          data.push_back(dt.is_float()
                             ? random_array(topi::testing::shape_of(t), dt, seed++)
                             : random_array(topi::testing::shape_of(t), dt, seed++, 1, 2));
        std::vector<runtime::NDArray> want, got;
        try {
          want = run(te::create_schedule(outs), ins, outs, data);
        } catch (const Error& e) {
          return {false, std::string("the unscheduled loops do not build: ") + e.what()};
        }
        SCOPED_TRACE(def.name + " on " + types[0].str());
        te::Schedule s = te::create_schedule(outs);
        try {
          s = v.schedule(outs, v.target);
        } catch (const Error& e) {
          // A documented gap (0-d outputs on GPUs), refused with a message that says so.
          if (std::string(e.what()).find("has no GPU schedule yet") != std::string::npos)
            return {false, e.what()};
          ADD_FAILURE() << def.name << ": " << v.name << " fails: " << e.what();
          return {true, ""};
        }
        try {
          got = run(s, ins, outs, data, v.target, v.device);
        } catch (const Error& e) {
          ADD_FAILURE() << def.name << ": " << v.name << "'s kernel fails: " << e.what() << "\n"
                        << s.to_string();
          return {true, ""};
        }
        for (size_t k = 0; k < outs.size(); ++k)
          EXPECT_TRUE(all_close(got[k], want[k], {1e-4, 1e-4}))
              << def.name << " output " << k << "\n"
              << s.to_string();
        return {true, ""};
      }
    }
  }
  return {false, last.substr(0, 160)};
}

void check_registry(const Variant& v) {
  const OpRegistry& reg = OpRegistry::global();
  int checked = 0, skipped = 0;
  std::map<std::string, std::string> skips;
  for (const std::string& name : reg.names()) {
    Outcome o = check_op(reg.get(name), v);
    if (o.checked) {
      ++checked;
    } else {
      ++skipped;
      skips[name] = o.why;
    }
  }
  std::printf("%s over the registry: %d ops checked, %d skipped\n", v.name.c_str(), checked,
              skipped);
  for (const auto& [name, why] : skips)
    std::printf("  skipped %s: %s\n", name.c_str(), why.c_str());
  EXPECT_GE(checked, skipped) << "most ops should build from the generic signatures";
}

TEST(AutoScheduleRegistry, EveryBuildableOpMatchesItsUnscheduledLoops) {
  check_registry({"auto_schedule",
                  [](const std::vector<te::Tensor>& outs, const Target& t) {
                    return topi::auto_schedule(outs, t);
                  },
                  topi::testing::host_target(), runtime::Device::cpu()});
}

// Every op on a GPU: the schedule an op without a GPU template gets (one thread per output
// element, producers inlined), compiled to OpenCL C and run on the OpenCL device (PoCL here).
TEST(GpuFallbackRegistry, EveryBuildableOpRunsOnOpenCL) {
  std::string why;
  if (!kiln::testing::opencl_device(&why)) GTEST_SKIP() << "no OpenCL device: " << why;
  check_registry({"schedule_gpu_fallback",
                  [](const std::vector<te::Tensor>& outs, const Target& t) {
                    return topi::schedule_gpu_fallback(outs, t);
                  },
                  Target("opencl"), runtime::Device{kKilnOpenCL, 0}});
}

}  // namespace
}  // namespace kiln::graph
