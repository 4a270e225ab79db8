/// \file function.h
/// \brief PrimFunc: a loop program with its parameters, the unit that passes transform and
/// code generators compile.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/expr.h"
#include "kiln/ir/stmt.h"

namespace kiln::tir {

using namespace kiln::ir;  // NOLINT: tir is the loop-program layer over ir

struct PrimFuncNode : Object {
  std::string name;
  /// Parameters in call order. Before make_packed_api: one handle Var per tensor argument
  /// (its Buffer in buffer_map) or a scalar Var. After: (args, type_codes, num_args).
  std::vector<Var> params;
  /// Tensor parameters: param var -> its buffer (shape, dtype, data var).
  VarMap<Buffer> buffer_map;
  Stmt body;
  /// Free-form attributes ("packed_api" = "1" after make_packed_api, "target", …).
  std::map<std::string, std::string> attrs;
};

class PrimFunc : public Ref<PrimFuncNode> {
 public:
  PrimFunc() = default;
  explicit PrimFunc(const PrimFuncNode* n) : Ref<PrimFuncNode>(n) {}
  static PrimFunc make(std::string name, std::vector<Var> params, VarMap<Buffer> buffer_map,
                       Stmt body, std::map<std::string, std::string> attrs = {});
  /// A copy with another body (everything else shared).
  PrimFunc with_body(Stmt body) const;
  PrimFunc with_attr(const std::string& key, const std::string& value) const;
  std::string attr(const std::string& key, const std::string& dflt = "") const;
};

/// Prints the function: signature with buffer shapes, then the body.
std::string to_string(const PrimFunc& f);
std::ostream& operator<<(std::ostream& os, const PrimFunc& f);

}  // namespace kiln::tir
