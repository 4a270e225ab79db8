// Layout alteration (TVM's AlterOpLayout): one forward walk that asks each op node's strategy
// (strategy.h) for its choices and takes one: among the tunable choices that have records in
// the tuning log, the fastest (compared inside a model when all were timed there, else as the
// tuner measured them), else the highest priority whose layout hook accepts the node. A hook
// rewrites the node for its implementation through the LayoutRewriter below (the CPU hooks are
// in strategy/cpu_layout.cc: blocked NCHWc convolutions with packed weights, packed dense and
// LSTM weights) and records the choice on the node it emits; a choice that needs no rewrite is
// recorded on the node as it is. The pass keeps tensors blocked between layers (layout
// propagation, docs/graph-compiler.md):
//   - element-wise / broadcast ops compute where fewer elements move: blocked, transforming
//     the operands that carry channels in another layout (a computed per-channel scale costs C
//     values), or NCHW, unblocking the blocked operands; per-channel constants such as biases
//     are re-laid out at compile time; ops with a "layout" attribute (pooling) compute blocked;
//   - an op with a blocked form (OpDef::blocked, declared in its registration) computes in it:
//     concat of blocked tensors on whole channel blocks, strided_slice (Split) when it keeps
//     whole blocks, take along a spatial axis (Resize), ShuffleNet's channel shuffle
//     (reshape, transpose, reshape) of a blocked tensor as one blocked channel_shuffle.
// Every other op, and the graph's results, get their operands back in NCHW. A layout_transform
// is added only where a producer's layout differs from what its consumer needs, and once per
// (tensor, layout). Constants are packed on the host, so the pass compiles nothing. Node names
// are kept (kiln compare matches nodes by name). detail::layout_round_trips (end of file) finds
// the tensors a graph still converts back and forth.

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "../layout_util.h"
#include "kiln/graph/op_registry.h"
#include "kiln/graph/strategy.h"
#include "kiln/graph/transform.h"
#include "kiln/graph/tuning.h"
#include "kiln/support/error.h"
#include "pass_util.h"

namespace kiln::graph {

namespace {

using detail::block_of;
using detail::blocked_layout;
using detail::blocked_type;
using runtime::NDArray;

bool is_f32_constant(const Graph& g, Entry e) {
  const Node& n = g.node(e.node);
  return n.is_constant() && n.value.dtype() == DataType::Float(32);
}

/// True when constant type `c` broadcasts as one value per channel (axis 1) of 4-D type `x`.
bool is_per_channel(const TensorType& c, const TensorType& x) {
  if (c.shape.size() > x.shape.size() || c.numel() != x.shape[1]) return false;
  const size_t off = x.shape.size() - c.shape.size();
  for (size_t d = 0; d < c.shape.size(); ++d)
    if (c.shape[d] != (d + off == 1 ? x.shape[1] : 1)) return false;
  return true;
}

/// The 4-D shape operand type `t` has when it broadcasts (numpy rules, aligned on the right)
/// against 4-D type `x`: each extent 1 or x's; nullopt when it does not broadcast.
std::optional<std::vector<int64_t>> broadcast_shape4(const TensorType& t, const TensorType& x) {
  if (t.shape.size() > 4 || x.shape.size() != 4) return std::nullopt;
  std::vector<int64_t> s(4 - t.shape.size(), 1);
  s.insert(s.end(), t.shape.begin(), t.shape.end());
  for (size_t d = 0; d < 4; ++d)
    if (s[d] != 1 && s[d] != x.shape[d]) return std::nullopt;
  return s;
}

/// A per-channel constant of C values as [1, C/bn, 1, 1, bn].
NDArray blocked_per_channel(const NDArray& c, int64_t bn) {
  const int64_t C = c.numel();
  NDArray r = NDArray::empty({1, C / bn, 1, 1, bn}, c.dtype());
  std::copy(c.data_as<float>(), c.data_as<float>() + C, r.data_as<float>());  // same order
  return r;
}

// ---- the pass ---------------------------------------------------------------------------------

class LayoutAlterer : public LayoutRewriter {
 public:
  LayoutAlterer(const Graph& g, const Target& target, TunedConfigs* tuned)
      : g_(g), target_(target), tuned_(tuned), map_(g), names_(g) {}

