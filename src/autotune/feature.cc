// Loop-program features (TVM paper 5.2). One walk over the flattened loop program keeps the stack
// of enclosing loops; at every Store it collects the statement's buffer accesses (the store and
// every Load in its value and indices), splits each flat index into an affine form
// sum(c_v * v) + rest (variables used under division, modulo or a non-constant product are
// marked non-affine), and counts the value's arithmetic operations (index arithmetic excluded).
// Whole-program totals accumulate over all stores; the heaviest store (most executions, the later
// one on ties) is described per loop level and buffer. See feature.h for the definitions.
#include "kiln/autotune/feature.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/support/error.h"
#include "kiln/tir/lower.h"
#include "kiln/tir/transform.h"

namespace kiln::autotune {

namespace {

using ir::Expr;
using ir::Variable;

/// An index as sum(coef[v] * v) + rest; variables in `nonaffine` appear in it non-affinely.
struct Affine {
  std::unordered_map<const Variable*, int64_t> coef;
  std::unordered_set<const Variable*> nonaffine;
};

void mark_nonaffine(const Expr& e, Affine& out) {
  ir::post_order_visit(e, [&](const ir::IRNode* n) {
    if (n->kind == ir::NodeKind::Variable) out.nonaffine.insert(static_cast<const Variable*>(n));
  });
}

void affine(const Expr& e, int64_t scale, Affine& out) {
  if (e.as<ir::IntImm>()) return;
  if (const auto* v = e.as<Variable>()) {
    out.coef[v] += scale;
  } else if (const auto* a = e.as<ir::Add>()) {
    affine(a->a, scale, out);
    affine(a->b, scale, out);
  } else if (const auto* s = e.as<ir::Sub>()) {
    affine(s->a, scale, out);
    affine(s->b, -scale, out);
  } else if (const auto* m = e.as<ir::Mul>()) {
    if (auto c = ir::as_const_int(m->b)) {
      affine(m->a, scale * *c, out);
    } else if (auto c2 = ir::as_const_int(m->a)) {
      affine(m->b, scale * *c2, out);
    } else {
      mark_nonaffine(e, out);
    }
  } else if (const auto* c = e.as<ir::Cast>()) {
    affine(c->value, scale, out);
  } else {
    mark_nonaffine(e, out);
  }
}

struct Access {
  const Variable* buffer;
  std::string name;
  int bytes;
  Affine index;
};

/// Arithmetic operations of a value, not counting index arithmetic inside loads.
class OpCounter : public ir::IRVisitor {
 public:
  double n = 0;

 protected:
  using ir::IRVisitor::visit;
  void visit(const ir::Load*) override {}
  // A select or if_then_else picks a value: its condition (the inline padding's bounds check,
  // integer arithmetic on loop variables) is not arithmetic of the computation. Counted, it made
  // a 3x3 depthwise convolution 7x its 2 flops per multiply-add (and its GFLOP/s above peak).
  void visit(const ir::Select* op) override {
    visit_expr(op->true_value);
    visit_expr(op->false_value);
  }
  void visit(const ir::Call* op) override {
    if (op->name == ir::builtin::kLikely) return;
    if (op->name == ir::builtin::kIfThenElse && op->args.size() == 3) {
      visit_expr(op->args[1]);
      visit_expr(op->args[2]);
      return;
    }
    n += 1;
    ir::IRVisitor::visit(op);
  }
#define KILN_COUNT(T)                    \
  void visit(const ir::T* op) override { \
    n += 1;                              \
    ir::IRVisitor::visit(op);            \
  }
  KILN_COUNT(Add)
  KILN_COUNT(Sub)
  KILN_COUNT(Mul)
  KILN_COUNT(Div)
  KILN_COUNT(Mod)
  KILN_COUNT(FloorDiv)
  KILN_COUNT(FloorMod)
  KILN_COUNT(Min)
  KILN_COUNT(Max)
#undef KILN_COUNT
};

/// Every Load of an expression (including loads inside other loads' indices).
class LoadCollector : public ir::IRVisitor {
 public:
  std::vector<Access>* out;

