// Config spaces and configs: hand-counted space sizes per knob kind, fallback defaults, index and
// JSON round trips on random points, mutation, and the error messages of bad declarations and
// bad JSON.
#include "kiln/autotune/space.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "common/error.h"
#include "kiln/support/error.h"

namespace kiln::autotune {
namespace {

using nlohmann::json;

using ::kiln::testing::error_of;

uint64_t split_size(int64_t extent, int n, SplitPolicy p, int64_t max_factor = 0,
                    bool no_tail = true) {
  Config c = Config::define();
  c.define_split("s", extent, n, p, max_factor, no_tail);
  return c.space().size();
}

TEST(ConfigSpace, SplitSizes) {
  // Ordered factorizations of 2^10 into 3 parts: exponents a+b+c = 10, C(12,2) = 66.
  EXPECT_EQ(split_size(1024, 3, SplitPolicy::kFactors), 66u);
  EXPECT_EQ(split_size(1024, 3, SplitPolicy::kPowerOfTwo), 66u);
  EXPECT_EQ(split_size(1024, 2, SplitPolicy::kFactors), 11u);
  EXPECT_EQ(split_size(1024, 1, SplitPolicy::kFactors), 1u);
  // 1000 = 2^3 5^3: 16 divisors; into 3 parts C(5,2)^2 = 100.
  EXPECT_EQ(split_size(1000, 2, SplitPolicy::kFactors), 16u);
  EXPECT_EQ(split_size(1000, 3, SplitPolicy::kFactors), 100u);
  // Powers of two with tails: 2^(a+b) <= 1000, a+b <= 9: C(11,2) = 55; without tails
  // 2^(a+b) | 1000, a+b <= 3: C(5,2) = 10.
  EXPECT_EQ(split_size(1000, 3, SplitPolicy::kPowerOfTwo, 0, false), 55u);
  EXPECT_EQ(split_size(1000, 3, SplitPolicy::kPowerOfTwo, 0, true), 10u);
  // max_factor bounds the inner factors: 64 into 2 with inner <= 16: 1, 2, 4, 8, 16.
  EXPECT_EQ(split_size(64, 2, SplitPolicy::kFactors, 16), 5u);
  // A prime extent: 1 and 13.
  EXPECT_EQ(split_size(13, 2, SplitPolicy::kFactors), 2u);
  // Divisors and every factor up to 8 with a tail: 14 -> 1..8 and 14; 7 -> 1..7. Without
  // tails only the divisors remain (1, 2, 7, 14).
  EXPECT_EQ(split_size(14, 2, SplitPolicy::kFactorsAndSmall, 32, false), 9u);
  EXPECT_EQ(split_size(7, 2, SplitPolicy::kFactorsAndSmall, 32, false), 7u);
  EXPECT_EQ(split_size(14, 2, SplitPolicy::kFactorsAndSmall, 32, true), 4u);
}

TEST(ConfigSpace, SplitCandidates) {
  Config c = Config::define();
  c.define_split("s", 100, 2, SplitPolicy::kPowerOfTwo, 0, false);
  const Knob& k = c.space().knob("s");
  std::vector<std::vector<int64_t>> want = {{100, 1}, {50, 2}, {25, 4}, {13, 8},
                                            {7, 16},  {4, 32}, {2, 64}};
  EXPECT_EQ(k.candidates, want);
  Config t = Config::define();
  t.define_split("w", 7, 2, SplitPolicy::kFactorsAndSmall, 32, false);
  EXPECT_EQ(t.space().knob("w").policy, "factors_small_tail");
  EXPECT_EQ(t.space().knob("w").candidates[3], (std::vector<int64_t>{2, 4}));  // 7 = 4 + 3
  Config d = Config::define();
  d.define_split("s", 12, 3);
  EXPECT_EQ(d.space().knob("s").candidates.size(), 18u);  // (2^2 3): C(4,2) * C(3,2)
  EXPECT_EQ(d.space().knob("s").candidates[0], (std::vector<int64_t>{12, 1, 1}));
  for (const auto& v : d.space().knob("s").candidates) EXPECT_EQ(v[0] * v[1] * v[2], 12);
  // The largest accepted extent, 2^31 - 1 (a prime): divisors 1 and itself.
  Config big = Config::define();
  const int64_t p = 2147483647;
  big.define_split("p", p, 2);
  EXPECT_EQ(big.space().knob("p").candidates, (std::vector<std::vector<int64_t>>{{p, 1}, {1, p}}));
}

TEST(ConfigSpace, FixedSplitHasOneCandidate) {
  Config d = Config::define();
  SplitEntity s = d.define_split_fixed("tile_c", 48, {-1, 16});
  EXPECT_EQ(s.size, (std::vector<int64_t>{3, 16}));
  d.define_split("tile_x", 12, 2);
  EXPECT_EQ(d.space().size(), 6u);  // 1 x the 6 divisors of 12
  EXPECT_EQ(d.space().knob("tile_c").candidates, (std::vector<std::vector<int64_t>>{{3, 16}}));
  // Every point of the space carries the fixed split, and parses back.
  for (uint64_t i = 0; i < d.space().size(); ++i) {
    Config c = d.space().get(i);
    EXPECT_EQ(c.split("tile_c").size, (std::vector<int64_t>{3, 16}));
    EXPECT_EQ(Config::from_json(c.to_json(), d.space()), c);
  }
  // Defined again the same way (a schedule re-declaring its knobs): the same knob.
  d.define_split_fixed("tile_c", 48, {-1, 16});
  EXPECT_EQ(d.space().knobs().size(), 2u);
  // A split that another setting of the template made, with the same inner factor, parses; one
  // with another factor does not.
  Config free = Config::define();
  free.define_split("tile_c", 48, 2);
  free.define_split("tile_x", 12, 2);
  json same = free.to_json(), other = free.to_json();
  same["knobs"]["tile_c"] = {3, 16};
  same.erase("index");
  other["knobs"]["tile_c"] = {6, 8};
  other.erase("index");
  EXPECT_EQ(Config::from_json(same, d.space()).split("tile_c").size, (std::vector<int64_t>{3, 16}));
  EXPECT_THROW(Config::from_json(other, d.space()), Error);
  Config bad = Config::define();
  EXPECT_EQ(error_of([&] {
              bad.define_split_fixed("tile_c", 48, {-1, 10});
            }),
            "define_split_fixed: knob 'tile_c': the factors [-1,10] are not a split of the "
            "extent 48");
}

TEST(ConfigSpace, ReorderAnnotateKnobSizes) {
  Config c = Config::define();
  c.define_reorder("all4", 4);
  c.define_reorder("two", 3, ReorderPolicy::kCandidates, {{0, 1, 2}, {2, 0, 1}});
  c.define_annotate("u", 3, AnnotatePolicy::kTryUnroll);
  c.define_annotate("v", 3, AnnotatePolicy::kTryVec);
  c.define_annotate("uv", 3, AnnotatePolicy::kTryUnrollVec);
  c.define_knob("block", {4, 8, 16});
  c.define_bool("flag");
  const ConfigSpace& s = c.space();
  EXPECT_EQ(s.knob("all4").candidates.size(), 24u);
  EXPECT_EQ(s.knob("two").candidates.size(), 2u);
  EXPECT_EQ(s.knob("u").candidates.size(), 8u);
  EXPECT_EQ(s.knob("v").candidates.size(), 2u);
  EXPECT_EQ(s.knob("uv").candidates.size(), 12u);  // 2 * 2 * 3
  EXPECT_EQ(s.size(), 24u * 2 * 8 * 2 * 12 * 3 * 2);
  EXPECT_NEAR(s.log10_size(), std::log10(24.0 * 2 * 8 * 2 * 12 * 3 * 2), 1e-12);
  EXPECT_EQ(s.knob_names(),
            (std::vector<std::string>{"all4", "two", "u", "v", "uv", "block", "flag"}));
  // Vectorize only ever on the innermost axis.
  for (const auto& v : s.knob("uv").candidates) {
    EXPECT_NE(v[0], static_cast<int64_t>(Annotation::kVectorize));
    EXPECT_NE(v[1], static_cast<int64_t>(Annotation::kVectorize));
  }
  json j = s.to_json();
  EXPECT_EQ(j["size"], s.size());
  EXPECT_EQ(j["knobs"][0]["kind"], "reorder");
  EXPECT_EQ(j["knobs"][0]["num_candidates"], 24);
  EXPECT_EQ(j["knobs"][4]["candidates"][11], json({"unroll", "unroll", "vec"}));
  EXPECT_EQ(j["knobs"][5]["candidates"], json({4, 8, 16}));
}

TEST(ConfigSpace, HugeSpaceSaturates) {
  Config c = Config::define();
  for (int i = 0; i < 5; ++i) c.define_reorder("r" + std::to_string(i), 8);  // 40320^5 ~ 1e23
  const ConfigSpace& s = c.space();
  EXPECT_EQ(s.size(), std::numeric_limits<uint64_t>::max());
  EXPECT_FALSE(s.indexable());
  EXPECT_NEAR(s.log10_size(), 5 * std::log10(40320.0), 1e-9);
  std::mt19937_64 rng(7);
  Config p = s.random(rng);
  json j = p.to_json();
  EXPECT_FALSE(j.contains("index"));
  EXPECT_EQ(Config::from_json(j, s), p);
  EXPECT_NE(error_of([&] { s.get(0); }).find("do not fit a 64-bit index"), std::string::npos);
}

TEST(Config, DefineModeDefaults) {
  Config c = Config::define();
  EXPECT_TRUE(c.is_define());
  EXPECT_EQ(c.define_split("a", 1024, 3).size, (std::vector<int64_t>{64, 1, 16}));
  EXPECT_EQ(c.define_split("b", 1000, 2).size, (std::vector<int64_t>{100, 10}));
  EXPECT_EQ(c.define_split("c", 7, 2).size, (std::vector<int64_t>{1, 7}));
  EXPECT_EQ(c.define_reorder("r", 3).perm, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(c.define_annotate("an", 2, AnnotatePolicy::kTryUnrollVec).anns,
            (std::vector<Annotation>{Annotation::kNone, Annotation::kNone}));
  EXPECT_EQ(c.define_knob("k", {3, 5}), 3);
  EXPECT_FALSE(c.define_bool("f"));
  // Redefining with the same candidates returns the same knob.
  EXPECT_EQ(c.define_split("a", 1024, 3).size, (std::vector<int64_t>{64, 1, 16}));
  EXPECT_EQ(c.space().knobs().size(), 7u);
  EXPECT_EQ(c.str(), "a=[64,1,16] b=[100,10] c=[1,7] r=[0,1,2] an=[none,none] k=3 f=0");
}

TEST(Config, FallbackDefaults) {
  Config c = Config::fallback();
  c.define_split("x", 100, 2);
  c.define_split("p", 100, 2, SplitPolicy::kPowerOfTwo, 0, false);
  c.define_split("t", 1024, 3);
  c.define_reorder("r", 3);
  c.define_annotate("an", 2, AnnotatePolicy::kTryUnrollVec);
  c.define_knob("k", {3, 5});
  c.fallback_split("x", {-1, 8});  // largest divisor of 100 <= 8
  c.fallback_split("p", {-1, 8});  // tail split 13 x 8
  c.fallback_split("t", {-1, 4, 32});
  c.fallback_reorder("r", {2, 0, 1});
  c.fallback_annotate("an", {Annotation::kUnroll, Annotation::kVectorize});
  c.fallback_knob("k", 5);
  EXPECT_EQ(c.split("x").size, (std::vector<int64_t>{20, 5}));
  EXPECT_EQ(c.split("p").size, (std::vector<int64_t>{13, 8}));
  EXPECT_EQ(c.split("t").size, (std::vector<int64_t>{8, 4, 32}));
  EXPECT_EQ(c.reorder("r").perm, (std::vector<int64_t>{2, 0, 1}));
  EXPECT_EQ(c.knob("k"), 5);
  EXPECT_EQ(c.str(), "x=[20,5] p=[13,8] t=[8,4,32] r=[2,0,1] an=[unroll,vec] k=5");
  // The same calls in define mode leave the defaults.
  Config d = Config::define();
  d.define_split("x", 100, 2);
  d.fallback_split("x", {-1, 8});
  EXPECT_EQ(d.split("x").size, (std::vector<int64_t>{10, 10}));
  // A fallback config is a point of its space and serialises like any other.
  EXPECT_EQ(Config::from_json(c.to_json(), c.space()), c);
}

TEST(Config, IndexRoundTripAndMutation) {
  Config d = Config::define();
  d.define_split("a", 64, 3);
  d.define_reorder("r", 3);
  d.define_annotate("an", 2, AnnotatePolicy::kTryUnrollVec);
  d.define_knob("k", {1, 2, 4});
  d.define_knob("one", {7});  // a knob with a single candidate never mutates
  const ConfigSpace s = d.space();
  ASSERT_EQ(s.size(), 28u * 6 * 6 * 3);
  for (uint64_t i = 0; i < s.size(); i += 37) EXPECT_EQ(s.get(i).index(), i);
  EXPECT_EQ(s.get(s.size() - 1).index(), s.size() - 1);
  // Index 0 picks the first candidate of each knob; the first knob is least significant.
  EXPECT_EQ(s.get(0).str(), "a=[64,1,1] r=[0,1,2] an=[none,none] k=1 one=7");
  EXPECT_EQ(s.get(1).str(), "a=[32,1,2] r=[0,1,2] an=[none,none] k=1 one=7");
  EXPECT_EQ(s.get(28).str(), "a=[64,1,1] r=[0,2,1] an=[none,none] k=1 one=7");
  std::mt19937_64 rng(1234);
  for (int t = 0; t < 50; ++t) {
    uint64_t i = s.random_index(rng);
    ASSERT_LT(i, s.size());
    uint64_t m = s.mutate(i, rng);
    Config a = s.get(i), b = s.get(m);
    int diff = 0;
    for (size_t k = 0; k < a.choice().size(); ++k) diff += a.choice()[k] != b.choice()[k];
    EXPECT_EQ(diff, 1) << a.str() << " vs " << b.str();
    std::vector<uint64_t> nb = s.neighbors(i);
    EXPECT_EQ(nb.size(), 27u + 5 + 5 + 2);
    for (uint64_t n : nb) {
      Config c = s.get(n);
      int d2 = 0;
      for (size_t k = 0; k < a.choice().size(); ++k) d2 += a.choice()[k] != c.choice()[k];
      EXPECT_EQ(d2, 1);
    }
  }
}

TEST(Config, JsonRoundTrip) {
  Config d = Config::define();
  d.define_split("tile", 96, 3, SplitPolicy::kFactors);
  d.define_split("tail", 100, 2, SplitPolicy::kPowerOfTwo, 32, false);
  d.define_reorder("order", 4);
  d.define_reorder("pick", 2, ReorderPolicy::kCandidates, {{1, 0}});
  d.define_annotate("ann", 3, AnnotatePolicy::kTryUnrollVec);
  d.define_knob("block", {-4, 0, 16, int64_t(1) << 40});
  d.define_bool("flag");
  const ConfigSpace s = d.space();
  std::mt19937_64 rng(99);
  for (int t = 0; t < 200; ++t) {
    Config c = s.get(s.random_index(rng));
    json j = c.to_json();
    Config back = Config::from_json(j, s);
    EXPECT_EQ(back, c);
    EXPECT_EQ(back.index(), c.index());
    EXPECT_EQ(back.to_json(), j);
    EXPECT_EQ(back.str(), c.str());
    // Through text as well.
    EXPECT_EQ(Config::parse(j.dump(), s), c);
  }
  // Golden form of one point.
  Config c = Config::parse(
      R"({"knobs": {"tile": [-1, 4, 8], "tail": [4, 32], "order": [3, 2, 1, 0], "pick": [1, 0],
          "ann": ["unroll", "none", "vec"], "block": 1099511627776, "flag": true}})",
      s);
  EXPECT_EQ(c.str(),
            "tile=[3,4,8] tail=[4,32] order=[3,2,1,0] pick=[1,0] ann=[unroll,none,vec] "
            "block=1099511627776 flag=1");
  EXPECT_EQ(c.to_json().dump(),
            "{\"index\":" + std::to_string(c.index()) +
                ",\"knobs\":{\"ann\":[\"unroll\",\"none\",\"vec\"],\"block\":1099511627776,"
                "\"flag\":1,\"order\":[3,2,1,0],\"pick\":[1,0],\"tail\":[4,32],"
                "\"tile\":[3,4,8]}}");
}

