// The GPU fallback schedule (schedule_gpu.h).
#include "kiln/topi/schedule_gpu.h"

#include <algorithm>
#include <map>
#include <unordered_set>

#include "kiln/ir/op.h"
#include "kiln/topi/op_pattern.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
namespace {

bool is_compute(const te::Operation& op) { return op->kind == te::OpKind::kCompute; }

bool is_reduction(const te::Operation& op) {
  if (!is_compute(op)) return false;
  return !static_cast<const te::ComputeOpNode*>(op.get())->reduce_axis.empty();
}

/// True when `op` reads `target` directly or through other stages.
bool reads(const te::Operation& op, const te::Operation& target) {
  for (const te::Operation& o : te::post_dfs_order({op}))
    if (o.same_as(target) && !o.same_as(op)) return true;
  return false;
}

}  // namespace

te::Schedule schedule_gpu_fallback(const std::vector<te::Tensor>& outs, const Target& target) {
  KILN_USER_CHECK(!outs.empty()) << "schedule_gpu_fallback: no output tensors";
  std::vector<te::Operation> ops;
  for (const te::Tensor& t : outs)
    if (std::none_of(ops.begin(), ops.end(),
                     [&](const te::Operation& o) { return o.same_as(t.op()); }))
      ops.push_back(t.op());
  te::Schedule s = te::create_schedule(ops);
  std::unordered_set<const te::OperationNode*> out_set;
  for (const te::Operation& op : ops) out_set.insert(op.get());
  const int64_t threads =
      std::clamp<int64_t>(target.attr_int("max_threads_per_block", 1024), 1, 256);
  // Outputs: one thread per element.
  std::map<const te::OperationNode*, te::IterVar> thread_loop;
  for (const te::Operation& op : ops) {
    KILN_USER_CHECK(is_compute(op)) << "schedule_gpu_fallback: output '" << op->name
                                    << "' is not a compute stage; it has no GPU schedule yet";
    te::Stage st = s[op];
    const std::vector<te::IterVar>& axes = st.op_axis();
    KILN_USER_CHECK(!axes.empty()) << "schedule_gpu_fallback: output '" << op->name
                                   << "' is a 0-d tensor; it has no GPU schedule yet";
    int64_t numel = 1;
    for (const Expr& e : op->output_shape(0)) {
      auto c = as_const_int(e);
      KILN_USER_CHECK(c.has_value()) << "schedule_gpu_fallback: output '" << op->name
                                     << "' has a symbolic shape; GPU kernels need static shapes";
      numel *= *c;
    }
    te::IterVar fused = axes.size() == 1 ? axes[0] : st.fuse(axes);
    const int64_t t = std::max<int64_t>(1, std::min(threads, numel));
    auto [bx, tx] = st.split(fused, make_const(DataType::Int(32), static_cast<int32_t>(t)));
    st.bind(bx, te::thread_axis("blockIdx.x"));
    st.bind(tx, te::thread_axis("threadIdx.x"));
    thread_loop[op.get()] = tx;
  }
  // Intermediate stages: injective ones inlined, the others computed in the reading thread.
  for (const te::Operation& op : te::post_dfs_order(ops)) {
    // An extern stage (hand-written loops) stays at the root: it runs on one GPU thread
    // (tir::bind_extern_stages).
    if (!is_compute(op) || out_set.count(op.get())) continue;
    if (!is_reduction(op) && is_injective_tag(op->tag)) {
      s[op].compute_inline();
      continue;
    }
    const te::Operation* reader = nullptr;
    for (const te::Operation& out : ops) {
      if (!reads(out, op)) continue;
      KILN_USER_CHECK(reader == nullptr)
          << "schedule_gpu_fallback: stage '" << op->name << "' is read by two outputs ('"
          << (*reader)->name << "', '" << out->name << "'); it has no GPU schedule yet";
      reader = &out;
    }
    KILN_ICHECK(reader != nullptr)
        << "schedule_gpu_fallback: stage '" << op->name << "' is read by no output";
    s[op].compute_at(s[*reader], thread_loop.at(reader->get()));
  }
  return s;
}

te::Schedule schedule_dense_gpu(const std::vector<te::Tensor>& outs, const Target& target) {
  KILN_USER_CHECK(outs.size() == 1)
      << "schedule_dense_gpu: expects one output, got " << outs.size();
  const te::Tensor& out = outs[0];
  te::Schedule s = te::create_schedule({out});
  te::Operation dense;
  for (const te::Operation& op : te::post_dfs_order({out.op()}))
    if (op->tag == "dense") dense = op;
  KILN_USER_CHECK(dense.defined())
      << "schedule_dense_gpu: no dense stage in the group of '" << out.op()->name << "'";
  const auto* d = static_cast<const te::ComputeOpNode*>(dense.get());
  std::vector<te::Tensor> ins = dense->input_tensors();
  const int64_t t = kGpuDenseTile;
  auto extent = [](const Expr& e) { return as_const_int(e).value_or(-1); };
  const int64_t m = extent(dense->output_shape(0)[0]), n = extent(dense->output_shape(0)[1]);
  const int64_t k = d->reduce_axis.size() == 1 ? extent(d->reduce_axis[0]->dom->extent) : -1;
  KILN_USER_CHECK(ins.size() == 2 && m > 0 && n > 0 && k > 0 && m % t == 0 && n % t == 0 &&
                  k % t == 0 && out->shape.size() == 2)
      << "schedule_dense_gpu: '" << dense->name << "' is " << m << "x" << n << "x" << k
      << "; the template needs M, N and K multiples of " << t << " and a 2-D output";
  for (const te::Operation& op : te::post_dfs_order({out.op()})) {
    if (is_compute(op) && !op.same_as(out.op()) && !op.same_as(dense) && !is_reduction(op))
      s[op].compute_inline();
  }
  te::Stage so = s[out];
  const Expr tile = make_const(DataType::Int(32), static_cast<int32_t>(t));
  auto [io, ii] = so.split(so.op_axis()[0], tile);
  auto [jo, ji] = so.split(so.op_axis()[1], tile);
  so.reorder({io, jo, ii, ji});
  so.bind(io, te::thread_axis("blockIdx.y"));
  so.bind(jo, te::thread_axis("blockIdx.x"));
  so.bind(ii, te::thread_axis("threadIdx.y"));
  so.bind(ji, te::thread_axis("threadIdx.x"));
  te::Stage sd = s[dense];
  if (!dense.same_as(out.op())) {
    sd.set_scope("local");
    sd.compute_at(so, ji);
  }
  auto [ko, ki] = sd.split(sd.op_reduce_axis()[0], tile);
  (void)ki;
  te::Tensor dense_out = dense.output(0);
  for (const te::Tensor& in : ins) {
    te::Tensor cached = s.cache_read(in, "shared", {dense_out});
    te::Stage sc = s[cached];
    sc.compute_at(sd, ko);
    sc.bind(sc.op_axis()[0], te::thread_axis("threadIdx.y"));
    sc.bind(sc.op_axis()[1], te::thread_axis("threadIdx.x"));
  }
  (void)target;
  return s;
}

}  // namespace kiln::topi
