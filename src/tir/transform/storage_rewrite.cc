// storage_rewrite: lifetime-based reuse of constant-size allocations. A region is a maximal
// chain of nested Allocate and SeqStmt nodes; every other statement in it (a loop, an if, an
// attribute, a store, …) is a leaf, numbered in program order. An allocation's lifetime is the
// interval [first leaf touching its buffer var, last leaf touching it]. Allocations of constant
// size with a constant-true condition are handed out greedily, in order of first use, to slots
// of one dtype and scope whose last use is strictly before their first use; a slot is as large
// as its greatest member and is allocated at the top of the region (hoisting is valid because
// the size is constant and leaves are never crossed). Allocations never touched are dropped.
// Leaves are rewritten recursively, so regions inside loops get the same treatment. When no
// slot is shared and nothing is dropped, the region is left as it was.
//
// Before that, an allocation whose size still depends on enclosing loop variables (the tail
// tile of a non-divisible split, after loop partitioning made the main tiles constant) gets
// the constant upper bound of its size over the loops' ranges, so it need not be allocated on
// the heap per iteration; its indexing is unchanged and stays within the bound.
#include <algorithm>

#include "kiln/arith/analyzer.h"
#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/tir/transform.h"
#include "loop_utils.h"

namespace kiln::tir {
namespace {

struct AllocInfo {
  const Allocate* op = nullptr;
  int64_t first = -1, last = -1;
  bool pinned = false;  ///< used by a non-reusable allocation's extents: never shared
  int slot = -1;
};

struct Slot {
  Var var;
  DataType dtype;
  std::string scope;
  int64_t size = 0;
  int64_t last = -1;
  int members = 0;
};

/// Replaces loop-dependent allocation sizes by their constant upper bound (see the top).
class BoundAllocations : public IRMutator {
 protected:
  using IRMutator::visit;
  Stmt visit(const For* op) override {
    ana_.bind(op->loop_var, Range(op->min, op->extent));
    return IRMutator::visit(op);
  }
  Stmt visit(const Allocate* op) override {
    Stmt s = IRMutator::visit(op);
    const Allocate* a = s.as<Allocate>();
    if (a->constant_size() >= 0 || a->extents.empty()) return s;
    Expr size = a->extents[0];
    for (size_t i = 1; i < a->extents.size(); ++i) size = size * a->extents[i];
    arith::ConstIntBound b = ana_.const_int_bound(size);
    if (b.max_value == arith::ConstIntBound::kPosInf || b.max_value < 0 ||
        b.max_value >= (int64_t{1} << 31))
      return s;
    return Allocate::make(a->buffer_var, a->dtype, {make_const(size.dtype(), b.max_value)},
                          a->condition, a->body, a->scope);
  }

 private:
  arith::Analyzer ana_;
};

bool reusable(const Allocate* a) { return a->constant_size() > 0 && is_one(a->condition); }

class StorageRewriter : public IRMutator {
 protected:
  using IRMutator::visit;

  Stmt visit(const Allocate* op) override { return rewrite_region(Stmt(op)); }
  Stmt visit(const SeqStmt* op) override {
    for (const Stmt& s : op->seq)
      if (s.as<Allocate>()) return rewrite_region(Stmt(op));
    return IRMutator::visit(op);
  }

 private:
  struct Region {
    std::vector<AllocInfo> allocs;
    std::unordered_map<const Variable*, size_t> index;
    int64_t leaves = 0;
  };

  void touch(Region& r, const Stmt& s, const Expr& e, bool pin) {
    auto on_node = [&](const IRNode* n) {
      if (n->kind != NodeKind::Variable) return;
      auto it = r.index.find(static_cast<const Variable*>(n));
      if (it == r.index.end()) return;
      AllocInfo& a = r.allocs[it->second];
      if (pin) a.pinned = true;
      if (a.first < 0) a.first = r.leaves;
      a.last = r.leaves;
    };
    if (s.defined()) post_order_visit(s, on_node);
    if (e.defined()) post_order_visit(e, on_node);
  }

