// The optimizer steps of ONNX's preview training domain (Adagrad, Momentum, Adam) as
// element-wise graph ops: one update per (X, G, state) group, with the learning rate R and the
// step count T constant (the scalar factors they give are computed at import time, in double).
// MaxUnpool with constant indices: the pooled values scattered into zeros. MatMulInteger and
// ConvInteger: zero points subtracted in int32, then the int32 matmul / conv2d.
#include "converter.h"

namespace kiln::frontend::onnx_import {

namespace {

using graph::Entry;
using Ints = std::vector<int64_t>;

/// The number of optimized tensors: (inputs - 2) / groups, checked.
size_t tensor_count(Converter& c, size_t groups) {
  size_t n = c.node->inputs.size();
  KILN_USER_CHECK(n > 2 && (n - 2) % groups == 0)
      << c.where() << ": " << n << " inputs; expected R, T and " << groups
      << " groups of equally many tensors";
  return (n - 2) / groups;
}

DataType float_type(Converter& c, size_t i) {
  DataType t = c.type_in(i).dtype;
  c.unsupported_if(!(t == DataType::Float(32) || t == DataType::Float(64)),
                   c.node->op_type + " of " + t.str());
  return t;
}

/// norm_coefficient · X + G.
Entry regularized(Converter& c, Entry x, Entry g, DataType t) {
  double norm = c.attr_float("norm_coefficient", 0.0);
  if (norm == 0) return g;
  return c.op("add", {c.op("multiply", {c.fill("norm", norm, t), x}), g});
}

std::vector<Entry> convert_adagrad(Converter& c) {
  size_t n = tensor_count(c, 3);
  double R = c.const_scalar(0, "R"), T = c.const_scalar(1, "T");
  double r = R / (1 + T * c.attr_float("decay_factor", 0.0));
  double eps = c.attr_float("epsilon", 1e-6);
  std::vector<Entry> xs, hs;
  for (size_t k = 0; k < n; ++k) {
    DataType t = float_type(c, 2 + k);
    Entry x = c.in(2 + k), g = regularized(c, x, c.in(2 + n + k), t), h = c.in(2 + 2 * n + k);
    Entry h_new = c.op("add", {h, c.op("multiply", {g, g})});
    Entry adaptive = c.op("add", {c.op("sqrt", {h_new}), c.fill("eps", eps, t)});
    Entry step = c.op("divide", {c.op("multiply", {c.fill("r", r, t), g}), adaptive});
    xs.push_back(c.op("subtract", {x, step}));
    hs.push_back(h_new);
  }
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

std::vector<Entry> convert_momentum(Converter& c) {
  size_t n = tensor_count(c, 3);
  double R = c.const_scalar(0, "R"), T = c.const_scalar(1, "T");
  double alpha = c.attr_float("alpha", 0.0), beta = c.attr_float("beta", 0.0);
  std::string mode = c.attr_string("mode", "standard");
  KILN_USER_CHECK(mode == "standard" || mode == "nesterov")
      << c.where() << ": mode must be 'standard' or 'nesterov', got '" << mode << "'";
  double beta_adj = T > 0 ? beta : 1.0;
  std::vector<Entry> xs, vs;
  for (size_t k = 0; k < n; ++k) {
    DataType t = float_type(c, 2 + k);
    Entry x = c.in(2 + k), g = regularized(c, x, c.in(2 + n + k), t), v = c.in(2 + 2 * n + k);
    Entry v_new = c.op("add", {c.op("multiply", {c.fill("alpha", alpha, t), v}),
                               c.op("multiply", {c.fill("beta", beta_adj, t), g})});
    Entry dir = mode == "standard"
                    ? v_new
                    : c.op("add", {g, c.op("multiply", {c.fill("alpha", alpha, t), v_new})});
    xs.push_back(c.op("subtract", {x, c.op("multiply", {c.fill("R", R, t), dir})}));
    vs.push_back(v_new);
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  return xs;
}

std::vector<Entry> convert_adam(Converter& c) {
  size_t n = tensor_count(c, 4);
  double R = c.const_scalar(0, "R"), T = c.const_scalar(1, "T");
  double alpha = c.attr_float("alpha", 0.9), beta = c.attr_float("beta", 0.999),
         eps = c.attr_float("epsilon", 1e-6), post = c.attr_float("norm_coefficient_post", 0.0);
  double r = T > 0 ? R * std::sqrt(1 - std::pow(beta, T)) / (1 - std::pow(alpha, T)) : R;
  std::vector<Entry> xs, vs, hs;
  for (size_t k = 0; k < n; ++k) {
    DataType t = float_type(c, 2 + k);
    Entry x = c.in(2 + k), g = regularized(c, x, c.in(2 + n + k), t);
    Entry v = c.in(2 + 2 * n + k), h = c.in(2 + 3 * n + k);
    Entry v_new = c.op("add", {c.op("multiply", {c.fill("alpha", alpha, t), v}),
                               c.op("multiply", {c.fill("one_minus_alpha", 1 - alpha, t), g})});
    Entry h_new =
        c.op("add",
             {c.op("multiply", {c.fill("beta", beta, t), h}),
              c.op("multiply", {c.fill("one_minus_beta", 1 - beta, t), c.op("multiply", {g, g})})});
    Entry denom = c.op("add", {c.op("sqrt", {h_new}), c.fill("eps", eps, t)});
    Entry x_new = c.op("subtract",
                       {x, c.op("divide", {c.op("multiply", {c.fill("r", r, t), v_new}), denom})});
    if (post != 0) x_new = c.op("multiply", {c.fill("post", 1 - post, t), x_new});
    xs.push_back(x_new);
    vs.push_back(v_new);
    hs.push_back(h_new);
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

/// MaxUnpool: out = zeros of the unpooled shape with X's values at the (constant) flat
/// indices I.
std::vector<Entry> convert_max_unpool(Converter& c) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(t.shape.size() != 4, "MaxUnpool of a tensor that is not 4-D");
  // Indices address the unpooled shape the window attributes give; an output_shape pads that
  // (the odd element at the end), as ONNX's reference does.
  Ints k = c.attr_ints("kernel_shape", {}), st = c.attr_ints("strides", {1, 1}),
       p = c.attr_ints("pads", {0, 0, 0, 0});
  KILN_USER_CHECK(k.size() == 2 && st.size() == 2 && p.size() == 4)
      << c.where() << ": kernel_shape, strides and pads must describe a 2-D window";
  Ints out = {t.shape[0], t.shape[1], (t.shape[2] - 1) * st[0] + k[0] - p[0] - p[2],
              (t.shape[3] - 1) * st[1] + k[1] - p[1] - p[3]};
  Ints want = c.has_input(2) ? c.const_ints(2, "output_shape") : out;
  KILN_USER_CHECK(want.size() == 4 && want[0] == out[0] && want[1] == out[1] && want[2] >= out[2] &&
                  want[3] >= out[3])
      << c.where() << ": output_shape must be 4-D and at least the unpooled shape";
  Ints idx = c.const_ints(1, "indices");
  int64_t total = out[0] * out[1] * out[2] * out[3], n = t.numel();
  KILN_USER_CHECK(static_cast<int64_t>(idx.size()) == n)
      << c.where() << ": " << idx.size() << " indices for " << n << " values";
  // Source of each output element: the last value whose index lands there, else none.
  Ints src(static_cast<size_t>(total), -1);
  for (int64_t k = 0; k < n; ++k) {
    KILN_USER_CHECK(idx[k] >= 0 && idx[k] < total)
        << c.where() << ": index " << idx[k] << " is outside the output of " << total
        << " elements";
    src[idx[k]] = k;
  }
  runtime::NDArray has = runtime::NDArray::empty({total}, DataType::Bool());
  Ints pick(static_cast<size_t>(total));
  for (int64_t k = 0; k < total; ++k) {
    has.data_as<uint8_t>()[k] = src[k] >= 0;
    pick[k] = std::max<int64_t>(src[k], 0);
  }
  Entry flat = c.op("reshape", {c.in(0)}, {{"newshape", Ints{n}}});
  Entry v = c.op("take", {flat, c.constant("pick", int64_array(pick))}, {{"axis", int64_t{0}}});
  Entry y = c.op("where", {c.constant("has", has), v, c.fill("zero", 0, t.dtype)});
  y = c.op("reshape", {y}, {{"newshape", out}});
  if (want != out) {
    Ints before{0, 0, (want[2] - out[2]) / 2, (want[3] - out[3]) / 2};
    Ints after{0, 0, want[2] - out[2] - before[2], want[3] - out[3] - before[3]};
    y = c.op("pad", {y}, {{"pad_before", before}, {"pad_after", after}, {"value", 0.0}});
  }
  return {y};
}

/// x - zero_point in int32 (zero point per tensor, or per row / column along `axis`).
Entry minus_zero_point(Converter& c, size_t x, size_t zp, int64_t axis, size_t rank) {
  std::string i32 = "int32";
  Entry v = c.op("cast", {c.in(x)}, {{"dtype", i32}});
  if (!c.has_input(zp)) return v;
  Entry z = c.op("cast", {c.in(zp)}, {{"dtype", i32}});
  if (c.rank_of(c.in(zp)) > 0 && c.type_in(zp).numel() > 1) {
    Ints shape(rank, 1);
    shape[static_cast<size_t>(axis)] = -1;
    z = c.op("reshape", {z}, {{"newshape", shape}});
  }
  return c.op("subtract", {v, z});
}

/// MatMulInteger / ConvInteger: the zero points subtracted in int32, then an int32 product.
std::vector<Entry> convert_integer_product(Converter& c, bool conv) {
  for (size_t i : {0, 1}) {
    DataType t = c.type_in(i).dtype;
    c.unsupported_if(!(t == DataType::UInt(8) || t == DataType::Int(8)),
                     c.node->op_type + " of " + t.str());
  }
  size_t ra = c.type_in(0).shape.size(), rb = c.type_in(1).shape.size();
  if (!conv) {
    c.unsupported_if(ra != 2 || rb != 2, "MatMulInteger of operands that are not 2-D");
    Entry a = minus_zero_point(c, 0, 2, 0, ra), b = minus_zero_point(c, 1, 3, 1, rb);
    return {c.op("matmul", {a, b})};
  }
  c.unsupported_if(ra != 4, "ConvInteger of a tensor that is not 4-D");
  c.unsupported_if(c.attr_string("auto_pad", "NOTSET") != "NOTSET", "ConvInteger with auto_pad");
  Entry x = minus_zero_point(c, 0, 2, 1, ra), w = minus_zero_point(c, 1, 3, 0, rb);
  return {c.op("conv2d", {x, w},
               {{"strides", c.attr_ints("strides", {1, 1})},
                {"padding", c.attr_ints("pads", {0, 0, 0, 0})},
                {"dilation", c.attr_ints("dilations", {1, 1})},
                {"groups", c.attr_int("group", 1)}})};
}

}  // namespace

void register_training_converters(ConvertTable& t) {
  t["Adagrad"] = convert_adagrad;
  t["Momentum"] = convert_momentum;
  t["Adam"] = convert_adam;
  t["MaxUnpool"] = convert_max_unpool;
  t["MatMulInteger"] = [](Converter& c) { return convert_integer_product(c, false); };
  t["ConvInteger"] = [](Converter& c) { return convert_integer_product(c, true); };
}

}  // namespace kiln::frontend::onnx_import
