// ONNX indexing operators, composed from graph ops:
//  - Gather is the graph's take, GatherElements its gather_elements;
//  - TopK is the graph's topk (a partial sort in the runtime);
//  - Scatter / ScatterElements / ScatterND and GatherND with constant indices: the targets are
//    resolved at import time into takes of the updates (one per level of duplicate targets)
//    combined with the data by the reduction; GatherND is one take on the flattened data;
//  - OneHot (equal against an index constant), Compress (take at the selected positions of a
//    constant condition), ReverseSequence (a take of rows at constant source rows).
#include "converter.h"

namespace kiln::frontend::onnx_import {

namespace {

using graph::Attrs;

Entry const_i64(Converter& c, const char* hint, const Ints& xs, Ints shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(xs.size())};
  runtime::NDArray a = runtime::NDArray::empty(shape, DataType::Int(64));
  std::copy(xs.begin(), xs.end(), a.data_as<int64_t>());
  return c.constant(hint, a);
}

// --- TopK

std::vector<Entry> convert_topk(Converter& c) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(!(t.dtype.is_float() || t.dtype.is_int()) || t.dtype.bits() == 16,
                   "TopK of " + t.dtype.str());
  int64_t r = static_cast<int64_t>(t.shape.size());
  int64_t axis = norm_axis(c, c.attr_int("axis", -1), r);
  int64_t k = c.attr_int("k", 0);
  if (c.opset >= 10) {
    Ints ks = c.const_ints(1, "k");
    KILN_USER_CHECK(ks.size() == 1)
        << c.where() << ": input 1 (k) must hold one value; it holds " << ks.size();
    k = ks[0];
  }
  int64_t n = t.shape[axis];
  KILN_USER_CHECK(k >= 0 && k <= n) << c.where() << ": k " << k << " is outside [0, " << n << "]";
  Attrs a;
  a.set("k", k);
  a.set("axis", axis);
  a.set("largest", c.attr_int("largest", 1) != 0 ? int64_t{1} : int64_t{0});
  // `sorted` = 0 leaves the order open: the sorted order is one.
  Entry e = c.op("topk", {c.in(0)}, a);
  return {Entry{e.node, 0}, Entry{e.node, 1}};
}

// --- scatter / gather with constant indices

/// Indices of input i as int64 (constant), negative ones wrapped by `dim`.
Ints const_indices(Converter& c, size_t i) { return c.const_ints(i, "indices"); }

/// out = data with updates combined into it: update row u (of `row` elements) goes to data
/// row target[u]. data viewed as [N, row], updates as [U, row].
Entry scatter_rows(Converter& c, Entry data, Entry updates, const Ints& data_shape, int64_t row,
                   const Ints& target, const std::string& reduction, DataType dt) {
  int64_t n = numel_saturating(data_shape) / row;
  int64_t u = static_cast<int64_t>(target.size());
  c.unsupported_if(reduction != "none" && reduction != "add" && reduction != "mul" &&
                       reduction != "max" && reduction != "min",
                   "reduction '" + reduction + "'");
  std::vector<Ints> levels;  // levels[l][row] = l-th update going to row (-1: none)
  std::vector<int64_t> count(static_cast<size_t>(n), 0);
  for (int64_t k = 0; k < u; ++k) {
    int64_t tr = target[k];
    KILN_USER_CHECK(tr >= 0 && tr < n) << c.where() << ": index out of range";
    int64_t l = count[tr]++;
    if (reduction == "none") l = 0;  // the last update wins
    if (static_cast<int64_t>(levels.size()) <= l) levels.push_back(Ints(n, -1));
    levels[l][tr] = k;
  }
  Entry d2 = c.op("reshape", {data}, {{"newshape", Ints{n, row}}});
  Entry u2 = c.op("reshape", {updates}, {{"newshape", Ints{u, row}}});
  Entry acc = d2;
  for (const Ints& lv : levels) {
    Ints pick(n);
    runtime::NDArray has = runtime::NDArray::empty({n, 1}, DataType::Bool());
    for (int64_t k = 0; k < n; ++k) {
      pick[k] = std::max<int64_t>(lv[k], 0);
      has.data_as<uint8_t>()[k] = lv[k] >= 0;
    }
    Entry v = c.op("take", {u2, const_i64(c, "pick", pick)}, {{"axis", int64_t{0}}});
    Entry combined = reduction == "none"  ? v
                     : reduction == "add" ? c.op("add", {acc, v})
                     : reduction == "mul" ? c.op("multiply", {acc, v})
                     : reduction == "max" ? c.op("maximum", {acc, v})
                                          : c.op("minimum", {acc, v});
    acc = c.op("where", {c.constant("has", has), combined, acc});
  }
  (void)dt;
  return c.op("reshape", {acc}, {{"newshape", data_shape}});
}

