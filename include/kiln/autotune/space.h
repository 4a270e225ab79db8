/// \file space.h
/// \brief Schedule templates with knobs: config spaces and configs (TVM paper section 5.1,
/// AutoTVM's ConfigSpace / ConfigEntity / FallbackConfigEntity).
///
/// A schedule template is ordinary scheduling code that receives a `Config&` and declares its
/// knobs on it while it schedules:
///
///   auto ty = cfg.define_split("tile_y", 1024, 2, SplitPolicy::kFactors, 16);
///   cfg.fallback_split("tile_y", {-1, 8});          // the default, used without tuning data
///   std::vector<te::IterVar> y = cfg.split("tile_y").apply(s[C], C->axis[0]);  // {yo, yi}
///
/// One template runs in three modes (see docs/template-api.md):
///  - define: collects every knob and its candidates into a ConfigSpace; each define_* returns
///    the knob's default so the template can finish scheduling;
///  - apply: a concrete point of a space (one candidate per knob), e.g. from the tuner;
///  - fallback: no tuning data; each knob takes the template's declared default
///    (`fallback_*`), else a deterministic sane choice. A fallback config records its space as
///    it goes, so after the template ran it is an ordinary point that serialises like any other.
///
/// Every knob value is a vector of integers (split factors, a permutation, per-axis annotation
/// codes, or one plain value); a knob's candidates are a list of such vectors. A space is the
/// Cartesian product of its knobs' candidates; point `index` is decoded in mixed radix with the
/// first-defined knob least significant.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <random>
#include <string>
#include <vector>

#include "kiln/te/schedule.h"

namespace kiln::autotune {

/// What a knob chooses.
enum class KnobKind : uint8_t { kSplit, kReorder, kAnnotate, kChoice };
/// Candidate factors of a split knob. Inner factors (all but the first) are taken from:
/// kFactors: divisors of the extent; kPowerOfTwo: powers of two (tails allowed unless no_tail);
/// kFactorsAndSmall: divisors of the extent and every factor up to kSmallSplitFactors (with
/// no_tail false these leave a tail: register tiles over an extent few factors divide, 7 = 4 + 3).
enum class SplitPolicy : uint8_t { kFactors, kPowerOfTwo, kFactorsAndSmall };
/// The small factors kFactorsAndSmall adds: 1 .. 8.
inline constexpr int64_t kSmallSplitFactors = 8;
/// kAll: every permutation of the axes (at most 8 axes); kCandidates: an explicit list.
enum class ReorderPolicy : uint8_t { kAll, kCandidates };
/// Per-axis annotations tried. kTryUnroll: none/unroll on every axis. kTryVec: none/vectorize on
/// the innermost axis (others none). kTryUnrollVec: none/unroll on every axis and additionally
/// vectorize on the innermost.
enum class AnnotatePolicy : uint8_t { kTryUnroll, kTryVec, kTryUnrollVec };
/// One axis' annotation (its integer code is the knob value).
enum class Annotation : int64_t { kNone = 0, kUnroll = 1, kVectorize = 2 };

const char* knob_kind_name(KnobKind k);
const char* annotation_name(Annotation a);

/// One knob of a space: its name, kind and candidate values.
struct Knob {
  std::string name;
  KnobKind kind = KnobKind::kChoice;
  std::vector<std::vector<int64_t>> candidates;
  /// kSplit: the axis extent; kReorder / kAnnotate: the number of axes; kChoice: 0.
  int64_t extent = 0;
  /// The policy, printed ("factors", "power2", "factors_small", "all", "candidates", ...).
  std::string policy;
  /// Index of `value` in candidates, or -1.
  int64_t find(const std::vector<int64_t>& value) const;
  /// The value as printed by Config::str(): "[4,8]", "[none,vec]", "1".
  std::string value_str(const std::vector<int64_t>& value) const;
};

/// A split knob's value: the factors, outermost first; their product covers the extent
/// (the first factor is ceil(extent / product of the others)).
struct SplitEntity {
  std::vector<int64_t> size;
  /// Splits `axis` of `stage` into size.size() loops and returns them, outermost first.
  std::vector<te::IterVar> apply(te::Stage& stage, const te::IterVar& axis) const;
};

/// A reorder knob's value: loop i of the new order is axes[perm[i]].
struct ReorderEntity {
  std::vector<int64_t> perm;
  /// Reorders `axes` (leaf loops of `stage`) and returns them in their new order.
  std::vector<te::IterVar> apply(te::Stage& stage, const std::vector<te::IterVar>& axes) const;
};

/// An annotate knob's value: one annotation per axis.
struct AnnotateEntity {
  std::vector<Annotation> anns;
  /// Annotates axes[i] with anns[i] (unroll / vectorize / nothing).
  void apply(te::Stage& stage, const std::vector<te::IterVar>& axes) const;
};

class Config;
namespace detail {
struct SpaceNode;
}

/// An ordered set of knobs. A cheap handle: copies share the knobs. A space is complete once
/// the template that defines it returned (define_space).
class ConfigSpace {
 public:
  ConfigSpace();