 protected:
  using ir::IRVisitor::visit;
  void visit(const ir::Load* op) override {
    Access a{op->buffer_var.get(), op->buffer_var.name(), op->dtype.bytes(), {}};
    affine(op->index, 1, a.index);
    out->push_back(std::move(a));
    ir::IRVisitor::visit(op);
  }
};

/// Distinct elements touched by loops [level, n) of `loops` (see feature.h).
double touch_count(const Affine& idx, const std::vector<LoopFeature>& loops,
                   const std::vector<const Variable*>& vars, size_t level) {
  double prod = 1, span = 0;
  bool exact = true;
  for (size_t i = level; i < loops.size(); ++i) {
    double e = static_cast<double>(loops[i].extent);
    if (idx.nonaffine.count(vars[i])) {
      prod *= e;
      exact = false;
      continue;
    }
    auto it = idx.coef.find(vars[i]);
    if (it == idx.coef.end() || it->second == 0) continue;
    prod *= e;
    span += std::fabs(static_cast<double>(it->second)) * (e - 1);
  }
  return exact ? std::min(prod, span + 1) : prod;
}

struct StoreInfo {
  std::vector<LoopFeature> loops;
  std::vector<const Variable*> vars;
  std::vector<Access> accesses;  ///< the store first
  double executions = 1;
};

class Analyzer : public ir::IRVisitor {
 public:
  LoopProgramFeatures result;
  StoreInfo heaviest;
  bool have_heaviest = false;
  /// Per buffer: the largest footprint (elements) and element size.
  std::map<const Variable*, std::pair<double, int>> footprint;

 protected:
  using ir::IRVisitor::visit;
  void visit(const ir::For* op) override {
    LoopFeature lf;
    lf.var = op->loop_var.name();
    lf.extent = std::max<int64_t>(1, ir::as_const_int(op->extent).value_or(1));
    lf.kind = op->for_kind;
    loops_.push_back(lf);
    vars_.push_back(op->loop_var.get());
    ir::IRVisitor::visit(op);
    loops_.pop_back();
    vars_.pop_back();
  }

  void visit(const ir::Store* op) override {
    StoreInfo s;
    s.loops = loops_;
    s.vars = vars_;
    for (const LoopFeature& l : loops_) s.executions *= static_cast<double>(l.extent);
    Access st{op->buffer_var.get(), op->buffer_var.name(), op->value.dtype().bytes(), {}};
    affine(op->index, 1, st.index);
    s.accesses.push_back(std::move(st));
    LoadCollector lc;
    lc.out = &s.accesses;
    lc.visit_expr(op->value);
    lc.visit_expr(op->index);
    OpCounter oc;
    oc.visit_expr(op->value);

    result.num_stores += 1;
    result.flops += oc.n * s.executions;
    for (const Access& a : s.accesses) {
      result.bytes_accessed += a.bytes * s.executions;
      double fp = touch_count(a.index, s.loops, s.vars, 0);
      auto& slot = footprint[a.buffer];
      slot.first = std::max(slot.first, fp);
      slot.second = a.bytes;
    }
    if (!have_heaviest || s.executions >= heaviest.executions) {
      heaviest = std::move(s);
      have_heaviest = true;
    }
  }

