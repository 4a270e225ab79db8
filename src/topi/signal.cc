// Signal processing: DFT and STFT as one float64 reduction over (part, sample) against a
// constant weight table (cos / sin of 2π·(jk mod n)/n, computed in double), and the
// determinant by LU decomposition with partial pivoting. The determinant is sequential (each
// elimination step depends on the last pivot), so it is an extern op whose body is a TIR loop
// nest over float64 scratch storage: for each matrix, copy it, then for each column pick the
// row with the largest magnitude, swap it up (negating the determinant), multiply the
// determinant by the pivot and eliminate below it.
#include "kiln/topi/signal.h"

#include <cmath>

#include "topi_util.h"

namespace kiln::topi {

using namespace kiln::ir;  // NOLINT
using detail::ci;
using detail::const_shape;
using detail::shape_text;

runtime::NDArray dft_weights(int64_t in_len, int64_t in_parts, int64_t n, bool inverse,
                             bool onesided) {
  KILN_USER_CHECK(n >= 1) << "dft: the transform length must be positive, got " << n;
  KILN_USER_CHECK(in_len >= 1) << "dft: the input length must be positive, got " << in_len;
  KILN_USER_CHECK(in_parts == 1 || in_parts == 2)
      << "dft: the last dimension must be 1 (real) or 2 (complex), got " << in_parts;
  const bool irfft = inverse && onesided;
  const int64_t P = in_parts;
  const int64_t Q = irfft ? 1 : 2;
  const int64_t J = std::min(in_len, irfft ? n / 2 + 1 : n);
  const int64_t K = (onesided && !inverse) ? n / 2 + 1 : n;
  runtime::NDArray w = runtime::NDArray::empty({P, Q, J, K}, DataType::Float(64));
  double* d = w.data_as<double>();
  auto at = [&](int64_t p, int64_t q, int64_t j, int64_t k) -> double& {
    return d[((p * Q + q) * J + j) * K + k];
  };
  const double two_pi = 2.0 * M_PI;
  for (int64_t j = 0; j < J; ++j) {
    for (int64_t k = 0; k < K; ++k) {
      int64_t m = (j * k) % n;
      double c = std::cos(two_pi * static_cast<double>(m) / static_cast<double>(n));
      double s = std::sin(two_pi * static_cast<double>(m) / static_cast<double>(n));
      if (2 * m == n) s = 0;  // sin(π): exactly zero
      if (irfft) {
        // out[k] = (1/n) Σ_j c_j (Re X_j cos − Im X_j sin), c_j = 2 for the bins whose
        // conjugates are implied (0 < j < n/2), else 1; Im of bins 0 and n/2 is ignored.
        double weight = (j == 0 || 2 * j == n) ? 1.0 : 2.0;
        if (2 * j == n) s = 0;
        at(0, 0, j, k) = weight * c / static_cast<double>(n);
        if (P == 2) at(1, 0, j, k) = -weight * s / static_cast<double>(n);
      } else if (inverse) {
        // e^{+iθ} / n: re = (a cos − b sin) / n, im = (a sin + b cos) / n.
        double scale = 1.0 / static_cast<double>(n);
        at(0, 0, j, k) = c * scale;
        at(0, 1, j, k) = s * scale;
        if (P == 2) {
          at(1, 0, j, k) = -s * scale;
          at(1, 1, j, k) = c * scale;
        }
      } else {
        // e^{−iθ}: re = a cos + b sin, im = b cos − a sin.
        at(0, 0, j, k) = c;
        at(0, 1, j, k) = -s;
        if (P == 2) {
          at(1, 0, j, k) = s;
          at(1, 1, j, k) = c;
        }
      }
    }
  }
  return w;
}

namespace {

void check_table(const std::vector<int64_t>& ws, int64_t parts, int64_t len, const char* op) {
  KILN_USER_CHECK(ws.size() == 4 && ws[0] == parts && ws[2] <= len)
      << op << ": weight table " << shape_text(ws) << " does not fit an input of " << len
      << " samples with " << parts << " parts";
}

}  // namespace

te::Tensor dft(const te::Tensor& x, const te::Tensor& w, int64_t axis, const std::string& name) {
  std::vector<int64_t> xs = const_shape(x, "dft"), ws = const_shape(w, "dft");
  const int r = static_cast<int>(xs.size());
  KILN_USER_CHECK(r >= 2) << "dft: input must have rank >= 2 (samples and parts), got "
                          << shape_text(xs);
  KILN_USER_CHECK(x->dtype.is_float()) << "dft: input must be float, got " << x->dtype;
  KILN_USER_CHECK(w->dtype == DataType::Float(64)) << "dft: weight table must be float64";
  KILN_USER_CHECK(axis >= 0 && axis < r - 1)
      << "dft: axis " << axis << " must name a sample dimension of " << shape_text(xs)
      << " (not the last, parts, dimension)";
  const int64_t P = xs[r - 1];
  check_table(ws, P, xs[axis], "dft");
  std::vector<Expr> oshape;
  for (int d = 0; d < r - 1; ++d) oshape.push_back(ci(d == axis ? ws[3] : xs[d]));
  oshape.push_back(ci(ws[1]));
  te::IterVar p = te::reduce_axis({0, ci(P)}, "p");
  te::IterVar j = te::reduce_axis({0, ci(ws[2])}, "j");
  DataType f64 = DataType::Float(64);
  DataType t = x->dtype;
  te::Tensor acc = te::compute(
      oshape,
      [=](const std::vector<Var>& i) {
        std::vector<Expr> xi(i.begin(), i.end());
        xi[axis] = j->var;
        xi[r - 1] = p->var;
        return te::sum(cast(f64, x(xi)) * w(p->var, i[r - 1], j->var, i[axis]), {p, j});
      },
      name + "_acc", "dft");
  return te::compute(
      oshape,
      [=](const std::vector<Var>& i) {
        return cast(t, acc(std::vector<Expr>(i.begin(), i.end())));
      },
      name, "dft");
}

te::Tensor stft(const te::Tensor& x, const te::Tensor& window, const te::Tensor& w,
                int64_t frame_step, const std::string& name) {
  std::vector<int64_t> xs = const_shape(x, "stft"), ws = const_shape(w, "stft"),
                       wins = const_shape(window, "stft");
  KILN_USER_CHECK(xs.size() == 3) << "stft: signal must be [batch, length, 1 or 2], got "
                                  << shape_text(xs);
  KILN_USER_CHECK(x->dtype.is_float() && window->dtype == x->dtype)
      << "stft: signal and window must be float of one dtype, got " << x->dtype << " and "
      << window->dtype;
  KILN_USER_CHECK(frame_step >= 1) << "stft: frame_step must be positive, got " << frame_step;
  const int64_t P = xs[2];
  KILN_USER_CHECK(wins.size() == 1 && ws.size() == 4 && ws[2] == wins[0])
      << "stft: window " << shape_text(wins) << " does not match the weight table "
      << shape_text(ws);
  const int64_t J = wins[0];
  KILN_USER_CHECK(J <= xs[1]) << "stft: frame length " << J << " exceeds the signal length "
                              << xs[1];
  check_table(ws, P, J, "stft");
  const int64_t frames = (xs[1] - J) / frame_step + 1;
  std::vector<Expr> oshape{ci(xs[0]), ci(frames), ci(ws[3]), ci(ws[1])};
  te::IterVar p = te::reduce_axis({0, ci(P)}, "p");
  te::IterVar j = te::reduce_axis({0, ci(J)}, "j");
  DataType f64 = DataType::Float(64);
  DataType t = x->dtype;
  te::Tensor acc = te::compute(
      oshape,
      [=](Var b, Var f, Var k, Var q) {
        Expr v = x(b, f * ci(frame_step) + j->var, p->var) * window(j->var);
        return te::sum(cast(f64, v) * w(p->var, q, j->var, k), {p, j});
      },
      name + "_acc", "stft");
  return te::compute(
      oshape, [=](Var b, Var f, Var k, Var q) { return cast(t, acc(b, f, k, q)); }, name, "stft");
}

te::Tensor det(const te::Tensor& x, const std::string& name) {
  std::vector<int64_t> xs = const_shape(x, "det");
  const size_t r = xs.size();
  KILN_USER_CHECK(r >= 2 && xs[r - 1] == xs[r - 2] && xs[r - 1] >= 1)
      << "det: input must be [..., M, M] square matrices, got " << shape_text(xs);
  KILN_USER_CHECK(x->dtype.is_float()) << "det: input must be float, got " << x->dtype;
  const int64_t M = xs[r - 1];
  int64_t B = 1;
  for (size_t d = 0; d + 2 < r; ++d) B *= xs[d];
  const DataType t = x->dtype, f64 = DataType::Float(64), i32 = DataType::Int(32);

  auto body = [=](const std::vector<Buffer>& ins, const std::vector<Buffer>& outs) -> Stmt {
    Var lu("lu", DataType::Handle()), state("det_acc", DataType::Handle()),
        piv("pivot", DataType::Handle());
    Var b("b"), i("i"), j("j"), k("k"), rr("r"), jj("jj");
    auto A = [&](Expr row, Expr col) { return Load::make(f64, lu, row * ci(M) + col); };
    auto setA = [&](Expr row, Expr col, Expr v) {
      return Store::make(lu, std::move(v), row * ci(M) + col);
    };
    Expr det_v = Load::make(f64, state, ci(0));
    Expr piv_v = Load::make(i32, piv, ci(0));
    auto loop = [](Var v, Expr extent, Stmt s) {
      return For::make(v, ci(0), std::move(extent), ForKind::kSerial, std::move(s));
    };

    // Copy matrix b into the scratch storage (float64).
    Expr src = Load::make(t, ins[0]->data, b * ci(M * M) + i * ci(M) + j);
    Stmt copy = loop(i, ci(M), loop(j, ci(M), setA(i, j, cast(f64, src))));

    // Pivot search over rows k+1+r: the first row of largest magnitude in column k.
    Expr row = k + ci(1) + rr;
    Stmt search = SeqStmt::make(
        {Store::make(piv, k, ci(0)),
         loop(rr, ci(M) - k - ci(1),
              IfThenElse::make(abs(A(row, k)) > abs(A(piv_v, k)), Store::make(piv, row, ci(0))))});
    // Swap rows k and pivot, negating the determinant.
    Var p("p"), tmp("tmp", f64), f("f", f64);
    Stmt swap = LetStmt::make(
        p, piv_v,
        IfThenElse::make(
            p != k,
            SeqStmt::make(
                {Store::make(state, -det_v, ci(0)),
                 loop(j, ci(M),
                      LetStmt::make(tmp, A(k, j),
                                    SeqStmt::make({setA(k, j, A(p, j)), setA(p, j, tmp)})))})));
    Stmt mul = Store::make(state, det_v * A(k, k), ci(0));
    Expr col = k + ci(1) + jj;
    Stmt elim = IfThenElse::make(
        A(k, k) != make_zero(f64),
        loop(rr, ci(M) - k - ci(1),
             LetStmt::make(
                 f, A(row, k) / A(k, k),
                 loop(jj, ci(M) - k - ci(1), setA(row, col, A(row, col) - f * A(k, col))))));
    Stmt steps = loop(k, ci(M), SeqStmt::make({search, swap, mul, elim}));
    Stmt per_matrix = SeqStmt::make({copy, Store::make(state, make_one(f64), ci(0)), steps,
                                     Store::make(outs[0]->data, cast(t, det_v), b)});
    Stmt all = loop(b, ci(B), per_matrix);
    all = Allocate::make(piv, i32, {ci(1)}, const_true(), all, "local");
    all = Allocate::make(state, f64, {ci(1)}, const_true(), all, "local");
    return Allocate::make(lu, f64, {ci(M * M)}, const_true(), all, "local");
  };
  te::Tensor flat = te::extern_op({{ci(B)}}, {t}, {x}, body, name + "_lu")[0];
  std::vector<Expr> oshape;
  for (size_t d = 0; d + 2 < r; ++d) oshape.push_back(ci(xs[d]));
  std::vector<int64_t> bs(xs.begin(), xs.end() - 2);
  return te::compute(oshape, te::FCompute([=](const std::vector<Var>& i) {
                       Expr f = ci(0);
                       for (size_t d = 0; d < i.size(); ++d) f = f * ci(bs[d]) + i[d];
                       return flat(f);
                     }),
                     name, "det");
}

}  // namespace kiln::topi
