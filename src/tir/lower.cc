// The lowering entry point: bound inference and loop nests from te, a PrimFunc with one buffer
// per argument tensor, then the tir pass pipeline.
#include "kiln/tir/lower.h"

#include <unordered_set>

#include "kiln/te/schedule_ops.h"

namespace kiln::tir {

PrimFunc lower(const te::Schedule& sch, const std::vector<te::Tensor>& args,
               const std::string& name, const LowerOptions& opt) {
  KILN_USER_CHECK(!name.empty()) << "lower: the function needs a name";
  std::unordered_set<const Object*> seen;
  for (size_t i = 0; i < args.size(); ++i) {
    KILN_USER_CHECK(args[i].defined()) << "lower " << name << ": argument " << i << " is undefined";
    KILN_USER_CHECK(seen.insert(args[i].get()).second)
        << "lower " << name << ": tensor " << args[i].name() << " is passed twice";
  }
  // Every placeholder read by the schedule must be an argument.
  for (const te::Stage& st : sch->stages) {
    if (st->op->kind != te::OpKind::kPlaceholder) continue;
    te::Tensor t = st->op.output(0);
    KILN_USER_CHECK(seen.count(t.get()))
        << "lower " << name << ": input tensor " << t.name()
        << " is read by the schedule but is not among the arguments";
  }
  // An extern stage reads its inputs from buffers, so a stage it reads is stored even where the
  // schedule inlined it (a fused embedding lookup whose indices are a cast of the input: the
  // index check is an extern stage over the cast). Its compute consumers still read it inlined.
  for (const te::Stage& st : sch->stages) {
    if (st->op->kind != te::OpKind::kExtern) continue;
    for (const te::Tensor& t : st->op->input_tensors()) {
      auto it = sch->stage_map.find(t.op().get());
      if (it == sch->stage_map.end()) continue;
      te::Stage in = it->second;
      if (in->attach_type == te::AttachType::kInline) in.compute_root();
    }
  }
  te::BoundMap bounds = te::infer_bound(sch);
  Stmt body = te::schedule_ops(sch, bounds, args);
  std::vector<Var> params;
  VarMap<Buffer> buffer_map;
  PipelineOptions popt = opt.pipeline;
  for (const te::Tensor& t : args) {
    Buffer buf = Buffer::make(t.name(), t->dtype, t->shape);
    Var param(t.name() + "_handle", DataType::Handle());
    params.push_back(param);
    buffer_map[param] = buf;
    popt.extern_buffers[t.get()] = buf;
  }
  PrimFunc f = PrimFunc::make(name, params, buffer_map, body);
  // Floating-point reassociation only where the schedule asks for it: pragma "fast_math".
  for (const te::Stage& st : sch->stages)
    for (const auto& [iv, attrs] : st->iter_var_attrs)
      for (const auto& [key, value] : attrs.pragmas)
        if (key == "fast_math") f = f.with_attr("fast_math", "1");
  if (opt.nests_only) return f;
  return run_pipeline(f, popt);
}

}  // namespace kiln::tir
