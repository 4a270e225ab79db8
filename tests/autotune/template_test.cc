// Schedule templates written with the knob API: a tiled matmul whose define mode gives the
// expected knobs and size, whose fallback gives the declared defaults, and whose sampled
// configs all build for the host and compute what naive loops compute (random inputs, poisoned
// outputs). A tail-splitting elementwise template checks power-of-two splits with tails.
#include "kiln/autotune/template.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "kiln/runtime/ndarray.h"
#include "kiln/support/error.h"
#include "kiln/target/build.h"

namespace kiln::autotune {
namespace {

using runtime::NDArray;

constexpr int kM = 24, kN = 32, kK = 20;

/// The worked example of docs/template-api.md: C = A x B tiled over i, j and k.
Instance tiled_matmul(Config& cfg) {
  auto A = te::placeholder({kM, kK}, DataType::Float(32), "A");
  auto B = te::placeholder({kK, kN}, DataType::Float(32), "B");
  auto k = te::reduce_axis({0, kK}, "k");
  auto C = te::compute(
      {kM, kN}, [&](te::Var i, te::Var j) { return te::sum(A(i, k) * B(k, j), {k}); }, "C");
  te::Schedule s = te::create_schedule({C});
  te::Stage st = s[C];

  // 1. Declare the knobs.
  cfg.define_split("tile_y", kM, 2, SplitPolicy::kFactors, 8);
  cfg.define_split("tile_x", kN, 2, SplitPolicy::kFactors, 8);
  cfg.define_split("tile_k", kK, 2, SplitPolicy::kFactors, 8);
  cfg.define_reorder("order", 3, ReorderPolicy::kCandidates, {{0, 1, 2}, {1, 0, 2}});
  cfg.define_annotate("ann", 3, AnnotatePolicy::kTryUnrollVec);
  cfg.define_bool("parallel");
  // 2. The defaults used without tuning data.
  if (cfg.is_fallback()) {
    cfg.fallback_split("tile_y", {-1, 4});
    cfg.fallback_split("tile_x", {-1, 8});
    cfg.fallback_annotate("ann", {Annotation::kNone, Annotation::kNone, Annotation::kVectorize});
    cfg.fallback_knob("parallel", 1);
  }
  // 3. Schedule with the knobs' values.
  auto y = cfg.split("tile_y").apply(st, C->axis[0]);
  auto x = cfg.split("tile_x").apply(st, C->axis[1]);
  auto kk = cfg.split("tile_k").apply(st, k);
  st.reorder({y[0], x[0], kk[0], y[1], kk[1], x[1]});
  auto inner = cfg.reorder("order").apply(st, {y[1], kk[1], x[1]});
  cfg.annotate("ann").apply(st, inner);
  if (cfg.knob("parallel")) st.parallel(y[0]);
  return Instance{s, {A, B, C}};
}

NDArray random_array(std::vector<int64_t> shape, uint32_t seed) {
  NDArray a = NDArray::empty(std::move(shape), DataType::Float(32));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = dist(rng);
  return a;
}

NDArray poisoned(std::vector<int64_t> shape) {
  NDArray a = NDArray::empty(std::move(shape), DataType::Float(32));
  for (int64_t i = 0; i < a.numel(); ++i) {
    a.data_as<float>()[i] = std::numeric_limits<float>::quiet_NaN();
  }
  return a;
}

/// Builds `inst` for the host and checks it against naive matmul loops.
void check_matmul(const Instance& inst) {
  SCOPED_TRACE(inst.config.str());
  runtime::Module mod = kiln::build(inst.sch, inst.args, Target::host(), "mm");
  NDArray a = random_array({kM, kK}, 1), b = random_array({kK, kN}, 2), c = poisoned({kM, kN});
  mod.get_function("mm")(a, b, c);
  const float *pa = a.data_as<float>(), *pb = b.data_as<float>(), *pc = c.data_as<float>();
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) {
      double ref = 0;
      for (int k = 0; k < kK; ++k) ref += double(pa[i * kK + k]) * pb[k * kN + j];
      ASSERT_NEAR(pc[i * kN + j], ref, 1e-4) << "at (" << i << ", " << j << ")";
    }
  }
}

TEST(Template, DefineModeGivesTheSpace) {
  Template t{"matmul_tiled", "1", tiled_matmul};
  ConfigSpace space = define_space(t);
  EXPECT_EQ(space.knob_names(),
            (std::vector<std::string>{"tile_y", "tile_x", "tile_k", "order", "ann", "parallel"}));
  // Inner factors <= 8: 24 -> 1 2 3 4 6 8; 32 -> 1 2 4 8; 20 -> 1 2 4 5.
  EXPECT_EQ(space.knob("tile_y").candidates.size(), 6u);
  EXPECT_EQ(space.knob("tile_x").candidates.size(), 4u);
  EXPECT_EQ(space.knob("tile_k").candidates.size(), 4u);
  EXPECT_EQ(space.size(), 6u * 4 * 4 * 2 * 12 * 2);
  EXPECT_NEAR(space.log10_size(), std::log10(4608.0), 1e-12);
  // The point shown in docs/template-api.md.
  EXPECT_EQ(space.get(1234).to_json().dump(),
            "{\"index\":1234,\"knobs\":{\"ann\":[\"unroll\",\"none\",\"none\"],"
            "\"order\":[0,1,2],\"parallel\":0,\"tile_k\":[4,5],\"tile_x\":[16,2],"
            "\"tile_y\":[4,6]}}");
}

