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

/// The word of 32 bits along axis `word_axis`: Σ_j bit(k = 32w + j) << j, 0 past K (the bit
/// function gets k clamped into [0, K) when K is not a multiple of 32).
te::Tensor pack_bits(std::vector<Expr> shape, size_t word_axis, int64_t K,
                     const std::function<Expr(const std::vector<Var>&, Expr)>& bit,
                     const std::string& name) {
  auto j = te::reduce_axis({0, ci(32)}, "j");
  return te::compute(
      std::move(shape),
      [&](const std::vector<Var>& v) {
        Expr k = v[word_axis] * ci(32) + j;
        Expr b = bit(v, K % 32 == 0 ? k : min(k, ci(K - 1)));
        if (K % 32 != 0) b = if_then_else(k < ci(K), b, make_zero(kU32));
        return te::sum(te::shift_left(b, cast(kU32, Expr(j))), {j});
      },
      name, tag::kBitpack);
}

/// Bit `b` of the uint8 value x, as uint32.
Expr bit_of(Expr x, Expr b) {
  return te::bitwise_and(te::shift_right(cast(kU32, std::move(x)), cast(kU32, std::move(b))),
                         make_const(kU32, 1));
}

/// y[i...] = Σ_b P[b, i...] << b: the plane sums P (planes first) combined.
te::Tensor combine_planes(const te::Tensor& P, const std::string& name, const char* tag) {
  auto rb = te::reduce_axis({0, P->shape[0]}, "b");
  std::vector<Expr> shape(P->shape.begin() + 1, P->shape.end());
  return te::compute(
      shape,
      [&](const std::vector<Var>& v) {
        std::vector<Expr> idx = {rb->var};
        idx.insert(idx.end(), v.begin(), v.end());
        return te::sum(te::shift_left(P(idx), rb), {rb});
      },
      name, tag);
}

void check_bits(int bits, const char* op) {
  KILN_USER_CHECK(bits == 1 || bits == 2) << op << ": bits must be 1 or 2, got " << bits;
}
}  // namespace

te::Tensor bitpack_activations(const te::Tensor& a, int bits, const std::string& name) {
  auto s = detail::const_shape(a, "bitpack_activations");
  KILN_USER_CHECK(a->dtype == DataType::UInt(8) && s.size() == 2)
      << "bitpack_activations: data must be uint8 [M, K], got " << a->dtype << " "
      << detail::shape_text(s);
  check_bits(bits, "bitpack_activations");
  const int64_t M = s[0], K = s[1];
  return pack_bits(
      {ci(bits), ci(M), ci((K + 31) / 32)}, 2, K,
      [&](const std::vector<Var>& v, Expr k) { return bit_of(a(v[1], k), v[0]); }, name);
}

te::Tensor bitpack_weights(const te::Tensor& W, const std::string& name) {
  auto s = detail::const_shape(W, "bitpack_weights");
  KILN_USER_CHECK(W->dtype == DataType::UInt(8) && s.size() == 2)
      << "bitpack_weights: weight must be uint8 [N, K] of 0 and 1, got " << W->dtype << " "
      << detail::shape_text(s);
  const int64_t N = s[0], K = s[1];
  // [ceil(K/32), N]: the words of one column step are a row, as popcount_and reads them.
  return pack_bits(
      {ci((K + 31) / 32), ci(N)}, 0, K,
      [&](const std::vector<Var>& v, Expr k) { return bit_of(W(v[1], k), ci(0)); }, name);
}

te::Tensor bitpack_nhwc(const te::Tensor& data, int bits, int64_t pad_h, int64_t pad_w,
                        const std::string& name) {
  auto s = detail::const_shape(data, "bitpack_nhwc");
  KILN_USER_CHECK(data->dtype == DataType::UInt(8) && s.size() == 4)
      << "bitpack_nhwc: data must be uint8 [N, H, W, C], got " << data->dtype << " "
      << detail::shape_text(s);
  check_bits(bits, "bitpack_nhwc");
  KILN_USER_CHECK(pad_h >= 0 && pad_w >= 0)
      << "bitpack_nhwc: padding must be >= 0, got " << pad_h << ", " << pad_w;
  const int64_t N = s[0], H = s[1], W = s[2], C = s[3], CW = (C + 31) / 32;
  // The words with the planes innermost (bitpack32's operand order: one 32-byte row gives
  // every plane's word), then padded and planes outermost, as the convolution reads them.
  te::Tensor q = pack_bits(
      {ci(N), ci(H), ci(W), ci(CW), ci(bits)}, 3, C,
      [&](const std::vector<Var>& v, Expr k) { return bit_of(data(v[0], v[1], v[2], k), v[4]); },
      name + "_words");
  return te::compute(
      {ci(bits), ci(N), ci(H + 2 * pad_h), ci(W + 2 * pad_w), ci(CW)},
      [&](const std::vector<Var>& v) {
        Expr h = v[2] - ci(pad_h), w = v[3] - ci(pad_w);
        Expr x = q(v[1], max(min(h, ci(H - 1)), ci(0)), max(min(w, ci(W - 1)), ci(0)), v[4], v[0]);
        if (pad_h == 0 && pad_w == 0) return x;
        Expr inside = h >= ci(0) && h < ci(H) && w >= ci(0) && w < ci(W);
        return if_then_else(inside, x, make_zero(kU32));
      },
      name, tag::kBitpack);
}

