/// \file model_zoo.h
/// \brief Built-in models, written with Kiln's own graph builder (no files, no downloads).
///
///   graph::Graph g = frontend::resnet18();          // [1, 3, 224, 224] → [1, 1000]
///   graph::CompiledModule m = graph::build_module(g, Target::host());
///
/// The weights are deterministic pseudo-random values (a function of `seed` only, identical on
/// every platform): convolutions and the classifier are Kaiming-uniform scaled so activations
/// stay of order one through the network, batch norms have non-trivial scale, shift, running
/// mean and running variance. The models are for demos, tests and benchmarks, not for
/// classifying real images.
#pragma once

#include <cstdint>

#include "kiln/graph/graph.h"

namespace kiln::frontend {

/// torchvision's ResNet-18 (NCHW, float32): conv 7x7/2 + batch norm + relu, max pool 3x3/2
/// (pad 1), four stages of two BasicBlocks (64, 128, 256, 512 channels; the first block of
/// stages 2-4 has stride 2 and a 1x1/2 conv + batch norm downsample), global average pool,
/// flatten, dense 1000 with bias. The input is "data" [batch, 3, image_size, image_size], the
/// output the logits [batch, 1000] of the node "fc". Node and constant names follow torchvision's
/// modules: "conv1", "bn1", "layer1.0.conv1", "layer1.0.downsample.0", "fc.weight", …
/// (a block's two relus are "layer1.0.relu" and "layer1.0.relu_1", its residual sum
/// "layer1.0.add"). Types are not inferred (run graph::infer_types or build_module).
/// `batch` must be positive and `image_size` at least 32 (a user error otherwise).
graph::Graph resnet18(int batch = 1, uint64_t seed = 0, int image_size = 224);

}  // namespace kiln::frontend