  void linearize(Region& r, const Stmt& s) {
    if (const Allocate* a = s.as<Allocate>()) {
      if (reusable(a)) {
        r.index[a->buffer_var.get()] = r.allocs.size();
        r.allocs.push_back({a});
      } else {
        for (const Expr& e : a->extents) touch(r, Stmt(), e, true);
        touch(r, Stmt(), a->condition, true);
      }
      linearize(r, a->body);
    } else if (const SeqStmt* q = s.as<SeqStmt>()) {
      for (const Stmt& c : q->seq) linearize(r, c);
    } else {
      touch(r, s, Expr(), false);
      ++r.leaves;
    }
  }

  /// Rebuilds the region without its reusable allocations, leaves rewritten recursively.
  Stmt strip(const Stmt& s, const VarMap<Expr>& remap) {
    if (const Allocate* a = s.as<Allocate>()) {
      Stmt body = strip(a->body, remap);
      if (reusable(a)) return body;
      std::vector<Expr> ext;
      for (const Expr& e : a->extents) ext.push_back(substitute(e, remap));
      return Allocate::make(a->buffer_var, a->dtype, ext, substitute(a->condition, remap), body,
                            a->scope);
    }
    if (const SeqStmt* q = s.as<SeqStmt>()) {
      std::vector<Stmt> seq;
      for (const Stmt& c : q->seq) seq.push_back(strip(c, remap));
      return SeqStmt::make(std::move(seq));
    }
    return substitute(mutate(s), remap);
  }

  Stmt rewrite_region(const Stmt& root) {
    Region r;
    linearize(r, root);
    std::vector<size_t> order;
    bool dropped = false;
    for (size_t i = 0; i < r.allocs.size(); ++i) {
      if (r.allocs[i].first < 0) {
        dropped = true;
      } else {
        order.push_back(i);
      }
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return r.allocs[a].first < r.allocs[b].first; });
    std::vector<Slot> slots;
    VarMap<Expr> remap;
    bool shared = false;
    for (size_t i : order) {
      AllocInfo& a = r.allocs[i];
      int chosen = -1;
      if (!a.pinned) {
        for (size_t k = 0; k < slots.size(); ++k) {
          Slot& sl = slots[k];
          if (sl.dtype == a.op->dtype && sl.scope == a.op->scope && sl.last < a.first) {
            chosen = static_cast<int>(k);
            break;
          }
        }
      }
      if (chosen < 0) {
        slots.push_back({a.op->buffer_var, a.op->dtype, a.op->scope, 0, -1, 0});
        chosen = static_cast<int>(slots.size()) - 1;
        // A pinned allocation keeps its slot to itself.
        if (a.pinned) slots.back().last = INT64_MAX;
      } else {
        shared = true;
        remap[a.op->buffer_var] = slots[chosen].var;
      }
      Slot& sl = slots[chosen];
      sl.size = std::max(sl.size, a.op->constant_size());
      if (!a.pinned) sl.last = std::max(sl.last, a.last);
      ++sl.members;
      a.slot = chosen;
    }
    if (!shared && !dropped) {
      if (const Allocate* a = root.as<Allocate>()) {
        Stmt body = mutate(a->body);
        if (body.same_as(a->body)) return root;
        return Allocate::make(a->buffer_var, a->dtype, a->extents, a->condition, body, a->scope);
      }
      return IRMutator::visit(root.as<SeqStmt>());
    }
    Stmt body = strip(root, remap);
    for (size_t k = slots.size(); k-- > 0;) {
      const Slot& sl = slots[k];
      body = Allocate::make(sl.var, sl.dtype, {make_const(DataType::Int(32), sl.size)},
                            const_true(), body, sl.scope);
    }
    return body;
  }
};

}  // namespace

PrimFunc storage_rewrite(PrimFunc f) {
  Stmt body = StorageRewriter().mutate(BoundAllocations().mutate(f->body));
  return body.same_as(f->body) ? f : f.with_body(body);
}

}  // namespace kiln::tir