te::TensorIntrin bitpack32(int bits) {
  check_bits(bits, "bitpack32");
  te::Tensor A = te::placeholder({ci(32)}, DataType::UInt(8), "A");
  auto j = te::reduce_axis({0, ci(32)}, "j");
  te::Tensor C = te::compute(
      {ci(bits)},
      [&](Var p) { return te::sum(te::shift_left(bit_of(A(j), p), cast(kU32, Expr(j))), {j}); },
      "C");
  return te::decl_tensor_intrin(
      "bitpack32x" + std::to_string(bits), C,
      [bits](const std::vector<te::IntrinBuffer>& in, const std::vector<te::IntrinBuffer>& out) {
        // Per plane: the 32 bytes tested against the plane's bit, the 32 lane results as the
        // word's bits (x86: vptestmb + kmovd, or pcmpeqb + pmovmskb).
        const DataType u8x32 = DataType::UInt(8, 32);
        Expr a = in[0].vload({ci(0)}, u8x32);
        std::vector<Stmt> st;
        for (int p = 0; p < bits; ++p) {
          Expr set = te::bitwise_and(a, broadcast(make_const(DataType::UInt(8), 1 << p), 32)) !=
                     broadcast(make_zero(DataType::UInt(8)), 32);
          st.push_back(out[0].vstore({ci(p)}, te::reinterpret(kU32, set)));
        }
        te::IntrinLowering l;
        l.body = SeqStmt::make(std::move(st));
        return l;
      });
}

te::Tensor bitpack_hwio(const te::Tensor& W, const std::string& name) {
  auto s = detail::const_shape(W, "bitpack_hwio");
  KILN_USER_CHECK(W->dtype == DataType::UInt(8) && s.size() == 4)
      << "bitpack_hwio: weight must be uint8 [KH, KW, C, O] of 0 and 1, got " << W->dtype << " "
      << detail::shape_text(s);
  return pack_bits(
      {ci(s[0]), ci(s[1]), ci((s[2] + 31) / 32), ci(s[3])}, 2, s[2],
      [&](const std::vector<Var>& v, Expr k) { return bit_of(W(v[0], v[1], k, v[3]), ci(0)); },
      name);
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
  return combine_planes(P, name, tag::kBitserialDense);
}

te::Tensor bitserial_conv2d_nhwc(const te::Tensor& Dp, const te::Tensor& Wp, int64_t stride_h,
                                 int64_t stride_w, const std::string& name) {
  auto ds = detail::const_shape(Dp, "bitserial_conv2d_nhwc"),
       ws = detail::const_shape(Wp, "bitserial_conv2d_nhwc");
  KILN_USER_CHECK(Dp->dtype == kU32 && Wp->dtype == kU32 && ds.size() == 5 && ws.size() == 4 &&
                  ds[4] == ws[2])
      << "bitserial_conv2d_nhwc: needs packed data uint32 [bits, N, H, W, CW] and weights uint32 "
         "[KH, KW, CW, O], got "
      << Dp->dtype << " " << detail::shape_text(ds) << " and " << Wp->dtype << " "
      << detail::shape_text(ws);
  KILN_USER_CHECK(stride_h >= 1 && stride_w >= 1)
      << "bitserial_conv2d_nhwc: strides must be >= 1, got " << stride_h << ", " << stride_w;
  const int64_t bits = ds[0], N = ds[1], H = ds[2], W = ds[3], KH = ws[0], KW = ws[1];
  KILN_USER_CHECK(KH <= H && KW <= W)
      << "bitserial_conv2d_nhwc: the " << KH << "x" << KW << " window is larger than the padded "
      << H << "x" << W << " input";
  const int64_t OH = (H - KH) / stride_h + 1, OW = (W - KW) / stride_w + 1;
  auto kh = te::reduce_axis({0, ci(KH)}, "kh"), kw = te::reduce_axis({0, ci(KW)}, "kw"),
       cw = te::reduce_axis({0, ci(ds[4])}, "cw");
  te::Tensor P = te::compute(
      {ci(bits), ci(N), ci(OH), ci(OW), ci(ws[3])},
      [&](const std::vector<Var>& v) {
        Expr d = Dp(v[0], v[1], v[2] * ci(stride_h) + kh, v[3] * ci(stride_w) + kw, cw);
        return te::sum(cast(kI32, te::popcount(te::bitwise_and(d, Wp(kh, kw, cw, v[4])))),
                       {kh, kw, cw});
      },
      name + "_planes", tag::kBitserialPlanes);
  return combine_planes(P, name, tag::kBitserialConv2D);
}

