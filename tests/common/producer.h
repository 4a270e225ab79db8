/// \file producer.h
/// \brief Test helper: a minimal ir::Producer standing in for a te Tensor, for IR and pass
/// tests that need ProducerLoad/ProducerStore without building tensor expressions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/expr.h"

namespace kiln::testing {

struct TestProducer : ir::ProducerNode {
  std::string name;
  DataType dtype;
  std::vector<ir::Expr> shape;
  std::string producer_name() const override { return name; }
  DataType producer_dtype() const override { return dtype; }
  std::vector<ir::Expr> producer_shape() const override { return shape; }
};

inline ir::Producer make_producer(const std::string& name, std::vector<ir::Expr> shape,
                                  DataType dtype = DataType::Float(32)) {
  auto* p = new TestProducer();
  p->name = name;
  p->dtype = dtype;
  p->shape = std::move(shape);
  return ir::Producer(p);
}

}  // namespace kiln::testing
