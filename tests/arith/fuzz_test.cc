// Differential fuzzing of the arith layer (Halide test/fuzz style): random integer expressions
// are simplified and the result must agree with the original under a reference interpreter on
// random variable values (samples with division by zero or int32 overflow are skipped), and
// simplifying twice must give the same tree. The same generator checks const_int_bound and
// eval_set: sampled values must lie inside the computed bounds. Failures are shrunk first.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>

#include "fuzz_util.h"
#include "kiln/arith/analyzer.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/structural.h"

namespace kiln::arith::testing {

std::vector<Expr> shrink_candidates(const Expr& e) {
  std::vector<Expr> out;
  auto add_children = [&](std::initializer_list<Expr> kids) {
    for (const Expr& k : kids)
      if (k.dtype() == e.dtype()) out.push_back(k);
  };
  if (e.as<IntImm>() || e.as<Variable>()) {
    if (!is_zero(e) && e.dtype().is_int()) out.push_back(make_zero(e.dtype()));
    return out;
  }
  switch (e->kind) {
#define KILN_EXPR_NODE(T)
#define KILN_BINARY_NODE(T)                                                        \
  case NodeKind::T: {                                                              \
    const T* n = e.as<T>();                                                        \
    add_children({n->a, n->b});                                                    \
    for (const Expr& c : shrink_candidates(n->a)) out.push_back(T::make(c, n->b)); \
    for (const Expr& c : shrink_candidates(n->b)) out.push_back(T::make(n->a, c)); \
    break;                                                                         \
  }
#include "kiln/ir/node_kinds.def"
    case NodeKind::Select: {
      const Select* s = e.as<Select>();
      add_children({s->true_value, s->false_value});
      for (const Expr& c : shrink_candidates(s->condition))
        out.push_back(Select::make(c, s->true_value, s->false_value));
      for (const Expr& c : shrink_candidates(s->true_value))
        out.push_back(Select::make(s->condition, c, s->false_value));
      for (const Expr& c : shrink_candidates(s->false_value))
        out.push_back(Select::make(s->condition, s->true_value, c));
      break;
    }
    case NodeKind::Not: {
      const Not* n = e.as<Not>();
      add_children({n->a});
      for (const Expr& c : shrink_candidates(n->a)) out.push_back(Not::make(c));
      break;
    }
    default:
      break;
  }
  return out;
}

namespace {

/// Greedily replaces e by a smaller failing variant while one exists.
Expr shrink(Expr e, const std::function<bool(const Expr&)>& fails) {
  for (int round = 0; round < 200; ++round) {
    bool found = false;
    for (const Expr& c : shrink_candidates(e)) {
      if (fails(c)) {
        e = c;
        found = true;
        break;
      }
    }
    if (!found) break;
  }
  return e;
}

struct Case {
  std::vector<Var> vars{Var("x"), Var("y"), Var("z")};
  std::vector<std::pair<int64_t, int64_t>> ranges;  ///< bound ranges (inclusive), or empty
};

/// Binds the case's ranges in a fresh analyzer.
void bind_ranges(Analyzer* ana, const Case& c) {
  for (size_t i = 0; i < c.ranges.size(); ++i)
    ana->bind(c.vars[i],
              Range(Expr(static_cast<int32_t>(c.ranges[i].first)),
                    Expr(static_cast<int32_t>(c.ranges[i].second - c.ranges[i].first + 1))));
}

/// Checks one expression: value agreement on samples and idempotence. Returns a message on
/// failure, empty on success.
int g_compared = 0;  // samples compared, to make sure the fuzzer tests something
int g_changed = 0;   // expressions the simplifier changed

std::string check_simplify(const Expr& e, const Case& c, uint64_t seed) {
  Analyzer ana;
  bind_ranges(&ana, c);
  Expr s;
  try {
    s = ana.simplify(e);
  } catch (const Error& err) {
    return std::string("simplify threw: ") + err.what();
  }
  Expr s2 = ana.simplify(s);
  if (!ir::structural_equal(s, s2))
    return "not idempotent: " + to_string(s) + "  then  " + to_string(s2);
  if (s.dtype() != e.dtype()) return "type changed to " + s.dtype().str();
  if (!s.same_as(e)) ++g_changed;
  std::mt19937_64 rng(seed);
  for (int sample = 0; sample < 12; ++sample) {
    Interpreter in;
    for (size_t i = 0; i < c.vars.size(); ++i) {
      int64_t lo = -30, hi = 30;
      if (i < c.ranges.size()) std::tie(lo, hi) = c.ranges[i];
      in.env[c.vars[i]] = std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    }
    Interpreter in2 = in;
    auto want = in.eval(e);
    if (!want || in.overflow) continue;
    auto got = in2.eval(s);
    if (in2.overflow) continue;
    ++g_compared;
    if (!got || *got != *want) {
      std::string env;
      for (const Var& v : c.vars) env += v.name() + "=" + std::to_string(in.env[v]) + " ";
      return "value mismatch at " + env + ": original " + std::to_string(*want) + ", simplified " +
             to_string(s) + " = " + (got ? std::to_string(*got) : std::string("<div by zero>"));
    }
  }
  return "";
}

/// 3000 cases by default; KILN_FUZZ_CASES=N runs more (for a long local run).
uint64_t fuzz_cases() {
  const char* v = getenv("KILN_FUZZ_CASES");
  return v ? std::strtoull(v, nullptr, 10) : 3000;
}

Case random_case(ExprGen& gen, bool with_ranges) {
  Case c;
  if (with_ranges) {
    for (int i = 0; i < 3; ++i) {
      int64_t lo = gen.uniform(-20, 20);
      c.ranges.emplace_back(lo, lo + gen.uniform(0, 24));
    }
  }
  return c;
}

TEST(ArithFuzz, SimplifyAgreesWithInterpreterAndIsIdempotent) {
  auto start = std::chrono::steady_clock::now();
  int failures = 0;
  for (uint64_t seed = 0; seed < fuzz_cases(); ++seed) {
    Case c;
    ExprGen gen(seed, c.vars);
    Case rc = random_case(gen, seed % 2 == 1);
    rc.vars = c.vars;
    ExprGen gen2(seed * 7919 + 1, rc.vars);
    Expr e = seed % 5 == 4 ? gen2.bool_expr(5) : gen2.int_expr(5);
    std::string msg = check_simplify(e, rc, seed);
    if (msg.empty()) continue;
    Expr small = shrink(e, [&](const Expr& x) { return !check_simplify(x, rc, seed).empty(); });
    std::string ranges;
    for (size_t i = 0; i < rc.ranges.size(); ++i)
      ranges += rc.vars[i].name() + " in [" + std::to_string(rc.ranges[i].first) + ", " +
                std::to_string(rc.ranges[i].second) + "] ";
    ADD_FAILURE() << "seed " << seed << " " << ranges << "\n  expr: " << to_string(small) << "\n  "
                  << check_simplify(small, rc, seed);
    if (++failures >= 5) break;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ fuzz ] %.2f s\n", secs);  // reported, not asserted: tests never depend on timing
  EXPECT_GT(g_compared, 10000) << "too few samples were comparable";
  EXPECT_GT(g_changed, 1000) << "the simplifier changed too few expressions";
  if (getenv("KILN_FUZZ_SHOW")) {
    for (uint64_t seed = 0; seed < 20; ++seed) {
      std::vector<Var> v{Var("x"), Var("y"), Var("z")};
      ExprGen gen(seed * 7919 + 1, v);
      Expr e = gen.int_expr(4);
      std::cout << to_string(e) << "\n   -> " << to_string(simplify(e)) << "\n";
    }
  }
}

TEST(ArithFuzz, SimplifyUnderConstraintAgrees) {
  // Simplify under a random condition; compare only at points where the condition holds.
  int failures = 0, compared = 0;
  for (uint64_t seed = 0; seed < 1500 && failures < 5; ++seed) {
    Case c;
    ExprGen gen(seed + 300000, c.vars);
    Expr cond = gen.bool_expr(2);
    Expr e = gen.int_expr(4);
    Analyzer ana;
    Expr s;
    ana.with_constraint(cond, [&] { s = ana.simplify(e); });
    std::mt19937_64 rng(seed);
    for (int sample = 0; sample < 40; ++sample) {
      Interpreter in;
      for (const Var& v : c.vars) in.env[v] = std::uniform_int_distribution<int64_t>(-30, 30)(rng);
      Interpreter in_c = in, in_s = in;
      auto holds = in_c.eval(cond);
      if (!holds || !*holds || in_c.overflow) continue;
      auto want = in.eval(e);
      if (!want || in.overflow) continue;
      auto got = in_s.eval(s);
      if (in_s.overflow) continue;
      ++compared;
      if (!got || *got != *want) {
        ADD_FAILURE() << "seed " << seed << " under " << to_string(cond) << ": " << to_string(e)
                      << " -> " << to_string(s) << " differs at x=" << in.env[c.vars[0]]
                      << " y=" << in.env[c.vars[1]] << " z=" << in.env[c.vars[2]];
        ++failures;
        break;
      }
    }
  }
  EXPECT_GT(compared, 5000);
}

TEST(ArithFuzz, ConstIntBoundContainsSamples) {
  int failures = 0;
  for (uint64_t seed = 0; seed < 1500 && failures < 5; ++seed) {
    Case c;
    ExprGen gen(seed + 100000, c.vars);
    Case rc = random_case(gen, true);
    rc.vars = c.vars;
    Expr e = gen.int_expr(4);
    Analyzer ana;
    bind_ranges(&ana, rc);
    ConstIntBound b = ana.const_int_bound(e);
    std::mt19937_64 rng(seed);
    for (int sample = 0; sample < 12; ++sample) {
      Interpreter in;
      for (size_t i = 0; i < 3; ++i)
        in.env[rc.vars[i]] =
            std::uniform_int_distribution<int64_t>(rc.ranges[i].first, rc.ranges[i].second)(rng);
      auto v = in.eval(e);
      if (!v || in.overflow) continue;
      if (*v < b.min_value || *v > b.max_value) {
        ADD_FAILURE() << "seed " << seed << ": " << to_string(e) << " = " << *v << " outside ["
                      << b.min_value << ", " << b.max_value << "]";
        ++failures;
        break;
      }
    }
  }
}

TEST(ArithFuzz, EvalSetContainsSamples) {
  int failures = 0;
  for (uint64_t seed = 0; seed < 1500 && failures < 5; ++seed) {
    Case c;
    ExprGen gen(seed + 200000, c.vars);
    Expr e = gen.int_expr(4);
    // x and y range over intervals; z stays a symbolic point.
    VarMap<IntSet> dom;
    std::vector<std::pair<int64_t, int64_t>> r;
    for (int i = 0; i < 2; ++i) {
      int64_t lo = gen.uniform(-20, 20);
      r.emplace_back(lo, lo + gen.uniform(0, 24));
      dom[c.vars[i]] = IntSet::interval(Expr(static_cast<int32_t>(r[i].first)),
                                        Expr(static_cast<int32_t>(r[i].second)));
    }
    IntSet s = eval_set(e, dom);
    std::mt19937_64 rng(seed);
    for (int sample = 0; sample < 12; ++sample) {
      Interpreter in;
      for (int i = 0; i < 2; ++i)
        in.env[c.vars[i]] = std::uniform_int_distribution<int64_t>(r[i].first, r[i].second)(rng);
      in.env[c.vars[2]] = std::uniform_int_distribution<int64_t>(-30, 30)(rng);
      Interpreter bounds = in;
      auto v = in.eval(e);
      if (!v || in.overflow) continue;
      std::optional<int64_t> lo, hi;
      if (s.has_lower_bound()) lo = bounds.eval(s.min());
      if (s.has_upper_bound()) hi = bounds.eval(s.max());
      if (bounds.overflow) continue;
      if ((s.has_lower_bound() && (!lo || *v < *lo)) ||
          (s.has_upper_bound() && (!hi || *v > *hi))) {
        ADD_FAILURE() << "seed " << seed << ": " << to_string(e) << " = " << *v
                      << " with x=" << in.env[c.vars[0]] << " y=" << in.env[c.vars[1]]
                      << " z=" << in.env[c.vars[2]] << " outside ["
                      << (s.has_lower_bound() ? to_string(s.min()) : "-inf") << ", "
                      << (s.has_upper_bound() ? to_string(s.max()) : "+inf") << "]";
        ++failures;
        break;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::arith::testing
