// The IR text printer. Expressions print infix with the fewest parentheses that keep the tree
// unambiguous: each operator has a precedence level, a child is parenthesized when its level is
// lower than its position requires (left operands may share the parent's level, right operands
// must bind tighter, comparison operands must always bind tighter). Statements print one per
// line with two spaces per nesting level. Names are assigned lazily, in printing order: the first
// variable (or producer) seen with a name keeps it, later distinct objects with the same name get
// the first free `name_1`, `name_2`, … so one printed unit never shows two objects under one name.
#include "kiln/ir/printer.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "kiln/ir/op.h"

namespace kiln::ir {

namespace {

/// Binding strength of an expression's outermost operator; higher binds tighter.
enum Prec : int {
  kPrecLowest = 0,
  kPrecOr = 1,
  kPrecAnd = 2,
  kPrecCmp = 3,
  kPrecAdd = 4,
  kPrecMul = 5,
  kPrecUnary = 6,
  kPrecAtom = 7,
};

bool is_const_true(const Expr& e) {
  if (!e.defined()) return true;
  auto v = as_const_int(e);
  return v && *v == 1 && e.dtype().is_bool();
}

/// Shortest round-trip decimal form of a float value ("1", "0.5", "1e+20", "inf").
template <typename F>
std::string shortest(F v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

class Printer {
 public:
  explicit Printer(std::ostream& os) : os_(os) {}

  // -------------------------------------------------------------------------------------------
  // Expressions

  void expr(const Expr& e, int ctx = kPrecLowest) {
    if (!e.defined()) {
      os_ << "<undefined>";
      return;
    }
    int p = prec(e);
    bool paren = p < ctx;
    if (paren) os_ << "(";
    switch (e->kind) {
#define KILN_EXPR_NODE(T)                  \
  case NodeKind::T:                        \
    print(static_cast<const T*>(e.get())); \
    break;
#define KILN_STMT_NODE(T)                         \
  case NodeKind::T:                               \
    os_ << "<statement " #T " in an expression>"; \
    break;
#include "kiln/ir/node_kinds.def"
    }
    if (paren) os_ << ")";
  }

  // -------------------------------------------------------------------------------------------
  // Statements

  void stmt(const Stmt& s) {
    if (!s.defined()) {
      line() << "<undefined>\n";
      return;
    }
    switch (s->kind) {
#define KILN_STMT_NODE(T)                  \
  case NodeKind::T:                        \
    print(static_cast<const T*>(s.get())); \
    break;
#define KILN_EXPR_NODE(T)                             \
  case NodeKind::T:                                   \
    line() << "<expression " #T " in a statement>\n"; \
    break;
#include "kiln/ir/node_kinds.def"
    }
  }

 private:
  std::ostream& line() {
    for (int i = 0; i < indent_; ++i) os_ << "  ";
    return os_;
  }

  /// Prints `body` one level deeper.
  void block(const Stmt& body) {
    ++indent_;
    stmt(body);
    --indent_;
  }

  // -------------------------------------------------------------------------------------------
  // Names

  const std::string& unique_name(const void* obj, const std::string& hint,
                                 std::unordered_map<const void*, std::string>* names,
                                 std::unordered_set<std::string>* used) {
    auto it = names->find(obj);
    if (it != names->end()) return it->second;
    std::string base = hint.empty() ? "v" : hint;
    std::string name = base;
    for (int k = 1; used->count(name); ++k) name = base + "_" + std::to_string(k);
    used->insert(name);
    return (*names)[obj] = name;
  }
  const std::string& var_name(const Variable* v) {
    return unique_name(v, v->name, &var_names_, &used_var_names_);
  }
  const std::string& producer_name(const Producer& p) {
    return unique_name(p.get(), p->producer_name(), &producer_names_, &used_producer_names_);
  }
  /// The name shown for an AttrStmt's node.
  std::string object_name(const Ref<Object>& node) {
    if (!node.defined()) return "";
    if (const auto* iv = node.as<IterVarNode>()) return var_name(iv->var.get());
    if (const auto* v = node.as<Variable>()) return var_name(v);
    if (const auto* p = node.as<ProducerNode>()) return producer_name(Producer(p));
    if (const auto* b = node.as<BufferNode>())
      return b->data.defined() ? var_name(b->data.get()) : b->name;
    return "<object>";
  }

  // -------------------------------------------------------------------------------------------
  // Precedence

  static int prec(const Expr& e) {
    switch (e->kind) {
      case NodeKind::Or:
        return kPrecOr;
      case NodeKind::And:
        return kPrecAnd;
      case NodeKind::EQ:
      case NodeKind::NE:
      case NodeKind::LT:
      case NodeKind::LE:
      case NodeKind::GT:
      case NodeKind::GE:
        return kPrecCmp;
      case NodeKind::Add:
      case NodeKind::Sub:
        return kPrecAdd;
      case NodeKind::Mul:
        return kPrecMul;
      case NodeKind::Div:
        return e.dtype().is_float() ? kPrecMul : kPrecAtom;
      case NodeKind::Not:
        return kPrecUnary;
      case NodeKind::IntImm:
        return e.as<IntImm>()->value < 0 ? kPrecUnary : kPrecAtom;
      case NodeKind::FloatImm:
        return std::signbit(e.as<FloatImm>()->value) ? kPrecUnary : kPrecAtom;
      default:
        return kPrecAtom;
    }
  }

  /// Left-associative infix: the left operand may share the level, the right must bind tighter.
  void infix(const Expr& a, const char* op, const Expr& b, int p) {
    expr(a, p);
    os_ << op;
    expr(b, p + 1);
  }
  void call(const char* name, std::initializer_list<const Expr*> args) {
    os_ << name << "(";
    bool first = true;
    for (const Expr* a : args) {
      if (!first) os_ << ", ";
      first = false;
      expr(*a);
    }
    os_ << ")";
  }
  void list(const std::vector<Expr>& v) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) os_ << ", ";
      expr(v[i]);
    }
  }
  /// One expression, or a parenthesized tuple when there are several.
  void tuple(const std::vector<Expr>& v) {
    if (v.size() == 1) {
      expr(v[0]);
    } else {
      os_ << "(";
      list(v);
      os_ << ")";
    }
  }

