// Shared helpers for the IR unit tests.
#pragma once

#include <string>
#include <vector>

#include "common/error.h"
#include "kiln/ir/expr.h"

namespace kiln::ir::testing {

/// A minimal Producer (stands in for a te Tensor).
struct FakeProducer : ProducerNode {
  std::string name;
  DataType dtype;
  std::vector<Expr> shape;
  std::string producer_name() const override { return name; }
  DataType producer_dtype() const override { return dtype; }
  std::vector<Expr> producer_shape() const override { return shape; }
};

inline Producer make_producer(const std::string& name, std::vector<Expr> shape,
                              DataType t = DataType::Float(32)) {
  auto* p = new FakeProducer();
  p->name = name;
  p->dtype = t;
  p->shape = std::move(shape);
  return Producer(p);
}

/// Runs `f` and returns the message of the kiln::Error it throws ("" if none).
using ::kiln::testing::error_of;

}  // namespace kiln::ir::testing
