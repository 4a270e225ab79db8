// x86 tensor intrinsics: each a small te compute (what the instruction computes) and a
// lowering to LLVM's x86 intrinsics by name (llvm.x86.avx512.vpdpbusd.512, …, see ir/op.h's
// "llvm." calls), or to the kiln.amx_tile_dot builtin for AMX, whose tile operands LLVM's
// IR types cannot carry through Kiln's. Operand views follow te/tensor_intrin.h: loads of
// consecutive elements from a view's data at its elem_offset, so innermost strides are 1
// (and B of the VNNI / BF16 products fully contiguous); AMX passes row strides in bytes.
// Intrinsics are declared once per process (function-local statics).
#include "kiln/topi/x86_intrin.h"

#include "kiln/te/tensor.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT

namespace {
const DataType kI32 = DataType::Int(32), kU32 = DataType::UInt(32), kF32 = DataType::Float(32);

Expr ci(int64_t v) { return make_const(DataType::Int(32), v); }

bool is_x86(const Target& t) { return t.kind == "llvm" && t.has_key("x86"); }

te::TensorIntrin make_dot_u8s8(int lanes) {
  te::Tensor A = te::placeholder({ci(4)}, DataType::UInt(8), "A");
  te::Tensor B = te::placeholder({ci(lanes)}, kI32, "B");
  auto k = te::reduce_axis({0, ci(4)}, "k");
  te::Tensor C = te::compute(
      {ci(lanes)}, [&](Var i) { return te::sum(cast(kI32, A(k)) * packed_s8(B(i), k), {k}); }, "C");
  const std::string fn =
      lanes == 16 ? "llvm.x86.avx512.vpdpbusd.512" : "llvm.x86.avx512.vpdpbusd.256";
  const DataType vt = DataType::Int(32, lanes);
  return te::decl_tensor_intrin(
      "x86.dot_u8s8_" + std::to_string(lanes) + "x4", C,
      [&](const std::vector<te::IntrinBuffer>& in, const std::vector<te::IntrinBuffer>& out) {
        Expr a =
            broadcast(te::reinterpret(kI32, in[0].vload({ci(0)}, DataType::UInt(8, 4))), lanes);
        Expr b = in[1].vload({ci(0)}, vt);
        auto dp = [&](Expr acc) { return te::call_llvm_intrin(vt, fn, {std::move(acc), a, b}); };
        te::IntrinLowering l;
        l.reset = out[0].vstore({ci(0)}, broadcast(ci(0), lanes));
        l.body = out[0].vstore({ci(0)}, dp(broadcast(ci(0), lanes)));
        l.update = out[0].vstore({ci(0)}, dp(out[0].vload({ci(0)}, vt)));
        return l;
      });
}

}  // namespace

Expr packed_s8(const Expr& w, const Expr& k) {
  return cast(kI32, cast(DataType::Int(8), te::shift_right(w, k * ci(8))));
}

te::TensorIntrin dot_u8s8(int lanes) {
  KILN_USER_CHECK(lanes == 16 || lanes == 8)
      << "dot_u8s8: lanes must be 16 (AVX-512 VNNI) or 8 (AVX-VNNI), got " << lanes;
  static const te::TensorIntrin k16 = make_dot_u8s8(16), k8 = make_dot_u8s8(8);
  return lanes == 16 ? k16 : k8;
}

bool has_dot_u8s8(const Target& target, int lanes) {
  if (!is_x86(target)) return false;
  if (lanes == 16) return target.has_feature("avx512vnni");
  return target.has_feature("avxvnni") ||
         (target.has_feature("avx512vnni") && target.has_feature("avx512vl"));
}

te::TensorIntrin dot_bf16() {
  static const te::TensorIntrin intrin = [] {
    const DataType bf = DataType::BFloat16();
    te::Tensor A = te::placeholder({ci(2)}, bf, "A");
    te::Tensor B = te::placeholder({ci(16), ci(2)}, bf, "B");
    auto k = te::reduce_axis({0, ci(2)}, "k");
    te::Tensor C = te::compute(
        {ci(16)}, [&](Var i) { return te::sum(cast(kF32, A(k)) * cast(kF32, B(i, k)), {k}); }, "C");
    const DataType vf = DataType::Float(32, 16), vi = DataType::Int(32, 16);
    return te::decl_tensor_intrin(
        "x86.dot_bf16_16x2", C,
        [&](const std::vector<te::IntrinBuffer>& in, const std::vector<te::IntrinBuffer>& out) {
          Expr a =
              broadcast(te::reinterpret(kI32, in[0].vload({ci(0)}, DataType::BFloat16(2))), 16);
          Expr b = te::reinterpret(vi, in[1].vload({ci(0), ci(0)}, DataType::BFloat16(32)));
          auto dp = [&](Expr acc) {
            return te::call_llvm_intrin(vf, "llvm.x86.avx512bf16.dpbf16ps.512",
                                        {std::move(acc), a, b});
          };
          Expr zero = broadcast(make_const(kF32, 0.0), 16);
          te::IntrinLowering l;
          l.reset = out[0].vstore({ci(0)}, zero);
          l.body = out[0].vstore({ci(0)}, dp(zero));
          l.update = out[0].vstore({ci(0)}, dp(out[0].vload({ci(0)}, vf)));
          return l;
        },
        {{B.get(), {ci(2), ci(1)}}});
  }();
  return intrin;
}