TEST(Template, FallbackGivesTheDeclaredDefault) {
  Instance inst = instantiate(tiled_matmul, Config::fallback());
  EXPECT_TRUE(inst.config.is_fallback());
  EXPECT_EQ(inst.config.str(),
            "tile_y=[6,4] tile_x=[4,8] tile_k=[4,5] order=[0,1,2] ann=[none,none,vec] "
            "parallel=1");
  // The schedule is the default's: six loops, the innermost vectorized, the outermost parallel.
  te::Stage st = inst.sch[inst.args[2]];
  ASSERT_EQ(st->leaf_iter_vars.size(), 6u);
  EXPECT_EQ(st->iter_var_attrs[st->leaf_iter_vars[5].get()].for_kind, ir::ForKind::kVectorized);
  EXPECT_EQ(st->iter_var_attrs[st->leaf_iter_vars[0].get()].for_kind, ir::ForKind::kParallel);
  // The fallback point is a point of the template's space.
  ConfigSpace space = define_space(tiled_matmul);
  Config same = Config::from_json(inst.config.to_json(), space);
  EXPECT_EQ(same, inst.config);
  check_matmul(inst);
}

TEST(Template, ApplyModeSchedulesThePoint) {
  ConfigSpace space = define_space(tiled_matmul);
  Config c = Config::parse(R"({"knobs": {"tile_y": [-1, 3], "tile_x": [-1, 4], "tile_k": [-1, 5],
      "order": [1, 0, 2], "ann": ["unroll", "none", "vec"], "parallel": 0}})",
                           space);
  Instance inst = instantiate(tiled_matmul, c);
  EXPECT_EQ(inst.config, c);
  te::Stage st = inst.sch[inst.args[2]];
  ASSERT_EQ(st->leaf_iter_vars.size(), 6u);
  // Order (ki, yi, xi) with ki unrolled and xi vectorized; no parallel loop.
  EXPECT_EQ(st->leaf_iter_vars[3]->var.name(), "k.inner");
  EXPECT_EQ(st->iter_var_attrs[st->leaf_iter_vars[3].get()].for_kind, ir::ForKind::kUnrolled);
  EXPECT_EQ(st->iter_var_attrs[st->leaf_iter_vars[5].get()].for_kind, ir::ForKind::kVectorized);
  EXPECT_EQ(st->iter_var_attrs[st->leaf_iter_vars[0].get()].for_kind, ir::ForKind::kSerial);
  // The splits use the chosen inner factors.
  std::vector<int64_t> factors;
  for (const te::IterVarRelation& r : st->relations) {
    ASSERT_EQ(r.kind, te::IterVarRelation::kSplit);
    factors.push_back(ir::as_const_int(r.factor).value_or(-1));
  }
  EXPECT_EQ(factors, (std::vector<int64_t>{3, 4, 5}));
  check_matmul(inst);
}

TEST(Template, SampledConfigsComputeTheSameResult) {
  ConfigSpace space = define_space(tiled_matmul);
  std::mt19937_64 rng(2024);
  std::vector<uint64_t> picks = {0, space.size() - 1};
  for (int i = 0; i < 8; ++i) picks.push_back(space.random_index(rng));
  for (uint64_t idx : picks) check_matmul(instantiate(tiled_matmul, space.get(idx)));
}

TEST(Template, ApplyRejectsAForeignSpace) {
  Config other = Config::define();
  other.define_split("tile_y", kM, 2, SplitPolicy::kFactors, 8);
  Config point = other.space().get(0);
  std::string msg;
  try {
    instantiate(tiled_matmul, point);
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_EQ(msg,
            "define_split: knob 'tile_x' is not in the config space this config belongs to (it "
            "has: tile_y); was the space defined by another template or other shapes?");
  try {
    instantiate(tiled_matmul, Config::define());
    msg.clear();
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_EQ(msg, "instantiate: the config is in define mode; use define_space to get the space");
}

/// out = 2 * in + 1 over 100 elements, split by powers of two with tails.
Instance tail_template(Config& cfg) {
  constexpr int n = 100;
  auto A = te::placeholder({n}, DataType::Float(32), "A");
  auto B = te::compute(
      {n}, [&](te::Var i) { return A(i) * 2.f + 1.f; }, "B");
  te::Schedule s = te::create_schedule({B});
  te::Stage st = s[B];
  cfg.define_split("x", n, 2, SplitPolicy::kPowerOfTwo, 32, /*no_tail=*/false);
  cfg.define_annotate("ann", 2, AnnotatePolicy::kTryVec);
  auto x = cfg.split("x").apply(st, B->axis[0]);
  cfg.annotate("ann").apply(st, x);
  return Instance{s, {A, B}};
}

TEST(Template, TailSplitsBuildAndRun) {
  ConfigSpace space = define_space(tail_template);
  ASSERT_EQ(space.size(), 6u * 2);  // inner 1..32, vectorize or not
  for (uint64_t i = 0; i < space.size(); ++i) {
    Instance inst = instantiate(tail_template, space.get(i));
    SCOPED_TRACE(inst.config.str());
    runtime::Module mod = kiln::build(inst.sch, inst.args, Target::host(), "f");
    NDArray a = random_array({100}, 3), b = poisoned({100});
    mod.get_function("f")(a, b);
    for (int j = 0; j < 100; ++j) {
      ASSERT_FLOAT_EQ(b.data_as<float>()[j], a.data_as<float>()[j] * 2.f + 1.f) << j;
    }
  }
}

}  // namespace
}  // namespace kiln::autotune
