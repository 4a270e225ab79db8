// LLVM IR generation for PrimFuncs, part three (codegen_llvm.cc has the file's design): memory
// accesses. Buffer element pointers with 64-bit index arithmetic; loads and stores with a
// stride-1 Ramp index as one vector access, aligned from a small modular analysis of the Ramp
// base when the buffer is known 64-byte aligned; indices whose lanes are a few constant offsets
// from one base as shuffles of contiguous loads; other vector indices as gathers and scatters,
// predicates as masked intrinsics.
#include <llvm/IR/Intrinsics.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "codegen_llvm.h"
#include "kiln/ir/op.h"
#include "kiln/ir/structural.h"
#include "llvm_common.h"

namespace kiln::codegen {

namespace {

/// (coeff, base): the expression is coeff * k + base for some integer k; coeff 0 = constant.
struct Modular {
  int64_t coeff = 1;
  int64_t base = 0;
};

Modular modular_of(const Expr& e) {
  auto norm = [](Modular m) {
    if (m.coeff < 0) m.coeff = -m.coeff;
    if (m.coeff != 0) m.base = ((m.base % m.coeff) + m.coeff) % m.coeff;
    return m;
  };
  if (const IntImm* i = e.as<IntImm>()) return {0, i->value};
  if (const Add* a = e.as<Add>()) {
    Modular x = modular_of(a->a), y = modular_of(a->b);
    return norm({std::gcd(x.coeff, y.coeff), x.base + y.base});
  }
  if (const Sub* s = e.as<Sub>()) {
    Modular x = modular_of(s->a), y = modular_of(s->b);
    return norm({std::gcd(x.coeff, y.coeff), x.base - y.base});
  }
  if (const Mul* m = e.as<Mul>()) {
    Modular x = modular_of(m->a), y = modular_of(m->b);
    if (x.coeff == 0) return norm({y.coeff * x.base, y.base * x.base});
    if (y.coeff == 0) return norm({x.coeff * y.base, x.base * y.base});
    return {std::gcd(x.coeff, x.base) * std::gcd(y.coeff, y.base), 0};
  }
  return {1, 0};
}

/// A vector index as a scalar base (undefined: 0) plus a constant offset per lane.
struct LaneOffsets {
  Expr base;
  std::vector<int64_t> offsets;
};

int64_t floor_div(int64_t a, int64_t c) { return a / c - ((a % c != 0) && ((a < 0) != (c < 0))); }

/// `e` (a vector of `lanes` integers) as base + offsets[lane] when its lane pattern is
/// constant: broadcasts, ramps with a constant stride, and sums, differences, products by a
/// constant, and floor division / modulo by a constant of those (the base then a multiple of
/// the divisor, by modular_of). nullopt otherwise.
std::optional<LaneOffsets> lane_offsets(const Expr& e, int lanes) {
  if (e.dtype().lanes() != lanes) return std::nullopt;
  auto constant_of = [](const Expr& x) -> std::optional<int64_t> {
    if (const Broadcast* b = x.as<Broadcast>()) return as_const_int(b->value);
    return std::nullopt;
  };
  if (const Broadcast* b = e.as<Broadcast>()) {
    if (auto c = as_const_int(b->value))
      return LaneOffsets{Expr(), std::vector<int64_t>(lanes, *c)};
    return LaneOffsets{b->value, std::vector<int64_t>(lanes, 0)};
  }
  if (const Ramp* r = e.as<Ramp>()) {
    auto st = as_const_int(r->stride);
    if (!st) return std::nullopt;
    LaneOffsets l{r->base, std::vector<int64_t>(lanes)};
    for (int i = 0; i < lanes; ++i) l.offsets[i] = i * *st;
    if (auto c = as_const_int(r->base)) {
      for (int64_t& o : l.offsets) o += *c;
      l.base = Expr();
    }
    return l;
  }
  auto combine = [&](const Expr& a, const Expr& b, int64_t sign) -> std::optional<LaneOffsets> {
    std::optional<LaneOffsets> x = lane_offsets(a, lanes), y = lane_offsets(b, lanes);
    if (!x || !y) return std::nullopt;
    for (int i = 0; i < lanes; ++i) x->offsets[i] += sign * y->offsets[i];
    if (y->base.defined()) {
      Expr yb = sign > 0 ? y->base : make_const(y->base.dtype(), 0) - y->base;
      x->base = x->base.defined() ? x->base + yb : yb;
    }
    return x;
  };
  if (const Add* a = e.as<Add>()) return combine(a->a, a->b, 1);
  if (const Sub* a = e.as<Sub>()) return combine(a->a, a->b, -1);
  if (const Mul* m = e.as<Mul>()) {
    std::optional<int64_t> c = constant_of(m->b);
    Expr other = m->a;
    if (!c) {
      c = constant_of(m->a);
      other = m->b;
    }
    if (!c) return std::nullopt;
    std::optional<LaneOffsets> x = lane_offsets(other, lanes);
    if (!x) return std::nullopt;
    for (int64_t& o : x->offsets) o *= *c;
    if (x->base.defined()) x->base = x->base * make_const(x->base.dtype(), *c);
    return x;
  }
  const FloorDiv* fd = e.as<FloorDiv>();
  const FloorMod* fm = e.as<FloorMod>();
  if (fd || fm) {
    std::optional<int64_t> c = constant_of(fd ? fd->b : fm->b);
    if (!c || *c <= 0) return std::nullopt;
    std::optional<LaneOffsets> x = lane_offsets(fd ? fd->a : fm->a, lanes);
    if (!x) return std::nullopt;
    if (x->base.defined()) {
      // floordiv(c·q + o, c) = q + floordiv(o, c); floormod(c·q + o, c) = floormod(o, c).
      Modular m = modular_of(x->base);
      if (m.coeff % *c != 0 || m.base % *c != 0) return std::nullopt;
      x->base = fd ? floordiv(x->base, make_const(x->base.dtype(), *c)) : Expr();
    }
    for (int64_t& o : x->offsets) o = fd ? floor_div(o, *c) : o - floor_div(o, *c) * *c;
    return x;
  }
  return std::nullopt;
}

int64_t largest_pow2_divisor(int64_t v) {
  if (v == 0) return int64_t{1} << 30;
  return v & -v;
}

}  // namespace

llvm::Value* CodeGenLLVM::buffer_ptr(const Var& buffer_var, DataType elem, llvm::Value* index) {
  llvm::Value* base = emit_expr(buffer_var);
  return b_->CreateInBoundsGEP(ty(elem), base, index);
}

llvm::Value* CodeGenLLVM::element_ptr(const Var& buffer_var, DataType elem, const Expr& index) {
  if (!index.dtype().is_int() || index.dtype().bits() > 64)
    return buffer_ptr(buffer_var, elem, emit_expr(index));
  return buffer_ptr(buffer_var, elem, emit_index64(index));
}

llvm::Value* CodeGenLLVM::emit_index64(const Expr& e) {
  // Indices are 32-bit in the IR. Emitted as 32-bit sums and one sign extension per access,
  // `sext(a + b + c)` reached the backend as 32-bit adds and a movslq per load (LLVM does not
  // always distribute the extension over nsw adds, and loop strength reduction then keeps the
  // 32-bit sums), e.g. two extra instructions per input vector in a depthwise convolution's
  // register tile. The sums and products of an address are emitted in 64 bits instead
  // (the leaves extended once each), so constants and loop-invariant parts fold into the
  // address modes.
  //
  // An unrolled tile repeats one address expression in many accesses of a basic block (a
  // Winograd transform's 36 outputs read the same tile base through the same divisions), so
  // each index expression is emitted once per block and reused: LLVM would remove the copies,
  // but its passes' time grows with the IR they are given.
  llvm::Type* i64 = b_->getInt64Ty();
  if (auto c = as_const_int(e)) return llvm::ConstantInt::get(i64, *c, true);
  if (const Variable* var = e.as<Variable>()) {
    if (auto it = wide_.find(var); it != wide_.end()) return it->second;
    llvm::Value* v = emit_expr(e);
    return v->getType() == i64 ? v : b_->CreateSExt(v, i64);
  }
  if (b_->GetInsertBlock() != index_block_) {
    index_cache_.clear();
    index_block_ = b_->GetInsertBlock();
  }
  const size_t h = structural_hash(e);
  auto [lo, hi] = index_cache_.equal_range(h);
  for (auto it = lo; it != hi; ++it)
    if (structural_equal(it->second.first, e)) return it->second.second;
  llvm::Value* v;
  if (const Add* a = e.as<Add>()) {
    v = b_->CreateAdd(emit_index64(a->a), emit_index64(a->b), "", false, true);
  } else if (const Sub* a = e.as<Sub>()) {
    v = b_->CreateSub(emit_index64(a->a), emit_index64(a->b), "", false, true);
  } else if (const Mul* a = e.as<Mul>()) {
    v = b_->CreateMul(emit_index64(a->a), emit_index64(a->b), "", false, true);
  } else {
    v = emit_expr(e);
    if (v->getType() != i64) v = b_->CreateSExt(v, i64);
  }
  // Emitting the operands may have moved to another block (a call that checks its result).
  if (b_->GetInsertBlock() == index_block_) index_cache_.emplace(h, std::make_pair(e, v));
  return v;
}

llvm::Align CodeGenLLVM::vector_align(const Var& buffer_var, DataType t, const Expr& base) {
  int64_t elem_bytes = std::max(1, t.element_of().bytes());
  if (!aligned_.count(buffer_var.get())) return llvm::Align(elem_bytes);
  Modular m = modular_of(base);
  int64_t elems =
      m.coeff == 0 ? largest_pow2_divisor(m.base) : largest_pow2_divisor(std::gcd(m.coeff, m.base));
  int64_t bytes = std::min<int64_t>(elems * elem_bytes, kAllocAlign);
  bytes = std::min<int64_t>(bytes, largest_pow2_divisor(elem_bytes * t.lanes()));
  return llvm::Align(std::max<int64_t>(bytes, elem_bytes));
}

llvm::Value* CodeGenLLVM::visit(const Load* op) {
  if (op->dtype.is_bool()) {
    // Bools are one byte each in memory; LLVM's <N x i1> would be bit-packed.
    Expr bytes =
        Load::make(DataType::UInt(8, op->dtype.lanes()), op->buffer_var, op->index, op->predicate);
    return b_->CreateICmpNE(emit_expr(bytes),
                            llvm::Constant::getNullValue(ty(DataType::UInt(8, op->dtype.lanes()))));
  }
  DataType t = op->dtype;
  DataType elem = t.element_of();
  bool unpredicated = is_one(op->predicate);
  if (t.is_scalar()) {
    llvm::Value* ptr = element_ptr(op->buffer_var, elem, op->index);
    if (unpredicated) return b_->CreateAlignedLoad(ty(t), ptr, llvm::Align(std::max(1, t.bytes())));
    // A scalar predicated load reads only when the predicate holds (0 otherwise).
    llvm::Value* pred = emit_expr(op->predicate);
    llvm::BasicBlock* pre = b_->GetInsertBlock();
    llvm::BasicBlock* then_bb = llvm::BasicBlock::Create(*ctx_, "pload", cur_.fn);
    llvm::BasicBlock* end_bb = llvm::BasicBlock::Create(*ctx_, "pload_end", cur_.fn);
    b_->CreateCondBr(pred, then_bb, end_bb);
    b_->SetInsertPoint(then_bb);
    llvm::Value* v = b_->CreateAlignedLoad(ty(t), ptr, llvm::Align(std::max(1, t.bytes())));
    llvm::BasicBlock* then_end = b_->GetInsertBlock();
    b_->CreateBr(end_bb);
    b_->SetInsertPoint(end_bb);
    llvm::PHINode* phi = b_->CreatePHI(ty(t), 2);
    phi->addIncoming(v, then_end);
    phi->addIncoming(llvm::Constant::getNullValue(ty(t)), pre);
    return phi;
  }
  llvm::Type* vt = ty(t);
  const Ramp* ramp = op->index.as<Ramp>();
  if (op->index.dtype().is_scalar() || (ramp && is_one(ramp->stride))) {
    // Contiguous: one vector access starting at the (base) index.
    Expr base = ramp ? ramp->base : op->index;
    llvm::Value* ptr = element_ptr(op->buffer_var, elem, base);
    llvm::Align align = vector_align(op->buffer_var, t, base);
    if (unpredicated) return b_->CreateAlignedLoad(vt, ptr, align);
    return b_->CreateMaskedLoad(vt, ptr, align, emit_expr(op->predicate),
                                llvm::Constant::getNullValue(vt));
  }
  if (unpredicated) {
    auto load_runs = [&](const LaneOffsets& lo) -> llvm::Value* {
      // Runs of lanes whose offsets rise by one; at most four, none shorter than two lanes.
      std::vector<std::pair<size_t, size_t>> runs;  // (first lane, length)
      for (size_t k = 0; k < lo.offsets.size(); ++k) {
        if (k > 0 && lo.offsets[k] == lo.offsets[k - 1] + 1) {
          ++runs.back().second;
        } else {
          runs.push_back({k, 1});
        }
      }
      if (runs.size() < 2 || runs.size() > 4) return nullptr;
      for (const auto& r : runs)
        if (r.second < 2) return nullptr;
      const DataType elem = op->dtype.element_of();
      const DataType it = op->index.dtype().element_of();
      auto widen = [&](llvm::Value* v, size_t from, size_t to) {
        if (from == to) return v;
        std::vector<int> m;
        for (size_t k = 0; k < to; ++k) m.push_back(k < from ? static_cast<int>(k) : -1);
        return b_->CreateShuffleVector(v, m);
      };
      llvm::Value* acc = nullptr;
      size_t have = 0;
      for (const auto& [lane, n] : runs) {
        const int64_t o = lo.offsets[lane];
        Expr start = lo.base.defined() ? lo.base + make_const(it, o) : make_const(it, o);
        llvm::Type* rt = llvm::FixedVectorType::get(ty(elem), static_cast<unsigned>(n));
        llvm::Value* run = b_->CreateAlignedLoad(rt, element_ptr(op->buffer_var, elem, start),
                                                 llvm::Align(std::max(1, elem.bytes())));
        if (!acc) {
          acc = run;
          have = n;
          continue;
        }
        const size_t w = std::max(have, n);
        std::vector<int> m;
        for (size_t k = 0; k < have; ++k) m.push_back(static_cast<int>(k));
        for (size_t k = 0; k < n; ++k) m.push_back(static_cast<int>(w + k));
        acc = b_->CreateShuffleVector(widen(acc, have, w), widen(run, n, w), m);
        have += n;
      }
      return acc;
    };
    // Lanes that read a short window at constant offsets from one scalar base (a channel
    // shuffle, a group broadcast, a small stride): one load of the window and a shuffle, not
    // a gather. Every element of the window lies between two that the lanes read.
    if (std::optional<LaneOffsets> lo = lane_offsets(op->index, t.lanes())) {
      auto [lo_it, hi_it] = std::minmax_element(lo->offsets.begin(), lo->offsets.end());
      const int64_t first = *lo_it, span = *hi_it - *lo_it + 1;
      if (span <= 4 * static_cast<int64_t>(t.lanes())) {
        const DataType it = op->index.dtype().element_of();
        Expr start = lo->base.defined() ? lo->base + make_const(it, first) : make_const(it, first);
        llvm::Value* ptr = element_ptr(op->buffer_var, elem, start);
        llvm::Type* wt = llvm::FixedVectorType::get(ty(elem), static_cast<unsigned>(span));
        llvm::Value* window =
            b_->CreateAlignedLoad(wt, ptr, llvm::Align(std::max(1, elem.bytes())));
        std::vector<int> mask;
        for (int64_t o : lo->offsets) mask.push_back(static_cast<int>(o - first));
        return b_->CreateShuffleVector(window, mask);
      }
      // Lanes in a few runs of consecutive elements far apart (a 16-lane vector of two 8-channel
      // blocks, a channel-block conversion): one load per run, concatenated by shuffles.
      if (llvm::Value* v = load_runs(*lo)) return v;
    }
  }
  llvm::Value* ptrs = buffer_ptr(op->buffer_var, elem, emit_expr(op->index));
  llvm::Value* mask = unpredicated ? nullptr : emit_expr(op->predicate);
  return b_->CreateMaskedGather(vt, ptrs, llvm::Align(std::max(1, elem.bytes())), mask,
                                llvm::Constant::getNullValue(vt));
}

void CodeGenLLVM::visit(const Store* op) {
  if (op->value.dtype().is_bool()) {
    DataType bytes = DataType::UInt(8, op->value.dtype().lanes());
    visit(Store::make(op->buffer_var, Cast::make(bytes, op->value), op->index, op->predicate)
              .as<Store>());
    return;
  }
  DataType t = op->value.dtype();
  DataType elem = t.element_of();
  llvm::Value* value = emit_expr(op->value);
  bool unpredicated = is_one(op->predicate);
  if (t.is_scalar()) {
    llvm::Value* ptr = element_ptr(op->buffer_var, elem, op->index);
    if (unpredicated) {
      b_->CreateAlignedStore(value, ptr, llvm::Align(std::max(1, t.bytes())));
      return;
    }
    llvm::BasicBlock* then_bb = llvm::BasicBlock::Create(*ctx_, "pstore", cur_.fn);
    llvm::BasicBlock* end_bb = llvm::BasicBlock::Create(*ctx_, "pstore_end", cur_.fn);
    b_->CreateCondBr(emit_expr(op->predicate), then_bb, end_bb);
    b_->SetInsertPoint(then_bb);
    b_->CreateAlignedStore(value, ptr, llvm::Align(std::max(1, t.bytes())));
    b_->CreateBr(end_bb);
    b_->SetInsertPoint(end_bb);
    return;
  }
  const Ramp* ramp = op->index.as<Ramp>();
  if (op->index.dtype().is_scalar() || (ramp && is_one(ramp->stride))) {
    Expr base = ramp ? ramp->base : op->index;
    llvm::Value* ptr = element_ptr(op->buffer_var, elem, base);
    llvm::Align align = vector_align(op->buffer_var, t, base);
    if (unpredicated) {
      b_->CreateAlignedStore(value, ptr, align);
    } else {
      b_->CreateMaskedStore(value, ptr, align, emit_expr(op->predicate));
    }
    return;
  }
  llvm::Value* ptrs = buffer_ptr(op->buffer_var, elem, emit_expr(op->index));
  llvm::Value* mask = unpredicated ? nullptr : emit_expr(op->predicate);
  b_->CreateMaskedScatter(value, ptrs, llvm::Align(std::max(1, elem.bytes())), mask);
}

}  // namespace kiln::codegen
