// Structural equality and hashing by one generic walker over the nodes' `for_each_field`. The
// walker visits a pair of trees in lock step (for hashing, a tree paired with itself): it
// dispatches on the node kind with the node_kinds.def X-macro, binds the variables a node
// defines (Let/LetStmt var, For loop_var, Allocate buffer_var, Reduce axes, CommReducer
// arguments) before its fields, then zips the two nodes' fields, which have identical types in
// identical order because the nodes have the same kind. Variables are compared through a
// bijection: a binding site (re)maps the left variable to the right one; a use must agree with
// the current mapping; an unmapped (free) variable pair must be the same object unless free
// variables may be mapped. Hashing numbers variables in order of first occurrence (a binding
// site gives a fresh number), so equal trees under `map_free_vars` hash equal and the hash does
// not depend on addresses.
#include "kiln/ir/structural.h"

#include <array>
#include <cstring>
#include <type_traits>
#include <unordered_map>

namespace kiln::ir {

namespace {

class Walker {
 public:
  Walker(bool hashing, bool map_free_vars) : hashing_(hashing), map_free_(map_free_vars) {}

  bool ok() const { return ok_; }
  size_t hash() const { return hash_; }

  // -------------------------------------------------------------------------------------------
  // Fields. In hashing mode `b` is `a` and only `a` is read.

  void field(const Expr& a, const Expr& b) {
    if (!ok_) return;
    if (hashing_) {
      if (!a.defined()) return mix(0x9e11);
      return node(a.get(), a.get());
    }
    if (a.defined() != b.defined()) return fail();
    if (a.defined()) node(a.get(), b.get());
  }
  void field(const Stmt& a, const Stmt& b) {
    if (!ok_) return;
    if (hashing_) {
      if (!a.defined()) return mix(0x9e12);
      return node(a.get(), a.get());
    }
    if (a.defined() != b.defined()) return fail();
    if (a.defined()) node(a.get(), b.get());
  }
  /// A Var-typed field is a use; its binding site, if any, was handled by `bind`.
  void field(const Var& a, const Var& b) { field(static_cast<const Expr&>(a), b); }
  void field(const DataType& a, const DataType& b) {
    if (hashing_) {
      mix(a.code());
      mix(a.bits());
      return mix(a.lanes());
    }
    if (a != b) fail();
  }
  void field(const std::string& a, const std::string& b) {
    if (hashing_) return mix(std::hash<std::string>()(a));
    if (a != b) fail();
  }
  void field(double a, double b) {
    // Bitwise, so that NaN equals itself and trees are equal to themselves.
    uint64_t x, y;
    std::memcpy(&x, &a, sizeof x);
    std::memcpy(&y, &b, sizeof y);
    if (hashing_) return mix(x);
    if (x != y) fail();
  }
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T> || std::is_enum_v<T>>>
  void field(T a, T b) {
    if (hashing_) return mix(static_cast<uint64_t>(a));
    if (a != b) fail();
  }
  template <typename T>
  void field(const std::vector<T>& a, const std::vector<T>& b) {
    if (hashing_) {
      mix(a.size());
      for (const T& x : a) field(x, x);
      return;
    }
    if (a.size() != b.size()) return fail();
    for (size_t i = 0; i < a.size() && ok_; ++i) field(a[i], b[i]);
  }
  void field(const Range& a, const Range& b) {
    if (hashing_) {
      if (!a.defined()) return mix(0x9e13);
      field(a->min, a->min);
      return field(a->extent, a->extent);
    }
    if (a.defined() != b.defined()) return fail();
    if (!a.defined()) return;
    field(a->min, b->min);
    field(a->extent, b->extent);
  }
  void field(const IterVar& a, const IterVar& b) {
    if (hashing_) {
      field(a->iter_type, a->iter_type);
      field(a->thread_tag, a->thread_tag);
      field(a->dom, a->dom);
      return field(a->var, a->var);
    }
    field(a->iter_type, b->iter_type);
    field(a->thread_tag, b->thread_tag);
    field(a->dom, b->dom);
    field(a->var, b->var);
  }
  void field(const CommReducer& a, const CommReducer& b) {
    if (hashing_) {
      if (!a.defined()) return mix(0x9e14);
      mix(a->lhs.size());
      field(a->identity, a->identity);
      for (size_t i = 0; i < a->lhs.size(); ++i) {
        bind(a->lhs[i], a->lhs[i]);
        bind(a->rhs[i], a->rhs[i]);
      }
      return field(a->result, a->result);
    }
    if (a.defined() != b.defined()) return fail();
    if (!a.defined()) return;
    if (a->lhs.size() != b->lhs.size() || a->rhs.size() != b->rhs.size()) return fail();
    field(a->identity, b->identity);
    for (size_t i = 0; i < a->lhs.size(); ++i) {
      bind(a->lhs[i], b->lhs[i]);
      bind(a->rhs[i], b->rhs[i]);
    }
    field(a->result, b->result);
  }
  /// Producers are compared by identity; their name hashes (deterministic, and equal producers
  /// have equal names).
  void field(const Producer& a, const Producer& b) {
    if (hashing_) return a.defined() ? mix(std::hash<std::string>()(a->producer_name())) : mix(0);
    if (!a.same_as(b)) fail();
  }
  /// An AttrStmt node: IterVars and Variables compare as variables, anything else by identity.
  void field(const Ref<Object>& a, const Ref<Object>& b) {
    const IterVarNode* ia = a.as<IterVarNode>();
    const Variable* va = a.as<Variable>();
    if (hashing_) {
      if (ia) return field(ia->var, ia->var);
      if (va) return field(Expr(va), Expr(va));
      if (const auto* p = a.as<ProducerNode>()) return field(Producer(p), Producer(p));
      if (const auto* buf = a.as<BufferNode>()) return field(buf->name, buf->name);
      return mix(a.defined() ? 0x9e15 : 0x9e16);
    }
    const IterVarNode* ib = b.as<IterVarNode>();
    const Variable* vb = b.as<Variable>();
    if (ia && ib) return field(ia->var, ib->var);
    if (va && vb) return field(Expr(va), Expr(vb));
    if (!a.same_as(b)) fail();
  }

