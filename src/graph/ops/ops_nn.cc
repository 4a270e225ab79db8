// Registration of the neural-network ops: conv2d (NCHW, groups, dilation), dense, matmul,
// batch_matmul, batch_norm, layer_norm, pooling and softmax. conv2d's type rule is topi's
// conv2d_nchw_shape; the others use the generic rule (the compute built on placeholders),
// whose errors come from topi and name the shapes.

#include "../op_attrs.h"
#include "kiln/graph/op_registry.h"
#include "kiln/support/error.h"
#include "kiln/topi/batch_matmul.h"
#include "kiln/topi/conv2d.h"
#include "kiln/topi/dense.h"
#include "kiln/topi/nn_norm.h"
#include "kiln/topi/pooling.h"

namespace kiln::graph {

namespace {

using Ints = std::vector<int64_t>;
using detail::conv_params;
using detail::pool_attrs;

std::vector<te::Tensor> one(te::Tensor t) { return {std::move(t)}; }

}  // namespace

void register_nn_ops(OpRegistry& r) {
  OpDef conv;
  conv.name = "conv2d";
  conv.min_inputs = conv.max_inputs = 2;
  conv.pattern = topi::kConv2DPattern;
  conv.attrs = detail::conv2d_attr_specs();
  // exact = 1: the sums must come out as the direct convolution rounds them, not through
  // transformed operands (Winograd): a quantized convolution's integer sums computed in float
  // (quantize_realize) are exact only so.
  conv.attrs.push_back({"exact", AttrKind::kInt, int64_t{0}});
  conv.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::conv2d_nchw(in[0], in[1], conv_params(a), n));
  };
  conv.infer_rule = [](const std::vector<TensorType>& in, const Attrs& a) {
    KILN_USER_CHECK(in[0].dtype == in[1].dtype)
        << "conv2d: dtype mismatch: data " << in[0].str() << " and kernel " << in[1].str();
    return std::vector<TensorType>{
        {topi::conv2d_nchw_shape(in[0].shape, in[1].shape, conv_params(a)), in[0].dtype}};
  };
  r.add(conv);

  OpDef dense;
  dense.name = "dense";
  dense.min_inputs = 2;
  dense.max_inputs = 3;
  dense.pattern = topi::kDensePattern;
  dense.compute = [](const std::vector<te::Tensor>& in, const Attrs&, const std::string& n) {
    return one(topi::dense(in[0], in[1], in.size() > 2 ? in[2] : te::Tensor(), n));
  };
  r.add(dense);

  // matmul: A [M, K] · B [K, N]; 3-D operands go to batch_matmul.
  OpDef matmul;
  matmul.name = "matmul";
  matmul.min_inputs = matmul.max_inputs = 2;
  matmul.pattern = topi::kDensePattern;
  matmul.compute = [](const std::vector<te::Tensor>& in, const Attrs&, const std::string& n) {
    const te::Tensor &A = in[0], &B = in[1];
    if (A.ndim() == 3 && B.ndim() == 3) return one(topi::batch_matmul(A, B, false, n));
    KILN_USER_CHECK(A.ndim() == 2 && B.ndim() == 2)
        << "matmul: operands must both be 2-D or both 3-D, got " << tensor_type(A).str() << " and "
        << tensor_type(B).str();
    TensorType ta = tensor_type(A), tb = tensor_type(B);
    KILN_USER_CHECK(ta.shape[1] == tb.shape[0] && ta.dtype == tb.dtype)
        << "matmul: cannot multiply " << ta.str() << " by " << tb.str();
    te::IterVar k = te::reduce_axis({0, A->shape[1]}, "k");
    return one(te::compute(
        {A->shape[0], B->shape[1]},
        [&](ir::Var i, ir::Var j) { return te::sum(A(i, k) * B(k, j), {k}); }, n, "matmul"));
  };
  r.add(matmul);

  OpDef bmm;
  bmm.name = "batch_matmul";
  bmm.min_inputs = bmm.max_inputs = 2;
  bmm.pattern = topi::kDensePattern;
  bmm.attrs = {{"transpose_b", AttrKind::kInt, int64_t{0}}};
  bmm.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::batch_matmul(in[0], in[1], a.get_int("transpose_b") != 0, n));
  };
  r.add(bmm);

  OpDef bn;
  bn.name = "batch_norm";
  bn.min_inputs = bn.max_inputs = 5;  // x, gamma, beta, moving_mean, moving_var
  bn.pattern = topi::OpPattern::kInjective;
  bn.attrs = {{"epsilon", AttrKind::kFloat, 1e-5}};
  bn.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::batch_norm(in[0], in[1], in[2], in[3], in[4], a.get_float("epsilon"), n));
  };
  r.add(bn);

  OpDef ln;
  ln.name = "layer_norm";
  ln.min_inputs = ln.max_inputs = 3;  // x, gamma, beta
  ln.pattern = topi::OpPattern::kCommReduce;
  ln.attrs = {{"epsilon", AttrKind::kFloat, 1e-5}};
  ln.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::layer_norm(in[0], in[1], in[2], a.get_float("epsilon"), n));
  };
  r.add(ln);

  for (auto [name, type] : {std::pair{"max_pool2d", topi::PoolType::kMax},
                            std::pair{"avg_pool2d", topi::PoolType::kAvg}}) {
    OpDef p;
    p.name = name;
    p.pattern = topi::kPoolPattern;
    p.attrs = {{"pool_size", AttrKind::kInts, std::nullopt},
               {"strides", AttrKind::kInts, Ints{1, 1}},
               {"padding", AttrKind::kInts, Ints{0, 0, 0, 0}},
               {"dilation", AttrKind::kInts, Ints{1, 1}},
               {"ceil_mode", AttrKind::kInt, int64_t{0}},
               {"layout", AttrKind::kString, std::string("NCHW")}};
    if (type == topi::PoolType::kAvg)
      p.attrs.push_back({"count_include_pad", AttrKind::kInt, int64_t{0}});
    std::string op = name;
    p.compute = [type, op](const std::vector<te::Tensor>& in, const Attrs& a,
                           const std::string& n) {
      return one(topi::pool2d(in[0], type, pool_attrs(a, op), a.get_string("layout"), n));
    };
    r.add(p);
  }
  for (auto [name, type] : {std::pair{"global_max_pool2d", topi::PoolType::kMax},
                            std::pair{"global_avg_pool2d", topi::PoolType::kAvg}}) {
    OpDef p;
    p.name = name;
    p.pattern = topi::kPoolPattern;
    p.attrs = {{"layout", AttrKind::kString, std::string("NCHW")}};
    p.compute = [type](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
      return one(topi::global_pool2d(in[0], type, a.get_string("layout"), n));
    };
    r.add(p);
  }

  OpDef softmax;
  softmax.name = "softmax";
  softmax.pattern = topi::OpPattern::kOpaque;
  softmax.attrs = {{"axis", AttrKind::kInt, int64_t{-1}}};
  softmax.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::softmax(in[0], static_cast<int>(a.get_int("axis")), n));
  };
  r.add(softmax);
  OpDef lsm = softmax;
  lsm.name = "log_softmax";
  lsm.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::log_softmax(in[0], static_cast<int>(a.get_int("axis")), n));
  };
  r.add(lsm);
}

