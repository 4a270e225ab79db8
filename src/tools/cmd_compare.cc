// `kiln compare MODEL`: finds the first fused group whose result the optimizer changed. The
// model is built twice with BuildOptions::debug_outputs — at opt-level 0 (one kernel per op,
// no graph rewriting: the reference) and at --opt-level (default 2, with keep_ir and no kernel
// sharing so every group has its KernelInfo) — and both run on the same seeded random inputs.
// The optimized module's kernel nodes are walked in execution order; each output whose name
// (its group's last node, a name from the model) is also an output of the reference run is
// compared with numpy's allclose rule |got - want| <= atol + rtol * |want|. A blocked-layout
// output [N, C/x, H, W, x] is first converted back to [N, C, H, W]. The first group that
// fails is printed with its ops (their lines of the optimized graph) and its errors; exit code
// 1. Otherwise the model's outputs are compared and, when they agree, exit code 0.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "cli_common.h"
#include "kiln/support/error.h"
#include "kiln/target/target.h"

namespace kiln::cli {

namespace {

struct CompareOptions {
  std::string model, target = "llvm -mcpu=native";
  unsigned seed = 0;
  double rtol = 1e-3, atol = 1e-4;
  int opt_level = 2, threads = 0;
  bool verbose = false;
  std::vector<std::string> shapes;
};

/// How two tensors differ.
struct Diff {
  bool ok = true;
  double max_abs = 0;  ///< max |got - want|
  double max_rel = 0;  ///< max_abs / max |want| (0 when want is all zeros and so is got)
  size_t worst = 0;    ///< the element furthest outside the tolerance (or of max_abs)
  double got = 0, want = 0;
};

Diff diff(const std::vector<double>& got, const std::vector<double>& want, double rtol,
          double atol) {
  Diff d;
  double max_want = 0, worst_excess = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    double a = got[i], b = want[i];
    if (std::isnan(a) && std::isnan(b)) continue;
    double err = a == b ? 0.0 : std::abs(a - b);
    if (std::isnan(err)) err = INFINITY;
    max_want = std::max(max_want, std::isfinite(b) ? std::abs(b) : 0.0);
    // An infinity agrees only with the same infinity (inf - inf tolerance would be NaN).
    double excess = std::isfinite(a) && std::isfinite(b) ? err - (atol + rtol * std::abs(b))
                    : a == b                             ? 0.0
                                                         : INFINITY;
    if (!(excess <= 0)) d.ok = false;
    if (excess > worst_excess) {
      worst_excess = excess;
      d.worst = i;
    }
    d.max_abs = std::max(d.max_abs, err);
  }
  d.max_rel = max_want > 0 ? d.max_abs / max_want : (d.max_abs > 0 ? INFINITY : 0);
  if (!want.empty()) {
    d.got = got[d.worst];
    d.want = want[d.worst];
  }
  return d;
}

/// The optimized output's values in the reference's layout: as they are when the shapes agree;
/// a blocked [N, C/x, H, W, x] converted to [N, C, H, W] (channels past C, padding, dropped);
/// nothing when the shapes do not correspond.
std::optional<std::vector<double>> in_reference_layout(const runtime::NDArray& got,
                                                       const std::vector<int64_t>& ref) {
  const std::vector<int64_t>& s = got.shape();
  if (s == ref) return to_doubles(got);
  if (s.size() != 5 || ref.size() != 4 || s[0] != ref[0] || s[2] != ref[2] || s[3] != ref[3] ||
      s[4] <= 0 || s[1] != (ref[1] + s[4] - 1) / s[4])
    return std::nullopt;
  std::vector<double> blocked = to_doubles(got);
  const int64_t N = ref[0], C = ref[1], HW = ref[2] * ref[3], x = s[4], CB = s[1];
  std::vector<double> r(static_cast<size_t>(N * C * HW));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < HW; ++p)
        r[static_cast<size_t>((n * C + c) * HW + p)] =
            blocked[static_cast<size_t>(((n * CB + c / x) * HW + p) * x + c % x)];
  return r;
}

