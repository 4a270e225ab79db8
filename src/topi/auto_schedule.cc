// The rule-based default CPU schedule (auto_schedule.h): Ansor's sketch rules without search.
// One walk over the group's stages inlines injective producers (keeping conditional producers of
// reductions, i.e. padding, at the root), then each reduction stage gets a multi-level tile: its
// spatial loops split into outer tiles (fused, parallel) and a register tile of rows x columns
// whose innermost axis is vectorized; the reduction loops sit between the two levels. The
// reduction accumulates in a local buffer computed at the outer tile (cache_write for an output
// reduction, the reduction itself for one followed by its element-wise epilogue), so the
// epilogue runs on the tile. Tile sizes are knobs whose fallbacks come from the target's vector
// registers and lanes. Every decision only changes loops, never the computation: the schedule is
// correct for any compute, including odd extents (te's splits keep tails), bool and integer
// dtypes (bool is never vectorized), tuple reductions (tiled, not vectorized) and empty tensors
// (left alone).
#include "kiln/topi/auto_schedule.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "index_analysis.h"
#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/support/error.h"
#include "kiln/topi/op_pattern.h"
#include "kiln/topi/schedule_injective.h"
#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using autotune::Config;
using autotune::SplitPolicy;

namespace {

using OpSet = std::set<const te::OperationNode*>;

using detail::coefficient;
using detail::extent_of;
using detail::product;
using detail::uses;

const te::ComputeOpNode* as_compute(const te::Operation& op) {
  return op->kind == te::OpKind::kCompute ? static_cast<const te::ComputeOpNode*>(op.get())
                                          : nullptr;
}

bool is_reduction(const te::Operation& op) {
  const te::ComputeOpNode* c = as_compute(op);
  return c && !c->reduce_axis.empty();
}

/// The loads of tensors in a compute's bodies.
std::vector<const ProducerLoad*> loads_of(const te::ComputeOpNode* c) {
  std::vector<const ProducerLoad*> r;
  for (const Expr& b : c->body)
    post_order_visit(b, [&](const IRNode* n) {
      if (n->kind == NodeKind::ProducerLoad) r.push_back(static_cast<const ProducerLoad*>(n));
    });
  return r;
}

/// True when a compute's body selects (a padding stage's bounds test).
bool has_condition(const te::ComputeOpNode* c) {
  bool found = false;
  for (const Expr& b : c->body)
    post_order_visit(b, [&](const IRNode* n) {
      if (n->kind == NodeKind::Select) found = true;
      if (n->kind == NodeKind::Call) {
        const auto* call = static_cast<const Call*>(n);
        if (call->name == "if_then_else") found = true;
      }
    });
  return found;
}

int lanes_for(DataType t, const Target& target) {
  return std::max(1, target.vector_bits() / std::max(8, t.bits()));
}

bool group_has_bool(const std::vector<te::Operation>& order) {
  for (const te::Operation& op : order)
    for (int i = 0; i < op->num_outputs(); ++i)
      if (op->output_dtype(i).is_bool()) return true;
  return false;
}

/// The register tile of one anchor: which axes, how vectorized, and the knob names.
struct Plan {
  int x = -1;        ///< index of the column (innermost spatial) axis
  int y = -1;        ///< index of the row axis, -1 when none
  bool vec = false;  ///< columns are vectors of `lanes`
  int64_t lanes = 1;
  std::string prefix;
  bool reuse = true;  ///< has_reuse: a register tile of several rows / vectors pays
};

/// The row axis: the innermost spatial axis (not x, extent > 1) that no load along x depends
/// on; else the innermost other one with extent > 1; -1 when there is none.
int choose_row_axis(const te::ComputeOpNode* c, const std::vector<IterVar>& axes, int x) {
  const Var& xv = c->axis[x]->var;
  std::vector<const ProducerLoad*> along_x;
  for (const ProducerLoad* l : loads_of(c))
    if (!l->indices.empty() && uses(l->indices.back(), xv)) along_x.push_back(l);
  int fallback = -1;
  for (int d = x - 1; d >= 0; --d) {
    if (extent_of(axes[d]) <= 1) continue;
    if (fallback < 0) fallback = d;
    const Var& v = c->axis[d]->var;
    bool used = false;
    for (const ProducerLoad* l : along_x)
      for (const Expr& i : l->indices) used = used || uses(i, v);
    if (!used && !along_x.empty()) return d;
  }
  return fallback;
}

/// True when some load is independent of some spatial axis (extent > 1), so that a register
/// tile over that axis reuses it (Ansor's "needs multi-level tiling"): matmul, convolution. A
/// pooling window or a plain reduction reads each element for one output only and gets a single
/// row of one vector (or element) per accumulator.
bool has_reuse(const te::ComputeOpNode* c) {
  for (const ProducerLoad* l : loads_of(c))
    for (const IterVar& iv : c->axis) {
      if (extent_of(iv) <= 1) continue;
      bool used = false;
      for (const Expr& i : l->indices) used = used || uses(i, iv->var);
      if (!used) return true;
    }
  return false;
}

/// Whether the column axis may be vectorized (see the header).
bool vectorizable(const te::ComputeOpNode* c, int x, int64_t X, int64_t lanes, bool has_bool) {
  if (has_bool || lanes <= 1 || X < std::min<int64_t>(lanes, 4)) return false;
  // Columns no vector width divides (49 = 7x7 pixels, 197 tokens) are vectorized too: the
  // last tile is shifted inwards (tile_outer), so no vector is masked (a 172x172 by 172x125
  // product: 1.65 ms with masked tails, 65 us shifted).
  // Every load that moves along x must be contiguous in it (a unit stride on its innermost
  // axis, or broadcast): a strided or divided index would gather lane by lane. And some load
  // must be contiguous, or the reduction must not run along its inputs' innermost axis (then
  // the column vectors are at least whole rows of the output).
  const Var& xv = c->axis[x]->var;
  // A condition on x (a pooling window's bounds in the reduction's `where`, an inlined
  // padding's if_then_else) would turn every tap into a masked vector update, which measured
  // several times slower than the scalar loops.
  bool masked = false;
  for (const Expr& b : c->body)
    post_order_visit(b, [&](const IRNode* n) {
      if (n->kind == NodeKind::Reduce) {
        const Expr& cond = static_cast<const Reduce*>(n)->condition;
        masked = masked || (cond.defined() && uses(cond, xv));
      } else if (n->kind == NodeKind::Call) {
        const auto* call = static_cast<const Call*>(n);
        masked = masked ||
                 (call->name == "if_then_else" && !call->args.empty() && uses(call->args[0], xv));
      }
    });
  if (masked) return false;
  bool x_inner = false, red_inner = false;
  for (const ProducerLoad* l : loads_of(c)) {
    if (l->indices.empty()) continue;
    const Expr& last = l->indices.back();
    for (size_t d = 0; d + 1 < l->indices.size(); ++d)
      if (uses(l->indices[d], xv)) return false;
    if (uses(last, xv)) {
      if (coefficient(last, xv) != std::optional<int64_t>(1)) return false;
      x_inner = true;
    }
    for (const IterVar& r : c->reduce_axis) red_inner = red_inner || uses(last, r->var);
  }
  return x_inner || !red_inner;
}

/// The vector widths a tile may use: the target's lanes and its halves down to 4 (a narrower
/// vector that divides the extent beats a wide one with a masked tail).
std::vector<int64_t> lane_candidates(int64_t lanes) {
  std::vector<int64_t> r;
  for (int64_t l = lanes; l >= 4 || l == lanes; l /= 2) {
    r.push_back(l);
    if (l <= 1) break;
  }
  return r;
}

/// Declares the tile knobs of one anchor and sets their fallbacks; returns (rows, columns) of
/// the register tile (columns in elements) and sets p.lanes to the vector width chosen.
std::pair<int64_t, int64_t> define_tile(Config& cfg, Plan& p, int64_t X, int64_t Y, int64_t K,
                                        const Target& target) {
  std::vector<int64_t> xs, ls = {1};
  if (p.vec) {
    ls = lane_candidates(p.lanes);
    for (int64_t v = 1; v <= 8; ++v)
      if (v == 1 || (v - 1) * ls.back() < X) xs.push_back(v);
  } else {
    xs = detail::filter_leq({1, 2, 4, 8}, X);
  }
  std::vector<int64_t> ys = detail::filter_leq({1, 2, 3, 4, 6, 8}, Y);
  cfg.define_knob(p.prefix + "tile_x", xs);
  cfg.define_knob(p.prefix + "tile_y", ys);
  cfg.define_knob(p.prefix + "tile_lanes", ls);
  cfg.define_split(p.prefix + "tile_k", std::max<int64_t>(K, 1), 2, SplitPolicy::kFactors, 16);
  cfg.define_bool(p.prefix + "unroll_k");
  if (cfg.is_fallback()) {
    // The most multiply-adds per step (accumulators times their lanes) whose accumulators
    // leave room for one row of operands and a broadcast, weighted by the share of the tiles'
    // work that is not recomputed (tile_outer shifts a last tile that does not divide inwards,
    // over part of the one before it); a tile wider than the columns is masked (measured
    // 2-6x slower), so a narrower one wins.
    const int64_t regs = p.vec ? target.vector_registers() : 16;
    double best = -1;
    int64_t bx = xs.front(), by = ys.front(), bl = ls.front();
    for (int64_t l : ls)
      for (int64_t v : xs)
        for (int64_t r : ys) {
          const int64_t cols = v * l, acc = r * v;
          if (acc + v + 1 > regs || (v > 1 && (v - 1) * l >= X)) continue;
          if (!p.reuse && (r > 1 || v > 1)) continue;  // no reuse: one vector
          const double ex = static_cast<double>(X) / (((X + cols - 1) / cols) * cols);
          const double ey = static_cast<double>(Y) / (((Y + r - 1) / r) * r);
          const double tail = cols > X ? 0.1 : 1.0;
          const double score =
              static_cast<double>(std::min<int64_t>(acc, 24)) * l / ls.front() * ex * ey * tail +
              1e-3 * acc;
          if (score > best) {
            best = score;
            bx = v;
            by = r;
            bl = l;
          }
        }
    cfg.fallback_knob(p.prefix + "tile_x", bx);
    cfg.fallback_knob(p.prefix + "tile_y", by);
    cfg.fallback_knob(p.prefix + "tile_lanes", bl);
    cfg.fallback_split(p.prefix + "tile_k", {-1, K <= 8 ? K : 4});
    cfg.fallback_knob(p.prefix + "unroll_k", 1);
  }
  if (p.vec) p.lanes = cfg.knob(p.prefix + "tile_lanes");
  const int64_t cols = cfg.knob(p.prefix + "tile_x") * (p.vec ? p.lanes : 1);
  return {cfg.knob(p.prefix + "tile_y"), cols};
}

/// The outer loops of a tile: the parallel one (the outermost loops fused until there are
/// enough iterations to share among threads, kParallelChunks) and the innermost one, where the
/// accumulator is computed. Fusing every outer loop would put a division and a remainder per
/// index into every iteration; loops left inside stay plain nested loops.
struct Outer {
  IterVar par, attach;
  int64_t par_extent = 1;
};

/// Enough parallel iterations for any thread count we run with, with room for imbalance.
constexpr int64_t kParallelChunks = 64;

/// Splits the owner stage's spatial axes into outer tiles and the register tile, ordered
/// [outer..., y_i, x_i]. `inner` receives the register tile's loops (y_i when tiled, x_i).
Outer tile_outer(te::Stage& st, const Plan& p, int64_t rows, int64_t cols,
                 std::vector<IterVar>* inner) {
  std::vector<IterVar> axes = st.op_axis();
  std::vector<IterVar> outer;
  std::vector<int64_t> ext;
  IterVar yi, xi;
  for (int d = 0; d < static_cast<int>(axes.size()); ++d) {
    const int64_t e = extent_of(axes[d]);
    // Tiles that do not divide the extent are shifted inwards (te::Stage::split): the last
    // one overlaps the one before it, so no update is masked and the accumulator's extents
    // stay constant.
    if (d == p.x) {
      auto [o, i] = st.split(axes[d], detail::ci(cols), /*shift_tail=*/true);
      outer.push_back(o);
      ext.push_back((e + cols - 1) / cols);
      xi = i;
    } else if (d == p.y) {
      auto [o, i] = st.split(axes[d], detail::ci(rows), /*shift_tail=*/true);
      outer.push_back(o);
      ext.push_back((e + rows - 1) / rows);
      yi = i;
    } else {
      outer.push_back(axes[d]);
      ext.push_back(e);
    }
  }
  std::vector<IterVar> order = outer;
  if (yi.defined()) order.push_back(yi);
  order.push_back(xi);
  st.reorder(order);
  if (yi.defined()) inner->push_back(yi);
  inner->push_back(xi);
  // A column tile longer than the columns is partial: its loop stays out of the parallel loop
  // when the loops before it give two iterations or more, so that loop partition can peel it.
  const int64_t X = extent_of(axes[p.x]);
  const bool partial_x = p.vec && X % cols != 0 && X < cols;
  size_t k = 1;
  int64_t n = ext[0];
  while (k < outer.size() && n < kParallelChunks &&
         !(partial_x && static_cast<int>(k) == p.x && n >= 2))
    n *= ext[k++];
  std::vector<IterVar> head(outer.begin(), outer.begin() + static_cast<ptrdiff_t>(k));
  Outer r;
  r.par = head.size() > 1 ? st.fuse(head) : head[0];
  r.par_extent = n;
  r.attach = k == outer.size() ? r.par : outer.back();
  return r;
}

/// The register tile's loops of a stage computing the reduction (the accumulator, or the
/// reduction tiled in place): reduction loops (innermost split by tile_k) outside the spatial
/// ones, the row loop and the column vectors unrolled, the lanes vectorized.
void tile_register(Config& cfg, te::Stage& st, const Plan& p, const std::vector<IterVar>& sp_x,
                   const IterVar& sp_y, const std::vector<IterVar>& others) {
  std::vector<IterVar> red = st.op_reduce_axis();
  std::vector<IterVar> order;
  IterVar ki;
  if (!red.empty()) {
    std::vector<IterVar> k = cfg.split(p.prefix + "tile_k").apply(st, red.back());
    red.pop_back();
    order = red;
    order.push_back(k[0]);
    order.push_back(k[1]);
    ki = k[1];
  }
  order.insert(order.end(), others.begin(), others.end());
  if (sp_y.defined()) order.push_back(sp_y);
  order.insert(order.end(), sp_x.begin(), sp_x.end());
  st.reorder(order);
  if (ki.defined() && cfg.knob(p.prefix + "unroll_k")) st.unroll(ki);
  if (sp_y.defined()) st.unroll(sp_y);
  st.unroll(sp_x[0]);
  if (p.vec) st.vectorize(sp_x[1]);
}

class AutoScheduler {
 public:
  AutoScheduler(Config& cfg, te::Schedule& s, const std::vector<te::Tensor>& outs,
                const Target& target)
      : cfg_(cfg), s_(s), target_(target) {
    for (const te::Tensor& t : outs) {
      te::Operation op = t.op();
      if (out_set_.insert(op.get()).second) outs_.push_back(op);
    }
    order_ = te::post_dfs_order(outs_);
    has_bool_ = group_has_bool(order_);
  }

