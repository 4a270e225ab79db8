// Configs: the object a schedule template declares its knobs on. A config holds a space and one
// chosen candidate per knob of it. In define and fallback mode each declaration appends the knob
// to the config's own space (copy-on-write, so copies of a config never see each other's knobs)
// with a default choice: the candidate named by fallback_* later, else the first candidate,
// except splits, whose default is the largest inner factor <= 16 innermost and 1 elsewhere.
// In apply mode a declaration only checks that the space has the knob with the same
// candidates and returns the chosen value. JSON holds the values by knob name; parsing looks
// each value up among its knob's candidates, so a round trip reproduces the same choices.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kiln/autotune/space.h"
#include "kiln/support/error.h"
#include "space_node.h"

namespace kiln::autotune {

using nlohmann::json;

namespace {

const char* mode_name(ConfigMode m) {
  switch (m) {
    case ConfigMode::kDefine:
      return "define";
    case ConfigMode::kApply:
      return "apply";
    case ConfigMode::kFallback:
      return "fallback";
  }
  return "?";
}

std::string candidates_str(const Knob& k, size_t limit = 8) {
  std::string s;
  for (size_t i = 0; i < k.candidates.size() && i < limit; ++i) {
    s += (i ? ", " : "") + k.value_str(k.candidates[i]);
  }
  if (k.candidates.size() > limit) s += ", ...";
  return s;
}

bool same_knob(const Knob& a, const Knob& b) {
  return a.name == b.name && a.kind == b.kind && a.candidates == b.candidates;
}

}  // namespace

Config Config::define() { return Config(ConfigMode::kDefine, ConfigSpace()); }
Config Config::fallback() { return Config(ConfigMode::kFallback, ConfigSpace()); }

int Config::declare(Knob knob, uint32_t default_choice) {
  int pos = space_.find(knob.name);
  if (pos >= 0) {
    const Knob& old = space_.knobs()[pos];
    KILN_USER_CHECK(same_knob(old, knob))
        << "define_" << knob_kind_name(knob.kind) << ": knob '" << knob.name
        << "' is defined again with different candidates (before: " << knob_kind_name(old.kind)
        << " with " << old.candidates.size() << " candidates " << candidates_str(old)
        << "; now: " << knob_kind_name(knob.kind) << " with " << knob.candidates.size()
        << " candidates " << candidates_str(knob) << ")";
    return pos;
  }
  KILN_USER_CHECK(mode_ != ConfigMode::kApply)
      << "define_" << knob_kind_name(knob.kind) << ": knob '" << knob.name
      << "' is not in the config space this config belongs to (it has: " <<
      [&] {
        std::string s;
        for (const auto& n : space_.knob_names()) s += (s.empty() ? "" : ", ") + n;
        return s.empty() ? std::string("no knobs") : s;
      }()
      << "); was the space defined by another template or other shapes?";
  if (space_.n_.use_count() > 1) space_.n_ = std::make_shared<detail::SpaceNode>(*space_.n_);
  space_.n_->add(std::move(knob));
  choice_.push_back(default_choice);
  return static_cast<int>(choice_.size()) - 1;
}

SplitEntity Config::define_split(const std::string& name, int64_t extent, int num_outputs,
                                 SplitPolicy policy, int64_t max_factor, bool no_tail) {
  Knob k = detail::make_split_knob(name, extent, num_outputs, policy, max_factor, no_tail);
  std::vector<int64_t> bounds(num_outputs, 1);
  bounds[0] = -1;
  bounds.back() = num_outputs > 1 ? 16 : -1;
  uint32_t def = detail::pick_split(k, bounds);
  int pos = declare(std::move(k), def);
  return SplitEntity{space_.knobs()[pos].candidates[choice_[pos]]};
}

SplitEntity Config::define_split_fixed(const std::string& name, int64_t extent,
                                       const std::vector<int64_t>& factors) {
  KILN_USER_CHECK(!factors.empty())
      << "define_split_fixed: knob '" << name << "' needs at least one factor";
  Knob k = detail::make_split_knob(name, extent, static_cast<int>(factors.size()),
                                   SplitPolicy::kFactors, 0, true);
  std::erase_if(k.candidates, [&](const std::vector<int64_t>& c) {
    return !std::equal(c.begin() + 1, c.end(), factors.begin() + 1);
  });
  KILN_USER_CHECK(k.candidates.size() == 1)
      << "define_split_fixed: knob '" << name << "': the factors " << k.value_str(factors)
      << " are not a split of the extent " << extent;
  k.policy = "fixed";
  int pos = declare(std::move(k), 0);
  return SplitEntity{space_.knobs()[pos].candidates[choice_[pos]]};
}

ReorderEntity Config::define_reorder(const std::string& name, int num_axes, ReorderPolicy policy,
                                     const std::vector<std::vector<int64_t>>& candidates) {
  int pos = declare(detail::make_reorder_knob(name, num_axes, policy, candidates), 0);
  return ReorderEntity{space_.knobs()[pos].candidates[choice_[pos]]};
}

AnnotateEntity Config::define_annotate(const std::string& name, int num_axes,
                                       AnnotatePolicy policy) {
  declare(detail::make_annotate_knob(name, num_axes, policy), 0);
  return annotate(name);
}

int64_t Config::define_knob(const std::string& name, const std::vector<int64_t>& candidates) {
  int pos = declare(detail::make_choice_knob(name, candidates), 0);
  return space_.knobs()[pos].candidates[choice_[pos]][0];
}

bool Config::define_bool(const std::string& name) { return define_knob(name, {0, 1}) != 0; }

int Config::require(const std::string& name, KnobKind kind, const char* what) const {
  int pos = space_.find(name);
  KILN_USER_CHECK(pos >= 0) << what << ": knob '" << name << "' is not defined ("
                            << mode_name(mode_) << " mode); define it first";
  const Knob& k = space_.knobs()[pos];
  KILN_USER_CHECK(k.kind == kind) << what << ": knob '" << name << "' is a "
                                  << knob_kind_name(k.kind) << " knob, not a "
                                  << knob_kind_name(kind) << " knob";
  KILN_ICHECK(static_cast<size_t>(pos) < choice_.size()) << "config lacks a choice for " << name;
  return pos;
}

void Config::set_fallback(const std::string& name, KnobKind kind, const std::vector<int64_t>& value,
                          const char* what) {
  int pos = require(name, kind, what);
  const Knob& k = space_.knobs()[pos];
  int64_t c = k.find(value);
  KILN_USER_CHECK(c >= 0) << what << ": knob '" << name << "': " << k.value_str(value)
                          << " is not among its candidates (" << candidates_str(k) << ")";
  if (mode_ == ConfigMode::kFallback) choice_[pos] = static_cast<uint32_t>(c);
}

void Config::fallback_split(const std::string& name, const std::vector<int64_t>& bounds) {
  int pos = require(name, KnobKind::kSplit, "fallback_split");
  uint32_t c = detail::pick_split(space_.knobs()[pos], bounds);
  if (mode_ == ConfigMode::kFallback) choice_[pos] = c;
}

void Config::fallback_reorder(const std::string& name, const std::vector<int64_t>& perm) {
  set_fallback(name, KnobKind::kReorder, perm, "fallback_reorder");
}

void Config::fallback_annotate(const std::string& name, const std::vector<Annotation>& anns) {
  std::vector<int64_t> v;
  for (Annotation a : anns) v.push_back(static_cast<int64_t>(a));
  set_fallback(name, KnobKind::kAnnotate, v, "fallback_annotate");
}

void Config::fallback_knob(const std::string& name, int64_t value) {
  set_fallback(name, KnobKind::kChoice, {value}, "fallback_knob");
}

SplitEntity Config::split(const std::string& name) const {
  int pos = require(name, KnobKind::kSplit, "split");
  return SplitEntity{space_.knobs()[pos].candidates[choice_[pos]]};
}

ReorderEntity Config::reorder(const std::string& name) const {
  int pos = require(name, KnobKind::kReorder, "reorder");
  return ReorderEntity{space_.knobs()[pos].candidates[choice_[pos]]};
}

AnnotateEntity Config::annotate(const std::string& name) const {
  int pos = require(name, KnobKind::kAnnotate, "annotate");
  AnnotateEntity e;
  for (int64_t a : space_.knobs()[pos].candidates[choice_[pos]]) {
    e.anns.push_back(static_cast<Annotation>(a));
  }
  return e;
}

int64_t Config::knob(const std::string& name) const {
  int pos = require(name, KnobKind::kChoice, "knob");
  return space_.knobs()[pos].candidates[choice_[pos]][0];
}

const std::vector<int64_t>& Config::value(const std::string& name) const {
  int pos = space_.find(name);
  KILN_USER_CHECK(pos >= 0) << "value: knob '" << name << "' is not defined";
  return space_.knobs()[pos].candidates[choice_[pos]];
}

uint64_t Config::index() const {
  KILN_USER_CHECK(space_.indexable())
      << "config: the space's 10^" << space_.log10_size() << " points do not fit a 64-bit index";
  uint64_t index = 0, radix = 1;
  const auto& knobs = space_.knobs();
  for (size_t i = 0; i < knobs.size(); ++i) {
    index += choice_[i] * radix;
    radix *= knobs[i].candidates.size();
  }
  return index;
}

std::string Config::str() const {
  std::string s;
  const auto& knobs = space_.knobs();
  for (size_t i = 0; i < knobs.size(); ++i) {
    s += (i ? " " : "") + knobs[i].name + "=" + knobs[i].value_str(knobs[i].candidates[choice_[i]]);
  }
  return s;
}

bool Config::operator==(const Config& o) const {
  if (choice_ != o.choice_) return false;
  if (space_.same_as(o.space_)) return true;
  const auto &a = space_.knobs(), &b = o.space_.knobs();
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!same_knob(a[i], b[i])) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// JSON

json Config::to_json() const {
  json knobs = json::object();
  const auto& ks = space_.knobs();
  for (size_t i = 0; i < ks.size(); ++i) {
    const std::vector<int64_t>& v = ks[i].candidates[choice_[i]];
    switch (ks[i].kind) {
      case KnobKind::kChoice:
        knobs[ks[i].name] = v[0];
        break;
      case KnobKind::kAnnotate: {
        json a = json::array();
        for (int64_t x : v) a.push_back(annotation_name(static_cast<Annotation>(x)));
        knobs[ks[i].name] = a;
        break;
      }
      default:
        knobs[ks[i].name] = v;
    }
  }
  json j = json::object();
  if (space_.indexable()) j["index"] = index();
  j["knobs"] = knobs;
  return j;
}

namespace {

/// The knob value written as `j`, checked for shape; names the knob in errors.
std::vector<int64_t> parse_value(const Knob& k, const json& j) {
  const std::string where = "config JSON: knob '" + k.name + "'";
  std::vector<int64_t> v;
  if (k.kind == KnobKind::kChoice) {
    if (j.is_boolean()) return {j.get<bool>() ? 1 : 0};
    KILN_USER_CHECK(j.is_number_integer()) << where << ": expected an integer, got " << j.dump();
    return {j.get<int64_t>()};
  }
  KILN_USER_CHECK(j.is_array()) << where << ": expected an array, got " << j.dump();
  const size_t n = k.candidates[0].size();
  KILN_USER_CHECK(j.size() == n) << where << ": expected " << n << " values, got " << j.dump();
  for (const json& x : j) {
    if (k.kind == KnobKind::kAnnotate) {
      KILN_USER_CHECK(x.is_string())
          << where << ": expected \"none\", \"unroll\" or \"vec\", got " << x.dump();
      const std::string s = x.get<std::string>();
      if (s == "none") {
        v.push_back(static_cast<int64_t>(Annotation::kNone));
      } else if (s == "unroll") {
        v.push_back(static_cast<int64_t>(Annotation::kUnroll));
      } else if (s == "vec") {
        v.push_back(static_cast<int64_t>(Annotation::kVectorize));
      } else {
        KILN_ERROR << where << ": unknown annotation \"" << s
                   << "\" (expected none, unroll or vec)";
      }
    } else {
      KILN_USER_CHECK(x.is_number_integer()) << where << ": expected integers, got " << j.dump();
      v.push_back(x.get<int64_t>());
    }
  }
  if (k.kind == KnobKind::kSplit && v[0] == -1) {
    for (size_t i = 1; i < v.size(); ++i) {
      KILN_USER_CHECK(v[i] >= 1) << where << ": inner factors must be positive, got " << j.dump();
    }
    v[0] = detail::split_rest(k.extent, v);
  }
  return v;
}

}  // namespace

Config Config::from_json(const json& j, const ConfigSpace& space) {
  KILN_USER_CHECK(j.is_object() && j.contains("knobs") && j["knobs"].is_object())
      << "config JSON: expected an object with a \"knobs\" object, got " << j.dump().substr(0, 200);
  for (const auto& [key, _] : j.items()) {
    KILN_USER_CHECK(key == "knobs" || key == "index")
        << "config JSON: unexpected field \"" << key << "\" (expected \"index\" and \"knobs\")";
  }
  const json& knobs = j["knobs"];
  for (const auto& [name, _] : knobs.items()) {
    KILN_USER_CHECK(space.find(name) >= 0)
        << "config JSON: unknown knob '" << name << "'; the space has: " << [&] {
             std::string s;
             for (const auto& n : space.knob_names()) s += (s.empty() ? "" : ", ") + n;
             return s.empty() ? std::string("no knobs") : s;
           }();
  }
  std::vector<uint32_t> choice;
  for (const Knob& k : space.knobs()) {
    KILN_USER_CHECK(knobs.contains(k.name)) << "config JSON: knob '" << k.name << "' is missing";
    std::vector<int64_t> v = parse_value(k, knobs[k.name]);
    int64_t c = k.find(v);
    KILN_USER_CHECK(c >= 0) << "config JSON: knob '" << k.name << "': value " << k.value_str(v)
                            << " is not among its " << k.candidates.size() << " candidates ("
                            << candidates_str(k) << ")";
    choice.push_back(static_cast<uint32_t>(c));
  }
  Config cfg = space.at(std::move(choice));
  if (j.contains("index")) {
    KILN_USER_CHECK(j["index"].is_number_unsigned() || j["index"].is_number_integer())
        << "config JSON: \"index\" must be an integer, got " << j["index"].dump();
    KILN_USER_CHECK(space.indexable() && j["index"].get<uint64_t>() == cfg.index())
        << "config JSON: index " << j["index"].dump() << " does not match the knob values"
        << (space.indexable() ? " (they give index " + std::to_string(cfg.index()) + ")" : "");
  }
  return cfg;
}

Config Config::parse(const std::string& text, const ConfigSpace& space) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    KILN_ERROR << "config JSON: cannot parse: " << e.what();
  }
  return from_json(j, space);
}

}  // namespace kiln::autotune
