// Default CPU schedules for element-wise, broadcast, shape, reduction and normalization ops.
// Injective intermediates are inlined; an injective output is flattened to one loop, split by
// the SIMD lanes, vectorized inside and parallel outside. Reductions parallelize their fused
// spatial loop and vectorize a spatial inner loop placed inside the reduction loops when the
// innermost input axis is spatial (sum over rows of a row-major matrix reads contiguous
// vectors). Row-wise groups (softmax over the last axis, layer norm) compute their reductions
// at the output's fused row loop so that each row is reduced and written by one thread.
// An empty tensor (a zero extent anywhere) keeps its plain loop nest, which runs nothing.
#include "kiln/topi/schedule_injective.h"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "index_analysis.h"
#include "kiln/arith/analyzer.h"
#include "kiln/ir/functor.h"
#include "kiln/support/error.h"
#include "kiln/topi/nn_norm.h"
#include "kiln/topi/op_pattern.h"
#include "lane_reduce.h"
#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT

namespace {

using detail::extent_of;
using detail::product;

bool is_compute(const te::Operation& op) { return op->kind == te::OpKind::kCompute; }

const te::ComputeOpNode* as_compute(const te::Operation& op) {
  return is_compute(op) ? static_cast<const te::ComputeOpNode*>(op.get()) : nullptr;
}

bool is_reduction(const te::Operation& op) {
  const te::ComputeOpNode* c = as_compute(op);
  return c && !c->reduce_axis.empty();
}

std::vector<te::Operation> ops_of(const std::vector<te::Tensor>& outs) {
  std::vector<te::Operation> ops;
  for (const te::Tensor& t : outs) {
    te::Operation op = t.op();
    if (std::none_of(ops.begin(), ops.end(), [&](const te::Operation& o) { return o.same_as(op); }))
      ops.push_back(op);
  }
  return ops;
}

/// True if a computed tensor of the group is bool: such groups stay scalar. Bool inputs (a
/// causal mask read by `where`) do not count; the code generator loads them byte-wise.
bool group_has_bool(const std::vector<te::Operation>& outs) {
  for (const te::Operation& op : te::post_dfs_order(outs)) {
    if (!is_compute(op)) continue;
    for (int i = 0; i < op->num_outputs(); ++i)
      if (op->output_dtype(i).is_bool()) return true;
  }
  return false;
}

/// Inlines every injective compute stage that is not an output.
void inline_injective(te::Schedule& s, const std::vector<te::Operation>& outs) {
  std::unordered_set<const te::OperationNode*> out_set;
  for (const te::Operation& op : outs) out_set.insert(op.get());
  for (const te::Operation& op : te::post_dfs_order(outs)) {
    if (!is_compute(op) || out_set.count(op.get()) || is_reduction(op)) continue;
    if (is_injective_tag(op->tag)) s[op].compute_inline();
  }
}

int lanes_for(DataType t, const Target& target) {
  int bits = std::max(8, t.bits());
  return std::max(1, target.vector_bits() / bits);
}

/// True when the reduction reads its input's innermost dimension with a reduction variable.
/// Loads that compute another load's index (a gather's indices: an embedding bag's
/// mean over rows take(table, ids[b, k])) are not what it reads along.
bool reduces_innermost(const te::ComputeOpNode* c) {
  VarSet rvars;
  for (const IterVar& iv : c->reduce_axis) rvars.insert(iv->var);
  bool found = false;
  for (const Expr& b : c->body) {
    // Through the injective producers the kernel inlines: their loads are what it reads.
    const Expr body = detail::inline_injective_loads(b);
    std::unordered_set<const IRNode*> index_loads;
    post_order_visit(body, [&](const IRNode* n) {
      if (n->kind != NodeKind::ProducerLoad) return;
      for (const Expr& i : static_cast<const ProducerLoad*>(n)->indices)
        post_order_visit(i, [&](const IRNode* m) {
          if (m->kind == NodeKind::ProducerLoad) index_loads.insert(m);
        });
    });
    post_order_visit(body, [&](const IRNode* n) {
      if (n->kind != NodeKind::ProducerLoad || index_loads.count(n)) return;
      const auto* pl = static_cast<const ProducerLoad*>(n);
      if (pl->indices.empty()) return;
      if (uses_var(pl->indices.back(), [&](const Variable* v) { return rvars.count(Var(v)) > 0; }))
        found = true;
    });
  }
  return found;
}

bool is_lane_partial(const te::Operation& op) { return op->tag == detail::kLanePartialTag; }

/// Schedules the lane partials (lane_reduce.h) among `final`'s inputs: computed at `loop` of
/// `at` when given, the lane axis innermost (inside the reduction) and vectorized.
void attach_lane_partials(te::Schedule& s, const te::Operation& final, te::Stage* at,
                          const IterVar& loop) {
  for (const te::Tensor& t : final->input_tensors()) {
    if (!is_lane_partial(t.op())) continue;
    // The final stage combines the lanes in a tree (tir::vectorize), not one after another.
    std::vector<IterVar> lanes = s[final].op_reduce_axis();
    if (lanes.size() == 1) s[final].vectorize(lanes[0]);
    te::Stage sp = s[t.op()];
    if (at) sp.compute_at(*at, loop);
    std::vector<IterVar> order = sp.op_axis();
    IterVar lane = order.back();
    order.pop_back();
    for (const IterVar& k : sp.op_reduce_axis()) order.push_back(k);
    order.push_back(lane);
    sp.reorder(order);
    sp.vectorize(lane);
  }
}

void schedule_reduce_stage(te::Schedule& s, const te::Operation& op, const Target& target,
                           bool allow_vector) {
  if (is_lane_partial(op)) return;  // scheduled with the stage that reduces its lanes
  te::Stage st = s[op];
  const te::ComputeOpNode* c = as_compute(op);
  std::vector<IterVar> spatial = st.op_axis(), red = st.op_reduce_axis();
  if (spatial.empty()) {
    attach_lane_partials(s, op, nullptr, IterVar());
    return;
  }
  int64_t n_spatial = product(spatial), n_red = product(red);
  for (const te::Tensor& t : op->input_tensors())  // the rows a lane partial reduces
    if (is_lane_partial(t.op())) n_red *= std::max<int64_t>(1, product(s[t.op()].op_reduce_axis()));
  if (n_spatial == 0) return;  // an empty output: nothing to run (fusing would divide by 0)
  IterVar fused = spatial.size() > 1 ? st.fuse(spatial) : spatial[0];
  int lanes = lanes_for(op->output_dtype(0), target);
  bool big = n_spatial > 0 && n_red > 0 && n_spatial * n_red > kParallelThreshold;
  if (allow_vector && c->num_outputs() == 1 && !reduces_innermost(c) && lanes > 1 &&
      n_spatial >= lanes) {
    auto [o, i] = st.split(fused, Expr(lanes));
    std::vector<IterVar> order = {o};
    order.insert(order.end(), red.begin(), red.end());
    order.push_back(i);
    st.reorder(order);
    st.vectorize(i);
    if (big && n_spatial / lanes > 1) st.parallel(o);
  } else if (big && n_spatial > 1) {
    st.parallel(fused);
  }
  attach_lane_partials(s, op, &st, fused);
}

/// The common treatment: injective intermediates inlined, every reduction scheduled, every
/// injective output vectorized.
void schedule_generic(te::Schedule& s, const std::vector<te::Operation>& outs,
                      const Target& target) {
  bool has_bool = group_has_bool(outs);
  inline_injective(s, outs);
  std::unordered_set<const te::OperationNode*> out_set;
  for (const te::Operation& op : outs) out_set.insert(op.get());
  for (const te::Operation& op : te::post_dfs_order(outs)) {
    if (!is_compute(op)) continue;
    if (is_reduction(op)) {
      schedule_reduce_stage(s, op, target, !has_bool);
    } else if (out_set.count(op.get())) {
      schedule_injective_stage(s, op.output(0), target);
    }
  }
}

/// A row of `extent` elements in vectors of `lanes` (the split's outer loop `o`, its last vector
/// shifted inwards when `lanes` does not divide): a row of at most four vectors is unrolled, so
/// that each vector's start is a constant and the simplifier can resolve the divisions an
/// inlined reshape or concat puts in its indices (a row of 28 as vectors at 0 and 12).
void unroll_short_row(te::Stage& st, const IterVar& o, int64_t extent, int64_t lanes) {
  if (extent % lanes != 0 && extent <= 4 * lanes) st.unroll(o);
}

/// Row-wise group: `out` has the shape lead + row; every reduction in `reds` has shape lead and
/// reduces its innermost input dimension. Returns false when the group does not fit.
bool schedule_rows(te::Schedule& s, const te::Tensor& out, const std::vector<te::Operation>& reds,
                   const Target& target, const std::vector<te::Operation>& row_stages = {}) {
  if (reds.empty()) return false;
  size_t lead = reds[0]->output_shape(0).size();
  for (const te::Operation& r : reds) {
    const te::ComputeOpNode* c = as_compute(r);
    if (!c || c->num_outputs() != 1 || r->output_shape(0).size() != lead || !reduces_innermost(c))
      return false;
  }
  te::Stage st = s[out];
  std::vector<IterVar> axes = st.op_axis();
  if (lead == 0 || lead >= axes.size()) return false;
  std::vector<IterVar> outer(axes.begin(), axes.begin() + static_cast<ptrdiff_t>(lead));
  std::vector<IterVar> inner(axes.begin() + static_cast<ptrdiff_t>(lead), axes.end());
  int64_t n_outer = product(outer), n_inner = product(inner);
  if (n_outer == 0 || n_inner == 0) return false;
  IterVar fo = outer.size() > 1 ? st.fuse(outer) : outer[0];
  IterVar fi = inner.size() > 1 ? st.fuse(inner) : inner[0];
  int lanes = lanes_for(out->dtype, target);
  // A row that the vectors do not divide ends in a vector shifted inwards (overlapping the one
  // before: a row of 21 as vectors at 0 and 5), whole loads and stores instead of masked ones.
  if (lanes > 1 && n_inner >= lanes && !out->dtype.is_bool()) {
    auto [o, i] = st.split(fi, Expr(lanes), /*shift_tail=*/true);
    st.vectorize(i);
    unroll_short_row(st, o, n_inner, lanes);
  }
  if (n_outer > 1 && n_outer * n_inner > kParallelThreshold) st.parallel(fo);
  for (const te::Operation& r : reds) {
    s[r].compute_at(st, fo);
    attach_lane_partials(s, r, &st, fo);
  }
  for (const te::Operation& r : row_stages) {
    // A stage of out's shape stored per row (a softmax's exponentials): computed at the row
    // loop, its row vectorized like out's.
    te::Stage sr = s[r];
    sr.compute_at(st, fo);
    std::vector<IterVar> ra = sr.op_axis();
    std::vector<IterVar> rin(ra.begin() + static_cast<ptrdiff_t>(lead), ra.end());
    IterVar ri = rin.size() > 1 ? sr.fuse(rin) : rin[0];
    if (lanes > 1 && n_inner >= lanes) {
      auto [o, i] = sr.split(ri, Expr(lanes), /*shift_tail=*/true);
      sr.vectorize(i);
      unroll_short_row(sr, o, n_inner, lanes);
    }
  }
  return true;
}

/// The reductions among `out`'s direct inputs.
std::vector<te::Operation> input_reductions(const te::Tensor& out) {
  std::vector<te::Operation> r;
  for (const te::Tensor& t : out.op()->input_tensors())
    if (is_reduction(t.op())) r.push_back(t.op());
  return r;
}

bool equal_shape(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t d = 0; d < a.size(); ++d) {
    auto x = as_const_int(a[d]), y = as_const_int(b[d]);
    if (!x || !y || *x != *y) return false;
  }
  return true;
}

