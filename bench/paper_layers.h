// The TVM paper's operator workloads (Table 2), shared by the benchmarks: ResNet-18's conv2d
// layers C1–C12 and MobileNet's depthwise layers D1–D9, batch 1, padding kernel / 2.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/topi/conv2d.h"

namespace kiln::bench {

struct PaperLayer {
  std::string name;
  bool depthwise;
  int64_t hw, ic, oc, k, stride;
};

inline const std::vector<PaperLayer>& paper_layers() {
  static const std::vector<PaperLayer> l = {
      {"C1", false, 224, 3, 64, 7, 2},    {"C2", false, 56, 64, 64, 3, 1},
      {"C3", false, 56, 64, 64, 1, 1},    {"C4", false, 56, 64, 128, 3, 2},
      {"C5", false, 56, 64, 128, 1, 2},   {"C6", false, 28, 128, 128, 3, 1},
      {"C7", false, 28, 128, 256, 3, 2},  {"C8", false, 28, 128, 256, 1, 2},
      {"C9", false, 14, 256, 256, 3, 1},  {"C10", false, 14, 256, 512, 3, 2},
      {"C11", false, 14, 256, 512, 1, 2}, {"C12", false, 7, 512, 512, 3, 1},
      {"D1", true, 112, 32, 32, 3, 1},    {"D2", true, 112, 64, 64, 3, 2},
      {"D3", true, 56, 128, 128, 3, 1},   {"D4", true, 56, 128, 128, 3, 2},
      {"D5", true, 28, 256, 256, 3, 1},   {"D6", true, 28, 256, 256, 3, 2},
      {"D7", true, 14, 512, 512, 3, 1},   {"D8", true, 14, 512, 512, 3, 2},
      {"D9", true, 7, 1024, 1024, 3, 1}};
  return l;
}

/// MobileNet-v2's distinct 1x1 (pointwise) convolutions, batch 1, stride 1: M<stage>e is a
/// block's expansion (ReLU6 after it in the network), M<stage>p its projection. Not in the
/// paper; `kiln-bench-ops --set mobilenet` times them, since at 7x7 and 14x14 they decide
/// MobileNet-v2's end-to-end time.
inline const std::vector<PaperLayer>& mobilenet_pointwise_layers() {
  static const std::vector<PaperLayer> l = {
      {"M1p", false, 112, 32, 16, 1, 1},  {"M2e", false, 112, 16, 96, 1, 1},
      {"M2p", false, 56, 96, 24, 1, 1},   {"M3e", false, 56, 24, 144, 1, 1},
      {"M3p", false, 56, 144, 24, 1, 1},  {"M4p", false, 28, 144, 32, 1, 1},
      {"M5e", false, 28, 32, 192, 1, 1},  {"M5p", false, 28, 192, 32, 1, 1},
      {"M7p", false, 14, 192, 64, 1, 1},  {"M8e", false, 14, 64, 384, 1, 1},
      {"M8p", false, 14, 384, 64, 1, 1},  {"M11p", false, 14, 384, 96, 1, 1},
      {"M12e", false, 14, 96, 576, 1, 1}, {"M12p", false, 14, 576, 96, 1, 1},
      {"M14p", false, 7, 576, 160, 1, 1}, {"M15e", false, 7, 160, 960, 1, 1},
      {"M15p", false, 7, 960, 160, 1, 1}, {"M17p", false, 7, 960, 320, 1, 1},
      {"M18", false, 7, 320, 1280, 1, 1}};
  return l;
}

/// The layer as a conv2d workload (depthwise: groups = channels).
inline topi::Conv2DWorkload paper_workload(const PaperLayer& l) {
  topi::Conv2DWorkload w;
  w.in_channel = l.ic;
  w.height = w.width = l.hw;
  w.out_channel = l.oc;
  w.kernel_h = w.kernel_w = l.k;
  w.params.stride_h = w.params.stride_w = l.stride;
  w.params.padding = topi::Padding2D::all(l.k / 2);
  w.params.groups = l.depthwise ? l.ic : 1;
  return w;
}

}  // namespace kiln::bench
