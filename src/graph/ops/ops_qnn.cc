// Registration of the quantized-model ops (topi/qnn.h): qnn_quantize / qnn_dequantize (ONNX
// QuantizeLinear / DequantizeLinear with broadcast scale and zero point, float computes that the
// quantize_realize pass reads as the boundaries of integer regions), the logical integer
// products qnn_conv2d and qnn_dense (inputs data, int8 weight, int32 bias, float32 per-channel
// multiplier; the requantisation parameters as attributes) and their VNNI forms, which the CPU
// layout hooks emit with packed weights and a zero-point-compensated bias: qnn_conv2d_nchwc
// (output NCHW16c or NCHW8c), qnn_depthwise_conv2d_nchwc (NCHW<b>c in and out) and
// qnn_dense_packed.

#include "../op_attrs.h"
#include "kiln/graph/op_registry.h"
#include "kiln/support/error.h"
#include "kiln/topi/qnn.h"

namespace kiln::graph {

namespace {

using Ints = std::vector<int64_t>;

std::vector<te::Tensor> one(te::Tensor t) { return {std::move(t)}; }

/// The requantisation attributes every integer product carries.
std::vector<AttrSpec> requant_attrs() {
  return {{"x_zero_point", AttrKind::kInt, int64_t{0}},
          {"y_zero_point", AttrKind::kInt, int64_t{0}},
          {"out_min", AttrKind::kInt, int64_t{0}},
          {"out_max", AttrKind::kInt, int64_t{255}},
          {"out_dtype", AttrKind::kString, std::string("uint8")}};
}

topi::RequantParams requant_params(const Attrs& a) {
  topi::RequantParams p;
  p.x_zero_point = a.get_int("x_zero_point");
  p.y_zero_point = a.get_int("y_zero_point");
  p.out_min = a.get_int("out_min");
  p.out_max = a.get_int("out_max");
  p.out_dtype = DataType::parse(a.get_string("out_dtype"));
  return p;
}

}  // namespace

void register_qnn_ops(OpRegistry& r) {
  OpDef q;
  q.name = "qnn_quantize";
  q.min_inputs = q.max_inputs = 3;
  q.pattern = topi::OpPattern::kBroadcast;
  q.compute = [](const std::vector<te::Tensor>& in, const Attrs&, const std::string& n) {
    return one(topi::qnn_quantize(in[0], in[1], in[2], n));
  };
  r.add(q);

  OpDef dq;
  dq.name = "qnn_dequantize";
  dq.min_inputs = dq.max_inputs = 3;
  dq.pattern = topi::OpPattern::kBroadcast;
  dq.compute = [](const std::vector<te::Tensor>& in, const Attrs&, const std::string& n) {
    return one(topi::qnn_dequantize(in[0], in[1], in[2], n));
  };
  r.add(dq);

  // qnn_add(a, b): ONNX Runtime's QLinearAdd on two quantized tensors of one shape.
  OpDef add;
  add.name = "qnn_add";
  add.min_inputs = add.max_inputs = 2;
  add.pattern = topi::OpPattern::kElemWise;
  add.attrs = {{"ratio_a", AttrKind::kFloat, 1.0},
               {"ratio_b", AttrKind::kFloat, 1.0},
               {"fixed", AttrKind::kFloat, 0.0},
               {"out_min", AttrKind::kInt, int64_t{0}},
               {"out_max", AttrKind::kInt, int64_t{255}},
               {"out_dtype", AttrKind::kString, std::string("uint8")},
               {"a_offset", AttrKind::kInt, int64_t{0}},
               {"b_offset", AttrKind::kInt, int64_t{0}},
               {"y_offset", AttrKind::kInt, int64_t{0}}};
  add.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    topi::QnnAddParams p;
    p.ratio_a = static_cast<float>(a.get_float("ratio_a"));
    p.ratio_b = static_cast<float>(a.get_float("ratio_b"));
    p.fixed = static_cast<float>(a.get_float("fixed"));
    p.out_min = a.get_int("out_min");
    p.out_max = a.get_int("out_max");
    p.out_dtype = DataType::parse(a.get_string("out_dtype"));
    p.a_offset = a.get_int("a_offset");
    p.b_offset = a.get_int("b_offset");
    p.y_offset = a.get_int("y_offset");
    return one(topi::qnn_add(in[0], in[1], p, n));
  };
  r.add(add);

