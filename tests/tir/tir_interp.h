/// \file tir_interp.h
/// \brief A tiny reference interpreter of flattened tir (scalar and vector), for checking that
/// passes preserve meaning: run a function before and after a pass on the same random inputs
/// and compare the buffers. Every element is held as a double (exact for the small integers of
/// index arithmetic); float32 results are rounded to float after each operation. Out-of-bounds
/// accesses by unmasked lanes throw, so a dropped guard is caught.
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/ir/functor.h"
#include "kiln/ir/op.h"
#include "kiln/tir/function.h"

namespace kiln::tir::testing {

using Value = std::vector<double>;

class Interp {
 public:
  /// Binds a buffer var to memory.
  void bind_buffer(const Var& data, std::vector<double>* mem) { mem_[data.get()] = mem; }
  void bind_scalar(const Var& v, double x) { env_[v.get()] = {x}; }

  void exec(const Stmt& s) {
    if (const For* f = s.as<For>()) {
      int64_t mn = scalar(eval(f->min)), ex = scalar(eval(f->extent));
      for (int64_t i = mn; i < mn + ex; ++i) {
        env_[f->loop_var.get()] = {static_cast<double>(i)};
        exec(f->body);
      }
      env_.erase(f->loop_var.get());
    } else if (const SeqStmt* q = s.as<SeqStmt>()) {
      for (const Stmt& c : q->seq) exec(c);
    } else if (const Store* st = s.as<Store>()) {
      Value v = eval(st->value), idx = eval(st->index), p = eval(st->predicate);
      size_t n = std::max({v.size(), idx.size(), p.size()});
      std::vector<double>& m = memory(st->buffer_var);
      for (size_t l = 0; l < n; ++l) {
        if (!lane(p, l)) continue;
        int64_t i = static_cast<int64_t>(lane(idx, l)) + (idx.size() == 1 && n > 1 ? l : 0);
        check(st->buffer_var, m, i);
        m[i] = lane(v, l);
      }
    } else if (const IfThenElse* c = s.as<IfThenElse>()) {
      if (scalar(eval(c->condition))) {
        exec(c->then_case);
      } else if (c->else_case.defined()) {
        exec(c->else_case);
      }
    } else if (const LetStmt* l = s.as<LetStmt>()) {
      env_[l->var.get()] = eval(l->value);
      exec(l->body);
      env_.erase(l->var.get());
    } else if (const AttrStmt* a = s.as<AttrStmt>()) {
      exec(a->body);
    } else if (const AssertStmt* a = s.as<AssertStmt>()) {
      if (!scalar(eval(a->condition))) throw std::runtime_error("assert failed");
      exec(a->body);
    } else if (const Allocate* a = s.as<Allocate>()) {
      int64_t n = a->constant_size();
      if (n < 0) throw std::runtime_error("interp: symbolic allocation");
      auto buf = std::make_unique<std::vector<double>>(n, 12345.0);
      mem_[a->buffer_var.get()] = buf.get();
      exec(a->body);
      mem_.erase(a->buffer_var.get());
    } else if (const Evaluate* e = s.as<Evaluate>()) {
      eval(e->value);
    } else {
      throw std::runtime_error(std::string("interp: statement ") + node_kind_name(s.kind()));
    }
  }