std::vector<Entry> convert_scatter_elements(Converter& c) {
  graph::TensorType dt = c.type_in(0), it = c.type_in(1), ut = c.type_in(2);
  int64_t r = static_cast<int64_t>(dt.shape.size());
  int64_t axis = norm_axis(c, c.attr_int("axis", 0), r);
  KILN_USER_CHECK(it.shape == ut.shape && static_cast<int64_t>(it.shape.size()) == r)
      << c.where() << ": indices " << it.str() << " and updates " << ut.str()
      << " must have one shape of the data's rank";
  Ints idx = const_indices(c, 1);
  Ints target(idx.size());
  Ints pos(static_cast<size_t>(r), 0);
  for (size_t k = 0; k < idx.size(); ++k) {
    // pos: multi-index of k in the indices' shape.
    int64_t rem = static_cast<int64_t>(k);
    for (int64_t d = r - 1; d >= 0; --d) {
      pos[d] = rem % it.shape[d];
      rem /= it.shape[d];
    }
    int64_t v = idx[k] < 0 ? idx[k] + dt.shape[axis] : idx[k];
    KILN_USER_CHECK(v >= 0 && v < dt.shape[axis])
        << c.where() << ": index " << idx[k] << " is out of range for dimension " << dt.shape[axis];
    int64_t lin = 0;
    for (int64_t d = 0; d < r; ++d) lin = lin * dt.shape[d] + (d == axis ? v : pos[d]);
    target[k] = lin;
  }
  return {scatter_rows(c, c.in(0), c.in(2), dt.shape, 1, target, c.attr_string("reduction", "none"),
                       dt.dtype)};
}

/// Row index (into data viewed as [prod(shape[:k]), rest]) of each index tuple.
Ints nd_rows(Converter& c, const Ints& data_shape, const Ints& idx, int64_t k, int64_t batch,
             int64_t per_batch) {
  Ints rows;
  int64_t tuples = static_cast<int64_t>(idx.size()) / k;
  int64_t inner = 1;  // rows per batch
  for (int64_t d = batch; d < batch + k; ++d) inner *= data_shape[d];
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t lin = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t dim = data_shape[batch + j];
      int64_t v = idx[t * k + j];
      if (v < 0) v += dim;
      KILN_USER_CHECK(v >= 0 && v < dim)
          << c.where() << ": index " << idx[t * k + j] << " is out of range for dimension " << dim;
      lin = lin * dim + v;
    }
    rows.push_back((t / per_batch) * inner + lin);
  }
  return rows;
}

std::vector<Entry> convert_scatter_nd(Converter& c) {
  graph::TensorType dt = c.type_in(0), it = c.type_in(1);
  KILN_USER_CHECK(!it.shape.empty()) << c.where() << ": indices must not be a scalar";
  int64_t k = it.shape.back();
  int64_t r = static_cast<int64_t>(dt.shape.size());
  KILN_USER_CHECK(k >= 1 && k <= r)
      << c.where() << ": index tuples of length " << k << " for a rank-" << r << " tensor";
  Ints idx = const_indices(c, 1);
  int64_t tuples = static_cast<int64_t>(idx.size()) / k;
  Ints rows = nd_rows(c, dt.shape, idx, k, 0, tuples);
  int64_t row = numel_saturating(Ints(dt.shape.begin() + k, dt.shape.end()));
  return {scatter_rows(c, c.in(0), c.in(2), dt.shape, row, rows, c.attr_string("reduction", "none"),
                       dt.dtype)};
}