  Graph run() {
    for (int i = 0; i < g_.num_nodes(); ++i) {
      const Node& n = g_.node(i);
      if (!n.is_op()) {
        map_.set_node(i, out_.add_node(map_.remap(n)), n.num_outputs());
        continue;
      }
      if (n.impl.name.empty() && try_strategy(i)) continue;
      if (try_blocked_elemwise(i) || try_blocked_form(i)) continue;
      emit_plain(i);
    }
    std::vector<Entry> outs;
    for (const Entry& e : g_.outputs()) outs.push_back(as_layout(map_[e], g_.type_of(e), ""));
    out_.set_outputs(outs);
    return out_;
  }

  // LayoutRewriter
  const OpCall& call() const override { return *call_; }
  Entry input(size_t k, const std::string& layout) override {
    const Entry old = g_.node(call_->index).inputs.at(k);
    return as_layout(map_[old], g_.type_of(old), layout);
  }
  const std::string& input_layout(size_t k) override {
    return layout_of(map_[g_.node(call_->index).inputs.at(k)]);
  }
  bool input_producer_fuses(size_t k) override {
    const Node& p = out_.node(map_[g_.node(call_->index).inputs.at(k)].node);
    const OpDef* def = p.is_op() ? OpRegistry::global().find(p.op) : nullptr;
    if (!def || def->pattern > topi::OpPattern::kInjective) return false;
    if (!def->in_place) return true;
    std::vector<TensorType> in;
    for (const Entry& e : p.inputs) in.push_back(out_.type_of(e));
    return !def->in_place(in, def->normalize_attrs(p.attrs, p.name)).has_value();
  }
  /// `e` (a new-graph entry holding a tensor of logical NCHW type `t`) in layout `want`
  /// ("" for NCHW): itself, or a (memoized) layout_transform of it.
  Entry as_layout(Entry e, const TensorType& t, const std::string& want) override {
    const std::string& cur = layout_of(e);
    if (cur == want) return e;
    auto key = std::make_pair(e, want);
    if (auto it = transforms_.find(key); it != transforms_.end()) return it->second;
    Node n;
    n.op = "layout_transform";
    n.attrs.set("src_layout", cur.empty() ? "NCHW" : cur);
    n.attrs.set("dst_layout", want.empty() ? "NCHW" : want);
    n.inputs = {e};
    n.outputs = {want.empty() ? t : blocked_type(t, block_of(want))};
    Entry r{out_.add_node(std::move(n)), 0};
    if (!want.empty()) layout_[r] = want;
    transforms_[key] = r;
    return r;
  }
  const std::string& layout_of(Entry e) const override {
    static const std::string plain;
    auto it = layout_.find(e);
    return it == layout_.end() ? plain : it->second;
  }
  Entry add_constant(const std::string& base, NDArray v) override {
    return out_.add_constant(names_(base), std::move(v));
  }
  Entry add(Node n, const std::string& layout) override {
    Entry r{out_.add_node(std::move(n)), 0};
    if (!layout.empty()) layout_[r] = layout;
    return r;
  }
  void emit(Node n, const std::string& layout) override {
    emit(call_->index, std::move(n), layout);
  }
  autotune::Config config(const std::function<autotune::Task()>& make) override {
    if (tuned_ && !tuned_->empty()) {
      if (std::optional<autotune::Config> c = tuned_->lookup(make())) return *c;
    }
    return autotune::Config::fallback();
  }
  std::optional<Entry> cached(const std::string& key) const override {
    auto it = cache_.find(key);
    if (it == cache_.end()) return std::nullopt;
    return it->second;
  }
  void cache(const std::string& key, Entry e) override { cache_[key] = e; }

 private:
  /// Adds `n` (inputs already in the new graph) as old node `i`'s replacement, in `layout`.
  void emit(int i, Node n, const std::string& layout) {
    int outs = n.num_outputs();
    int m = out_.add_node(std::move(n));
    map_.set_node(i, m, outs);
    if (!layout.empty()) layout_[Entry{m, 0}] = layout;
  }

