// Schedule fuzzer (Halide / TVM style): random chains of 1-3 computes (element-wise,
// broadcast, neighbour-reading "shift" and reduction stages over 1-3 dimensions with extents
// 1..40) get a random sequence of legal schedule primitives — splits with random factors
// (divisible or not), fuses of adjacent leaves, reorders, compute_inline of injective
// intermediates, compute_at of a producer at a random loop of its consumer, cache_read /
// cache_write, then parallel / vectorize / unroll / pragma annotations — and the scheduled
// kernel must compute what the unscheduled one computes on the same random inputs.
//
// Primitives are recorded as data (stage handle index, leaf positions, factors) so that a
// failing sequence can be replayed with primitives dropped: the shrinker removes one primitive
// at a time while the case still fails and reports the smallest failing sequence, with the
// seed and the lowered IR. Replay re-checks legality and skips a primitive that no longer
// applies. KILN_FUZZ_SEED and KILN_FUZZ_CASES override the base seed and the case count.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/e2e_util.h"

namespace kiln::e2e {
namespace {

using namespace kiln::te;  // NOLINT
using ir::Expr;
using ir::Var;

const DataType f32 = DataType::Float(32);

// ---------------------------------------------------------------------------------------------
// Random programs

enum class StageKind { kElem, kBcast, kShift, kReduce };
struct Program {
  std::vector<Tensor> inputs;  ///< inputs[0] is A; others are broadcast vectors
  std::vector<Tensor> stages;  ///< a chain; stages.back() is the output
  std::vector<StageKind> kinds;
  std::string desc;
  std::vector<Tensor> args() const {
    std::vector<Tensor> a = inputs;
    a.push_back(stages.back());
    return a;
  }
};

int rand_int(std::mt19937& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}
std::vector<int64_t> to_i64(const std::vector<int>& v) {
  return std::vector<int64_t>(v.begin(), v.end());
}
bool coin(std::mt19937& rng, double p) { return std::uniform_real_distribution<>(0, 1)(rng) < p; }

Program make_program(uint32_t seed) {
  std::mt19937 rng(seed);
  Program p;
  int rank = rand_int(rng, 1, 3);
  std::vector<int> shape;
  for (int d = 0; d < rank; ++d)
    shape.push_back(coin(rng, 0.15) ? rand_int(rng, 1, 3) : rand_int(rng, 1, 40));
  auto to_expr = [](const std::vector<int>& s) {
    std::vector<Expr> e;
    for (int v : s) e.push_back(v);
    return e;
  };
  std::ostringstream os;
  os << "A" << runtime::shape_str(std::vector<int64_t>(shape.begin(), shape.end()));
  Tensor cur = placeholder(to_expr(shape), f32, "A");
  p.inputs.push_back(cur);
  int nstages = rand_int(rng, 1, 3);
  for (int si = 0; si < nstages; ++si) {
    std::string name = "T" + std::to_string(si);
    StageKind kind = static_cast<StageKind>(rand_int(rng, 0, 3));
    int r = static_cast<int>(shape.size());
    Tensor in = cur, out;
    if (kind == StageKind::kElem) {
      // Variant 3 also reads an earlier tensor of the same shape (a DAG, not a chain).
      std::vector<Tensor> same;
      for (const Tensor& t : p.stages)
        if (!t.same_as(in) && t->shape.size() == shape.size() && shape_of(t) == to_i64(shape))
          same.push_back(t);
      if (shape_of(p.inputs[0]) == to_i64(shape)) same.push_back(p.inputs[0]);
      int variant = rand_int(rng, 0, same.empty() ? 2 : 3);
      Tensor other =
          same.empty() ? Tensor() : same[rand_int(rng, 0, static_cast<int>(same.size()) - 1)];
      out = compute(to_expr(shape), FCompute([&](const std::vector<Var>& v) -> Expr {
                      std::vector<Expr> ix(v.begin(), v.end());
                      if (variant == 0) return in(ix)*0.75f + 0.25f;
                      if (variant == 1) return ir::max(in(ix), Expr(-0.3f)) * 1.5f;
                      if (variant == 2) return in(ix)*in(ix)-0.5f;
                      return in(ix)-other(ix) * 0.5f;
                    }),
                    name);
      os << " -> " << name << "=elem" << variant;
      if (variant == 3) os << "(reads " << other.name() << ")";
    } else if (kind == StageKind::kBcast) {
      int d = rand_int(rng, 0, r - 1);
      Tensor V = placeholder({shape[d]}, f32, "V" + std::to_string(p.inputs.size()));
      p.inputs.push_back(V);
      out = compute(to_expr(shape), FCompute([&](const std::vector<Var>& v) -> Expr {
                      std::vector<Expr> ix(v.begin(), v.end());
                      return in(ix) + V(v[d]);
                    }),
                    name);
      os << " -> " << name << "=bcast(axis " << d << ")";
    } else if (kind == StageKind::kShift) {
      int d = rand_int(rng, 0, r - 1);
      int ext = shape[d];
      out = compute(to_expr(shape), FCompute([&](const std::vector<Var>& v) -> Expr {
                      std::vector<Expr> ix(v.begin(), v.end()), jx = ix;
                      jx[d] = ir::min(v[d] + 1, Expr(ext - 1));
                      return in(ix) + in(jx)*0.5f;
                    }),
                    name);
      os << " -> " << name << "=shift(axis " << d << ")";
    } else {
      int d = rand_int(rng, 0, r - 1);
      bool keep = r == 1 || coin(rng, 0.3);
      bool use_max = coin(rng, 0.3);
      IterVar k = reduce_axis({0, shape[d]}, "r" + std::to_string(si));
      std::vector<int> oshape;
      for (int q = 0; q < r; ++q)
        if (q != d || keep) oshape.push_back(q == d ? 1 : shape[q]);
      out = compute(to_expr(oshape), FCompute([&](const std::vector<Var>& v) -> Expr {
                      std::vector<Expr> ix;
                      size_t pos = 0;
                      for (int q = 0; q < r; ++q) {
                        if (q == d) {
                          ix.push_back(k);
                          if (keep) ++pos;
                        } else {
                          ix.push_back(v[pos++]);
                        }
                      }
                      return use_max ? te::max(in(ix), {k}) : te::sum(in(ix), {k});
                    }),
                    name);
      os << " -> " << name << "=" << (use_max ? "max" : "sum") << "(axis " << d
         << (keep ? ", keepdims" : "") << ")";
      shape = oshape;
    }
    p.stages.push_back(out);
    p.kinds.push_back(kind);
    cur = out;
  }
  p.desc = os.str();
  return p;
}

// ---------------------------------------------------------------------------------------------
// Primitives as data

enum class PrimKind {
  kCacheWrite,
  kCacheRead,
  kInline,
  kSplit,
  kSplitNparts,
  kFuse,
  kReorder,
  kComputeAt,
  kParallel,
  kVectorize,
  kUnroll,
  kPragma,
};

/// One primitive. `h` and `h2` index handles (tensors whose stage is meant); leaf positions
/// index the stage's leaf_iter_vars at the time the primitive is applied.
struct Prim {
  PrimKind kind;
  int h = 0, h2 = 0;
  std::vector<int> leaves;
  int factor = 0;
};

/// Live state while applying primitives: handles[i] names a stage (program stages first,
/// then the tensors cache_read / cache_write return, in the order they were made).
struct State {
  Schedule s;
  std::vector<Tensor> handles;
  std::vector<bool> handle_valid;
};

bool is_inline(const Stage& st) { return st->attach_type == AttachType::kInline; }

/// Stages reading any output of `st`.
std::vector<Stage> consumers(const Schedule& s, const Stage& st) {
  std::vector<Stage> out;
  for (const Stage& c : s->stages) {
    if (c.same_as(st)) continue;
    for (const Tensor& t : c->op->input_tensors()) {
      if (s[t].same_as(st)) {
        out.push_back(c);
        break;
      }
    }
  }
  return out;
}

/// Applies `p` if it is legal in the current state; returns a description, or "" when skipped.
std::string apply(State& st, const Prim& p) {
  auto valid = [&](int h) {
    return h >= 0 && h < static_cast<int>(st.handles.size()) && st.handle_valid[h];
  };
  if (!valid(p.h)) return "";
  Schedule& s = st.s;
  Stage sg = s[st.handles[p.h]];
  std::string sname = "s[" + st.handles[p.h].name() + "]";
  if (sg->op->kind == OpKind::kPlaceholder && p.kind != PrimKind::kCacheRead) return "";
  auto leaf_ok = [&](int i) { return i >= 0 && i < static_cast<int>(sg->leaf_iter_vars.size()); };
  auto leaf = [&](int i) { return sg->leaf_iter_vars[i]; };
  std::ostringstream os;
  try {
    switch (p.kind) {
      case PrimKind::kCacheWrite: {
        Tensor t = st.handles[p.h];
        if (!sg->relations.empty() || !sg->iter_var_attrs.empty() || is_inline(sg)) return "";
        Tensor c = s.cache_write(t, "local");
        st.handles.push_back(c);
        st.handle_valid.push_back(true);
        os << "s.cache_write(" << t.name() << ", \"local\")  -> h" << st.handles.size() - 1;
        break;
      }
      case PrimKind::kCacheRead: {
        // Handle p.h is a tensor, p.h2 its reader.
        if (!valid(p.h2)) return "";
        Tensor t = st.handles[p.h];
        Stage rs = s[st.handles[p.h2]];
        if (is_inline(rs)) return "";
        Tensor c = s.cache_read(t, "local", {st.handles[p.h2]});
        st.handles.push_back(c);
        st.handle_valid.push_back(true);
        os << "s.cache_read(" << t.name() << ", \"local\", {" << st.handles[p.h2].name()
           << "})  -> h" << st.handles.size() - 1;
        break;
      }
      case PrimKind::kInline: {
        if (sg->is_output || sg->op->kind != OpKind::kCompute) return "";
        if (!static_cast<const ComputeOpNode*>(sg->op.get())->reduce_axis.empty()) return "";
        // A stage attached inside this one would lose its attachment point.
        for (const Stage& o : s->stages)
          if (o->attach_type == AttachType::kScope && o->attach_stage.same_as(sg)) return "";
        sg.compute_inline();
        os << sname << ".compute_inline()";
        break;
      }
      case PrimKind::kSplit:
      case PrimKind::kSplitNparts: {
        if (!leaf_ok(p.leaves[0])) return "";
        IterVar iv = leaf(p.leaves[0]);
        // Never split a loop something is attached at.
        for (const Stage& o : s->stages)
          if (o->attach_type == AttachType::kScope && o->attach_ivar.same_as(iv)) return "";
        if (p.kind == PrimKind::kSplit) {
          sg.split(iv, p.factor);
          os << sname << ".split(" << iv->var.name() << ", " << p.factor << ")";
        } else {
          sg.split_nparts(iv, p.factor);
          os << sname << ".split_nparts(" << iv->var.name() << ", " << p.factor << ")";
        }
        break;
      }
      case PrimKind::kFuse: {
        int i = p.leaves[0];
        if (!leaf_ok(i) || !leaf_ok(i + 1)) return "";
        IterVar a = leaf(i), b = leaf(i + 1);
        if (a->iter_type != b->iter_type) return "";
        for (const Stage& o : s->stages)
          if (o->attach_type == AttachType::kScope &&
              (o->attach_ivar.same_as(a) || o->attach_ivar.same_as(b)))
            return "";
        if (sg->iter_var_attrs.count(a.get()) || sg->iter_var_attrs.count(b.get())) return "";
        sg.fuse(a, b);
        os << sname << ".fuse(" << a->var.name() << ", " << b->var.name() << ")";
        break;
      }
      case PrimKind::kReorder: {
        std::vector<IterVar> order;
        os << sname << ".reorder({";
        for (int i : p.leaves) {
          if (!leaf_ok(i)) return "";
          for (const IterVar& o : order)
            if (o.same_as(leaf(i))) return "";
          order.push_back(leaf(i));
          os << (order.size() > 1 ? ", " : "") << leaf(i)->var.name();
        }
        os << "})";
        sg.reorder(order);
        break;
      }
      case PrimKind::kComputeAt: {
        if (!valid(p.h2) || sg->is_output || is_inline(sg)) return "";
        Stage par = s[st.handles[p.h2]];
        if (is_inline(par) || par.same_as(sg)) return "";
        auto cons = consumers(s, sg);
        if (cons.size() != 1 || !cons[0].same_as(par)) return "";
        int i = p.leaves[0];
        if (i < 0 || i >= static_cast<int>(par->leaf_iter_vars.size())) return "";
        // Stages computed inside sg keep their place; a parallel stage is never nested.
        for (const auto& [ivn, attr] : sg->iter_var_attrs)
          if (attr.for_kind == ForKind::kParallel) return "";
        IterVar iv = par->leaf_iter_vars[i];
        sg.compute_at(par, iv);
        os << sname << ".compute_at(s[" << st.handles[p.h2].name() << "], " << iv->var.name()
           << ")";
        break;
      }
      case PrimKind::kParallel:
      case PrimKind::kVectorize:
      case PrimKind::kUnroll:
      case PrimKind::kPragma: {
        if (!leaf_ok(p.leaves[0]) || is_inline(sg)) return "";
        IterVar iv = leaf(p.leaves[0]);
        if (sg->iter_var_attrs.count(iv.get()) &&
            sg->iter_var_attrs.at(iv.get()).for_kind != ForKind::kSerial)
          return "";
        if (p.kind == PrimKind::kParallel) {
          if (iv->iter_type != IterVarType::kDataPar) return "";
          if (sg->attach_type != AttachType::kGroupRoot) return "";
          for (const auto& [ivn, attr] : sg->iter_var_attrs)
            if (attr.for_kind == ForKind::kParallel) return "";
          sg.parallel(iv);
          os << sname << ".parallel(" << iv->var.name() << ")";
        } else if (p.kind == PrimKind::kVectorize) {
          if (iv->iter_type != IterVarType::kDataPar) return "";
          sg.vectorize(iv);
          os << sname << ".vectorize(" << iv->var.name() << ")";
        } else if (p.kind == PrimKind::kUnroll) {
          sg.unroll(iv);
          os << sname << ".unroll(" << iv->var.name() << ")";
        } else {
          sg.pragma(iv, "fuzz_key", Expr(p.factor));
          os << sname << ".pragma(" << iv->var.name() << ", \"fuzz_key\", " << p.factor << ")";
        }
        break;
      }
    }
  } catch (const Error& e) {
    return "";  // not legal here (a dropped primitive changed the state): skip it
  }
  return os.str();
}

/// A fresh state for `prog`.
State start(const Program& prog) {
  State st;
  st.s = create_schedule({prog.stages.back()});
  st.handles = prog.stages;
  st.handles.push_back(prog.inputs[0]);
  st.handle_valid.assign(st.handles.size(), true);
  return st;
}

/// Applies all primitives; returns the descriptions of those applied.
std::vector<std::string> replay(State& st, const std::vector<Prim>& prims) {
  std::vector<std::string> out;
  for (const Prim& p : prims) {
    std::string d = apply(st, p);
    if (!d.empty()) out.push_back(d);
  }
  return out;
}

/// Generates a random legal sequence by trying random primitives against the live state.
std::vector<Prim> make_prims(const Program& prog, std::mt19937& rng) {
  State st = start(prog);
  std::vector<Prim> prims;
  auto try_add = [&](const Prim& p) {
    if (!apply(st, p).empty()) prims.push_back(p);
  };
  int nstage = static_cast<int>(prog.stages.size());
  // 1. Caches.
  for (int i = 0; i < nstage; ++i)
    if (coin(rng, 0.15)) try_add({PrimKind::kCacheWrite, i, 0, {}, 0});
  // cache_read of input A for its reader T0 (A is the handle after the stages).
  if (coin(rng, 0.15)) try_add({PrimKind::kCacheRead, nstage, 0, {}, 0});
  for (int i = 0; i + 1 < nstage; ++i)
    if (coin(rng, 0.12)) try_add({PrimKind::kCacheRead, i, i + 1, {}, 0});
  // 2. Inlines of injective intermediates.
  for (int i = 0; i + 1 < nstage; ++i)
    if (prog.kinds[i] != StageKind::kReduce && coin(rng, 0.3))
      try_add({PrimKind::kInline, i, 0, {}, 0});
  // 3. Loop transforms.
  auto nleaves = [&](int h) {
    return static_cast<int>(st.s[st.handles[h]]->leaf_iter_vars.size());
  };
  for (int h = 0; h < static_cast<int>(st.handles.size()); ++h) {
    int n = rand_int(rng, 0, 4);
    for (int t = 0; t < n; ++t) {
      int nl = nleaves(h);
      if (nl == 0) break;
      int what = rand_int(rng, 0, 9);
      if (what <= 4) {
        int f = coin(rng, 0.2) ? rand_int(rng, 1, 45) : rand_int(rng, 1, 9);
        try_add({what == 4 ? PrimKind::kSplitNparts : PrimKind::kSplit,
                 h,
                 0,
                 {rand_int(rng, 0, nl - 1)},
                 f});
      } else if (what <= 6) {
        if (nl >= 2) try_add({PrimKind::kFuse, h, 0, {rand_int(rng, 0, nl - 2)}, 0});
      } else {
        std::vector<int> idx(nl);
        for (int i = 0; i < nl; ++i) idx[i] = i;
        std::shuffle(idx.begin(), idx.end(), rng);
        idx.resize(std::min(nl, rand_int(rng, 2, 4)));
        if (idx.size() >= 2) try_add({PrimKind::kReorder, h, 0, idx, 0});
      }
    }
  }
  // 4. compute_at of producers at a random loop of their consumer (consumers first, so that
  // chains nest).
  for (int h = static_cast<int>(st.handles.size()) - 1; h >= 0; --h) {
    if (!coin(rng, 0.5)) continue;
    Stage sg = st.s[st.handles[h]];
    auto cons = consumers(st.s, sg);
    if (cons.size() != 1) continue;
    int ph = -1;
    for (int q = 0; q < static_cast<int>(st.handles.size()); ++q)
      if (st.s[st.handles[q]].same_as(cons[0])) ph = q;
    if (ph < 0) continue;
    int nl = static_cast<int>(cons[0]->leaf_iter_vars.size());
    if (nl == 0) continue;
    try_add({PrimKind::kComputeAt, h, ph, {rand_int(rng, 0, nl - 1)}, 0});
  }
  // 5. Annotations.
  for (int h = 0; h < static_cast<int>(st.handles.size()); ++h) {
    int n = rand_int(rng, 0, 3);
    for (int t = 0; t < n; ++t) {
      int nl = nleaves(h);
      if (nl == 0) break;
      int what = rand_int(rng, 0, 3);
      int leafi = coin(rng, 0.5) ? nl - 1 : rand_int(rng, 0, nl - 1);
      PrimKind k = what == 0   ? PrimKind::kParallel
                   : what == 1 ? PrimKind::kVectorize
                   : what == 2 ? PrimKind::kUnroll
                               : PrimKind::kPragma;
      try_add({k, h, 0, {leafi}, rand_int(rng, 1, 8)});
    }
  }
  return prims;
}

// ---------------------------------------------------------------------------------------------
// Running and shrinking

/// Where a crash handler finds what was running.
char g_current_case[8192];

void crash_handler(int sig) {
  const char* head = "\n*** schedule fuzzer crashed (signal) while running:\n";
  ssize_t r = write(2, head, std::strlen(head));
  r = write(2, g_current_case, std::strlen(g_current_case));
  (void)r;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

struct Outcome {
  bool ok = true;
  std::string why;
};

/// Builds the schedule of `prims` on `prog`, runs it and compares with `want`.
Outcome run_case(const Program& prog, const std::vector<Prim>& prims,
                 const std::vector<NDArray>& inputs, const NDArray& want,
                 std::vector<std::string>* applied = nullptr) {
  State st = start(prog);
  std::vector<std::string> desc = replay(st, prims);
  if (applied) *applied = desc;
  std::ostringstream cur;
  cur << prog.desc << "\n";
  for (const std::string& d : desc) cur << "  " << d << "\n";
  std::snprintf(g_current_case, sizeof(g_current_case), "%s", cur.str().c_str());
  Outcome o;
  try {
    std::vector<NDArray> got = build_and_run(st.s, prog.args(), inputs);
    auto r = all_close(got[0], want, {1e-4, 1e-4});
    if (!r) {
      o.ok = false;
      o.why = r.message();
    }
  } catch (const Error& e) {
    o.ok = false;
    o.why = std::string("kiln::Error: ") + e.what();
  }
  return o;
}

std::vector<Prim> shrink(const Program& prog, std::vector<Prim> prims,
                         const std::vector<NDArray>& inputs, const NDArray& want) {
  bool progress = true;
  while (progress) {
    progress = false;
    for (size_t i = 0; i < prims.size(); ++i) {
      std::vector<Prim> fewer = prims;
      fewer.erase(fewer.begin() + static_cast<long>(i));
      if (!run_case(prog, fewer, inputs, want).ok) {
        prims = fewer;
        progress = true;
        break;
      }
    }
  }
  return prims;
}

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

TEST(E2EScheduleFuzz, RandomSchedulesMatchDefault) {
  const uint32_t base = static_cast<uint32_t>(env_int("KILN_FUZZ_SEED", 20261121));
  const int programs = env_int("KILN_FUZZ_CASES", 40);
  const int schedules_per_program = 4;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, crash_handler);
  auto t0 = std::chrono::steady_clock::now();
  int cases = 0, failures = 0, prims_total = 0;
  const int max_failures = env_int("KILN_FUZZ_MAX_FAILURES", 3);
  for (int pi = 0; pi < programs && failures < max_failures; ++pi) {
    uint32_t seed = base + static_cast<uint32_t>(pi) * 7919u;
    Program prog = make_program(seed);
    std::vector<NDArray> inputs;
    for (size_t i = 0; i < prog.inputs.size(); ++i)
      inputs.push_back(random_array(shape_of(prog.inputs[i]), f32, seed + 17 * i));
    std::snprintf(g_current_case, sizeof(g_current_case), "%s (default schedule)\n",
                  prog.desc.c_str());
    NDArray want;
    try {
      want = build_and_run(create_schedule({prog.stages.back()}), prog.args(), inputs)[0];
    } catch (const Error& e) {
      ADD_FAILURE() << "seed " << seed << ": default schedule fails: " << e.what() << "\n"
                    << prog.desc;
      ++failures;
      continue;
    }
    std::mt19937 rng(seed ^ 0x9e3779b9u);
    for (int k = 0; k < schedules_per_program; ++k) {
      std::vector<Prim> prims = make_prims(prog, rng);
      prims_total += static_cast<int>(prims.size());
      ++cases;
      std::vector<std::string> applied;
      Outcome o = run_case(prog, prims, inputs, want, &applied);
      if (o.ok) continue;
      ++failures;
      std::vector<Prim> small =
          env_int("KILN_FUZZ_NO_SHRINK", 0) ? prims : shrink(prog, prims, inputs, want);
      std::vector<std::string> small_desc;
      Outcome so = run_case(prog, small, inputs, want, &small_desc);
      State st = start(prog);
      replay(st, small);
      std::ostringstream os;
      os << "schedule fuzz failure: seed " << seed << " schedule #" << k << "\n"
         << "program: " << prog.desc << "\nprimitives (" << applied.size() << "):\n";
      for (const std::string& d : applied) os << "  " << d << "\n";
      os << "smallest failing sequence (" << small_desc.size() << "):\n";
      for (const std::string& d : small_desc) os << "  " << d << "\n";
      os << "its failure: " << so.why << "\nits lowered IR:\n" << lowered_text(st.s, prog.args());
      if (std::getenv("KILN_FUZZ_NESTS")) {
        tir::LowerOptions lo;
        lo.nests_only = true;
        os << "\nits loop nests (before tir passes):\n"
           << tir::to_string(lower(st.s, prog.args(), "f", lo));
      }
      ADD_FAILURE() << os.str();
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("schedule fuzz: %d programs, %d schedules, %d primitives, %d failures, %.1f s\n",
              programs, cases, prims_total, failures, secs);
}

}  // namespace
}  // namespace kiln::e2e