  void run() {
    inline_producers();
    find_readers();
    int anchor = 0;
    for (const te::Operation& op : order_)
      if (is_reduction(op)) schedule_anchor(op, anchor++);
    for (const te::Operation& op : order_) {
      const te::ComputeOpNode* c = as_compute(op);
      if (!c || is_reduction(op) || owners_.count(op.get())) continue;
      te::Stage st = s_[op];
      if (st->attach_type == te::AttachType::kInline) continue;
      if (!out_set_.count(op.get()) && !root_.count(op.get())) continue;
      schedule_injective_stage(s_, op.output(0), target_);
    }
  }

 private:
  /// Inlines injective non-output stages; a conditional one read by a reduction stays at root.
  void inline_producers() {
    OpSet read_by_reduction;
    for (const te::Operation& op : order_)
      if (is_reduction(op))
        for (const te::Tensor& t : op->input_tensors()) read_by_reduction.insert(t.op().get());
    for (const te::Operation& op : order_) {
      const te::ComputeOpNode* c = as_compute(op);
      if (!c || out_set_.count(op.get()) || is_reduction(op)) continue;
      if (is_injective_tag(op->tag) &&
          !(read_by_reduction.count(op.get()) && has_condition(c) && product(c->axis) > 0)) {
        s_[op].compute_inline();
      } else {
        root_.insert(op.get());
      }
    }
  }

