// Config spaces: enumeration of each knob kind's candidates and the mixed-radix numbering of a
// space's points. A split knob's candidates are the tuples of inner factors (drawn from the
// extent's divisors, or from powers of two) enumerated depth-first in lexicographic order with
// the product pruned at the extent; the first factor is then the rest, ceil(extent / product).
// Reorders are permutations in lexicographic order (std::next_permutation), annotations a
// product of per-axis choices. Point `index` of a space picks candidate (index / R_i) % n_i of
// knob i, where R_i is the product of the candidate counts of the knobs before it; sizes
// saturate at UINT64_MAX and log10_size sums logarithms so huge spaces are still measured.
#include "kiln/autotune/space.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "kiln/support/error.h"
#include "space_node.h"

namespace kiln::autotune {

using nlohmann::json;

const char* knob_kind_name(KnobKind k) {
  switch (k) {
    case KnobKind::kSplit:
      return "split";
    case KnobKind::kReorder:
      return "reorder";
    case KnobKind::kAnnotate:
      return "annotate";
    case KnobKind::kChoice:
      return "choice";
  }
  return "?";
}

const char* annotation_name(Annotation a) {
  switch (a) {
    case Annotation::kNone:
      return "none";
    case Annotation::kUnroll:
      return "unroll";
    case Annotation::kVectorize:
      return "vec";
  }
  return "?";
}

int64_t Knob::find(const std::vector<int64_t>& value) const {
  auto it = std::find(candidates.begin(), candidates.end(), value);
  return it == candidates.end() ? -1 : static_cast<int64_t>(it - candidates.begin());
}

std::string Knob::value_str(const std::vector<int64_t>& value) const {
  std::ostringstream os;
  if (kind == KnobKind::kChoice && value.size() == 1) {
    os << value[0];
    return os.str();
  }
  os << "[";
  for (size_t i = 0; i < value.size(); ++i) {
    if (i) os << ",";
    if (kind == KnobKind::kAnnotate) {
      os << annotation_name(static_cast<Annotation>(value[i]));
    } else {
      os << value[i];
    }
  }
  os << "]";
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// Candidate enumeration

namespace detail {
namespace {

/// The largest axis extent a split knob accepts: loop indices are 32-bit, and listing the
/// divisors of a larger extent would take seconds. A larger extent is a user error.
constexpr int64_t kMaxSplitExtent = 2147483647;  // 2^31 - 1

/// The divisors of n >= 1, ascending; at most sqrt(n) trial divisions (d <= n / d, which
/// cannot overflow as d * d <= n would near 2^63).
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> lo, hi;
  for (int64_t d = 1; d <= n / d; ++d) {
    if (n % d) continue;
    lo.push_back(d);
    if (d != n / d) hi.push_back(n / d);
  }
  lo.insert(lo.end(), hi.rbegin(), hi.rend());
  return lo;
}

void enumerate_split(const std::vector<int64_t>& factors, int64_t extent, int remaining,
                     bool no_tail, std::vector<int64_t>& stack, int64_t product,
                     std::vector<std::vector<int64_t>>& out) {
  if (remaining == 0) {
    if (no_tail && extent % product != 0) return;
    std::vector<int64_t> v;
    v.push_back((extent + product - 1) / product);
    v.insert(v.end(), stack.begin(), stack.end());
    out.push_back(std::move(v));
    return;
  }
  for (int64_t f : factors) {
    if (product > extent / f) break;  // factors ascend: product * f > extent from here on
    stack.push_back(f);
    enumerate_split(factors, extent, remaining - 1, no_tail, stack, product * f, out);
    stack.pop_back();
  }
}

}  // namespace

int64_t split_rest(int64_t extent, const std::vector<int64_t>& factors) {
  int64_t p = 1;
  for (size_t i = 1; i < factors.size(); ++i) p *= factors[i];
  return (extent + p - 1) / p;
}

Knob make_split_knob(const std::string& name, int64_t extent, int num_outputs, SplitPolicy policy,
                     int64_t max_factor, bool no_tail) {
  KILN_USER_CHECK(extent >= 1) << "define_split: knob '" << name
                               << "': the axis extent must be positive, got " << extent;
  KILN_USER_CHECK(extent <= kMaxSplitExtent)
      << "define_split: knob '" << name << "': the axis extent " << extent
      << " is larger than the largest supported extent " << kMaxSplitExtent << " (2^31 - 1)";
  KILN_USER_CHECK(num_outputs >= 1 && num_outputs <= 8)
      << "define_split: knob '" << name << "': num_outputs must be in [1, 8], got " << num_outputs;
  KILN_USER_CHECK(max_factor >= 0)
      << "define_split: knob '" << name << "': max_factor must be >= 0 (0 = no bound), got "
      << max_factor;
  std::vector<int64_t> factors;
  if (policy == SplitPolicy::kPowerOfTwo) {
    for (int64_t f = 1; f <= extent; f *= 2) factors.push_back(f);  // extent < 2^31: no overflow
  } else {
    factors = divisors(extent);
    if (policy == SplitPolicy::kFactorsAndSmall) {
      for (int64_t f = 2; f <= std::min(extent, kSmallSplitFactors); ++f) factors.push_back(f);
      std::sort(factors.begin(), factors.end());
      factors.erase(std::unique(factors.begin(), factors.end()), factors.end());
    }
  }
  if (max_factor > 0) {
    std::erase_if(factors, [&](int64_t f) { return f > max_factor; });
  }
  Knob k;
  k.name = name;
  k.kind = KnobKind::kSplit;
  k.extent = extent;
  k.policy = policy == SplitPolicy::kFactors      ? "factors"
             : policy == SplitPolicy::kPowerOfTwo ? "power2"
                                                  : "factors_small";
  if (!no_tail) k.policy += "_tail";
  std::vector<int64_t> stack;
  enumerate_split(factors, extent, num_outputs - 1, no_tail, stack, 1, k.candidates);
  KILN_ICHECK(!k.candidates.empty()) << "split knob '" << name << "' has no candidates";
  return k;
}

Knob make_reorder_knob(const std::string& name, int num_axes, ReorderPolicy policy,
                       const std::vector<std::vector<int64_t>>& candidates) {
  KILN_USER_CHECK(num_axes >= 1) << "define_reorder: knob '" << name
                                 << "': num_axes must be positive, got " << num_axes;
  Knob k;
  k.name = name;
  k.kind = KnobKind::kReorder;
  k.extent = num_axes;
  std::vector<int64_t> identity(num_axes);
  std::iota(identity.begin(), identity.end(), 0);
  if (policy == ReorderPolicy::kAll) {
    KILN_USER_CHECK(num_axes <= 8)
        << "define_reorder: knob '" << name << "': policy 'all' supports at most 8 axes, got "
        << num_axes << "; list the candidate orders instead";
    KILN_USER_CHECK(candidates.empty())
        << "define_reorder: knob '" << name
        << "': candidate orders are given but the policy is 'all' (use kCandidates)";
    k.policy = "all";
    std::vector<int64_t> p = identity;
    do {
      k.candidates.push_back(p);
    } while (std::next_permutation(p.begin(), p.end()));
    return k;
  }
  k.policy = "candidates";
  KILN_USER_CHECK(!candidates.empty())
      << "define_reorder: knob '" << name << "': policy 'candidates' needs at least one order";
  for (const auto& c : candidates) {
    std::vector<int64_t> sorted = c;
    std::sort(sorted.begin(), sorted.end());
    KILN_USER_CHECK(sorted == identity)
        << "define_reorder: knob '" << name << "': candidate " << k.value_str(c)
        << " is not a permutation of 0.." << num_axes - 1;
    KILN_USER_CHECK(k.find(c) < 0) << "define_reorder: knob '" << name << "': candidate "
                                   << k.value_str(c) << " is listed twice";
    k.candidates.push_back(c);
  }
  return k;
}

Knob make_annotate_knob(const std::string& name, int num_axes, AnnotatePolicy policy) {
  KILN_USER_CHECK(num_axes >= 1 && num_axes <= 16)
      << "define_annotate: knob '" << name << "': num_axes must be in [1, 16], got " << num_axes;
  Knob k;
  k.name = name;
  k.kind = KnobKind::kAnnotate;
  k.extent = num_axes;
  const int64_t none = static_cast<int64_t>(Annotation::kNone);
  const int64_t unroll = static_cast<int64_t>(Annotation::kUnroll);
  const int64_t vec = static_cast<int64_t>(Annotation::kVectorize);
  std::vector<std::vector<int64_t>> per_axis(num_axes, {none});
  switch (policy) {
    case AnnotatePolicy::kTryUnroll:
      k.policy = "try_unroll";
      for (auto& a : per_axis) a = {none, unroll};
      break;
    case AnnotatePolicy::kTryVec:
      k.policy = "try_vec";
      per_axis.back() = {none, vec};
      break;
    case AnnotatePolicy::kTryUnrollVec:
      k.policy = "try_unroll_vec";
      for (auto& a : per_axis) a = {none, unroll};
      per_axis.back() = {none, unroll, vec};
      break;
  }
  // Lexicographic product, the last axis varying fastest.
  std::vector<size_t> pos(num_axes, 0);
  while (true) {
    std::vector<int64_t> v(num_axes);
    for (int i = 0; i < num_axes; ++i) v[i] = per_axis[i][pos[i]];
    k.candidates.push_back(std::move(v));
    int i = num_axes - 1;
    while (i >= 0 && ++pos[i] == per_axis[i].size()) pos[i--] = 0;
    if (i < 0) break;
  }
  return k;
}

Knob make_choice_knob(const std::string& name, const std::vector<int64_t>& candidates) {
  KILN_USER_CHECK(!candidates.empty())
      << "define_knob: knob '" << name << "' needs at least one candidate";
  Knob k;
  k.name = name;
  k.kind = KnobKind::kChoice;
  k.policy = "candidates";
  for (int64_t c : candidates) {
    KILN_USER_CHECK(k.find({c}) < 0)
        << "define_knob: knob '" << name << "': candidate " << c << " is listed twice";
    k.candidates.push_back({c});
  }
  return k;
}

uint32_t pick_split(const Knob& k, const std::vector<int64_t>& bounds) {
  const size_t n = k.candidates[0].size();
  KILN_USER_CHECK(bounds.size() == n) << "fallback_split: knob '" << k.name << "' has " << n
                                      << " factors, but " << bounds.size() << " bounds were given";
  std::vector<uint32_t> alive(k.candidates.size());
  std::iota(alive.begin(), alive.end(), 0u);
  for (size_t i = n; i-- > 1;) {
    const int64_t b = bounds[i];
    KILN_USER_CHECK(b == -1 || b >= 1)
        << "fallback_split: knob '" << k.name << "': bound " << b << " of factor " << i
        << " must be positive or -1 (unbounded)";
    int64_t best = -1, smallest = std::numeric_limits<int64_t>::max();
    for (uint32_t c : alive) {
      int64_t f = k.candidates[c][i];
      smallest = std::min(smallest, f);
      if ((b == -1 || f <= b) && f > best) best = f;
    }
    if (best < 0) best = smallest;
    std::erase_if(alive, [&](uint32_t c) { return k.candidates[c][i] != best; });
  }
  KILN_ICHECK(alive.size() == 1) << "split knob '" << k.name << "': ambiguous fallback";
  return alive[0];
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// ConfigSpace

ConfigSpace::ConfigSpace() : n_(std::make_shared<detail::SpaceNode>()) {}

const std::vector<Knob>& ConfigSpace::knobs() const { return n_->knobs; }

std::vector<std::string> ConfigSpace::knob_names() const {
  std::vector<std::string> names;
  for (const Knob& k : n_->knobs) names.push_back(k.name);
  return names;
}

int ConfigSpace::find(const std::string& name) const {
  auto it = n_->by_name.find(name);
  return it == n_->by_name.end() ? -1 : it->second;
}

namespace {
std::string names_list(const ConfigSpace& s) {
  std::string out;
  for (const Knob& k : s.knobs()) out += (out.empty() ? "" : ", ") + k.name;
  return out.empty() ? "(none)" : out;
}
}  // namespace

const Knob& ConfigSpace::knob(const std::string& name) const {
  int i = find(name);
  KILN_USER_CHECK(i >= 0) << "config space: no knob '" << name
                          << "'; the space has: " << names_list(*this);
  return n_->knobs[i];
}

uint64_t ConfigSpace::size() const {
  uint64_t s = 1;
  for (const Knob& k : n_->knobs) {
    uint64_t c = k.candidates.size();
    if (s > std::numeric_limits<uint64_t>::max() / c) return std::numeric_limits<uint64_t>::max();
    s *= c;
  }
  return s;
}

double ConfigSpace::log10_size() const {
  double s = 0;
  for (const Knob& k : n_->knobs) s += std::log10(static_cast<double>(k.candidates.size()));
  return s;
}

bool ConfigSpace::indexable() const {
  uint64_t s = 1;
  for (const Knob& k : n_->knobs) {
    uint64_t c = k.candidates.size();
    if (s > std::numeric_limits<uint64_t>::max() / c) return false;
    s *= c;
  }
  return true;
}

Config ConfigSpace::at(std::vector<uint32_t> choice) const {
  KILN_USER_CHECK(choice.size() == n_->knobs.size())
      << "config space: a point needs one choice per knob (" << n_->knobs.size() << "), got "
      << choice.size();
  for (size_t i = 0; i < choice.size(); ++i) {
    KILN_USER_CHECK(choice[i] < n_->knobs[i].candidates.size())
        << "config space: knob '" << n_->knobs[i].name << "' has " << n_->knobs[i].candidates.size()
        << " candidates; choice " << choice[i] << " is out of range";
  }
  Config c(ConfigMode::kApply, *this);
  c.choice_ = std::move(choice);
  return c;
}

Config ConfigSpace::get(uint64_t index) const {
  KILN_USER_CHECK(indexable()) << "config space: 10^" << log10_size()
                               << " points do not fit a 64-bit index; use random()/at()";
  KILN_USER_CHECK(index < size()) << "config space: index " << index
                                  << " is out of range (the space has " << size() << " points)";
  std::vector<uint32_t> choice;
  for (const Knob& k : n_->knobs) {
    choice.push_back(static_cast<uint32_t>(index % k.candidates.size()));
    index /= k.candidates.size();
  }
  return at(std::move(choice));
}

uint64_t ConfigSpace::random_index(std::mt19937_64& rng) const {
  KILN_USER_CHECK(indexable()) << "config space: 10^" << log10_size()
                               << " points do not fit a 64-bit index; use random()";
  return std::uniform_int_distribution<uint64_t>(0, size() - 1)(rng);
}

Config ConfigSpace::random(std::mt19937_64& rng) const {
  std::vector<uint32_t> choice;
  for (const Knob& k : n_->knobs) {
    choice.push_back(std::uniform_int_distribution<uint32_t>(0, k.candidates.size() - 1)(rng));
  }
  return at(std::move(choice));
}

uint64_t ConfigSpace::mutate(uint64_t index, std::mt19937_64& rng) const {
  std::vector<size_t> movable;
  for (size_t i = 0; i < n_->knobs.size(); ++i) {
    if (n_->knobs[i].candidates.size() > 1) movable.push_back(i);
  }
  Config c = get(index);
  if (movable.empty()) return index;
  size_t k = movable[std::uniform_int_distribution<size_t>(0, movable.size() - 1)(rng)];
  uint32_t n = n_->knobs[k].candidates.size();
  uint32_t v = std::uniform_int_distribution<uint32_t>(0, n - 2)(rng);
  std::vector<uint32_t> choice = c.choice();
  choice[k] = v >= choice[k] ? v + 1 : v;
  return at(std::move(choice)).index();
}

std::vector<uint64_t> ConfigSpace::neighbors(uint64_t index) const {
  Config c = get(index);
  std::vector<uint64_t> out;
  uint64_t radix = 1;
  for (size_t i = 0; i < n_->knobs.size(); ++i) {
    uint64_t n = n_->knobs[i].candidates.size();
    uint64_t base = index - c.choice()[i] * radix;
    for (uint64_t v = 0; v < n; ++v) {
      if (v != c.choice()[i]) out.push_back(base + v * radix);
    }
    radix *= n;
  }
  return out;
}

json ConfigSpace::to_json() const {
  json knobs = json::array();
  for (const Knob& k : n_->knobs) {
    json cands = json::array();
    for (const auto& v : k.candidates) {
      if (k.kind == KnobKind::kChoice) {
        cands.push_back(v[0]);
      } else if (k.kind == KnobKind::kAnnotate) {
        json a = json::array();
        for (int64_t x : v) a.push_back(annotation_name(static_cast<Annotation>(x)));
        cands.push_back(a);
      } else {
        cands.push_back(v);
      }
    }
    knobs.push_back({{"name", k.name},
                     {"kind", knob_kind_name(k.kind)},
                     {"policy", k.policy},
                     {"extent", k.extent},
                     {"num_candidates", k.candidates.size()},
                     {"candidates", cands}});
  }
  json j = {{"size", size()}, {"log10_size", log10_size()}, {"knobs", knobs}};
  return j;
}

// ---------------------------------------------------------------------------------------------
// Entities

std::vector<te::IterVar> SplitEntity::apply(te::Stage& stage, const te::IterVar& axis) const {
  KILN_USER_CHECK(!size.empty()) << "SplitEntity::apply: empty split on stage '" << stage->name()
                                 << "'";
  std::vector<te::IterVar> out(size.size());
  te::IterVar cur = axis;
  for (size_t i = size.size(); i-- > 1;) {
    KILN_USER_CHECK(size[i] >= 1 && size[i] <= std::numeric_limits<int32_t>::max())
        << "SplitEntity::apply: factor " << size[i] << " on stage '" << stage->name()
        << "' is out of range";
    auto [outer, inner] = stage.split(cur, ir::Expr(static_cast<int32_t>(size[i])));
    out[i] = inner;
    cur = outer;
  }
  out[0] = cur;
  return out;
}

std::vector<te::IterVar> ReorderEntity::apply(te::Stage& stage,
                                              const std::vector<te::IterVar>& axes) const {
  KILN_USER_CHECK(axes.size() == perm.size())
      << "ReorderEntity::apply: the order has " << perm.size() << " axes, but " << axes.size()
      << " were given (stage '" << stage->name() << "')";
  std::vector<te::IterVar> order;
  for (int64_t p : perm) order.push_back(axes.at(p));
  stage.reorder(order);
  return order;
}

void AnnotateEntity::apply(te::Stage& stage, const std::vector<te::IterVar>& axes) const {
  KILN_USER_CHECK(axes.size() == anns.size())
      << "AnnotateEntity::apply: the annotation has " << anns.size() << " axes, but " << axes.size()
      << " were given (stage '" << stage->name() << "')";
  for (size_t i = 0; i < axes.size(); ++i) {
    if (anns[i] == Annotation::kUnroll) stage.unroll(axes[i]);
    if (anns[i] == Annotation::kVectorize) stage.vectorize(axes[i]);
  }
}

}  // namespace kiln::autotune