TEST(ConfigErrors, DuplicateKnob) {
  Config c = Config::define();
  c.define_split("tile", 64, 2);
  EXPECT_NE(error_of([&] {
              c.define_split("tile", 32, 2);
            }).find("define_split: knob 'tile' is defined again with different candidates"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              c.define_knob("tile", {1, 2});
            }).find("knob 'tile' is defined again with different candidates (before: split"),
            std::string::npos);
  c.define_knob("k", {1, 2});
  EXPECT_NE(error_of([&] {
              c.define_knob("k", {2, 1});
            }).find("knob 'k' is defined again"),
            std::string::npos);
}

TEST(ConfigErrors, BadDeclarations) {
  Config c = Config::define();
  EXPECT_EQ(error_of([&] { c.define_split("s", 0, 2); }),
            "define_split: knob 's': the axis extent must be positive, got 0");
  // issue 26: an extent near 2^63 (a Conv input dimension) listed its divisors for ~3e9
  // iterations and overflowed d * d; it is refused at once.
  for (SplitPolicy p : {SplitPolicy::kFactors, SplitPolicy::kPowerOfTwo}) {
    EXPECT_EQ(error_of([&] { c.define_split("big", INT64_MAX - 24, 2, p); }),
              "define_split: knob 'big': the axis extent 9223372036854775783 is larger than the "
              "largest supported extent 2147483647 (2^31 - 1)");
  }
  EXPECT_EQ(error_of([&] { c.define_knob("k", {}); }),
            "define_knob: knob 'k' needs at least one candidate");
  EXPECT_EQ(error_of([&] {
              c.define_knob("k", {1, 1});
            }),
            "define_knob: knob 'k': candidate 1 is listed twice");
  EXPECT_EQ(error_of([&] {
              c.define_reorder("r", 3, ReorderPolicy::kCandidates, {{0, 1, 1}});
            }),
            "define_reorder: knob 'r': candidate [0,1,1] is not a permutation of 0..2");
  EXPECT_NE(
      error_of([&] { c.define_reorder("r", 9); }).find("policy 'all' supports at most 8 axes"),
      std::string::npos);
  c.define_knob("k", {1, 2});
  EXPECT_EQ(error_of([&] { c.fallback_knob("k", 3); }),
            "fallback_knob: knob 'k': 3 is not among its candidates (1, 2)");
  EXPECT_EQ(error_of([&] { c.split("k"); }), "split: knob 'k' is a choice knob, not a split knob");
  EXPECT_EQ(error_of([&] { c.knob("nope"); }),
            "knob: knob 'nope' is not defined (define mode); define it first");
  c.define_split("s", 16, 2);
  EXPECT_EQ(error_of([&] {
              c.fallback_split("s", {-1, 4, 4});
            }),
            "fallback_split: knob 's' has 2 factors, but 3 bounds were given");
}

