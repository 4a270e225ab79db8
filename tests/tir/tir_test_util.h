/// \file tir_test_util.h
/// \brief Helpers for the tir pass tests.
#pragma once

#include <string>
#include <vector>

#include "common/producer.h"
#include "kiln/ir/op.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/structural.h"
#include "kiln/tir/function.h"

namespace kiln::tir::testing {

using ::kiln::testing::make_producer;

inline Stmt loop(const Var& v, Expr min, Expr extent, Stmt body, ForKind kind = ForKind::kSerial) {
  return For::make(v, min, extent, kind, body);
}

/// A function over the given buffers (one handle param each).
inline PrimFunc make_func(const std::string& name, const std::vector<Buffer>& bufs, Stmt body) {
  std::vector<Var> params;
  VarMap<Buffer> bmap;
  for (const Buffer& b : bufs) {
    Var p(b->name + "_handle", DataType::Handle());
    params.push_back(p);
    bmap[p] = b;
  }
  return PrimFunc::make(name, params, bmap, body);
}

}  // namespace kiln::tir::testing
