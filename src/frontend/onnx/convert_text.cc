// ONNX text operators: TfIdfVectorizer. Its pool is an attribute, so n-gram matching is
// compiled as comparisons of shifted windows of the input against constant pool columns, summed
// over the positions; the counted columns are scattered to their output positions.
#include "converter.h"

namespace kiln::frontend::onnx_import {

namespace {

const DataType kF32 = DataType::Float(32);
const DataType kI32 = DataType::Int(32);

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

}  // namespace

void register_text_converters(ConvertTable& t) { t.add("TfIdfVectorizer", convert_tfidf); }

}  // namespace kiln::frontend::onnx_import
