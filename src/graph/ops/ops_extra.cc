// Registration of the ops that ONNX models need beyond the core families: transposed
// convolution (DCGAN's up-sampling; topi's conv2d_transpose_nchw, with its shape rule), and
// the like. Sequence models (LSTM, GRU, RNN) and Resize are composed from core ops by the
// importer, so they need no op of their own.

#include "kiln/graph/op_registry.h"
#include "kiln/support/error.h"
#include "kiln/topi/conv2d_transpose.h"

namespace kiln::graph {

namespace {

using Ints = std::vector<int64_t>;

std::pair<int64_t, int64_t> pair_of(const Attrs& a, const std::string& key) {
  const Ints& v = a.get_ints(key);
  KILN_USER_CHECK(v.size() == 2 || v.size() == 1)
      << "conv2d_transpose: attribute '" << key << "' needs 1 or 2 values, got "
      << attr_value_str(v);
  return {v[0], v.size() == 2 ? v[1] : v[0]};
}

topi::Conv2DParams transpose_params(const Attrs& a) {
  topi::Conv2DParams p;
  std::tie(p.stride_h, p.stride_w) = pair_of(a, "strides");
  std::tie(p.dilation_h, p.dilation_w) = pair_of(a, "dilation");
  p.padding = topi::Padding2D::from(a.get_ints("padding"), "conv2d_transpose");
  p.groups = a.get_int("groups");
  return p;
}

}  // namespace

void register_extra_ops(OpRegistry& r) {
  // conv2d_transpose: data [N, C, H, W], kernel [C, O/groups, KH, KW] (ONNX / PyTorch layout).
  OpDef ct;
  ct.name = "conv2d_transpose";
  ct.min_inputs = ct.max_inputs = 2;
  ct.pattern = topi::OpPattern::kOutEWiseFusable;
  ct.attrs = {{"strides", AttrKind::kInts, Ints{1, 1}},
              {"padding", AttrKind::kInts, Ints{0, 0, 0, 0}},
              {"dilation", AttrKind::kInts, Ints{1, 1}},
              {"output_padding", AttrKind::kInts, Ints{0, 0}},
              {"groups", AttrKind::kInt, int64_t{1}}};
  ct.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    auto [oh, ow] = pair_of(a, "output_padding");
    return std::vector<te::Tensor>{
        topi::conv2d_transpose_nchw(in[0], in[1], transpose_params(a), oh, ow, n)};
  };
  ct.infer_rule = [](const std::vector<TensorType>& in, const Attrs& a) {
    KILN_USER_CHECK(in[0].dtype == in[1].dtype) << "conv2d_transpose: dtype mismatch: data "
                                                << in[0].str() << " and kernel " << in[1].str();
    auto [oh, ow] = pair_of(a, "output_padding");
    return std::vector<TensorType>{
        {topi::conv2d_transpose_nchw_shape(in[0].shape, in[1].shape, transpose_params(a), oh, ow),
         in[0].dtype}};
  };
  r.add(ct);
}

}  // namespace kiln::graph