  Value eval(const Expr& e) {
    DataType t = e.dtype();
    if (const IntImm* i = e.as<IntImm>()) return {static_cast<double>(i->value)};
    if (const FloatImm* f = e.as<FloatImm>()) return {f->value};
    if (const Variable* v = e.as<Variable>()) {
      auto it = env_.find(v);
      if (it == env_.end()) throw std::runtime_error("interp: unbound var " + v->name);
      return it->second;
    }
    if (const Cast* c = e.as<Cast>()) {
      return map1(eval(c->value), [&](double x) { return round_to(t, x); });
    }
#define KILN_INTERP_BIN(T, expr)                                                                \
  if (const T* b = e.as<T>()) {                                                                 \
    DataType ot = b->a.dtype();                                                                 \
    (void)ot;                                                                                   \
    return map2(eval(b->a), eval(b->b), [&](double x, double y) { return round_to(t, expr); }); \
  }
    KILN_INTERP_BIN(Add, x + y)
    KILN_INTERP_BIN(Sub, x - y)
    KILN_INTERP_BIN(Mul, x * y)
    KILN_INTERP_BIN(Div, ot.is_float() ? x / y : std::trunc(x / y))
    KILN_INTERP_BIN(Mod, std::fmod(x, y))
    KILN_INTERP_BIN(FloorDiv, std::floor(x / y))
    KILN_INTERP_BIN(FloorMod, x - std::floor(x / y) * y)
    KILN_INTERP_BIN(Min, std::min(x, y))
    KILN_INTERP_BIN(Max, std::max(x, y))
    KILN_INTERP_BIN(EQ, x == y)
    KILN_INTERP_BIN(NE, x != y)
    KILN_INTERP_BIN(LT, x < y)
    KILN_INTERP_BIN(LE, x <= y)
    KILN_INTERP_BIN(GT, x > y)
    KILN_INTERP_BIN(GE, x >= y)
    KILN_INTERP_BIN(And, x != 0 && y != 0)
    KILN_INTERP_BIN(Or, x != 0 || y != 0)
#undef KILN_INTERP_BIN
    if (const Not* n = e.as<Not>())
      return map1(eval(n->a), [](double x) { return x == 0 ? 1.0 : 0.0; });
    if (const Select* s = e.as<Select>()) {
      Value c = eval(s->condition), a = eval(s->true_value), b = eval(s->false_value);
      Value r(a.size());
      for (size_t l = 0; l < r.size(); ++l) r[l] = lane(c, l) ? a[l] : b[l];
      return r;
    }
    if (const Ramp* r = e.as<Ramp>()) {
      double b = eval(r->base).at(0), st = eval(r->stride).at(0);
      Value v(r->lanes);
      for (int l = 0; l < r->lanes; ++l) v[l] = b + l * st;
      return v;
    }
    if (const Broadcast* b = e.as<Broadcast>()) {
      Value v = eval(b->value);
      if (v.size() != 1) throw std::runtime_error("interp: broadcast of a vector");
      return Value(b->lanes, v[0]);
    }
    if (const Let* l = e.as<Let>()) {
      env_[l->var.get()] = eval(l->value);
      Value r = eval(l->body);
      env_.erase(l->var.get());
      return r;
    }
    if (const Load* l = e.as<Load>()) {
      Value idx = eval(l->index), p = eval(l->predicate);
      size_t n = t.lanes();
      std::vector<double>& m = memory(l->buffer_var);
      Value r(n, 0.0);
      for (size_t k = 0; k < n; ++k) {
        if (!lane(p, k)) continue;
        int64_t i = static_cast<int64_t>(lane(idx, k)) + (idx.size() == 1 && n > 1 ? k : 0);
        check(l->buffer_var, m, i);
        r[k] = m[i];
      }
      return r;
    }
    if (const Call* c = e.as<Call>()) {
      if (c->name == builtin::kLikely) return eval(c->args[0]);
      if (c->name == builtin::kIfThenElse) {
        Value cond = eval(c->args[0]);
        if (cond.size() == 1) return cond[0] ? eval(c->args[1]) : eval(c->args[2]);
      }
      if (c->name == builtin::kVectorSlice) {
        Value v = eval(c->args[0]);
        auto b = static_cast<size_t>(scalar(eval(c->args[1])));
        if (b + t.lanes() > v.size()) throw std::runtime_error("interp: slice past the vector");
        return Value(v.begin() + static_cast<ptrdiff_t>(b),
                     v.begin() + static_cast<ptrdiff_t>(b + t.lanes()));
      }
      if (c->name == "exp")
        return map1(eval(c->args[0]), [&](double x) { return round_to(t, std::exp(x)); });
      if (c->name == "sqrt")
        return map1(eval(c->args[0]), [&](double x) { return round_to(t, std::sqrt(x)); });
      throw std::runtime_error("interp: call " + c->name);
    }
    throw std::runtime_error(std::string("interp: expression ") + node_kind_name(e.kind()));
  }

 private:
  static double lane(const Value& v, size_t l) { return v.size() == 1 ? v[0] : v.at(l); }
  static int64_t scalar(const Value& v) {
    if (v.size() != 1) throw std::runtime_error("interp: vector where a scalar is needed");
    return static_cast<int64_t>(v[0]);
  }
  static double round_to(DataType t, double x) {
    if (t.is_bool()) return x != 0;
    if (t.is_float()) return t.bits() == 32 ? static_cast<double>(static_cast<float>(x)) : x;
    return std::trunc(x);
  }
  template <typename F>
  static Value map1(const Value& a, F f) {
    Value r(a.size());
    for (size_t l = 0; l < a.size(); ++l) r[l] = f(a[l]);
    return r;
  }
  template <typename F>
  static Value map2(const Value& a, const Value& b, F f) {
    size_t n = std::max(a.size(), b.size());
    Value r(n);
    for (size_t l = 0; l < n; ++l) r[l] = f(lane(a, l), lane(b, l));
    return r;
  }
  std::vector<double>& memory(const Var& v) {
    auto it = mem_.find(v.get());
    if (it == mem_.end()) throw std::runtime_error("interp: unbound buffer " + v.name());
    return *it->second;
  }
  static void check(const Var& v, const std::vector<double>& m, int64_t i) {
    if (i < 0 || i >= static_cast<int64_t>(m.size()))
      throw std::runtime_error("interp: out-of-bounds access " + v.name() + "[" +
                               std::to_string(i) + "]");
  }

  std::unordered_map<const Variable*, Value> env_;
  std::unordered_map<const Variable*, std::vector<double>*> mem_;
};

/// Runs `f` (flattened) on copies of `inputs` (one per buffer param, in param order) and
/// returns the final contents of every buffer.
inline std::vector<std::vector<double>> run_func(const PrimFunc& f,
                                                 std::vector<std::vector<double>> bufs) {
  Interp in;
  for (size_t i = 0; i < f->params.size(); ++i)
    in.bind_buffer(f->buffer_map.at(f->params[i])->data, &bufs.at(i));
  in.exec(f->body);
  return bufs;
}

}  // namespace kiln::tir::testing