/// The axis of `out` along which an inlined concat of the group chooses its input — when a
/// concat with `out`'s shape (an element-wise chain follows it: batch norm + ReLU after a
/// DenseNet concat) selects on `axis < offset` — else -1.
int concat_axis(const te::Tensor& out) {
  for (const te::Operation& op : te::post_dfs_order({out.op()})) {
    const te::ComputeOpNode* c = as_compute(op);
    if (!c || op->tag.find("concat") == std::string::npos || c->body.size() != 1) continue;
    if (!equal_shape(op->output_shape(0), out->shape)) continue;
    const Select* sel = c->body[0].as<Select>();
    const Call* l = sel ? sel->condition.as<Call>() : nullptr;
    const LT* lt = l && l->args.size() == 1 ? l->args[0].as<LT>() : nullptr;
    const Variable* v = lt ? lt->a.as<Variable>() : nullptr;
    for (size_t d = 0; v && d < c->axis.size(); ++d)
      if (c->axis[d]->var.get() == v) return static_cast<int>(d);
  }
  return -1;
}

/// An output whose inlined concat chooses its input along `axis` (not the innermost): that
/// axis becomes a serial loop just inside the parallel loop over the axes before it and the
/// one after it, so that loop_partition cuts it into one loop per concat input (each reads one
/// input, instead of every element loading from all of them and selecting); the remaining
/// axes run inside, the innermost vectorized. When the axes outside it have no extent to share
/// between threads (a [1, tokens, C] concat along the tokens), the concat axis itself is the
/// parallel loop (each part a parallel loop).
void schedule_concat_stage(te::Schedule& s, const te::Tensor& out, int axis, const Target& target) {
  te::Stage st = s[out];
  std::vector<IterVar> axes = st.op_axis();
  const size_t r = axes.size(), j = static_cast<size_t>(axis);
  std::vector<IterVar> par(axes.begin(), axes.begin() + axis), mid;
  if (j + 2 < r) par.push_back(axes[j + 1]);
  for (size_t d = j + (j + 2 < r ? 2 : 1); d + 1 < r; ++d) mid.push_back(axes[d]);
  std::vector<IterVar> order = par;
  order.push_back(axes[j]);
  order.insert(order.end(), mid.begin(), mid.end());
  order.push_back(axes.back());
  st.reorder(order);
  if (mid.size() > 1) st.fuse(mid);
  // The rows are copied in vectors of the target's width, or of a half or a quarter of it for
  // rows shorter than that (ShuffleNet's 14-wide maps: two 8-lane vectors at 0 and 6).
  int64_t lanes = lanes_for(out->dtype, target);
  const int64_t row = extent_of(axes.back());
  while (lanes > 4 && row < lanes) lanes /= 2;
  if (lanes > 1 && row >= lanes && !group_has_bool({out.op()})) {
    auto [o, i] = st.split(axes.back(), Expr(static_cast<int32_t>(lanes)), /*shift_tail=*/true);
    st.vectorize(i);
    unroll_short_row(st, o, row, lanes);
  }
  if (product(axes) <= kParallelThreshold) return;
  if (product(par) > 1) {
    st.parallel(par.size() > 1 ? st.fuse(par) : par[0]);
  } else {
    st.parallel(axes[j]);  // nothing outside it to share: its parts run in parallel one by one
  }
}