bool has_dot_bf16(const Target& target) {
  return is_x86(target) && target.has_feature("avx512bf16");
}

te::TensorIntrin popcount_and(int words, int rows) {
  KILN_USER_CHECK(words >= 1 && words <= 64)
      << "popcount_and: words must be in [1, 64], got " << words;
  KILN_USER_CHECK(rows >= 1 && rows <= 16) << "popcount_and: rows must be in [1, 16], got " << rows;
  // rows == 1: C[i] over A[k]; rows > 1: C[r, i] over A[r, k] (the rows of A at any stride).
  const bool one = rows == 1;
  te::Tensor A = one ? te::placeholder({ci(words)}, kU32, "A")
                     : te::placeholder({ci(rows), ci(words)}, kU32, "A");
  te::Tensor B = te::placeholder({ci(words), ci(16)}, kU32, "B");
  auto k = te::reduce_axis({0, ci(words)}, "k");
  auto term = [&](Expr a, Var i) {
    return te::sum(cast(kI32, te::popcount(te::bitwise_and(a, B(k, i)))), {k});
  };
  te::Tensor C = one ? te::compute(
                           {ci(16)}, [&](Var i) { return term(A(k), i); }, "C")
                     : te::compute(
                           {ci(rows), ci(16)}, [&](Var r, Var i) { return term(A(r, k), i); }, "C");
  const DataType vu = DataType::UInt(32, 16), vi = DataType::Int(32, 16);
  std::string name = "x86.popcount_and_" + std::to_string(words) + "x16";
  if (!one) name += "x" + std::to_string(rows);
  return te::decl_tensor_intrin(
      name, C,
      [&](const std::vector<te::IntrinBuffer>& in, const std::vector<te::IntrinBuffer>& out) {
        auto at = [&](int r, std::vector<Expr> tail) {
          if (!one) tail.insert(tail.begin(), ci(r));
          return tail;
        };
        // Each row of B is loaded once (a Let) and shared by the rows of A; body and update
        // bind their own variables.
        auto rows_stmt = [&](bool accumulate) {
          std::vector<Var> b;
          for (int w = 0; w < words; ++w) b.emplace_back("b" + std::to_string(w), vu);
          std::vector<Stmt> st;
          for (int r = 0; r < rows; ++r) {
            Expr sum;
            for (int w = 0; w < words; ++w) {
              Expr a = broadcast(in[0].vload(at(r, {ci(w)}), kU32), 16);
              Expr v = cast(vi, te::popcount(te::bitwise_and(a, b[w])));
              sum = sum.defined() ? sum + v : v;
            }
            if (accumulate) sum = out[0].vload(at(r, {ci(0)}), vi) + sum;
            st.push_back(out[0].vstore(at(r, {ci(0)}), sum));
          }
          Stmt s = SeqStmt::make(std::move(st));
          for (int w = words - 1; w >= 0; --w)
            s = LetStmt::make(b[w], in[1].vload({ci(w), ci(0)}, vu), s);
          return s;
        };
        std::vector<Stmt> reset;
        for (int r = 0; r < rows; ++r)
          reset.push_back(out[0].vstore(at(r, {ci(0)}), broadcast(ci(0), 16)));
        te::IntrinLowering l;
        l.reset = SeqStmt::make(std::move(reset));
        l.body = rows_stmt(false);
        l.update = rows_stmt(true);
        return l;
      });
}

bool has_popcount(const Target& target) {
  return is_x86(target) && target.has_feature("avx512vpopcntdq");
}

te::TensorIntrin amx_dot_u8s8() {
  static const te::TensorIntrin intrin = [] {
    te::Tensor A = te::placeholder({ci(16), ci(64)}, DataType::UInt(8), "A");
    te::Tensor B = te::placeholder({ci(16), ci(16)}, kI32, "B");
    auto k4 = te::reduce_axis({0, ci(16)}, "k4");
    auto kk = te::reduce_axis({0, ci(4)}, "kk");
    te::Tensor C = te::compute(
        {ci(16), ci(16)},
        [&](Var i, Var j) {
          return te::sum(cast(kI32, A(i, k4 * ci(4) + kk)) * packed_s8(B(k4, j), kk), {k4, kk});
        },
        "C");
    return te::decl_tensor_intrin(
        "x86.amx_dot_u8s8_16x16x64", C,
        [](const std::vector<te::IntrinBuffer>& in, const std::vector<te::IntrinBuffer>& out) {
          const te::IntrinBuffer &a = in[0], &b = in[1], &c = out[0];
          std::vector<Stmt> zero;
          for (int r = 0; r < 16; ++r)
            zero.push_back(c.vstore({ci(r), ci(0)}, broadcast(ci(0), 16)));
          Stmt update =
              Evaluate::make(Call::make(kI32, builtin::kAmxTileDot,
                                        {StringImm::make("tdpbusd"), ci(16), ci(64), ci(64),
                                         c.access_ptr(), c.strides[0] * ci(4), a.access_ptr(),
                                         a.strides[0], b.access_ptr(), b.strides[0] * ci(4)},
                                        CallKind::kIntrinsic));
          te::IntrinLowering l;
          l.reset = SeqStmt::make(zero);
          l.update = update;
          l.body = SeqStmt::make({l.reset, update});
          return l;
        });
  }();
  return intrin;
}

bool has_amx_int8(const Target& target) {
  return is_x86(target) && target.has_feature("amx-int8") && target.has_feature("amx-tile");
}

}  // namespace kiln::topi
