/// \file schedule.h
/// \brief Schedules: how to compute the tensors of a computation (Halide's separation of
/// compute and schedule; TVM paper section 4.1).
///
/// A Schedule has one Stage per operation. A stage records its loop structure as data:
/// relations between iteration variables (split, fuse), the order of its leaf loops, per-loop
/// annotations (parallel, vectorize, unroll, bind, pragma), where it is computed (root, inline,
/// or at a loop of a consumer) and its storage scope. Bound inference and loop generation read
/// these records. Every primitive checks its preconditions and throws an error naming the
/// stage, the axis and the rule broken.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "kiln/te/tensor.h"
#include "kiln/te/tensor_intrin.h"

namespace kiln::te {

/// A relation between iteration variables, recorded by a primitive.
struct IterVarRelation {
  enum Kind { kSplit, kFuse };
  Kind kind;
  // split: parent -> (outer, inner); factor or nparts set.
  IterVar parent, outer, inner;
  Expr factor, nparts;
  /// split by a factor that may not divide: the last outer iteration is shifted inwards to end
  /// where the parent ends, recomputing some points of the one before it, instead of being
  /// guarded (Halide's TailStrategy::ShiftInwards).
  bool shift_tail = false;
  // fuse: (outer, inner) -> fused
  IterVar fused;
};

/// Per-loop annotation.
struct IterVarAttr {
  ForKind for_kind = ForKind::kSerial;
  IterVar bind_thread;  ///< set by bind()
  std::vector<std::pair<std::string, Expr>> pragmas;
  /// Set by prefetch(): statements put first in the loop's body.
  std::vector<Stmt> prefetches;
  /// Set by tensorize(): the loops from this one inward become the intrinsic's call.
  TensorIntrin tensor_intrin;
};

enum class AttachType : uint8_t { kGroupRoot, kInline, kScope };

struct StageNode;
class Schedule;

/// A handle to one stage of a schedule. Primitives mutate the stage in place and return it
/// (or the new axes).
class Stage {
 public:
  Stage() = default;
  explicit Stage(std::shared_ptr<StageNode> n) : n_(std::move(n)) {}
  StageNode* operator->() const { return n_.get(); }
  StageNode* get() const { return n_.get(); }
  bool defined() const { return n_ != nullptr; }
  bool same_as(const Stage& o) const { return n_ == o.n_; }

  /// The current operation's spatial / reduction axes (differ from the tensor's after
  /// cache_write replaced this stage's operation).
  const std::vector<IterVar>& op_axis() const;
  const std::vector<IterVar>& op_reduce_axis() const;