  /// Old node `i` unchanged, its operands in NCHW.
  void emit_plain(int i) {
    const Node& n = g_.node(i);
    Node r = map_.remap(n);
    for (size_t k = 0; k < r.inputs.size(); ++k)
      r.inputs[k] = as_layout(r.inputs[k], g_.type_of(n.inputs[k]), "");
    emit(i, std::move(r), "");
  }

  /// Asks node `i`'s strategy and takes a choice (see the file comment): true when a layout
  /// hook rewrote the node, false when the node stays as it is (its choice recorded on it when
  /// that choice needs no rewrite; the plain or blocked element-wise path emits it).
  bool try_strategy(int i) {
    OpCall c{g_, i, target_};
    call_ = &c;
    std::vector<Choice> choices = strategy_choices(c);
    std::optional<size_t> fastest = fastest_tuned(c, choices);
    std::vector<size_t> order;
    if (fastest) order.push_back(*fastest);
    for (size_t k = 0; k < choices.size(); ++k)
      if (!fastest || k != *fastest) order.push_back(k);
    bool rewritten = false;
    for (size_t k : order) {
      const Choice& ch = choices[k];
      const Implementation& impl = implementation(ch.impl);
      if (ch.rewrite) {
        if (impl.alter_layout && impl.alter_layout(*this)) {
          rewritten = true;
          break;
        }
        continue;
      }
      break;  // the node runs a choice as it is: select_implementations records it
    }
    call_ = nullptr;
    return rewritten;
  }

  /// The index of the fastest tunable choice by the tuning log, when at least two choices have
  /// records (compared inside a model when all were timed there, else as the tuner measured
  /// them).
  std::optional<size_t> fastest_tuned(const OpCall& c, const std::vector<Choice>& choices) const {
    if (!tuned_ || tuned_->empty()) return std::nullopt;
    struct Timed {
      size_t k;
      autotune::Task task;
    };
    std::vector<Timed> timed;
    for (size_t k = 0; k < choices.size(); ++k) {
      const Implementation& impl = implementation(choices[k].impl);
      if (!impl.task) continue;
      try {
        autotune::Task t = impl.task(c);
        if (tuned_->best(t).best) timed.push_back({k, std::move(t)});
      } catch (const Error&) {
      }
    }
    if (timed.size() < 2) return std::nullopt;
    bool network = true, isolated = true;
    for (const Timed& t : timed) {
      const bool n = tuned_->best(t.task).from_network;
      network = network && n;
      isolated = isolated && !n;
    }
    const autotune::Protocol p =
        network || isolated ? autotune::Protocol::kPreferNetwork : autotune::Protocol::kIsolated;
    std::optional<size_t> best;
    double best_s = 0;
    for (const Timed& t : timed) {
      autotune::BestRecord b = tuned_->best(t.task, p);
      if (!b.best) continue;
      if (!best || b.best->result.mean_s < best_s) {
        best = t.k;
        best_s = b.best->result.mean_s;
      }
    }
    return best;
  }

