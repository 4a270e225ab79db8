// ONNX convolution and pooling: Conv, ConvTranspose, MaxPool (with its Indices output),
// AveragePool, GlobalAveragePool / GlobalMaxPool and MaxUnpool, over 1-D, 2-D and 3-D windows
// (global pools over any number of spatial axes).
// A 2-D Conv is the graph's conv2d; a 1-D one runs as conv2d over a unit height (so it gets
// conv2d's fast path); a 3-D one runs as one conv2d over its stacked depth taps
// (conv3d_as_conv2d; conv3d only when the input's shape is not known). ConvTranspose of 1-D and 2-D
// windows is conv2d_transpose (depthwise ones with groups; other groups as one transposed
// convolution per group, concatenated), of
// 3-D windows conv3d_transpose. Pools of 1-D and 2-D windows are max_pool2d / avg_pool2d (8-bit max
// pooling in float32, exact; padding wider than half the window made explicit); 3-D windows and
// MaxPool's Indices use max_pool_nd / avg_pool_nd / max_pool_nd_indices. auto_pad is resolved in
// one place (auto_pad_of, split_same_pad): SAME_* pads come from the input's inferred shape as
// ONNX defines them, the odd element at the end for SAME_UPPER and at the start for SAME_LOWER;
// ConvTranspose's output_shape is turned into pads and output padding the same way.
#include <algorithm>

#include "converter.h"

