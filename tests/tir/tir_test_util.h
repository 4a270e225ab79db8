/// \file tir_test_util.h
/// \brief Helpers for the tir pass tests: a minimal Producer (a stand-in for a te Tensor).
#pragma once

#include <string>
#include <vector>

#include "kiln/ir/op.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/structural.h"
#include "kiln/tir/function.h"

namespace kiln::tir::testing {

struct TestProducer : ProducerNode {
  std::string name;
  DataType dtype;
  std::vector<Expr> shape;
  std::string producer_name() const override { return name; }
  DataType producer_dtype() const override { return dtype; }
  std::vector<Expr> producer_shape() const override { return shape; }
};

inline Producer make_producer(const std::string& name, std::vector<Expr> shape,
                              DataType dtype = DataType::Float(32)) {
  auto* p = new TestProducer();
  p->name = name;
  p->dtype = dtype;
  p->shape = std::move(shape);
  return Producer(p);
}

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
