// Graph ops: N-d convolution and pooling. conv3d and conv3d_transpose (NCDHW, groups, dilation,
// per-side padding listed begins then ends) are out-element-wise-fusable like conv2d, so a
// bias add or an activation fuses into their output; max_pool_nd / avg_pool_nd pool any of 1 to
// 3 spatial axes (ONNX's attribute spelling, no limit on the padding) with pooling's pattern;
// max_pool_nd_indices is MaxPool's Indices output (int64), opaque. Absent strides / dilation /
// padding mean 1 / 1 / 0 on every spatial axis.
#include "kiln/graph/op_registry.h"
#include "kiln/support/error.h"
#include "kiln/topi/conv_nd.h"

namespace kiln::graph {

namespace {

using Ints = std::vector<int64_t>;

std::vector<te::Tensor> one(te::Tensor t) { return {std::move(t)}; }

/// `key` of `a`, or `n` copies of `dflt` when it is empty.
Ints per_axis(const Attrs& a, const std::string& key, size_t n, int64_t dflt) {
  const Ints& v = a.has(key) ? a.get_ints(key) : Ints{};
  return v.empty() ? Ints(n, dflt) : v;
}

topi::ConvNdParams conv_nd_params(const Attrs& a) {
  topi::ConvNdParams p;
  p.strides = per_axis(a, "strides", 3, 1);
  p.dilation = per_axis(a, "dilation", 3, 1);
  p.padding = per_axis(a, "padding", 6, 0);
  p.output_padding = per_axis(a, "output_padding", 3, 0);
  p.groups = a.get_int("groups");
  return p;
}

topi::PoolNdAttrs pool_nd_attrs(const Attrs& a) {
  topi::PoolNdAttrs p;
  p.kernel = a.get_ints("pool_size");
  size_t n = p.kernel.size();
  p.stride = per_axis(a, "strides", n, 1);
  p.dilation = per_axis(a, "dilation", n, 1);
  p.padding = per_axis(a, "padding", 2 * n, 0);
  p.ceil_mode = a.get_int("ceil_mode") != 0;
  if (a.has("count_include_pad")) p.count_include_pad = a.get_int("count_include_pad") != 0;
  return p;
}

}  // namespace

void register_ndim_ops(OpRegistry& r) {
  OpDef conv;
  conv.name = "conv3d";
  conv.min_inputs = conv.max_inputs = 2;
  conv.pattern = topi::kConv3DPattern;
  conv.attrs = {{"strides", AttrKind::kInts, Ints{1, 1, 1}},
                {"padding", AttrKind::kInts, Ints{0, 0, 0, 0, 0, 0}},
                {"dilation", AttrKind::kInts, Ints{1, 1, 1}},
                {"groups", AttrKind::kInt, int64_t{1}}};
  conv.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::conv3d_ncdhw(in[0], in[1], conv_nd_params(a), n));
  };
  conv.infer_rule = [](const std::vector<TensorType>& in, const Attrs& a) {
    KILN_USER_CHECK(in[0].dtype == in[1].dtype)
        << "conv3d: dtype mismatch: data " << in[0].str() << " and kernel " << in[1].str();
    return std::vector<TensorType>{
        {topi::conv3d_ncdhw_shape(in[0].shape, in[1].shape, conv_nd_params(a)), in[0].dtype}};
  };
  r.add(conv);

  OpDef convt;
  convt.name = "conv3d_transpose";
  convt.min_inputs = convt.max_inputs = 2;
  convt.pattern = topi::kConv3DPattern;
  convt.attrs = conv.attrs;
  convt.attrs.push_back({"output_padding", AttrKind::kInts, Ints{0, 0, 0}});
  convt.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::conv3d_transpose_ncdhw(in[0], in[1], conv_nd_params(a), n));
  };
  convt.infer_rule = [](const std::vector<TensorType>& in, const Attrs& a) {
    KILN_USER_CHECK(in[0].dtype == in[1].dtype) << "conv3d_transpose: dtype mismatch: data "
                                                << in[0].str() << " and kernel " << in[1].str();
    return std::vector<TensorType>{
        {topi::conv3d_transpose_ncdhw_shape(in[0].shape, in[1].shape, conv_nd_params(a)),
         in[0].dtype}};
  };
  r.add(convt);

  std::vector<AttrSpec> window = {{"pool_size", AttrKind::kInts, std::nullopt},
                                  {"strides", AttrKind::kInts, Ints{}},
                                  {"padding", AttrKind::kInts, Ints{}},
                                  {"dilation", AttrKind::kInts, Ints{}},
                                  {"ceil_mode", AttrKind::kInt, int64_t{0}}};
  for (auto [name, type] : {std::pair{"max_pool_nd", topi::PoolType::kMax},
                            std::pair{"avg_pool_nd", topi::PoolType::kAvg}}) {
    OpDef p;
    p.name = name;
    p.pattern = topi::kPoolPattern;
    p.attrs = window;
    if (type == topi::PoolType::kAvg)
      p.attrs.push_back({"count_include_pad", AttrKind::kInt, int64_t{0}});
    p.compute = [type](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
      return one(topi::pool_nd(in[0], type, pool_nd_attrs(a), n));
    };
    r.add(p);
  }

  OpDef idx;
  idx.name = "max_pool_nd_indices";
  idx.pattern = topi::OpPattern::kOpaque;
  idx.attrs = window;
  idx.attrs.push_back({"storage_order", AttrKind::kInt, int64_t{0}});
  idx.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::max_pool_nd_indices(in[0], pool_nd_attrs(a),
                                         static_cast<int>(a.get_int("storage_order")), n));
  };
  r.add(idx);
}

}  // namespace kiln::graph