  /// The knobs in definition order.
  const std::vector<Knob>& knobs() const;
  std::vector<std::string> knob_names() const;
  /// Position of the knob called `name`, or -1.
  int find(const std::string& name) const;
  /// The knob called `name`; throws naming it when the space has none.
  const Knob& knob(const std::string& name) const;

  /// Number of points: the product of the candidate counts, saturating at UINT64_MAX.
  uint64_t size() const;
  /// log10 of the number of points (exact for any space size).
  double log10_size() const;
  /// True when every point has a uint64 index (size() did not saturate).
  bool indexable() const;

  /// The point with mixed-radix `index` (first knob least significant).
  Config get(uint64_t index) const;
  /// The point choosing candidate choice[i] of knob i.
  Config at(std::vector<uint32_t> choice) const;
  /// A uniformly random point index (requires indexable()).
  uint64_t random_index(std::mt19937_64& rng) const;
  /// A uniformly random point (works for spaces of any size).
  Config random(std::mt19937_64& rng) const;
  /// `index` with one knob (among those with >= 2 candidates) changed to another candidate;
  /// `index` itself when no knob can change.
  uint64_t mutate(uint64_t index, std::mt19937_64& rng) const;
  /// Every index that differs from `index` in exactly one knob.
  std::vector<uint64_t> neighbors(uint64_t index) const;

  /// {"size": ..., "log10_size": ..., "knobs": [{"name", "kind", "policy", "extent",
  /// "num_candidates", "candidates"}]}.
  nlohmann::json to_json() const;

  bool same_as(const ConfigSpace& o) const { return n_ == o.n_; }

 private:
  friend class Config;
  std::shared_ptr<detail::SpaceNode> n_;
};

/// The mode a template runs in.
enum class ConfigMode : uint8_t { kDefine, kApply, kFallback };

/// What a template receives: collects knobs (define), or answers them (apply, fallback).
class Config {
 public:
  /// A define-mode config with an empty space.
  static Config define();
  /// A fallback config (no tuning data) with an empty space.
  static Config fallback();
  /// Parses to_json() output against `space`: every knob of the space must be present with a
  /// value among its candidates (a split's first factor may be -1), and no other knob.
  static Config from_json(const nlohmann::json& j, const ConfigSpace& space);
  /// from_json of JSON text; malformed text is an error too.
  static Config parse(const std::string& text, const ConfigSpace& space);

  ConfigMode mode() const { return mode_; }
  bool is_define() const { return mode_ == ConfigMode::kDefine; }
  bool is_fallback() const { return mode_ == ConfigMode::kFallback; }
  /// The space: in apply mode the space this is a point of; in define / fallback mode the
  /// knobs defined so far.
  const ConfigSpace& space() const { return space_; }

