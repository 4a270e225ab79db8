// ONNX importer: TfIdfVectorizer, quantized linear ops and other corner cases.
//
// TfIdfVectorizer's pool is an attribute, so n-gram matching is compiled as comparisons of
// shifted windows of the input against constant pool columns, summed over the positions.
// QLinearMatMul / QLinearConv are an int32 product of zero-point-corrected operands, scaled in
// float32 by a_scale·b_scale/y_scale, rounded half to even, offset and saturated (as ONNX
// Runtime requantizes). Other converters here wrap the older ones for cases they refuse:
// BatchNormalization in training mode, Reshape with allowzero, Einsum taking a diagonal, Mod of
// float16, Cast / CastLike to and from bfloat16 (the code generator converts through float32's
// bits, rounding to nearest even), and operators whose result has no elements (Slice, Split,
// Trilu, Reshape), which become empty constants.
#include "converter.h"

namespace kiln::frontend::onnx_import {
namespace {

const DataType kF32 = DataType::Float(32);
const DataType kI32 = DataType::Int(32);

int64_t numel_of(const Ints& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

/// A constant tensor of `shape` (with at least one zero dimension) and type `t`.
Entry empty_tensor(Converter& c, const Ints& shape, DataType t) {
  return c.constant("empty", runtime::NDArray::empty(shape, t));
}

std::vector<double> attr_floats(const Converter& c, const char* name) {
  auto it = c.node->attrs.find(name);
  if (it == c.node->attrs.end()) return {};
  if (const std::vector<double>* v = std::get_if<std::vector<double>>(&it->second)) return *v;
  KILN_ERROR << c.where() << ": attribute '" << name << "' must be a list of floats";
}

// --- TfIdfVectorizer

std::vector<Entry> convert_tfidf(Converter& c) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(c.has_attr("pool_strings"), "TfIdfVectorizer with pool_strings");
  c.unsupported_if(!(t.dtype == kI32 || t.dtype == DataType::Int(64)),
                   "TfIdfVectorizer of " + t.dtype.str());
  int64_t r = static_cast<int64_t>(t.shape.size());
  KILN_USER_CHECK(r == 1 || r == 2)
      << c.where() << ": the input must be 1-D or 2-D, not " << t.str();
  std::string mode = c.attr_string("mode", "");
  KILN_USER_CHECK(mode == "TF" || mode == "IDF" || mode == "TFIDF")
      << c.where() << ": mode must be TF, IDF or TFIDF, not '" << mode << "'";
  int64_t min_n = c.attr_int("min_gram_length", 0), max_n = c.attr_int("max_gram_length", 0);
  int64_t max_skip = c.attr_int("max_skip_count", 0);
  KILN_USER_CHECK(min_n >= 1 && max_n >= min_n && max_skip >= 0)
      << c.where() << ": min_gram_length (" << min_n << ") must be at least 1 and at most "
      << "max_gram_length (" << max_n << "), and max_skip_count (" << max_skip << ") not negative";
  Ints pool = c.attr_ints("pool_int64s", {}), counts = c.attr_ints("ngram_counts", {});
  Ints indexes = c.attr_ints("ngram_indexes", {});
  std::vector<double> weights = attr_floats(c, "weights");
  // Group g holds the (g+1)-grams: pool[counts[g] .. counts[g+1]).
  std::vector<int64_t> first_ngram;  // index of each group's first n-gram
  int64_t total = 0;
  for (size_t g = 0; g < counts.size(); ++g) {
    int64_t b = counts[g], e = g + 1 < counts.size() ? counts[g + 1] : int64_t(pool.size());
    int64_t n = static_cast<int64_t>(g) + 1;
    KILN_USER_CHECK(b >= 0 && b <= e && e <= int64_t(pool.size()) && (e - b) % n == 0)
        << c.where() << ": ngram_counts " << runtime::shape_str(counts)
        << " do not split a pool of " << pool.size() << " into whole " << n << "-grams";
    first_ngram.push_back(total);
    total += (e - b) / n;
  }
  KILN_USER_CHECK(int64_t(indexes.size()) == total)
      << c.where() << ": " << indexes.size() << " ngram_indexes for " << total << " n-grams";
  KILN_USER_CHECK(weights.empty() || int64_t(weights.size()) == total)
      << c.where() << ": " << weights.size() << " weights for " << total << " n-grams";
  int64_t out_size = 0;
  std::set<int64_t> seen;
  for (int64_t i : indexes) {
    KILN_USER_CHECK(i >= 0 && seen.insert(i).second)
        << c.where() << ": ngram_indexes must be distinct and not negative (" << i << ")";
    out_size = std::max(out_size, i + 1);
  }
  int64_t len = t.shape[static_cast<size_t>(r - 1)];
  Ints out_shape = r == 2 ? Ints{t.shape[0], out_size} : Ints{out_size};
  // Count each n-gram of the lengths asked for: the n tokens at i, i+(s+1), …, for each start i
  // and each skip s (unigrams once per position).
  std::vector<Entry> parts;
  std::vector<int64_t> part_ngrams;  // global n-gram index of each counted column
  for (int64_t n = min_n; n <= max_n && n <= int64_t(counts.size()); ++n) {
    size_t g = static_cast<size_t>(n - 1);
    int64_t b = counts[g], e = g + 1 < counts.size() ? counts[g + 1] : int64_t(pool.size());
    int64_t k = (e - b) / n;
    if (k == 0) continue;
    Entry acc;
    bool any = false;
    for (int64_t s = 0; s <= (n == 1 ? 0 : max_skip); ++s) {
      int64_t positions = len - (n - 1) * (s + 1);
      if (positions <= 0) break;
      Entry match;
      for (int64_t j = 0; j < n; ++j) {
        int64_t off = j * (s + 1);
        Entry w =
            c.op("strided_slice", {c.in(0)},
                 {{"begin", Ints{off}}, {"end", Ints{off + positions}}, {"axes", Ints{r - 1}}});
        w = c.op("unsqueeze", {w}, {{"axes", Ints{r - 1}}});
        runtime::NDArray col = runtime::NDArray::empty({k, 1}, t.dtype);
        for (int64_t q = 0; q < k; ++q) c.set_elem(col, q, double(pool[b + q * n + j]));
        Entry eq = c.op("equal", {w, c.constant("pool", col)});
        match = j == 0 ? eq : c.op("minimum", {match, eq});
      }
      Entry cnt = c.op("sum", {c.op("cast", {match}, {{"dtype", kI32.str()}})},
                       {{"axes", Ints{r}}, {"keepdims", int64_t{0}}});
      acc = any ? c.op("add", {acc, cnt}) : cnt;
      any = true;
    }
    if (!any) continue;
    parts.push_back(acc);
    for (int64_t q = 0; q < k; ++q) part_ngrams.push_back(first_ngram[g] + q);
  }
  if (parts.empty()) return {c.fill("zeros", 0, kF32, out_shape)};
  Entry all = parts.size() == 1 ? parts[0] : c.op("concat", parts, {{"axis", r - 1}});
  all = c.op("cast", {all}, {{"dtype", kF32.str()}});
  if (mode == "IDF")
    all = c.op("cast", {c.op("greater", {all, c.fill("zero", 0, kF32)})}, {{"dtype", kF32.str()}});
  if (mode != "TF" && !weights.empty()) {
    runtime::NDArray w = runtime::NDArray::empty({int64_t(part_ngrams.size())}, kF32);
    for (size_t q = 0; q < part_ngrams.size(); ++q)
      w.data_as<float>()[q] = static_cast<float>(weights[part_ngrams[q]]);
    all = c.op("multiply", {all, c.constant("weights", w)});
  }
  // Scatter the counted columns to their output positions; the others are zero.
  Ints pick(static_cast<size_t>(out_size), 0);
  runtime::NDArray has = runtime::NDArray::empty({out_size}, DataType::Bool());
  std::fill_n(has.data_as<uint8_t>(), out_size, 0);
  for (size_t q = 0; q < part_ngrams.size(); ++q) {
    int64_t o = indexes[part_ngrams[q]];
    pick[o] = int64_t(q);
    has.data_as<uint8_t>()[o] = 1;
  }
  Entry v = c.op("take", {all, c.constant("pick", int64_array(pick))}, {{"axis", r - 1}});
  return {c.op("where", {c.constant("has", has), v, c.fill("zero", 0, kF32)})};
}

// --- QLinearMatMul, QLinearConv

/// The number of elements of input i (a scale or zero point); 1 when it is absent.
int64_t numel_in(Converter& c, size_t i) { return c.has_input(i) ? c.type_in(i).numel() : 1; }

/// Input i cast to int32, minus zero point `zp` (when given) reshaped by `zp_shape` when it has
/// more than one element.
Entry centered(Converter& c, size_t i, size_t zp, const Ints& zp_shape) {
  Entry v = c.op("cast", {c.in(i)}, {{"dtype", kI32.str()}});
  if (!c.has_input(zp)) return v;
  Entry z = c.op("cast", {c.in(zp)}, {{"dtype", kI32.str()}});
  if (numel_in(c, zp) > 1) z = c.op("reshape", {z}, {{"newshape", zp_shape}});
  return c.op("subtract", {v, z});
}

/// round_half_even(acc · a_scale·b_scale / y_scale) + y_zero_point, saturated to y's type.
Entry requantize(Converter& c, Entry acc, Entry b_scale, DataType yt) {
  Entry m = c.op("divide", {c.op("multiply", {c.in(1), b_scale}), c.in(6)});
  Entry y =
      c.op("round_even", {c.op("multiply", {c.op("cast", {acc}, {{"dtype", kF32.str()}}), m})});
  if (c.has_input(7)) y = c.op("add", {y, c.op("cast", {c.in(7)}, {{"dtype", kF32.str()}})});
  double lo = yt == DataType::UInt(8) ? 0 : -128, hi = yt == DataType::UInt(8) ? 255 : 127;
  y = c.op("clip", {y}, {{"a_min", lo}, {"a_max", hi}});
  return c.op("cast", {y}, {{"dtype", yt.str()}});
}

/// Checks the operand, scale and zero-point types; returns y's type.
DataType check_quantized_inputs(Converter& c) {
  DataType yt = c.has_input(7) ? c.type_in(7).dtype : DataType::UInt(8);
  c.unsupported_if(!(yt == DataType::UInt(8) || yt == DataType::Int(8)),
                   c.node->op_type + " to " + yt.str());
  for (size_t i : {0, 3}) {
    DataType t = c.type_in(i).dtype;
    c.unsupported_if(!(t == DataType::UInt(8) || t == DataType::Int(8)),
                     c.node->op_type + " of " + t.str());
  }
  for (size_t i : {1, 4, 6})
    c.unsupported_if(c.type_in(i).dtype != kF32,
                     c.node->op_type + " with a scale of " + c.type_in(i).dtype.str());
  for (size_t i : {1, 2, 6, 7})
    c.unsupported_if(numel_in(c, i) != 1, c.node->op_type + " with a per-axis " +
                                              (i == 1 || i == 2 ? "a" : "y") +
                                              " scale or zero point");
  return yt;
}

std::vector<Entry> convert_qlinear_matmul(Converter& c) {
  DataType yt = check_quantized_inputs(c);
  Ints sa = c.type_in(0).shape, sb = c.type_in(3).shape;
  size_t ra = sa.size(), rb = sb.size();
  c.unsupported_if(ra < 2 || rb < 2 || ra != rb,
                   "QLinearMatMul of ranks " + std::to_string(ra) + " and " + std::to_string(rb));
  c.unsupported_if(!std::equal(sa.begin(), sa.end() - 2, sb.begin()),
                   "QLinearMatMul with broadcast batch dimensions");
  int64_t n = sb[rb - 1];
  int64_t nb = numel_in(c, 4);
  c.unsupported_if(nb != 1 && nb != n,
                   "QLinearMatMul with a b scale of " + std::to_string(nb) + " elements");
  // Per-column b scale / zero point broadcast along the last axis as they are.
  Entry a = centered(c, 0, 2, {}), b = centered(c, 3, 5, {n});
  Entry acc;
  if (ra == 2) {
    acc = c.op("matmul", {a, b});
  } else {
    // batch_matmul is float-only: a [B, M, K, 1] · b [B, 1, K, N] summed over K, in int32.
    int64_t m = sa[ra - 2], k = sa[ra - 1];
    a = c.op("reshape", {a}, {{"newshape", Ints{-1, m, k, 1}}});
    b = c.op("reshape", {b}, {{"newshape", Ints{-1, 1, k, n}}});
    acc = c.op("sum", {c.op("multiply", {a, b})}, {{"axes", Ints{2}}, {"keepdims", int64_t{0}}});
    Ints out(sa.begin(), sa.end() - 1);
    out.push_back(n);
    acc = c.op("reshape", {acc}, {{"newshape", out}});
  }
  return {requantize(c, acc, c.in(4), yt)};
}

std::vector<Entry> convert_qlinear_conv(Converter& c) {
  DataType yt = check_quantized_inputs(c);
  Ints sx = c.type_in(0).shape, sw = c.type_in(3).shape;
  c.unsupported_if(sx.size() != 4, "QLinearConv of a tensor that is not 4-D");
  c.unsupported_if(c.attr_string("auto_pad", "NOTSET") != "NOTSET", "QLinearConv with auto_pad");
  int64_t m = sw[0], nw = numel_in(c, 4);
  c.unsupported_if(nw != 1 && nw != m,
                   "QLinearConv with a w scale of " + std::to_string(nw) + " elements");
  Entry x = centered(c, 0, 2, {}), w = centered(c, 3, 5, {m, 1, 1, 1});
  Entry acc = c.op("conv2d", {x, w},
                   {{"strides", c.attr_ints("strides", {1, 1})},
                    {"padding", c.attr_ints("pads", {0, 0, 0, 0})},
                    {"dilation", c.attr_ints("dilations", {1, 1})},
                    {"groups", c.attr_int("group", 1)}});
  if (c.has_input(8)) {
    c.unsupported_if(c.type_in(8).dtype != kI32,
                     "QLinearConv with a bias of " + c.type_in(8).dtype.str());
    acc = c.op("add", {acc, c.op("reshape", {c.in(8)}, {{"newshape", Ints{1, m, 1, 1}}})});
  }
  Entry ws = c.in(4);
  if (nw > 1) ws = c.op("reshape", {ws}, {{"newshape", Ints{1, m, 1, 1}}});
  return {requantize(c, acc, ws, yt)};
}

// --- BatchNormalization in training mode

std::vector<Entry> convert_batch_norm_training(Converter& c) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(t.dtype != kF32 && t.dtype != DataType::Float(64),
                   "BatchNormalization of " + t.dtype.str());
  size_t r = t.shape.size();
  KILN_USER_CHECK(r >= 2) << c.where() << ": the input must have a channel axis, not " << t.str();
  Ints axes{0}, bshape(r, 1);
  for (size_t k = 2; k < r; ++k) axes.push_back(int64_t(k));
  bshape[1] = -1;
  Entry x = c.in(0);
  Entry mean = c.op("mean", {x}, {{"axes", axes}, {"keepdims", int64_t{0}}});
  Entry d = c.op("subtract", {x, c.op("reshape", {mean}, {{"newshape", bshape}})});
  Entry var = c.op("mean", {c.op("multiply", {d, d})}, {{"axes", axes}, {"keepdims", int64_t{0}}});
  Entry y = c.op("batch_norm", {x, c.in(1), c.in(2), mean, var},
                 {{"epsilon", c.attr_float("epsilon", 1e-5)}});
  std::vector<Entry> outs{y};
  if (c.node->outputs.size() > 1) {
    double mom = c.attr_float("momentum", 0.9);
    auto running = [&](size_t i, Entry batch) {
      return c.op("add",
                  {c.op("multiply", {c.in(i), c.fill("momentum", mom, t.dtype)}),
                   c.op("multiply", {batch, c.fill("one_minus_momentum", 1 - mom, t.dtype)})});
    };
    outs.push_back(running(3, mean));
    outs.push_back(running(4, var));
  }
  return outs;
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

// --- Mod of float16

std::vector<Entry> convert_mod_float16(Converter& c) {
  KILN_USER_CHECK(c.attr_int("fmod", 0) != 0)
      << c.where() << ": Mod of floating-point values needs fmod=1";
  // a - trunc(a / b)·b in float64 is exact for float16 operands (the quotient's integer part
  // has at most 40 bits, each product is exact), so the cast back does not round.
  std::string f64 = "float64";
  Entry a = c.op("cast", {c.in(0)}, {{"dtype", f64}}),
        b = c.op("cast", {c.in(1)}, {{"dtype", f64}});
  Entry q = c.op("divide", {a, b});
  Entry tq = c.op("where", {c.op("less", {q, c.fill("zero", 0, DataType::Float(64))}),
                            c.op("ceil", {q}), c.op("floor", {q})});
  Entry r = c.op("subtract", {a, c.op("multiply", {tq, b})});
  return {c.op("cast", {c.op("cast", {r}, {{"dtype", kF32.str()}})},
               {{"dtype", DataType::Float(16).str()}})};
}

// --- bfloat16

/// Cast to or from bfloat16 (the other side a float or integer type; bool is "non-zero").
std::vector<Entry> convert_cast_bfloat16(Converter& c, DataType to) {
  DataType from = c.type_in(0).dtype;
  for (DataType t : {from, to})
    c.unsupported_if(!(t.is_float() || t.is_integer() || t.is_bool()),
                     "Cast between " + from.str() + " and " +
                         (to.is_void() ? std::string("this element type") : to.str()));
  if (from == to) return {c.op("identity", {c.in(0)})};
  if (to.is_bool()) return {c.op("not_equal", {c.in(0), c.fill("zero", 0, kF32)})};
  return {c.op("cast", {c.in(0)}, {{"dtype", to.str()}})};
}

// --- results without elements

/// Output shape of ONNX Slice when the input type and all parameters are known.
std::optional<Ints> slice_shape(Converter& c) {
  std::optional<graph::TensorType> t = c.known_type(c.in(0));
  if (!t || !t->known() || c.opset < 10) return std::nullopt;
  for (size_t i = 1; i <= 4; ++i)
    if (c.has_input(i) && !c.const_input(i)) return std::nullopt;
  Ints starts = c.const_ints(1, "starts"), ends = c.const_ints(2, "ends"), axes, steps;
  if (c.has_input(3)) axes = c.const_ints(3, "axes");
  if (c.has_input(4)) steps = c.const_ints(4, "steps");
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(int64_t(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return std::nullopt;
  Ints shape = t->shape;
  int64_t r = int64_t(shape.size());
  for (size_t k = 0; k < starts.size(); ++k) {
    if (steps[k] == 0 || axes[k] < -r || axes[k] >= r) return std::nullopt;
    int64_t ax = axes[k] < 0 ? axes[k] + r : axes[k], d = shape[ax], st = steps[k];
    int64_t b = starts[k] < 0 ? starts[k] + d : starts[k], e = ends[k] < 0 ? ends[k] + d : ends[k];
    int64_t n;
    if (st > 0) {
      b = std::clamp<int64_t>(b, 0, d), e = std::clamp<int64_t>(e, 0, d);
      n = e > b ? (e - b + st - 1) / st : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, d - 1), e = std::clamp<int64_t>(e, -1, d - 1);
      n = b > e ? (b - e - st - 1) / -st : 0;
    }
    shape[ax] = d == 0 ? 0 : n;
  }
  return shape;
}

}  // namespace

void register_misc_converters(ConvertTable& t) {
  t["TfIdfVectorizer"] = convert_tfidf;
  t["QLinearMatMul"] = convert_qlinear_matmul;
  t["QLinearConv"] = convert_qlinear_conv;

  ConvertFn bn = t.at("BatchNormalization");
  t["BatchNormalization"] = [bn](Converter& c) {
    if (c.opset < 14 || c.attr_int("training_mode", 0) == 0) return bn(c);
    return convert_batch_norm_training(c);
  };
  ConvertFn einsum = t.at("Einsum");
  t["Einsum"] = [einsum](Converter& c) {
    if (std::optional<std::vector<Entry>> v = convert_einsum_diagonal(c)) return *v;
    return einsum(c);
  };
  ConvertFn mod = t.at("Mod");
  t["Mod"] = [mod](Converter& c) {
    if (c.type_in(0).dtype != DataType::Float(16) || c.type_in(1).dtype != DataType::Float(16))
      return mod(c);
    return convert_mod_float16(c);
  };
  ConvertFn reshape = t.at("Reshape");
  t["Reshape"] = [reshape](Converter& c) {
    graph::TensorType ty = c.type_in(0);
    if (c.attr_int("allowzero", 0) == 0) {
      if (ty.numel() != 0 || c.opset < 5) return reshape(c);
    }
    // allowzero=1: a 0 in `shape` is a zero dimension (not "copy the input's"); or an input
    // without elements, whose result is an empty constant.
    Ints shape = c.const_ints(1, "shape");
    bool allowzero = c.attr_int("allowzero", 0) != 0;
    int64_t known = 1, unknown = -1;
    for (size_t k = 0; k < shape.size(); ++k) {
      if (shape[k] == 0 && !allowzero) {
        KILN_USER_CHECK(k < ty.shape.size()) << c.where() << ": shape " << runtime::shape_str(shape)
                                             << " copies axis " << k << " of " << ty.str();
        shape[k] = ty.shape[k];
      }
      if (shape[k] == -1) {
        KILN_USER_CHECK(unknown < 0)
            << c.where() << ": shape " << runtime::shape_str(shape) << " has more than one -1";
        unknown = int64_t(k);
      } else {
        KILN_USER_CHECK(shape[k] >= 0)
            << c.where() << ": shape " << runtime::shape_str(shape) << " has a negative size";
        known *= shape[k];
      }
    }
    if (unknown >= 0) {
      KILN_USER_CHECK(known != 0) << c.where() << ": shape " << runtime::shape_str(shape)
                                  << " has both a 0 and a -1 (allowzero=1)";
      shape[unknown] = ty.numel() / known;
    }
    KILN_USER_CHECK(numel_of(shape) == ty.numel())
        << c.where() << ": cannot reshape " << ty.str() << " to " << runtime::shape_str(shape);
    if (ty.numel() == 0) return std::vector<Entry>{empty_tensor(c, shape, ty.dtype)};
    return std::vector<Entry>{c.op("reshape", {c.in(0)}, {{"newshape", shape}})};
  };

  ConvertFn slice = t.at("Slice");
  t["Slice"] = [slice](Converter& c) {
    std::optional<Ints> shape = slice_shape(c);
    if (!shape || numel_of(*shape) != 0) return slice(c);
    return std::vector<Entry>{empty_tensor(c, *shape, c.type_in(0).dtype)};
  };
  ConvertFn split = t.at("Split");
  t["Split"] = [split](Converter& c) {
    graph::TensorType ty = c.type_in(0);
    int64_t r = int64_t(ty.shape.size());
    int64_t axis = norm_axis(c, c.attr_int("axis", 0), r), dim = ty.shape[axis];
    Ints sizes;
    if (c.opset < 13 && c.has_attr("split"))
      sizes = c.attr_ints("split", {});
    else if (c.opset >= 13 && c.has_input(1))
      sizes = c.const_ints(1, "split");
    if (sizes.empty() && dim == 0) sizes.assign(c.node->outputs.size(), 0);
    if (std::find(sizes.begin(), sizes.end(), 0) == sizes.end()) return split(c);
    int64_t sum = 0;
    for (int64_t s : sizes) sum += s;
    KILN_USER_CHECK(sum == dim && sizes.size() == c.node->outputs.size())
        << c.where() << ": split sizes do not add up to dimension " << dim << " with "
        << c.node->outputs.size() << " outputs";
    std::vector<Entry> outs;
    int64_t b = 0;
    for (int64_t s : sizes) {
      Ints shape = ty.shape;
      shape[axis] = s;
      outs.push_back(s == 0
                         ? empty_tensor(c, shape, ty.dtype)
                         : c.op("strided_slice", {c.in(0)},
                                {{"begin", Ints{b}}, {"end", Ints{b + s}}, {"axes", Ints{axis}}}));
      b += s;
    }
    return outs;
  };
  // bfloat16: Cast / CastLike to it (round to nearest even, NaN kept) or from it (exact), to and
  // from the float and integer types the older converter handles.
  ConvertFn cast = t.at("Cast");
  t["Cast"] = [cast](Converter& c) {
    int64_t to = c.attr_int("to", 0);  // onnx_elem_type has no bfloat16 (16)
    if (to == 16) return convert_cast_bfloat16(c, DataType::BFloat16());
    if (c.type_in(0).dtype.is_bfloat16()) return convert_cast_bfloat16(c, onnx_elem_type(to));
    return cast(c);
  };
  ConvertFn cast_like = t.at("CastLike");
  t["CastLike"] = [cast_like](Converter& c) {
    DataType to = c.type_in(1).dtype;
    if (!to.is_bfloat16() && !c.type_in(0).dtype.is_bfloat16()) return cast_like(c);
    return convert_cast_bfloat16(c, to);
  };
  ConvertFn trilu = t.at("Trilu");
  t["Trilu"] = [trilu](Converter& c) {
    graph::TensorType ty = c.type_in(0);
    if (ty.numel() != 0) return trilu(c);
    return std::vector<Entry>{empty_tensor(c, ty.shape, ty.dtype)};
  };
}

}  // namespace kiln::frontend::onnx_import
