// The CPU strategies: which of topi's CPU templates an op gets on a target with the key "cpu"
// (x86 and ARM alike; the templates size their blocks by the target's vector width and
// registers). conv2d: blocked NCHWc direct (priority 10), Winograd F(4x4, 3x3) where it applies
// (20 where topi::prefer_winograd picks it, else 5), depthwise NCHWc, the NCHW schedule as the
// fallback; dense / matmul with constant weights: the packed, register-blocked product;
// lstm_cell: the packed cell; conv2d_transpose: sub-pixel phases (depthwise ones as depthwise
// convolutions) or a dilated convolution, else
// its NCHW schedule; pooling, softmax, norms and conv3d: their CPU schedules. The tunable ones
// build their tuning task from the node here (graph/tuning.h's task functions) — the only place
// a node's workload key is made.
// Grouped convolutions (groups > 1, not depthwise): blocked grouped NCHWc, priority 10
// (topi/conv2d_grouped.h, layout hook in cpu_layout_grouped.cc). Batched products (matmul of
// 3-D operands, batch_matmul): the register-tiled batch template (topi/batch_matmul.h).
#include <functional>

#include "../op_attrs.h"
#include "builtin.h"
#include "kiln/graph/op_registry.h"
#include "kiln/graph/tuning.h"
#include "kiln/support/error.h"
#include "kiln/topi/batch_matmul.h"
#include "kiln/topi/conv2d_grouped.h"
#include "kiln/topi/conv2d_transpose.h"
#include "kiln/topi/conv2d_winograd.h"
#include "kiln/topi/conv_nd.h"
#include "kiln/topi/dense.h"
#include "kiln/topi/depthwise_conv2d.h"
#include "kiln/topi/lstm.h"
#include "kiln/topi/pooling.h"
#include "kiln/topi/schedule_injective.h"

