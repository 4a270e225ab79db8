// IRVisitor / IRMutator defaults: the mutator keeps handles of unchanged subtrees and rebuilds
// only the path to a change; substitute() and uses_var() work by variable identity.
#include "kiln/ir/functor.h"

#include <gtest/gtest.h>

#include "ir/ir_test_util.h"
#include "kiln/ir/op.h"
#include "kiln/ir/printer.h"

namespace kiln::ir {
namespace {

/// Replaces one specific immediate node (by identity) with another expression.
class ReplaceNode : public IRMutator {
 public:
  ReplaceNode(const IRNode* target, Expr with) : target_(target), with_(std::move(with)) {}

 protected:
  using IRMutator::visit;
  Expr visit(const IntImm* op) override { return op == target_ ? with_ : IRMutator::visit(op); }

 private:
  const IRNode* target_;
  Expr with_;
};

Stmt sample_program(Var* i, Var* j, Expr* leaf_a, Expr* leaf_b) {
  Var a("A", DataType::Handle()), b("B", DataType::Handle());
  *i = Var("i");
  *j = Var("j");
  *leaf_a = IntImm::make(DataType::Int(32), 5);
  *leaf_b = IntImm::make(DataType::Int(32), 7);
  Stmt s1 = Store::make(a, *i + *leaf_a, *i);
  Stmt s2 = For::make(*j, 0, 8, ForKind::kSerial, Store::make(b, *j * *leaf_b, *i * 8 + *j));
  Stmt body = SeqStmt::make({s1, s2});
  return For::make(*i, 0, 16, ForKind::kSerial, IfThenElse::make(*i < 10, body, Evaluate::make(0)));
}

TEST(Mutator, ReturnsSameHandleWhenNothingChanged) {
  Var i, j;
  Expr la, lb;
  Stmt s = sample_program(&i, &j, &la, &lb);
  IRMutator m;
  EXPECT_TRUE(m.mutate(s).same_as(s));
  Expr e = select(i < j, Let::make(Var("x"), i, i + 1),
                  Call::make(DataType::Int(32), "f", {i, j}, CallKind::kPureExtern));
  EXPECT_TRUE(m.mutate(e).same_as(e));
}

TEST(Mutator, RebuildsOnlyTheChangedPath) {
  Var i, j;
  Expr la, lb;
  Stmt s = sample_program(&i, &j, &la, &lb);
  ReplaceNode r(la.get(), IntImm::make(DataType::Int(32), 6));
  Stmt out = r.mutate(s);
  ASSERT_FALSE(out.same_as(s));
  EXPECT_EQ(to_string(out),
            "for (i, 0, 16) {\n"
            "  if (i < 10) {\n"
            "    A[i] = i + 6\n"
            "    for (j, 0, 8) {\n"
            "      B[i*8 + j] = j*7\n"
            "    }\n"
            "  } else {\n"
            "    0\n"
            "  }\n"
            "}\n");
  const For* f0 = s.as<For>();
  const For* f1 = out.as<For>();
  EXPECT_TRUE(f1->loop_var.same_as(f0->loop_var));
  EXPECT_TRUE(f1->min.same_as(f0->min));
  const IfThenElse* if0 = f0->body.as<IfThenElse>();
  const IfThenElse* if1 = f1->body.as<IfThenElse>();
  EXPECT_TRUE(if1->condition.same_as(if0->condition));
  EXPECT_TRUE(if1->else_case.same_as(if0->else_case));
  const SeqStmt* q0 = if0->then_case.as<SeqStmt>();
  const SeqStmt* q1 = if1->then_case.as<SeqStmt>();
  EXPECT_FALSE(q1->seq[0].same_as(q0->seq[0]));
  EXPECT_TRUE(q1->seq[1].same_as(q0->seq[1]));  // the untouched inner loop is shared
  // The changed store keeps its unchanged index.
  EXPECT_TRUE(q1->seq[0].as<Store>()->index.same_as(q0->seq[0].as<Store>()->index));
}

TEST(Substitute, ReplacesByIdentity) {
  Var i("i"), i2("i"), n("n");
  Expr e = i * 4 + i2;
  Expr out = substitute(e, {{i, n + 1}});
  EXPECT_EQ(to_string(out), "(n + 1)*4 + i");
  // Nothing to replace: the same handle comes back.
  EXPECT_TRUE(substitute(e, {{n, Expr(3)}}).same_as(e));
  // Buffer variables of loads and stores are substituted too.
  Var a("A", DataType::Handle()), b("B", DataType::Handle());
  Stmt st = Store::make(a, Load::make(DataType::Float(32), a, i), i);
  EXPECT_EQ(to_string(substitute(st, {{a, b}, {i, Expr(2)}})), "B[2] = B[2]\n");
}

TEST(Substitute, CommReducerCallsSubstitute) {
  Var x("x", DataType::Float(32)), y("y", DataType::Float(32));
  CommReducer sum({x}, {y}, {x + y}, {Expr(0.0f)});
  Var p("p", DataType::Float(32)), q("q", DataType::Float(32));
  EXPECT_EQ(to_string(sum({p}, {q * 2.0f})[0]), "p + q*2f");
}

TEST(Visitor, UsesVarAndPostOrder) {
  Var i, j;
  Expr la, lb;
  Stmt s = sample_program(&i, &j, &la, &lb);
  EXPECT_TRUE(uses_var(s, [&](const Variable* v) { return v == j.get(); }));
  Var k("k");
  EXPECT_FALSE(uses_var(s, [&](const Variable* v) { return v == k.get(); }));
  int fors = 0, stores = 0;
  std::vector<NodeKind> order;
  post_order_visit(s, [&](const IRNode* n) {
    fors += n->kind == NodeKind::For;
    stores += n->kind == NodeKind::Store;
    order.push_back(n->kind);
  });
  EXPECT_EQ(fors, 2);
  EXPECT_EQ(stores, 2);
  EXPECT_EQ(order.back(), NodeKind::For);  // the root comes last
}

}  // namespace
}  // namespace kiln::ir
