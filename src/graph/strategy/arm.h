/// \file arm.h
/// \brief What the CPU strategies do differently for the `arm` key (AArch64, 128-bit NEON).
///
/// The arm key shares the CPU templates (the "cpu" strategies): Target::vector_bits() = 128
/// gives them 4-lane float vectors, so the channel blocks of the NCHW[c]c layouts are at most
/// 4 wide, and Target::vector_registers() = 32 sizes their register tiles. What differs is the
/// narrowest block worth a blocked layout: on x86 a block under 8 channels is too narrow for the
/// AVX2/AVX-512 micro-kernel and the layer stays NCHW; on NEON a 4-channel block is one whole
/// vector, so convolutions and depthwise convolutions move to NCHW4c there.
#pragma once

#include <cstdint>

#include "kiln/target/target.h"

namespace kiln::graph {

/// The narrowest channel block for which conv2d and depthwise conv2d take a blocked layout:
/// 4 (one NEON vector) with the arm key, else 8.
inline int64_t min_channel_block(const Target& target) { return target.has_key("arm") ? 4 : 8; }

}  // namespace kiln::graph
