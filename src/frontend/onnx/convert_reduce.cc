// ONNX reductions and contractions: ReduceMean/Sum/Max/Min/Prod (graph reductions; axes as an
// input from opset 13 for ReduceSum, 18 for the others), ReduceL1/L2/LogSum/LogSumExp/SumSquare
// as element-wise ops around a sum, ArgMax/ArgMin (the min or max index where x equals its
// extreme), CumSum as a scan, and Einsum: a batched matrix
// product of two operands becomes transposes around a matmul; other equations transpose and
// broadcast the operands into one index space, multiply and sum; a repeated subscript in a single
// operand takes a diagonal (a mask, then a sum).
#include "converter.h"

namespace kiln::frontend::onnx_import {

namespace {

using graph::Attrs;

std::vector<Entry> convert_reduce(Converter& c, const char* op) {
  Ints axes = c.attr_ints("axes", {});
  bool axes_as_input = (std::string(op) == "sum" && c.opset >= 13) || c.opset >= 18;
  if (axes_as_input && c.has_input(1)) axes = c.const_ints(1, "axes");
  // With noop_with_empty_axes=1 an empty axes list leaves the input as it is.
  if (axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0)
    return {c.op("identity", {c.in(0)})};
  return {c.op(op, {c.in(0)}, {{"axes", axes}, {"keepdims", c.attr_int("keepdims", 1)}})};
}

/// ReduceL1/L2/LogSum/LogSumExp/SumSquare as element-wise ops around a sum.
std::vector<Entry> convert_reduce_composite(Converter& c, const std::string& kind) {
  Ints axes = c.attr_ints("axes", {});
  if (c.opset >= 18 && c.has_input(1)) axes = c.const_ints(1, "axes");
  c.unsupported_if(axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0,
                   "noop_with_empty_axes=1");
  DataType t = c.type_in(0).dtype;
  c.unsupported_if(!(t == DataType::Float(32) || t == DataType::Float(64)),
                   kind + " of " + t.str());
  Entry x = c.in(0);
  if (kind == "ReduceL1") x = c.op("abs", {x});
  if (kind == "ReduceL2" || kind == "ReduceSumSquare") x = c.op("multiply", {x, x});
  // LogSumExp subtracts the maximum first so that exp cannot overflow.
  Entry mx;
  if (kind == "ReduceLogSumExp") {
    mx = c.op("max", {x}, {{"axes", axes}, {"keepdims", int64_t{1}}});
    x = c.op("exp", {c.op("subtract", {x, mx})});
  }
  Entry y = c.op("sum", {x}, {{"axes", axes}, {"keepdims", c.attr_int("keepdims", 1)}});
  if (kind == "ReduceL2") y = c.op("sqrt", {y});
  if (kind == "ReduceLogSum" || kind == "ReduceLogSumExp") y = c.op("log", {y});
  if (kind == "ReduceLogSumExp")
    y = c.op("add", {y, c.op("max", {c.in(0)},
                             {{"axes", axes}, {"keepdims", c.attr_int("keepdims", 1)}})});
  return {y};
}

/// ArgMax/ArgMin: the first (or last) index along `axis` where x equals its max (min), as the
/// min (max) of where(x == extreme, index, sentinel).
std::vector<Entry> convert_arg(Converter& c, bool is_max) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(!(t.dtype == DataType::Float(32) || t.dtype == DataType::Float(64) ||
                     t.dtype == DataType::Int(32) || t.dtype == DataType::Int(64)),
                   "ArgMax/ArgMin of " + t.dtype.str());
  size_t r = t.shape.size();
  int64_t axis = norm_axis(c, c.attr_int("axis", 0), static_cast<int64_t>(r));
  int64_t keep = c.attr_int("keepdims", 1);
  bool last = c.attr_int("select_last_index", 0) != 0;
  int64_t n = t.shape[static_cast<size_t>(axis)];
  Attrs keep1{{"axes", Ints{axis}}, {"keepdims", int64_t{1}}};
  Entry ext = c.op(is_max ? "max" : "min", {c.in(0)}, keep1);
  Entry hit = c.op("equal", {c.in(0), ext});
  if (t.dtype.is_float()) {
    // A NaN extreme (max / min propagate NaN) is hit by the NaN elements (PyTorch's argmax).
    Entry nan = c.op("isnan", {c.in(0)});
    hit = c.op("where", {nan, nan, hit});
  }
  Entry sentinel = c.fill("sentinel", last ? -1.0 : static_cast<double>(n), DataType::Int(64));
  Entry idx = c.op("where", {hit, iota(c, n, r, axis), sentinel});
  return {c.op(last ? "max" : "min", {idx}, {{"axes", Ints{axis}}, {"keepdims", keep}})};
}

/// CumSum: a scan along the axis (graph op cumsum).
std::vector<Entry> convert_cumsum(Converter& c) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(t.dtype.is_bool() || t.dtype == DataType::Float(16) || t.dtype.is_bfloat16(),
                   "CumSum of " + t.dtype.str());
  int64_t r = static_cast<int64_t>(t.shape.size());
  c.unsupported_if(r < 1, "CumSum of a scalar");
  int64_t axis = norm_axis(c, static_cast<int64_t>(c.const_scalar(1, "axis")), r);
  return {c.op("cumsum", {c.in(0)},
               {{"axis", axis},
                {"exclusive", int64_t{c.attr_int("exclusive", 0) != 0}},
                {"reverse", int64_t{c.attr_int("reverse", 0) != 0}}})};
}