  /// Splits `parent` into (outer, inner) with inner extent `factor`. Where the factor does not
  /// divide the extent, the last tile is guarded (`likely(parent < extent)`), or, with
  /// `shift_tail`, shifted inwards to end at the extent: every tile is whole and unguarded,
  /// and the points it shares with the tile before it are computed twice (the same values).
  /// A shifted split must be of a data-parallel axis whose outer loop lies outside the stage's
  /// reduction loops (a reduction's overlap would otherwise be accumulated twice); it needs
  /// constant extents, and a tile no longer than the extent, else the tail is guarded.
  std::pair<IterVar, IterVar> split(const IterVar& parent, Expr factor, bool shift_tail = false);
  /// Splits `parent` into (outer, inner) with outer extent `nparts`.
  std::pair<IterVar, IterVar> split_nparts(const IterVar& parent, Expr nparts);
  /// Splits x and y and orders the loops (xo, yo, xi, yi); returns them in that order.
  std::tuple<IterVar, IterVar, IterVar, IterVar> tile(const IterVar& x, const IterVar& y,
                                                      Expr x_factor, Expr y_factor);
  /// Fuses two adjacent loops (outer directly enclosing inner) into one.
  IterVar fuse(const IterVar& outer, const IterVar& inner);
  /// Fuses consecutive loops, outermost first.
  IterVar fuse(const std::vector<IterVar>& axes);
  /// Puts the given leaf loops in this relative order (others keep their positions).
  Stage& reorder(const std::vector<IterVar>& order);
  /// Computes this stage inside loop `scope` of stage `parent`.
  Stage& compute_at(const Stage& parent, const IterVar& scope);
  /// Substitutes this stage's expression into its consumers; no storage.
  Stage& compute_inline();
  /// Computes this stage at the top level (the default).
  Stage& compute_root();
  Stage& set_scope(const std::string& scope);
  Stage& parallel(const IterVar& iv);
  Stage& vectorize(const IterVar& iv);
  Stage& unroll(const IterVar& iv);
  Stage& pragma(const IterVar& iv, const std::string& key, Expr value = Expr(1));
  /// Latency hiding (TVM's prefetch, with an explicit address): at the start of each iteration
  /// of leaf loop `iv`, hints the hardware to fetch the cache line of `t[index]` into the cache
  /// level `locality` names (builtin::kPrefetch). `index` may use this stage's loop variables
  /// and those of the loops around its attach point, and may lie outside `t`'s shape (its
  /// row-major offset is taken as is): e.g. the next block of a stream of weights, spread over
  /// the iterations of the current one.
  Stage& prefetch(const Tensor& t, const IterVar& iv, std::vector<Expr> index, int locality = 2);
  /// Replaces the loop nest from leaf loop `iv` inward by the tensor intrinsic `intrin`
  /// (te/tensor_intrin.h). Loop generation checks that the nest computes exactly what the
  /// intrinsic declares and throws an error naming the stage and the first mismatch otherwise.
  Stage& tensorize(const IterVar& iv, const TensorIntrin& intrin);
  /// Binds a loop to a thread axis, e.g. thread_axis("threadIdx.x").
  Stage& bind(const IterVar& iv, const IterVar& thread);
  /// Pads the stride of dimension `axis` so that stride % factor == offset.
  Stage& storage_align(const IterVar& axis, int factor, int offset);

 private:
  std::shared_ptr<StageNode> n_;
};

struct StorageAlignInfo {
  int dim;
  int factor, offset;
};

struct StageNode {
  Operation op;         ///< the operation computed (replaced by cache_read/cache_write)
  Operation origin_op;  ///< the operation the user wrote; names this stage's outputs
  std::string name() const { return origin_op->name; }
  std::vector<IterVar> all_iter_vars;   ///< root and derived
  std::vector<IterVar> leaf_iter_vars;  ///< the loops, outermost first
  std::vector<IterVarRelation> relations;
  std::unordered_map<const IterVarNode*, IterVarAttr> iter_var_attrs;
  AttachType attach_type = AttachType::kGroupRoot;
  Stage attach_stage;
  IterVar attach_ivar;
  std::string scope;  ///< "" = global
  bool is_output = false;
  std::vector<StorageAlignInfo> storage_aligns;

  /// Position of iv in leaf_iter_vars, or -1.
  int leaf_index(const IterVar& iv) const;
};

struct ScheduleNode {
  std::vector<Operation> outputs;
  std::vector<Stage> stages;  ///< producers before consumers
  /// Stage lookup by operation (current and origin ops).
  std::unordered_map<const OperationNode*, Stage> stage_map;
};

class Schedule {
 public:
  Schedule() = default;
  explicit Schedule(std::shared_ptr<ScheduleNode> n) : n_(std::move(n)) {}
  ScheduleNode* operator->() const { return n_.get(); }
  /// The stage computing `t` (by its original or current operation).
  Stage operator[](const Tensor& t) const;
  Stage operator[](const Operation& op) const;

  /// Adds a stage that copies `t` into `scope`; the given readers read the copy instead.
  Tensor cache_read(const Tensor& t, const std::string& scope, const std::vector<Tensor>& readers);
  /// Computes `t` into a new stage in `scope`; t's stage becomes a copy out of it.
  Tensor cache_write(const Tensor& t, const std::string& scope);
  /// Printable summary of stages and their loops (for `kiln inspect` and debugging).
  std::string to_string() const;

 private:
  std::shared_ptr<ScheduleNode> n_;
};

/// A default schedule: every stage computed at root with its natural loop nest.
Schedule create_schedule(const std::vector<Tensor>& outputs);
Schedule create_schedule(const std::vector<Operation>& outputs);

/// A thread axis for bind(): "blockIdx.x", "threadIdx.y", "vthread", …
IterVar thread_axis(const std::string& tag, Range dom = Range());

}  // namespace kiln::te