/// The loads of `e` from tensors that are not injective intermediates.
std::vector<const ProducerLoad*> source_loads(const Expr& e) {
  std::vector<const ProducerLoad*> r;
  post_order_visit(e, [&](const IRNode* n) {
    if (const auto* pl = dynamic_cast<const ProducerLoad*>(n)) r.push_back(pl);
  });
  return r;
}

/// How far (in elements of its row-major storage) the load `pl` moves when `v` grows by one,
/// when the analyzer can say (else nullopt).
std::optional<int64_t> load_step(const ProducerLoad* pl, const Var& v, arith::Analyzer* ana) {
  const std::vector<Expr> shape = pl->producer->producer_shape();
  if (pl->indices.empty()) return 0;
  // In the indices' own type (the analysis is symbolic: no overflow to fear).
  const DataType t = pl->indices[0].dtype();
  Expr flat = make_const(t, 0);
  for (size_t d = 0; d < pl->indices.size(); ++d) {
    auto ext = as_const_int(shape[d]);
    if (!ext || pl->indices[d].dtype() != t) return std::nullopt;
    flat = flat * make_const(t, *ext) + pl->indices[d];
  }
  VarMap<Expr> next;
  next[v] = v + make_const(v.dtype(), 1);
  return as_const_int(ana->simplify(substitute(flat, next) - flat));
}

