/// \file graph_executor.h
/// \brief Runs a compiled model: a graph of packed functions over a static memory plan.
///
/// A deployable module is a directory (docs/module-format.md):
///
///     DIR/graph.json   the graph: nodes in topological order, the memory plan
///     DIR/lib.so       the operators: packed functions, loadable with Module::load
///     DIR/params.bin   the parameters (kiln/runtime/params.h); may be absent if there are none
///
/// The executor allocates one buffer per storage id of the plan (sized to the largest entry
/// sharing it, 64-byte aligned), gives every entry (node output) a KilnArray view of its
/// storage with the entry's shape and dtype, copies the params into their entries, and looks up
/// every node's function once. `run()` then calls the nodes' functions in order, each with its
/// input entries followed by its output entries. Kernels parallelise themselves through the
/// runtime's thread pool; `run()` itself is sequential over nodes. An output with a
/// data-dependent shape (NonZero, Unique, NonMaxSuppression) has an upper-bound shape in the
/// plan; after its node runs, the executor reads its actual extent from the node's int64
/// extent output and views the storage with the actual shape.
///
///     GraphExecutor ex = GraphExecutor::load("resnet18.kiln");
///     ex.set_input("data", load_npy("cat.npy"));
///     ex.run();
///     NDArray logits = ex.get_output(0);
///
/// A GraphExecutor is a shared handle: copies refer to the same executor and buffers. It is not
/// safe to use one executor from several threads at once.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/runtime/module.h"
#include "kiln/runtime/ndarray.h"

namespace kiln::runtime {

/// Shape and dtype of a graph input or output.
struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  DataType dtype;
  /// For an output with a data-dependent shape (docs/module-format.md, "bounded"): the axis
  /// whose extent is known only after run(); `shape` then holds its upper bound. -1 otherwise.
  int bounded_axis = -1;
};

/// The mean time of one op node over a profile() run.
struct NodeTime {
  std::string name;       ///< the node's name (not unique: a model may reuse one)
  std::string func_name;  ///< the function it calls
  double ms = 0;          ///< mean milliseconds per call
  int node = -1;          ///< the node's index in graph.json's "nodes"
};

class GraphExecutor {
 public:
  GraphExecutor() = default;

  /// Loads the module directory `dir` (graph.json, lib.so, params.bin). Throws kiln::Error
  /// naming the file and the problem: a missing file, malformed graph.json (naming the node),
  /// a function missing from lib.so, a missing or mismatched param.
  static GraphExecutor load(const std::string& dir);

  /// Builds an executor from its three parts. `source` names the graph in error messages.
  /// Every argument node not listed in the graph's "inputs" is a param and must be in `params`
  /// with the entry's shape and dtype; `params` must hold nothing else.
  static GraphExecutor create(const std::string& graph_json, const Module& lib,
                              const std::map<std::string, NDArray>& params,
                              const std::string& source = "graph.json");

  /// Copies `value` into input `name`'s buffer. Throws kiln::Error for an unknown name (listing
  /// the inputs) or a shape or dtype that differs from the graph's:
  /// "set_input 'data': shape expected [1, 3, 224, 224], got [1, 3, 32, 32]".
  void set_input(const std::string& name, const NDArray& value);
  /// The same by input index (0 <= index < num_inputs()).
  void set_input(int index, const NDArray& value);

  /// Runs every node once, in order. A kernel's error is rethrown naming the node and function.
  void run();
  /// Runs the graph once to warm up, then `repeat` more times timing each op node; returns the
  /// op nodes in execution order with their mean times (`kiln bench --profile`).
  std::vector<NodeTime> profile(int repeat = 10);

  /// A copy of graph output `index` (valid after run()). An output with a data-dependent shape
  /// (output_info's bounded_axis >= 0) comes with the actual shape of the last run().
  NDArray get_output(int index) const;
  /// A copy of the graph output called `name`; unknown names are an error listing the outputs.
  NDArray get_output(const std::string& name) const;
  /// A copy of the current value of input `name`.
  NDArray get_input(const std::string& name) const;

  /// Number of graph inputs (argument nodes that are not params).
  int num_inputs() const;
  /// Number of graph outputs (the graph's heads).
  int num_outputs() const;
  /// Input names, in the graph's "inputs" order.
  std::vector<std::string> input_names() const;
  /// Output names, in heads order.
  std::vector<std::string> output_names() const;
  /// Shape and dtype of input `index`.
  TensorInfo input_info(int index) const;
  /// Shape and dtype of output `index`.
  TensorInfo output_info(int index) const;
  /// Names of the params, sorted.
  std::vector<std::string> param_names() const;
  /// Number of nodes of the graph, and of those that call a function.
  int num_nodes() const;
  int num_op_nodes() const;
  /// Total bytes of the memory plan's buffers (params included).
  size_t storage_bytes() const;
  /// True when this handle refers to an executor.
  bool defined() const { return impl_ != nullptr; }

  struct Impl;

 private:
  const Impl& get(const char* what) const;
  Impl& get(const char* what);

  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln::runtime
