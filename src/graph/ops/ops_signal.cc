// Graph ops: signal processing and sampling. dft and stft reduce against a float64 weight table
// that the importer passes as a constant input (topi::dft_weights); det is LU with partial
// pivoting; grid_sample and roi_align gather with interpolation. All are opaque (each is its
// own kernel); their type rules are the generic ones (the compute built on placeholders), whose
// errors come from topi and name the shapes.
#include "kiln/graph/op_registry.h"
#include "kiln/support/error.h"
#include "kiln/topi/sampling.h"
#include "kiln/topi/signal.h"

namespace kiln::graph {

namespace {

std::vector<te::Tensor> one(te::Tensor t) { return {std::move(t)}; }

topi::GridSampleMode grid_mode(const std::string& m) {
  if (m == "bilinear" || m == "linear") return topi::GridSampleMode::kBilinear;
  if (m == "nearest") return topi::GridSampleMode::kNearest;
  if (m == "bicubic" || m == "cubic") return topi::GridSampleMode::kBicubic;
  KILN_ERROR << "grid_sample: mode '" << m << "' is not supported (bilinear, nearest, bicubic)";
}

topi::GridSamplePadding grid_padding(const std::string& m) {
  if (m == "zeros") return topi::GridSamplePadding::kZeros;
  if (m == "border") return topi::GridSamplePadding::kBorder;
  if (m == "reflection") return topi::GridSamplePadding::kReflection;
  KILN_ERROR << "grid_sample: padding_mode '" << m
             << "' is not supported (zeros, border, reflection)";
}

topi::RoiAlignParams roi_params(const Attrs& a) {
  topi::RoiAlignParams p;
  p.output_height = a.get_int("output_height");
  p.output_width = a.get_int("output_width");
  p.sampling_ratio = a.get_int("sampling_ratio");
  p.spatial_scale = a.get_float("spatial_scale");
  p.half_pixel = a.get_int("half_pixel") != 0;
  const std::string& m = a.get_string("mode");
  KILN_USER_CHECK(m == "avg" || m == "max")
      << "roi_align: mode '" << m << "' is not supported (avg, max)";
  p.max_mode = m == "max";
  return p;
}

}  // namespace

void register_signal_ops(OpRegistry& r) {
  // dft: x [..., L, ..., P], weights float64 [P, Q, J, K] -> [..., K, ..., Q].
  OpDef dft;
  dft.name = "dft";
  dft.min_inputs = dft.max_inputs = 2;
  dft.pattern = topi::OpPattern::kOpaque;
  dft.attrs = {{"axis", AttrKind::kInt, std::nullopt}};
  dft.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::dft(in[0], in[1], a.get_int("axis"), n));
  };
  r.add(dft);

  // stft: signal [B, L, P], window [J], weights float64 [P, Q, J, K] -> [B, frames, K, Q].
  OpDef stft;
  stft.name = "stft";
  stft.min_inputs = stft.max_inputs = 3;
  stft.pattern = topi::OpPattern::kOpaque;
  stft.attrs = {{"frame_step", AttrKind::kInt, std::nullopt}};
  stft.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::stft(in[0], in[1], in[2], a.get_int("frame_step"), n));
  };
  r.add(stft);

  OpDef det;
  det.name = "det";
  det.pattern = topi::OpPattern::kOpaque;
  det.compute = [](const std::vector<te::Tensor>& in, const Attrs&, const std::string& n) {
    return one(topi::det(in[0], n));
  };
  r.add(det);

  // grid_sample: x [N, C, H, W], grid [N, Ho, Wo, 2] -> [N, C, Ho, Wo].
  OpDef gs;
  gs.name = "grid_sample";
  gs.min_inputs = gs.max_inputs = 2;
  gs.pattern = topi::OpPattern::kOpaque;
  gs.attrs = {{"mode", AttrKind::kString, std::string("bilinear")},
              {"padding_mode", AttrKind::kString, std::string("zeros")},
              {"align_corners", AttrKind::kInt, int64_t{0}}};
  gs.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::grid_sample(in[0], in[1], grid_mode(a.get_string("mode")),
                                 grid_padding(a.get_string("padding_mode")),
                                 a.get_int("align_corners") != 0, n));
  };
  r.add(gs);

  // roi_align: x [N, C, H, W], rois [R, 4], batch_indices [R] -> [R, C, oh, ow].
  OpDef ra;
  ra.name = "roi_align";
  ra.min_inputs = ra.max_inputs = 3;
  ra.pattern = topi::OpPattern::kOpaque;
  ra.attrs = {{"output_height", AttrKind::kInt, int64_t{1}},
              {"output_width", AttrKind::kInt, int64_t{1}},
              {"sampling_ratio", AttrKind::kInt, int64_t{1}},
              {"spatial_scale", AttrKind::kFloat, 1.0},
              {"half_pixel", AttrKind::kInt, int64_t{1}},
              {"mode", AttrKind::kString, std::string("avg")}};
  ra.compute = [](const std::vector<te::Tensor>& in, const Attrs& a, const std::string& n) {
    return one(topi::roi_align(in[0], in[1], in[2], roi_params(a), n));
  };
  // On a blocked map (a convolution's output) it pools blocked: each tap loads a vector of
  // channels, where over NCHW every channel gathers (64 rois x 256 channels of a 64x64 map:
  // 11 ms). The regions and batch indices are read as they are.
  ra.blocked = [](const Graph&, const Node& n,
                  const std::function<int64_t(Entry)>& block) -> std::optional<BlockedForm> {
    const int64_t b = block(n.inputs[0]);
    if (b == 0) return std::nullopt;
    return BlockedForm{n.op, n.attrs, n.inputs, b};
  };
  r.add(ra);
}

}  // namespace kiln::graph