std::vector<Entry> convert_gather_nd(Converter& c) {
  graph::TensorType dt = c.type_in(0), it = c.type_in(1);
  int64_t b = c.attr_int("batch_dims", 0);
  int64_t r = static_cast<int64_t>(dt.shape.size()), q = static_cast<int64_t>(it.shape.size());
  KILN_USER_CHECK(q >= 1 && b >= 0 && b < std::min(r, q))
      << c.where() << ": batch_dims " << b << " for data " << dt.str() << " and indices "
      << it.str();
  int64_t k = it.shape.back();
  KILN_USER_CHECK(k >= 1 && b + k <= r)
      << c.where() << ": index tuples of length " << k << " for data " << dt.str();
  Ints idx = const_indices(c, 1);
  int64_t batches = numel_saturating(Ints(it.shape.begin(), it.shape.begin() + b));
  int64_t tuples = static_cast<int64_t>(idx.size()) / k;
  Ints rows = nd_rows(c, dt.shape, idx, k, b, tuples / std::max<int64_t>(batches, 1));
  Ints rest(dt.shape.begin() + b + k, dt.shape.end());
  int64_t row = numel_saturating(rest);
  Entry d2 =
      c.op("reshape", {c.in(0)}, {{"newshape", Ints{numel_saturating(dt.shape) / row, row}}});
  Entry g = c.op("take", {d2, const_i64(c, "rows", rows)}, {{"axis", int64_t{0}}});
  Ints out(it.shape.begin(), it.shape.end() - 1);
  out.insert(out.end(), rest.begin(), rest.end());
  return {c.op("reshape", {g}, {{"newshape", out}})};
}

// --- OneHot, Tile, Compress

std::vector<Entry> convert_onehot(Converter& c) {
  graph::TensorType it = c.type_in(0), vt = c.type_in(2);
  int64_t depth = static_cast<int64_t>(c.const_scalar(1, "depth"));
  KILN_USER_CHECK(depth > 0) << c.where() << ": depth must be positive";
  int64_t r = static_cast<int64_t>(it.shape.size());
  int64_t axis = c.attr_int("axis", -1);
  KILN_USER_CHECK(axis >= -(r + 1) && axis <= r)
      << c.where() << ": axis " << axis << " is out of range for rank " << r + 1;
  if (axis < 0) axis += r + 1;
  c.unsupported_if(!(it.dtype.is_float() || it.dtype.is_int()) || it.dtype.bits() == 16,
                   "OneHot indices of " + it.dtype.str());
  Entry idx = c.in(0);
  if (it.dtype != DataType::Int(64)) idx = c.op("cast", {idx}, {{"dtype", std::string("int64")}});
  Entry zero = c.fill("zero", 0, DataType::Int(64));
  idx = c.op(
      "where",
      {c.op("less", {idx, zero}),
       c.op("add", {idx, c.fill("depth", static_cast<double>(depth), DataType::Int(64))}), idx});
  Entry hit = c.op("equal", {c.op("unsqueeze", {idx}, {{"axes", Ints{axis}}}),
                             iota(c, depth, static_cast<size_t>(r + 1), axis)});
  KILN_USER_CHECK(vt.numel() == 2) << c.where() << ": values must have 2 elements";
  Entry v = c.op("reshape", {c.in(2)}, {{"newshape", Ints{2}}});
  auto elem = [&](int64_t k) {
    return c.op("strided_slice", {v}, {{"begin", Ints{k}}, {"end", Ints{k + 1}}});
  };
  return {c.op("where", {hit, elem(1), elem(0)})};
}

