/// \file fuzz_util.h
/// \brief Random integer expressions and a reference interpreter for the arith fuzzers
/// (Halide test/fuzz style): the interpreter is independent of the simplifier and reports
/// division by zero and int32 overflow so that such samples can be skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "kiln/ir/expr.h"
#include "kiln/ir/op.h"

namespace kiln::arith::testing {

using namespace kiln::ir;  // NOLINT

/// Evaluates scalar int32/bool expressions. Returns nullopt on division by zero; sets
/// *overflow when an intermediate leaves the int32 range.
class Interpreter {
 public:
  VarMap<int64_t> env;
  bool overflow = false;

  std::optional<int64_t> eval(const Expr& e) {
    if (const IntImm* i = e.as<IntImm>()) return i->value;
    if (const Variable* v = e.as<Variable>()) {
      auto it = env.find(Var(v));
      if (it == env.end()) return std::nullopt;
      return it->second;
    }
    if (const Select* s = e.as<Select>()) {
      auto c = eval(s->condition), t = eval(s->true_value), f = eval(s->false_value);
      if (!c || !t || !f) return std::nullopt;
      return *c ? *t : *f;
    }
    if (const Not* n = e.as<Not>()) {
      auto a = eval(n->a);
      if (!a) return std::nullopt;
      return *a ? 0 : 1;
    }
    if (const Let* l = e.as<Let>()) {
      auto v = eval(l->value);
      if (!v) return std::nullopt;
      env[l->var] = *v;
      return eval(l->body);
    }
    if (const Cast* c = e.as<Cast>()) return eval(c->value);
    if (const Call* c = e.as<Call>(); c && c->name == builtin::kLikely) return eval(c->args[0]);
    const Expr *pa = nullptr, *pb = nullptr;
    switch (e->kind) {
#define KILN_EXPR_NODE(T)
#define KILN_BINARY_NODE(T) \
  case NodeKind::T:         \
    pa = &e.as<T>()->a;     \
    pb = &e.as<T>()->b;     \
    break;
#include "kiln/ir/node_kinds.def"
      default:
        return std::nullopt;
    }
    auto a = eval(*pa), b = eval(*pb);
    if (!a || !b) return std::nullopt;
    int64_t x = *a, y = *b;
    switch (e->kind) {
      case NodeKind::Add:
        return wrap(x + y);
      case NodeKind::Sub:
        return wrap(x - y);
      case NodeKind::Mul:
        return wrap(x * y);
      case NodeKind::Div:
        if (y == 0) return std::nullopt;
        return wrap(x / y);
      case NodeKind::Mod:
        if (y == 0) return std::nullopt;
        return x % y;
      case NodeKind::FloorDiv: {
        if (y == 0) return std::nullopt;
        int64_t q = x / y;
        if (x % y != 0 && ((x < 0) != (y < 0))) --q;
        return wrap(q);
      }
      case NodeKind::FloorMod: {
        if (y == 0) return std::nullopt;
        int64_t r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return r;
      }
      case NodeKind::Min:
        return std::min(x, y);
      case NodeKind::Max:
        return std::max(x, y);
      case NodeKind::EQ:
        return x == y;
      case NodeKind::NE:
        return x != y;
      case NodeKind::LT:
        return x < y;
      case NodeKind::LE:
        return x <= y;
      case NodeKind::GT:
        return x > y;
      case NodeKind::GE:
        return x >= y;
      case NodeKind::And:
        return x && y;
      case NodeKind::Or:
        return x || y;
      default:
        return std::nullopt;
    }
  }

 private:
  int64_t wrap(int64_t v) {
    if (v < INT32_MIN || v > INT32_MAX) {
      overflow = true;
      return static_cast<int32_t>(static_cast<uint32_t>(v));
    }
    return v;
  }
};

/// Random expressions over `vars` with raw node constructors (no builder folding).
class ExprGen {
 public:
  ExprGen(uint64_t seed, std::vector<Var> vars) : rng_(seed), vars_(std::move(vars)) {}

  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

  Expr leaf() {
    if (uniform(0, 2) == 0) return IntImm::make(DataType::Int(32), uniform(-20, 20));
    return vars_[uniform(0, vars_.size() - 1)];
  }

  Expr int_expr(int depth) {
    if (depth <= 0 || uniform(0, 9) == 0) return leaf();
    Expr a = int_expr(depth - 1), b = int_expr(depth - 1);
    switch (uniform(0, 11)) {
      case 0:
      case 1:
        return Add::make(a, b);
      case 2:
        return Sub::make(a, b);
      case 3:
        return Mul::make(a, uniform(0, 1) ? b : leaf());
      case 4:
        return FloorDiv::make(a, divisor(b));
      case 5:
        return FloorMod::make(a, divisor(b));
      case 6:
        return Min::make(a, b);
      case 7:
        return Max::make(a, b);
      case 8:
        return Select::make(bool_expr(depth - 1), a, b);
      case 9:
        return Div::make(a, divisor(b));
      case 10:
        return Mod::make(a, divisor(b));
      default:
        return Sub::make(Add::make(a, leaf()), b);
    }
  }

  Expr bool_expr(int depth) {
    Expr a = int_expr(depth - 1), b = int_expr(depth - 1);
    switch (uniform(0, 8)) {
      case 0:
        return EQ::make(a, b);
      case 1:
        return NE::make(a, b);
      case 2:
        return LT::make(a, b);
      case 3:
        return LE::make(a, b);
      case 4:
        return GT::make(a, b);
      case 5:
        return GE::make(a, b);
      case 6:
        return depth > 1 ? And::make(bool_expr(depth - 1), bool_expr(depth - 1)) : LT::make(a, b);
      case 7:
        return depth > 1 ? Or::make(bool_expr(depth - 1), bool_expr(depth - 1)) : GE::make(a, b);
      default:
        return depth > 1 ? Not::make(bool_expr(depth - 1)) : NE::make(a, b);
    }
  }

 private:
  /// Mostly small positive constants (the index case), sometimes anything.
  Expr divisor(const Expr& b) {
    switch (uniform(0, 3)) {
      case 0:
        return b;
      case 1:
        return IntImm::make(DataType::Int(32), uniform(-8, 8));
      default:
        return IntImm::make(DataType::Int(32), uniform(1, 16));
    }
  }

  std::mt19937_64 rng_;
  std::vector<Var> vars_;
};

/// Smaller variants of e: its children, and e with one child replaced by a smaller variant.
std::vector<Expr> shrink_candidates(const Expr& e);

}  // namespace kiln::arith::testing
