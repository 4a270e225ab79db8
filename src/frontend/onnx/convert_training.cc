// ONNX training operators. The optimizer steps of the preview training domain (Adagrad,
// Momentum, Adam) as element-wise graph ops: one update per (X, G, state) group, with the
// learning rate R and the step count T constant (the scalar factors they give are computed at
// import time, in double). NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss with one-hot
// masks (equal against an index constant, where, sum) instead of a gather, so that ignored or
// out-of-range targets select nothing.
#include "converter.h"

namespace kiln::frontend::onnx_import {

namespace {

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

/// NegativeLogLikelihoodLoss of `logp` [N, C, d...] at `target` [N, d...] with one-hot masks
/// (target == class) instead of a gather, so ignored or out-of-range targets select nothing.
Entry nll_loss(Converter& c, Entry logp, Entry target, std::optional<Entry> weight) {
  graph::TensorType t = c.type_in(0);
  DataType tt = c.dtype_of(target);
  c.unsupported_if(!(t.dtype == DataType::Float(32) || t.dtype == DataType::Float(64)),
                   "a loss of " + t.dtype.str());
  c.unsupported_if(!(tt == DataType::Int(32) || tt == DataType::Int(64)),
                   "targets of type " + tt.str());
  size_t r = t.shape.size();
  c.unsupported_if(r < 2, "a loss of a tensor of rank < 2");
  int64_t classes = t.shape[1];
  std::string reduction = c.attr_string("reduction", "mean");
  c.unsupported_if(reduction != "none" && reduction != "sum" && reduction != "mean",
                   "reduction '" + reduction + "'");
  Ints cshape(r, 1);
  cshape[1] = classes;
  runtime::NDArray ids = runtime::NDArray::empty(cshape, tt);
  for (int64_t k = 0; k < classes; ++k) c.set_elem(ids, k, static_cast<double>(k));
  Entry onehot =
      c.op("equal", {c.op("unsqueeze", {target}, {{"axes", Ints{1}}}), c.constant("classes", ids)});
  Entry zero = c.fill("zero", 0, t.dtype);
  Attrs over_c{{"axes", Ints{1}}, {"keepdims", int64_t{0}}};
  Entry picked = c.op("sum", {c.op("where", {onehot, logp, zero})}, over_c);
  Entry w = weight ? c.op("reshape", {*weight}, {{"newshape", cshape}}) : c.fill("one", 1, t.dtype);
  Entry wt = c.op("sum", {c.op("where", {onehot, w, zero})}, over_c);
  if (c.has_attr("ignore_index")) {
    Entry ii = c.fill("ignore_index", static_cast<double>(c.attr_int("ignore_index", 0)), tt);
    wt = c.op("where", {c.op("not_equal", {target, ii}), wt, zero});
  }
  Entry loss = c.op("negative", {c.op("multiply", {picked, wt})});
  if (reduction == "none") return loss;
  Ints all;
  for (size_t d = 0; d + 1 < r; ++d) all.push_back(static_cast<int64_t>(d));
  Attrs red{{"axes", all}, {"keepdims", int64_t{0}}};
  Entry total = c.op("sum", {loss}, red);
  if (reduction == "sum") return total;
  return c.op("divide", {total, c.op("sum", {wt}, red)});
}

std::vector<Entry> convert_nll(Converter& c) {
  std::optional<Entry> w;
  if (c.has_input(2)) w = c.in(2);
  return {nll_loss(c, c.in(0), c.in(1), w)};
}

std::vector<Entry> convert_sce(Converter& c) {
  std::optional<Entry> w;
  if (c.has_input(2)) w = c.in(2);
  Entry logp = c.op("log_softmax", {c.in(0)}, {{"axis", int64_t{1}}});
  return {nll_loss(c, logp, c.in(1), w), logp};
}

}  // namespace

void register_training_converters(ConvertTable& t) {
  t.add("Adagrad", convert_adagrad);
  t.add("Momentum", convert_momentum);
  t.add("Adam", convert_adam);
  t.add("NegativeLogLikelihoodLoss", convert_nll);
  t.add("SoftmaxCrossEntropyLoss", convert_sce);
}

}  // namespace kiln::frontend::onnx_import
