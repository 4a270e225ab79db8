// The tir pipeline end to end: a te-style loop nest with a realize, a non-divisible split and
// a vectorized inner loop, lowered and run by the reference interpreter.
#include "kiln/tir/pipeline.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "common/golden.h"
#include "tir_interp.h"
#include "tir_test_util.h"

namespace kiln::tir {
namespace {

using namespace kiln::tir::testing;  // NOLINT

const DataType f32 = DataType::Float(32);

struct Lowering {
  Producer A = make_producer("A", {37});
  Producer B = make_producer("B", {37});
  Producer C = make_producer("C", {37});
  Buffer Ab = Buffer::make("A", f32, {37});
  Buffer Cb = Buffer::make("C", f32, {37});
  PrimFunc func;

  Lowering() {
    // B[i] = A[i] * 2 with i split by 8 (vectorized inner), then C[i] = B[i] + 1 unrolled by 4
    // over a divisible split of 36 plus one.
    Var io("io"), ii("ii");
    Expr i = io * 8 + ii;
    Stmt pb =
        loop(io, 0, 5,
             loop(ii, 0, 8,
                  IfThenElse::make(likely(i < 37),
                                   ProducerStore::make(B, ProducerLoad::make(A, {i}) * 2.0f, {i})),
                  ForKind::kVectorized));
    Var jo("jo"), ji("ji");
    Expr j = jo * 4 + ji;
    Stmt pc =
        loop(jo, 0, 10,
             loop(ji, 0, 4,
                  IfThenElse::make(likely(j < 37),
                                   ProducerStore::make(C, ProducerLoad::make(B, {j}) + 1.0f, {j})),
                  ForKind::kUnrolled));
    Stmt body = ProducerRealize::make(B, {Range(0, 37)}, const_true(), SeqStmt::make({pb, pc}));
    func = make_func("f", {Ab, Cb}, body);
  }
  PipelineOptions options() const {
    PipelineOptions o;
    o.extern_buffers = {{A.get(), Ab}, {C.get(), Cb}};
    return o;
  }
};

TEST(Pipeline, PassNamesInOrder) {
  std::vector<std::string> expected = {"storage_flatten", "simplify", "inject_virtual_thread",
                                       "loop_partition",  "simplify", "vectorize",
                                       "unroll",          "simplify", "storage_rewrite",
                                       "remove_no_op"};
  EXPECT_EQ(pipeline_pass_names(), expected);
}

TEST(Pipeline, LowersAndComputesTheReference) {
  Lowering l;
  std::vector<PassRecord> records;
  PipelineOptions opt = l.options();
  opt.records = &records;
  PrimFunc g = run_pipeline(l.func, opt);
  ASSERT_EQ(records.size(), pipeline_pass_names().size());
  for (size_t k = 0; k < records.size(); ++k) EXPECT_EQ(records[k].name, pipeline_pass_names()[k]);
  EXPECT_TRUE(records[0].changed);
  KILN_EXPECT_GOLDEN("pipeline_split_vectorize", to_string(g));
  std::vector<double> a(37), c(37, -99);
  for (int k = 0; k < 37; ++k) a[k] = k * 0.25 - 4;
  auto out = run_func(g, {a, c});
  for (int k = 0; k < 37; ++k) EXPECT_EQ(out[1][k], static_cast<float>(a[k] * 2) + 1.0f) << k;
}

TEST(Pipeline, DumpsAfterTheNamedPass) {
  Lowering l;
  PipelineOptions opt = l.options();
  std::vector<std::string> dumped;
  opt.dump_after = "vectorize";
  opt.dump = [&](const std::string& pass, const PrimFunc& f) {
    dumped.push_back(pass);
    if (pass == "vectorize") {
      EXPECT_NE(to_string(f).find("ramp("), std::string::npos);
    }
  };
  run_pipeline(l.func, opt);
  EXPECT_EQ(dumped, std::vector<std::string>{"vectorize"});
  opt.dump_after = "all";
  dumped.clear();
  run_pipeline(l.func, opt);
  EXPECT_EQ(dumped, pipeline_pass_names());
}

TEST(Pipeline, DumpAfterFromEnvironmentGoesToStderr) {
  Lowering l;
  setenv("KILN_DUMP_AFTER", "storage_flatten", 1);
  ::testing::internal::CaptureStderr();
  run_pipeline(l.func, l.options());
  std::string err = ::testing::internal::GetCapturedStderr();
  unsetenv("KILN_DUMP_AFTER");
  EXPECT_NE(err.find("// IR after storage_flatten"), std::string::npos) << err;
  EXPECT_EQ(err.find("// IR after simplify"), std::string::npos) << err;
}

TEST(Pipeline, VerifierCatchesABrokenInput) {
  Lowering l;
  Var stray("stray");
  PrimFunc bad = l.func.with_body(SeqStmt::make({l.func->body, Evaluate::make(stray)}));
  try {
    run_pipeline(bad, l.options());
    FAIL() << "expected a verification error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("variable 'stray' is used outside"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln::tir
