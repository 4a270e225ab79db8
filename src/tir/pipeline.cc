// The tir lowering recipe, in one place: the order of the passes below is the order in which
// they run. Every step goes through `PassRunner::run`, which times the pass, verifies the IR
// after it (with the guarantees of the passes run so far), notes whether it changed anything
// (structural equality) and dumps the IR after the pass named by KILN_DUMP_AFTER.
#include "kiln/tir/pipeline.h"

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "kiln/ir/structural.h"
#include "kiln/tir/verify.h"

namespace kiln::tir {
namespace {

class PassRunner {
 public:
  explicit PassRunner(const PipelineOptions& opt) : opt_(opt) {
    if (!opt.dump_after.empty()) {
      dump_after_ = opt.dump_after;
    } else if (const char* e = std::getenv("KILN_DUMP_AFTER")) {
      dump_after_ = e;
    }
  }

  VerifyOptions guarantees;

  template <typename Pass>
  PrimFunc run(const std::string& name, const PrimFunc& f, Pass&& pass) {
    auto t0 = std::chrono::steady_clock::now();
    PrimFunc out = pass(f);
    auto t1 = std::chrono::steady_clock::now();
    PassRecord rec;
    rec.name = name;
    rec.ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    rec.changed = !out.same_as(f) && !structural_equal(out->body, f->body);
    if (opt_.records) opt_.records->push_back(rec);
    if (opt_.verify) verify(out, name, guarantees);
    if (dump_after_ == name || dump_after_ == "all") {
      if (opt_.dump) {
        opt_.dump(name, out);
      } else {
        std::cerr << "// IR after " << name << (rec.changed ? "" : " (unchanged)") << ", " << rec.ms
                  << " ms\n"
                  << to_string(out);
      }
    }
    return out;
  }

 private:
  const PipelineOptions& opt_;
  std::string dump_after_;
};

}  // namespace

const std::vector<std::string>& pipeline_pass_names() {
  static const std::vector<std::string> names = {
      "storage_flatten", "simplify", "loop_partition",  "simplify",    "vectorize",
      "unroll",          "simplify", "storage_rewrite", "remove_no_op"};
  return names;
}

PrimFunc run_pipeline(PrimFunc f, const PipelineOptions& opt) {
  PassRunner p(opt);
  if (opt.verify) verify(f, "input");
  f = p.run("storage_flatten", f,
            [&](const PrimFunc& g) { return storage_flatten(g, opt.extern_buffers); });
  p.guarantees.flattened = true;
  f = p.run("simplify", f, simplify);
  f = p.run("loop_partition", f, loop_partition);
  f = p.run("simplify", f, simplify);
  f = p.run("vectorize", f, [&](const PrimFunc& g) { return vectorize(g, opt.vectorize); });
  p.guarantees.vectorized = true;
  f = p.run("unroll", f, [&](const PrimFunc& g) { return unroll(g, opt.unroll); });
  f = p.run("simplify", f, simplify);
  f = p.run("storage_rewrite", f, storage_rewrite);
  f = p.run("remove_no_op", f, remove_no_op);
  return f;
}

}  // namespace kiln::tir