namespace {
/// The largest divisor of n in [1, cap].
int64_t divisor_at_most(int64_t n, int64_t cap) {
  for (int64_t d = std::min(n, cap); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

/// Words per micro-kernel step: the largest of 8, 4, 2 that divides the word count.
int64_t word_step(int64_t words) {
  for (int64_t c : {8, 4, 2})
    if (words % c == 0) return c;
  return 1;
}

/// The packing stage `t` (when computed here): rows of `row_axis` in parallel, the 32 bit
/// positions unrolled.
void schedule_packing(te::Schedule& s, const te::Tensor& t, size_t row_axis) {
  if (t->op->kind != te::OpKind::kCompute) return;
  te::Stage sp = s[t];
  auto ax = sp.op_axis();
  std::vector<te::IterVar> order = {ax[row_axis]};
  for (size_t i = 0; i < ax.size(); ++i)
    if (i != row_axis) order.push_back(ax[i]);
  sp.reorder(order);
  sp.parallel(ax[row_axis]);
  sp.unroll(sp.op_reduce_axis()[0]);
}

}  // namespace

void schedule_bitpack_nhwc(te::Schedule& s, const te::Tensor& padded, bool tensorize) {
  if (padded->op->kind != te::OpKind::kCompute) return;  // given packed
  te::Stage sp = s[padded];
  auto pax = sp.op_axis();
  sp.reorder({pax[1], pax[2], pax[0], pax[3], pax[4]});
  sp.parallel(sp.fuse(pax[1], pax[2]));
  te::Tensor words = padded->op->input_tensors().at(0);
  te::Stage sw = s[words];
  auto wax = sw.op_axis();
  sw.parallel(sw.fuse(wax[0], wax[1]));
  const te::Tensor data = words->op->input_tensors().at(0);
  if (tensorize && *as_const_int(data->shape[3]) % 32 == 0) {
    sw.tensorize(wax[4], bitpack32(static_cast<int>(*as_const_int(words->shape[4]))));
  } else {
    sw.unroll(sw.op_reduce_axis()[0]);
  }
}

te::Schedule schedule_bitserial_conv2d_nhwc(const te::Tensor& y, const Target& target,
                                            bool tensorize) {
  KILN_USER_CHECK(y->op->tag == tag::kBitserialConv2D)
      << "schedule_bitserial_conv2d_nhwc: '" << y.name() << "' is not a bitserial_conv2d_nhwc";
  auto ys = detail::const_shape(y, "schedule_bitserial_conv2d_nhwc");
  KILN_USER_CHECK(ys[3] % 16 == 0)
      << "schedule_bitserial_conv2d_nhwc: O must be a multiple of 16, got " << ys[3];
  te::Schedule s = te::create_schedule({y});
  te::Tensor P = y->op->input_tensors()[0];
  te::Tensor Dp = P->op->input_tensors()[0];
  schedule_bitpack_nhwc(s, Dp, tensorize);
  // The tile: up to 8 output pixels of a row (bits × rows accumulators of 16 lanes, plus one
  // register per weight word of a step: at most 24 of the 32 zmm registers).
  const int64_t rows = divisor_at_most(ys[2], 8);
  te::Stage sy = s[y];
  auto yax = sy.op_axis();
  auto [wo, wi] = sy.split(yax[2], ci(rows));
  auto [oo, oi] = sy.split(yax[3], ci(16));
  te::IterVar rb = sy.op_reduce_axis()[0];
  sy.reorder({yax[0], yax[1], wo, oo, wi, rb, oi});
  sy.parallel(sy.fuse(yax[0], yax[1]));
  sy.unroll(wi);
  sy.unroll(rb);
  sy.vectorize(oi);
  te::Stage sP = s[P];
  sP.compute_at(sy, oo);
  auto pax = sP.op_axis();
  auto red = sP.op_reduce_axis();
  const int64_t words = word_step(*as_const_int(Dp->shape[4]));
  auto [co, cwi] = sP.split(red[2], ci(words));
  // The planes inside each word step (they share its weight rows), unrolled so that the
  // accumulators stay in registers.
  sP.reorder({pax[1], pax[2], red[0], red[1], co, pax[0], pax[3], pax[4], cwi});
  sP.unroll(pax[0]);
  if (tensorize && has_popcount(target)) {
    if (rows > 1)
      sP.tensorize(pax[3], popcount_and(static_cast<int>(words), static_cast<int>(rows)));
    else
      sP.tensorize(pax[4], popcount_and(static_cast<int>(words)));
  }
  return s;
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
  schedule_packing(s, Ap, 1);
  te::Stage sy = s[y];
  auto yax = sy.op_axis();
  auto [no, ni] = sy.split(yax[1], ci(16));
  sy.reorder({yax[0], no, sy.op_reduce_axis()[0], ni});
  sy.parallel(yax[0]);
  sy.vectorize(ni);
  te::Stage sP = s[P];
  sP.compute_at(sy, no);
  auto pax = sP.op_axis();
  const int64_t words = word_step(W);
  auto [wo, wi] = sP.split(sP.op_reduce_axis()[0], ci(words));
  // The planes inside the word steps: both planes use each step's weight rows.
  sP.reorder({pax[1], wo, pax[0], pax[2], wi});
  if (tensorize && has_popcount(target))
    sP.tensorize(pax[2], popcount_and(static_cast<int>(words)));
  return s;
}

}  // namespace kiln::topi