/// Transposes `x` (labelled `from`) into the letter order `to` (a permutation of `from`).
Entry transpose_to(Converter& c, Entry x, const std::string& from, const std::string& to) {
  if (from == to) return x;
  Ints perm;
  for (char ch : to) perm.push_back(int64_t(from.find(ch)));
  return c.op("transpose", {x}, {{"axes", perm}});
}

/// A two-operand Einsum that is a batched matrix product: every letter is a batch letter (both
/// operands and the output, equal sizes), a row letter (first operand and output), a column
/// letter (second operand and output) or a contracted one (both operands, not the output).
/// The operands are transposed to [batch, rows, k] and [batch, k, columns], flattened and
/// multiplied by matmul, the product reshaped and transposed to the output's order, as
/// exporters write attention with Transpose + MatMul. A letter in one operand only and not in
/// the output is summed over first. Other equations (broadcast batch letters, three operands)
/// return nothing and take the generic product.
std::optional<Entry> einsum_as_matmul(Converter& c, std::vector<std::string> terms,
                                      const std::string& out,
                                      const std::vector<graph::TensorType>& types) {
  if (terms.size() != 2 || types[0].dtype != DataType::Float(32) ||
      types[1].dtype != DataType::Float(32))
    return std::nullopt;
  if (std::set<char>(out.begin(), out.end()).size() != out.size()) return std::nullopt;
  std::vector<Entry> x{c.in(0), c.in(1)};
  std::map<char, int64_t> size;
  for (size_t i = 0; i < 2; ++i) {
    Ints alone;
    std::string kept;
    for (size_t d = 0; d < terms[i].size(); ++d) {
      char ch = terms[i][d];
      bool other = terms[1 - i].find(ch) != std::string::npos;
      if (!other && out.find(ch) == std::string::npos) {
        alone.push_back(int64_t(d));
        continue;
      }
      kept += ch;
      int64_t s = types[i].shape[d];
      if (size.count(ch) && size[ch] != s) return std::nullopt;  // a broadcast letter
      size[ch] = s;
    }
    if (!alone.empty()) {
      x[i] = c.op("sum", {x[i]}, {{"axes", alone}, {"keepdims", int64_t{0}}});
      terms[i] = kept;
    }
  }
  std::string batch, rows, cols, red;
  for (char ch : out) {
    bool a = terms[0].find(ch) != std::string::npos, b = terms[1].find(ch) != std::string::npos;
    if (!a && !b) return std::nullopt;
    (a && b ? batch : a ? rows : cols) += ch;
  }
  for (char ch : terms[0])
    if (out.find(ch) == std::string::npos) red += ch;
  auto extent = [&](const std::string& letters) {
    int64_t n = 1;
    for (char ch : letters) n *= size[ch];
    return n;
  };
  int64_t nb = extent(batch), m = extent(rows), n = extent(cols), k = extent(red);
  Entry a = transpose_to(c, x[0], terms[0], batch + rows + red);
  Entry b = transpose_to(c, x[1], terms[1], batch + red + cols);
  bool flat = batch.empty();
  a = c.op("reshape", {a}, {{"newshape", flat ? Ints{m, k} : Ints{nb, m, k}}});
  b = c.op("reshape", {b}, {{"newshape", flat ? Ints{k, n} : Ints{nb, k, n}}});
  Entry y = c.op("matmul", {a, b});
  Ints shape;
  for (char ch : batch + rows + cols) shape.push_back(size[ch]);
  y = c.op("reshape", {y}, {{"newshape", shape}});
  return transpose_to(c, y, batch + rows + cols, out);
}

