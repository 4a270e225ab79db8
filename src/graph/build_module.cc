// The graph compiler's back end: Graph → (graph.json, lib, params). The typed, optimized graph
// is partitioned into groups (fuse.cc's operator fusion at opt_level >= 1, else one op node per
// group; a group is a convex set of op nodes in topological order whose master is its
// out-fusable or reduction node, else its last node). Each group becomes one kernel: te
// placeholders for the entries it reads from outside, the registered computes of its nodes
// chained on them, the outputs other nodes (or the graph's results) read, a schedule: the
// schedule of the implementation the master's strategy chose (recorded on the node,
// strategy.h; with the tuned config of its task when the tuning log has one), completed for
// fused groups by inlining every injective intermediate stage (a conv2d / dense epilogue joins
// the output stage), and one lowered PrimFunc. Groups with the same structure, attributes and
// input types share a function (a cache keyed by a string). All functions are compiled by one
// kiln::build. The executable graph (null nodes for inputs and constants, one kiln_op node per
// group) is then memory-planned (memory_plan.cc) and written as the GraphExecutor's JSON.

#include "kiln/graph/build_module.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "kiln/graph/op_registry.h"
#include "kiln/graph/strategy.h"
#include "kiln/graph/transform.h"
#include "kiln/graph/tuning.h"
#include "kiln/runtime/params.h"
#include "kiln/support/error.h"
#include "kiln/target/build.h"
#include "kiln/tir/cost.h"
#include "kiln/tir/lower.h"
#include "kiln/topi/schedule_injective.h"
#include "op_attrs.h"
#include "transform/pass_util.h"

namespace kiln::graph {

namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// Op nodes compiled into one kernel, in topological order (see master_of for its master).
struct Group {
  std::vector<int> nodes;
};

/// The fusion pass's groups (transform.h, fuse_ops; the `views` stand alone) at opt_level >= 1,
/// else one group per op node.
std::vector<Group> partition(const Graph& g, int opt_level, const std::set<int>& views) {
  std::vector<std::vector<int>> parts =
      opt_level >= 1 ? fuse_ops(g, 16, views) : partition_unfused(g);
  std::vector<Group> groups;
  groups.reserve(parts.size());
  for (std::vector<int>& p : parts) groups.push_back(Group{std::move(p)});
  return groups;
}

/// The group's master: its out-fusable or reduction node, else its last node.
int master_of(const Graph& g, const Group& grp) {
  const OpRegistry& reg = OpRegistry::global();
  for (int i : grp.nodes) {
    const OpDef* def = reg.find(g.node(i).op);
    if (def && (def->pattern == topi::OpPattern::kOutEWiseFusable ||
                def->pattern == topi::OpPattern::kCommReduce))
      return i;
  }
  return grp.nodes.back();
}

/// The bounded outputs of op node `i` (OpDef::bounded), empty for a static-shape op.
std::vector<BoundedOutput> bounded_outputs(const Graph& g, int i) {
  const Node& n = g.node(i);
  const OpDef* def = n.is_op() ? OpRegistry::global().find(n.op) : nullptr;
  if (!def || !def->bounded) return {};
  std::vector<TensorType> in;
  for (const Entry& e : n.inputs) in.push_back(g.type_of(e));
  return def->bounded(in, n.attrs);
}

/// Data-dependent shapes may only leave the graph: a user error naming the producer and the
/// consumer when an op reads a bounded output.
void check_bounded_consumers(const Graph& g) {
  auto name = [&](int i) {
    return g.node(i).name.empty() ? "%" + std::to_string(i) : g.node(i).name;
  };
  for (int i = 0; i < g.num_nodes(); ++i) {
    std::vector<BoundedOutput> b = bounded_outputs(g, i);
    if (b.empty()) continue;
    for (int c = i + 1; c < g.num_nodes(); ++c) {
      for (const Entry& e : g.node(c).inputs) {
        if (e.node != i) continue;
        for (const BoundedOutput& bo : b) {
          KILN_USER_CHECK(bo.output != e.index)
              << "build_module: the output of " << g.node(i).op << " '" << name(i)
              << "' has a data-dependent shape; only graph outputs may have one yet (it is read "
              << "by " << g.node(c).op << " '" << name(c) << "')";
        }
      }
    }
  }
}

/// A node of the executable graph (graph.json).
struct ExecNode {
  std::string name;
  std::string func_name;  ///< empty for a null (argument) node and a view
  std::vector<Entry> inputs;
  std::vector<TensorType> outputs;
  /// Bounded outputs, by the exec node's output indices (output, axis, extent_output).
  std::vector<BoundedOutput> bounded;
  bool view = false;  ///< a view of its inputs (plan_views): no kernel runs
};

/// A compiled group: its function and its interface in terms of the graph's entries.
struct Kernel {
  std::string func_name;
  std::vector<Entry> inputs;   ///< entries read from outside the group, in first-use order
  std::vector<Entry> outputs;  ///< entries the group exposes, in (node, index) order
};

te::Tensor copy_of(const te::Tensor& t, const std::string& name) {
  return te::compute(t->shape, te::FCompute([t](const std::vector<ir::Var>& v) {
                       return t(std::vector<ir::Expr>(v.begin(), v.end()));
                     }),
                     name, topi::tag::kElemWise);
}

/// The schedule of a group whose master node is `master` (its tensor `main`) and whose kernel
/// outputs are `outs`: the schedule of the implementation recorded on the master (strategy.h),
/// with the tuned config of its task when the tuning log has one.
te::Schedule schedule_for(const Node& master, const te::Tensor& main,
                          const std::vector<te::Tensor>& outs, const Target& target,
                          TunedConfigs* tuned) {
  KILN_ICHECK(!master.impl.name.empty())
      << "build_module: no implementation recorded on " << master.op << " '" << master.name
      << "' (select_implementations did not run)";
  const Implementation& impl = implementation(master.impl.name);
  autotune::Config cfg = autotune::Config::fallback();
  if (tuned && !tuned->empty() && master.impl.task) {
    if (std::optional<autotune::Config> c = tuned->lookup(master.impl.task())) cfg = *c;
  }
  return impl.schedule(ScheduleInput{master, main, outs, target, cfg});
}

class ModuleBuilder {
 public:
  ModuleBuilder(const Graph& g, const Target& target, const BuildOptions& opt, TunedConfigs* tuned)
      : g_(g), target_(target), opt_(opt), tuned_(tuned) {
    for (int i = 0; i < g.num_nodes(); ++i)
      for (const Entry& e : g.node(i).inputs) consumers_[e].push_back(i);
    for (const Entry& e : g.outputs()) heads_.insert(e);
  }

