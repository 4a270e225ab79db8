// The GPU fallback schedule and the GPU templates (schedule_gpu.h).
#include "kiln/topi/schedule_gpu.h"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_set>

#include "kiln/arith/analyzer.h"
#include "kiln/ir/functor.h"
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

/// True when kernel `root` reads `target` directly or through stages computed in it (not
/// through the other kernels in `roots`).
bool needs(const te::Operation& root, const te::Operation& target,
           const std::unordered_set<const te::OperationNode*>& roots) {
  std::vector<te::Operation> stack{root};
  std::unordered_set<const te::OperationNode*> seen;
  while (!stack.empty()) {
    te::Operation op = stack.back();
    stack.pop_back();
    for (const te::Tensor& t : op->input_tensors()) {
      const te::Operation& in = t.op();
      if (in.same_as(target)) return true;
      if (roots.count(in.get()) || !seen.insert(in.get()).second) continue;
      stack.push_back(in);
    }
  }
  return false;
}

/// The one output of a template's group and its stage tagged `tag` (the template's operator);
/// a user error naming the template `who` otherwise.
std::pair<te::Tensor, te::Operation> template_master(const std::vector<te::Tensor>& outs,
                                                     const std::string& tag, const char* who) {
  KILN_USER_CHECK(outs.size() == 1) << who << ": expects one output, got " << outs.size();
  te::Operation master;
  for (const te::Operation& op : te::post_dfs_order({outs[0].op()}))
    if (op->tag == tag) master = op;
  KILN_USER_CHECK(master.defined())
      << who << ": no " << tag << " stage in the group of '" << outs[0].op()->name << "'";
  return {outs[0], master};
}

/// Inlines every stage of the group but its output and `master` (padding, epilogue producers).
void inline_all_but(te::Schedule& s, const te::Tensor& out, const te::Operation& master) {
  for (const te::Operation& op : te::post_dfs_order({out.op()})) {
    if (is_compute(op) && !op.same_as(out.op()) && !op.same_as(master) && !is_reduction(op))
      s[op].compute_inline();
  }
}

/// Binds `blocks` and `threads` (outermost first, at most three each) to blockIdx / threadIdx
/// z, y, x: the last of each to x.
void bind_grid(te::Stage& st, const std::vector<te::IterVar>& blocks,
               const std::vector<te::IterVar>& threads) {
  static const char* const kAxes[] = {"z", "y", "x"};
  for (size_t i = 0; i < blocks.size(); ++i)
    st.bind(blocks[i], te::thread_axis(std::string("blockIdx.") + kAxes[3 - blocks.size() + i]));
  for (size_t i = 0; i < threads.size(); ++i)
    st.bind(threads[i], te::thread_axis(std::string("threadIdx.") + kAxes[3 - threads.size() + i]));
}

/// When `master` is not the group's output (an epilogue follows), it accumulates in
/// registers: local scope, computed at the output stage's innermost thread loop `at`.
void accumulate_at(te::Schedule& s, const te::Operation& master, const te::Tensor& out,
                   te::Stage& so, const te::IterVar& at) {
  if (master.same_as(out.op())) return;
  te::Stage sm = s[master];
  sm.set_scope("local");
  sm.compute_at(so, at);
}

