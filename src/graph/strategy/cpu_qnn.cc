// CPU strategies of the integer products of quantized models (topi/qnn.h). Tensors of C
// channels are blocked by 16 when 16 divides C, else by 8 when 8 does (24, 40, … channels), so
// that every int8 convolution of a MobileNet / EfficientNet chain reads the layout its producer
// wrote. On a target with AVX-512 VNNI, qnn_conv2d (groups 1, dilation 1, square stride, a
// multiple of 8 output channels) becomes qnn_conv2d_nchwc: the int8 weights packed 4 input
// channels to an int32 in [O/b, C/4, KH, KW, b], the bias compensated for the uint8 shift of the
// data and its zero point, the output in NCHW<b>c (so element-wise ops after it stay blocked).
// On a target with AVX-512, a depthwise qnn_conv2d (multiplier 1, dilation 1, 8k channels)
// becomes qnn_depthwise_conv2d_nchwc: int32 multiply-adds over the channel block, its weights
// widened to int32 in [C/b, 1, KH, KW, 1, b], the bias compensated for the zero point the data
// is padded with. qnn_dense becomes qnn_dense_packed (dense.h's register-blocked template with
// vpdpbusd). Elsewhere, and for the shapes these do not take (grouped convolutions, other
// channel counts), the plain int32 computes run under the rule-based scheduler (the pattern
// kind's implementation).
#include "../layout_util.h"
#include "../op_attrs.h"
#include "builtin.h"
#include "kiln/graph/op_registry.h"
#include "kiln/support/error.h"
#include "kiln/topi/dense.h"
#include "kiln/topi/qnn.h"

