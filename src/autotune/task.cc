// Tuning tasks: a template bound to a workload key (the argument shapes and dtypes of its default
// instance, plus caller-supplied layout text) and a target key (the target string with the host
// CPU's model name and SIMD features resolved from /proc/cpuinfo and Target::has_feature).
#include "kiln/autotune/task.h"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kiln/autotune/feature.h"
#include "kiln/ir/op.h"
#include "kiln/support/error.h"

namespace kiln::autotune {

namespace {

std::string host_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    // x86: "model name\t: Intel(R) ..."; aarch64 kernels print "CPU part" instead.
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) {
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string v = line.substr(colon + 1);
      while (!v.empty() && v.front() == ' ') v.erase(v.begin());
      if (!v.empty()) return v;
    }
  }
  return "unknown";
}

}  // namespace

std::string workload_key(const std::vector<te::Tensor>& args, const std::string& extra) {
  std::ostringstream os;
  for (size_t i = 0; i < args.size(); ++i) {
    const te::Tensor& t = args[i];
    KILN_USER_CHECK(t.defined()) << "workload_key: argument " << i << " is undefined";
    if (i) os << ",";
    os << t.name() << ":" << t->dtype.str() << "[";
    for (size_t d = 0; d < t->shape.size(); ++d) {
      auto v = ir::as_const_int(t->shape[d]);
      KILN_USER_CHECK(v.has_value()) << "workload_key: argument " << t.name() << " dimension " << d
                                     << " is not a constant; tasks need static shapes";
      os << (d ? "," : "") << *v;
    }
    os << "]";
  }
  if (!extra.empty()) os << ";" << extra;
  return os.str();
}

std::string target_key(const Target& target, int threads) {
  std::ostringstream os;
  os << target.str();
  bool host = target.mcpu.empty() || target.mcpu == "native";
  if (host && target.is_host_arch()) os << "; cpu=" << host_cpu_model();
  static const char* kX86[] = {"sse4.2",   "avx",      "avx2",       "fma",        "avx512f",
                               "avx512bw", "avx512vl", "avx512vnni", "avx512bf16", "amx-tile"};
  static const char* kArm[] = {"neon", "dotprod", "sve", "i8mm"};
  std::string feats;
  bool arm = target.triple().rfind("aarch64", 0) == 0 || target.triple().rfind("arm", 0) == 0;
  auto add = [&](const char* f) {
    if (target.has_feature(f)) feats += (feats.empty() ? "" : ",") + std::string(f);
  };
  if (arm) {
    for (const char* f : kArm) add(f);
  } else {
    for (const char* f : kX86) add(f);
  }
  os << "; features=" << (feats.empty() ? "none" : feats);
  if (threads > 1) os << "; threads=" << threads;
  return os.str();
}

std::pair<std::string, int> split_target_threads(const std::string& target) {
  static const std::string kPart = "; threads=";
  size_t at = target.rfind(kPart);
  if (at == std::string::npos) return {target, 1};
  return {target.substr(0, at), std::atoi(target.c_str() + at + kPart.size())};
}

Task with_threads(Task task, int threads) {
  task.target = target_key(task.build_target, threads);
  return task;
}

Task Task::make(const Template& t, const Target& target, std::string workload) {
  KILN_USER_CHECK(!t.name.empty()) << "Task::make: the template has no name";
  KILN_USER_CHECK(static_cast<bool>(t.fn))
      << "Task::make: template '" << t.name << "' has no function";
  Task task;
  task.name = t.name;
  task.version = t.version;
  task.build_target = target;
  task.target = target_key(target);
  task.fn = t.fn;
  task.space = define_space(t);
  Instance dflt = autotune::instantiate(t.fn, Config::fallback());
  task.workload = workload.empty() ? workload_key(dflt.args) : std::move(workload);
  task.flops = count_flops(lower_for_features(dflt));
  return task;
}

Instance Task::instantiate(const Config& cfg) const {
  KILN_USER_CHECK(static_cast<bool>(fn)) << "task " << key() << " has no template function";
  return autotune::instantiate(fn, cfg);
}

Config Task::default_config() const {
  return Config::from_json(instantiate(Config::fallback()).config.to_json(), space);
}

}  // namespace kiln::autotune