/// For each load of `out` from a tensor that is not an injective intermediate (its injective
/// producers inlined), the load's step along each of `vars` (load_step: nullopt where the
/// analyzer cannot say). Empty when `out` is not a one-output compute or reads no source.
std::vector<std::vector<std::optional<int64_t>>> source_steps(const te::Tensor& out,
                                                              const std::vector<Var>& vars) {
  std::vector<std::vector<std::optional<int64_t>>> r;
  const te::ComputeOpNode* c = as_compute(out.op());
  if (!c || c->body.size() != 1) return r;
  Expr body = detail::inline_injective_loads(c->body[0]);
  arith::Analyzer ana;
  for (const te::IterVar& iv : c->axis) ana.bind(iv->var, iv->dom);
  for (const ProducerLoad* pl : source_loads(body)) {
    r.emplace_back();
    for (const Var& v : vars) r.back().push_back(load_step(pl, v, &ana));
  }
  return r;
}

/// True when `out` is a layout_transform to NCHW<lanes>c (rank 5, at least `lanes` pixels per
/// channel) that, through the producers inlined into it, reads every source with a stride
/// other than 1 along its channel lanes and with stride 1 along its width: a transpose, which
/// reads whole rows when vectorized along the pixels. (A layout_transform whose source is
/// already channels-last, ConvNeXt's permuted NHWC, reads contiguous lanes and keeps the
/// default.)
bool blocks_plain_channels(const te::Tensor& out, int lanes) {
  if (out.op()->tag.find("layout_transform") == std::string::npos || out->shape.size() != 5)
    return false;
  auto b = as_const_int(out->shape[4]), h = as_const_int(out->shape[2]),
       w = as_const_int(out->shape[3]);
  if (!b || *b != lanes || !h || !w || *h * *w < lanes) return false;
  const te::ComputeOpNode* c = as_compute(out.op());
  if (!c) return false;
  std::vector<std::vector<std::optional<int64_t>>> steps =
      source_steps(out, {c->axis[4]->var, c->axis[3]->var});
  if (steps.empty()) return false;
  for (const auto& st : steps) {
    const auto &sc = st[0], &sw = st[1];
    if (!sc || !sw || *sc == 1 || *sw != 1) return false;
  }
  return true;
}

