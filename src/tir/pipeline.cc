// The tir lowering recipe, in one place: the order of the passes below is the order in which
// they run. Every step goes through the shared `PassRunner::run` (support/pass_runner.h), which
// times the pass, verifies the IR after it (with the guarantees of the passes run so far), notes
// whether it changed anything (structural equality) and dumps the IR after the pass named by
// KILN_DUMP_AFTER.
#include "kiln/tir/pipeline.h"

#include "kiln/ir/structural.h"
#include "kiln/tir/verify.h"

namespace kiln::tir {
namespace {

/// The tir level's hooks; the verifier checks the guarantees of the passes run so far.
PassHooks<PrimFunc> tir_hooks(const VerifyOptions& guarantees) {
  PassHooks<PrimFunc> h;
  h.what = "IR";
  h.changed = [](const PrimFunc& in, const PrimFunc& out) {
    return !out.same_as(in) && !structural_equal(out->body, in->body);
  };
  h.verify = [&guarantees](const PrimFunc& f, const std::string& pass) {
    verify(f, pass, guarantees);
  };
  h.print = [](const PrimFunc& f) { return to_string(f); };
  return h;
}

}  // namespace

const std::vector<std::string>& pipeline_pass_names() {
  static const std::vector<std::string> names = {
      "storage_flatten", "simplify", "inject_virtual_thread",
      "loop_partition",  "simplify", "vectorize",
      "unroll",          "simplify", "storage_rewrite",
      "remove_no_op"};
  return names;
}

PrimFunc run_pipeline(PrimFunc f, const PipelineOptions& opt) {
  VerifyOptions guarantees;
  PassRunner<PrimFunc> p(tir_hooks(guarantees), opt);
  p.verify_input(f, "input");
  f = p.run("storage_flatten", f,
            [&](const PrimFunc& g) { return storage_flatten(g, opt.extern_buffers); });
  guarantees.flattened = true;
  f = p.run("simplify", f, simplify);
  f = p.run("inject_virtual_thread", f, inject_virtual_thread);
  f = p.run("loop_partition", f, loop_partition);
  f = p.run("simplify", f, simplify);
  f = p.run("vectorize", f, [&](const PrimFunc& g) { return vectorize(g, opt.vectorize); });
  guarantees.vectorized = true;
  f = p.run("unroll", f, [&](const PrimFunc& g) { return unroll(g, opt.unroll); });
  f = p.run("simplify", f, simplify);
  f = p.run("storage_rewrite", f, storage_rewrite);
  f = p.run("remove_no_op", f, remove_no_op);
  return f;
}

}  // namespace kiln::tir