  Kernel compile(const Group& grp) {
    const Node& master = g_.node(master_of(g_, grp));
    std::string where = "build_module: " + detail::describe_node(g_, master_of(g_, grp));
    std::set<int> members(grp.nodes.begin(), grp.nodes.end());
    Kernel k;
    // Interface: external inputs (deduplicated), and the outputs read outside the group, by
    // the results, or produced by the master.
    // Members are named by their position in the group (groups with the same structure share
    // a function however other nodes interleave with them in the graph).
    auto pos = [&](int node) {
      return std::to_string(std::lower_bound(grp.nodes.begin(), grp.nodes.end(), node) -
                            grp.nodes.begin());
    };
    std::string key;
    std::map<Entry, int> ext_index;
    for (int i : grp.nodes) {
      const Node& n = g_.node(i);
      key += n.op + "[" + n.impl.name + "](" + n.attrs.str() + "):";
      for (const Entry& e : n.inputs) {
        if (members.count(e.node)) {
          key += " local" + pos(e.node) + "." + std::to_string(e.index);
          continue;
        }
        auto [it, fresh] = ext_index.emplace(e, static_cast<int>(k.inputs.size()));
        if (fresh) k.inputs.push_back(e);
        key += " in" + std::to_string(it->second);
      }
      key += ";";
    }
    for (int i : grp.nodes) {
      for (int o = 0; o < g_.node(i).num_outputs(); ++o) {
        Entry e{i, o};
        bool exposed = i == grp.nodes.back() || heads_.count(e);
        for (int c : consumers_[e]) exposed = exposed || !members.count(c);
        if (exposed) {
          k.outputs.push_back(e);
          key += " out" + pos(i) + "." + std::to_string(o);
        }
      }
    }
    std::vector<TensorType> in_types;
    for (const Entry& e : k.inputs) {
      in_types.push_back(g_.type_of(e));
      key += " " + in_types.back().str();
    }
    if (opt_.share_kernels) {
      auto it = cache_.find(key);
      if (it != cache_.end()) {
        k.func_name = it->second;
        return k;
      }
    }
    k.func_name = "fused_" + master.op + "_" + std::to_string(funcs_.size());
    impls_[k.func_name] = master.impl.name;  // graph.json's "impl" (template or generated)
    try {
      std::vector<te::Tensor> ins = placeholders_for(in_types);
      std::map<Entry, te::Tensor> val;
      for (size_t j = 0; j < k.inputs.size(); ++j) val[k.inputs[j]] = ins[j];
      const OpRegistry& reg = OpRegistry::global();
      for (int i : grp.nodes) {
        const Node& n = g_.node(i);
        const OpDef& def = reg.get(n.op, detail::describe_node(g_, i));
        std::vector<te::Tensor> args;
        for (const Entry& e : n.inputs) args.push_back(val.at(e));
        std::vector<te::Tensor> outs = def.compute(args, n.attrs, n.op);
        KILN_ICHECK(static_cast<int>(outs.size()) == n.num_outputs())
            << where << ": compute returned " << outs.size() << " tensors, the node has "
            << n.num_outputs() << " outputs";
        for (size_t o = 0; o < outs.size(); ++o) {
          KILN_ICHECK(tensor_type(outs[o]) == n.outputs[o])
              << where << ": compute gives " << tensor_type(outs[o]).str() << " for output " << o
              << ", inferred " << n.outputs[o].str();
          val[Entry{i, static_cast<int>(o)}] = outs[o];
        }
      }
      // A kernel writes every output: an output that is an input (or another output) is
      // copied.
      std::vector<te::Tensor> outs;
      std::set<const te::TensorNode*> seen;
      for (const Entry& e : k.outputs) {
        te::Tensor t = val.at(e);
        if (t.op()->kind == te::OpKind::kPlaceholder || seen.count(t.get()))
          t = copy_of(t, master.op + "_copy");
        seen.insert(t.get());
        outs.push_back(t);
      }
      te::Tensor main = master.num_outputs() == 1 ? val.at(Entry{master_of(g_, grp), 0}) : outs[0];
      te::Schedule s = schedule_for(master, main, outs, target_, tuned_);
      if (grp.nodes.size() > 1) finish_group_schedule(s, grp, master_of(g_, grp), val);
      std::vector<te::Tensor> params = ins;
      params.insert(params.end(), outs.begin(), outs.end());
      funcs_.push_back(tir::lower(s, params, k.func_name));
      costs_[k.func_name] = tir::kernel_cost(funcs_.back());
      if (opt_.keep_ir) {
        kernels_.push_back(
            KernelInfo{k.func_name, groups_str(g_, {grp.nodes}), "", master.impl.name});
        kernels_.back().group.pop_back();  // groups_str ends each group with a newline
        kernels_.back().tir = tir::to_string(funcs_.back());
      }
    } catch (const Error& err) {
      KILN_ERROR << where << ": cannot compile the kernel: " << err.what();
    }
    cache_[key] = k.func_name;
    return k;
  }

