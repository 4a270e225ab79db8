/// \file task.h
/// \brief Tuning tasks: one template applied to one workload on one target (TVM paper section 5,
/// AutoTVM's Task).
///
/// A task names what is tuned: the template (name and version), the workload (the shapes, dtypes
/// and layout the template was instantiated for, as a string) and the target (the CPU model and
/// its features, so records made on another machine are never applied silently). Its `key()` —
/// template name and workload — is what tuning records are filed under; the target and the
/// template version are stored beside it in every record and checked when a record is used.
///
///   Task task = Task::make(Template{"matmul", "1", fn});   // workload from the default's args
///   Instance inst = task.instantiate(task.space.get(17));
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/autotune/template.h"
#include "kiln/target/target.h"

namespace kiln::autotune {

/// A template bound to a workload and a target.
struct Task {
  /// The template's name and version (records are keyed by both).
  std::string name;
  std::string version;
  /// Shapes, dtypes and layout, e.g. "A:float32[24,20],B:float32[20,32],C:float32[24,32]".
  std::string workload;
  /// The target as recorded: target_key(build_target).
  std::string target;
  /// The target candidates are compiled for.
  Target build_target;
  /// The template body; instantiates the workload for a config.
  TemplateFn fn;
  /// The template's config space (define mode run once by make()).
  ConfigSpace space;
  /// Arithmetic operations of one run of the default schedule (features.h count_flops), for
  /// GFLOP/s in progress reports; 0 when unknown.
  double flops = 0;

  /// Builds a task: runs the template in define mode (space) and fallback mode (workload key
  /// from the arguments when `workload` is empty, and the flop count).
  static Task make(const Template& t, const Target& target = Target::host(),
                   std::string workload = "");

  /// "name(workload)": the stable key records are filed under (no target, no version).
  std::string key() const { return name + "(" + workload + ")"; }
  /// The template instantiated for `cfg` (apply or fallback mode).
  Instance instantiate(const Config& cfg) const;
  /// The config the template falls back to, as a point of the space (so it compares by index
  /// with the configs a tuner proposes).
  Config default_config() const;
};

/// The workload key of a function's arguments: "A:float32[24,20],B:float32[20,32],..." in call
/// order, then ";" and `extra` (layout, attributes) when it is not empty. Shapes must be constant.
std::string workload_key(const std::vector<te::Tensor>& args, const std::string& extra = "");

/// The target as written in records: the target string with "-mcpu=native" (or no CPU) resolved
/// to the host's CPU model, and the SIMD features that change generated code, e.g.
/// "llvm -mcpu=native; cpu=Intel(R) Xeon(R) ...; features=sse4.2,avx,avx2,fma"; then, for
/// kernels measured with more than one thread, "; threads=N". A config's speed depends on the
/// thread count it runs with (ResNet-18's configs tuned on 1 thread ran 1.4x slower than the
/// defaults on 2), so records of another thread count are another target's.
std::string target_key(const Target& target, int threads = 1);

/// `task` keyed for measurements with `threads` threads (its target_key with that count).
Task with_threads(Task task, int threads);

/// A record target split into the target proper and the thread count of its "; threads=N"
/// part (1 when it has none).
std::pair<std::string, int> split_target_threads(const std::string& target);

}  // namespace kiln::autotune
