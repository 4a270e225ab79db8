// `kiln inspect MODEL`: what the compiler made of a model. The model is compiled with
// BuildOptions::keep_ir, then: --graph prints the optimized graph's text (after every graph
// pass); --fused prints one line per compiled kernel (its function name, how many groups
// call it, the implementation its master runs and its group of op nodes) and the memory plan; --tir
// NAME prints that kernel's lowered loop program. Without a flag: a short summary (nodes, kernels,
// memory plan).
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_common.h"
#include "kiln/support/error.h"
#include "kiln/target/target.h"

namespace kiln::cli {

namespace {

struct InspectOptions {
  std::string model, tir, target = "llvm -mcpu=native";
  bool graph = false, fused = false;
  int opt_level = 2;
  std::vector<std::string> shapes;
};

/// How many executable nodes call each function (from graph.json).
std::map<std::string, int> calls_per_function(const std::string& graph_json) {
  nlohmann::json j = nlohmann::json::parse(graph_json);
  std::map<std::string, int> calls;
  for (const nlohmann::json& n : j.at("nodes"))
    if (n.contains("attrs") && n["attrs"].contains("func_name"))
      ++calls[n["attrs"]["func_name"].get<std::string>()];
  return calls;
}

/// "views: N concats computed in place ..." (graph.json's kiln_view nodes; memory_plan.h).
std::string views_line(const std::string& graph_json) {
  nlohmann::json j = nlohmann::json::parse(graph_json);
  int views = 0, inputs = 0;
  for (const nlohmann::json& n : j.at("nodes")) {
    if (n.value("op", "") != "kiln_view") continue;
    ++views;
    inputs += static_cast<int>(n.at("inputs").size());
  }
  return "views: " + std::to_string(views) + " concats computed in place (their " +
         std::to_string(inputs) + " inputs written into their slots: no kernel, no copy)";
}

int inspect(const InspectOptions& o) {
  graph::Graph g = load_model(o.model, o.shapes);
  graph::BuildOptions bopt;
  bopt.opt_level = o.opt_level;
  bopt.keep_ir = true;
  auto t0 = Clock::now();
  graph::CompiledModule m = graph::build_module(g, Target(o.target), bopt);
  double compile_ms = ms_since(t0);
  if (o.graph) {
    std::cout << m.graph_text;
    return 0;
  }
  if (!o.tir.empty()) {
    std::string names;
    for (const graph::KernelInfo& k : m.kernels) {
      if (k.func_name == o.tir) {
        std::cout << "// " << k.func_name << ": " << k.group << "\n" << k.tir;
        if (!k.tir.empty() && k.tir.back() != '\n') std::cout << "\n";
        return 0;
      }
      names += (names.empty() ? "" : ", ") + k.func_name;
    }
    KILN_ERROR << "--tir '" << o.tir << "': the model has no kernel of that name; its kernels: "
               << (names.empty() ? "(none)" : names);
  }
  std::map<std::string, int> calls = calls_per_function(m.graph_json);
  if (o.fused) {
    for (const graph::KernelInfo& k : m.kernels)
      std::cout << k.func_name << " (x" << calls[k.func_name] << "): " << k.group << " [" << k.impl
                << "]\n";
    std::cout << views_line(m.graph_json) << "\n" << memory_summary(m) << "\n";
    return 0;
  }
  int inputs = 0, constants = 0, ops = 0;
  std::istringstream lines(m.graph_text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '%') continue;
    size_t eq = line.find(" = ");
    std::string rest = eq == std::string::npos ? "" : line.substr(eq + 3);
    if (rest.rfind("input ", 0) == 0) {
      ++inputs;
    } else if (rest.rfind("constant ", 0) == 0) {
      ++constants;
    } else {
      ++ops;
    }
  }
  int groups = 0;
  for (const auto& [f, n] : calls) groups += n;
  std::printf("%s at opt-level %d, compiled in %.0f ms\n", o.model.c_str(), o.opt_level,
              compile_ms);
  std::printf("graph: %d nodes after optimization (%d inputs, %d constants, %d ops)\n",
              inputs + constants + ops, inputs, constants, ops);
  std::printf("kernels: %d functions for %d fused groups\n", m.num_kernels, groups);
  // Which schedule each function got: a template, the rule-based scheduler (opaque.generic:
  // an out-fusable or opaque op without one) or the injective / reduction schedules.
  int templated = 0, generated = 0, pattern = 0;
  for (const graph::KernelInfo& k : m.kernels) {
    if (k.impl == "opaque.generic")
      ++generated;
    else if (k.impl == "injective.generic" || k.impl == "reduce.generic")
      ++pattern;
    else
      ++templated;
  }
  std::printf(
      "schedules: %d functions by a template, %d by the rule-based scheduler, %d by the "
      "injective/reduction schedules (--fused lists each one's implementation)\n",
      templated, generated, pattern);
  std::printf("%s\n", views_line(m.graph_json).c_str());
  std::printf("%s\n", memory_summary(m).c_str());
  std::printf(
      "(--graph: the optimized graph; --fused: the kernels; --tir NAME: a kernel's loops)\n");
  return 0;
}

}  // namespace

Command add_inspect_command(CLI::App& app) {
  auto o = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Show the optimized graph, the fused kernels and their loop programs");
  cmd->add_option("model", o->model, kModelHelp)->required();
  CLI::Option* graph = cmd->add_flag("--graph", o->graph, "Print the optimized graph");
  CLI::Option* fused = cmd->add_flag(
      "--fused", o->fused, "One line per kernel (function and its ops) and the memory plan");
  CLI::Option* tir =
      cmd->add_option("--tir", o->tir, "Print the lowered loop program of the kernel KERNEL")
          ->type_name("KERNEL");
  graph->excludes(fused)->excludes(tir);
  fused->excludes(tir);
  cmd->add_option("--opt-level", o->opt_level, "0: no graph optimization; 1-3: optimize")
      ->check(int_range(0, 3));
  cmd->add_option("--target", o->target, "Target, e.g. 'llvm -mcpu=native' (default)");
  cmd->add_option("--input-shape", o->shapes,
                  "NAME=D1,D2,...: shape of an input (needed for symbolic dimensions)");
  return {cmd, [o] { return inspect(*o); }};
}

}  // namespace kiln::cli