/// "[0, 3, 4, 5]": the multi-index of flat element `i` in `shape`.
std::string index_str(size_t i, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    int64_t e = shape[d] > 0 ? shape[d] : 1;
    idx[d] = static_cast<int64_t>(i) % e;
    i /= static_cast<size_t>(e);
  }
  return runtime::shape_str(idx);
}

std::string diff_str(const Diff& d, const std::vector<int64_t>& shape) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "max abs error %.3g, max rel error %.3g (to max |value|)",
                d.max_abs, d.max_rel);
  std::string r = buf;
  if (!d.ok) {
    std::snprintf(buf, sizeof buf, "; worst element %s: optimized %.8g, opt-level 0 %.8g",
                  index_str(d.worst, shape).c_str(), d.got, d.want);
    r += buf;
  }
  return r;
}

/// The lines of the graph text for the nodes a group string "{conv2d %2, relu %5}" lists.
std::string group_lines(const std::string& group, const std::string& graph_text) {
  std::map<std::string, std::string> line_of;
  std::istringstream lines(graph_text);
  for (std::string line; std::getline(lines, line);) {
    size_t eq = line.find(" = ");
    if (!line.empty() && line[0] == '%' && eq != std::string::npos)
      line_of[line.substr(0, eq)] = line;
  }
  std::string r;
  for (size_t p = group.find('%'); p != std::string::npos; p = group.find('%', p + 1)) {
    size_t e = group.find_first_not_of("0123456789", p + 1);
    std::string id = group.substr(p, e == std::string::npos ? std::string::npos : e - p);
    auto it = line_of.find(id);
    if (it != line_of.end()) r += "    " + it->second + "\n";
  }
  return r;
}