/// True when, through the producers inlined into it, `out` reads a source along the lane
/// variable `lane` with a step the analyzer cannot show to be 0 or 1 (a channel read across
/// blocks of another width).
bool reads_across_blocks(const te::Tensor& out, const Var& lane) {
  for (const auto& st : source_steps(out, {lane}))
    if (!st[0] || (*st[0] != 0 && *st[0] != 1)) return true;
  return false;
}

}  // namespace

void schedule_injective_stage(te::Schedule& s, const te::Tensor& out, const Target& target) {
  te::Stage st = s[out];
  std::vector<IterVar> axes = st.op_axis();
  if (axes.empty()) return;
  if (st->leaf_iter_vars.size() != axes.size()) return;  // already scheduled
  int64_t total = product(axes);
  if (total == 0) return;  // an empty tensor (a zero extent): fusing would divide by 0
  if (int c = concat_axis(out); c >= 0 && c + 1 < static_cast<int>(axes.size())) {
    schedule_concat_stage(s, out, c, target);
    return;
  }
  int lanes = lanes_for(out->dtype, target);
  bool vec = lanes > 1 && total >= lanes && !group_has_bool({out.op()});
  if (vec && blocks_plain_channels(out, lanes)) {
    // A transpose into NCHW<lanes>c: the output's channel lanes are apart in the source, so a
    // vector along them is a gather. Vectorizing the fused (h, w) instead loads contiguous rows
    // of each channel and stores them `lanes` elements apart, into the cache lines the block's
    // other channels fill next (they stay in L1).
    IterVar p = st.fuse(axes[0], axes[1]);
    IterVar hw = st.fuse(axes[2], axes[3]);
    auto [o, i] = st.split(hw, Expr(lanes), /*shift_tail=*/true);
    st.reorder({p, o, axes[4], i});
    st.vectorize(i);
    if (total > kParallelThreshold && extent_of(axes[0]) * extent_of(axes[1]) > 1) st.parallel(p);
    return;
  }
  if (vec && axes.size() >= 2 && extent_of(axes.back()) >= lanes) {
    // Keep the innermost axis whole so that broadcast reads along it stay contiguous vectors;
    // the outer axes are fused into one (parallel) loop. With fewer than 16 rows (a GroupNorm's
    // [N, 1, C*H*W] view) the vectors of the rows are shared out too.
    std::vector<IterVar> outer(axes.begin(), axes.end() - 1);
    IterVar fo = outer.size() > 1 ? st.fuse(outer) : outer[0];
    auto [o, i] = st.split(axes.back(), Expr(lanes), /*shift_tail=*/true);
    st.vectorize(i);
    unroll_short_row(st, o, extent_of(axes.back()), lanes);
    if (total > kParallelThreshold) {
      if (product(outer) < 16 && extent_of(axes.back()) > 4 * lanes)
        st.parallel(st.fuse(fo, o));
      else if (product(outer) > 1)
        st.parallel(fo);
    }
    return;
  }
  const int64_t last = extent_of(axes.back());
  if (vec && axes.size() >= 3 && last >= 4 && last < lanes && lanes % last == 0) {
    // A half- or quarter-vector channel block (NCHW8c with 16 lanes): the block is the vector,
    // so that a per-channel operand ([N, C/8, 1, 1, 8], a squeeze-and-excitation scale) is one
    // contiguous load; a flattened 16-lane vector would index it with a division per lane.
    // A source read across channel blocks of another width (a 12-channel block read into 8c
    // vectors: a lane's block and position are a division and a remainder of the channel):
    // the output's channel blocks (up to 16: GhostNet's 72 channels in 9 blocks of 8 read
    // from 12-channel halves) go innermost, unrolled, so that each vector's first channel is a
    // constant and its lanes' blocks and positions simplify.
    if (axes.size() == 5 && extent_of(axes[1]) > 1 && extent_of(axes[1]) <= 16 &&
        reads_across_blocks(out, axes.back()->var)) {
      st.reorder({axes[0], axes[2], axes[3], axes[1], axes[4]});
      IterVar fo = st.fuse({axes[0], axes[2], axes[3]});
      st.unroll(axes[1]);
      st.vectorize(axes.back());
      if (total > kParallelThreshold) st.parallel(fo);
      return;
    }
    std::vector<IterVar> outer(axes.begin(), axes.end() - 1);
    IterVar fo = outer.size() > 1 ? st.fuse(outer) : outer[0];
    st.vectorize(axes.back());
    if (total > kParallelThreshold && product(outer) > 1) st.parallel(fo);
    return;
  }
  if (vec && axes.size() >= 3 && last > 1 && last < lanes && lanes % last != 0 &&
      extent_of(axes[axes.size() - 2]) >= lanes) {
    // A short innermost axis whose extent does not divide the lanes (NCHW -> NCHW3c): the
    // flattened vector would gather with a division per lane. Scalar loops over the last two
    // axes, the innermost unrolled, let LLVM's loop vectorizer use an interleaved access group
    // (shuffles) instead.
    std::vector<IterVar> outer(axes.begin(), axes.end() - 2);
    IterVar fo = outer.size() > 1 ? st.fuse(outer) : outer[0];
    st.unroll(axes.back());
    if (total > kParallelThreshold && product(outer) > 1) st.parallel(fo);
    return;
  }
  IterVar fused = axes.size() > 1 ? st.fuse(axes) : axes[0];
  if (vec) {
    auto [o, i] = st.split(fused, Expr(lanes), /*shift_tail=*/true);
    st.vectorize(i);
    if (total > kParallelThreshold) st.parallel(o);
  } else if (total > kParallelThreshold) {
    st.parallel(fused);
  }
}