namespace kiln::graph {

namespace {

using runtime::NDArray;
using Ints = std::vector<int64_t>;

bool has_feature(const Target& t, const char* feature) {
  try {
    return t.has_feature(feature);
  } catch (const Error&) {
    return false;
  }
}

bool has_vnni(const Target& t) { return has_feature(t, "avx512vnni"); }

int64_t channel_block(int64_t C) { return topi::qnn_channel_block(C); }

/// The node's inputs 1..3 are constants (weight, bias, scale).
bool constant_params(const OpCall& c) {
  for (size_t k = 1; k <= 3; ++k)
    if (!c.constant(k)) return false;
  return true;
}

bool vnni_conv(const OpCall& c) {
  const Node& n = c.node();
  if (!has_vnni(c.target) || !constant_params(c)) return false;
  const TensorType& xt = c.input_type(0);
  const NDArray& w = *c.constant(1);
  if (xt.shape.size() != 4 || w.ndim() != 4 || w.dtype() != DataType::Int(8)) return false;
  const Ints& s = n.attrs.get_ints("strides");
  const Ints& d = n.attrs.get_ints("dilation");
  if (n.attrs.get_int("groups") != 1 || s.size() != 2 || s[0] != s[1]) return false;
  if (d.size() != 2 || d[0] != 1 || d[1] != 1) return false;
  return channel_block(w.shape()[0]) > 0 && n.attrs.get_ints("padding").size() == 4;
}

/// A depthwise qnn_conv2d (multiplier 1) that qnn_depthwise_conv2d_nchwc takes.
bool int8_depthwise(const OpCall& c) {
  const Node& n = c.node();
  if (!has_feature(c.target, "avx512f") || !constant_params(c)) return false;
  const TensorType& xt = c.input_type(0);
  const NDArray& w = *c.constant(1);
  if (xt.shape.size() != 4 || w.ndim() != 4 || w.dtype() != DataType::Int(8)) return false;
  const int64_t C = xt.shape[1];
  const Ints& d = n.attrs.get_ints("dilation");
  if (d.size() != 2 || d[0] != 1 || d[1] != 1 || n.attrs.get_ints("padding").size() != 4)
    return false;
  return n.attrs.get_int("groups") == C && w.shape()[0] == C && w.shape()[1] == 1 &&
         channel_block(C) > 0;
}

/// The tuning workload of a qnn_conv2d node that vnni_conv takes.
topi::QnnConv2DWorkload qnn_conv_workload(const OpCall& c) {
  const TensorType& xt = c.input_type(0);
  const NDArray& w = *c.constant(1);
  const Node& n = c.node();
  topi::QnnConv2DWorkload wl;
  wl.N = xt.shape[0];
  wl.C = xt.shape[1];
  wl.H = xt.shape[2];
  wl.W = xt.shape[3];
  wl.in_block = channel_block(wl.C);
  wl.x_dtype = xt.dtype;
  wl.O = w.shape()[0];
  wl.KH = w.shape()[2];
  wl.KW = w.shape()[3];
  wl.stride = n.attrs.get_ints("strides")[0];
  wl.padding = n.attrs.get_ints("padding");
  return wl;
}

/// Its task: the template qnn_conv2d_nchwc_cpu on the workload (the key names the logical
/// workload, the same before and after the layout pass).
autotune::Task qnn_conv_task(const topi::QnnConv2DWorkload& wl, const Target& target) {
  return autotune::Task::make(topi::qnn_conv2d_nchwc_template(wl, target), target,
                              "qnn_conv2d " + wl.str());
}

/// The tuning workload of a depthwise qnn_conv2d node that int8_depthwise takes.
topi::Conv2DWorkload qnn_depthwise_workload(const OpCall& c) {
  const TensorType& xt = c.input_type(0);
  const NDArray& w = *c.constant(1);
  topi::Conv2DWorkload wl;
  wl.batch = xt.shape[0];
  wl.in_channel = wl.out_channel = xt.shape[1];
  wl.height = xt.shape[2];
  wl.width = xt.shape[3];
  wl.kernel_h = w.shape()[2];
  wl.kernel_w = w.shape()[3];
  wl.params = detail::conv_params(c.node().attrs, "qnn_conv2d");
  return wl;
}

/// Its task (the key: the logical workload and the data type).
autotune::Task qnn_depthwise_task(const topi::Conv2DWorkload& wl, DataType dt,
                                  const Target& target) {
  return autotune::Task::make(topi::qnn_depthwise_conv2d_nchwc_template(wl, dt, target), target,
                              "qnn_depthwise " + wl.str() + " " + dt.str());
}

bool vnni_dense(const OpCall& c) {
  return has_vnni(c.target) && constant_params(c) && c.input_type(0).shape.size() == 2 &&
         c.constant(1)->dtype() == DataType::Int(8);
}

/// The requantisation attributes of `n`.
Attrs requant_attrs(const Node& n) {
  Attrs a;
  for (const char* k : {"x_zero_point", "y_zero_point", "out_min", "out_max", "out_dtype"})
    a.set(k, n.attrs.get(k));
  return a;
}

int64_t data_shift(const OpCall& c) { return c.input_type(0).dtype == DataType::Int(8) ? 128 : 0; }

bool alter_qnn_conv2d(LayoutRewriter& rw) {
  const OpCall& call = rw.call();
  if (!vnni_conv(call)) return false;
  const Node& n = call.node();
  const NDArray& w = *call.constant(1);
  const std::string wname = call.graph.node(n.inputs[1].node).name;
  Node r;
  r.op = "qnn_conv2d_nchwc";
  r.name = n.name;
  r.attrs = requant_attrs(n);
  const int64_t ob = channel_block(w.shape()[0]), ib = channel_block(w.shape()[1]);
  r.attrs.set("out_channels", w.shape()[0]);
  r.attrs.set("kernel_size", Ints{w.shape()[2], w.shape()[3]});
  r.attrs.set("stride", n.attrs.get_ints("strides")[0]);
  r.attrs.set("padding", n.attrs.get_ints("padding"));
  NDArray bias = topi::compensate_bias(*call.constant(2), w, n.attrs.get_int("x_zero_point"),
                                       data_shift(call));
  // Data with whole blocks of channels is read blocked (as the convolution before wrote it).
  const std::string in_layout = ib > 0 ? detail::blocked_layout(ib) : "";
  r.inputs = {rw.input(0, in_layout),
              rw.add_constant(wname + "_vnni", topi::pack_qnn_conv2d_weight(w, ob)),
              rw.add_constant(wname + "_bias_vnni", std::move(bias)), rw.input(3, "")};
  r.outputs = {detail::blocked_type(n.outputs[0], ob)};
  const topi::QnnConv2DWorkload wl = qnn_conv_workload(call);
  const Target target = call.target;
  r.impl = ImplChoice{"qnn_conv2d_nchwc.cpu", [wl, target] { return qnn_conv_task(wl, target); }};
  rw.emit(std::move(r), detail::blocked_layout(ob));
  return true;
}

bool alter_qnn_depthwise(LayoutRewriter& rw) {
  const OpCall& call = rw.call();
  if (!int8_depthwise(call)) return false;
  const Node& n = call.node();
  const NDArray& w = *call.constant(1);
  const int64_t bn = channel_block(w.shape()[0]);
  const std::string wname = call.graph.node(n.inputs[1].node).name;
  Node r;
  r.op = "qnn_depthwise_conv2d_nchwc";
  r.name = n.name;
  r.attrs = requant_attrs(n);
  for (const char* k : {"strides", "padding", "dilation", "groups"}) r.attrs.set(k, n.attrs.get(k));
  // The data keeps its type and is padded with its zero point: no shift.
  NDArray bias = topi::compensate_bias(*call.constant(2), w, n.attrs.get_int("x_zero_point"), 0);
  r.inputs = {rw.input(0, detail::blocked_layout(bn)),
              rw.add_constant(wname + "_dw", topi::pack_qnn_depthwise_weight(w, bn)),
              rw.add_constant(wname + "_bias_dw", std::move(bias)), rw.input(3, "")};
  r.outputs = {detail::blocked_type(n.outputs[0], bn)};
  const topi::Conv2DWorkload wl = qnn_depthwise_workload(call);
  const DataType dt = call.input_type(0).dtype;
  const Target target = call.target;
  r.impl = ImplChoice{"qnn_depthwise_conv2d_nchwc.cpu",
                      [wl, dt, target] { return qnn_depthwise_task(wl, dt, target); }};
  rw.emit(std::move(r), detail::blocked_layout(bn));
  return true;
}

bool alter_qnn_dense(LayoutRewriter& rw) {
  const OpCall& call = rw.call();
  if (!vnni_dense(call)) return false;
  const Node& n = call.node();
  const NDArray& w = *call.constant(1);
  const int64_t M = call.input_type(0).shape[0], N = w.shape()[0];
  autotune::Config cfg = autotune::Config::fallback();
  const int64_t nb = topi::dense_pack_width(cfg, M, N, call.target);
  const std::string wname = call.graph.node(n.inputs[1].node).name;
  Node r;
  r.op = "qnn_dense_packed";
  r.name = n.name;
  r.attrs = requant_attrs(n);
  r.attrs.set("units", N);
  NDArray bias = topi::compensate_bias(*call.constant(2), w, n.attrs.get_int("x_zero_point"),
                                       data_shift(call));
  r.inputs = {rw.input(0, ""), rw.add_constant(wname + "_vnni", topi::pack_qnn_dense_weight(w, nb)),
              rw.add_constant(wname + "_bias_vnni", std::move(bias)), rw.input(3, "")};
  r.outputs = {n.outputs[0]};
  r.impl = ImplChoice{"qnn_dense_packed.cpu", nullptr};
  rw.emit(std::move(r), "");
  return true;
}

/// A schedule for groups whose master runs an int8 NCHWc product (VNNI or depthwise) and whose
/// other nodes are an element-wise epilogue; by pattern kind otherwise.
std::function<te::Schedule(const ScheduleInput&)> vnni_schedule(void (*f)(
    autotune::Config&, te::Schedule&, const te::Tensor&, const te::Tensor&, const Target&)) {
  return [f](const ScheduleInput& in) {
    if (!in.epilogue_shape()) return schedule_by_pattern(in);
    te::Schedule s = te::create_schedule(in.outs);
    f(in.config, s, in.main, in.outs[0], in.target);
    return s;
  };
}

}  // namespace

void register_qnn_strategies() {
  register_implementation({"qnn_conv2d_nchwc.cpu", vnni_schedule(topi::schedule_qnn_conv2d_nchwc),
                           [](const OpCall& c) {
                             KILN_USER_CHECK(vnni_conv(c))
                                 << "qnn_conv2d_nchwc: node '" << c.node().name
                                 << "' is not a convolution the VNNI kernel takes";
                             return qnn_conv_task(qnn_conv_workload(c), c.target);
                           },
                           alter_qnn_conv2d, "qnn_conv2d"});
  register_implementation({"qnn_dense_packed.cpu", vnni_schedule(topi::schedule_qnn_dense_packed),
                           nullptr, alter_qnn_dense, ""});
  register_implementation(
      {"qnn_depthwise_conv2d_nchwc.cpu", vnni_schedule(topi::schedule_qnn_depthwise_conv2d_nchwc),
       [](const OpCall& c) {
         KILN_USER_CHECK(int8_depthwise(c)) << "qnn_depthwise_conv2d_nchwc: node '" << c.node().name
                                            << "' is not a depthwise convolution the kernel takes";
         return qnn_depthwise_task(qnn_depthwise_workload(c), c.input_type(0).dtype, c.target);
       },
       alter_qnn_depthwise, "qnn_depthwise"});
  register_strategy("qnn_conv2d", "cpu", [](const OpCall& c) {
    std::vector<Choice> r;
    if (vnni_conv(c)) r.push_back({"qnn_conv2d_nchwc.cpu", 10, true});
    if (int8_depthwise(c)) r.push_back({"qnn_depthwise_conv2d_nchwc.cpu", 10, true});
    return r;
  });
  register_strategy("qnn_dense", "cpu", [](const OpCall& c) {
    std::vector<Choice> r;
    if (vnni_dense(c)) r.push_back({"qnn_dense_packed.cpu", 10, true});
    return r;
  });
  register_strategy("qnn_conv2d_nchwc", "cpu", [](const OpCall&) {
    return std::vector<Choice>{{"qnn_conv2d_nchwc.cpu", 10, false}};
  });
  register_strategy("qnn_depthwise_conv2d_nchwc", "cpu", [](const OpCall&) {
    return std::vector<Choice>{{"qnn_depthwise_conv2d_nchwc.cpu", 10, false}};
  });
  register_strategy("qnn_dense_packed", "cpu", [](const OpCall&) {
    return std::vector<Choice>{{"qnn_dense_packed.cpu", 10, false}};
  });
}

}  // namespace kiln::graph
