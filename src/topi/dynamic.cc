// The computes of NonZero, Unique, NonMaxSuppression and TopK: one extern op each, whose body calls
// the runtime's C kernel (kiln/runtime/dynamic_kernels.h) with the buffers' data pointers, the
// element type as (code, bits) and the static shapes as int64 arguments. Shapes and element
// types are checked here, so the C kernels never see a case they do not handle. The outputs of
// the first three are declared with their upper-bound shapes, the last one the int64 [1] actual
// extent; TopK's shapes are static.

#include "kiln/topi/dynamic.h"

#include "kiln/topi/op_pattern.h"
#include "topi_util.h"

namespace kiln::topi {

namespace {

using namespace kiln::ir;  // NOLINT
using detail::const_shape;
using detail::shape_text;

/// True for the element types the runtime kernels handle.
bool kernel_type(DataType t) {
  if (t.lanes() != 1) return false;
  if (t.is_bool()) return true;
  if (t.is_int() || t.is_uint())
    return t.bits() == 8 || t.bits() == 16 || t.bits() == 32 || t.bits() == 64;
  return t.code() == DataType::kFloat && (t.bits() == 32 || t.bits() == 64);
}

Expr i64(int64_t v) { return Expr(v); }
Expr i32(int64_t v) { return Expr(static_cast<int32_t>(v)); }

/// The scalar input `t` of `op`: one element of type `want`.
void check_scalar(const te::Tensor& t, DataType want, const std::string& op, const char* what) {
  if (!t.defined()) return;
  std::vector<int64_t> s = const_shape(t, op);
  KILN_USER_CHECK(detail::numel(s) == 1 && t->dtype == want)
      << op << ": " << what << " must be one " << want << " element, got " << t->dtype << " "
      << shape_text(s);
}

}  // namespace

std::vector<te::Tensor> nonzero(const te::Tensor& x, const std::string& name) {
  std::vector<int64_t> s = const_shape(x, "nonzero");
  KILN_USER_CHECK(!s.empty() && s.size() <= 6)
      << "nonzero: the input must have rank 1 to 6, got shape " << shape_text(s);
  KILN_USER_CHECK(kernel_type(x->dtype))
      << "nonzero: element type " << x->dtype << " is not supported";
  const int64_t rank = static_cast<int64_t>(s.size());
  const int64_t numel = detail::numel(s);
  DataType dt = x->dtype;
  std::vector<int64_t> dims = s;
  dims.resize(6, 1);
  return te::extern_op(
      {{i32(rank), i32(numel)}, {i32(1)}}, {DataType::Int(64), DataType::Int(64)}, {x},
      [=](const std::vector<Buffer>& ins, const std::vector<Buffer>& outs) {
        std::vector<Expr> args{ins[0]->data, i32(dt.code()), i32(dt.bits()), i64(rank)};
        for (int64_t d : dims) args.push_back(i64(d));
        args.push_back(outs[0]->data);
        args.push_back(outs[1]->data);
        return te::call_extern("kiln_dynamic_nonzero", args);
      },
      name);
}

std::vector<te::Tensor> unique(const te::Tensor& x, std::optional<int64_t> axis, bool sorted,
                               const std::string& name) {
  std::vector<int64_t> s = const_shape(x, "unique");
  KILN_USER_CHECK(kernel_type(x->dtype))
      << "unique: element type " << x->dtype << " is not supported";
  int64_t outer = 1, n = detail::numel(s), inner = 1;
  std::vector<int64_t> yshape{n};
  if (axis) {
    int a = detail::normalize_axis(*axis, s, "unique");
    outer = detail::numel(std::vector<int64_t>(s.begin(), s.begin() + a));
    n = s[static_cast<size_t>(a)];
    inner = detail::numel(std::vector<int64_t>(s.begin() + a + 1, s.end()));
    yshape = s;
  }
  KILN_USER_CHECK(n >= 1) << "unique: the input " << shape_text(s) << " is empty";
  DataType dt = x->dtype;
  DataType i64t = DataType::Int(64);
  return te::extern_op(
      {detail::to_exprs(yshape), {i32(n)}, {i32(n)}, {i32(n)}, {i32(1)}},
      {dt, i64t, i64t, i64t, i64t}, {x},
      [=](const std::vector<Buffer>& ins, const std::vector<Buffer>& outs) {
        return te::call_extern("kiln_dynamic_unique",
                               {ins[0]->data, i32(dt.code()), i32(dt.bits()), i64(outer), i64(n),
                                i64(inner), i32(sorted ? 1 : 0), outs[0]->data, outs[1]->data,
                                outs[2]->data, outs[3]->data, outs[4]->data});
      },
      name);
}

std::vector<te::Tensor> non_max_suppression(const te::Tensor& boxes, const te::Tensor& scores,
                                            const te::Tensor& max_output,
                                            const te::Tensor& iou_threshold,
                                            const te::Tensor& score_threshold,
                                            int64_t center_point_box, const std::string& name) {
  const std::string op = "non_max_suppression";
  std::vector<int64_t> bs = const_shape(boxes, op), ss = const_shape(scores, op);
  KILN_USER_CHECK(bs.size() == 3 && bs[2] == 4 && ss.size() == 3 && ss[0] == bs[0] &&
                  ss[2] == bs[1])
      << op << ": boxes must be [batches, boxes, 4] and scores [batches, classes, boxes], got "
      << shape_text(bs) << " and " << shape_text(ss);
  KILN_USER_CHECK(boxes->dtype == DataType::Float(32) && scores->dtype == DataType::Float(32))
      << op << ": boxes and scores must be float32, got " << boxes->dtype << " and "
      << scores->dtype;
  KILN_USER_CHECK(center_point_box == 0 || center_point_box == 1)
      << op << ": center_point_box must be 0 or 1, got " << center_point_box;
  check_scalar(max_output, DataType::Int(64), op, "max_output_boxes_per_class");
  check_scalar(iou_threshold, DataType::Float(32), op, "iou_threshold");
  check_scalar(score_threshold, DataType::Float(32), op, "score_threshold");
  const int64_t batches = bs[0], num = bs[1], classes = ss[1];
  const int64_t bound = batches * classes * num;
  std::vector<te::Tensor> inputs{boxes, scores};
  // Absent optional inputs are passed as the boxes' pointer with their flag 0.
  int slot[3] = {0, 0, 0};
  const te::Tensor* opt[3] = {&max_output, &iou_threshold, &score_threshold};
  for (int k = 0; k < 3; ++k) {
    if (!opt[k]->defined()) continue;
    slot[k] = static_cast<int>(inputs.size());
    inputs.push_back(*opt[k]);
  }
  return te::extern_op(
      {{i32(bound), i32(3)}, {i32(1)}}, {DataType::Int(64), DataType::Int(64)}, inputs,
      [=](const std::vector<Buffer>& ins, const std::vector<Buffer>& outs) {
        std::vector<Expr> args{ins[0]->data, ins[1]->data};
        for (int k = 0; k < 3; ++k) args.push_back(ins[static_cast<size_t>(slot[k])]->data);
        for (int k = 0; k < 3; ++k) args.push_back(i32(slot[k] != 0));
        for (int64_t v : {batches, classes, num}) args.push_back(i64(v));
        args.push_back(i32(center_point_box));
        args.push_back(outs[0]->data);
        args.push_back(outs[1]->data);
        return te::call_extern("kiln_dynamic_nms", args);
      },
      name);
}

namespace {
/// TopK's input shape and normalized axis, checked (rank >= 1, 0 <= k <= the axis extent).
std::pair<std::vector<int64_t>, size_t> topk_shape(const te::Tensor& x, int64_t k, int64_t axis) {
  std::vector<int64_t> s = const_shape(x, "topk");
  KILN_USER_CHECK(!s.empty()) << "topk: the input must have rank >= 1, got a scalar";
  const auto ax = static_cast<size_t>(detail::normalize_axis(static_cast<int>(axis), s, "topk"));
  KILN_USER_CHECK(k >= 0 && k <= s[ax]) << "topk: k " << k << " is outside [0, " << s[ax]
                                        << "] (axis " << ax << " of " << shape_text(s) << ")";
  return {s, ax};
}
}  // namespace

std::vector<te::Tensor> topk(const te::Tensor& x, int64_t k, int64_t axis, bool largest,
                             const std::string& name) {
  KILN_USER_CHECK(kernel_type(x->dtype) && !x->dtype.is_bool())
      << "topk: element type " << x->dtype << " is not supported";
  const auto [s, ax] = topk_shape(x, k, axis);
  const int64_t n = s[ax];
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < ax; ++d) outer *= s[d];
  for (size_t d = ax + 1; d < s.size(); ++d) inner *= s[d];
  std::vector<Expr> out;
  for (size_t d = 0; d < s.size(); ++d) out.push_back(i32(d == ax ? k : s[d]));
  const DataType dt = x->dtype;
  return te::extern_op(
      {out, out}, {dt, DataType::Int(64)}, {x},
      [=](const std::vector<Buffer>& ins, const std::vector<Buffer>& outs) {
        std::vector<Expr> args{ins[0]->data,  i32(dt.code()), i32(dt.bits()), i64(outer),
                               i64(n),        i64(inner),     i64(k),         i32(largest),
                               outs[0]->data, outs[1]->data};
        return te::call_extern("kiln_topk", args);
      },
      name);
}

