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
