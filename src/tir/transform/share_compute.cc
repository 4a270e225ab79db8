// share_compute_bodies: kernels whose compute bodies differ only in integer constants share one
// body (packed_api.h). A model's kernels often repeat one loop nest with other sizes (DenseNet's
// 1x1 convolutions and batch-norm + ReLU kernels over a growing channel count); each distinct
// kernel costs LLVM tens of milliseconds, so compile time grows with the number of distinct
// bodies, not with the number of kernels.
//
// Constants are numbered in one fixed traversal order ("slots"). A slot is an int32/int64
// immediate that is a direct operand of + - * min max or a comparison, or the min or extent of
// a serial or parallel loop, and is not under a place that needs an immediate: a divisor or
// modulus (shifts and masks), a ramp's stride (contiguous vector accesses), an allocation's
// extent, an attribute's value, the arguments of a call other than if_then_else, the bounds of
// unrolled or vectorized loops. Two bodies are one family when they are structurally equal with
// every slot's value erased; the slots whose values differ across the family become variables,
// one per distinct column of values, bound by LetStmts outside the compute scope, so that the
// code generator passes them to the shared body as arguments.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "kiln/ir/functor.h"
#include "kiln/ir/structural.h"
#include "kiln/tir/packed_api.h"

namespace kiln::tir {

namespace {

/// Visits a compute body in a fixed order and either erases every slot's value (recording it)
/// or replaces the slots that have a variable by that variable.
class Slots : public IRMutator {
 public:
  /// Erase mode: slot values are recorded in `values`, and replaced by 0.
  Slots() = default;
  /// Lift mode: slot k becomes `vars[k]` where that is defined.
  explicit Slots(const std::vector<Var>* vars) : vars_(vars) {}

  std::vector<int64_t> values;
  std::vector<DataType> types;

 protected:
  using IRMutator::visit;

  Expr slot_or_mutate(const Expr& e) {
    const IntImm* imm = e.as<IntImm>();
    if (!imm || fixed_ > 0 || !(imm->dtype == DataType::Int(32) || imm->dtype == DataType::Int(64)))
      return mutate(e);
    size_t k = next_++;
    if (!vars_) {
      values.push_back(imm->value);
      types.push_back(imm->dtype);
      return IntImm::make(imm->dtype, 0);
    }
    return k < vars_->size() && (*vars_)[k].defined() ? Expr((*vars_)[k]) : e;
  }
  Expr fixed(const Expr& e) {
    ++fixed_;
    Expr r = mutate(e);
    --fixed_;
    return r;
  }

  template <typename T>
  Expr lift_operands(const T* op) {
    Expr a = slot_or_mutate(op->a), b = slot_or_mutate(op->b);
    if (a.same_as(op->a) && b.same_as(op->b)) return Expr(op);
    return T::make(a, b);
  }
  template <typename T>
  Expr fixed_divisor(const T* op) {
    Expr a = mutate(op->a), b = fixed(op->b);
    if (a.same_as(op->a) && b.same_as(op->b)) return Expr(op);
    return T::make(a, b);
  }

  Expr visit(const Add* op) override { return lift_operands(op); }
  Expr visit(const Sub* op) override { return lift_operands(op); }
  Expr visit(const Mul* op) override { return lift_operands(op); }
  Expr visit(const Min* op) override { return lift_operands(op); }
  Expr visit(const Max* op) override { return lift_operands(op); }
  Expr visit(const EQ* op) override { return lift_operands(op); }
  Expr visit(const NE* op) override { return lift_operands(op); }
  Expr visit(const LT* op) override { return lift_operands(op); }
  Expr visit(const LE* op) override { return lift_operands(op); }
  Expr visit(const GT* op) override { return lift_operands(op); }
  Expr visit(const GE* op) override { return lift_operands(op); }
  Expr visit(const Div* op) override { return fixed_divisor(op); }
  Expr visit(const Mod* op) override { return fixed_divisor(op); }
  Expr visit(const FloorDiv* op) override { return fixed_divisor(op); }
  Expr visit(const FloorMod* op) override { return fixed_divisor(op); }

  Expr visit(const Ramp* op) override {
    Expr b = mutate(op->base), s = fixed(op->stride);
    if (b.same_as(op->base) && s.same_as(op->stride)) return Expr(op);
    return Ramp::make(b, s, op->lanes);
  }
  Expr visit(const Call* op) override {
    if (op->name == "if_then_else") return IRMutator::visit(op);
    ++fixed_;
    Expr r = IRMutator::visit(op);
    --fixed_;
    return r;
  }

  Stmt visit(const For* op) override {
    const bool liftable = op->for_kind == ForKind::kSerial || op->for_kind == ForKind::kParallel;
    Expr mn = liftable ? slot_or_mutate(op->min) : fixed(op->min);
    Expr ex = liftable ? slot_or_mutate(op->extent) : fixed(op->extent);
    Stmt b = mutate(op->body);
    if (mn.same_as(op->min) && ex.same_as(op->extent) && b.same_as(op->body)) return Stmt(op);
    return For::make(op->loop_var, mn, ex, op->for_kind, b, op->thread_tag);
  }
  Stmt visit(const Allocate* op) override {
    ++fixed_;
    std::vector<Expr> ext;
    bool changed = mutate_all(op->extents, &ext);
    --fixed_;
    Expr c = mutate(op->condition);
    Stmt b = mutate(op->body);
    if (!changed && c.same_as(op->condition) && b.same_as(op->body)) return Stmt(op);
    return Allocate::make(op->buffer_var, op->dtype, std::move(ext), c, b, op->scope);
  }
  Stmt visit(const AttrStmt* op) override {
    Expr v = fixed(op->value);
    Stmt b = mutate(op->body);
    if (v.same_as(op->value) && b.same_as(op->body)) return Stmt(op);
    return AttrStmt::make(op->node, op->key, v, b);
  }