int compare(const CompareOptions& o) {
  apply_threads(o.threads);
  graph::Graph g = load_model(o.model, o.shapes);
  Target target(o.target);
  graph::BuildOptions ref_opt;
  ref_opt.opt_level = 0;
  ref_opt.debug_outputs = true;
  graph::BuildOptions opt_opt;
  opt_opt.opt_level = o.opt_level;
  opt_opt.debug_outputs = true;
  opt_opt.keep_ir = true;
  opt_opt.share_kernels = false;
  graph::CompiledModule ref_m = graph::build_module(g, target, ref_opt);
  graph::CompiledModule opt_m = graph::build_module(g, target, opt_opt);
  runtime::GraphExecutor ref = executor_of(ref_m, o.model + " (opt-level 0)");
  runtime::GraphExecutor opt = executor_of(opt_m, o.model);
  std::map<std::string, runtime::NDArray> inputs = set_random_inputs(ref, o.seed);
  for (const auto& [name, value] : inputs) opt.set_input(name, value);
  ref.run();
  opt.run();
  std::printf(
      "compare %s: opt-level 0 (%d kernels) vs opt-level %d (%d kernels), seed %u, rtol "
      "%g, atol %g\n",
      o.model.c_str(), ref_m.num_kernels, o.opt_level, opt_m.num_kernels, o.seed, o.rtol, o.atol);

  // Names the model gave its op nodes: only those identify the same value in both builds.
  std::set<std::string> model_names;
  for (const graph::Node& n : g.nodes())
    if (n.is_op() && !n.name.empty()) model_names.insert(n.name);
  std::map<std::string, int> ref_index;
  std::vector<std::string> ref_names = ref.output_names();
  for (size_t i = 0; i < ref_names.size(); ++i) ref_index[ref_names[i]] = static_cast<int>(i);
  std::map<std::string, const graph::KernelInfo*> kernel_of;
  for (const graph::KernelInfo& k : opt_m.kernels) kernel_of[k.func_name] = &k;

  nlohmann::json j = nlohmann::json::parse(opt_m.graph_json);
  const nlohmann::json& nodes = j.at("nodes");
  const nlohmann::json& heads = j.at("heads");
  std::vector<std::string> opt_names = j.at("outputs").get<std::vector<std::string>>();
  std::map<int, std::vector<int>> heads_of_node;
  for (size_t h = 0; h < heads.size(); ++h)
    heads_of_node[heads[h][0].get<int>()].push_back(static_cast<int>(h));
  int compared = 0, skipped = 0;
  for (size_t x = 0; x < nodes.size(); ++x) {
    const nlohmann::json& n = nodes[x];
    if (!n.contains("attrs") || !n["attrs"].contains("func_name")) continue;
    bool any = false;
    for (int h : heads_of_node[static_cast<int>(x)]) {
      const std::string& name = opt_names[static_cast<size_t>(h)];
      std::string base = name.substr(0, name.rfind(':'));
      auto r = ref_index.find(name);
      if ((!model_names.count(name) && !model_names.count(base)) || r == ref_index.end()) continue;
      runtime::NDArray want = ref.get_output(r->second);
      runtime::NDArray got = opt.get_output(h);
      std::optional<std::vector<double>> g_vals = in_reference_layout(got, want.shape());
      if (!g_vals) continue;
      any = true;
      Diff d = diff(*g_vals, to_doubles(want), o.rtol, o.atol);
      std::string func = n["attrs"]["func_name"].get<std::string>();
      if (o.verbose)
        std::cout << (d.ok ? "  agree  " : "  DIFFER ") << name << " (" << func << ") "
                  << type_str(got) << " vs " << type_str(want) << ": " << diff_str(d, want.shape())
                  << "\n";
      if (d.ok) continue;
      const graph::KernelInfo* k = kernel_of.count(func) ? kernel_of[func] : nullptr;
      std::cout << "DIFFER: first group whose output differs: '" << name << "' (kernel " << func
                << ", after " << compared << " groups that agree)\n";
      if (k) std::cout << "  ops " << k->group << ":\n" << group_lines(k->group, opt_m.graph_text);
      std::cout << "  output " << name << " " << type_str(got) << " vs opt-level 0 "
                << type_str(want) << ": " << diff_str(d, want.shape()) << "\n";
      return 1;
    }
    any ? ++compared : ++skipped;
  }
  // The model's own outputs: the first heads of both builds, in the graph's order.
  size_t num_results = g.outputs().size();
  bool ok = true;
  for (size_t i = 0; i < num_results; ++i) {
    runtime::NDArray want = ref.get_output(static_cast<int>(i));
    runtime::NDArray got = opt.get_output(static_cast<int>(i));
    std::optional<std::vector<double>> g_vals = in_reference_layout(got, want.shape());
    KILN_ICHECK(g_vals.has_value()) << "compare: output " << i << " is " << type_str(got)
                                    << " optimized but " << type_str(want) << " at opt-level 0";
    Diff d = diff(*g_vals, to_doubles(want), o.rtol, o.atol);
    std::cout << (d.ok ? "  output " : "DIFFER: output ") << opt_names[i] << " " << type_str(got)
              << ": " << diff_str(d, want.shape()) << "\n";
    ok = ok && d.ok;
  }
  std::printf("%d groups compared, %d without a counterpart at opt-level 0\n", compared, skipped);
  if (!ok) {
    std::cout << "the model's outputs differ, but no group with a counterpart does\n";
    return 1;
  }
  std::cout << "AGREE: the optimized model's outputs match opt-level 0\n";
  return 0;
}

}  // namespace

Command add_compare_command(CLI::App& app) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Run opt-level 0 and the optimized model on the same random input; name the first fused "
      "group that differs (exit code 1) or say they agree (0)");
  cmd->add_option("model", o->model, kModelHelp)->required();
  cmd->add_option("--seed", o->seed, "Seed of the random inputs (default 0)");
  cmd->add_option("--rtol", o->rtol, "Relative tolerance (default 1e-3)")->check(real_range(0));
  cmd->add_option("--atol", o->atol, "Absolute tolerance (default 1e-4)")->check(real_range(0));
  cmd->add_option("--opt-level", o->opt_level, "The optimized build's level (1-3, default 2)")
      ->check(int_range(1, 3));
  cmd->add_option("--target", o->target, "Target, e.g. 'llvm -mcpu=native' (default)");
  cmd->add_option("--input-shape", o->shapes,
                  "NAME=D1,D2,...: shape of an input (needed for symbolic dimensions)");
  add_threads_option(cmd, o->threads);
  cmd->add_flag("-v,--verbose", o->verbose, "Print every group compared");
  return {cmd, [o] { return compare(*o); }};
}

}  // namespace kiln::cli