/// The largest divisor of `n` that is at most `cap` (at least 1).
int64_t divisor_at_most(int64_t n, int64_t cap) {
  for (int64_t d = std::min(n, cap); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

/// Cooperative fetching: the copy stage's loops fused and dealt to the block's threads
/// (threadIdx.x fastest), the rest a serial loop; a guard where the copy is not a multiple of
/// the block.
void fetch_with_threads(te::Stage sc, const std::array<int64_t, 3>& threads) {
  te::IterVar f = sc.fuse(sc.op_axis());
  const char* tags[] = {"threadIdx.x", "threadIdx.y", "threadIdx.z"};
  std::vector<te::IterVar> bound;
  for (int d = 0; d < 3; ++d) {
    auto [outer, inner] =
        sc.split(f, make_const(DataType::Int(32), static_cast<int32_t>(threads[d])));
    bound.push_back(inner);
    f = outer;
  }
  sc.reorder({f, bound[2], bound[1], bound[0]});
  for (int d = 0; d < 3; ++d) sc.bind(bound[d], te::thread_axis(tags[d]));
}

/// The strides and dilations (h then w) of a conv2d_nchw compute: the coefficients of the
/// output's and the kernel's spatial loop variables in the index of its `data` read.
std::array<int64_t, 4> strides_and_dilations(const te::ComputeOpNode* c, const te::Tensor& data) {
  const Expr& body = c->body.at(0);
  const auto* red = body.as<Reduce>();
  KILN_ICHECK(red && red->source.size() == 1);
  std::vector<Expr> idx;
  struct Finder : IRVisitor {
    const te::Tensor* data;
    std::vector<Expr>* idx;
    using IRVisitor::visit;
    void visit(const ProducerLoad* op) override {
      if (op->producer.get() == data->get() && idx->empty()) *idx = op->indices;
      IRVisitor::visit(op);
    }
  } f;
  f.data = &data;
  f.idx = &idx;
  f.visit_expr(red->source[0]);
  KILN_ICHECK(idx.size() == 4) << "conv2d_nchw '" << c->name << "' does not read its data";
  std::vector<Var> vars;
  for (const te::IterVar& iv : c->axis) vars.push_back(iv->var);
  for (const te::IterVar& iv : c->reduce_axis) vars.push_back(iv->var);
  auto coef = [&](const Expr& e, const Var& v) {
    VarMap<Expr> at0, at1;
    for (const Var& u : vars) {
      at0[u] = make_const(u.dtype(), 0);
      at1[u] = make_const(u.dtype(), u.same_as(v) ? 1 : 0);
    }
    auto a = as_const_int(arith::simplify(substitute(e, at1)));
    auto b = as_const_int(arith::simplify(substitute(e, at0)));
    KILN_ICHECK(a && b) << "conv2d_nchw '" << c->name << "': a non-affine data index";
    return std::max<int64_t>(1, *a - *b);
  };
  return {coef(idx[2], c->axis[2]->var), coef(idx[2], c->reduce_axis[1]->var),
          coef(idx[3], c->axis[3]->var), coef(idx[3], c->reduce_axis[2]->var)};
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
  // One thread per element of a stage: its axes fused, split by the block, bound.
  std::map<const te::OperationNode*, te::IterVar> thread_loop;
  auto numel_of = [](const te::Operation& op) {
    int64_t n = 1;
    for (const Expr& e : op->output_shape(0)) {
      auto c = as_const_int(e);
      KILN_USER_CHECK(c.has_value()) << "schedule_gpu_fallback: stage '" << op->name
                                     << "' has a symbolic shape; GPU kernels need static shapes";
      n *= *c;
    }
    return n;
  };
  auto one_thread_per_element = [&](const te::Operation& op, const char* what) {
    KILN_USER_CHECK(is_compute(op)) << "schedule_gpu_fallback: " << what << " '" << op->name
                                    << "' is not a compute stage; it has no GPU schedule yet";
    te::Stage st = s[op];
    const std::vector<te::IterVar>& axes = st.op_axis();
    const int64_t numel = numel_of(op);
    // A 0-d result stays at the root: one GPU thread computes it (its loop nest is marked as a
    // sequential scope by the lowering, tir::bind_extern_stages).
    if (axes.empty()) return;
    te::IterVar fused = axes.size() == 1 ? axes[0] : st.fuse(axes);
    const int64_t t = std::max<int64_t>(1, std::min(threads, numel));
    auto [bx, tx] = st.split(fused, make_const(DataType::Int(32), static_cast<int32_t>(t)));
    st.bind(bx, te::thread_axis("blockIdx.x"));
    st.bind(tx, te::thread_axis("threadIdx.x"));
    thread_loop[op.get()] = tx;
  };
  for (const te::Operation& op : ops) one_thread_per_element(op, "output");
  // Intermediate stages: injective ones inlined. A reduction read element for element by one
  // output (a conv's epilogue) is computed in the reading thread, in registers; one whose
  // elements each feed many (softmax's row max and sum, a norm's mean, an LSTM's gates), or
  // read by two outputs, is a kernel of its own with one thread per element: computed in the
  // reading thread it would be recomputed by every thread that reads it.
  // Consumers first, so that the kernels reading a stage are known when it is placed.
  std::vector<te::Operation> order = te::post_dfs_order(ops);
  std::unordered_set<const te::OperationNode*> roots = out_set;
  // Stages an extern stage reads: stored whole (the extern reads a buffer), so not inlined.
  std::unordered_set<const te::OperationNode*> read_by_extern;
  for (const te::Operation& op : order)
    if (!is_compute(op))
      for (const te::Tensor& t : op->input_tensors()) read_by_extern.insert(t.op().get());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const te::Operation& op = *it;
    // An extern stage (hand-written loops) stays at the root: it runs on one GPU thread
    // (tir::bind_extern_stages).
    if (!is_compute(op) || out_set.count(op.get())) continue;
    if (read_by_extern.count(op.get())) {
      // Indices computed in the kernel and checked by take's extern stage: a kernel of their
      // own, one thread per element (unbound root loops would run outside any GPU kernel).
      one_thread_per_element(op, "stage");
      roots.insert(op.get());
      continue;
    }
    if (!is_reduction(op) && is_injective_tag(op->tag)) {
      s[op].compute_inline();
      continue;
    }
    std::vector<const te::Operation*> readers;
    for (const te::Operation& r : order)
      if (roots.count(r.get()) && needs(r, op, roots)) readers.push_back(&r);
    KILN_ICHECK(!readers.empty()) << "schedule_gpu_fallback: stage '" << op->name
                                  << "' is read by no kernel";
    const bool zero_d = op->output_shape(0).empty();
    if (readers.size() == 1 && thread_loop.count(readers[0]->get()) &&
        (zero_d || !is_reduction(op) || numel_of(op) == numel_of(*readers[0]))) {
      s[op].compute_at(s[*readers[0]], thread_loop.at(readers[0]->get()));
    } else {
      one_thread_per_element(op, "stage");
      roots.insert(op.get());
    }
  }
  return s;
}

te::Schedule schedule_dense_gpu(const std::vector<te::Tensor>& outs, const Target& target) {
  const auto [out, dense] = template_master(outs, "dense", "schedule_dense_gpu");
  te::Schedule s = te::create_schedule({out});
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
  inline_all_but(s, out, dense);
  te::Stage so = s[out];
  const Expr tile = make_const(DataType::Int(32), static_cast<int32_t>(t));
  auto [io, ii] = so.split(so.op_axis()[0], tile);
  auto [jo, ji] = so.split(so.op_axis()[1], tile);
  so.reorder({io, jo, ii, ji});
  bind_grid(so, {io, jo}, {ii, ji});
  accumulate_at(s, dense, out, so, ji);
  te::Stage sd = s[dense];
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

te::Schedule schedule_conv2d_gpu(const std::vector<te::Tensor>& outs, const Target& target) {
  const auto [out, conv] = template_master(outs, "conv2d_nchw", "schedule_conv2d_gpu");
  te::Schedule s = te::create_schedule({out});
  std::vector<int64_t> os;
  for (const Expr& e : conv->output_shape(0)) os.push_back(as_const_int(e).value_or(-1));
  std::vector<int64_t> out_shape;
  for (const Expr& e : out->shape) out_shape.push_back(as_const_int(e).value_or(-1));
  const auto* c = static_cast<const te::ComputeOpNode*>(conv.get());
  std::vector<te::Tensor> ins = conv->input_tensors();
  KILN_USER_CHECK(os.size() == 4 && out_shape == os && ins.size() == 2 &&
                  c->reduce_axis.size() == 3 &&
                  std::all_of(os.begin(), os.end(), [](int64_t v) { return v > 0; }))
      << "schedule_conv2d_gpu: '" << conv->name << "' needs a static 4-D output equal to the "
      << "group's output";
  const int64_t rc_extent = as_const_int(c->reduce_axis[0]->dom->extent).value_or(-1);
  // Output channels of the kernel: groups == 1 iff the kernel's input channels are the
  // reduction's and the data's channel count.
  const int64_t data_c = as_const_int(ins[0]->shape[1]).value_or(-1);
  KILN_USER_CHECK(rc_extent == data_c)
      << "schedule_conv2d_gpu: '" << conv->name << "' is a grouped convolution";

  // The block's tile: Wb x Hb output pixels by Fb output channels; each thread computes Fr
  // channels of one pixel (a register tile). Divisors only: no guard, so every thread of a
  // block reaches every barrier.
  const int64_t max_threads =
      std::clamp<int64_t>(target.attr_int("max_threads_per_block", 1024), 1, 256);
  const int64_t max_shared = target.attr_int("max_shared_memory_per_block", 48 * 1024);
  const int64_t F = os[1], H = os[2], W = os[3];
  const int64_t kh = as_const_int(ins[1]->shape[2]).value_or(1);
  const int64_t kw = as_const_int(ins[1]->shape[3]).value_or(1);
  const auto [sh, dh, sw, dw] = strides_and_dilations(c, ins[0]);
  int64_t wb = divisor_at_most(W, 16);
  int64_t hb = divisor_at_most(H, std::max<int64_t>(1, 64 / wb));
  const int64_t fr = divisor_at_most(F, 4);
  int64_t ft = divisor_at_most(F / fr, std::max<int64_t>(1, max_threads / (wb * hb)));
  int64_t rcb = divisor_at_most(rc_extent, 8);
  // The two shared tiles of a reduction step must fit the block's shared memory: fewer input
  // channels per step first, then fewer rows, columns, channels per block.
  auto shared_bytes = [&] {
    const int64_t rows = (hb - 1) * sh + (kh - 1) * dh + 1,
                  cols = (wb - 1) * sw + (kw - 1) * dw + 1;
    return 4 * rcb * (rows * cols + ft * fr * kh * kw);
  };
  while (shared_bytes() > max_shared) {
    if (rcb > 1) {
      rcb = divisor_at_most(rc_extent, rcb - 1);
    } else if (hb > 1) {
      hb = divisor_at_most(H, hb - 1);
    } else if (wb > 1) {
      wb = divisor_at_most(W, wb - 1);
    } else if (ft > 1) {
      ft = divisor_at_most(F / fr, ft - 1);
    } else {
      KILN_ERROR << "schedule_conv2d_gpu: '" << conv->name << "': one input channel of a " << kh
                 << "x" << kw << " kernel does not fit " << max_shared << " bytes of shared memory";
    }
  }
  auto ci = [](int64_t v) { return make_const(DataType::Int(32), static_cast<int32_t>(v)); };

  inline_all_but(s, out, conv);  // the padding and the epilogue's producers
  te::Stage so = s[out];
  std::vector<te::IterVar> ax = so.op_axis();
  auto [fo, f1] = so.split(ax[1], ci(ft * fr));
  auto [tz, fi] = so.split(f1, ci(fr));
  auto [yo, ty] = so.split(ax[2], ci(hb));
  auto [xo, tx] = so.split(ax[3], ci(wb));
  so.reorder({ax[0], fo, yo, xo, tz, ty, tx, fi});
  te::IterVar bz = so.fuse(ax[0], fo);
  bind_grid(so, {bz, yo, xo}, {tz, ty, tx});
  accumulate_at(s, conv, out, so, tx);
  te::Stage sc = s[conv];
  auto [rco, rci] = sc.split(sc.op_reduce_axis()[0], ci(rcb));
  std::vector<te::IterVar> order = {rco, rci, sc.op_reduce_axis()[1], sc.op_reduce_axis()[2]};
  if (!conv.same_as(out.op())) {
    for (const te::IterVar& v : sc.op_axis()) order.push_back(v);
  } else {
    order.push_back(fi);
  }
  // The output itself accumulates in place: its reduction goes under the thread loops.
  if (conv.same_as(out.op())) order.insert(order.begin(), {tz, ty, tx});
  sc.reorder(order);
  // The padded input's and the weights' tiles of a reduction step, in shared memory.
  const std::array<int64_t, 3> threads = {wb, hb, ft};
  te::Tensor conv_out = conv.output(0);
  for (const te::Tensor& in : ins) {
    te::Tensor cached = s.cache_read(in, "shared", {conv_out});
    s[cached].compute_at(sc, rco);
    fetch_with_threads(s[cached], threads);
  }
  return s;
}

}  // namespace kiln::topi
