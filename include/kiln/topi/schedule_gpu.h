/// \file schedule_gpu.h
/// \brief The GPU schedule of any fused group that has no GPU template yet.
///
/// One GPU thread per output element: every injective stage that is not an output is inlined;
/// each output stage has its axes fused into one loop, split by the threads per block (at most
/// 256, and at most the target's max_threads_per_block), the outer part bound to blockIdx.x and
/// the inner to threadIdx.x; reduction loops run serially inside the thread. A reduction whose
/// result is not an output is computed at the thread loop of the output that reads it, into
/// the thread's registers, when that output reads it element for element (a conv's epilogue);
/// otherwise (softmax's row max and sum, a norm's mean, read by many threads each; or read by
/// two outputs) it is a kernel of its own, one thread per element, so nothing is recomputed.
/// Correct for any compute; speed comes from the templates that replace it op by op.
#pragma once

#include <vector>

#include "kiln/target/target.h"
#include "kiln/te/schedule.h"

namespace kiln::topi {

/// The GPU fallback schedule of a fused group's outputs (see the file comment). An extern stage
/// (hand-written loops) stays at the root and runs on one GPU thread (tir::bind_extern_stages).
/// A 0-d result (a full reduction) runs on one GPU thread. A user error naming the stage for a
/// symbolic shape.
te::Schedule schedule_gpu_fallback(const std::vector<te::Tensor>& outs, const Target& target);

/// Threads per side of the dense template's tiles (schedule_dense_gpu).
constexpr int64_t kGpuDenseTile = 16;

/// The GPU template of a dense group (topi::dense, with or without an injective epilogue):
/// 16x16 output tiles, one block each, one thread per output element; the reduction is split
/// by 16 and at each step the block copies its 16x16 tiles of x and W into shared memory
/// together (cooperative fetching: each thread one element of each), then every thread
/// accumulates its 16 products from shared memory. tir::storage_sync puts the barriers. Only
/// for M, N and K multiples of 16 (a tile's threads must all reach every barrier); a user error
/// naming the shapes otherwise (the strategy then takes the fallback).
te::Schedule schedule_dense_gpu(const std::vector<te::Tensor>& outs, const Target& target);

/// The GPU template of a conv2d_nchw group (groups = 1, with or without an injective epilogue;
/// the padding inlined): each block computes Fb output channels of an Hb x Wb tile of pixels,
/// each thread Fr (up to 4) channels of one pixel in registers (Fb, Hb, Wb, Fr divisors of the
/// output's sizes, at most 256 threads: no guard, so every thread reaches every barrier). The
/// reduction over input channels is split by up to 8; at each step the block copies the padded
/// input's and the weights' tiles of that step into shared memory together (cooperative
/// fetching: the copy dealt to the block's threads), then each thread accumulates from shared
/// memory. A user error naming the stage for a grouped convolution or a non-static shape.
te::Schedule schedule_conv2d_gpu(const std::vector<te::Tensor>& outs, const Target& target);

}  // namespace kiln::topi
