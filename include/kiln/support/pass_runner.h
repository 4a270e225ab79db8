/// \file pass_runner.h
/// \brief The instrumented pass runner shared by every pass recipe (tir's run_pipeline in
/// src/tir/pipeline.cc, graph's optimize in src/graph/optimize.cc; STYLE.md items 6 and 7).
///
/// Every step of a recipe goes through PassRunner::run, which
///   1. runs the pass and times it (wall clock),
///   2. verifies the result when the IR has a verifier and `verify` is on (the verifier names
///      the pass, so a broken invariant is caught at the pass that broke it),
///   3. notes whether the pass changed anything (the IR's structural equality), and
///   4. dumps the IR after the pass when KILN_DUMP_AFTER (or PassRunOptions::dump_after) names
///      it or is "all": to PassRunOptions::dump, or to stderr as
///      `// <what> after <pass> [(unchanged)], <ms> ms` followed by the IR's text.
/// The runner is a template over the IR type: each level gives its hooks (PassHooks) and the
/// support layer needs nothing of the IRs.
///
///   PassRunner<PrimFunc> p(hooks, opt);
///   f = p.run("simplify", f, simplify);
#pragma once

#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

/// What happened in one pass of a recipe run.
struct PassRecord {
  std::string name;
  double ms = 0;         ///< wall time of the pass
  bool changed = false;  ///< false when the output is structurally equal to the input
};

/// How one IR level plugs into the runner.
template <typename IR>
struct PassHooks {
  /// "IR", "graph": how the stderr dump names the IR.
  std::string what = "IR";
  /// True when `after` differs from `before` (structural equality); required.
  std::function<bool(const IR& before, const IR& after)> changed;
  /// Checks `ir` after pass `pass` and throws an internal error naming it on a broken
  /// invariant; unset: no verifier.
  std::function<void(const IR& ir, const std::string& pass)> verify;
  /// The IR's text form, for the stderr dump; required.
  std::function<std::string(const IR& ir)> print;
};

/// The options every recipe shares (tir::PipelineOptions and graph::OptimizeOptions carry them).
template <typename IR>
struct PassRunOptions {
  /// Runs the hooks' verifier after every pass.
  bool verify = true;
  /// Receives the IR after each pass selected by KILN_DUMP_AFTER (or, when `dump_after` is set,
  /// by it instead of the environment); when unset the text goes to stderr.
  std::function<void(const std::string& pass, const IR& ir)> dump;
  /// Overrides KILN_DUMP_AFTER when non-empty: a pass name, or "all".
  std::string dump_after;
  /// When set, one record per pass is appended.
  std::vector<PassRecord>* records = nullptr;
};

/// Runs the passes of one recipe run (see the file comment).
template <typename IR>
class PassRunner {
 public:
  PassRunner(PassHooks<IR> hooks, const PassRunOptions<IR>& opt)
      : hooks_(std::move(hooks)), opt_(opt) {
    if (!opt.dump_after.empty()) {
      dump_after_ = opt.dump_after;
    } else if (const char* e = std::getenv("KILN_DUMP_AFTER")) {
      dump_after_ = e;
    }
  }

  /// Verifies the recipe's input (named `what`, e.g. "input") when verification is on.
  void verify_input(const IR& ir, const std::string& what) const {
    if (opt_.verify && hooks_.verify) hooks_.verify(ir, what);
  }

  /// Runs `pass` (callable as `IR(const IR&)`) on `in` as the step `name`.
  template <typename Pass>
  IR run(const std::string& name, const IR& in, Pass&& pass) {
    const auto t0 = std::chrono::steady_clock::now();
    IR out = pass(in);
    const auto t1 = std::chrono::steady_clock::now();
    PassRecord rec;
    rec.name = name;
    rec.ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    const bool dump = dump_after_ == name || dump_after_ == "all";
    // Structural equality costs a walk of both IRs: only when someone reads the answer.
    if (opt_.records || dump) rec.changed = hooks_.changed(in, out);
    if (opt_.records) opt_.records->push_back(rec);
    if (opt_.verify && hooks_.verify) hooks_.verify(out, name);
    if (dump) {
      if (opt_.dump) {
        opt_.dump(name, out);
      } else {
        std::cerr << "// " << hooks_.what << " after " << name
                  << (rec.changed ? "" : " (unchanged)") << ", " << rec.ms << " ms\n"
                  << hooks_.print(out);
      }
    }
    return out;
  }

 private:
  PassHooks<IR> hooks_;
  const PassRunOptions<IR>& opt_;
  std::string dump_after_;
};

}  // namespace kiln