std::vector<Entry> convert_compress(Converter& c) {
  graph::TensorType t = c.type_in(0);
  const runtime::NDArray* cp = c.const_input(1);
  KILN_USER_CHECK(cp) << c.where()
                      << ": input 1 (condition) must be a constant; computed values are not "
                         "supported yet (the output's shape would depend on it)";
  runtime::NDArray cond_copy = *cp;  // graph nodes added below may move the constant
  const runtime::NDArray* cond = &cond_copy;
  Entry x = c.in(0);
  int64_t axis = 0, n = 0;
  if (c.has_attr("axis")) {
    axis = norm_axis(c, c.attr_int("axis", 0), static_cast<int64_t>(t.shape.size()));
    n = t.shape[axis];
  } else {
    n = t.numel();
    x = c.op("reshape", {x}, {{"newshape", Ints{n}}});
  }
  Ints keep;
  for (int64_t k = 0; k < std::min<int64_t>(n, cond->numel()); ++k) {
    bool on = cond->dtype().bytes() == 1 ? static_cast<const uint8_t*>(cond->data())[k] != 0
                                         : c.const_ints(1, "condition")[k] != 0;
    if (on) keep.push_back(k);
  }
  c.unsupported_if(keep.empty(), "Compress selecting nothing (an empty tensor)");
  return {c.op("take", {x, const_i64(c, "keep", keep)}, {{"axis", axis}})};
}

/// ReverseSequence: a take of rows of the [time·batch, rest] view at constant source rows.
std::vector<Entry> convert_reverse_sequence(Converter& c) {
  graph::TensorType t = c.type_in(0);
  int64_t r = static_cast<int64_t>(t.shape.size());
  KILN_USER_CHECK(r >= 2) << c.where() << ": input must be at least 2-D, got " << t.str();
  int64_t ta = norm_axis(c, c.attr_int("time_axis", 0), r),
          ba = norm_axis(c, c.attr_int("batch_axis", 1), r);
  KILN_USER_CHECK((ta == 0 && ba == 1) || (ta == 1 && ba == 0))
      << c.where() << ": time_axis and batch_axis must be 0 and 1 in some order";
  Ints lens = c.const_ints(1, "sequence_lens");
  int64_t T = t.shape[ta], B = t.shape[ba];
  KILN_USER_CHECK(static_cast<int64_t>(lens.size()) == B)
      << c.where() << ": " << lens.size() << " sequence lengths for batch " << B;
  Ints src;
  for (int64_t i = 0; i < T * B; ++i) {
    int64_t tt = ta == 0 ? i / B : i % T, b = ta == 0 ? i % B : i / T;
    KILN_USER_CHECK(lens[b] >= 0 && lens[b] <= T)
        << c.where() << ": sequence length " << lens[b] << " is outside [0, " << T << "]";
    int64_t from = tt < lens[b] ? lens[b] - 1 - tt : tt;
    src.push_back(ta == 0 ? from * B + b : b * T + from);
  }
  int64_t rest = t.numel() / (T * B);
  Entry x = c.op("reshape", {c.in(0)}, {{"newshape", Ints{T * B, rest}}});
  Entry y = c.op("take", {x, const_i64(c, "src", src)}, {{"axis", int64_t{0}}});
  return {c.op("reshape", {y}, {{"newshape", t.shape}})};
}

}  // namespace

void register_index_converters(ConvertTable& t) {
  t.add("Gather", [](Converter& c) {
    return std::vector<Entry>{c.op("take", {c.in(0), c.in(1)}, {{"axis", c.attr_int("axis", 0)}})};
  });
  t.add("GatherElements", [](Converter& c) {
    int rank = c.rank_of(c.in(0));
    KILN_USER_CHECK(rank >= 0) << c.where() << ": the rank of the input cannot be inferred";
    return std::vector<Entry>{c.op("gather_elements", {c.in(0), c.in(1)},
                                   {{"axis", norm_axis(c, c.attr_int("axis", 0), rank)}})};
  });
  t.add("GatherND", convert_gather_nd);
  t.add("ScatterElements", convert_scatter_elements);
  t.add("Scatter", convert_scatter_elements);
  t.add("ScatterND", convert_scatter_nd);
  t.add("OneHot", convert_onehot);
  t.add("Compress", convert_compress);
  t.add("ReverseSequence", convert_reverse_sequence);
  t.add("TopK", convert_topk);
}

}  // namespace kiln::frontend::onnx_import