  /// The stored (not inlined) stages that read each stage, through inlined stages.
  void find_readers() {
    for (const te::Operation& op : order_) {
      if (!as_compute(op) || s_[op]->attach_type == te::AttachType::kInline) continue;
      std::vector<te::Tensor> stack = op->input_tensors();
      std::set<const te::OperationNode*> seen;
      while (!stack.empty()) {
        te::Tensor t = stack.back();
        stack.pop_back();
        const te::Operation& p = t.op();
        if (!seen.insert(p.get()).second) continue;
        if (as_compute(p) && s_[p]->attach_type == te::AttachType::kInline) {
          for (const te::Tensor& u : p->input_tensors()) stack.push_back(u);
        } else {
          readers_[p.get()].insert(op.get());
        }
      }
    }
  }

  /// The output that is `r`'s only reader, of r's shape and not tiled yet; else undefined.
  te::Operation epilogue_of(const te::Operation& r) const {
    auto it = readers_.find(r.get());
    if (it == readers_.end() || it->second.size() != 1) return te::Operation();
    const te::OperationNode* e = *it->second.begin();
    if (!out_set_.count(e) || owners_.count(e)) return te::Operation();
    for (const te::Operation& op : outs_) {
      if (op.get() != e) continue;
      const te::ComputeOpNode* c = as_compute(op);
      if (!c || is_reduction(op) || op->num_outputs() != 1) return te::Operation();
      std::vector<Expr> a = op->output_shape(0), b = r->output_shape(0);
      if (a.size() != b.size()) return te::Operation();
      for (size_t d = 0; d < a.size(); ++d)
        if (as_const_int(a[d]) != as_const_int(b[d])) return te::Operation();
      return op;
    }
    return te::Operation();
  }

