// Helpers for code generator tests: building PrimFuncs by hand, random and poisoned arrays,
// and catching kiln::Error text.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "kiln/ir/op.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/ndarray.h"
#include "kiln/support/error.h"
#include "kiln/tir/function.h"

namespace kiln::testing {

using namespace kiln::ir;  // NOLINT
using runtime::NDArray;

/// Collects parameters (buffers and scalars) of a PrimFunc under construction.
struct FuncBuilder {
  std::vector<Var> params;
  VarMap<Buffer> buffers;

  Buffer buffer(const std::string& name, DataType t, std::vector<int64_t> shape) {
    std::vector<Expr> s;
    for (int64_t d : shape) s.push_back(Expr(static_cast<int32_t>(d)));
    Var p(name, DataType::Handle());
    Buffer b = Buffer::make(name, t, s);
    params.push_back(p);
    buffers[p] = b;
    return b;
  }
  Var scalar(const std::string& name, DataType t) {
    Var v(name, t);
    params.push_back(v);
    return v;
  }
  tir::PrimFunc make(const std::string& name, Stmt body,
                     std::map<std::string, std::string> attrs = {}) const {
    return tir::PrimFunc::make(name, params, buffers, std::move(body), std::move(attrs));
  }
};

inline Stmt loop(const Var& v, int64_t extent, Stmt body, ForKind kind = ForKind::kSerial) {
  return For::make(v, Expr(0), Expr(static_cast<int32_t>(extent)), kind, std::move(body));
}

/// An array of `shape` with seeded random floats in [lo, hi].
inline NDArray random_f32(std::vector<int64_t> shape, uint32_t seed, float lo = -1.f,
                          float hi = 1.f) {
  NDArray a = NDArray::empty(std::move(shape), DataType::Float(32));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  float* p = a.data_as<float>();
  for (int64_t i = 0; i < a.numel(); ++i) p[i] = dist(rng);
  return a;
}

inline NDArray random_i32(std::vector<int64_t> shape, uint32_t seed, int lo, int hi) {
  NDArray a = NDArray::empty(std::move(shape), DataType::Int(32));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  int32_t* p = a.data_as<int32_t>();
  for (int64_t i = 0; i < a.numel(); ++i) p[i] = dist(rng);
  return a;
}

/// An output array filled with NaN (floats) or 0xCD bytes (others).
inline NDArray poisoned(std::vector<int64_t> shape, DataType t) {
  NDArray a = NDArray::empty(std::move(shape), t);
  if (t == DataType::Float(32)) {
    float* p = a.data_as<float>();
    for (int64_t i = 0; i < a.numel(); ++i) p[i] = std::numeric_limits<float>::quiet_NaN();
  } else {
    std::memset(a.data(), 0xCD, a.nbytes());
  }
  return a;
}

using ::kiln::testing::error_of;

}  // namespace kiln::testing
