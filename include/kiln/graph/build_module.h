/// \file build_module.h
/// \brief From a graph to a deployable module (docs/module-format.md): graph.json, lib.so and
/// params.bin, plus the static memory plan the graph.json carries.
///
///   graph::CompiledModule m = graph::build_module(g, Target::host(), {});
///   m.save("out.kiln");   // out.kiln/graph.json, lib.so, params.bin
///   auto ex = runtime::GraphExecutor::load("out.kiln");
///
/// Recipe: optimize (infer_types at opt_level 0), partition the op nodes into groups (fuse_ops
/// at opt_level >= 1, one node per group at 0; a group becomes one kernel), build each group's
/// compute from the op registry, schedule it by its master op's pattern kind and inline the
/// group's other stages, lower it to a PrimFunc, compile all functions with one kiln::build, plan
/// memory, write the graph JSON. Constants become params named after their nodes; graph inputs stay
/// inputs; the graph's results are the heads.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "kiln/autotune/record.h"
#include "kiln/graph/graph.h"
#include "kiln/graph/memory_plan.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/ndarray.h"
#include "kiln/target/target.h"

namespace kiln::graph {

// ---------------------------------------------------------------------------------------------
// Building

/// Options of build_module.
struct BuildOptions {
  /// 0: infer_types only; >= 1: the graph optimizer (transform.h, `optimize`).
  int opt_level = 2;
  /// Groups with the same op, attributes and input types share one compiled function.
  bool share_kernels = true;
  /// Keep, per kernel, its group and its lowered loop program (CompiledModule::kernels), and
  /// the optimized graph's text (`kiln inspect`).
  bool keep_ir = false;
  /// Debugging (`kiln compare`): every group's outputs also become graph outputs, named after
  /// the group's last node (its node name, else "<op><index>"), so a run exposes every
  /// intermediate result. Their layout is the group's (NCHW[x]c after layout alteration).
  bool debug_outputs = false;
  /// Records of a tuning log (autotune/record.h, `kiln compile --tuning-log`): each tunable
  /// workload (tuning.h) uses its best record for this target and template version, else its
  /// default config; CompiledModule::tuning_report says which.
  std::vector<autotune::Record> tuning_records;
  /// Use the records measured with this many threads (`kiln tune --threads N`): configs are
  /// tuned for a thread count (autotune::target_key).
  int tuning_threads = 1;
};

/// What `keep_ir` keeps of one compiled kernel.
struct KernelInfo {
  std::string func_name;  ///< the function in lib
  std::string group;      ///< its op nodes: "{conv2d %2, add %4, relu %5}"
  std::string tir;        ///< the lowered loop program (tir::to_string)
  /// The implementation its master runs (strategy.h): a template ("conv2d_nchwc.cpu") or a
  /// pattern kind's ("opaque.generic": the rule-based scheduler, topi/auto_schedule.h).
  std::string impl;
};

/// A compiled model: the three parts of a module directory.
struct CompiledModule {
  std::string graph_json;                          ///< graph.json's text
  runtime::Module lib;                             ///< the kernels
  std::map<std::string, runtime::NDArray> params;  ///< the constants, by name
  MemoryPlan memory;                               ///< the plan graph_json carries
  int num_kernels = 0;                             ///< distinct compiled functions
  /// With BuildOptions::keep_ir: the optimized graph's text (after every graph pass) and one
  /// entry per distinct kernel, in compilation order.
  std::string graph_text;
  std::vector<KernelInfo> kernels;
  /// Where the compile time went, in milliseconds: the graph passes, building and lowering the
  /// kernels' loop programs, code generation (LLVM) with linking, and (compile_to_directory)
  /// writing the module's files.
  double optimize_ms = 0, lower_ms = 0, codegen_ms = 0, save_ms = 0;
  /// With tuning_records: a summary line, then one line per tunable workload (tuned or default,
  /// and how many records were used or ignored and why).
  std::vector<std::string> tuning_report;
  /// For each kernel node of graph_json (by its index in "nodes": names repeat, a fused group
  /// being named after its last node), the name of its group's master node: the conv2d of a
  /// conv2d + add + relu group. A profile (GraphExecutor::profile, NodeTime::node) gives kernel
  /// nodes; this maps them back to the model's operators.
  std::map<int, std::string> kernel_masters;

  /// Writes DIR/graph.json, DIR/lib.so and DIR/params.bin (creating DIR). Throws kiln::Error
  /// naming the path on failure.
  void save(const std::string& dir) const;
};

/// Compiles `g` for `target` (see the file comment). User errors (unknown op, bad attributes,
/// shape mismatch, an op that fails to compile) name the node.
CompiledModule build_module(const Graph& g, const Target& target, const BuildOptions& opt = {});

/// build_module then save to `dir`: what `kiln compile MODEL -o DIR` calls. Returns the
/// module (for reporting: memory plan, kernel count).
CompiledModule compile_to_directory(const Graph& g, const Target& target, const BuildOptions& opt,
                                    const std::string& dir);

}  // namespace kiln::graph
