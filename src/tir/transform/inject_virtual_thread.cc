// inject_virtual_thread: vthread loops become interleaved copies of their innermost statements
// (see transform.h).
#include <unordered_map>
#include <unordered_set>

#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/ir/printer.h"
#include "kiln/support/error.h"
#include "kiln/tir/transform.h"

namespace kiln::tir {
namespace {

/// Up to this many virtual threads the copies are written out; more become a serial loop.
constexpr int64_t kMaxUnrolledCopies = 16;

bool is_vthread(const std::string& tag) { return tag.rfind("vthread", 0) == 0; }

/// The buffers and variables whose contents depend on the virtual thread: written (or bound)
/// from an expression that reads `vt` or something already touched, or under a loop or
/// condition that does. A fixpoint over the body.
std::unordered_set<const Variable*> touched_by(const Stmt& body, const Var& vt) {
  struct Collector : IRVisitor {
    std::unordered_set<const Variable*> touched;
    const Variable* vt = nullptr;
    int control = 0;  // enclosing loops / conditions that depend on vt
    bool changed = false;
    bool depends(const Expr& e) const {
      if (uses_var(e, [&](const Variable* v) { return v == vt || touched.count(v) > 0; }))
        return true;
      bool r = false;
      struct Loads : IRVisitor {
        const std::unordered_set<const Variable*>* touched;
        bool* r;
        using IRVisitor::visit;
        void visit(const Load* op) override {
          if (touched->count(op->buffer_var.get())) *r = true;
          IRVisitor::visit(op);
        }
      } l;
      l.touched = &touched;
      l.r = &r;
      l.visit_expr(e);
      return r;
    }
    void mark(const Variable* v) { changed |= touched.insert(v).second; }
    using IRVisitor::visit;
    void visit(const Store* op) override {
      if (control > 0 || depends(op->value) || depends(op->index)) mark(op->buffer_var.get());
      IRVisitor::visit(op);
    }
    void visit(const LetStmt* op) override {
      if (control > 0 || depends(op->value)) mark(op->var.get());
      IRVisitor::visit(op);
    }
    void visit(const For* op) override {
      const bool dep = depends(op->min) || depends(op->extent);
      control += dep;
      IRVisitor::visit(op);
      control -= dep;
    }
    void visit(const IfThenElse* op) override {
      const bool dep = depends(op->condition);
      control += dep;
      IRVisitor::visit(op);
      control -= dep;
    }
  } c;
  c.vt = vt.get();
  do {
    c.changed = false;
    c.visit_stmt(body);
  } while (c.changed);
  return c.touched;
}

/// Rewrites the body of one vthread loop.
class Injector {
 public:
  Injector(Var vt, int64_t n, std::unordered_set<const Variable*> touched)
      : vt_(std::move(vt)), n_(n), touched_(std::move(touched)) {}

  Stmt inject(const Stmt& s) {
    switch (s->kind) {
      case NodeKind::SeqStmt: {
        std::vector<Stmt> seq;
        for (const Stmt& x : s.as<SeqStmt>()->seq) seq.push_back(inject(x));
        return SeqStmt::make(seq);
      }
      case NodeKind::Allocate: {
        const auto* a = s.as<Allocate>();
        if (!touched_.count(a->buffer_var.get())) {
          return Allocate::make(a->buffer_var, a->dtype, a->extents, a->condition, inject(a->body),
                                a->scope);
        }
        // Each virtual thread its own copy, side by side: element i of copy v at v*size + i.
        const int64_t size = a->constant_size();
        KILN_USER_CHECK(size > 0) << "inject_virtual_thread: allocation '" << a->buffer_var.name()
                                  << "' inside a vthread loop needs a constant size";
        stride_[a->buffer_var.get()] = size;
        return Allocate::make(
            a->buffer_var, a->dtype,
            {make_const(a->extents.empty() ? DataType::Int(32) : a->extents[0].dtype(), size * n_)},
            a->condition, inject(a->body), a->scope);
      }
      case NodeKind::For: {
        const auto* f = s.as<For>();
        if (depends(f->extent)) return replicate(s);
        if (depends(f->min)) {
          // A loop over a region that moves with the virtual thread (a stage computed at a
          // thread loop): counted from 0, so that the virtual threads share it and their
          // statements interleave inside it.
          Var i(f->loop_var.name(), f->loop_var.dtype());
          Stmt body = substitute(f->body, VarMap<Expr>{{f->loop_var, f->min + i}});
          return For::make(i, make_const(i.dtype(), 0), f->extent, f->for_kind, inject(body),
                           f->thread_tag);
        }
        return For::make(f->loop_var, f->min, f->extent, f->for_kind, inject(f->body),
                         f->thread_tag);
      }
      case NodeKind::IfThenElse: {
        const auto* i = s.as<IfThenElse>();
        if (depends(i->condition)) return replicate(s);
        return IfThenElse::make(i->condition, inject(i->then_case),
                                i->else_case.defined() ? inject(i->else_case) : Stmt());
      }
      case NodeKind::LetStmt: {
        const auto* l = s.as<LetStmt>();
        if (depends(l->value)) return replicate(s);
        return LetStmt::make(l->var, l->value, inject(l->body));
      }
      case NodeKind::AttrStmt: {
        const auto* a = s.as<AttrStmt>();
        if (a->value.defined() && depends(a->value)) return replicate(s);
        return AttrStmt::make(a->node, a->key, a->value, inject(a->body));
      }
      default: {
        Stmt r = remap(s);
        return uses_var(r, [&](const Variable* v) { return v == vt_.get(); }) ? replicate(s) : s;
      }
    }
  }