  // --- knob declarations (all modes). A name may be defined again only with the same
  // candidates. In define and fallback mode they return the knob's default; in apply mode the
  // chosen value.

  /// Splits an axis of `extent` into `num_outputs` factors (see SplitPolicy). `max_factor` > 0
  /// bounds every inner factor. With no_tail the inner product divides the extent.
  SplitEntity define_split(const std::string& name, int64_t extent, int num_outputs,
                           SplitPolicy policy = SplitPolicy::kFactors, int64_t max_factor = 0,
                           bool no_tail = true);
  /// The split of define_split(name, extent, factors.size()) pinned to one candidate: the one
  /// whose inner factors are factors[1..] (factors[0] may be -1). For a knob that a template
  /// tunes in one setting and that the caller fixes in another (a conv's channel blocks inside a
  /// graph whose neighbours share one layout); the template reads it with split() as usual.
  SplitEntity define_split_fixed(const std::string& name, int64_t extent,
                                 const std::vector<int64_t>& factors);
  /// Orders `num_axes` axes: every permutation, or one of `candidates` (permutations).
  ReorderEntity define_reorder(const std::string& name, int num_axes,
                               ReorderPolicy policy = ReorderPolicy::kAll,
                               const std::vector<std::vector<int64_t>>& candidates = {});
  /// Annotates `num_axes` axes (the last is the innermost).
  AnnotateEntity define_annotate(const std::string& name, int num_axes, AnnotatePolicy policy);
  /// A plain choice among `candidates` (default: the first).
  int64_t define_knob(const std::string& name, const std::vector<int64_t>& candidates);
  /// A boolean choice (candidates false, true; default false).
  bool define_bool(const std::string& name);

  // --- defaults used in fallback mode (no-ops in the other modes).

  /// The split whose factors are the largest candidates under `bounds` (one per output,
  /// -1 = unbounded), chosen innermost first (TVM's fallback_split).
  void fallback_split(const std::string& name, const std::vector<int64_t>& bounds);
  void fallback_reorder(const std::string& name, const std::vector<int64_t>& perm);
  void fallback_annotate(const std::string& name, const std::vector<Annotation>& anns);
  void fallback_knob(const std::string& name, int64_t value);

  // --- current values of defined knobs.

  SplitEntity split(const std::string& name) const;
  ReorderEntity reorder(const std::string& name) const;
  AnnotateEntity annotate(const std::string& name) const;
  int64_t knob(const std::string& name) const;
  /// The raw value of any knob.
  const std::vector<int64_t>& value(const std::string& name) const;

  /// The candidate chosen per knob of space().
  const std::vector<uint32_t>& choice() const { return choice_; }
  /// The mixed-radix index in space() (requires space().indexable()).
  uint64_t index() const;
  /// "tile_y=[4,8] order=[0,2,1] ann=[none,vec] unroll_k=1".
  std::string str() const;
  /// {"index": 123, "knobs": {"tile_y": [4, 8], "ann": ["none", "vec"], "unroll_k": 1}}
  /// ("index" only when the space is indexable).
  nlohmann::json to_json() const;

  /// Same space (identity) and same choices.
  bool operator==(const Config& o) const;
  bool operator!=(const Config& o) const { return !(*this == o); }

 private:
  Config(ConfigMode mode, ConfigSpace space) : mode_(mode), space_(std::move(space)) {}
  friend class ConfigSpace;
  /// Defines (or checks) a knob; returns its position.
  int declare(Knob knob, uint32_t default_choice);
  int require(const std::string& name, KnobKind kind, const char* what) const;
  void set_fallback(const std::string& name, KnobKind kind, const std::vector<int64_t>& value,
                    const char* what);

  ConfigMode mode_ = ConfigMode::kApply;
  ConfigSpace space_;
  std::vector<uint32_t> choice_;
};

}  // namespace kiln::autotune