 private:
  std::vector<LoopFeature> loops_;
  std::vector<const Variable*> vars_;
};

float lg(double x) { return static_cast<float>(std::log2(1.0 + std::max(0.0, x))); }

}  // namespace

tir::PrimFunc lower_for_features(const Instance& inst) {
  tir::LowerOptions opt;
  opt.nests_only = true;
  tir::PrimFunc f = tir::lower(inst.sch, inst.args, "features", opt);
  tir::ExternBufferMap extern_buffers;
  for (size_t i = 0; i < inst.args.size(); ++i) {
    extern_buffers[inst.args[i].get()] = f->buffer_map.at(f->params[i]);
  }
  f = tir::storage_flatten(f, extern_buffers);
  return tir::simplify(f);
}

LoopProgramFeatures analyze_loop_program(const tir::PrimFunc& f) {
  KILN_USER_CHECK(f.defined()) << "analyze_loop_program: the function is undefined";
  Analyzer an;
  an.visit_stmt(f->body);
  LoopProgramFeatures r = std::move(an.result);
  for (const auto& [buf, fp] : an.footprint) r.footprint_bytes += fp.first * fp.second;
  r.arithmetic_intensity = r.footprint_bytes > 0 ? r.flops / r.footprint_bytes : 0;
  if (!an.have_heaviest) return r;

  const StoreInfo& s = an.heaviest;
  r.loops = s.loops;
  size_t n = r.loops.size();
  double inner = 1;
  for (size_t i = n; i-- > 0;) {
    inner *= static_cast<double>(r.loops[i].extent);
    r.loops[i].bottom_up = inner;
  }
  double outer = 1;
  for (size_t i = 0; i < n; ++i) {
    outer *= static_cast<double>(r.loops[i].extent);
    r.loops[i].top_down = outer;
  }
  // Buffers in slot order: the stored one, then loads by access count, then first appearance.
  std::vector<const Variable*> order;
  std::unordered_map<const Variable*, std::vector<const Access*>> by_buffer;
  for (const Access& a : s.accesses) {
    if (!by_buffer.count(a.buffer)) order.push_back(a.buffer);
    by_buffer[a.buffer].push_back(&a);
  }
  std::stable_sort(order.begin() + 1, order.end(), [&](const Variable* a, const Variable* b) {
    return by_buffer[a].size() > by_buffer[b].size();
  });
  for (const Variable* b : order) {
    const auto& acc = by_buffer[b];
    BufferFeature bf;
    bf.name = acc[0]->name;
    bf.elem_bytes = acc[0]->bytes;
    bf.accesses = static_cast<int>(acc.size());
    for (size_t l = 0; l < n; ++l) {
      const Affine& first = acc[0]->index;
      int64_t stride = 0;
      if (first.nonaffine.count(s.vars[l])) {
        stride = 1;
      } else if (auto it = first.coef.find(s.vars[l]); it != first.coef.end()) {
        stride = it->second < 0 ? -it->second : it->second;
      }
      double touch = 0;
      for (const Access* a : acc)
        touch = std::max(touch, touch_count(a->index, s.loops, s.vars, l));
      bf.stride.push_back(stride);
      bf.touch.push_back(touch);
      bf.reuse.push_back(bf.accesses * r.loops[l].bottom_up / std::max(1.0, touch));
    }
    r.buffers.push_back(std::move(bf));
  }
  return r;
}

std::vector<float> LoopProgramFeatures::to_vector() const {
  std::vector<float> v(kFeatureLength, 0.f);
  v[0] = lg(flops);
  v[1] = lg(bytes_accessed);
  v[2] = lg(footprint_bytes);
  v[3] = lg(arithmetic_intensity);
  v[4] = static_cast<float>(loops.size());
  v[5] = static_cast<float>(num_stores);
  size_t n = loops.size();
  for (size_t lvl = 0; lvl < n && lvl < static_cast<size_t>(kFeatureLoopLevels); ++lvl) {
    size_t i = n - 1 - lvl;  // innermost first
    const LoopFeature& l = loops[i];
    float* p = v.data() + kFeatureGlobal + lvl * kFeaturePerLevel;
    p[0] = lg(static_cast<double>(l.extent));
    p[1] = l.kind == ir::ForKind::kSerial ? 1.f : 0.f;
    p[2] = l.kind == ir::ForKind::kParallel ? 1.f : 0.f;
    p[3] = l.kind == ir::ForKind::kVectorized ? 1.f : 0.f;
    p[4] = l.kind == ir::ForKind::kUnrolled ? 1.f : 0.f;
    p[5] = lg(l.bottom_up);
    p[6] = lg(l.top_down);
    for (size_t b = 0; b < buffers.size() && b < static_cast<size_t>(kFeatureBuffers); ++b) {
      float* q = p + 7 + b * kFeaturePerBuffer;
      q[0] = lg(static_cast<double>(buffers[b].stride[i]));
      q[1] = lg(buffers[b].touch[i]);
      q[2] = lg(buffers[b].reuse[i]);
    }
  }
  return v;
}

std::vector<float> extract_features(const Instance& inst) {
  return analyze_loop_program(lower_for_features(inst)).to_vector();
}

double count_flops(const tir::PrimFunc& f) { return analyze_loop_program(f).flops; }

const std::vector<std::string>& feature_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v = {"g.flops",     "g.bytes",     "g.footprint",
                                  "g.intensity", "g.num_loops", "g.num_stores"};
    const char* lvl[] = {"extent",   "serial",    "parallel", "vectorized",
                         "unrolled", "bottom_up", "top_down"};
    const char* buf[] = {"stride", "touch", "reuse"};
    for (int l = 0; l < kFeatureLoopLevels; ++l) {
      std::string p = "l" + std::to_string(l) + ".";
      for (const char* s : lvl) v.push_back(p + s);
      for (int b = 0; b < kFeatureBuffers; ++b)
        for (const char* s : buf) v.push_back(p + "b" + std::to_string(b) + "." + s);
    }
    return v;
  }();
  return names;
}

}  // namespace kiln::autotune