std::vector<te::Tensor> topk_by_rank(const te::Tensor& x, int64_t k, int64_t axis, bool largest,
                                     const std::string& name) {
  const auto [s, ax] = topk_shape(x, k, axis);
  const int64_t n = s[ax];
  const DataType i64t = DataType::Int(64);
  auto with = [&](const std::vector<Var>& i, Expr v) {
    std::vector<Expr> r(i.begin(), i.end());
    r[ax] = std::move(v);
    return r;
  };
  auto j = te::reduce_axis(Range(Expr(0), Expr(static_cast<int32_t>(n))), "j");
  te::Tensor rank = te::compute(
      detail::to_exprs(s),
      [&](const std::vector<Var>& i) {
        Expr xi = x(with(i, i[ax])), xj = x(with(i, j->var));
        Expr ahead = largest ? xj > xi : xj < xi;
        Expr before = ahead || (xj == xi && j->var < i[ax]);
        return te::sum(cast(i64t, before), {j});
      },
      name + ".rank", tag::kCommReduce);
  std::vector<int64_t> os = s;
  os[ax] = k;
  auto pick = [&](bool index) {
    auto r = te::reduce_axis(Range(Expr(0), Expr(static_cast<int32_t>(n))), "i");
    return te::compute(
        detail::to_exprs(os),
        [&](const std::vector<Var>& i) {
          Expr hit = rank(with(i, r->var)) == cast(i64t, i[ax]);
          Expr v = index ? cast(i64t, r->var) : x(with(i, r->var));
          return te::sum(select(hit, v, make_zero(v.dtype())), {r});
        },
        name + (index ? ".indices" : ".values"), tag::kCommReduce);
  };
  return {pick(false), pick(true)};
}

}  // namespace kiln::topi
