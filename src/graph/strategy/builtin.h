// Registration functions of the built-in strategies (strategy.h), one per file of
// src/graph/strategy/, called once by register_builtin_strategies.
#pragma once

#include <optional>

#include "kiln/graph/strategy.h"
#include "kiln/topi/conv2d.h"

namespace kiln::graph {

/// injective.generic, reduce.generic, opaque.generic (strategy.cc).
void register_pattern_implementations();
/// The CPU templates and their strategies (cpu.cc).
void register_cpu_strategies();
/// The integer products of quantized models on CPUs (cpu_qnn.cc).
void register_qnn_strategies();
/// The GPU templates and their strategies (gpu.cc); every other op takes fallback.gpu.
void register_gpu_strategies();

/// The logical workload of a conv2d node whose data is a float32 NCHW tensor and whose weights
/// are a float32 constant (any float32 tensor when `constant_weight` is false), else nothing.
std::optional<topi::Conv2DWorkload> conv2d_workload(const OpCall& call,
                                                    bool constant_weight = true);
/// M when each input channel has M output channels of its own (groups = in channels, out =
/// M·in; 1 is plain depthwise), else 0.
int64_t depthwise_multiplier(const topi::Conv2DWorkload& wl);

/// The workload conv2d_nchwc computes for `wl` when its output channels have no power-of-two
/// block of 8 or more: the channels padded to whole vector blocks (at most three quarters more
/// work for blocks under 8, a quarter for others), else nothing (`wl` itself runs, blocked or
/// NCHW). The layout hook and the tuning task both use it, so that
/// `kiln tune` tunes what runs.
std::optional<topi::Conv2DWorkload> padded_output_workload(const topi::Conv2DWorkload& wl,
                                                           const Target& target);

// Layout hooks (cpu_layout.cc, the transposed convolutions' in cpu_layout_transpose.cc): each
// rewrites the node for its implementation and records the implementation (and tuning task) on
// the node it emits; false when it does not apply.
bool alter_conv2d_nchwc(LayoutRewriter& rw);
bool alter_conv2d_winograd(LayoutRewriter& rw);
bool alter_depthwise_conv2d(LayoutRewriter& rw);
bool alter_conv2d_transpose_subpixel(LayoutRewriter& rw);
bool alter_conv2d_transpose_dilated(LayoutRewriter& rw);
bool alter_conv2d_transpose_depthwise(LayoutRewriter& rw);
// What the hooks share (cpu_layout.cc): float32 weights packed on the host, and the record of
// a conv2d_nchwc node.
/// OIHW → [O/oc, C/ic, KH, KW, ic, oc] (topi::pack_conv2d_weight).
runtime::NDArray pack_conv_weight(const runtime::NDArray& w, int64_t ic, int64_t oc);
/// [C, 1, KH, KW] → [C/bn, 1, KH, KW, 1, bn] (topi::pack_depthwise_weight).
runtime::NDArray pack_depthwise_weight(const runtime::NDArray& w, int64_t bn);
/// The record of a conv2d_nchwc node computing workload `wl`.
ImplChoice conv2d_nchwc_choice(const topi::Conv2DWorkload& wl, const Target& target);
/// dense(x, W [N, K]) (`transposed_weight` false) or matmul(x, B [K, N]) (true).
bool alter_dense(LayoutRewriter& rw, bool transposed_weight);
bool alter_lstm_cell(LayoutRewriter& rw);
/// A grouped conv2d (1 < groups, not depthwise) → conv2d_grouped_nchwc (cpu_layout_grouped.cc).
bool alter_conv2d_grouped(LayoutRewriter& rw);

}  // namespace kiln::graph
