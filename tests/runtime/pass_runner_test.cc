// The shared instrumented pass runner (support/pass_runner.h) on a toy IR (a list of ints): one
// record per pass with its name and whether it changed the IR, the verifier after every pass
// named by it, the dump after the pass named by dump_after (or KILN_DUMP_AFTER, to stderr), and
// no structural comparison when nobody reads its answer.
#include "kiln/support/pass_runner.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln {
namespace {

using IR = std::vector<int>;

struct Toy {
  int comparisons = 0;
  std::vector<std::string> verified;
  PassHooks<IR> hooks() {
    PassHooks<IR> h;
    h.what = "toy";
    h.changed = [this](const IR& a, const IR& b) {
      ++comparisons;
      return a != b;
    };
    h.verify = [this](const IR& ir, const std::string& pass) {
      verified.push_back(pass);
      for (int v : ir)
        if (v < 0) throw std::runtime_error("negative value after " + pass);
    };
    h.print = [](const IR& ir) {
      std::string s;
      for (int v : ir) s += std::to_string(v) + ";";
      return s + "\n";
    };
    return h;
  }
};

IR add_one(const IR& ir) {
  IR r = ir;
  for (int& v : r) ++v;
  return r;
}
IR keep(const IR& ir) { return ir; }
IR negate(const IR& ir) {
  IR r = ir;
  for (int& v : r) v = -v;
  return r;
}

TEST(PassRunner, RecordsVerifiesAndNotesUnchangedPasses) {
  Toy toy;
  std::vector<PassRecord> records;
  PassRunOptions<IR> opt;
  opt.records = &records;
  opt.dump_after = "none";  // not from the environment
  PassRunner<IR> p(toy.hooks(), opt);
  IR ir = {1, 2};
  p.verify_input(ir, "input");
  ir = p.run("add_one", ir, add_one);
  ir = p.run("keep", ir, keep);
  EXPECT_EQ(ir, (IR{2, 3}));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].name, "add_one");
  EXPECT_TRUE(records[0].changed);
  EXPECT_EQ(records[1].name, "keep");
  EXPECT_FALSE(records[1].changed);
  EXPECT_GE(records[0].ms, 0);
  EXPECT_EQ(toy.verified, (std::vector<std::string>{"input", "add_one", "keep"}));
  // The verifier's error names the pass that broke the invariant.
  try {
    p.run("negate", ir, negate);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "negative value after negate");
  }
}

TEST(PassRunner, WithoutRecordsOrDumpNothingIsCompared) {
  Toy toy;
  PassRunOptions<IR> opt;
  opt.verify = false;
  opt.dump_after = "none";
  PassRunner<IR> p(toy.hooks(), opt);
  IR ir = p.run("negate", IR{1}, negate);  // not verified: no error
  EXPECT_EQ(ir, IR{-1});
  EXPECT_EQ(toy.comparisons, 0);
  EXPECT_TRUE(toy.verified.empty());
}

TEST(PassRunner, DumpsAfterTheNamedPassToTheCallbackOrStderr) {
  Toy toy;
  PassRunOptions<IR> opt;
  std::vector<std::string> dumped;
  opt.dump_after = "keep";
  opt.dump = [&](const std::string& pass, const IR& ir) {
    dumped.push_back(pass + "=" + std::to_string(ir[0]));
  };
  {
    PassRunner<IR> p(toy.hooks(), opt);
    p.run("keep", p.run("add_one", IR{5}, add_one), keep);
  }
  EXPECT_EQ(dumped, std::vector<std::string>{"keep=6"});
  // KILN_DUMP_AFTER when dump_after is empty; stderr when there is no callback.
  setenv("KILN_DUMP_AFTER", "all", 1);
  PassRunOptions<IR> env;
  ::testing::internal::CaptureStderr();
  {
    PassRunner<IR> p(toy.hooks(), env);
    p.run("keep", p.run("add_one", IR{5, 7}, add_one), keep);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  unsetenv("KILN_DUMP_AFTER");
  EXPECT_NE(err.find("// toy after add_one, "), std::string::npos) << err;
  EXPECT_NE(err.find(" ms\n6;8;\n// toy after keep (unchanged), "), std::string::npos) << err;
}

}  // namespace
}  // namespace kiln
