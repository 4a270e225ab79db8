// Naive references for the convolution tests: direct loops in double precision over plain
// float arrays (NCHW / OIHW), independent of the te computes, plus the host-side layout
// conversions the blocked kernels need (NCHW <-> NCHW[x]c, OIHW -> OIHW[x]i[y]o, depthwise
// kernel packing) and a random sampler of template configs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kiln/autotune/template.h"
#include "kiln/runtime/ndarray.h"
#include "kiln/topi/conv2d.h"
#include "kiln/topi/nn_util.h"

namespace kiln::topi::testing {

/// conv2d, NCHW data, OIHW kernel [O, C/groups, KH, KW], in double precision.
inline runtime::NDArray ref_conv2d_nchw(const runtime::NDArray& data,
                                        const runtime::NDArray& kernel, const Conv2DParams& p) {
  const auto& ds = data.shape();
  const auto& ks = kernel.shape();
  const int64_t N = ds[0], C = ds[1], H = ds[2], W = ds[3];
  const int64_t O = ks[0], CG = ks[1], KH = ks[2], KW = ks[3], G = p.groups;
  const int64_t OH =
      conv_out_extent(H, KH, p.stride_h, p.dilation_h, p.padding.top, p.padding.bottom);
  const int64_t OW =
      conv_out_extent(W, KW, p.stride_w, p.dilation_w, p.padding.left, p.padding.right);
  runtime::NDArray out = runtime::NDArray::empty({N, O, OH, OW}, DataType::Float(32));
  const float* d = data.data_as<float>();
  const float* k = kernel.data_as<float>();
  float* o = out.data_as<float>();
  const int64_t OG = O / G;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < O; ++oc)
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t x = 0; x < OW; ++x) {
          double acc = 0;
          for (int64_t c = 0; c < CG; ++c) {
            int64_t ic = (oc / OG) * CG + c;
            for (int64_t kh = 0; kh < KH; ++kh) {
              int64_t h = y * p.stride_h + kh * p.dilation_h - p.padding.top;
              if (h < 0 || h >= H) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t w = x * p.stride_w + kw * p.dilation_w - p.padding.left;
                if (w < 0 || w >= W) continue;
                acc += double(d[((n * C + ic) * H + h) * W + w]) *
                       k[((oc * CG + c) * KH + kh) * KW + kw];
              }
            }
          }
          o[((n * O + oc) * OH + y) * OW + x] = static_cast<float>(acc);
        }
  return out;
}

/// conv2d_transpose, NCHW data, kernel [C, O, KH, KW] (ONNX / PyTorch), by scattering each
/// input element: out[n, o, y*s - pad_top + kh*d, …] += data[n, c, y, x] * kernel[c, o, kh, kw].
inline runtime::NDArray ref_conv2d_transpose_nchw(const runtime::NDArray& data,
                                                  const runtime::NDArray& kernel,
                                                  const Conv2DParams& p, int64_t out_pad_h,
                                                  int64_t out_pad_w) {
  const auto& ds = data.shape();
  const auto& ks = kernel.shape();
  const int64_t N = ds[0], C = ds[1], H = ds[2], W = ds[3];
  const int64_t O = ks[1], KH = ks[2], KW = ks[3];
  const int64_t OH = (H - 1) * p.stride_h - p.padding.top - p.padding.bottom +
                     p.dilation_h * (KH - 1) + out_pad_h + 1;
  const int64_t OW = (W - 1) * p.stride_w - p.padding.left - p.padding.right +
                     p.dilation_w * (KW - 1) + out_pad_w + 1;
  std::vector<double> acc(static_cast<size_t>(N * O * OH * OW), 0.0);
  const float* d = data.data_as<float>();
  const float* k = kernel.data_as<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x)
          for (int64_t o = 0; o < O; ++o)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t oy = y * p.stride_h - p.padding.top + kh * p.dilation_h;
                int64_t ox = x * p.stride_w - p.padding.left + kw * p.dilation_w;
                if (oy < 0 || oy >= OH || ox < 0 || ox >= OW) continue;
                acc[((n * O + o) * OH + oy) * OW + ox] +=
                    double(d[((n * C + c) * H + y) * W + x]) * k[((c * O + o) * KH + kh) * KW + kw];
              }
  runtime::NDArray out = runtime::NDArray::empty({N, O, OH, OW}, DataType::Float(32));
  for (size_t i = 0; i < acc.size(); ++i) out.data_as<float>()[i] = static_cast<float>(acc[i]);
  return out;
}

