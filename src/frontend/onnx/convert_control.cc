// ONNX importer: control flow (If, Loop, Scan) and sequences. Kiln compiles static-shape
// graphs, so control flow is resolved at import time by importing sub-graphs into the one
// graph (Converter::import_body):
//  - If: with a constant condition only the taken branch is imported; otherwise both are, and
//    each output is where(cond, then, else) (the branches must produce the same types).
//  - Scan: the sequence length is static, so the body is unrolled once per element (per batch
//    row too at opset 8); scan outputs are stacked along their axis.
//  - Loop: unrolled when its trip count and condition are constants or fold to constants
//    (Converter::folded, which evaluates a condition's new ops only, mostly on the host)
//    iteration by iteration, at most kMaxUnroll iterations (a trip count above it without a
//    condition is refused before unrolling); a trip count or condition known only at run time
//    is an explicit unsupported error.
//  - SequenceMap: the body unrolled once per element of its (static-length) sequences.
// Sequences never reach the graph: a sequence value is a list of tensor entries tracked while
// importing (Converter::make_sequence), so SequenceInsert/At/Erase need constant positions. An
// If with a run-time condition chooses sequences of one length element by element. Sequence
// graph inputs and outputs are flattened into one tensor per element (Converter::run).
#include "converter.h"

namespace kiln::frontend::onnx_import {

namespace {

/// Most iterations an unrolled Loop may have.
constexpr int64_t kMaxUnroll = 4096;

/// A tensor entry that existed before the converter started is passed through an identity, so
/// that every output of the node is a node of its own (a graph output may be one).
Entry fresh(Converter& c, Entry e, int first_new) {
  if (Converter::is_sequence(e) || Converter::is_optional(e) || e.node >= first_new) return e;
  return c.op("identity", {e});
}

/// A one-element constant (the first element) as a bool: non-zero is true.
bool truth(const runtime::NDArray& a) {
  KILN_ICHECK(a.numel() >= 1) << "empty condition";
  size_t b = static_cast<size_t>(a.dtype().bytes());
  const auto* p = static_cast<const unsigned char*>(a.data());
  for (size_t k = 0; k < b; ++k)
    if (p[k] != 0) return true;
  return false;
}

int64_t as_int(const Converter& c, const runtime::NDArray& a, const char* what) {
  KILN_USER_CHECK(a.numel() == 1) << c.where() << ": " << what << " must have one element";
  if (a.dtype() == DataType::Int(64)) return a.data_as<int64_t>()[0];
  if (a.dtype() == DataType::Int(32)) return a.data_as<int32_t>()[0];
  KILN_ERROR << c.where() << ": " << what << " must be int32/int64, not " << a.dtype();
}

Ints shape_of(const Converter& c, Entry e, const std::string& what) {
  std::optional<graph::TensorType> t = c.known_type(e);
  KILN_USER_CHECK(t && t->known())
      << c.where() << ": the type of " << what << " cannot be inferred";
  return t->shape;
}

/// x[k] along `axis`, the axis removed.
Entry take_at(Converter& c, Entry x, int64_t axis, int64_t k) {
  Entry s =
      c.op("strided_slice", {x}, {{"begin", Ints{k}}, {"end", Ints{k + 1}}, {"axes", Ints{axis}}});
  return c.op("squeeze", {s}, {{"axes", Ints{axis}}});
}

/// The entries stacked along a new axis `axis` (may be negative: counted from rank + 1).
Entry stack(Converter& c, const std::vector<Entry>& xs, int64_t axis, const std::string& what) {
  KILN_ICHECK(!xs.empty()) << "stack of nothing";
  int64_t r = static_cast<int64_t>(shape_of(c, xs[0], what).size());
  axis = norm_axis(c, axis, r + 1);
  std::vector<Entry> parts;
  for (Entry x : xs) parts.push_back(c.op("unsqueeze", {x}, {{"axes", Ints{axis}}}));
  if (parts.size() == 1) return parts[0];
  return c.op("concat", parts, {{"axis", axis}});
}

std::vector<Entry> convert_if(Converter& c) {
  const OnnxGraph& then_g = c.subgraph("then_branch");
  const OnnxGraph& else_g = c.subgraph("else_branch");
  int first_new = c.num_nodes();
  Entry cond = c.in(0);
  if (const runtime::NDArray* cv = c.const_input(0)) {
    KILN_USER_CHECK(cv->numel() == 1) << c.where() << ": the condition must have one element";
    std::vector<Entry> outs = c.import_body(truth(*cv) ? then_g : else_g, {});
    for (Entry& e : outs) e = fresh(c, e, first_new);
    return outs;
  }
  std::vector<Entry> t = c.import_body(then_g, {}), e = c.import_body(else_g, {});
  KILN_USER_CHECK(t.size() == e.size())
      << c.where() << ": the branches have " << t.size() << " and " << e.size() << " outputs";
  Entry flag = c.op("reshape", {cond}, {{"newshape", Ints{}}});
  std::vector<Entry> outs;
  for (size_t k = 0; k < t.size(); ++k) {
    std::string name = "output " + std::to_string(k) + " ('" +
                       (k < c.node->outputs.size() ? c.node->outputs[k] : "") + "')";
    // Both tensors of one type: where(cond, then, else).
    auto choose =
        [&](Entry a, Entry b, const std::string& what) {
          std::optional<graph::TensorType> tt = c.known_type(a), te = c.known_type(b);
          KILN_USER_CHECK(tt && te && tt->known() && te->known())
              << c.where() << ": the type of " << what << " of a branch cannot be inferred";
          KILN_USER_CHECK(*tt == *te)
              << c.where() << ": the branches give " << what << " different types (then "
              << tt->str() << ", else " << te->str()
              << "); with a condition known only at run time Kiln needs both branches to produce "
              << "the same types (a constant condition imports the taken branch only)";
          return c.op("where", {flag, a, b});
        };
    // Optionals: both empty, or both holding values chosen as below. Which one is empty cannot
    // depend on a run-time condition.
    if (Converter::is_optional(t[k]) || Converter::is_optional(e[k])) {
      KILN_USER_CHECK(Converter::is_optional(t[k]) && Converter::is_optional(e[k]))
          << c.where() << ": the branches give " << name
          << " an optional value in one and not in the other";
      std::optional<Entry> tv = c.optional_value(t[k]), ev = c.optional_value(e[k]);
      KILN_USER_CHECK(tv.has_value() == ev.has_value())
          << c.where() << ": the branches give " << name
          << " an empty optional in one and a value in the other, so the condition must be a "
             "constant (Kiln resolves optionals at compile time)";
      if (!tv) {
        outs.push_back(t[k]);
        continue;
      }
      t[k] = *tv;
      e[k] = *ev;
      KILN_USER_CHECK(!Converter::is_optional(t[k]) && !Converter::is_optional(e[k]))
          << c.where() << ": nested optional values are not supported";
      bool both_seq = Converter::is_sequence(t[k]) && Converter::is_sequence(e[k]);
      if (!Converter::is_sequence(t[k]) && !Converter::is_sequence(e[k])) {
        outs.push_back(c.make_optional(choose(t[k], e[k], name)));
        continue;
      }
      KILN_USER_CHECK(both_seq) << c.where() << ": the branches give " << name
                                << " a sequence in one and a tensor in the other";
      const std::vector<Entry> ti = c.sequence_items(t[k]), ei = c.sequence_items(e[k]);
      KILN_USER_CHECK(ti.size() == ei.size())
          << c.where() << ": the branches give " << name << " sequences of different lengths";
      std::vector<Entry> items;
      for (size_t j = 0; j < ti.size(); ++j)
        items.push_back(choose(ti[j], ei[j], "element " + std::to_string(j) + " of " + name));
      outs.push_back(c.make_optional(c.make_sequence(std::move(items))));
      continue;
    }
    bool ts = Converter::is_sequence(t[k]), es = Converter::is_sequence(e[k]);
    if (!ts && !es) {
      outs.push_back(choose(t[k], e[k], name));
      continue;
    }
    // Sequences of one length and element types: chosen element by element.
    KILN_USER_CHECK(ts && es) << c.where() << ": the branches give " << name
                              << " a sequence in one and a tensor in the other";
    const std::vector<Entry> ti = c.sequence_items(t[k]), ei = c.sequence_items(e[k]);
    KILN_USER_CHECK(ti.size() == ei.size())
        << c.where() << ": the branches give " << name << " sequences of different lengths (then "
        << ti.size() << ", else " << ei.size()
        << "); with a condition known only at run time Kiln needs sequences of one length";
    std::vector<Entry> items;
    for (size_t j = 0; j < ti.size(); ++j)
      items.push_back(choose(ti[j], ei[j], "element " + std::to_string(j) + " of " + name));
    outs.push_back(c.make_sequence(std::move(items)));
  }
  return outs;
}

std::vector<Entry> convert_loop(Converter& c) {
  const OnnxGraph& body = c.subgraph("body");
  int first_new = c.num_nodes();
  KILN_USER_CHECK(c.node->inputs.size() >= 2)
      << c.where() << ": Loop takes a trip count, a condition and the loop-carried values";
  size_t n_carried = c.node->inputs.size() - 2;
  KILN_USER_CHECK(body.outputs.size() >= 1 + n_carried)
      << c.where() << ": the body has " << body.outputs.size() << " outputs, fewer than 1 + "
      << n_carried << " loop-carried values";
  size_t n_scan = body.outputs.size() - 1 - n_carried;
  auto runtime_error = [&](const std::string& what) {
    KILN_ERROR << c.where() << ": " << what
               << " depends on a run-time input; it must be a constant (or computed from "
               << "constants only) for Kiln to unroll the loop, and loops whose iteration "
               << "count is known only at run time are not supported yet";
  };
  std::optional<int64_t> trip;
  if (c.has_input(0)) {
    const runtime::NDArray* m = c.const_input(0);
    if (!m) runtime_error("the trip count ('" + c.node->inputs[0] + "')");
    trip = as_int(c, *m, "the trip count");
  }
  bool use_cond = c.has_input(1);
  KILN_USER_CHECK(trip || use_cond)
      << c.where() << ": a Loop with neither a trip count nor a condition never ends";
  // Without a condition the trip count is the number of iterations: checked before unrolling.
  // With one, the loop may end earlier (a while loop's trip count is often INT64_MAX): it is
  // unrolled while the condition folds to true, up to the same limit.
  KILN_USER_CHECK(use_cond || *trip <= kMaxUnroll)
      << c.where() << ": the trip count is " << *trip << ", more iterations than Kiln unrolls ("
      << kMaxUnroll << ")";
  Entry cond = use_cond ? c.in(1) : c.fill("cond", 1, DataType::Bool());
  std::vector<Entry> vs;
  for (size_t k = 0; k < n_carried; ++k) vs.push_back(c.value_in(2 + k));
  std::vector<std::vector<Entry>> scans(n_scan);
  for (int64_t i = 0;; ++i) {
    if (trip && i >= *trip) break;
    if (use_cond) {
      const runtime::NDArray* cv = c.folded(cond);
      if (!cv)
        runtime_error(i == 0 ? "the condition ('" + c.node->inputs[1] + "')"
                             : "the condition computed by iteration " + std::to_string(i - 1));
      if (!truth(*cv)) break;
    }
    KILN_USER_CHECK(i < kMaxUnroll)
        << c.where() << ": the loop runs more than " << kMaxUnroll
        << " iterations, more than Kiln unrolls (its condition is still true after " << kMaxUnroll
        << " iterations" << (trip ? " of at most " + std::to_string(*trip) : std::string()) << ")";
    runtime::NDArray it = runtime::NDArray::empty({}, DataType::Int(64));
    it.data_as<int64_t>()[0] = i;
    std::vector<Entry> ins{c.constant("iter", it), cond};
    ins.insert(ins.end(), vs.begin(), vs.end());
    std::vector<Entry> outs = c.import_body(body, ins);
    // Without a condition input the body's condition output is ignored.
    if (use_cond) cond = outs[0];
    for (size_t k = 0; k < n_carried; ++k) vs[k] = outs[1 + k];
    for (size_t k = 0; k < n_scan; ++k) {
      KILN_USER_CHECK(!Converter::is_sequence(outs[1 + n_carried + k]))
          << c.where() << ": scan output " << k << " of the body is a sequence";
      scans[k].push_back(outs[1 + n_carried + k]);
    }
  }
  std::vector<Entry> results;
  for (Entry v : vs) results.push_back(fresh(c, v, first_new));
  for (size_t k = 0; k < n_scan; ++k) {
    c.unsupported_if(scans[k].empty(), "a Loop that runs no iteration and has scan outputs");
    results.push_back(stack(c, scans[k], 0, "a scan output of the body"));
  }
  return results;
}

/// One unrolled Scan over static-length inputs: `states` are the initial state values, `xs`
/// the scanned inputs (element axis and direction per input). Returns the final states, then
/// the scan outputs stacked along their axes.
std::vector<Entry> scan_unrolled(Converter& c, const OnnxGraph& body, std::vector<Entry> states,
                                 const std::vector<Entry>& xs, const Ints& in_axes,
                                 const Ints& in_dirs, const Ints& out_axes, const Ints& out_dirs) {
  KILN_USER_CHECK(body.outputs.size() >= states.size())
      << c.where() << ": the body has fewer outputs than state values";
  size_t n_out = body.outputs.size() - states.size();
  int64_t len = -1;
  std::vector<int64_t> axes;
  for (size_t j = 0; j < xs.size(); ++j) {
    Ints shape = shape_of(c, xs[j], "scan input " + std::to_string(j));
    int64_t a = norm_axis(c, in_axes[j], static_cast<int64_t>(shape.size()));
    axes.push_back(a);
    KILN_USER_CHECK(len < 0 || shape[a] == len)
        << c.where() << ": the scan inputs have different lengths (" << len << " and " << shape[a]
        << ")";
    len = shape[a];
  }
  c.unsupported_if(len <= 0, "a Scan over an empty sequence");
  std::vector<std::vector<Entry>> ys(n_out);
  for (int64_t t = 0; t < len; ++t) {
    std::vector<Entry> ins = states;
    for (size_t j = 0; j < xs.size(); ++j)
      ins.push_back(take_at(c, xs[j], axes[j], in_dirs[j] ? len - 1 - t : t));
    std::vector<Entry> outs = c.import_body(body, ins);
    for (size_t k = 0; k < states.size(); ++k) states[k] = outs[k];
    for (size_t k = 0; k < n_out; ++k) ys[k].push_back(outs[states.size() + k]);
  }
  std::vector<Entry> results = states;
  for (size_t k = 0; k < n_out; ++k) {
    if (out_dirs[k]) std::reverse(ys[k].begin(), ys[k].end());
    results.push_back(stack(c, ys[k], out_axes[k], "scan output " + std::to_string(k)));
  }
  return results;
}

std::vector<Entry> convert_scan(Converter& c) {
  const OnnxGraph& body = c.subgraph("body");
  int first_new = c.num_nodes();
  int64_t n_scan = c.attr_int("num_scan_inputs", 0);
  size_t first = c.opset < 9 ? 1 : 0;  // opset 8: sequence_lens comes first
  KILN_USER_CHECK(n_scan >= 1 && c.node->inputs.size() >= first + static_cast<size_t>(n_scan))
      << c.where() << ": num_scan_inputs=" << n_scan << " does not fit the "
      << c.node->inputs.size() << " inputs";
  size_t n_state = c.node->inputs.size() - first - static_cast<size_t>(n_scan);
  KILN_USER_CHECK(body.outputs.size() >= n_state)
      << c.where() << ": the body has fewer outputs than state values";
  size_t n_out = body.outputs.size() - n_state;
  std::vector<Entry> states, xs;
  for (size_t k = 0; k < n_state; ++k) states.push_back(c.in(first + k));
  for (int64_t j = 0; j < n_scan; ++j) xs.push_back(c.in(first + n_state + j));
  auto sized = [&](Ints v, size_t n, const char* name) {
    if (v.empty()) v.assign(n, 0);
    KILN_USER_CHECK(v.size() == n) << c.where() << ": attribute '" << name << "' has " << v.size()
                                   << " entries, expected " << n;
    return v;
  };
  std::vector<Entry> outs;
  if (c.opset >= 9) {
    Ints in_axes = sized(c.attr_ints("scan_input_axes", {}), n_scan, "scan_input_axes");
    Ints in_dirs = sized(c.attr_ints("scan_input_directions", {}), n_scan, "scan_input_directions");
    Ints out_axes = sized(c.attr_ints("scan_output_axes", {}), n_out, "scan_output_axes");
    Ints out_dirs =
        sized(c.attr_ints("scan_output_directions", {}), n_out, "scan_output_directions");
    outs = scan_unrolled(c, body, states, xs, in_axes, in_dirs, out_axes, out_dirs);
  } else {
    // Opset 8: every input has a batch axis 0 and the sequence axis 1; each batch row is an
    // independent scan.
    Ints dirs = sized(c.attr_ints("directions", {}), n_scan, "directions");
    Ints shape = shape_of(c, xs[0], "scan input 0");
    KILN_USER_CHECK(shape.size() >= 2)
        << c.where() << ": a scan input needs a batch and a sequence axis";
    int64_t batch = shape[0], len = shape[1];
    if (c.has_input(0)) {
      for (int64_t l : c.const_ints(0, "sequence_lens"))
        c.unsupported_if(l != len, "sequence_lens shorter than the sequence axis (" +
                                       std::to_string(l) + " of " + std::to_string(len) + ")");
    }
    std::vector<std::vector<Entry>> rows(n_state + n_out);
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Entry> sb, xb;
      for (Entry s : states) sb.push_back(take_at(c, s, 0, b));
      for (Entry x : xs) xb.push_back(take_at(c, x, 0, b));
      std::vector<Entry> r =
          scan_unrolled(c, body, sb, xb, Ints(n_scan, 0), dirs, Ints(n_out, 0), Ints(n_out, 0));
      for (size_t k = 0; k < r.size(); ++k) rows[k].push_back(r[k]);
    }
    c.unsupported_if(batch <= 0, "a Scan over an empty batch");
    for (size_t k = 0; k < rows.size(); ++k) outs.push_back(stack(c, rows[k], 0, "a Scan output"));
  }
  for (Entry& e : outs) e = fresh(c, e, first_new);
  return outs;
}

/// SequenceMap: the body unrolled once per element; a sequence input gives the body its
/// element, a tensor input itself, every time. Each body output makes one output sequence.
std::vector<Entry> convert_sequence_map(Converter& c) {
  const OnnxGraph& body = c.subgraph("body");
  size_t n_in = c.node->inputs.size();
  KILN_USER_CHECK(n_in >= 1 && body.inputs.size() == n_in)
      << c.where() << ": the body has " << body.inputs.size() << " inputs, but the node " << n_in;
  std::vector<Entry> ins(n_in);
  // Copies: importing the body may add sequences (and move the converter's lists).
  std::vector<std::optional<std::vector<Entry>>> seqs(n_in);
  size_t len = c.sequence_in(0).size();
  for (size_t j = 0; j < n_in; ++j) {
    ins[j] = c.value_in(j);
    if (!Converter::is_sequence(ins[j])) continue;
    seqs[j] = c.sequence_items(ins[j]);
    KILN_USER_CHECK(seqs[j]->size() == len)
        << c.where() << ": input " << j << " ('" << c.node->inputs[j] << "') is a sequence of "
        << seqs[j]->size() << " tensors, input 0 of " << len;
  }
  std::vector<std::vector<Entry>> ys(body.outputs.size());
  for (size_t k = 0; k < len; ++k) {
    std::vector<Entry> step = ins;
    for (size_t j = 0; j < n_in; ++j)
      if (seqs[j]) step[j] = (*seqs[j])[k];
    std::vector<Entry> outs = c.import_body(body, step);
    for (size_t o = 0; o < outs.size(); ++o) {
      KILN_USER_CHECK(!Converter::is_sequence(outs[o]))
          << c.where() << ": output " << o << " of the body is a sequence; it must be a tensor";
      ys[o].push_back(outs[o]);
    }
  }
  std::vector<Entry> results;
  for (std::vector<Entry>& y : ys) results.push_back(c.make_sequence(std::move(y)));
  return results;
}

// --- sequences

/// A constant position in [-n, n - 1] (or [-n, n] when `end_ok`), made non-negative.
int64_t position(Converter& c, size_t i, int64_t n, bool end_ok) {
  Ints p = c.const_ints(i, "position");
  KILN_USER_CHECK(p.size() == 1) << c.where() << ": the position must be a scalar";
  int64_t hi = end_ok ? n : n - 1;
  KILN_USER_CHECK(p[0] >= -n && p[0] <= hi)
      << c.where() << ": position " << p[0] << " is out of range for a sequence of " << n
      << " tensors";
  return p[0] < 0 ? p[0] + n : p[0];
}

std::vector<Entry> convert_sequence_insert(Converter& c) {
  std::vector<Entry> items = c.sequence_in(0);
  int64_t n = static_cast<int64_t>(items.size());
  int64_t at = c.has_input(2) ? position(c, 2, n, true) : n;
  items.insert(items.begin() + at, c.in(1));
  return {c.make_sequence(std::move(items))};
}

std::vector<Entry> convert_sequence_erase(Converter& c) {
  std::vector<Entry> items = c.sequence_in(0);
  int64_t n = static_cast<int64_t>(items.size());
  KILN_USER_CHECK(n > 0) << c.where() << ": erasing from an empty sequence";
  int64_t at = c.has_input(1) ? position(c, 1, n, false) : n - 1;
  items.erase(items.begin() + at);
  return {c.make_sequence(std::move(items))};
}

std::vector<Entry> convert_split_to_sequence(Converter& c) {
  Ints shape = c.type_in(0).shape;
  int64_t r = static_cast<int64_t>(shape.size());
  int64_t axis = norm_axis(c, c.attr_int("axis", 0), r);
  int64_t dim = shape[axis];
  Ints sizes;
  bool squeeze = false;
  if (!c.has_input(1)) {
    sizes.assign(dim, 1);
    squeeze = c.attr_int("keepdims", 1) == 0;
  } else {
    Ints split = c.const_ints(1, "split");
    const runtime::NDArray* a = c.const_input(1);
    if (a->ndim() == 0) {
      KILN_USER_CHECK(split[0] > 0) << c.where() << ": the split size must be positive";
      for (int64_t b = 0; b < dim; b += split[0]) sizes.push_back(std::min(split[0], dim - b));
    } else {
      sizes = split;
      int64_t total = 0;
      for (int64_t s : sizes) {
        KILN_USER_CHECK(s >= 0) << c.where() << ": a negative split size";
        total += s;
      }
      KILN_USER_CHECK(total == dim)
          << c.where() << ": the split sizes add up to " << total << ", not the dimension " << dim;
    }
  }
  std::vector<Entry> items;
  int64_t b = 0;
  for (int64_t s : sizes) {
    if (s == 0) {
      // An empty piece holds no data: a constant of its shape.
      Ints piece = shape;
      piece[axis] = 0;
      if (squeeze) piece.erase(piece.begin() + axis);
      items.push_back(c.constant("empty", runtime::NDArray::empty(piece, c.type_in(0).dtype)));
      continue;
    }
    Entry x = c.op("strided_slice", {c.in(0)},
                   {{"begin", Ints{b}}, {"end", Ints{b + s}}, {"axes", Ints{axis}}});
    if (squeeze) x = c.op("squeeze", {x}, {{"axes", Ints{axis}}});
    items.push_back(x);
    b += s;
  }
  return {c.make_sequence(std::move(items))};
}

std::vector<Entry> convert_concat_from_sequence(Converter& c) {
  const std::vector<Entry>& items = c.sequence_in(0);
  KILN_USER_CHECK(!items.empty()) << c.where() << ": concatenating an empty sequence";
  int64_t axis = c.attr_int("axis", 0);
  if (c.attr_int("new_axis", 0) != 0) return {stack(c, items, axis, "a sequence element")};
  int64_t r = static_cast<int64_t>(shape_of(c, items[0], "a sequence element").size());
  axis = norm_axis(c, axis, r);
  if (items.size() == 1) return {c.op("identity", {items[0]})};
  return {c.op("concat", items, {{"axis", axis}})};
}

}  // namespace

