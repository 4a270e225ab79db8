// Bit-serial dense (TVM paper section 6.2): activations and 1-bit weights packed 32 to a
// uint32 word (activations one plane per bit), per-plane AND-popcount sums over the words,
// and the planes' sums combined with shifts. The packing stages are sums of disjoint bits
// (a reduction over the 32 bit positions). The schedule computes the plane sums of each
// 16-column tile at the tile, so that they stay in registers; tensorized, the tile's
// columns × `words` words are topi::popcount_and (AVX-512 VPOPCNTDQ), the words split into
// micro-kernel steps with both bit planes inside each step (they share its weight rows). The
// non-tensorized baseline keeps the same loops, plain (LLVM vectorizes what it can).
#include "kiln/topi/bitserial.h"

#include "kiln/te/tensor_intrin.h"
#include "kiln/topi/x86_intrin.h"
#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using detail::ci;

namespace {
const DataType kU32 = DataType::UInt(32), kI32 = DataType::Int(32);

/// The word of 32 bits: Σ_j bit(k = 32w + j) << j, 0 past K.
te::Tensor pack_bits(std::vector<Expr> shape, int64_t K,
                     const std::function<Expr(const std::vector<Var>&, Expr)>& bit,
                     const std::string& name) {
  auto j = te::reduce_axis({0, ci(32)}, "j");
  return te::compute(
      std::move(shape),
      [&](const std::vector<Var>& v) {
        Expr k = v.back() * ci(32) + j;
        Expr b = bit(v, min(k, ci(K - 1)));
        if (K % 32 != 0) b = if_then_else(k < ci(K), b, make_zero(kU32));
        return te::sum(te::shift_left(b, cast(kU32, Expr(j))), {j});
      },
      name, tag::kBitpack);
}
}  // namespace

te::Tensor bitpack_activations(const te::Tensor& a, int bits, const std::string& name) {
  auto s = detail::const_shape(a, "bitpack_activations");
  KILN_USER_CHECK(a->dtype == DataType::UInt(8) && s.size() == 2)
      << "bitpack_activations: data must be uint8 [M, K], got " << a->dtype << " "
      << detail::shape_text(s);
  KILN_USER_CHECK(bits == 1 || bits == 2)
      << "bitpack_activations: bits must be 1 or 2, got " << bits;
  const int64_t M = s[0], K = s[1];
  return pack_bits(
      {ci(bits), ci(M), ci((K + 31) / 32)}, K,
      [&](const std::vector<Var>& v, Expr k) {
        Expr x = cast(kU32, a(v[1], k));
        return te::bitwise_and(te::shift_right(x, cast(kU32, Expr(v[0]))), make_const(kU32, 1));
      },
      name);
}

te::Tensor bitpack_weights(const te::Tensor& W, const std::string& name) {
  auto s = detail::const_shape(W, "bitpack_weights");
  KILN_USER_CHECK(W->dtype == DataType::UInt(8) && s.size() == 2)
      << "bitpack_weights: weight must be uint8 [N, K] of 0 and 1, got " << W->dtype << " "
      << detail::shape_text(s);
  const int64_t N = s[0], K = s[1];
  // [ceil(K/32), N]: the words of one column step are a row, as popcount_and reads them.
  auto j = te::reduce_axis({0, ci(32)}, "j");
  return te::compute(
      {ci((K + 31) / 32), ci(N)},
      [&](Var w, Var n) {
        Expr k = w * ci(32) + j;
        Expr b = te::bitwise_and(cast(kU32, W(n, min(k, ci(K - 1)))), make_const(kU32, 1));
        if (K % 32 != 0) b = if_then_else(k < ci(K), b, make_zero(kU32));
        return te::sum(te::shift_left(b, cast(kU32, Expr(j))), {j});
      },
      name, tag::kBitpack);
}

te::Tensor bitserial_dense(const te::Tensor& Ap, const te::Tensor& Wp, const std::string& name) {
  auto as = detail::const_shape(Ap, "bitserial_dense"),
       ws = detail::const_shape(Wp, "bitserial_dense");
  KILN_USER_CHECK(Ap->dtype == kU32 && Wp->dtype == kU32 && as.size() == 3 && ws.size() == 2 &&
                  as[2] == ws[0])
      << "bitserial_dense: needs packed activations uint32 [bits, M, W] and weights uint32 [W, "
         "N], got "
      << Ap->dtype << " " << detail::shape_text(as) << " and " << Wp->dtype << " "
      << detail::shape_text(ws);
  const int64_t bits = as[0], M = as[1], W = as[2], N = ws[1];
  auto w = te::reduce_axis({0, ci(W)}, "w");
  te::Tensor P = te::compute(
      {ci(bits), ci(M), ci(N)},
      [&](Var b, Var m, Var n) {
        return te::sum(cast(kI32, te::popcount(te::bitwise_and(Ap(b, m, w), Wp(w, n)))), {w});
      },
      name + "_planes", tag::kBitserialPlanes);
  auto rb = te::reduce_axis({0, ci(bits)}, "b");
  return te::compute(
      {ci(M), ci(N)}, [&](Var m, Var n) { return te::sum(te::shift_left(P(rb, m, n), rb), {rb}); },
      name, tag::kBitserialDense);
}

te::Schedule schedule_bitserial_dense(const te::Tensor& y, const Target& target, bool tensorize) {
  KILN_USER_CHECK(y->op->tag == tag::kBitserialDense)
      << "schedule_bitserial_dense: '" << y.name() << "' is not a bitserial_dense";
  auto ys = detail::const_shape(y, "schedule_bitserial_dense");
  KILN_USER_CHECK(ys[1] % 16 == 0)
      << "schedule_bitserial_dense: N must be a multiple of 16, got " << ys[1];
  te::Schedule s = te::create_schedule({y});
  te::Tensor P = y->op->input_tensors()[0];
  te::Tensor Ap = P->op->input_tensors()[0];
  const int64_t W = *as_const_int(Ap->shape[2]);
  if (Ap->op->kind == te::OpKind::kCompute) {
    te::Stage sp = s[Ap];
    auto ax = sp.op_axis();
    sp.reorder({ax[1], ax[0], ax[2]});
    sp.parallel(ax[1]);
    sp.unroll(sp.op_reduce_axis()[0]);
  }
  te::Stage sy = s[y];
  auto yax = sy.op_axis();
  auto [no, ni] = sy.split(yax[1], ci(16));
  sy.reorder({yax[0], no, sy.op_reduce_axis()[0], ni});
  sy.parallel(yax[0]);
  sy.vectorize(ni);
  te::Stage sP = s[P];
  sP.compute_at(sy, no);
  auto pax = sP.op_axis();
  int64_t words = 1;
  for (int64_t c : {8, 4, 2})
    if (W % c == 0) {
      words = c;
      break;
    }
  auto [wo, wi] = sP.split(sP.op_reduce_axis()[0], ci(words));
  // The planes inside the word steps: both planes use each step's weight rows.
  sP.reorder({pax[1], wo, pax[0], pax[2], wi});
  if (tensorize && has_popcount(target))
    sP.tensorize(pax[2], popcount_and(static_cast<int>(words)));
  return s;
}

}  // namespace kiln::topi