  /// Completes the master's schedule of a fused group: every node's output stage the master's
  /// rule left at the root, is not a reduction and is not a kernel output is inlined into its
  /// consumers (element-wise chains, and a conv2d / dense epilogue — including the op's own
  /// bias stage — become part of the output stage; injective inputs become part of a
  /// reduction). For an out-fusable master, whose reduction stage is then no longer an output,
  /// every untouched root reduction stage gets the generic loop nest: its two outer spatial
  /// axes fused and, when large, parallel.
  void finish_group_schedule(te::Schedule& s, const Group& grp, int master,
                             const std::map<Entry, te::Tensor>& val) const {
    for (int i : grp.nodes) {
      if (g_.node(i).num_outputs() != 1) continue;
      te::Stage st = s[val.at(Entry{i, 0})];
      if (st->is_output || st->op->kind != te::OpKind::kCompute) continue;
      if (st->attach_type != te::AttachType::kGroupRoot) continue;
      if (st.op_reduce_axis().empty()) st.compute_inline();
    }
    if (OpRegistry::global().get(g_.node(master).op).pattern != topi::OpPattern::kOutEWiseFusable)
      return;
    for (te::Stage st : s->stages) {
      if (st->is_output || st->op->kind != te::OpKind::kCompute) continue;
      if (st->attach_type != te::AttachType::kGroupRoot || st.op_reduce_axis().empty()) continue;
      const std::vector<te::IterVar>& axes = st.op_axis();
      if (axes.empty() || st->leaf_iter_vars.size() != axes.size() + st.op_reduce_axis().size())
        continue;
      int64_t numel = 1;
      for (const ir::Expr& e : st->op->output_shape(0)) {
        const ir::IntImm* c = e.as<ir::IntImm>();
        numel *= c ? c->value : 0;
      }
      if (numel <= topi::kParallelThreshold) continue;
      te::IterVar outer = axes.size() >= 2 ? st.fuse(axes[0], axes[1]) : axes[0];
      st.parallel(outer);
    }
  }

