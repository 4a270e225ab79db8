/// \file stmt.h
/// \brief Kiln's loop-program IR: statements and buffers.
///
/// * `For` runs `body` for loop_var in [min, min + extent); its kind says how (serial,
///   parallel across the thread pool, vectorized, unrolled, or bound to a GPU thread axis).
/// * `Allocate` makes a flat buffer of `extents` elements of `dtype` in a storage scope
///   ("global", "local", "shared") visible in `body`; `buffer_var` is a handle variable.
/// * `ProducerRealize`/`ProducerStore` are the multi-dimensional forms used before storage
///   flattening; flattening turns them into Allocate/Store.
/// * `AttrStmt` annotates `body` with (node, key, value): thread extents, pragmas, alignment.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/ir/expr.h"

namespace kiln::ir {

class Stmt : public Ref<BaseStmtNode> {
 public:
  Stmt() = default;
  explicit Stmt(const BaseStmtNode* n) : Ref<BaseStmtNode>(n) {}
  template <typename T, typename = std::enable_if_t<std::is_base_of_v<BaseStmtNode, T>>>
  Stmt(const Ref<T>& r) : Ref<BaseStmtNode>(r.get()) {}  // NOLINT
  NodeKind kind() const { return get()->kind; }
  template <typename T>
  const T* as() const {
    const BaseStmtNode* n = get();
    return (n && n->kind == T::kKind) ? static_cast<const T*>(n) : nullptr;
  }
};

struct LetStmt : StmtNode<LetStmt> {
  static constexpr NodeKind kKind = NodeKind::LetStmt;
  Var var;
  Expr value;
  Stmt body;
  static Stmt make(Var var, Expr value, Stmt body);
  template <typename F>
  void for_each_field(F&& f) const {
    f("var", var);
    f("value", value);
    f("body", body);
  }
};

/// Well-known AttrStmt keys.
namespace attr {
constexpr const char* kThreadExtent = "thread_extent";    ///< node: IterVar
constexpr const char* kVirtualThread = "virtual_thread";  ///< node: IterVar
constexpr const char* kRealizeScope = "realize_scope";    ///< node: Producer, value: scope
constexpr const char* kStorageAlign = "storage_align";    ///< node: Producer
constexpr const char* kPragmaPrefix = "pragma_";          ///< "pragma_<name>"
constexpr const char* kComputeScope = "compute_scope";
/// A stage that runs as one sequential program: the body of an extern stage (hand-written
/// loops) or the loop nest of a 0-d compute; value: the stage's name.
constexpr const char* kExternScope = "extern_scope";
/// value 1: the code generator keeps loops rolled (LLVM's unroller is told not to unroll them).
/// Node null: every serial loop inside; loop_partition puts it on the K parts of a loop it cuts
/// at thresholds, whose copies LLVM would otherwise each unroll (code size and compile time
/// K-fold). Node an IterVar (te's `Stage::pragma(iv, "no_unroll")`, the attribute directly
/// inside iv's loop): that loop only, the loops inside it unrolled or not as they would be.
constexpr const char* kPragmaNoUnroll = "pragma_no_unroll";
constexpr const char* kStorageScope = "storage_scope";  ///< node: buffer var
/// The update of a single-output commutative reduction whose reduction loop is vectorized (te
/// lowering): value: the reducer's identity; body: LetStmt(r, source, a store of combiner(acc,
/// r) to an address the loop does not move). tir::vectorize evaluates the source for all lanes,
/// combines them in a tree of log2(lanes) steps and updates acc once; where the loop is not
/// vectorized it is the plain update.
constexpr const char* kReduceLanes = "reduce_lanes";
}  // namespace attr

struct AttrStmt : StmtNode<AttrStmt> {
  static constexpr NodeKind kKind = NodeKind::AttrStmt;
  Ref<Object> node;  ///< what the attribute is about (an IterVar, a Producer, a Var, or null)
  std::string key;
  Expr value;
  Stmt body;
  static Stmt make(Ref<Object> node, std::string key, Expr value, Stmt body);
  template <typename F>
  void for_each_field(F&& f) const {
    f("node", node);
    f("key", key);
    f("value", value);
    f("body", body);
  }
};

/// Checks `condition` at run time; on failure the function returns an error with `message`.
struct AssertStmt : StmtNode<AssertStmt> {
  static constexpr NodeKind kKind = NodeKind::AssertStmt;
  Expr condition;
  Expr message;  ///< a StringImm
  Stmt body;
  static Stmt make(Expr condition, Expr message, Stmt body);
  template <typename F>
  void for_each_field(F&& f) const {
    f("condition", condition);
    f("message", message);
    f("body", body);
  }
};

struct Store : StmtNode<Store> {
  static constexpr NodeKind kKind = NodeKind::Store;
  Var buffer_var;
  Expr value;
  Expr index;
  Expr predicate;
  static Stmt make(Var buffer_var, Expr value, Expr index, Expr predicate = Expr());
  template <typename F>
  void for_each_field(F&& f) const {
    f("buffer_var", buffer_var);
    f("value", value);
    f("index", index);
    f("predicate", predicate);
  }
};

struct ProducerStore : StmtNode<ProducerStore> {
  static constexpr NodeKind kKind = NodeKind::ProducerStore;
  Producer producer;
  Expr value;
  std::vector<Expr> indices;
  static Stmt make(Producer producer, Expr value, std::vector<Expr> indices);
  template <typename F>
  void for_each_field(F&& f) const {
    f("producer", producer);
    f("value", value);
    f("indices", indices);
  }
};

/// Declares storage for `producer` over `bounds` (one Range per dimension) for `body`.
struct ProducerRealize : StmtNode<ProducerRealize> {
  static constexpr NodeKind kKind = NodeKind::ProducerRealize;
  Producer producer;
  std::vector<Range> bounds;
  Expr condition;
  Stmt body;
  std::string storage_scope;
  static Stmt make(Producer producer, std::vector<Range> bounds, Expr condition, Stmt body,
                   std::string storage_scope = "");
  template <typename F>
  void for_each_field(F&& f) const {
    f("producer", producer);
    f("bounds", bounds);
    f("condition", condition);
    f("body", body);
    f("storage_scope", storage_scope);
  }
};

struct Allocate : StmtNode<Allocate> {
  static constexpr NodeKind kKind = NodeKind::Allocate;
  Var buffer_var;
  DataType dtype;
  std::vector<Expr> extents;
  Expr condition;
  Stmt body;
  std::string scope = "global";
  static Stmt make(Var buffer_var, DataType dtype, std::vector<Expr> extents, Expr condition,
                   Stmt body, std::string scope = "global");
  /// Product of extents if all are constants, else -1.
  int64_t constant_size() const;
  template <typename F>
  void for_each_field(F&& f) const {
    f("buffer_var", buffer_var);
    f("dtype", dtype);
    f("extents", extents);
    f("condition", condition);
    f("body", body);
    f("scope", scope);
  }
};

enum class ForKind : uint8_t { kSerial, kParallel, kVectorized, kUnrolled, kThreadBinding };
const char* for_kind_name(ForKind k);

struct For : StmtNode<For> {
  static constexpr NodeKind kKind = NodeKind::For;
  Var loop_var;
  Expr min, extent;
  ForKind for_kind = ForKind::kSerial;
  Stmt body;
  std::string thread_tag;  ///< for kThreadBinding: "blockIdx.x", "threadIdx.x", …
  static Stmt make(Var loop_var, Expr min, Expr extent, ForKind kind, Stmt body,
                   std::string thread_tag = "");
  template <typename F>
  void for_each_field(F&& f) const {
    f("loop_var", loop_var);
    f("min", min);
    f("extent", extent);
    f("for_kind", for_kind);
    f("body", body);
    f("thread_tag", thread_tag);
  }
};

struct IfThenElse : StmtNode<IfThenElse> {
  static constexpr NodeKind kKind = NodeKind::IfThenElse;
  Expr condition;
  Stmt then_case, else_case;  ///< else_case may be undefined
  static Stmt make(Expr condition, Stmt then_case, Stmt else_case = Stmt());
  template <typename F>
  void for_each_field(F&& f) const {
    f("condition", condition);
    f("then_case", then_case);
    f("else_case", else_case);
  }
};

struct SeqStmt : StmtNode<SeqStmt> {
  static constexpr NodeKind kKind = NodeKind::SeqStmt;
  std::vector<Stmt> seq;
  /// Flattens nested sequences and drops undefined entries; one statement is returned as is.
  static Stmt make(std::vector<Stmt> seq);
  template <typename F>
  void for_each_field(F&& f) const {
    f("seq", seq);
  }
};

struct Evaluate : StmtNode<Evaluate> {
  static constexpr NodeKind kKind = NodeKind::Evaluate;
  Expr value;
  static Stmt make(Expr value);
  template <typename F>
  void for_each_field(F&& f) const {
    f("value", value);
  }
};

// ---------------------------------------------------------------------------------------------

struct BufferNode : Object {
  Var data;  ///< handle variable pointing at the first element
  DataType dtype;
  std::vector<Expr> shape;
  std::vector<Expr> strides;  ///< empty: compact row-major
  std::string name;
  std::string scope = "global";
  int data_alignment = 64;
  /// Row-major flat offset of `indices` (uses strides when given).
  Expr flat_index(const std::vector<Expr>& indices) const;
};
/// A multi-dimensional view of memory: function parameters and extern-op operands.
class Buffer : public Ref<BufferNode> {
 public:
  Buffer() = default;
  explicit Buffer(const BufferNode* n) : Ref<BufferNode>(n) {}
  /// A compact buffer with a fresh data variable named `name`.
  static Buffer make(std::string name, DataType dtype, std::vector<Expr> shape,
                     std::vector<Expr> strides = {}, std::string scope = "global");
  Expr load(const std::vector<Expr>& indices) const;
  Stmt store(const std::vector<Expr>& indices, Expr value) const;
};

}  // namespace kiln::ir