namespace kiln::frontend::onnx_import {

namespace {

std::string ints_text(const Ints& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// The auto_pad attribute of a Conv, ConvTranspose or pool node: NOTSET, VALID, SAME_UPPER or
/// SAME_LOWER (any other value is refused).
std::string auto_pad_of(const Converter& c) {
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  c.unsupported_if(auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
                       auto_pad != "SAME_LOWER",
                   "auto_pad=" + auto_pad);
  return auto_pad;
}

bool is_same(const std::string& auto_pad) {
  return auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
}

/// A total padding `total` of one axis split into {begin, end} as auto_pad says: evenly, the odd
/// element at the end for SAME_UPPER and at the start for SAME_LOWER (floor division, so that a
/// negative total — a ConvTranspose output_shape below the natural size — splits the same way).
std::pair<int64_t, int64_t> split_same_pad(int64_t total, const std::string& auto_pad) {
  int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
  int64_t begin = auto_pad == "SAME_UPPER" ? half : total - half;
  return {begin, total - begin};
}

/// Window attributes of a Conv / pool node with `sp` spatial axes; pads are begins then ends,
/// with auto_pad resolved.
struct Window {
  Ints kernel, strides, dilations, pads;
};

Window window_of(const Converter& c, size_t sp, const Ints& kernel) {
  Window w;
  w.kernel = c.attr_ints("kernel_shape", kernel);
  w.strides = c.attr_ints("strides", Ints(sp, 1));
  w.dilations = c.attr_ints("dilations", Ints(sp, 1));
  std::string auto_pad = auto_pad_of(c);
  w.pads = auto_pad == "VALID" ? Ints(2 * sp, 0) : c.attr_ints("pads", Ints(2 * sp, 0));
  KILN_USER_CHECK(w.kernel.size() == sp && w.strides.size() == sp && w.dilations.size() == sp &&
                  w.pads.size() == 2 * sp)
      << c.where() << ": kernel_shape " << ints_text(w.kernel) << ", strides "
      << ints_text(w.strides) << ", dilations " << ints_text(w.dilations) << " or pads "
      << ints_text(w.pads) << " of the wrong length for a " << sp << "-D window";
  if (is_same(auto_pad)) {
    // Output size ceil(in / stride).
    Ints shape = c.type_in(0).shape;
    KILN_USER_CHECK(shape.size() == sp + 2)
        << c.where() << ": input of rank " << shape.size() << " for a " << sp << "-D window";
    for (size_t d = 0; d < sp; ++d) {
      int64_t in = shape[2 + d], st = w.strides[d];
      int64_t out = (in + st - 1) / st;
      int64_t total =
          std::max<int64_t>(0, (out - 1) * st + (w.kernel[d] - 1) * w.dilations[d] + 1 - in);
      std::tie(w.pads[d], w.pads[d + sp]) = split_same_pad(total, auto_pad);
    }
  }
  return w;
}

/// A ConvTranspose's strides, dilations, output padding and pads (begins, then ends) over
/// kernel.size() spatial axes, with auto_pad and output_shape resolved.
struct TransposeWindow {
  Ints strides, dilations, output_padding, pads;
};

TransposeWindow transpose_window(Converter& c, const graph::TensorType& xt, const Ints& kernel) {
  const size_t sp = kernel.size();
  Ints strides = c.attr_ints("strides", Ints(sp, 1));
  Ints dil = c.attr_ints("dilations", Ints(sp, 1));
  Ints outpad = c.attr_ints("output_padding", Ints(sp, 0));
  Ints pads = c.attr_ints("pads", Ints(2 * sp, 0));
  KILN_USER_CHECK(strides.size() == sp && dil.size() == sp && outpad.size() == sp &&
                  pads.size() == 2 * sp)
      << c.where() << ": strides, dilations, output_padding or pads of the wrong length";
  std::string auto_pad = auto_pad_of(c);
  Ints out_shape = c.attr_ints("output_shape", {});
  if (!out_shape.empty() || is_same(auto_pad)) {
    // The total padding that gives the wanted size (the input's times the stride for SAME_*),
    // split as auto_pad says; a negative end is extra output padding.
    if (out_shape.size() == sp + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
    KILN_USER_CHECK(out_shape.empty() || out_shape.size() == sp)
        << c.where() << ": output_shape of " << out_shape.size() << " values for " << sp
        << " spatial axes";
    for (size_t d = 0; d < sp; ++d) {
      int64_t in = xt.shape[2 + d];
      int64_t want = out_shape.empty() ? in * strides[d] : out_shape[d];
      int64_t natural = strides[d] * (in - 1) + outpad[d] + (kernel[d] - 1) * dil[d] + 1;
      auto [begin, end] = split_same_pad(natural - want, auto_pad);
      c.unsupported_if(begin < 0, "an output_shape larger than the input allows at the start");
      if (end < 0) {
        outpad[d] -= end;
        end = 0;
      }
      pads[d] = begin;
      pads[d + sp] = end;
    }
  } else if (auto_pad == "VALID") {
    pads.assign(2 * sp, 0);
  }
  return {strides, dil, outpad, pads};
}

/// The number of spatial axes of a Conv / ConvTranspose node: from kernel_shape, else the
/// weight's or the input's rank; 0 when none is known.
size_t conv_spatial_rank(const Converter& c) {
  if (c.has_attr("kernel_shape")) return c.attr_ints("kernel_shape", {}).size();
  int r = c.rank_of(c.in(1));
  if (r < 0) r = c.rank_of(c.in(0));
  return r >= 2 ? static_cast<size_t>(r - 2) : 0;
}

void check_window_rank(const Converter& c, size_t sp) {
  c.unsupported_if(sp < 1 || sp > 3,
                   "a " + std::to_string(sp) + "-D window (only 1-D, 2-D and 3-D)");
}

Entry add_bias(Converter& c, Entry y, size_t rank) {
  if (!c.has_input(2)) return y;
  Ints shape(rank, 1);
  shape[1] = -1;
  return c.op("add", {y, c.op("reshape", {c.in(2)}, {{"newshape", shape}})});
}

/// A 3-D convolution as one 2-D convolution over the output depth slices (so that it gets
/// conv2d's blocked, register-tiled and Winograd schedules): the KD input slices each output
/// depth z reads (z·sd + kd·dd of the depth-padded input) are stacked with the channels,
///   T[n, z, kd, c, h, w] = pad(x)[n, c, z·sd + kd·dd, h, w],  T as [N·OD, KD·C, H, W],
/// with the weight [O, C, KD, KH, KW] transposed to [O, KD·C, KH, KW] (a constant: at compile
/// time), and the conv2d's [N·OD, O, OH, OW] goes back to [N, O, OD, OH, OW].
/// The input is first moved to depth-major [N, D, C, H, W] (for a batch of one, the 4-D
/// [D, C, H, W]) and padded, sliced and concatenated there: between two 3-D convolutions the
/// transposes then cancel (simplify moves them through the element-wise ops between), so
/// consecutive layers stay [N·D, C, H, W], the layout pass keeps them blocked, and stacking
/// copies whole channel blocks. Grouped convolutions stack (c, kd) instead, so that each
/// group's pairs stay contiguous, and read the weight [O, C/g, KD, KH, KW] as
/// [O, C/g·KD, KH, KW]. T holds KD times the input; the convolution does not change.
Entry conv3d_as_conv2d(Converter& c, const Ints& xs, const Ints& ws, const Window& w,
                       int64_t group) {
  const int64_t N = xs[0], C = xs[1], D = xs[2], H = xs[3], W = xs[4];
  const int64_t O = ws[0], KD = ws[2];
  const int64_t sd = w.strides[0], dd = w.dilations[0], pb = w.pads[0], pe = w.pads[3];
  const int64_t OD = (D + pb + pe - dd * (KD - 1) - 1) / sd + 1;
  KILN_USER_CHECK(OD >= 1 && C % group == 0 && ws[1] * group == C)
      << c.where() << ": Conv of input " << ints_text(xs) << " with weight " << ints_text(ws)
      << ", group " << group << " and depth padding " << pb << ", " << pe
      << " has no output depth or mismatched channels";
  // The input depth-major, padded along depth: [D', C, H, W] for one sample, else
  // [N, D', C, H, W]; depth on axis `da`. Slice kd: the D' positions output depths read
  // through tap kd.
  const int64_t da = N == 1 ? 0 : 1;
  auto depth_major = [&] {
    Entry x = c.op("transpose", {c.in(0)}, {{"axes", Ints{0, 2, 1, 3, 4}}});
    if (N == 1) x = c.op("reshape", {x}, {{"newshape", Ints{D, C, H, W}}});
    const size_t rank = N == 1 ? 4 : 5;
    if (pb > 0 || pe > 0) {
      Ints before(rank, 0), after(rank, 0);
      before[static_cast<size_t>(da)] = pb;
      after[static_cast<size_t>(da)] = pe;
      x = c.op("pad", {x}, {{"pad_before", before}, {"pad_after", after}});
    }
    return x;
  };
  auto depth_slice = [&](Entry x, int64_t kd) {
    const int64_t begin = kd * dd, end = begin + (OD - 1) * sd + 1;
    if (begin == 0 && end == D + pb + pe && sd == 1) return x;  // the whole depth
    return c.op(
        "strided_slice", {x},
        {{"begin", Ints{begin}}, {"end", Ints{end}}, {"strides", Ints{sd}}, {"axes", Ints{da}}});
  };
  auto out = [&](int64_t in, size_t a) {
    return (in + w.pads[a] + w.pads[a + 3] - w.dilations[a] * (ws[a + 2] - 1) - 1) / w.strides[a] +
           1;
  };
  const Attrs window{{"strides", Ints{w.strides[1], w.strides[2]}},
                     {"padding", Ints{w.pads[1], w.pads[2], w.pads[4], w.pads[5]}},
                     {"dilation", Ints{w.dilations[1], w.dilations[2]}}};
  if (group == C && C > 1 && ws[1] == 1 && KD > 1) {
    // Depthwise (X3D, MoViNet, CSN): the sum over the KD depth taps of depthwise 2-D
    // convolutions of the depth slices, each with its tap's [O, 1, KH, KW] kernel (cut from a
    // constant weight here), so each runs the blocked depthwise schedule (stacking the taps as
    // channels would make a grouped convolution of KD channels per group, which has none).
    const Entry x = depth_major();
    // A handle, not a pointer: adding nodes may move the graph's constants.
    std::optional<runtime::NDArray> wc;
    if (const runtime::NDArray* p = c.const_input(1)) wc = *p;
    const int64_t K = ws[3] * ws[4];
    Entry y;
    for (int64_t kd = 0; kd < KD; ++kd) {
      Entry sl = depth_slice(x, kd);
      if (N > 1) sl = c.op("reshape", {sl}, {{"newshape", Ints{N * OD, C, H, W}}});
      Entry k;
      if (wc && wc->dtype() == DataType::Float(32)) {
        runtime::NDArray tap = runtime::NDArray::empty({O, 1, ws[3], ws[4]}, wc->dtype());
        for (int64_t o = 0; o < O; ++o)
          std::copy_n(wc->data_as<float>() + (o * KD + kd) * K, K, tap.data_as<float>() + o * K);
        k = c.constant("depth_tap" + std::to_string(kd), std::move(tap));
      } else {
        k = c.op("strided_slice", {c.in(1)},
                 {{"begin", Ints{kd}}, {"end", Ints{kd + 1}}, {"axes", Ints{2}}});
        k = c.op("reshape", {k}, {{"newshape", Ints{O, 1, ws[3], ws[4]}}});
      }
      Attrs a = window;
      a.set("groups", C);
      Entry t = c.op("conv2d", {sl, k}, a);
      y = kd == 0 ? t : c.op("add", {y, t});
    }
    y = c.op("reshape", {y}, {{"newshape", Ints{N, OD, O, out(H, 1), out(W, 2)}}});
    return c.op("transpose", {y}, {{"axes", Ints{0, 2, 1, 3, 4}}});
  }
  Entry t;
  if (group == 1) {
    const Entry x = depth_major();
    std::vector<Entry> slices;
    for (int64_t kd = 0; kd < KD; ++kd) slices.push_back(depth_slice(x, kd));
    t = KD == 1 ? slices[0] : c.op("concat", slices, {{"axis", da + 1}});
  } else {
    Entry x = c.in(0);
    if (pb > 0 || pe > 0)
      x = c.op("pad", {x},
               {{"pad_before", Ints{0, 0, pb, 0, 0}}, {"pad_after", Ints{0, 0, pe, 0, 0}}});
    // Each slice [N, C, OD, H, W] gets a unit tap axis 3: [N, C, OD, KD, H, W] after the
    // concat, then [N, OD, C, KD, H, W].
    std::vector<Entry> slices;
    for (int64_t kd = 0; kd < KD; ++kd) {
      const int64_t begin = kd * dd, end = begin + (OD - 1) * sd + 1;
      Entry sl = c.op(
          "strided_slice", {x},
          {{"begin", Ints{begin}}, {"end", Ints{end}}, {"strides", Ints{sd}}, {"axes", Ints{2}}});
      slices.push_back(
          c.op("expand_dims", {sl}, {{"axis", int64_t{3}}, {"num_newaxis", int64_t{1}}}));
    }
    t = KD == 1 ? slices[0] : c.op("concat", slices, {{"axis", int64_t{3}}});
    t = c.op("transpose", {t}, {{"axes", Ints{0, 2, 1, 3, 4, 5}}});
  }
  t = c.op("reshape", {t}, {{"newshape", Ints{N * OD, C * KD, H, W}}});
  Entry k = c.in(1);
  if (group == 1 && KD > 1) k = c.op("transpose", {k}, {{"axes", Ints{0, 2, 1, 3, 4}}});
  k = c.op("reshape", {k}, {{"newshape", Ints{O, ws[1] * KD, ws[3], ws[4]}}});
  Attrs a = window;
  a.set("groups", group);
  Entry y = c.op("conv2d", {t, k}, a);
  y = c.op("reshape", {y}, {{"newshape", Ints{N, OD, O, out(H, 1), out(W, 2)}}});
  return c.op("transpose", {y}, {{"axes", Ints{0, 2, 1, 3, 4}}});
}

std::vector<Entry> convert_conv_nd(Converter& c, size_t sp) {
  Ints wshape = c.type_in(1).shape;
  KILN_USER_CHECK(wshape.size() == sp + 2)
      << c.where() << ": weight of shape " << ints_text(wshape) << " for a " << sp << "-D window";
  Window w = window_of(c, sp, Ints(wshape.begin() + 2, wshape.end()));
  KILN_USER_CHECK(Ints(wshape.begin() + 2, wshape.end()) == w.kernel)
      << c.where() << ": kernel_shape " << ints_text(w.kernel) << " does not match the weight "
      << ints_text(wshape);
  int64_t group = c.attr_int("group", 1);
  if (sp == 1) {
    // A unit height: conv2d over [N, C, 1, L] with an [O, C/g, 1, K] kernel.
    Entry x = c.op("unsqueeze", {c.in(0)}, {{"axes", Ints{2}}});
    Entry k = c.op("unsqueeze", {c.in(1)}, {{"axes", Ints{2}}});
    Entry y = c.op("conv2d", {x, k},
                   {{"strides", Ints{1, w.strides[0]}},
                    {"padding", Ints{0, w.pads[0], 0, w.pads[1]}},
                    {"dilation", Ints{1, w.dilations[0]}},
                    {"groups", group}});
    y = c.op("squeeze", {y}, {{"axes", Ints{2}}});
    return {add_bias(c, y, 3)};
  }
  Ints xshape = c.type_in(0).shape;
  const bool known = std::all_of(xshape.begin(), xshape.end(), [](int64_t d) { return d >= 0; });
  if (!known) {
    Entry y = c.op("conv3d", {c.in(0), c.in(1)},
                   {{"strides", w.strides},
                    {"padding", w.pads},
                    {"dilation", w.dilations},
                    {"groups", group}});
    return {add_bias(c, y, 5)};
  }
  return {add_bias(c, conv3d_as_conv2d(c, xshape, wshape, w, group), 5)};
}

/// A Conv over a 2-D window: conv2d.
std::vector<Entry> convert_conv_2d(Converter& c) {
  const runtime::NDArray* w = c.const_input(1);
  Ints kshape = w && w->ndim() == 4 ? Ints{w->shape()[2], w->shape()[3]} : Ints{};
  Window s = window_of(c, 2, kshape);
  Entry y = c.op("conv2d", {c.in(0), c.in(1)},
                 {{"strides", s.strides},
                  {"padding", s.pads},
                  {"dilation", s.dilations},
                  {"groups", c.attr_int("group", 1)}});
  if (c.has_input(2)) {
    Entry b = c.op("reshape", {c.in(2)}, {{"newshape", Ints{1, -1, 1, 1}}});
    y = c.op("add", {y, b});
  }
  return {y};
}

/// ConvTranspose over a 1-D or 2-D window: conv2d_transpose.
std::vector<Entry> convert_conv_transpose_2d(Converter& c) {
  graph::TensorType xt = c.type_in(0), wt = c.type_in(1);
  size_t r = xt.shape.size();
  c.unsupported_if(r != 3 && r != 4, "ConvTranspose of a " + std::to_string(r) + "-D input" +
                                         " (only 1-D and 2-D windows)");
  KILN_USER_CHECK(wt.shape.size() == r)
      << c.where() << ": weight " << wt.str() << " does not match input " << xt.str();
  size_t sp = r - 2;  // spatial dimensions
  int64_t group = c.attr_int("group", 1);
  KILN_USER_CHECK(group >= 1 && xt.shape[1] % group == 0 && wt.shape[0] == xt.shape[1])
      << c.where() << ": " << xt.shape[1] << " input channels, weight " << wt.str() << ", group "
      << group;
  Ints kernel(wt.shape.begin() + 2, wt.shape.end());
  auto [strides, dil, outpad, pads] = transpose_window(c, xt, kernel);
  Entry x = c.in(0), w = c.in(1);
  if (sp == 1) {
    // 1-D: a unit height.
    x = c.op("unsqueeze", {x}, {{"axes", Ints{2}}});
    w = c.op("unsqueeze", {w}, {{"axes", Ints{2}}});
    strides.insert(strides.begin(), 1);
    dil.insert(dil.begin(), 1);
    outpad.insert(outpad.begin(), 0);
    pads = {0, pads[0], 0, pads[1]};
  } else {
    pads = {pads[0], pads[1], pads[2], pads[3]};
  }
  Attrs a{{"strides", strides}, {"padding", pads}, {"dilation", dil}, {"output_padding", outpad}};
  Entry y;
  if (group == 1 || group == xt.shape[1]) {
    // A depthwise transposed convolution (learnable up-sampling) stays one node: its CPU
    // strategy computes the stride² phases as depthwise convolutions.
    a.set("groups", group);
    y = c.op("conv2d_transpose", {x, w}, a);
  } else {
    int64_t cg = xt.shape[1] / group;
    std::vector<Entry> parts;
    for (int64_t g = 0; g < group; ++g) {
      Entry xg = c.op("strided_slice", {x},
                      {{"begin", Ints{g * cg}}, {"end", Ints{(g + 1) * cg}}, {"axes", Ints{1}}});
      Entry wg = c.op("strided_slice", {w},
                      {{"begin", Ints{g * cg}}, {"end", Ints{(g + 1) * cg}}, {"axes", Ints{0}}});
      parts.push_back(c.op("conv2d_transpose", {xg, wg}, a));
    }
    y = c.op("concat", parts, {{"axis", int64_t{1}}});
  }
  if (sp == 1) y = c.op("squeeze", {y}, {{"axes", Ints{2}}});
  if (c.has_input(2)) {
    Ints bshape(r, 1);
    bshape[1] = -1;
    y = c.op("add", {y, c.op("reshape", {c.in(2)}, {{"newshape", bshape}})});
  }
  return {y};
}

/// ConvTranspose over a 3-D window (window attributes resolved by transpose_window, as for
/// 1-D / 2-D).
std::vector<Entry> convert_conv_transpose_3d(Converter& c) {
  graph::TensorType xt = c.type_in(0), wt = c.type_in(1);
  KILN_USER_CHECK(wt.shape.size() == 5)
      << c.where() << ": weight " << wt.str() << " does not match input " << xt.str();
  int64_t group = c.attr_int("group", 1);
  KILN_USER_CHECK(group >= 1 && xt.shape[1] % group == 0 && wt.shape[0] == xt.shape[1])
      << c.where() << ": " << xt.shape[1] << " input channels, weight " << wt.str() << ", group "
      << group;
  Ints kernel(wt.shape.begin() + 2, wt.shape.end());
  KILN_USER_CHECK(c.attr_ints("kernel_shape", kernel) == kernel)
      << c.where() << ": kernel_shape " << ints_text(c.attr_ints("kernel_shape", kernel))
      << " does not match the weight " << wt.str();
  auto [strides, dil, outpad, pads] = transpose_window(c, xt, kernel);
  const Ints& xs = xt.shape;
  const bool known = std::all_of(xs.begin(), xs.end(), [](int64_t d) { return d >= 0; });
  if (known && group == 1 && strides[0] == kernel[0] && dil[0] == 1 && pads[0] == 0 &&
      pads[3] == 0 && outpad[0] == 0) {
    // Depth taps that do not overlap (a 3-D UNet's 2x2x2 stride-2 upsampling): output depth
    // d·KD + kd is the 2-D transposed convolution of input depth d with the kernel's depth
    // slice kd. One conv2d_transpose over the depth-major [N·D, C, H, W] computes all KD slices
    // as KD·O output channels (the kernel [C, O, KD, KH, KW] read as [C, KD·O, KH, KW]), which
    // then land at their depths: it gets conv2d_transpose's sub-pixel, blocked schedules.
    const int64_t N = xs[0], C = xs[1], D = xs[2], KD = kernel[0], O = wt.shape[1];
    Entry x = c.op("transpose", {c.in(0)}, {{"axes", Ints{0, 2, 1, 3, 4}}});
    x = c.op("reshape", {x}, {{"newshape", Ints{N * D, C, xs[3], xs[4]}}});
    Entry k = c.op("transpose", {c.in(1)}, {{"axes", Ints{0, 2, 1, 3, 4}}});
    k = c.op("reshape", {k}, {{"newshape", Ints{C, KD * O, kernel[1], kernel[2]}}});
    Entry y = c.op("conv2d_transpose", {x, k},
                   {{"strides", Ints{strides[1], strides[2]}},
                    {"padding", Ints{pads[1], pads[2], pads[4], pads[5]}},
                    {"dilation", Ints{dil[1], dil[2]}},
                    {"output_padding", Ints{outpad[1], outpad[2]}}});
    auto out = [&](size_t a) {  // the output extent of spatial axis a
      return strides[a] * (xs[2 + a] - 1) + outpad[a] + (kernel[a] - 1) * dil[a] + 1 - pads[a] -
             pads[a + 3];
    };
    y = c.op("reshape", {y}, {{"newshape", Ints{N, D * KD, O, out(1), out(2)}}});
    y = c.op("transpose", {y}, {{"axes", Ints{0, 2, 1, 3, 4}}});
    return {add_bias(c, y, 5)};
  }
  Entry y = c.op("conv3d_transpose", {c.in(0), c.in(1)},
                 {{"strides", strides},
                  {"padding", pads},
                  {"dilation", dil},
                  {"output_padding", outpad},
                  {"groups", group}});
  return {add_bias(c, y, 5)};
}

std::vector<Entry> convert_pool_2d(Converter& c, const char* op);

/// pool2d's attributes for one window: a max pool takes the dilation, an average pool ONNX's
/// count_include_pad.
Attrs pool2d_attrs(const Converter& c, bool is_max, Ints kernel, Ints strides, Ints pads,
                   Ints dilation) {
  Attrs a{{"pool_size", std::move(kernel)},
          {"strides", std::move(strides)},
          {"padding", std::move(pads)},
          {"ceil_mode", c.attr_int("ceil_mode", 0)}};
  if (is_max)
    a.set("dilation", std::move(dilation));
  else
    a.set("count_include_pad", c.attr_int("count_include_pad", 0));
  return a;
}

/// True when a padding (pads[d] before and pads[d + sp] after axis d) is wider than half of the
/// axis' dilated window: pool2d takes at most half.
bool pads_wider_than_half(const Ints& kernel, const Ints& dilation, const Ints& pads) {
  const size_t sp = kernel.size();
  for (size_t d = 0; d < 2 * sp; ++d)
    if (pads[d] > ((kernel[d % sp] - 1) * dilation[d % sp] + 1) / 2) return true;
  return false;
}

/// Pooling: 1-D windows run as 2-D ones over a unit height.
std::vector<Entry> convert_pool(Converter& c, const char* op) {
  if (c.attr_ints("kernel_shape", {}).size() != 1) return convert_pool_2d(c, op);
  c.unsupported_if(c.attr_string("auto_pad", "NOTSET") != "NOTSET", "auto_pad of a 1-D pool");
  c.unsupported_if(c.node->outputs.size() > 1 && !c.node->outputs[1].empty(),
                   "MaxPool's Indices output");
  Ints k = c.attr_ints("kernel_shape", {}), st = c.attr_ints("strides", {1}),
       dl = c.attr_ints("dilations", {1}), p = c.attr_ints("pads", {0, 0});
  KILN_USER_CHECK(st.size() == 1 && dl.size() == 1 && p.size() == 2)
      << c.where() << ": strides, dilations or pads of the wrong length for a 1-D window";
  bool is_max = std::string(op) == "max_pool2d";
  c.unsupported_if(pads_wider_than_half(k, dl, p), "padding wider than half the pooling window");
  Attrs a = pool2d_attrs(c, is_max, {1, k[0]}, {1, st[0]}, {0, p[0], 0, p[1]}, {1, dl[0]});
  Entry x = c.op("unsqueeze", {c.in(0)}, {{"axes", Ints{2}}});
  return {c.op("squeeze", {c.op(op, {x}, a)}, {{"axes", Ints{2}}})};
}

std::vector<Entry> convert_pool_2d(Converter& c, const char* op) {
  c.unsupported_if(c.node->outputs.size() > 1 && !c.node->outputs[1].empty(),
                   "MaxPool's Indices output");
  Window s = window_of(c, 2, {});
  bool is_max = std::string(op) == "max_pool2d";
  Attrs a = pool2d_attrs(c, is_max, s.kernel, s.strides, s.pads, s.dilations);
  const bool wide = pads_wider_than_half(s.kernel, s.dilations, s.pads);
  Entry x = c.in(0);
  DataType xt = c.dtype_of(x);
  if (is_max && (xt == DataType::UInt(8) || xt == DataType::Int(8))) {
    // 8-bit max pooling in float32 (exact), converted back.
    c.unsupported_if(c.node->outputs.size() > 1, "MaxPool's Indices output");
    Entry f = c.op("cast", {x}, {{"dtype", std::string("float32")}});
    Entry y = c.op(op, {f}, a);
    c.unsupported_if(wide, "8-bit MaxPool with padding wider than half the window");
    return {c.op("cast", {y}, {{"dtype", xt.str()}})};
  }
  if (wide) {
    // Padding wider than half the window: pad explicitly with a value the pool ignores (the
    // lowest float for max; zero for an average that counts the padding), then pool unpadded.
    DataType t = c.type_in(0).dtype;
    c.unsupported_if(!t.is_float() || c.attr_int("ceil_mode", 0) != 0,
                     "padding wider than half the pooling window in this form");
    if (!is_max && c.attr_int("count_include_pad", 0) == 0) {
      // Average over the real elements only: the zero-padded sum-average divided by the
      // zero-padded average of ones (the fraction of the window inside the input).
      Attrs pa{{"pad_before", Ints{0, 0, s.pads[0], s.pads[1]}},
               {"pad_after", Ints{0, 0, s.pads[2], s.pads[3]}},
               {"value", 0.0}};
      a.set("padding", Ints{0, 0, 0, 0});
      a.set("count_include_pad", int64_t{1});
      Ints shape = c.type_in(0).shape;
      Entry ones = c.fill("ones", 1, t, {1, 1, shape[2], shape[3]});
      Entry num = c.op(op, {c.op("pad", {x}, pa)}, a);
      Entry den = c.op(op, {c.op("pad", {ones}, pa)}, a);
      return {c.op("divide", {num, den})};
    }
    double v = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
    x = c.op("pad", {x},
             {{"pad_before", Ints{0, 0, s.pads[0], s.pads[1]}},
              {"pad_after", Ints{0, 0, s.pads[2], s.pads[3]}},
              {"value", v}});
    a.set("padding", Ints{0, 0, 0, 0});
  }
  return {c.op(op, {x}, a)};
}

bool wants_indices(const Converter& c) {
  return c.node->outputs.size() > 1 && !c.node->outputs[1].empty();
}

/// A 3-D MaxPool / AveragePool of float32 as two 2-D pools (the window is separable: a max of
/// maxima; an average of averages, the divisor a product of per-axis counts also without the
/// padding): over (H, W) on [N·D, C, H, W], the layout a Conv3d's 2-D convolutions use, then
/// over D on [N, C, D, Ho·Wo]. nullopt where a pool2d cannot take an axis' window (padding wider
/// than half of it, a dilated average).
std::optional<Entry> pool_3d_as_2d(Converter& c, bool is_max, const Window& w) {
  const graph::TensorType t = c.type_in(0);
  if (t.dtype != DataType::Float(32) || t.shape.size() != 5 ||
      pads_wider_than_half(w.kernel, w.dilations, w.pads) ||
      (!is_max && w.dilations != Ints{1, 1, 1}))
    return std::nullopt;
  const char* op = is_max ? "max_pool2d" : "avg_pool2d";
  auto pool = [&](Entry x, Ints kernel, Ints strides, Ints pads, Ints dilation) {
    return c.op(op, {x}, pool2d_attrs(c, is_max, kernel, strides, pads, dilation));
  };
  const int64_t N = t.shape[0], C = t.shape[1], D = t.shape[2];
  Entry x = c.op("transpose", {c.in(0)}, {{"axes", Ints{0, 2, 1, 3, 4}}});
  x = c.op("reshape", {x}, {{"newshape", Ints{N * D, C, t.shape[3], t.shape[4]}}});
  x = pool(x, {w.kernel[1], w.kernel[2]}, {w.strides[1], w.strides[2]},
           {w.pads[1], w.pads[2], w.pads[4], w.pads[5]}, {w.dilations[1], w.dilations[2]});
  const std::optional<graph::TensorType> spatial = c.known_type(x);
  KILN_ICHECK(spatial) << c.where() << ": the spatial pool of a 3-D pool has no type";
  const Ints hw = spatial->shape;
  x = c.op("reshape", {x}, {{"newshape", Ints{N, D, C, hw[2], hw[3]}}});
  x = c.op("transpose", {x}, {{"axes", Ints{0, 2, 1, 3, 4}}});
  x = c.op("reshape", {x}, {{"newshape", Ints{N, C, D, hw[2] * hw[3]}}});
  x = pool(x, {w.kernel[0], 1}, {w.strides[0], 1}, {w.pads[0], 0, w.pads[3], 0},
           {w.dilations[0], 1});
  const std::optional<graph::TensorType> pooled = c.known_type(x);
  KILN_ICHECK(pooled) << c.where() << ": the depth pool of a 3-D pool has no type";
  return c.op("reshape", {x}, {{"newshape", Ints{N, C, pooled->shape[2], hw[2], hw[3]}}});
}

/// MaxPool / AveragePool over any window rank through max_pool_nd / avg_pool_nd, with MaxPool's
/// Indices; 3-D windows of float32 without Indices as two 2-D pools (pool_3d_as_2d).
std::vector<Entry> convert_pool_nd(Converter& c, bool is_max) {
  Ints k = c.attr_ints("kernel_shape", {});
  size_t sp = k.size();
  check_window_rank(c, sp);
  Window w = window_of(c, sp, k);
  if (sp == 3 && !(is_max && wants_indices(c)))
    if (std::optional<Entry> y = pool_3d_as_2d(c, is_max, w)) return {*y};
  graph::Attrs a{{"pool_size", w.kernel},
                 {"strides", w.strides},
                 {"padding", w.pads},
                 {"dilation", w.dilations},
                 {"ceil_mode", c.attr_int("ceil_mode", 0)}};
  if (!is_max) a.set("count_include_pad", c.attr_int("count_include_pad", 0));
  Entry x = c.in(0);
  DataType t = c.dtype_of(x);
  bool narrow = is_max && (t == DataType::UInt(8) || t == DataType::Int(8));
  c.unsupported_if(!t.is_void() && !t.is_float() && !narrow,
                   std::string(is_max ? "MaxPool" : "AveragePool") + " of " + t.str());
  // 8-bit max pooling runs in float32 (exact) and converts back.
  Entry xf = narrow ? c.op("cast", {x}, {{"dtype", std::string("float32")}}) : x;
  Entry y = c.op(is_max ? "max_pool_nd" : "avg_pool_nd", {xf}, a);
  if (narrow) y = c.op("cast", {y}, {{"dtype", t.str()}});
  std::vector<Entry> outs{y};
  if (is_max && c.node->outputs.size() > 1 && !c.node->outputs[1].empty()) {
    graph::Attrs ia = a;
    ia.set("storage_order", c.attr_int("storage_order", 0));
    outs.push_back(c.op("max_pool_nd_indices", {xf}, ia));
  }
  return outs;
}

/// MaxUnpool: out = zeros of the unpooled shape with X's values at the (constant) flat
/// indices I.
std::vector<Entry> convert_max_unpool(Converter& c) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(t.shape.size() != 4, "MaxUnpool of a tensor that is not 4-D");
  // Indices address the unpooled shape the window attributes give; an output_shape pads that
  // (the odd element at the end), as ONNX's reference does.
  Ints k = c.attr_ints("kernel_shape", {}), st = c.attr_ints("strides", {1, 1}),
       p = c.attr_ints("pads", {0, 0, 0, 0});
  KILN_USER_CHECK(k.size() == 2 && st.size() == 2 && p.size() == 4)
      << c.where() << ": kernel_shape, strides and pads must describe a 2-D window";
  Ints out = {t.shape[0], t.shape[1], (t.shape[2] - 1) * st[0] + k[0] - p[0] - p[2],
              (t.shape[3] - 1) * st[1] + k[1] - p[1] - p[3]};
  Ints want = c.has_input(2) ? c.const_ints(2, "output_shape") : out;
  KILN_USER_CHECK(want.size() == 4 && want[0] == out[0] && want[1] == out[1] && want[2] >= out[2] &&
                  want[3] >= out[3])
      << c.where() << ": output_shape must be 4-D and at least the unpooled shape";
  Ints idx = c.const_ints(1, "indices");
  int64_t total = out[0] * out[1] * out[2] * out[3], n = t.numel();
  KILN_USER_CHECK(static_cast<int64_t>(idx.size()) == n)
      << c.where() << ": " << idx.size() << " indices for " << n << " values";
  // Source of each output element: the last value whose index lands there, else none.
  Ints src(static_cast<size_t>(total), -1);
  for (int64_t k = 0; k < n; ++k) {
    KILN_USER_CHECK(idx[k] >= 0 && idx[k] < total)
        << c.where() << ": index " << idx[k] << " is outside the output of " << total
        << " elements";
    src[idx[k]] = k;
  }
  runtime::NDArray has = runtime::NDArray::empty({total}, DataType::Bool());
  Ints pick(static_cast<size_t>(total));
  for (int64_t k = 0; k < total; ++k) {
    has.data_as<uint8_t>()[k] = src[k] >= 0;
    pick[k] = std::max<int64_t>(src[k], 0);
  }
  Entry flat = c.op("reshape", {c.in(0)}, {{"newshape", Ints{n}}});
  Entry v = c.op("take", {flat, c.constant("pick", int64_array(pick))}, {{"axis", int64_t{0}}});
  Entry y = c.op("where", {c.constant("has", has), v, c.fill("zero", 0, t.dtype)});
  y = c.op("reshape", {y}, {{"newshape", out}});
  if (want != out) {
    Ints before{0, 0, (want[2] - out[2]) / 2, (want[3] - out[3]) / 2};
    Ints after{0, 0, want[2] - out[2] - before[2], want[3] - out[3] - before[3]};
    y = c.op("pad", {y}, {{"pad_before", before}, {"pad_after", after}, {"value", 0.0}});
  }
  return {y};
}

std::vector<Entry> convert_conv(Converter& c) {
  size_t sp = conv_spatial_rank(c);
  if (sp == 2 || sp == 0) return convert_conv_2d(c);
  check_window_rank(c, sp);
  return convert_conv_nd(c, sp);
}

std::vector<Entry> convert_conv_transpose(Converter& c) {
  size_t sp = conv_spatial_rank(c);
  if (sp > 3) check_window_rank(c, sp);
  if (sp != 3) return convert_conv_transpose_2d(c);
  return convert_conv_transpose_3d(c);
}

/// MaxPool / AveragePool: 1-D and 2-D windows as 2-D pools; 3-D windows and MaxPool's Indices
/// output through the n-D pools.
std::vector<Entry> convert_max_pool(Converter& c) {
  size_t sp = c.attr_ints("kernel_shape", {}).size();
  if ((sp == 1 || sp == 2) && !wants_indices(c)) return convert_pool(c, "max_pool2d");
  return convert_pool_nd(c, true);
}

std::vector<Entry> convert_avg_pool(Converter& c) {
  size_t sp = c.attr_ints("kernel_shape", {}).size();
  if (sp == 1 || sp == 2) return convert_pool(c, "avg_pool2d");
  return convert_pool_nd(c, false);
}

/// GlobalAveragePool / GlobalMaxPool over every spatial axis of an (N, C, D1, ..., Dn) input:
/// the 2-D global pool (and its blocked schedules) for 4-D inputs, a mean / max over axes
/// 2..n+1 kept as size 1 for 1-D, 3-D and higher (a video model's Conv3d features).
ConvertFn convert_global_pool(const char* pool2d, const char* reduce) {
  return [=](Converter& c) -> std::vector<Entry> {
    const int64_t r = static_cast<int64_t>(c.type_in(0).shape.size());
    KILN_USER_CHECK(r >= 3) << c.where() << ": the input must have rank 3 or more (N, C, spatial "
                            << "dimensions), got rank " << r;
    if (r == 4) return {c.op(pool2d, {c.in(0)})};
    Ints axes;
    for (int64_t a = 2; a < r; ++a) axes.push_back(a);
    return {c.op(reduce, {c.in(0)}, {{"axes", axes}, {"keepdims", int64_t{1}}})};
  };
}

}  // namespace

void register_conv_converters(ConvertTable& t) {
  t.add("Conv", convert_conv);
  t.add("ConvTranspose", convert_conv_transpose);
  t.add("MaxPool", convert_max_pool);
  t.add("AveragePool", convert_avg_pool);
  t.add("GlobalAveragePool", convert_global_pool("global_avg_pool2d", "mean"));
  t.add("GlobalMaxPool", convert_global_pool("global_max_pool2d", "max"));
  t.add("MaxUnpool", convert_max_unpool);
}

}  // namespace kiln::frontend::onnx_import