namespace detail {

std::pair<int64_t, int64_t> pair_attr(const Attrs& a, const std::string& key,
                                      const std::string& op) {
  const Ints& v = a.get_ints(key);
  KILN_USER_CHECK(v.size() == 2 || v.size() == 1)
      << op << ": attribute '" << key << "' needs 1 or 2 values, got " << attr_value_str(v);
  return {v[0], v.size() == 2 ? v[1] : v[0]};
}

topi::Conv2DParams conv_params(const Attrs& a, const std::string& op) {
  topi::Conv2DParams p;
  std::tie(p.stride_h, p.stride_w) = pair_attr(a, "strides", op);
  std::tie(p.dilation_h, p.dilation_w) = pair_attr(a, "dilation", op);
  p.padding = topi::Padding2D::from(a.get_ints("padding"), op);
  p.groups = a.has("groups") ? a.get_int("groups") : 1;
  return p;
}

topi::Pool2DAttrs pool_attrs(const Attrs& a, const std::string& op) {
  topi::Pool2DAttrs p;
  auto [kh, kw] = pair_attr(a, "pool_size", op);
  auto [sh, sw] = pair_attr(a, "strides", op);
  auto [dh, dw] = pair_attr(a, "dilation", op);
  p.kernel = {kh, kw};
  p.stride = {sh, sw};
  p.dilation = {dh, dw};
  topi::Padding2D pad = topi::Padding2D::from(a.get_ints("padding"), op);
  p.padding = {pad.top, pad.left, pad.bottom, pad.right};
  p.ceil_mode = a.get_int("ceil_mode") != 0;
  if (a.has("count_include_pad")) p.count_include_pad = a.get_int("count_include_pad") != 0;
  return p;
}

}  // namespace detail

}  // namespace kiln::graph