namespace kiln::graph {

std::optional<topi::Conv2DWorkload> conv2d_workload(const OpCall& call, bool constant_weight) {
  const Node& n = call.node();
  if (n.inputs.size() < 2) return std::nullopt;
  const TensorType& xt = call.input_type(0);
  const TensorType& wt = call.input_type(1);
  if (xt.dtype != DataType::Float(32) || xt.shape.size() != 4 || wt.shape.size() != 4 ||
      wt.dtype != DataType::Float(32) || (constant_weight && !call.is_f32_constant(1)))
    return std::nullopt;
  return topi::Conv2DWorkload{xt.shape[0], xt.shape[1], xt.shape[2], xt.shape[3],
                              wt.shape[0], wt.shape[2], wt.shape[3], detail::conv_params(n.attrs)};
}

int64_t depthwise_multiplier(const topi::Conv2DWorkload& wl) {
  const int64_t C = wl.in_channel;
  return wl.params.groups > 1 && wl.params.groups == C && wl.out_channel % C == 0
             ? wl.out_channel / C
             : 0;
}

namespace {

/// The workload of `call`, or a user error naming the node when the template cannot take it.
topi::Conv2DWorkload conv2d_workload_or_throw(const OpCall& call, bool constant_weight = true) {
  std::optional<topi::Conv2DWorkload> wl = conv2d_workload(call, constant_weight);
  KILN_USER_CHECK(wl.has_value()) << "conv2d '" << call.node().name
                                  << "': not a float32 NCHW convolution with constant weights";
  return *wl;
}

/// The [M, N, K] of dense(x [M, K], W [N, K]) or matmul(x [M, K], B [K, N]) with a 2-D float32
/// constant weight, else nothing.
std::optional<topi::DenseWorkload> dense_workload(const OpCall& call, bool transposed_weight) {
  const TensorType& xt = call.input_type(0);
  if (xt.dtype != DataType::Float(32) || xt.shape.size() != 2 || !call.is_f32_constant(1))
    return std::nullopt;
  const runtime::NDArray& w = *call.constant(1);
  if (w.ndim() != 2) return std::nullopt;
  return topi::DenseWorkload{xt.shape[0], w.shape()[transposed_weight ? 1 : 0], xt.shape[1]};
}

/// The workload of a batched product: matmul of two 3-D float32 operands (B [batch, K, N]) or
/// batch_matmul (B [batch, K, N], or [batch, N, K] with transpose_b), else nothing.
std::optional<topi::BatchMatmulWorkload> batch_matmul_workload(const OpCall& call) {
  const Node& n = call.node();
  if (n.inputs.size() != 2) return std::nullopt;
  const TensorType& at = call.input_type(0);
  const TensorType& bt = call.input_type(1);
  if (at.dtype != DataType::Float(32) || bt.dtype != at.dtype || at.shape.size() != 3 ||
      bt.shape.size() != 3)
    return std::nullopt;
  const bool tb = n.attrs.has("transpose_b") && n.attrs.get_int("transpose_b") != 0;
  return topi::BatchMatmulWorkload{std::max(at.shape[0], bt.shape[0]), at.shape[1],
                                   bt.shape[tb ? 1 : 2], at.shape[2], tb};
}

/// A template's schedule over a fresh schedule of the kernel's outputs, when the group is the
/// master plus an element-wise epilogue; by pattern kind otherwise.
std::function<te::Schedule(const ScheduleInput&)> with_epilogue(
    std::function<void(const ScheduleInput&, te::Schedule&)> f) {
  return [f](const ScheduleInput& in) {
    if (!in.epilogue_shape()) return schedule_by_pattern(in);
    te::Schedule s = te::create_schedule(in.outs);
    f(in, s);
    return s;
  };
}

/// A whole-group schedule function of topi, used when the group is the master plus an
/// element-wise epilogue; by pattern kind otherwise.
std::function<te::Schedule(const ScheduleInput&)> epilogue_only(
    te::Schedule (*f)(const std::vector<te::Tensor>&, const Target&)) {
  return [f](const ScheduleInput& in) {
    return in.epilogue_shape() ? f(in.outs, in.target) : schedule_by_pattern(in);
  };
}

void register_implementations() {
  register_implementation(
      {"conv2d_nchwc.cpu", with_epilogue([](const ScheduleInput& in, te::Schedule& s) {
         topi::schedule_conv2d_nchwc(in.config, s, in.outs[0], in.target);
       }),
       [](const OpCall& c) {
         // Weights computed at run time: the workload as it is (the hook pads only constants).
         if (!c.is_f32_constant(1))
           return conv2d_task(conv2d_workload_or_throw(c, false), c.target);
         topi::Conv2DWorkload wl = conv2d_workload_or_throw(c);
         return conv2d_task(padded_output_workload(wl, c.target).value_or(wl), c.target);
       },
       alter_conv2d_nchwc, "conv2d"});
  register_implementation(
      {"conv2d_winograd_nchwc.cpu", with_epilogue([](const ScheduleInput& in, te::Schedule& s) {
         topi::schedule_conv2d_winograd_nchwc(in.config, s, in.outs[0], in.target);
       }),
       [](const OpCall& c) { return conv2d_winograd_task(conv2d_workload_or_throw(c), c.target); },
       alter_conv2d_winograd, "conv2d_winograd"});
  // Grouped convolutions (1 < groups, not depthwise) in NCHW<x>c (topi/conv2d_grouped.h).
  register_implementation(
      {"conv2d_grouped_nchwc.cpu", with_epilogue([](const ScheduleInput& in, te::Schedule& s) {
         topi::schedule_conv2d_grouped_nchwc(in.config, s, in.outs[0], in.target);
       }),
       [](const OpCall& c) { return conv2d_grouped_task(conv2d_workload_or_throw(c), c.target); },
       alter_conv2d_grouped, "conv2d_grouped"});
  register_implementation(
      {"depthwise_conv2d_nchwc.cpu", with_epilogue([](const ScheduleInput& in, te::Schedule& s) {
         topi::schedule_depthwise_conv2d_nchwc(in.config, s, in.outs[0], in.target);
       }),
       [](const OpCall& c) {
         // A channel multiplier runs as that many depthwise convolutions of multiplier 1.
         topi::Conv2DWorkload wl = conv2d_workload_or_throw(c);
         wl.out_channel = wl.in_channel;
         return depthwise_conv2d_task(wl, c.target);
       },
       alter_depthwise_conv2d, "depthwise_conv2d"});
  auto dense_schedule = with_epilogue([](const ScheduleInput& in, te::Schedule& s) {
    const Attrs& a = in.master.attrs;
    topi::schedule_dense_packed(in.config, s, in.main, in.outs[0], in.target,
                                a.has("orig_units") ? a.get_int("orig_units") : 0);
  });
  auto dense_task_of = [](bool transposed) {
    return [transposed](const OpCall& c) {
      std::optional<topi::DenseWorkload> wl = dense_workload(c, transposed);
      KILN_USER_CHECK(wl.has_value())
          << "'" << c.node().name << "': not a 2-D float32 product with constant weights";
      return dense_task(*wl, c.target);
    };
  };
  register_implementation({"dense_packed.cpu", dense_schedule, dense_task_of(false),
                           [](LayoutRewriter& rw) { return alter_dense(rw, false); }, "dense"});
  register_implementation({"matmul_packed.cpu", dense_schedule, dense_task_of(true),
                           [](LayoutRewriter& rw) { return alter_dense(rw, true); }, "dense"});
  register_implementation(
      {"batch_matmul.cpu", with_epilogue([](const ScheduleInput& in, te::Schedule& s) {
         topi::schedule_batch_matmul(in.config, s, in.main, in.target, in.outs[0]);
       }),
       [](const OpCall& c) {
         std::optional<topi::BatchMatmulWorkload> wl = batch_matmul_workload(c);
         KILN_USER_CHECK(wl.has_value())
             << "'" << c.node().name << "': not a batched float32 product of 3-D operands";
         return batch_matmul_task(*wl, c.target);
       },
       nullptr, "batch_matmul"});
  register_implementation({"lstm_cell_packed.cpu",
                           [](const ScheduleInput& in) {
                             te::Schedule s = te::create_schedule(in.outs);
                             topi::schedule_lstm_cell(in.config, s, in.outs, in.target);
                             return s;
                           },
                           [](const OpCall& c) {
                             const TensorType& ht = c.input_type(1);
                             return lstm_cell_task(ht.shape[0], ht.shape[1], c.target);
                           },
                           alter_lstm_cell, "lstm_cell"});
  // Rewrites only: the nodes they emit run conv2d_nchwc.cpu and the pattern implementations.
  register_implementation({"conv2d_transpose_subpixel.cpu", schedule_by_pattern, nullptr,
                           alter_conv2d_transpose_subpixel, ""});
  register_implementation({"conv2d_transpose_dilated.cpu", schedule_by_pattern, nullptr,
                           alter_conv2d_transpose_dilated, ""});
  register_implementation({"conv2d_transpose_depthwise.cpu", schedule_by_pattern, nullptr,
                           alter_conv2d_transpose_depthwise, ""});
  // NCHW and other single-template ops.
  register_implementation(
      {"conv2d_nchw.cpu", epilogue_only(topi::schedule_conv2d_nchw), nullptr, nullptr, ""});
  register_implementation({"conv2d_transpose_nchw.cpu",
                           epilogue_only(topi::schedule_conv2d_transpose_nchw), nullptr, nullptr,
                           ""});
  register_implementation(
      {"conv3d_ncdhw.cpu", epilogue_only(topi::schedule_conv3d_ncdhw), nullptr, nullptr, ""});
  register_implementation({"pool.cpu", epilogue_only(topi::schedule_pool), nullptr, nullptr, ""});
  register_implementation(
      {"softmax.cpu",
       [](const ScheduleInput& in) { return topi::schedule_softmax(in.outs, in.target); }, nullptr,
       nullptr, ""});
  register_implementation(
      {"norm.cpu", [](const ScheduleInput& in) { return topi::schedule_norm(in.outs, in.target); },
       nullptr, nullptr, ""});
}

/// A strategy that always offers `impl` as the node is.
FStrategy always(const std::string& impl) {
  return [impl](const OpCall&) { return std::vector<Choice>{{impl, 10, false}}; };
}

}  // namespace

void register_cpu_strategies() {
  register_implementations();
  register_strategy("conv2d", "cpu", [](const OpCall& c) {
    std::vector<Choice> r{{"conv2d_nchw.cpu", 0, false}};
    std::optional<topi::Conv2DWorkload> wl = conv2d_workload(c);
    if (!wl) {
      // Weights computed at run time: blocked, packed by a pack_conv2d_weight node.
      wl = conv2d_workload(c, false);
      if (wl && wl->params.groups == 1) r.push_back({"conv2d_nchwc.cpu", 10, true});
      return r;
    }
    if (depthwise_multiplier(*wl) >= 1) {
      r.push_back({"depthwise_conv2d_nchwc.cpu", 10, true});
    } else if (wl->params.groups == 1) {
      r.push_back({"conv2d_nchwc.cpu", 10, true});
      if (!detail::exact_sums(c.node().attrs) && topi::winograd_candidate(*wl)) {
        bool prefer = false;
        try {
          prefer = topi::prefer_winograd(*wl, c.target);
        } catch (const Error&) {
        }
        r.push_back({"conv2d_winograd_nchwc.cpu", prefer ? 20 : 5, true});
      }
    }
    // Grouped, not depthwise: the blocked grouped template (ResNeXt, RegNet).
    if (wl->params.groups > 1 && depthwise_multiplier(*wl) == 0)
      r.push_back({"conv2d_grouped_nchwc.cpu", 10, true});
    return r;
  });
  register_strategy("conv2d_transpose", "cpu", [](const OpCall&) {
    return std::vector<Choice>{{"conv2d_transpose_depthwise.cpu", 30, true},
                               {"conv2d_transpose_subpixel.cpu", 20, true},
                               {"conv2d_transpose_dilated.cpu", 10, true},
                               {"conv2d_transpose_nchw.cpu", 0, false}};
  });
  register_strategy("dense", "cpu", [](const OpCall& c) {
    std::vector<Choice> r;
    if (dense_workload(c, false)) r.push_back({"dense_packed.cpu", 10, true});
    return r;
  });
  register_strategy("matmul", "cpu", [](const OpCall& c) {
    std::vector<Choice> r;
    if (dense_workload(c, true)) r.push_back({"matmul_packed.cpu", 10, true});
    if (batch_matmul_workload(c)) r.push_back({"batch_matmul.cpu", 10, false});
    return r;
  });
  register_strategy("batch_matmul", "cpu", [](const OpCall& c) {
    std::vector<Choice> r;
    if (batch_matmul_workload(c)) r.push_back({"batch_matmul.cpu", 10, false});
    return r;
  });
  register_strategy("lstm_cell", "cpu", [](const OpCall& c) {
    std::vector<Choice> r;
    const TensorType& ht = c.input_type(1);
    if (ht.dtype == DataType::Float(32) && ht.shape.size() == 2 && c.is_f32_constant(3))
      r.push_back({"lstm_cell_packed.cpu", 10, true});
    return r;
  });
  // Nodes already in an implementation's form (made by a layout hook, or built so).
  register_strategy("conv2d_nchwc", "cpu", always("conv2d_nchwc.cpu"));
  register_strategy("conv2d_winograd_nchwc", "cpu", always("conv2d_winograd_nchwc.cpu"));
  register_strategy("depthwise_conv2d_nchwc", "cpu", always("depthwise_conv2d_nchwc.cpu"));
  register_strategy("conv2d_grouped_nchwc", "cpu", always("conv2d_grouped_nchwc.cpu"));
  register_strategy("dense_packed", "cpu", always("dense_packed.cpu"));
  register_strategy("lstm_cell_packed", "cpu", always("lstm_cell_packed.cpu"));
  register_strategy("conv3d", "cpu", always("conv3d_ncdhw.cpu"));
  for (const char* op : {"max_pool2d", "avg_pool2d", "global_max_pool2d", "global_avg_pool2d"})
    register_strategy(op, "cpu", always("pool.cpu"));
  for (const char* op : {"softmax", "log_softmax"})
    register_strategy(op, "cpu", always("softmax.cpu"));
  for (const char* op : {"layer_norm", "batch_norm"})
    register_strategy(op, "cpu", always("norm.cpu"));
}

void register_builtin_strategies() {
  register_pattern_implementations();
  register_cpu_strategies();
  register_qnn_strategies();
  register_gpu_strategies();
}

}  // namespace kiln::graph
