/// \file signal.h
/// \brief Signal-processing operators: discrete Fourier transforms (DFT, STFT) as reductions
/// against constant float64 cos/sin tables, and the determinant of square matrices.
///
/// A DFT of length n along one axis is the linear map out[k] = Σ_j x[j] · e^{∓2πi jk/n}; with
/// complex numbers stored as a trailing [re, im] (or a single real part) dimension it becomes
/// one real reduction over (part p, sample j) against a weight table w[p, q, j, k] (q: output
/// part). `dft_weights` builds that table for the forward transform, the inverse, one-sided
/// outputs and the inverse of a one-sided spectrum (irfft); `dft` and `stft` reduce against it
/// in float64 and return the input's dtype. The O(n²) direct form is exact to float64 rounding.
///
///   runtime::NDArray w = topi::dft_weights(10, 1, 10, false, false);  // [1, 2, 10, 10]
///   te::Tensor y = topi::dft(x, w_tensor, 1);                          // x [B, 10, 1]
#pragma once

#include <cstdint>
#include <string>

#include "kiln/runtime/ndarray.h"
#include "kiln/te/tensor.h"

namespace kiln::topi {

/// The float64 DFT weight table [P, Q, J, K] for an input of `in_len` samples with `in_parts`
/// (1: real, 2: complex) parts and transform length `n` (inputs shorter than n are zero-padded,
/// longer ones truncated, as numpy.fft does). Forward: Q = 2, K = n (n / 2 + 1 when
/// `onesided`). Inverse: scaled by 1 / n; Q = 2 and K = n, or, when `onesided`, the inverse of
/// a one-sided spectrum (numpy.fft.irfft: J ≤ n / 2 + 1, Q = 1 real output, K = n).
runtime::NDArray dft_weights(int64_t in_len, int64_t in_parts, int64_t n, bool inverse,
                             bool onesided);

/// out[…, k, …, q] = Σ_{p, j} x[…, j, …, p] · w[p, q, j, k] along `axis` of x (which must not
/// be the last, parts, dimension). x: [..., L, ..., P] float; w: float64 [P, Q, J, K] with
/// J ≤ L (from dft_weights). Output [..., K, ..., Q] in x's dtype, accumulated in float64.
/// pattern: opaque
te::Tensor dft(const te::Tensor& x, const te::Tensor& w, int64_t axis,
               const std::string& name = "dft");

/// Short-time Fourier transform: out[b, f, k, q] = Σ_{p, j} (x[b, f·step + j, p] · window[j])
/// · w[p, q, j, k] for frames f = 0 … (L − J) / step. x: [B, L, P] float; window: [J] of x's
/// dtype; w: float64 [P, Q, J, K] (dft_weights with in_len = n = J). Output [B, F, K, Q].
/// pattern: opaque
te::Tensor stft(const te::Tensor& x, const te::Tensor& window, const te::Tensor& w,
                int64_t frame_step, const std::string& name = "stft");

/// Determinant of each matrix of x [..., M, M] (float): LU decomposition with partial pivoting
/// in float64 (an extern op whose body is a hand-written loop nest), result [...] in x's dtype.
/// A singular matrix gives 0. pattern: opaque
te::Tensor det(const te::Tensor& x, const std::string& name = "det");

}  // namespace kiln::topi