  // -------------------------------------------------------------------------------------------
  // Expression nodes

  void print(const IntImm* op) {
    DataType t = op->dtype;
    if (t.is_bool()) {
      os_ << (op->value ? "True" : "False");
      return;
    }
    if (t.is_uint() && t.bits() == 64) {
      os_ << static_cast<uint64_t>(op->value);
    } else {
      os_ << op->value;
    }
    if (t == DataType::Int(32)) return;
    os_ << (t.is_int() ? "i" : "u") << t.bits();
  }
  void print(const FloatImm* op) {
    DataType t = op->dtype;
    double v = op->value;
    std::string suffix = t.is_bfloat16()  ? "bf16"
                         : t.bits() == 32 ? "f"
                         : t.bits() == 64 ? ""
                                          : "f" + std::to_string(t.bits());
    if (!std::isfinite(v)) {
      os_ << (std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf") << "(" << t << ")";
      return;
    }
    if (t.bits() == 32 && !t.is_bfloat16()) {
      os_ << shortest(static_cast<float>(v)) << suffix;
      return;
    }
    std::string s = shortest(v);
    if (suffix.empty() && s.find_first_of(".e") == std::string::npos) s += ".0";
    os_ << s << suffix;
  }
  void print(const StringImm* op) { os_ << quote(op->value); }
  void print(const Variable* op) { os_ << var_name(op); }
  void print(const Cast* op) {
    os_ << op->dtype << "(";
    expr(op->value);
    os_ << ")";
  }
  void print(const Add* op) { infix(op->a, " + ", op->b, kPrecAdd); }
  void print(const Sub* op) { infix(op->a, " - ", op->b, kPrecAdd); }
  void print(const Mul* op) { infix(op->a, "*", op->b, kPrecMul); }
  void print(const Div* op) {
    if (op->dtype.is_float()) {
      infix(op->a, "/", op->b, kPrecMul);
    } else {
      call("truncdiv", {&op->a, &op->b});
    }
  }
  void print(const Mod* op) { call(op->dtype.is_float() ? "fmod" : "truncmod", {&op->a, &op->b}); }
  void print(const FloorDiv* op) { call("floordiv", {&op->a, &op->b}); }
  void print(const FloorMod* op) { call("floormod", {&op->a, &op->b}); }
  void print(const Min* op) { call("min", {&op->a, &op->b}); }
  void print(const Max* op) { call("max", {&op->a, &op->b}); }
  // Comparisons do not chain: both operands must bind tighter.
  void print(const EQ* op) { compare(op->a, " == ", op->b); }
  void print(const NE* op) { compare(op->a, " != ", op->b); }
  void print(const LT* op) { compare(op->a, " < ", op->b); }
  void print(const LE* op) { compare(op->a, " <= ", op->b); }
  void print(const GT* op) { compare(op->a, " > ", op->b); }
  void print(const GE* op) { compare(op->a, " >= ", op->b); }
  void compare(const Expr& a, const char* o, const Expr& b) {
    expr(a, kPrecCmp + 1);
    os_ << o;
    expr(b, kPrecCmp + 1);
  }
  void print(const And* op) { infix(op->a, " && ", op->b, kPrecAnd); }
  void print(const Or* op) { infix(op->a, " || ", op->b, kPrecOr); }
  void print(const Not* op) {
    os_ << "!";
    expr(op->a, kPrecUnary);
  }
  void print(const Select* op) {
    call("select", {&op->condition, &op->true_value, &op->false_value});
  }
  void print(const Load* op) {
    bool pred = !is_const_true(op->predicate);
    if (pred) os_ << "(";
    os_ << var_name(op->buffer_var.get()) << "[";
    expr(op->index);
    os_ << "]";
    if (pred) {
      os_ << " if ";
      expr(op->predicate);
      os_ << ")";
    }
  }
  void print(const Ramp* op) {
    os_ << "ramp(";
    expr(op->base);
    os_ << ", ";
    expr(op->stride);
    os_ << ", " << op->lanes << ")";
  }
  void print(const Broadcast* op) {
    os_ << "broadcast(";
    expr(op->value);
    os_ << ", " << op->lanes << ")";
  }
  void print(const Let* op) {
    os_ << "(let " << var_name(op->var.get()) << " = ";
    expr(op->value);
    os_ << " in ";
    expr(op->body);
    os_ << ")";
  }
  void print(const Call* op) {
    os_ << op->name << "(";
    list(op->args);
    os_ << ")";
  }
  void print(const Reduce* op) {
    const CommReducerNode* c = op->combiner.get();
    os_ << "reduce(lambda ";
    auto vars = [&](const std::vector<Var>& vs) {
      if (vs.size() != 1) os_ << "(";
      for (size_t i = 0; i < vs.size(); ++i) os_ << (i ? ", " : "") << var_name(vs[i].get());
      if (vs.size() != 1) os_ << ")";
    };
    vars(c->lhs);
    os_ << ", ";
    vars(c->rhs);
    os_ << ": ";
    tuple(c->result);
    os_ << ", init=";
    tuple(c->identity);
    os_ << ", source=";
    tuple(op->source);
    os_ << ", axis=[";
    for (size_t i = 0; i < op->axis.size(); ++i) {
      const IterVarNode* iv = op->axis[i].get();
      os_ << (i ? ", " : "") << "(" << var_name(iv->var.get()) << ", ";
      if (iv->dom.defined()) {
        expr(iv->dom->min);
        os_ << ", ";
        expr(iv->dom->extent);
      } else {
        os_ << "?, ?";
      }
      os_ << ")";
    }
    os_ << "]";
    if (!is_const_true(op->condition)) {
      os_ << ", where=";
      expr(op->condition);
    }
    if (op->source.size() > 1) os_ << ", value_index=" << op->value_index;
    os_ << ")";
  }
  void print(const ProducerLoad* op) {
    os_ << producer_name(op->producer) << "[";
    list(op->indices);
    os_ << "]";
  }

  // -------------------------------------------------------------------------------------------
  // Statement nodes

  /// Statements that print their body at the same indentation (no braces).
  static bool is_flat_scope(const Stmt& s) {
    NodeKind k = s->kind;
    return k == NodeKind::LetStmt || k == NodeKind::AttrStmt || k == NodeKind::AssertStmt ||
           k == NodeKind::Allocate;
  }

  void print(const LetStmt* op) {
    line() << "let " << var_name(op->var.get()) << " = ";
    expr(op->value);
    os_ << "\n";
    stmt(op->body);
  }
  void print(const AttrStmt* op) {
    line() << "// attr ";
    std::string n = object_name(op->node);
    if (op->node.defined()) os_ << "[" << n << "] ";
    os_ << op->key << " = ";
    expr(op->value);
    os_ << "\n";
    stmt(op->body);
  }
  void print(const AssertStmt* op) {
    line() << "assert(";
    expr(op->condition);
    os_ << ", ";
    expr(op->message);
    os_ << ")\n";
    stmt(op->body);
  }
  void print(const Store* op) {
    line();
    if (!is_const_true(op->predicate)) {
      os_ << "if ";
      expr(op->predicate);
      os_ << ": ";
    }
    os_ << var_name(op->buffer_var.get()) << "[";
    expr(op->index);
    os_ << "] = ";
    expr(op->value);
    os_ << "\n";
  }
  void print(const ProducerStore* op) {
    line() << producer_name(op->producer) << "[";
    list(op->indices);
    os_ << "] = ";
    expr(op->value);
    os_ << "\n";
  }
  void print(const ProducerRealize* op) {
    line() << "realize " << producer_name(op->producer) << "(";
    for (size_t i = 0; i < op->bounds.size(); ++i) {
      os_ << (i ? ", " : "") << "[";
      expr(op->bounds[i]->min);
      os_ << ", ";
      expr(op->bounds[i]->extent);
      os_ << "]";
    }
    os_ << ")";
    if (!op->storage_scope.empty()) os_ << " in " << op->storage_scope;
    if (!is_const_true(op->condition)) {
      os_ << " if ";
      expr(op->condition);
    }
    os_ << " {\n";
    block(op->body);
    line() << "}\n";
  }
  void print(const Allocate* op) {
    line() << "allocate " << var_name(op->buffer_var.get()) << "[" << op->dtype;
    for (const Expr& e : op->extents) {
      os_ << " * ";
      expr(e, kPrecMul + 1);
    }
    os_ << "] in " << op->scope;
    if (!is_const_true(op->condition)) {
      os_ << " if ";
      expr(op->condition);
    }
    os_ << "\n";
    stmt(op->body);
  }
  void print(const For* op) {
    line();
    if (op->for_kind != ForKind::kSerial) os_ << for_kind_name(op->for_kind);
    if (!op->thread_tag.empty()) {
      if (op->for_kind == ForKind::kSerial) os_ << for_kind_name(op->for_kind);
      os_ << "(" << op->thread_tag << ")";
    }
    if (op->for_kind != ForKind::kSerial || !op->thread_tag.empty()) os_ << " ";
    os_ << "for (" << var_name(op->loop_var.get()) << ", ";
    expr(op->min);
    os_ << ", ";
    expr(op->extent);
    os_ << ") {\n";
    block(op->body);
    line() << "}\n";
  }
  void print(const IfThenElse* op) {
    line() << "if (";
    expr(op->condition);
    os_ << ") {\n";
    block(op->then_case);
    // Chains of else-if print flat.
    while (op->else_case.defined()) {
      if (const IfThenElse* next = op->else_case.as<IfThenElse>()) {
        line() << "} else if (";
        expr(next->condition);
        os_ << ") {\n";
        block(next->then_case);
        op = next;
      } else {
        line() << "} else {\n";
        block(op->else_case);
        break;
      }
    }
    line() << "}\n";
  }
  void print(const SeqStmt* op) {
    for (size_t i = 0; i < op->seq.size(); ++i) {
      const Stmt& s = op->seq[i];
      // A flat scope before the end of a sequence would seem to cover what follows it; brace it.
      if (i + 1 < op->seq.size() && s.defined() && is_flat_scope(s)) {
        line() << "{\n";
        block(s);
        line() << "}\n";
      } else {
        stmt(s);
      }
    }
  }
  void print(const Evaluate* op) {
    line();
    expr(op->value);
    os_ << "\n";
  }

  std::ostream& os_;
  int indent_ = 0;
  std::unordered_map<const void*, std::string> var_names_, producer_names_;
  std::unordered_set<std::string> used_var_names_, used_producer_names_;
};

}  // namespace

std::string to_string(const Expr& e) {
  std::ostringstream os;
  Printer(os).expr(e);
  return os.str();
}

std::string to_string(const Stmt& s) {
  std::ostringstream os;
  Printer(os).stmt(s);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Expr& e) { return os << to_string(e); }
std::ostream& operator<<(std::ostream& os, const Stmt& s) { return os << to_string(s); }

}  // namespace kiln::ir