  CompiledModule build() {
    auto t0 = Clock::now();
    CompiledModule m;
    std::vector<ExecNode> exec;
    std::map<Entry, Entry> to_exec;  // graph entry → executable-graph entry
    std::vector<std::string> input_names;
    std::vector<int> arg_nodes;
    check_bounded_consumers(g_);
    // Concats whose inputs are written in place (memory_plan.h): no kernel, no copy.
    // Not where fusion inlines an input's producer into the concat's kernel (memory_plan.h).
    const ViewPlan views = opt_.opt_level >= 1 ? plan_views(g_, fuse_ops(g_)) : ViewPlan{};
    std::vector<Group> groups = partition(g_, opt_.opt_level, views.nodes);
    std::map<int, size_t> group_of_last;
    for (size_t gi = 0; gi < groups.size(); ++gi) group_of_last[groups[gi].nodes.back()] = gi;
    for (int i = 0; i < g_.num_nodes(); ++i) {
      const Node& n = g_.node(i);
      if (!n.is_op()) {
        to_exec[Entry{i, 0}] = Entry{static_cast<int>(exec.size()), 0};
        arg_nodes.push_back(static_cast<int>(exec.size()));
        exec.push_back(ExecNode{n.name, "", {}, n.outputs});
        if (n.is_input()) {
          input_names.push_back(n.name);
        } else {
          m.params[n.name] = n.value;
        }
        continue;
      }
      auto it = group_of_last.find(i);
      if (it == group_of_last.end()) continue;  // emitted with its group's last node
      if (views.nodes.count(i)) {
        ExecNode en{
            n.name.empty() ? n.op + std::to_string(i) : n.name, "", {}, n.outputs, {}, true};
        for (const Entry& e : n.inputs) en.inputs.push_back(to_exec.at(e));
        to_exec[Entry{i, 0}] = Entry{static_cast<int>(exec.size()), 0};
        exec.push_back(std::move(en));
        continue;
      }
      Kernel k = compile(groups[it->second]);
      ExecNode en;
      en.name = n.name.empty() ? n.op + std::to_string(i) : n.name;
      en.func_name = k.func_name;
      for (const Entry& e : k.inputs) {
        auto f = to_exec.find(e);
        KILN_ICHECK(f != to_exec.end())
            << "build_module: group of node " << i << " reads an entry not yet computed";
        en.inputs.push_back(f->second);
      }
      for (size_t o = 0; o < k.outputs.size(); ++o) {
        to_exec[k.outputs[o]] = Entry{static_cast<int>(exec.size()), static_cast<int>(o)};
        en.outputs.push_back(g_.type_of(k.outputs[o]));
      }
      for (int m : groups[it->second].nodes) {
        for (const BoundedOutput& bo : bounded_outputs(g_, m)) {
          auto pos = [&](int index) {
            auto f = std::find(k.outputs.begin(), k.outputs.end(), Entry{m, index});
            return f == k.outputs.end() ? -1 : static_cast<int>(f - k.outputs.begin());
          };
          int o = pos(bo.output), x = pos(bo.extent_output);
          if (o < 0) continue;  // not exposed: nobody reads it
          KILN_ICHECK(x >= 0) << "build_module: the extent of bounded output " << bo.output
                              << " of node " << m << " is not a kernel output";
          en.bounded.push_back(BoundedOutput{o, bo.axis, x});
        }
      }
      if (!en.func_name.empty()) {
        const int master = master_of(g_, groups[it->second]);
        if (!g_.node(master).name.empty())
          m.kernel_masters[static_cast<int>(exec.size())] = g_.node(master).name;
      }
      exec.push_back(std::move(en));
    }
    std::vector<Entry> heads;
    for (const Entry& e : g_.outputs()) heads.push_back(to_exec.at(e));
    if (opt_.debug_outputs) {
      std::set<Entry> seen(heads.begin(), heads.end());
      for (size_t x = 0; x < exec.size(); ++x) {
        if (exec[x].func_name.empty()) continue;
        for (size_t o = 0; o < exec[x].outputs.size(); ++o) {
          Entry e{static_cast<int>(x), static_cast<int>(o)};
          if (seen.insert(e).second) heads.push_back(e);
        }
      }
    }

    std::vector<PlanNode> pn;
    for (const ExecNode& en : exec)
      pn.push_back(PlanNode{en.func_name.empty() && !en.view, en.inputs, en.outputs});
    std::map<Entry, Slot> slots;
    for (const auto& [e, slot] : views.slots)
      slots[to_exec.at(e)] = Slot{to_exec.at(slot.root), slot.offset};
    m.memory = plan_memory(pn, heads, slots);
    m.graph_json = to_json(exec, arg_nodes, input_names, heads, m.memory);
    m.num_kernels = static_cast<int>(funcs_.size());
    m.kernels = kernels_;
    if (opt_.keep_ir) m.graph_text = g_.str();
    m.lower_ms = ms_since(t0);
    auto t1 = Clock::now();
    m.lib = kiln::build(funcs_, target_);
    m.codegen_ms = ms_since(t1);
    return m;
  }