/// `conv` (an NCHW convolution output) with the fused epilogue applied in place:
/// relu?(conv + bias[channel] + residual), each part when `ep` asks for it.
inline void apply_ref_epilogue(runtime::NDArray& conv, const runtime::NDArray& bias,
                               const runtime::NDArray& residual, const EpilogueFlags& ep) {
  const auto& s = conv.shape();
  const int64_t O = s[1], hw = s[2] * s[3];
  float* r = conv.data_as<float>();
  for (int64_t i = 0; i < conv.numel(); ++i) {
    if (ep.bias) r[i] += bias.data_as<float>()[(i / hw) % O];
    if (ep.residual) r[i] += residual.data_as<float>()[i];
    if (ep.relu) r[i] = std::max(r[i], 0.0f);
  }
}

/// NCHW -> NCHW[bn]c.
inline runtime::NDArray to_nchwc(const runtime::NDArray& a, int64_t bn) {
  const auto& s = a.shape();
  const int64_t N = s[0], C = s[1], H = s[2], W = s[3];
  runtime::NDArray r = runtime::NDArray::empty({N, C / bn, H, W, bn}, DataType::Float(32));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t hw = 0; hw < H * W; ++hw)
        r.data_as<float>()[(((n * (C / bn) + c / bn) * H * W) + hw) * bn + c % bn] =
            a.data_as<float>()[(n * C + c) * H * W + hw];
  return r;
}

/// NCHW[bn]c -> NCHW.
inline runtime::NDArray from_nchwc(const runtime::NDArray& a) {
  const auto& s = a.shape();
  const int64_t N = s[0], CB = s[1], H = s[2], W = s[3], bn = s[4], C = CB * bn;
  runtime::NDArray r = runtime::NDArray::empty({N, C, H, W}, DataType::Float(32));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t hw = 0; hw < H * W; ++hw)
        r.data_as<float>()[(n * C + c) * H * W + hw] =
            a.data_as<float>()[(((n * CB + c / bn) * H * W) + hw) * bn + c % bn];
  return r;
}

/// OIHW -> [O/oc_bn, I/ic_bn, KH, KW, ic_bn, oc_bn].
inline runtime::NDArray pack_kernel_ref(const runtime::NDArray& k, int64_t ic_bn, int64_t oc_bn) {
  const auto& s = k.shape();
  const int64_t O = s[0], I = s[1], KH = s[2], KW = s[3];
  runtime::NDArray r =
      runtime::NDArray::empty({O / oc_bn, I / ic_bn, KH, KW, ic_bn, oc_bn}, DataType::Float(32));
  for (int64_t o = 0; o < O; ++o)
    for (int64_t i = 0; i < I; ++i)
      for (int64_t h = 0; h < KH; ++h)
        for (int64_t w = 0; w < KW; ++w)
          r.data_as<float>()
              [(((((o / oc_bn) * (I / ic_bn) + i / ic_bn) * KH + h) * KW + w) * ic_bn + i % ic_bn) *
                   oc_bn +
               o % oc_bn] = k.data_as<float>()[((o * I + i) * KH + h) * KW + w];
  return r;
}

/// Depthwise kernel [C, 1, KH, KW] -> [C/bn, 1, KH, KW, 1, bn].
inline runtime::NDArray pack_depthwise_ref(const runtime::NDArray& k, int64_t bn) {
  return pack_kernel_ref(k, 1, bn);
}

/// The fallback config followed by `n` distinct random points of the template's space
/// (fewer when the space is smaller), seeded.
inline std::vector<autotune::Config> sample_configs(const autotune::Template& t, int n,
                                                    uint64_t seed) {
  std::vector<autotune::Config> r = {autotune::Config::fallback()};
  autotune::ConfigSpace space = autotune::define_space(t);
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> seen;
  for (int tries = 0; static_cast<int>(r.size()) < n + 1 && tries < 20 * n; ++tries) {
    autotune::Config c = space.random(rng);
    uint64_t idx = space.indexable() ? c.index() : static_cast<uint64_t>(tries);
    bool dup = false;
    for (uint64_t s : seen) dup = dup || s == idx;
    if (dup) continue;
    seen.push_back(idx);
    r.push_back(c);
  }
  return r;
}

}  // namespace kiln::topi::testing
