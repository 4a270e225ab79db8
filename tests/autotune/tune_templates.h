/// \file tune_templates.h
/// \brief Templates for the tuning tests: a tiled matmul whose default is deliberately slow (the
/// reduction innermost, B read with stride N, no vectorization), and an element-wise template
/// whose `mode` knob injects failures: a crash (abort() in an extern call), a hang, a wrong
/// result, and a template error.
#pragma once

#include <string>

#include "kiln/autotune/template.h"
#include "kiln/support/error.h"
#include "kiln/te/tensor.h"

/// Called by generated code of the faulty template (the test binary exports them).
extern "C" int32_t kiln_autotune_test_abort(float* out);
extern "C" int32_t kiln_autotune_test_hang(float* out);

namespace kiln::autotune::test_templates {

/// C[n, n] = A[n, n] x B[n, n], tiled; the default is slow on purpose (see the file comment).
inline Template matmul_template(int n, const std::string& version = "1") {
  TemplateFn fn = [n](Config& cfg) {
    auto A = te::placeholder({n, n}, DataType::Float(32), "A");
    auto B = te::placeholder({n, n}, DataType::Float(32), "B");
    auto k = te::reduce_axis({0, n}, "k");
    auto C = te::compute(
        {n, n}, [&](te::Var i, te::Var j) { return te::sum(A(i, k) * B(k, j), {k}); }, "C");
    te::Schedule s = te::create_schedule({C});
    te::Stage st = s[C];
    cfg.define_split("tile_y", n, 2, SplitPolicy::kFactors, 16);
    cfg.define_split("tile_x", n, 2, SplitPolicy::kFactors, 32);
    cfg.define_split("tile_k", n, 2, SplitPolicy::kFactors, 16);
    cfg.define_reorder("order", 3, ReorderPolicy::kAll);  // of (yi, ki, xi)
    cfg.define_annotate("ann", 3, AnnotatePolicy::kTryVec);
    if (cfg.is_fallback()) {
      cfg.fallback_split("tile_y", {-1, 4});
      cfg.fallback_split("tile_x", {-1, 1});
      cfg.fallback_split("tile_k", {-1, 16});
      cfg.fallback_reorder("order", {0, 2, 1});  // yi, xi, ki: the reduction innermost
    }
    auto y = cfg.split("tile_y").apply(st, C->axis[0]);
    auto x = cfg.split("tile_x").apply(st, C->axis[1]);
    auto kk = cfg.split("tile_k").apply(st, k);
    st.reorder({y[0], x[0], kk[0], y[1], kk[1], x[1]});
    auto inner = cfg.reorder("order").apply(st, {y[1], kk[1], x[1]});
    cfg.annotate("ann").apply(st, inner);
    return Instance{s, {A, B, C}};
  };
  return Template{"test_matmul", version, fn};
}

/// B[64], written by the extern C function `fn(float* B)` (a test's stand-in kernel).
inline te::Tensor extern_output(const char* fn, const te::Tensor& A) {
  return te::extern_op(
      {{64}}, {DataType::Float(32)}, {A},
      [&](const std::vector<ir::Buffer>&, const std::vector<ir::Buffer>& outs) {
        return te::call_extern(fn, {outs[0]->data});
      },
      "B")[0];
}

/// Failure modes of faulty_template's `mode` knob.
enum FaultMode : int64_t {
  kFaultNone = 0,
  kFaultCrash = 1,
  kFaultHang = 2,
  kFaultWrong = 3,
  kFaultTemplateError = 4,
  kFaultNoneUnrolled = 5,
};

/// B[64] = A[64] * 2 + 1, or a failure chosen by the `mode` knob.
inline Template faulty_template() {
  TemplateFn fn = [](Config& cfg) {
    const int n = 64;
    auto A = te::placeholder({n}, DataType::Float(32), "A");
    int64_t mode = cfg.define_knob("mode", {kFaultNone, kFaultCrash, kFaultHang, kFaultWrong,
                                            kFaultTemplateError, kFaultNoneUnrolled});
    cfg.define_split("tile", n, 2, SplitPolicy::kFactors, 8);
    if (mode == kFaultTemplateError) KILN_ERROR << "faulty template: mode 4 is refused";
    te::Tensor out;
    if (mode == kFaultCrash || mode == kFaultHang) {
      out = extern_output(
          mode == kFaultCrash ? "kiln_autotune_test_abort" : "kiln_autotune_test_hang", A);
    } else {
      float add = mode == kFaultWrong ? 1.5f : 1.0f;
      out = te::compute(
          {n}, [&](te::Var i) { return A(i) * 2.0f + add; }, "B");
    }
    te::Schedule s = te::create_schedule({out});
    if (out->op->kind == te::OpKind::kCompute) {
      te::Stage st = s[out];
      auto parts = cfg.split("tile").apply(st, out->axis[0]);
      if (mode == kFaultNoneUnrolled) st.unroll(parts[1]);
    }
    return Instance{s, {A, out}};
  };
  return Template{"test_faulty", "1", fn};
}

}  // namespace kiln::autotune::test_templates