  // qnn_global_avg_pool2d(x): ONNX Runtime's QLinearGlobalAveragePool.
  OpDef gap;
  gap.name = "qnn_global_avg_pool2d";
  gap.pattern = topi::OpPattern::kOutEWiseFusable;
  gap.attrs = requant_attrs();
  gap.attrs.push_back({"scale", AttrKind::kFloat, std::nullopt});
  // "NCHW" or "NCHW<b>c": like the float pools, it computes in the layout of its input (the
  // layout pass sets it), so the blocked output of the last convolution is read as it is.
  gap.attrs.push_back({"layout", AttrKind::kString, std::string("NCHW")});
  gap.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    const bool blocked = a.get_string("layout") != "NCHW";
    KILN_USER_CHECK(in[0]->shape.size() == (blocked ? 5u : 4u))
        << "qnn_global_avg_pool2d: layout " << a.get_string("layout") << " needs a "
        << (blocked ? 5 : 4) << "-d input, got " << in[0]->shape.size() << " dimensions";
    return one(topi::qnn_global_avg_pool2d(in[0], static_cast<float>(a.get_float("scale")),
                                           requant_params(a), n));
  };
  r.add(gap);

  // qnn_conv2d(x, W int8 OIHW, bias int32 [O], scale float32 [O]).
  OpDef conv;
  conv.name = "qnn_conv2d";
  conv.min_inputs = conv.max_inputs = 4;
  conv.pattern = topi::OpPattern::kOutEWiseFusable;
  conv.attrs = detail::conv2d_attr_specs();
  for (AttrSpec& s : requant_attrs()) conv.attrs.push_back(s);
  conv.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::qnn_conv2d(in[0], in[1], in[2], in[3], detail::conv_params(a, "qnn_conv2d"),
                                requant_params(a), n));
  };
  r.add(conv);

  // qnn_dense(x [M, K], W int8 [N, K], bias int32 [N], scale float32 [N]).
  OpDef dense;
  dense.name = "qnn_dense";
  dense.min_inputs = dense.max_inputs = 4;
  dense.pattern = topi::OpPattern::kOutEWiseFusable;
  dense.attrs = requant_attrs();
  dense.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::qnn_dense(in[0], in[1], in[2], in[3], requant_params(a), n));
  };
  r.add(dense);

  // qnn_conv2d_nchwc(x NCHW, Wp packed, compensated bias, scale) → NCHW16c.
  OpDef cc;
  cc.name = "qnn_conv2d_nchwc";
  cc.min_inputs = cc.max_inputs = 4;
  cc.pattern = topi::OpPattern::kOutEWiseFusable;
  cc.attrs = {{"out_channels", AttrKind::kInt, std::nullopt},
              {"kernel_size", AttrKind::kInts, std::nullopt},
              {"stride", AttrKind::kInt, int64_t{1}},
              {"padding", AttrKind::kInts, Ints{0, 0, 0, 0}}};
  for (AttrSpec& s : requant_attrs()) cc.attrs.push_back(s);
  cc.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    topi::QnnConvNCHWcAttrs c;
    c.O = a.get_int("out_channels");
    const Ints& k = a.get_ints("kernel_size");
    KILN_USER_CHECK(k.size() == 2) << "qnn_conv2d_nchwc: kernel_size must have 2 values";
    c.KH = k[0];
    c.KW = k[1];
    c.stride = a.get_int("stride");
    c.padding = a.get_ints("padding");
    return one(topi::qnn_conv2d_nchwc(in[0], in[1], in[2], in[3], c, requant_params(a), n));
  };
  r.add(cc);

  // qnn_depthwise_conv2d_nchwc(x NCHW<b>c, Wd int32 [C/b, 1, KH, KW, 1, b], compensated bias,
  // scale) → NCHW<b>c.
  OpDef dw;
  dw.name = "qnn_depthwise_conv2d_nchwc";
  dw.min_inputs = dw.max_inputs = 4;
  dw.pattern = topi::OpPattern::kOutEWiseFusable;
  dw.attrs = detail::conv2d_attr_specs();
  for (AttrSpec& s : requant_attrs()) dw.attrs.push_back(s);
  dw.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::qnn_depthwise_conv2d_nchwc(
        in[0], in[1], in[2], in[3], detail::conv_params(a, "qnn_depthwise_conv2d_nchwc"),
        requant_params(a), n));
  };
  r.add(dw);

  // qnn_dense_packed(x [M, K], Wp [ceil(N/nb), ceil(K/4), nb], compensated bias, scale).
  OpDef dp;
  dp.name = "qnn_dense_packed";
  dp.min_inputs = dp.max_inputs = 4;
  dp.pattern = topi::OpPattern::kOutEWiseFusable;
  dp.attrs = requant_attrs();
  dp.attrs.push_back({"units", AttrKind::kInt, std::nullopt});
  dp.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::qnn_dense_packed(in[0], in[1], in[2], in[3], a.get_int("units"),
                                      requant_params(a), n));
  };
  r.add(dp);
}

}  // namespace kiln::graph
