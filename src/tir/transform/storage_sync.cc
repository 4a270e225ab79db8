// storage_sync: barriers between conflicting shared-memory accesses of a GPU kernel (see
// transform.h).
#include <unordered_set>

#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/tir/transform.h"

namespace kiln::tir {
namespace {

using VarSet = std::unordered_set<const Variable*>;

/// The shared buffers read and written since the last barrier.
struct State {
  VarSet reads, writes;
  bool empty() const { return reads.empty() && writes.empty(); }
};

bool is_barrier(const Stmt& s) {
  const Evaluate* e = s.as<Evaluate>();
  const Call* c = e ? e->value.as<Call>() : nullptr;
  return c && c->name == builtin::kSyncThreads;
}

Stmt barrier() {
  return Evaluate::make(
      Call::make(DataType::Int(32), builtin::kSyncThreads, {}, CallKind::kIntrinsic));
}

class Syncer {
 public:
  Stmt run(const Stmt& body) { return process(body); }
  bool any_shared() const { return !shared_.empty(); }

 private:
  /// The shared buffers `s` reads and writes, wherever in it.
  void accesses(const Stmt& s, VarSet* r, VarSet* w) const {
    post_order_visit(s, [&](const IRNode* n) {
      if (n->kind == NodeKind::Load) {
        const Variable* v = static_cast<const Load*>(n)->buffer_var.get();
        if (shared_.count(v)) r->insert(v);
      } else if (n->kind == NodeKind::Store) {
        const Variable* v = static_cast<const Store*>(n)->buffer_var.get();
        if (shared_.count(v)) w->insert(v);
      }
    });
  }

  static bool conflicts(const State& st, const VarSet& r, const VarSet& w) {
    for (const Variable* v : r)
      if (st.writes.count(v)) return true;
    for (const Variable* v : w)
      if (st.reads.count(v) || st.writes.count(v)) return true;
    return false;
  }

  /// A statement taken whole.
  Stmt leaf(const Stmt& s) {
    VarSet r, w;
    accesses(s, &r, &w);
    if (r.empty() && w.empty()) return s;
    Stmt out = s;
    if (conflicts(st_, r, w)) {
      st_ = State{};
      out = SeqStmt::make({barrier(), s});
    }
    st_.reads.insert(r.begin(), r.end());
    st_.writes.insert(w.begin(), w.end());
    return out;
  }

  /// The accesses of `s` before its first barrier, in order; true when it has a barrier.
  bool first_accesses(const Stmt& s, State* first) const {
    if (is_barrier(s)) return true;
    if (const SeqStmt* q = s.as<SeqStmt>()) {
      for (const Stmt& c : q->seq)
        if (first_accesses(c, first)) return true;
      return false;
    }
    if (const For* f = s.as<For>()) return first_accesses(f->body, first);
    if (const AttrStmt* a = s.as<AttrStmt>()) return first_accesses(a->body, first);
    if (const LetStmt* l = s.as<LetStmt>()) return first_accesses(l->body, first);
    if (const Allocate* a = s.as<Allocate>()) return first_accesses(a->body, first);
    accesses(s, &first->reads, &first->writes);
    return false;
  }

  Stmt process(const Stmt& s) {
    if (const SeqStmt* q = s.as<SeqStmt>()) {
      std::vector<Stmt> seq;
      for (const Stmt& c : q->seq) seq.push_back(process(c));
      return SeqStmt::make(seq);
    }
    if (const Allocate* a = s.as<Allocate>()) {
      if (a->scope == "shared") shared_.insert(a->buffer_var.get());
      return Allocate::make(a->buffer_var, a->dtype, a->extents, a->condition, process(a->body),
                            a->scope);
    }
    if (const AttrStmt* a = s.as<AttrStmt>())
      return AttrStmt::make(a->node, a->key, a->value, process(a->body));
    if (const LetStmt* l = s.as<LetStmt>())
      return LetStmt::make(l->var, l->value, process(l->body));
    if (const For* f = s.as<For>()) {
      if (f->for_kind == ForKind::kThreadBinding) {
        return For::make(f->loop_var, f->min, f->extent, f->for_kind, process(f->body),
                         f->thread_tag);
      }
      if (f->for_kind == ForKind::kSerial || f->for_kind == ForKind::kUnrolled) {
        // A conflict with what came before the loop: one barrier before it, not one per
        // iteration inside.
        State entry;
        bool before = false;
        first_accesses(f->body, &entry);
        if (conflicts(st_, entry.reads, entry.writes)) {
          st_ = State{};
          before = true;
        }
        Stmt body = process(f->body);
        // The next iteration's first accesses against this one's since its last barrier.
        State first;
        first_accesses(body, &first);
        if (conflicts(st_, first.reads, first.writes)) {
          body = SeqStmt::make({body, barrier()});
          st_ = State{};
        }
        Stmt loop = For::make(f->loop_var, f->min, f->extent, f->for_kind, body, f->thread_tag);
        return before ? SeqStmt::make({barrier(), loop}) : loop;
      }
    }
    return leaf(s);
  }

  VarSet shared_;
  State st_;
};

}  // namespace

PrimFunc storage_sync(PrimFunc f) {
  KILN_USER_CHECK(f.defined()) << "storage_sync: undefined function";
  Syncer s;
  Stmt body = s.run(f->body);
  if (!s.any_shared()) return f;
  return f.with_body(body);
}

}  // namespace kiln::tir