  // -------------------------------------------------------------------------------------------
  // Nodes

  void node(const IRNode* a, const IRNode* b) {
    if (!ok_) return;
    if (!hashing_ && a->kind != b->kind) return fail();
    if (hashing_) mix(static_cast<uint64_t>(a->kind) + 0x51);
    switch (a->kind) {
#define KILN_EXPR_NODE(T)                                                    \
  case NodeKind::T:                                                          \
    field(static_cast<const T*>(a)->dtype, static_cast<const T*>(b)->dtype); \
    visit(static_cast<const T*>(a), static_cast<const T*>(b));               \
    break;
#define KILN_STMT_NODE(T)                                      \
  case NodeKind::T:                                            \
    visit(static_cast<const T*>(a), static_cast<const T*>(b)); \
    break;
#include "kiln/ir/node_kinds.def"
    }
  }

 private:
  template <typename T>
  void visit(const T* a, const T* b) {
    if constexpr (std::is_same_v<T, Variable>) {
      return var(a, b);
    } else {
      bind_defs(a, b);
      // Zip the fields: same kind, so the i-th field has the same type on both sides.
      std::array<const void*, 16> fa{};
      size_t n = 0;
      a->for_each_field([&](const char*, const auto& v) { fa[n++] = &v; });
      size_t i = 0;
      b->for_each_field([&](const char*, const auto& v) {
        using V = std::decay_t<decltype(v)>;
        const V& x = *static_cast<const V*>(fa[i++]);
        if (ok_) field(x, v);
      });
    }
  }

  // Variables a node defines, bound before its fields are compared.
  template <typename T>
  void bind_defs(const T*, const T*) {}
  void bind_defs(const Let* a, const Let* b) { bind(a->var, b->var); }
  void bind_defs(const LetStmt* a, const LetStmt* b) { bind(a->var, b->var); }
  void bind_defs(const For* a, const For* b) { bind(a->loop_var, b->loop_var); }
  void bind_defs(const Allocate* a, const Allocate* b) { bind(a->buffer_var, b->buffer_var); }
  void bind_defs(const Reduce* a, const Reduce* b) {
    if (!hashing_ && a->axis.size() != b->axis.size()) return fail();
    for (size_t i = 0; i < a->axis.size(); ++i) bind(a->axis[i]->var, b->axis[i]->var);
  }

  void bind(const Var& a, const Var& b) {
    if (!ok_) return;
    if (hashing_) {
      index_[a.get()] = next_index_++;
      return;
    }
    if (a.defined() != b.defined()) return fail();
    if (!a.defined()) return;
    if (a.dtype() != b.dtype()) return fail();
    map_[a.get()] = b.get();
    rmap_[b.get()] = a.get();
  }

  void var(const Variable* a, const Variable* b) {
    if (hashing_) {
      auto it = index_.find(a);
      if (it == index_.end()) it = index_.emplace(a, next_index_++).first;
      return mix(0x7a00 + it->second);
    }
    auto ia = map_.find(a);
    auto ib = rmap_.find(b);
    if (ia != map_.end() || ib != rmap_.end()) {
      if (ia == map_.end() || ib == rmap_.end() || ia->second != b || ib->second != a) fail();
      return;
    }
    if (!map_free_) {
      // A free variable must be the same object on both sides; the pair need not be remembered
      // (any later use of either variable is checked by the same rule or by a binding's entry).
      if (a != b) fail();
      return;
    }
    map_[a] = b;
    rmap_[b] = a;
  }

  void fail() { ok_ = false; }
  void mix(uint64_t v) {
    // splitmix64 finalizer folded into a running hash.
    uint64_t z = v + 0x9e3779b97f4a7c15ULL + (hash_ << 6) + (hash_ >> 2);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    hash_ ^= z ^ (z >> 31);
  }

  bool hashing_;
  bool map_free_;
  bool ok_ = true;
  uint64_t hash_ = 0x6b696c6eULL;
  std::unordered_map<const Variable*, const Variable*> map_, rmap_;
  std::unordered_map<const Variable*, uint64_t> index_;
  uint64_t next_index_ = 0;
};

template <typename H>
bool equal_impl(const H& a, const H& b, bool map_free_vars) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  Walker w(false, map_free_vars);
  w.node(a.get(), b.get());
  return w.ok();
}

template <typename H>
size_t hash_impl(const H& a) {
  if (!a.defined()) return 0;
  Walker w(true, true);
  w.node(a.get(), a.get());
  return w.hash();
}

}  // namespace

bool structural_equal(const Expr& a, const Expr& b, bool map_free_vars) {
  return equal_impl(a, b, map_free_vars);
}
bool structural_equal(const Stmt& a, const Stmt& b, bool map_free_vars) {
  return equal_impl(a, b, map_free_vars);
}
size_t structural_hash(const Expr& e) { return hash_impl(e); }
size_t structural_hash(const Stmt& s) { return hash_impl(s); }

}  // namespace kiln::ir