 private:
  bool depends(const Expr& e) {
    return uses_var(remap(e), [&](const Variable* v) { return v == vt_.get(); });
  }

  /// Accesses to per-thread copies get their copy's offset.
  class Remapper : public IRMutator {
   public:
    Remapper(const Var& vt, const std::unordered_map<const Variable*, int64_t>& stride)
        : vt_(vt), stride_(stride) {}

   protected:
    using IRMutator::visit;
    Expr offset(const Var& buf, const Expr& index) {
      auto it = stride_.find(buf.get());
      if (it == stride_.end()) return index;
      return index + cast(index.dtype(), vt_) * make_const(index.dtype(), it->second);
    }
    Expr visit(const Load* op) override {
      Expr e = IRMutator::visit(op);
      const auto* l = e.as<Load>();
      if (!stride_.count(l->buffer_var.get())) return e;
      return Load::make(l->dtype, l->buffer_var, offset(l->buffer_var, l->index), l->predicate);
    }
    Stmt visit(const Store* op) override {
      Stmt s = IRMutator::visit(op);
      const auto* st = s.as<Store>();
      if (!stride_.count(st->buffer_var.get())) return s;
      return Store::make(st->buffer_var, st->value, offset(st->buffer_var, st->index),
                         st->predicate);
    }

   private:
    const Var& vt_;
    const std::unordered_map<const Variable*, int64_t>& stride_;
  };

  Expr remap(const Expr& e) { return stride_.empty() ? e : Remapper(vt_, stride_).mutate(e); }
  Stmt remap(const Stmt& s) { return stride_.empty() ? s : Remapper(vt_, stride_).mutate(s); }

  /// One copy of `s` per virtual thread, interleaved (or a serial loop over them).
  Stmt replicate(const Stmt& s) {
    Stmt r = remap(s);
    if (n_ > kMaxUnrolledCopies) {
      Var v(vt_.name() + ".s", vt_.dtype());
      return For::make(v, make_const(vt_.dtype(), 0), make_const(vt_.dtype(), n_), ForKind::kSerial,
                       substitute(r, VarMap<Expr>{{vt_, v}}));
    }
    std::vector<Stmt> copies;
    for (int64_t i = 0; i < n_; ++i)
      copies.push_back(substitute(r, VarMap<Expr>{{vt_, make_const(vt_.dtype(), i)}}));
    return SeqStmt::make(copies);
  }

  Var vt_;
  int64_t n_;
  std::unordered_set<const Variable*> touched_;
  std::unordered_map<const Variable*, int64_t> stride_;
};

class VThreadLowerer : public IRMutator {
 public:
  explicit VThreadLowerer(std::string fname) : fname_(std::move(fname)) {}

 protected:
  using IRMutator::visit;
  Stmt visit(const AttrStmt* op) override {
    const auto* iv = op->node.as<IterVarNode>();
    if (op->key == attr::kThreadExtent && iv && is_vthread(iv->thread_tag)) {
      return mutate(op->body);  // the For below is the vthread loop
    }
    return IRMutator::visit(op);
  }
  Stmt visit(const For* op) override {
    if (op->for_kind != ForKind::kThreadBinding || !is_vthread(op->thread_tag))
      return IRMutator::visit(op);
    Stmt body = mutate(op->body);  // inner vthread loops first
    auto n = as_const_int(op->extent);
    KILN_USER_CHECK(n && *n > 0) << "inject_virtual_thread " << fname_ << ": the vthread loop '"
                                 << op->loop_var.name()
                                 << "' needs a constant positive extent, got " << op->extent;
    // The loop variable runs from min: the copies see min + v.
    Var v(op->loop_var.name(), op->loop_var.dtype());
    body = substitute(body, VarMap<Expr>{{op->loop_var, op->min + v}});
    return Injector(v, *n, touched_by(body, v)).inject(body);
  }

 private:
  std::string fname_;
};

}  // namespace

PrimFunc inject_virtual_thread(PrimFunc f) {
  KILN_USER_CHECK(f.defined()) << "inject_virtual_thread: undefined function";
  Stmt body = VThreadLowerer(f->name).mutate(f->body);
  return body.same_as(f->body) ? f : f.with_body(body);
}

}  // namespace kiln::tir