 private:
  std::string to_json(const std::vector<ExecNode>& exec, const std::vector<int>& arg_nodes,
                      const std::vector<std::string>& input_names, const std::vector<Entry>& heads,
                      const MemoryPlan& plan) const {
    json nodes = json::array();
    json shapes = json::array(), dtypes = json::array(), bounded = json::array();
    std::vector<int> row_ptr{0};
    for (const ExecNode& en : exec) {
      for (const BoundedOutput& bo : en.bounded) {
        bounded.push_back({{"entry", row_ptr.back() + bo.output},
                           {"axis", bo.axis},
                           {"extent_entry", row_ptr.back() + bo.extent_output}});
      }
      json jn;
      jn["op"] = en.view ? "kiln_view" : en.func_name.empty() ? "null" : "kiln_op";
      jn["name"] = en.name;
      json ins = json::array();
      for (const Entry& e : en.inputs) ins.push_back({e.node, e.index, 0});
      jn["inputs"] = ins;
      if (!en.func_name.empty()) {
        jn["attrs"] = {{"func_name", en.func_name},
                       {"num_inputs", en.inputs.size()},
                       {"num_outputs", en.outputs.size()}};
        if (auto i = impls_.find(en.func_name); i != impls_.end()) jn["attrs"]["impl"] = i->second;
        if (auto c = costs_.find(en.func_name); c != costs_.end()) {
          jn["attrs"]["flops"] = c->second.flops;  // per call, for kiln bench --profile
          jn["attrs"]["bytes"] = c->second.bytes;
        }
      }
      nodes.push_back(jn);
      for (const TensorType& t : en.outputs) {
        shapes.push_back(t.shape);
        dtypes.push_back(t.dtype.str());
      }
      row_ptr.push_back(row_ptr.back() + static_cast<int>(en.outputs.size()));
    }
    json jheads = json::array(), names = json::array();
    std::set<std::string> used;
    for (size_t h = 0; h < heads.size(); ++h) {
      const Entry& e = heads[h];
      jheads.push_back({e.node, e.index, 0});
      const ExecNode& en = exec[static_cast<size_t>(e.node)];
      std::string name = en.name;
      if (en.outputs.size() > 1) name += ":" + std::to_string(e.index);
      if (h < g_.output_names().size() && !g_.output_names()[h].empty())
        name = g_.output_names()[h];  // the graph's own name for its result
      if (used.count(name)) name += "_" + std::to_string(h);
      used.insert(name);
      names.push_back(name);
    }
    json j;
    j["version"] = 1;
    // Storage and kernels on the GPU.
    if (target_.kind == "cuda" || target_.kind == "opencl") j["device"] = target_.kind;
    j["nodes"] = nodes;
    j["arg_nodes"] = arg_nodes;
    j["inputs"] = input_names;
    j["heads"] = jheads;
    j["outputs"] = names;
    j["node_row_ptr"] = row_ptr;
    j["attrs"] = {{"shape", shapes}, {"dtype", dtypes}, {"storage_id", plan.storage_id}};
    if (std::any_of(plan.storage_offset.begin(), plan.storage_offset.end(),
                    [](size_t o) { return o != 0; }))
      j["attrs"]["storage_offset"] = plan.storage_offset;  // views (module-format.md)
    if (!bounded.empty()) j["bounded"] = bounded;  // data-dependent shapes (module-format.md)
    // One line per node and per attribute list: readable, and diffs stay small.
    std::string r = "{\n";
    size_t key = 0;
    for (auto it = j.begin(); it != j.end(); ++it, ++key) {
      r += "  " + json(it.key()).dump() + ": ";
      if (it.key() == "nodes" || it.key() == "attrs") {
        bool obj = it->is_object();
        r += obj ? "{\n" : "[\n";
        size_t k = 0;
        for (auto e = it->begin(); e != it->end(); ++e, ++k) {
          r += "    ";
          if (obj) r += json(e.key()).dump() + ": ";
          r += e->dump() + (k + 1 < it->size() ? ",\n" : "\n");
        }
        r += obj ? "  }" : "  ]";
      } else {
        r += it->dump();
      }
      r += key + 1 < j.size() ? ",\n" : "\n";
    }
    return r + "}";
  }