std::vector<Entry> convert_einsum_product(Converter& c) {
  std::string eq;
  for (char ch : c.attr_string("equation", ""))
    if (ch != ' ') eq += ch;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t s = 0;;) {
    size_t e = lhs.find(',', s);
    terms.push_back(lhs.substr(s, e == std::string::npos ? std::string::npos : e - s));
    if (e == std::string::npos) break;
    s = e + 1;
  }
  KILN_USER_CHECK(terms.size() == c.node->inputs.size())
      << c.where() << ": equation '" << eq << "' has " << terms.size() << " operands, the node "
      << c.node->inputs.size();
  // Expand "..." into capital letters (the broadcast dimensions, right-aligned).
  size_t ell = 0;
  std::vector<graph::TensorType> types;
  for (size_t i = 0; i < terms.size(); ++i) {
    types.push_back(c.type_in(i));
    size_t p = terms[i].find("...");
    if (p != std::string::npos) {
      size_t n = types[i].shape.size() - (terms[i].size() - 3);
      ell = std::max(ell, n);
    }
  }
  std::string ell_letters;
  for (size_t k = 0; k < ell; ++k) ell_letters += static_cast<char>('A' + k);
  for (size_t i = 0; i < terms.size(); ++i) {
    size_t p = terms[i].find("...");
    if (p == std::string::npos) continue;
    size_t n = types[i].shape.size() - (terms[i].size() - 3);
    terms[i].replace(p, 3, ell_letters.substr(ell - n));
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
    size_t p = out.find("...");
    if (p != std::string::npos) out.replace(p, 3, ell_letters);
  } else {
    std::map<char, int> count;
    for (const std::string& t : terms)
      for (char ch : t) ++count[ch];
    out = ell_letters;
    for (auto [ch, n] : count)
      if (n == 1 && std::islower(static_cast<unsigned char>(ch))) out += ch;
  }
  // Index space: output letters, then the summed ones.
  std::string all = out;
  std::map<char, int64_t> size;
  for (size_t i = 0; i < terms.size(); ++i) {
    KILN_USER_CHECK(terms[i].size() == types[i].shape.size())
        << c.where() << ": subscripts '" << terms[i] << "' for operand " << types[i].str();
    std::set<char> seen;
    for (size_t d = 0; d < terms[i].size(); ++d) {
      char ch = terms[i][d];
      c.unsupported_if(!seen.insert(ch).second, "Einsum with a repeated subscript in one operand");
      if (all.find(ch) == std::string::npos) all += ch;
      int64_t s = types[i].shape[d];
      if (s != 1) size[ch] = s;
    }
  }
  if (std::optional<Entry> y = einsum_as_matmul(c, terms, out, types)) return {*y};
  Entry prod;
  for (size_t i = 0; i < terms.size(); ++i) {
    // Transpose into the order of `all`, then insert the missing letters as size-1 axes.
    Ints perm, shape;
    for (char ch : all) {
      size_t p = terms[i].find(ch);
      if (p != std::string::npos) perm.push_back(static_cast<int64_t>(p));
    }
    for (char ch : all) {
      size_t p = terms[i].find(ch);
      shape.push_back(p == std::string::npos ? 1 : types[i].shape[p]);
    }
    Entry x = c.op("transpose", {c.in(i)}, {{"axes", perm}});
    x = c.op("reshape", {x}, {{"newshape", shape}});
    prod = i == 0 ? x : c.op("multiply", {prod, x});
  }
  Ints summed;
  for (size_t k = out.size(); k < all.size(); ++k) summed.push_back(static_cast<int64_t>(k));
  if (summed.empty()) {
    // Broadcast to the full output shape (a lone operand may hold size-1 axes).
    Ints full;
    for (char ch : all) full.push_back(size.count(ch) ? size[ch] : 1);
    Entry ones = c.fill("ones", 1, DataType::Bool(), full);
    return {c.op("where", {ones, prod, prod})};
  }
  return {c.op("sum", {prod}, {{"axes", summed}, {"keepdims", int64_t{0}}})};
}

// --- Einsum over one operand with a repeated subscript (a diagonal)