void register_control_converters(ConvertTable& t) {
  t.add("If", convert_if);
  t.add("Loop", convert_loop);
  t.add("Scan", convert_scan);
  t.add("SequenceMap", convert_sequence_map);
  t.add("SequenceEmpty", [](Converter& c) { return std::vector<Entry>{c.make_sequence({})}; });
  t.add("SequenceConstruct", [](Converter& c) {
    std::vector<Entry> items;
    for (size_t i = 0; i < c.node->inputs.size(); ++i) items.push_back(c.in(i));
    return std::vector<Entry>{c.make_sequence(std::move(items))};
  });
  t.add("SequenceInsert", convert_sequence_insert);
  t.add("SequenceErase", convert_sequence_erase);
  t.add("SequenceAt", [](Converter& c) {
    const std::vector<Entry>& items = c.sequence_in(0);
    int64_t at = position(c, 1, static_cast<int64_t>(items.size()), false);
    return std::vector<Entry>{c.op("identity", {items[static_cast<size_t>(at)]})};
  });
  t.add("SequenceLength", [](Converter& c) {
    runtime::NDArray n = runtime::NDArray::empty({}, DataType::Int(64));
    n.data_as<int64_t>()[0] = static_cast<int64_t>(c.sequence_in(0).size());
    return std::vector<Entry>{c.constant("length", n)};
  });
  t.add("SplitToSequence", convert_split_to_sequence);
  t.add("ConcatFromSequence", convert_concat_from_sequence);
  // Optionals, resolved at import time: whether one holds a value is known when the model is
  // compiled (ImportOptions::empty_optional_inputs for graph inputs).
  t.add("Optional", [](Converter& c) {
    if (!c.has_input(0)) return std::vector<Entry>{c.make_optional(std::nullopt)};
    Entry v = c.value_in(0);
    KILN_USER_CHECK(!Converter::is_optional(v))
        << c.where() << ": an optional of an optional is not supported";
    return std::vector<Entry>{c.make_optional(v)};
  });
  t.add("OptionalHasElement", [](Converter& c) {
    // Opset 18 also takes a tensor or a sequence (always present) or no input (absent).
    bool has = false;
    if (c.has_input(0)) {
      Entry v = c.value_in(0);
      has = !Converter::is_optional(v) || c.optional_value(v).has_value();
    }
    runtime::NDArray b = runtime::NDArray::empty({}, DataType::Bool());
    b.data_as<uint8_t>()[0] = has ? 1 : 0;
    return std::vector<Entry>{c.constant("has_element", b)};
  });
  t.add("OptionalGetElement", [](Converter& c) {
    Entry v = c.value_in(0);
    if (!Converter::is_optional(v)) return std::vector<Entry>{v};  // opset 18: a plain value
    std::optional<Entry> held = c.optional_value(v);
    KILN_USER_CHECK(held) << c.where() << ": input 0 ('" << c.node->inputs[0]
                          << "') is an empty optional, which has no element to get";
    if (Converter::is_sequence(*held)) return std::vector<Entry>{*held};
    return std::vector<Entry>{c.op("identity", {*held})};
  });
}

}  // namespace kiln::frontend::onnx_import
