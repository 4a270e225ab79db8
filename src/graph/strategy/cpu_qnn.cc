// CPU strategies of the integer products of quantized models (topi/qnn.h). On a target with
// AVX-512 VNNI, qnn_conv2d (groups 1, dilation 1, square stride, a multiple of 16 output
// channels) becomes qnn_conv2d_nchwc: the int8 weights packed 4 input channels to an int32 in
// [O/16, C/4, KH, KW, 16], the bias compensated for the uint8 shift of the data and its zero
// point, the output in NCHW16c (so element-wise ops after it stay blocked); qnn_dense becomes
// qnn_dense_packed (dense.h's register-blocked template with vpdpbusd). Elsewhere, and for the
// shapes these do not take (depthwise and grouped convolutions), the plain int32 computes run
// under the rule-based scheduler (the pattern kind's implementation).
#include "../layout_util.h"
#include "builtin.h"
#include "kiln/graph/op_registry.h"
#include "kiln/support/error.h"
#include "kiln/topi/dense.h"
#include "kiln/topi/qnn.h"

namespace kiln::graph {

namespace {

using runtime::NDArray;
using Ints = std::vector<int64_t>;

bool has_vnni(const Target& t) {
  try {
    return t.has_feature("avx512vnni");
  } catch (const Error&) {
    return false;
  }
}

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
  return w.shape()[0] % 16 == 0 && n.attrs.get_ints("padding").size() == 4;
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
  r.attrs.set("out_channels", w.shape()[0]);
  r.attrs.set("kernel_size", Ints{w.shape()[2], w.shape()[3]});
  r.attrs.set("stride", n.attrs.get_ints("strides")[0]);
  r.attrs.set("padding", n.attrs.get_ints("padding"));
  NDArray bias = topi::compensate_bias(*call.constant(2), w, n.attrs.get_int("x_zero_point"),
                                       data_shift(call));
  // Data with whole blocks of 16 channels is read blocked (as the convolution before wrote it).
  const std::string in_layout = w.shape()[1] % 16 == 0 ? detail::blocked_layout(16) : "";
  r.inputs = {rw.input(0, in_layout),
              rw.add_constant(wname + "_vnni", topi::pack_qnn_conv2d_weight(w)),
              rw.add_constant(wname + "_bias_vnni", std::move(bias)), rw.input(3, "")};
  r.outputs = {detail::blocked_type(n.outputs[0], 16)};
  r.impl = ImplChoice{"qnn_conv2d_nchwc.cpu", nullptr};
  rw.emit(std::move(r), detail::blocked_layout(16));
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

/// A schedule for groups whose master runs a VNNI product and whose other nodes are an
/// element-wise epilogue; by pattern kind otherwise.
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
                           nullptr, alter_qnn_conv2d, ""});
  register_implementation({"qnn_dense_packed.cpu", vnni_schedule(topi::schedule_qnn_dense_packed),
                           nullptr, alter_qnn_dense, ""});
  register_strategy("qnn_conv2d", "cpu", [](const OpCall& c) {
    std::vector<Choice> r;
    if (vnni_conv(c)) r.push_back({"qnn_conv2d_nchwc.cpu", 10, true});
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
  register_strategy("qnn_dense_packed", "cpu", [](const OpCall&) {
    return std::vector<Choice>{{"qnn_dense_packed.cpu", 10, false}};
  });
}

}  // namespace kiln::graph