std::optional<std::vector<Entry>> convert_einsum_diagonal(Converter& c) {
  std::string eq;
  for (char ch : c.attr_string("equation", ""))
    if (ch != ' ') eq += ch;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  if (lhs.find(',') != std::string::npos || c.node->inputs.size() != 1) return std::nullopt;
  graph::TensorType t = c.type_in(0);
  size_t r = t.shape.size();
  std::string term = lhs, ell;
  size_t p = term.find("...");
  if (p != std::string::npos) {
    KILN_USER_CHECK(r + 3 >= term.size())
        << c.where() << ": subscripts '" << term << "' for operand " << t.str();
    for (size_t k = 0; k < r + 3 - term.size(); ++k) ell += static_cast<char>('A' + k);
    term.replace(p, 3, ell);
  }
  KILN_USER_CHECK(term.size() == r)
      << c.where() << ": subscripts '" << lhs << "' for operand " << t.str();
  std::map<char, int> count;
  for (char ch : term) ++count[ch];
  bool repeated = false;
  for (auto [ch, n] : count) repeated = repeated || n > 1;
  if (!repeated) return std::nullopt;
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
    size_t q = out.find("...");
    if (q != std::string::npos) out.replace(q, 3, ell);
  } else {
    out = ell;
    for (auto [ch, n] : count)
      if (n == 1 && std::islower(static_cast<unsigned char>(ch))) out += ch;
  }
  for (char ch : out)
    KILN_USER_CHECK(count.count(ch) && std::count(out.begin(), out.end(), ch) == 1)
        << c.where() << ": output subscript '" << ch << "' is not an input subscript once";
  // Take each diagonal: keep the elements where the two indices agree, sum the second axis.
  Entry x = c.in(0);
  Ints shape = t.shape;
  for (;;) {
    size_t a = 0, b = 0;
    for (size_t i = 0; i < term.size() && b == 0; ++i)
      for (size_t j = i + 1; j < term.size(); ++j)
        if (term[i] == term[j]) {
          a = i, b = j;
          break;
        }
    if (b == 0) break;
    KILN_USER_CHECK(shape[a] == shape[b])
        << c.where() << ": subscript '" << term[a] << "' labels axes of sizes " << shape[a]
        << " and " << shape[b];
    Ints mshape(shape.size(), 1);
    mshape[a] = mshape[b] = shape[a];
    runtime::NDArray mask = runtime::NDArray::empty(mshape, DataType::Bool());
    // Row-major over mshape: axis a has stride n, axis b stride 1 (the others have size 1).
    int64_t n = shape[a];
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) mask.data_as<uint8_t>()[i * n + j] = i == j;
    x = c.op("where", {c.constant("diagonal", mask), x, c.fill("zero", 0, t.dtype)});
    x = c.op("sum", {x}, {{"axes", Ints{int64_t(b)}}, {"keepdims", int64_t{0}}});
    term.erase(b, 1);
    shape.erase(shape.begin() + int64_t(b));
  }
  Ints summed;
  std::string kept;
  for (size_t k = 0; k < term.size(); ++k)
    if (out.find(term[k]) == std::string::npos)
      summed.push_back(int64_t(k));
    else
      kept += term[k];
  if (!summed.empty()) x = c.op("sum", {x}, {{"axes", summed}, {"keepdims", int64_t{0}}});
  Ints perm;
  for (char ch : out) perm.push_back(int64_t(kept.find(ch)));
  bool identity = true;
  for (size_t k = 0; k < perm.size(); ++k) identity = identity && perm[k] == int64_t(k);
  if (!identity) x = c.op("transpose", {x}, {{"axes", perm}});
  return std::vector<Entry>{x};
}

std::vector<Entry> convert_einsum(Converter& c) {
  if (std::optional<std::vector<Entry>> v = convert_einsum_diagonal(c)) return *v;
  return convert_einsum_product(c);
}

}  // namespace

void register_reduce_converters(ConvertTable& t) {
  t.add("ReduceMean", [](Converter& c) { return convert_reduce(c, "mean"); });
  t.add("ReduceSum", [](Converter& c) { return convert_reduce(c, "sum"); });
  t.add("ReduceMax", [](Converter& c) { return convert_reduce(c, "max"); });
  t.add("ReduceMin", [](Converter& c) { return convert_reduce(c, "min"); });
  t.add("ReduceProd", [](Converter& c) { return convert_reduce(c, "prod"); });
  for (const char* a :
       {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})
    t.add(a, [k = std::string(a)](Converter& c) { return convert_reduce_composite(c, k); });
  t.add("ArgMax", [](Converter& c) { return convert_arg(c, true); });
  t.add("ArgMin", [](Converter& c) { return convert_arg(c, false); });
  t.add("CumSum", convert_cumsum);
  t.add("Einsum", convert_einsum);
}

}  // namespace kiln::frontend::onnx_import