 private:
  const std::vector<Var>* vars_ = nullptr;
  size_t next_ = 0;
  int fixed_ = 0;
};

/// The compute scope at the end of a packed function's prologue chain (LetStmts, SeqStmts whose
/// last statement continues the chain), or null.
const AttrStmt* find_scope(const Stmt& s) {
  if (const AttrStmt* a = s.as<AttrStmt>()) {
    return a->key == attr::kComputeScope ? a : nullptr;
  }
  if (const LetStmt* l = s.as<LetStmt>()) return find_scope(l->body);
  if (const SeqStmt* q = s.as<SeqStmt>())
    return q->seq.empty() ? nullptr : find_scope(q->seq.back());
  return nullptr;
}

/// `s` with its compute scope replaced by `scope`.
Stmt replace_scope(const Stmt& s, const Stmt& scope) {
  if (const AttrStmt* a = s.as<AttrStmt>(); a && a->key == attr::kComputeScope) return scope;
  if (const LetStmt* l = s.as<LetStmt>()) {
    return LetStmt::make(l->var, l->value, replace_scope(l->body, scope));
  }
  const SeqStmt* q = s.as<SeqStmt>();
  KILN_ICHECK(q) << "share_compute_bodies: the compute scope moved";
  std::vector<Stmt> seq = q->seq;
  seq.back() = replace_scope(seq.back(), scope);
  return SeqStmt::make(std::move(seq));
}

struct Member {
  size_t index;  ///< in the function list
  const AttrStmt* scope;
  Stmt erased;  ///< the body with every slot's value erased
  std::vector<int64_t> values;
  std::vector<DataType> types;
};

}  // namespace

std::vector<PrimFunc> share_compute_bodies(const std::vector<PrimFunc>& funcs) {
  // Families: same erased body (hash, then structural equality with free variables mapped).
  std::unordered_map<size_t, std::vector<std::vector<Member>>> by_hash;
  std::vector<size_t> order;  // hashes in first-seen order, for a deterministic result
  for (size_t i = 0; i < funcs.size(); ++i) {
    const AttrStmt* scope = find_scope(funcs[i]->body);
    if (!scope || funcs[i].attr("packed_api") != "1") continue;
    Slots erase;
    Member m{i, scope, erase.mutate(scope->body), std::move(erase.values), std::move(erase.types)};
    size_t h = structural_hash(m.erased);
    auto [it, fresh] = by_hash.try_emplace(h);
    if (fresh) order.push_back(h);
    bool placed = false;
    for (std::vector<Member>& family : it->second) {
      const Member& first = family.front();
      if (first.types == m.types && structural_equal(first.erased, m.erased, true)) {
        family.push_back(std::move(m));
        placed = true;
        break;
      }
    }
    if (!placed) it->second.push_back({std::move(m)});
  }

  std::vector<PrimFunc> out = funcs;
  for (size_t h : order) {
    for (const std::vector<Member>& family : by_hash.at(h)) {
      if (family.size() < 2) continue;
      const Member& first = family.front();
      // One variable per distinct column of differing values.
      std::vector<Var> vars(first.values.size());
      std::map<std::pair<int, std::vector<int64_t>>, Var> columns;
      for (size_t k = 0; k < first.values.size(); ++k) {
        std::vector<int64_t> column;
        for (const Member& m : family) column.push_back(m.values[k]);
        if (std::all_of(column.begin(), column.end(),
                        [&](int64_t v) { return v == column.front(); })) {
          continue;
        }
        auto key = std::make_pair(first.types[k].bits(), column);
        auto it = columns.find(key);
        if (it == columns.end()) {
          Var v("c" + std::to_string(columns.size()), first.types[k]);
          it = columns.emplace(key, v).first;
        }
        vars[k] = it->second;
      }
      const StringImm* name = first.scope->value.as<StringImm>();
      KILN_ICHECK(name) << "share_compute_bodies: a compute scope has no name";
      // The variables in order of creation, with each member's value.
      std::vector<std::pair<Var, size_t>> bound;  // var, its first slot
      for (size_t k = 0; k < vars.size(); ++k) {
        if (!vars[k].defined()) continue;
        bool seen = false;
        for (const auto& [v, slot] : bound) seen |= v.same_as(vars[k]);
        if (!seen) bound.emplace_back(vars[k], k);
      }
      for (size_t mi = 0; mi < family.size(); ++mi) {
        const Member& m = family[mi];
        Slots lift(&vars);
        Stmt body = AttrStmt::make(m.scope->node, m.scope->key, StringImm::make(name->value),
                                   lift.mutate(m.scope->body));
        for (auto it = bound.rbegin(); it != bound.rend(); ++it) {
          body =
              LetStmt::make(it->first, IntImm::make(it->first.dtype(), m.values[it->second]), body);
        }
        const PrimFunc& f = funcs[m.index];
        auto attrs = f->attrs;
        attrs["shared_compute"] = name->value;
        out[m.index] = PrimFunc::make(f->name, f->params, f->buffer_map,
                                      replace_scope(f->body, body), std::move(attrs));
      }
    }
  }
  return out;
}

}  // namespace kiln::tir