  const Graph& g_;
  Target target_;
  BuildOptions opt_;
  TunedConfigs* tuned_;
  std::map<Entry, std::vector<int>> consumers_;
  std::set<Entry> heads_;
  std::map<std::string, std::string> cache_;
  std::vector<tir::PrimFunc> funcs_;
  std::map<std::string, tir::KernelCost> costs_;  ///< per function (tir/cost.h)
  std::vector<KernelInfo> kernels_;
  std::map<std::string, std::string> impls_;  // function → its master's implementation
};

}  // namespace

void CompiledModule::save(const std::string& dir) const {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  KILN_USER_CHECK(!ec) << "cannot create module directory '" << dir << "': " << ec.message();
  std::string gpath = dir + "/graph.json";
  std::ofstream f(gpath, std::ios::binary | std::ios::trunc);
  KILN_USER_CHECK(f.good()) << "cannot write '" << gpath << "'";
  f << graph_json << "\n";
  f.close();
  KILN_USER_CHECK(f.good()) << "cannot write '" << gpath << "'";
  lib.export_library(dir + "/lib.so");
  std::string ppath = dir + "/params.bin";
  if (params.empty()) {
    fs::remove(ppath, ec);  // no params: the file is absent (no stale one either)
  } else {
    runtime::save_params(ppath, params);
  }
}

CompiledModule build_module(const Graph& g, const Target& target, const BuildOptions& opt) {
  auto t0 = Clock::now();
  KILN_USER_CHECK(opt.tuning_threads >= 1)
      << "build_module: tuning_threads must be at least 1, got " << opt.tuning_threads;
  TunedConfigs tuned(opt.tuning_records, opt.tuning_threads);
  Graph typed = optimize(g, opt.opt_level, target, &tuned);
  if (typed.output_names().empty() && typed.outputs().size() == g.outputs().size())
    typed.set_output_names(g.output_names());
  KILN_USER_CHECK(!typed.outputs().empty()) << "build_module: the graph has no outputs";
  double optimize_ms = ms_since(t0);
  ModuleBuilder b(typed, target, opt, &tuned);
  CompiledModule m = b.build();
  m.optimize_ms = optimize_ms;
  if (!tuned.empty()) m.tuning_report = tuned.report();
  return m;
}

CompiledModule compile_to_directory(const Graph& g, const Target& target, const BuildOptions& opt,
                                    const std::string& dir) {
  CompiledModule m = build_module(g, target, opt);
  auto t0 = Clock::now();
  m.save(dir);
  m.save_ms = ms_since(t0);
  return m;
}

}  // namespace kiln::graph