TEST(ConfigErrors, BadJson) {
  Config d = Config::define();
  d.define_split("tile", 64, 2);
  d.define_annotate("ann", 2, AnnotatePolicy::kTryVec);
  d.define_knob("k", {1, 2});
  const ConfigSpace s = d.space();
  auto parse_err = [&](const std::string& text) {
    return error_of([&] { Config::parse(text, s); });
  };
  EXPECT_NE(parse_err("{\"knobs\": {").find("config JSON: cannot parse"), std::string::npos);
  EXPECT_EQ(parse_err("[1, 2]"),
            "config JSON: expected an object with a \"knobs\" object, got [1,2]");
  const std::string ok_ann = "\"ann\": [\"none\", \"vec\"]";
  EXPECT_EQ(parse_err("{\"knobs\": {\"tile\": [8, 8], " + ok_ann + ", \"k\": 1, \"zz\": 3}}"),
            "config JSON: unknown knob 'zz'; the space has: tile, ann, k");
  EXPECT_EQ(parse_err("{\"knobs\": {\"tile\": [8, 8], " + ok_ann + "}}"),
            "config JSON: knob 'k' is missing");
  EXPECT_EQ(parse_err("{\"knobs\": {\"tile\": [3, 7], " + ok_ann + ", \"k\": 1}}"),
            "config JSON: knob 'tile': value [3,7] is not among its 7 candidates ([64,1], "
            "[32,2], [16,4], [8,8], [4,16], [2,32], [1,64])");
  EXPECT_EQ(parse_err("{\"knobs\": {\"tile\": [8, 8], " + ok_ann + ", \"k\": 3}}"),
            "config JSON: knob 'k': value 3 is not among its 2 candidates (1, 2)");
  EXPECT_EQ(parse_err("{\"knobs\": {\"tile\": [8, 8], \"ann\": [\"vec\", \"none\"], \"k\": 1}}"),
            "config JSON: knob 'ann': value [vec,none] is not among its 2 candidates "
            "([none,none], [none,vec])");
  EXPECT_EQ(parse_err("{\"knobs\": {\"tile\": [8, 8], \"ann\": [\"fast\", \"none\"], \"k\": 1}}"),
            "config JSON: knob 'ann': unknown annotation \"fast\" (expected none, unroll or vec)");
  EXPECT_EQ(parse_err("{\"knobs\": {\"tile\": 8, " + ok_ann + ", \"k\": 1}}"),
            "config JSON: knob 'tile': expected an array, got 8");
  EXPECT_EQ(parse_err("{\"index\": 5, \"knobs\": {\"tile\": [8, 8], " + ok_ann + ", \"k\": 1}}"),
            "config JSON: index 5 does not match the knob values (they give index 10)");
  // -1 as the first split factor means "the rest".
  EXPECT_EQ(Config::parse("{\"knobs\": {\"tile\": [-1, 8], " + ok_ann + ", \"k\": 1}}", s).str(),
            "tile=[8,8] ann=[none,vec] k=1");
}

}  // namespace
}  // namespace kiln::autotune