  void schedule_anchor(const te::Operation& r, int index) {
    const te::ComputeOpNode* c = as_compute(r);
    te::Stage rs = s_[r];
    const std::vector<IterVar>& axes = c->axis;
    const int64_t n_sp = product(axes), n_red = product(c->reduce_axis);
    // Nothing to tile: a scalar result or an empty tensor keeps its plain loop nest.
    if (axes.empty() || n_sp <= 0 || n_red <= 0) return;
    const bool big = n_sp * n_red > kParallelThreshold;
    if (r->num_outputs() > 1) {
      // A tuple reduction (argmax): te cannot lower a split of one whose index output is int64
      // (a known limitation), so its spatial loops are only fused and made parallel.
      IterVar f = rs.fuse(rs.op_axis());
      if (big && n_sp > 1) rs.parallel(f);
      owners_.insert(r.get());
      return;
    }
    Plan p;
    p.prefix = index == 0 ? "" : "r" + std::to_string(index) + "_";
    p.x = static_cast<int>(axes.size()) - 1;
    const int64_t X = extent_of(axes[p.x]);
    p.lanes = lanes_for(r->output_dtype(0), target_);
    p.vec = vectorizable(c, p.x, X, p.lanes, has_bool_);
    p.reuse = has_reuse(c);
    if (!p.reuse && !p.vec) {
      // No reuse and no vectors (a strided pooling window): a tile buys nothing, and measured
      // slower than the natural loop nest with its two outer loops fused and parallel.
      IterVar outer =
          axes.size() >= 2 ? rs.fuse(rs.op_axis()[0], rs.op_axis()[1]) : rs.op_axis()[0];
      if (big && n_sp > 1) rs.parallel(outer);
      owners_.insert(r.get());
      return;
    }
    p.y = p.reuse ? choose_row_axis(c, axes, p.x) : -1;
    const int64_t Y = p.y >= 0 ? extent_of(axes[p.y]) : 1;
    const int64_t K = extent_of(c->reduce_axis.back());
    auto [rows, cols] = define_tile(cfg_, p, X, Y, K, target_);

    // Where the tile is written from: an accumulator at the owner's outer tile, or in place.
    te::Stage owner, acc;
    if (out_set_.count(r.get())) {
      te::Tensor cache = s_.cache_write(r.output(0), "local");
      owner = s_[r];
      acc = s_[cache];
    } else if (te::Operation e = epilogue_of(r); e.defined()) {
      owner = s_[e];
      acc = rs;
      acc.set_scope("local");
    }
    if (owner.defined()) {
      owners_.insert(owner->origin_op.get());
      std::vector<IterVar> inner;
      Outer outer = tile_outer(owner, p, rows, cols, &inner);
      if (big && outer.par_extent > 1) owner.parallel(outer.par);
      if (p.vec) {
        auto [xt, xv] = owner.split(inner.back(), detail::ci(p.lanes));
        owner.vectorize(xv);
      }
      acc.compute_at(owner, outer.attach);
      std::vector<IterVar> aax = acc.op_axis();
      std::vector<IterVar> sp_x, others;
      if (p.vec) {
        auto [xt, xv] = acc.split(aax[p.x], detail::ci(p.lanes));
        sp_x = {xt, xv};
      } else {
        sp_x = {aax[p.x]};
      }
      for (int d = 0; d < static_cast<int>(aax.size()); ++d)
        if (d != p.x && d != p.y) others.push_back(aax[d]);
      tile_register(cfg_, acc, p, sp_x, p.y >= 0 ? aax[p.y] : IterVar(), others);
      return;
    }
    // In place: [outer (fused, parallel), reduction, y_i, x_t, x_v].
    owners_.insert(r.get());
    std::vector<IterVar> inner;
    Outer outer = tile_outer(rs, p, rows, cols, &inner);
    if (big && outer.par_extent > 1) rs.parallel(outer.par);
    std::vector<IterVar> sp_x;
    if (p.vec) {
      auto [xt, xv] = rs.split(inner.back(), detail::ci(p.lanes));
      sp_x = {xt, xv};
    } else {
      sp_x = {inner.back()};
    }
    tile_register(cfg_, rs, p, sp_x, p.y >= 0 ? inner.front() : IterVar(), {});
  }

  Config& cfg_;
  te::Schedule& s_;
  const Target& target_;
  std::vector<te::Operation> outs_, order_;
  OpSet out_set_, root_, owners_;
  std::map<const te::OperationNode*, OpSet> readers_;
  bool has_bool_ = false;
};

}  // namespace

void auto_schedule(Config& cfg, te::Schedule& s, const std::vector<te::Tensor>& outs,
                   const Target& target) {
  KILN_USER_CHECK(!outs.empty()) << "auto_schedule: no output tensors";
  AutoScheduler(cfg, s, outs, target).run();
}

te::Schedule auto_schedule(const std::vector<te::Tensor>& outs, const Target& target, Config& cfg) {
  KILN_USER_CHECK(!outs.empty()) << "auto_schedule: no output tensors";
  te::Schedule s = te::create_schedule(outs);
  auto_schedule(cfg, s, outs, target);
  return s;
}

te::Schedule auto_schedule(const std::vector<te::Tensor>& outs, const Target& target) {
  Config cfg = Config::fallback();
  return auto_schedule(outs, target, cfg);
}

}  // namespace kiln::topi