  /// An element-wise / broadcast op or a pooling op with a blocked operand, computed blocked.
  /// For an element-wise / broadcast op the pass moves the fewer elements: computing blocked
  /// transforms the operands that carry channels and are in another layout (a per-channel
  /// [N, C, 1, 1] scale costs C values, the SE block's case), computing in NCHW unblocks every
  /// blocked operand; on a tie the op computes blocked.
  bool try_blocked_elemwise(int i) {
    const Node& n = g_.node(i);
    const OpDef* def = OpRegistry::global().find(n.op);
    if (!def || n.num_outputs() != 1) return false;
    // An op with a "layout" attribute (pooling) computes in any NCHW<b>c layout.
    const bool pool = def->find_attr("layout") != nullptr;
    if (!pool && def->pattern != topi::OpPattern::kElemWise &&
        def->pattern != topi::OpPattern::kBroadcast)
      return false;
    const TensorType& ot = n.outputs[0];
    if (ot.shape.size() != 4) return false;
    const std::string L = dominant_layout(n);
    if (L.empty()) return false;
    const int64_t bn = block_of(L);
    if (ot.shape[1] % bn != 0) return false;
    Node r = map_.remap(n);
    if (pool) {
      if (n.inputs.size() != 1) return false;
      r.attrs.set("layout", L);
      r.outputs = {blocked_type(ot, bn)};
      emit(i, std::move(r), L);
      return true;
    }
    // How each operand is read in L (nothing is added before the decision).
    enum class Read { kAsIs, kConstant, kTransform, kUnitChannel };
    std::vector<Read> plan;
    int64_t cost_blocked = 0, cost_plain = 0;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const TensorType& lt = g_.type_of(n.inputs[k]);
      const std::string& l = layout_of(r.inputs[k]);
      if (!l.empty()) cost_plain += lt.numel();
      const std::optional<std::vector<int64_t>> s4 = broadcast_shape4(lt, ot);
      if (l == L) {
        if (!s4 || (*s4)[1] != ot.shape[1]) return false;  // not a blocked operand of the output
        plan.push_back(Read::kAsIs);
      } else if (lt.numel() == 1 && lt.shape.size() <= 4) {
        plan.push_back(Read::kAsIs);  // a scalar broadcasts in any layout
      } else if (is_f32_constant(g_, n.inputs[k]) && is_per_channel(lt, ot)) {
        plan.push_back(Read::kConstant);  // re-laid out at compile time
      } else if (s4 && (*s4)[1] == ot.shape[1]) {
        plan.push_back(Read::kTransform);
        cost_blocked += lt.numel();
      } else if (s4 && (*s4)[1] == 1 && l.empty()) {
        plan.push_back(Read::kUnitChannel);  // [N, 1, H, W] broadcasts as [N, 1, H, W, 1]
      } else {
        return false;
      }
    }
    if (cost_blocked > cost_plain) return false;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const TensorType& lt = g_.type_of(n.inputs[k]);
      switch (plan[k]) {
        case Read::kAsIs:
          break;
        case Read::kConstant: {
          const Node& c = g_.node(n.inputs[k].node);
          r.inputs[k] = add_constant(c.name + "_" + L, blocked_per_channel(c.value, bn));
          break;
        }
        case Read::kTransform: {
          const std::vector<int64_t> s4 = *broadcast_shape4(lt, ot);
          r.inputs[k] = as_layout(reshaped(r.inputs[k], lt, s4), {s4, lt.dtype}, L);
          break;
        }
        case Read::kUnitChannel: {
          std::vector<int64_t> s5 = *broadcast_shape4(lt, ot);
          s5.push_back(1);
          r.inputs[k] = reshaped(r.inputs[k], lt, s5);
          break;
        }
      }
    }
    r.outputs = {blocked_type(ot, bn)};
    emit(i, std::move(r), L);
    return true;
  }

  /// A node whose op has a blocked form (OpDef::blocked: concat, channel slices, a channel
  /// shuffle) for the layouts its operands are in: that form, its operands transformed to its
  /// layout where they are in another (once per tensor).
  bool try_blocked_form(int i) {
    const Node& n = g_.node(i);
    const OpDef* def = OpRegistry::global().find(n.op);
    if (!def || !def->blocked || n.num_outputs() != 1 || n.outputs[0].shape.size() != 4)
      return false;
    std::optional<BlockedForm> f =
        def->blocked(g_, n, [&](Entry e) { return block_of(layout_of(map_[e])); });
    if (!f || f->block <= 0) return false;
    const bool plain = !f->plain_shape.empty();
    if (!plain && n.outputs[0].shape[1] % f->block != 0) return false;
    const std::string L = blocked_layout(f->block);
    Node r;
    r.op = f->op;
    r.name = n.name;
    r.attrs = f->attrs;
    // Operands that are not 4-D (take's indices) are read as they are.
    for (const Entry& e : f->inputs)
      r.inputs.push_back(g_.type_of(e).shape.size() == 4 ? as_layout(map_[e], g_.type_of(e), L)
                                                         : map_[e]);
    if (plain) {  // a result without channels, as the node's NCHW type
      r.outputs = {TensorType{f->plain_shape, n.outputs[0].dtype}};
      const Entry e{out_.add_node(std::move(r)), 0};
      map_.set_node(i, reshaped(e, out_.type_of(e), n.outputs[0].shape).node, 1);
      return true;
    }
    r.outputs = {blocked_type(n.outputs[0], f->block)};
    emit(i, std::move(r), L);
    return true;
  }