te::Schedule schedule_injective(const std::vector<te::Tensor>& outs, const Target& target) {
  KILN_USER_CHECK(!outs.empty()) << "schedule_injective: no output tensors";
  std::vector<te::Operation> ops = ops_of(outs);
  te::Schedule s = te::create_schedule(ops);
  inline_injective(s, ops);
  for (const te::Operation& op : ops) {
    KILN_USER_CHECK(is_compute(op) && !is_reduction(op))
        << "schedule_injective: output '" << op->name << "' (tag '" << op->tag
        << "') is not an injective compute; use schedule_reduce";
    schedule_injective_stage(s, op.output(0), target);
  }
  return s;
}

te::Schedule schedule_reduce(const std::vector<te::Tensor>& outs, const Target& target) {
  KILN_USER_CHECK(!outs.empty()) << "schedule_reduce: no output tensors";
  std::vector<te::Operation> ops = ops_of(outs);
  te::Schedule s = te::create_schedule(ops);
  schedule_generic(s, ops, target);
  return s;
}

te::Schedule schedule_softmax(const std::vector<te::Tensor>& outs, const Target& target) {
  KILN_USER_CHECK(outs.size() == 1) << "schedule_softmax: expects one output, got " << outs.size();
  const te::Tensor& out = outs[0];
  KILN_USER_CHECK(out.op()->tag == tag::kSoftmaxOutput || out.op()->tag == tag::kLogSoftmaxOutput)
      << "schedule_softmax: output '" << out.op()->name << "' has tag '" << out.op()->tag
      << "', not a softmax output";
  std::vector<te::Operation> ops = ops_of(outs);
  te::Schedule s = te::create_schedule(ops);
  inline_injective(s, ops);
  // The reductions the output reads, and those its stored exponentials read (the max).
  std::vector<te::Operation> reds = input_reductions(out), row_stages;
  for (const te::Tensor& t : out.op()->input_tensors()) {
    if (t.op()->tag != tag::kSoftmaxExp) continue;
    row_stages.push_back(t.op());
    for (const te::Operation& r : input_reductions(t))
      if (std::none_of(reds.begin(), reds.end(),
                       [&](const te::Operation& o) { return o.same_as(r); }))
        reds.push_back(r);
  }
  if (!schedule_rows(s, out, reds, target, row_stages)) schedule_generic(s, ops, target);
  return s;
}

te::Schedule schedule_norm(const std::vector<te::Tensor>& outs, const Target& target) {
  KILN_USER_CHECK(!outs.empty()) << "schedule_norm: no output tensors";
  std::vector<te::Operation> ops = ops_of(outs);
  te::Schedule s = te::create_schedule(ops);
  inline_injective(s, ops);
  if (outs.size() == 1 && outs[0].op()->tag == tag::kLayerNormOutput &&
      schedule_rows(s, outs[0], input_reductions(outs[0]), target))
    return s;
  schedule_generic(s, ops, target);
  return s;
}

}  // namespace kiln::topi