  /// The blocked layout among node `n`'s operands (new graph) that holds the most elements and
  /// whose block `ok` accepts; "" when none.
  std::string dominant_layout(
      const Node& n, const std::function<bool(int64_t)>& ok = [](int64_t) { return true; }) const {
    std::map<std::string, int64_t> held;
    for (const Entry& e : n.inputs) {
      const std::string& l = layout_of(map_[e]);
      if (!l.empty()) held[l] += g_.type_of(e).numel();
    }
    // On a tie, a power-of-two block (whole vectors: LLVM splits a 12-lane vector into 8 + 4,
    // and convolutions block channels by powers of two where they can; GhostNetV2's 24 channels
    // as two 12-channel halves, gated by a map in blocks of 8), then the wider block.
    auto rank = [](int64_t b) { return std::make_pair((b & (b - 1)) == 0, b); };
    std::string best;
    int64_t most = -1;
    for (const auto& [l, count] : held)
      if (ok(block_of(l)) &&
          (count > most || (count == most && rank(block_of(l)) > rank(block_of(best))))) {
        best = l;
        most = count;
      }
    return best;
  }

  /// `e` (a new-graph entry of type `t`) as shape `shape` of the same elements: itself, or a
  /// (memoized) reshape.
  Entry reshaped(Entry e, const TensorType& t, const std::vector<int64_t>& shape) {
    if (t.shape == shape) return e;
    auto key = std::make_pair(e, shape);
    if (auto it = reshapes_.find(key); it != reshapes_.end()) return it->second;
    Node n;
    n.op = "reshape";
    n.attrs.set("newshape", shape);
    n.inputs = {e};
    n.outputs = {TensorType{shape, t.dtype}};
    Entry r{out_.add_node(std::move(n)), 0};
    reshapes_[key] = r;
    return r;
  }

  const Graph& g_;
  Target target_;
  TunedConfigs* tuned_;
  const OpCall* call_ = nullptr;  ///< the node a layout hook is rewriting
  std::map<std::string, Entry> cache_;
  Graph out_;
  detail::EntryMap map_;
  detail::NameGen names_;
  std::map<Entry, std::string> layout_;                               // new entry → "NCHW<b>c"
  std::map<std::pair<Entry, std::string>, Entry> transforms_;         // memoized layout_transforms
  std::map<std::pair<Entry, std::vector<int64_t>>, Entry> reshapes_;  // memoized reshapes
};

}  // namespace

namespace detail {

std::vector<int> layout_round_trips(const Graph& g) {
  // A layout_transform is the node recording both layouts (read as data, not by op name).
  auto layouts = [&](int i) -> std::optional<std::pair<int64_t, int64_t>> {
    const Node& n = g.node(i);
    if (!n.is_op() || !n.attrs.has("src_layout") || !n.attrs.has("dst_layout")) return std::nullopt;
    return std::make_pair(block_of(n.attrs.get_string("src_layout")),
                          block_of(n.attrs.get_string("dst_layout")));
  };
  std::vector<int> trips;
  for (int i = 0; i < g.num_nodes(); ++i) {
    std::optional<std::pair<int64_t, int64_t>> t = layouts(i);
    if (!t || t->first != 0 || t->second == 0) continue;  // not NCHW → NCHW<b>c
    // Back from its input through op nodes, stopping at layout_transforms.
    std::vector<int> stack{g.node(i).inputs[0].node};
    std::set<int> seen;
    bool trip = false;
    while (!stack.empty() && !trip) {
      const int j = stack.back();
      stack.pop_back();
      if (!seen.insert(j).second || !g.node(j).is_op()) continue;
      if (std::optional<std::pair<int64_t, int64_t>> u = layouts(j)) {
        trip = u->first != 0 && u->second == 0;  // NCHW<b>c → NCHW
        continue;
      }
      for (const Entry& e : g.node(j).inputs) stack.push_back(e.node);
    }
    if (trip) trips.push_back(i);
  }
  return trips;
}

}  // namespace detail

Graph alter_op_layout(const Graph& g, const Target& target, TunedConfigs* tuned) {
  return LayoutAlterer(g, target, tuned).run();
}

}  // namespace kiln::graph
