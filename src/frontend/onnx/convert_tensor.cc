// ONNX operators that move, reshape or create tensors: Identity (a sequence or an optional
// passes through as well), Reshape (allowzero; an input without elements gives an empty
// constant), Flatten, Transpose, Concat, Squeeze, Unsqueeze, Slice, Split, Expand, Pad
// (constant, edge, reflect), Tile, DepthToSpace / SpaceToDepth, Shape and Size (read from the
// input's static type; refused on a data-dependent shape), Constant, ConstantOfShape, Range,
// EyeLike, Trilu and the window generators (Hann, Hamming, Blackman) as constants. Shape
// arithmetic on constant 1-D int64 tensors (Shape → Slice → Concat chains) is done on the host,
// so that an empty slice stays representable until it is concatenated away. A Slice, Split or
// Trilu result without elements becomes an empty constant.
#include "converter.h"

namespace kiln::frontend::onnx_import {

namespace {

std::vector<Entry> convert_reshape_plain(Converter& c) {
  Ints shape = c.opset < 5 ? c.attr_ints("shape", {}) : c.const_ints(1, "shape");
  return std::vector<Entry>{c.op("reshape", {c.in(0)}, {{"newshape", shape}})};
}

/// Reshape; with allowzero=1 a 0 in `shape` is a zero dimension (not "copy the input's"); an
/// input without elements gives an empty constant.
std::vector<Entry> convert_reshape(Converter& c) {
  graph::TensorType ty = c.type_in(0);
  if (c.attr_int("allowzero", 0) == 0) {
    if (ty.numel() != 0 || c.opset < 5) return convert_reshape_plain(c);
  }
  // allowzero=1: a 0 in `shape` is a zero dimension (not "copy the input's"); or an input
  // without elements, whose result is an empty constant.
  Ints shape = c.const_ints(1, "shape");
  bool allowzero = c.attr_int("allowzero", 0) != 0;
  int64_t known = 1, unknown = -1;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 0 && !allowzero) {
      KILN_USER_CHECK(k < ty.shape.size()) << c.where() << ": shape " << runtime::shape_str(shape)
                                           << " copies axis " << k << " of " << ty.str();
      shape[k] = ty.shape[k];
    }
    if (shape[k] == -1) {
      KILN_USER_CHECK(unknown < 0)
          << c.where() << ": shape " << runtime::shape_str(shape) << " has more than one -1";
      unknown = int64_t(k);
    } else {
      KILN_USER_CHECK(shape[k] >= 0)
          << c.where() << ": shape " << runtime::shape_str(shape) << " has a negative size";
      known = mul_saturating(known, shape[k]);  // an overflow fails the check below
    }
  }
  if (unknown >= 0) {
    KILN_USER_CHECK(known != 0) << c.where() << ": shape " << runtime::shape_str(shape)
                                << " has both a 0 and a -1 (allowzero=1)";
    shape[unknown] = ty.numel() / known;
  }
  KILN_USER_CHECK(numel_saturating(shape) == ty.numel())
      << c.where() << ": cannot reshape " << ty.str() << " to " << runtime::shape_str(shape);
  if (ty.numel() == 0) return std::vector<Entry>{empty_tensor(c, shape, ty.dtype)};
  return std::vector<Entry>{c.op("reshape", {c.in(0)}, {{"newshape", shape}})};
}

std::vector<Entry> convert_concat(Converter& c) {
  // Constant 1-D int64 parts (shape arithmetic) are joined on the host; empty parts vanish.
  bool host = true;
  for (size_t i = 0; i < c.node->inputs.size() && host; ++i) {
    const runtime::NDArray* a = c.const_input(i);
    host = a && a->ndim() == 1 && a->dtype() == DataType::Int(64);
  }
  if (host) {
    Ints all;
    for (size_t i = 0; i < c.node->inputs.size(); ++i) {
      Ints v = c.const_ints(i, "part");
      all.insert(all.end(), v.begin(), v.end());
    }
    return std::vector<Entry>{c.constant("concat", int64_array(all))};
  }
  std::vector<Entry> ins;
  for (size_t i = 0; i < c.node->inputs.size(); ++i) ins.push_back(c.in(i));
  return std::vector<Entry>{c.op("concat", ins, {{"axis", c.attr_int("axis", 0)}})};
}

std::vector<Entry> convert_shape(Converter& c) {
  Ints shape = c.type_in(0).shape;
  int64_t r = static_cast<int64_t>(shape.size());
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  return {c.constant("shape", int64_array(Ints(shape.begin() + start, shape.begin() + end)))};
}

std::vector<Entry> convert_size(Converter& c) {
  runtime::NDArray a = runtime::NDArray::empty({}, DataType::Int(64));
  a.data_as<int64_t>()[0] = c.type_in(0).numel();
  return {c.constant("size", a)};
}

std::vector<Entry> convert_constant(Converter& c) {
  auto it = c.node->attrs.find("value");
  runtime::NDArray v;
  if (it != c.node->attrs.end()) {
    const runtime::NDArray* t = std::get_if<runtime::NDArray>(&it->second);
    KILN_USER_CHECK(t) << c.where() << ": attribute 'value' must be a tensor";
    v = *t;
  } else if (c.has_attr("value_float")) {
    v = runtime::NDArray::empty({}, DataType::Float(32));
    v.data_as<float>()[0] = static_cast<float>(c.attr_float("value_float", 0));
  } else if (c.has_attr("value_int")) {
    v = runtime::NDArray::empty({}, DataType::Int(64));
    v.data_as<int64_t>()[0] = c.attr_int("value_int", 0);
  } else if (c.has_attr("value_ints")) {
    Ints xs = c.attr_ints("value_ints", {});
    v = runtime::NDArray::empty({static_cast<int64_t>(xs.size())}, DataType::Int(64));
    std::copy(xs.begin(), xs.end(), v.data_as<int64_t>());
  } else {
    c.unsupported_if(true, "this form of Constant");
  }
  return {c.constant("value", v)};
}

std::vector<Entry> convert_constant_of_shape(Converter& c) {
  Ints shape = c.const_ints(0, "shape");
  runtime::NDArray v = runtime::NDArray::empty({}, DataType::Float(32));
  v.data_as<float>()[0] = 0.0f;
  auto it = c.node->attrs.find("value");
  if (it != c.node->attrs.end()) {
    const runtime::NDArray* t = std::get_if<runtime::NDArray>(&it->second);
    KILN_USER_CHECK(t && t->numel() == 1)
        << c.where() << ": attribute 'value' must be a one-element tensor";
    v = *t;
  }
  for (int64_t d : shape) KILN_USER_CHECK(d >= 0) << c.where() << ": negative dimension";
  runtime::NDArray out = runtime::NDArray::empty(shape, v.dtype());
  size_t b = static_cast<size_t>(v.dtype().bytes());
  for (int64_t k = 0; k < out.numel(); ++k)
    std::memcpy(static_cast<char*>(out.data()) + k * b, v.data(), b);
  return {c.constant("value", out)};
}

std::vector<Entry> convert_slice_plain(Converter& c) {
  Ints starts, ends, axes, steps;
  if (c.opset < 10) {
    KILN_USER_CHECK(c.has_attr("starts") && c.has_attr("ends"))
        << c.where() << ": attributes 'starts' and 'ends' are required (Slice before opset 10)";
    starts = c.attr_ints("starts", {});
    ends = c.attr_ints("ends", {});
    axes = c.attr_ints("axes", {});
  } else {
    starts = c.const_ints(1, "starts");
    ends = c.const_ints(2, "ends");
    if (c.has_input(3)) axes = c.const_ints(3, "axes");
    if (c.has_input(4)) steps = c.const_ints(4, "steps");
  }
  int64_t r = static_cast<int64_t>(c.type_in(0).shape.size());
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  KILN_USER_CHECK(starts.size() == ends.size() && axes.size() == starts.size() &&
                  steps.size() == starts.size())
      << c.where() << ": starts, ends, axes and steps must have the same length";
  for (int64_t& a : axes) a = norm_axis(c, a, r);
  for (int64_t s : steps) c.unsupported_if(s == 0, "a zero step");
  if (r == 1 && starts.size() == 1 && c.const_input(0) &&
      c.const_input(0)->dtype() == DataType::Int(64)) {
    // Shape arithmetic (Shape -> Slice -> Concat): sliced on the host, so that an empty slice
    // (a prefix of length 0) stays representable until it is concatenated away.
    Ints v = c.const_ints(0, "data");
    int64_t n = static_cast<int64_t>(v.size()), st = steps[0];
    int64_t b = starts[0] < 0 ? starts[0] + n : starts[0], e = ends[0] < 0 ? ends[0] + n : ends[0];
    b = st > 0 ? std::clamp<int64_t>(b, 0, n)
               : std::clamp<int64_t>(b, 0, std::max<int64_t>(n - 1, 0));
    e = st > 0 ? std::clamp<int64_t>(e, 0, n) : std::clamp<int64_t>(e, -1, n - 1);
    Ints out;
    for (int64_t k = b; n > 0 && (st > 0 ? k < e : k > e); k += st) {
      out.push_back(v[k]);
      if (st > 0 ? e - k <= st : (k - e) + st <= 0) break;  // the next k would overflow or leave
    }
    return {c.constant("slice", int64_array(out))};
  }
  return {c.op("strided_slice", {c.in(0)},
               {{"begin", starts}, {"end", ends}, {"strides", steps}, {"axes", axes}})};
}

// --- results without elements

/// Output shape of ONNX Slice when the input type and all parameters are known.
std::optional<Ints> slice_shape(Converter& c) {
  std::optional<graph::TensorType> t = c.known_type(c.in(0));
  if (!t || !t->known() || c.opset < 10) return std::nullopt;
  for (size_t i = 1; i <= 4; ++i)
    if (c.has_input(i) && !c.const_input(i)) return std::nullopt;
  Ints starts = c.const_ints(1, "starts"), ends = c.const_ints(2, "ends"), axes, steps;
  if (c.has_input(3)) axes = c.const_ints(3, "axes");
  if (c.has_input(4)) steps = c.const_ints(4, "steps");
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(int64_t(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return std::nullopt;
  Ints shape = t->shape;
  int64_t r = int64_t(shape.size());
  for (size_t k = 0; k < starts.size(); ++k) {
    if (steps[k] == 0 || axes[k] < -r || axes[k] >= r) return std::nullopt;
    int64_t ax = axes[k] < 0 ? axes[k] + r : axes[k], d = shape[ax], st = steps[k];
    int64_t b = starts[k] < 0 ? starts[k] + d : starts[k], e = ends[k] < 0 ? ends[k] + d : ends[k];
    int64_t n = 0;  // ceil(span / |step|) without overflow for steps near ±2^63
    if (d == 0) {
      n = 0;
    } else if (st > 0) {
      b = std::clamp<int64_t>(b, 0, d), e = std::clamp<int64_t>(e, 0, d);
      n = e > b ? (e - b - 1) / st + 1 : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, d - 1), e = std::clamp<int64_t>(e, -1, d - 1);
      n = b > e ? (st == INT64_MIN ? 1 : (b - e - 1) / -st + 1) : 0;
    }
    shape[ax] = n;
  }
  return shape;
}

std::vector<Entry> convert_slice(Converter& c) {
  std::optional<Ints> shape = slice_shape(c);
  if (!shape || numel_saturating(*shape) != 0) return convert_slice_plain(c);
  return {empty_tensor(c, *shape, c.type_in(0).dtype)};
}

std::vector<Entry> convert_expand(Converter& c) {
  Ints shape = c.const_ints(1, "shape");
  // where(true, x, x) broadcasts x against `shape` (bidirectionally, as ONNX's Expand) for any
  // element type.
  Entry all = c.fill("ones", 1, DataType::Bool(), shape);
  return {c.op("where", {all, c.in(0), c.in(0)})};
}

std::vector<Entry> convert_range(Converter& c) {
  const runtime::NDArray* a = c.const_input(0);
  KILN_USER_CHECK(a && c.const_input(1) && c.const_input(2))
      << c.where() << ": start, limit and delta must be a constant; computed values are not "
      << "supported yet";
  DataType t = a->dtype();
  c.unsupported_if(!(t == DataType::Float(32) || t == DataType::Float(64) ||
                     t == DataType::Int(16) || t == DataType::Int(32) || t == DataType::Int(64)),
                   "Range of " + t.str());
  double start = c.const_scalar(0, "start"), limit = c.const_scalar(1, "limit"),
         delta = c.const_scalar(2, "delta");
  KILN_USER_CHECK(delta != 0) << c.where() << ": delta is 0";
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
  runtime::NDArray out = runtime::NDArray::empty({n}, t);
  for (int64_t k = 0; k < n; ++k) {
    if (t == DataType::Float(32))  // accumulate in the element type, as the reference does
      out.data_as<float>()[k] =
          static_cast<float>(start) + static_cast<float>(k) * static_cast<float>(delta);
    else
      c.set_elem(out, k, start + static_cast<double>(k) * delta);
  }
  return {c.constant("range", out)};
}

std::vector<Entry> convert_pad(Converter& c) {
  std::string mode = c.attr_string("mode", "constant");
  c.unsupported_if(mode != "constant" && mode != "edge" && mode != "reflect",
                   "Pad mode '" + mode + "'");
  Ints pads;
  double value = 0;
  int64_t r = static_cast<int64_t>(c.type_in(0).shape.size());
  Ints axes;
  if (c.opset < 11) {
    pads = c.attr_ints(c.opset < 2 ? "paddings" : "pads", {});
    value = c.attr_float("value", 0.0);
  } else {
    pads = c.const_ints(1, "pads");
    if (c.has_input(2)) value = c.const_scalar(2, "constant_value");
    if (c.has_input(3)) axes = c.const_ints(3, "axes");
  }
  if (axes.empty())
    for (int64_t d = 0; d < r; ++d) axes.push_back(d);
  KILN_USER_CHECK(pads.size() == 2 * axes.size())
      << c.where() << ": " << pads.size() << " pads for " << axes.size() << " axes";
  Ints before(r, 0), after(r, 0);
  size_t n = axes.size();
  for (size_t k = 0; k < n; ++k) {
    int64_t a = norm_axis(c, axes[k], r);
    c.unsupported_if(pads[k] < 0 || pads[k + n] < 0, "negative pads");
    before[a] = pads[k];
    after[a] = pads[k + n];
  }
  if (mode != "constant") {
    // edge / reflect: per padded axis, a take at constant source indices (clamped to the edge,
    // or mirrored without repeating the edge element).
    Ints shape = c.type_in(0).shape;
    Entry x = c.in(0);
    for (int64_t d = 0; d < r; ++d) {
      if (before[d] == 0 && after[d] == 0) continue;
      int64_t n = shape[d];
      c.unsupported_if(mode == "reflect" && (n < 2 || before[d] >= n || after[d] >= n),
                       "reflect padding as wide as the dimension");
      Ints src;
      for (int64_t o = -before[d]; o < n + after[d]; ++o) {
        int64_t i = o;
        if (mode == "edge") {
          i = std::clamp<int64_t>(o, 0, n - 1);
        } else {
          if (i < 0) i = -i;
          if (i >= n) i = 2 * (n - 1) - i;
        }
        src.push_back(i);
      }
      x = c.op("take", {x, c.constant("src", int64_array(src))}, {{"axis", d}});
    }
    return {x};
  }
  return {c.op("pad", {c.in(0)}, {{"pad_before", before}, {"pad_after", after}, {"value", value}})};
}

std::vector<Entry> convert_split_plain(Converter& c) {
  graph::TensorType t = c.type_in(0);
  int64_t r = static_cast<int64_t>(t.shape.size());
  int64_t axis = norm_axis(c, c.attr_int("axis", 0), r);
  int64_t dim = t.shape[axis];
  size_t n = c.node->outputs.size();
  Ints sizes;
  if (c.opset < 13 && c.has_attr("split"))
    sizes = c.attr_ints("split", {});
  else if (c.opset >= 13 && c.has_input(1))
    sizes = c.const_ints(1, "split");
  if (sizes.empty()) {
    if (c.has_attr("num_outputs")) n = static_cast<size_t>(c.attr_int("num_outputs", 1));
    int64_t chunk = (dim + static_cast<int64_t>(n) - 1) / static_cast<int64_t>(n);
    for (size_t k = 0; k < n; ++k) {
      int64_t b = chunk * static_cast<int64_t>(k);
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - b)));
    }
    c.unsupported_if(!c.has_attr("num_outputs") && dim % static_cast<int64_t>(n) != 0,
                     "an uneven Split without 'split'");
  }
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  KILN_USER_CHECK(total == dim && sizes.size() == n)
      << c.where() << ": split sizes do not add up to dimension " << dim << " with " << n
      << " outputs";
  std::vector<Entry> outs;
  int64_t b = 0;
  for (int64_t s : sizes) {
    outs.push_back(c.op("strided_slice", {c.in(0)},
                        {{"begin", Ints{b}}, {"end", Ints{b + s}}, {"axes", Ints{axis}}}));
    b += s;
  }
  return outs;
}

/// Split; pieces of size 0 are empty constants.
std::vector<Entry> convert_split(Converter& c) {
  graph::TensorType ty = c.type_in(0);
  int64_t r = int64_t(ty.shape.size());
  int64_t axis = norm_axis(c, c.attr_int("axis", 0), r), dim = ty.shape[axis];
  Ints sizes;
  if (c.opset < 13 && c.has_attr("split"))
    sizes = c.attr_ints("split", {});
  else if (c.opset >= 13 && c.has_input(1))
    sizes = c.const_ints(1, "split");
  if (sizes.empty() && dim == 0) sizes.assign(c.node->outputs.size(), 0);
  if (std::find(sizes.begin(), sizes.end(), 0) == sizes.end()) return convert_split_plain(c);
  int64_t sum = 0;
  for (int64_t s : sizes) sum += s;
  KILN_USER_CHECK(sum == dim && sizes.size() == c.node->outputs.size())
      << c.where() << ": split sizes do not add up to dimension " << dim << " with "
      << c.node->outputs.size() << " outputs";
  std::vector<Entry> outs;
  int64_t b = 0;
  for (int64_t s : sizes) {
    Ints shape = ty.shape;
    shape[axis] = s;
    outs.push_back(s == 0 ? empty_tensor(c, shape, ty.dtype)
                          : c.op("strided_slice", {c.in(0)},
                                 {{"begin", Ints{b}}, {"end", Ints{b + s}}, {"axes", Ints{axis}}}));
    b += s;
  }
  return outs;
}

std::vector<Entry> convert_trilu_plain(Converter& c) {
  graph::TensorType t = c.type_in(0);
  size_t r = t.shape.size();
  c.unsupported_if(r < 2, "Trilu of a tensor of rank < 2");
  int64_t k = c.has_input(1) ? static_cast<int64_t>(c.const_scalar(1, "k")) : 0;
  bool upper = c.attr_int("upper", 1) != 0;
  int64_t rows = t.shape[r - 2], cols = t.shape[r - 1];
  runtime::NDArray mask = runtime::NDArray::empty({rows, cols}, DataType::Bool());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      mask.data_as<uint8_t>()[i * cols + j] = upper ? (j - i >= k) : (j - i <= k);
  Entry m = c.constant("mask", mask);
  return {c.op("where", {m, c.in(0), c.fill("zero", 0, t.dtype)})};
}

std::vector<Entry> convert_trilu(Converter& c) {
  graph::TensorType ty = c.type_in(0);
  if (ty.numel() != 0) return convert_trilu_plain(c);
  return std::vector<Entry>{empty_tensor(c, ty.shape, ty.dtype)};
}

/// DepthToSpace (DCR or CRD order) and SpaceToDepth as reshape, transpose, reshape.
std::vector<Entry> convert_depth_space(Converter& c, bool to_space) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(t.shape.size() != 4, "a tensor that is not 4-D");
  int64_t bs = c.attr_int("blocksize", 0);
  KILN_USER_CHECK(bs > 0) << c.where() << ": blocksize must be positive";
  int64_t b = t.shape[0], ch = t.shape[1], h = t.shape[2], w = t.shape[3];
  Ints mid, perm, out;
  if (to_space) {
    KILN_USER_CHECK(ch % (bs * bs) == 0) << c.where() << ": channels not divisible by blocksize²";
    std::string mode = c.attr_string("mode", "DCR");
    c.unsupported_if(mode != "DCR" && mode != "CRD", "mode '" + mode + "'");
    if (mode == "DCR") {
      mid = {b, bs, bs, ch / (bs * bs), h, w};
      perm = {0, 3, 4, 1, 5, 2};
    } else {
      mid = {b, ch / (bs * bs), bs, bs, h, w};
      perm = {0, 1, 4, 2, 5, 3};
    }
    out = {b, ch / (bs * bs), h * bs, w * bs};
  } else {
    KILN_USER_CHECK(h % bs == 0 && w % bs == 0)
        << c.where() << ": spatial size not divisible by blocksize";
    mid = {b, ch, h / bs, bs, w / bs, bs};
    perm = {0, 3, 5, 1, 2, 4};
    out = {b, ch * bs * bs, h / bs, w / bs};
  }
  Entry x = c.op("reshape", {c.in(0)}, {{"newshape", mid}});
  x = c.op("transpose", {x}, {{"axes", perm}});
  return {c.op("reshape", {x}, {{"newshape", out}})};
}

/// EyeLike: a constant of the input's shape with ones on diagonal k.
std::vector<Entry> convert_eye_like(Converter& c) {
  graph::TensorType t = c.type_in(0);
  c.unsupported_if(t.shape.size() != 2, "EyeLike of a tensor that is not 2-D");
  DataType dt = c.has_attr("dtype") ? onnx_elem_type(c.attr_int("dtype", 1)) : t.dtype;
  c.unsupported_if(dt.is_void(), "EyeLike to this element type");
  int64_t k = c.attr_int("k", 0), rows = t.shape[0], cols = t.shape[1];
  runtime::NDArray a = runtime::NDArray::empty({rows, cols}, dt);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) c.set_elem(a, i * cols + j, j - i == k ? 1.0 : 0.0);
  return {c.constant("eye", a)};
}

std::vector<Entry> convert_tile(Converter& c) {
  graph::TensorType t = c.type_in(0);
  Ints reps = c.const_ints(1, "repeats");
  KILN_USER_CHECK(reps.size() == t.shape.size())
      << c.where() << ": " << reps.size() << " repeats for a rank-" << t.shape.size() << " input";
  Entry x = c.in(0);
  for (size_t d = 0; d < reps.size(); ++d) {
    KILN_USER_CHECK(reps[d] >= 1) << c.where() << ": repeats must be positive";
    if (reps[d] == 1) continue;
    x = c.op("concat", std::vector<Entry>(static_cast<size_t>(reps[d]), x),
             {{"axis", static_cast<int64_t>(d)}});
  }
  return {reps.empty() ? c.op("identity", {x}) : x};
}

// --- windows

std::vector<Entry> convert_window(Converter& c, const std::string& kind) {
  int64_t n = static_cast<int64_t>(c.const_scalar(0, "size"));
  KILN_USER_CHECK(n > 0) << c.where() << ": size must be positive";
  DataType dt = onnx_elem_type(c.attr_int("output_datatype", 1));
  c.unsupported_if(dt.is_void(), "this output_datatype");
  bool periodic = c.attr_int("periodic", 1) != 0;
  double denom = periodic ? static_cast<double>(n) : static_cast<double>(n - 1);
  runtime::NDArray a = runtime::NDArray::empty({n}, dt);
  const double pi = 3.14159265358979323846;
  for (int64_t k = 0; k < n; ++k) {
    double x = 2 * pi * static_cast<double>(k) / denom, v = 0;
    if (kind == "HannWindow") v = 0.5 - 0.5 * std::cos(x);
    if (kind == "HammingWindow") v = 25.0 / 46.0 - 21.0 / 46.0 * std::cos(x);
    if (kind == "BlackmanWindow") v = 0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2 * x);
    c.set_elem(a, k, v);
  }
  return {c.constant("window", a)};
}

}  // namespace

void register_tensor_converters(ConvertTable& t) {
  // Identity passes a sequence or an optional through as well as a tensor.
  t.add("Identity", [](Converter& c) {
    Entry v = c.value_in(0);
    if (Converter::is_sequence(v) || Converter::is_optional(v)) return std::vector<Entry>{v};
    return std::vector<Entry>{c.op("identity", {c.in(0)})};
  });
  t.add("Reshape", convert_reshape);
  t.add("Flatten", [](Converter& c) {
    return std::vector<Entry>{c.op("flatten", {c.in(0)}, {{"axis", c.attr_int("axis", 1)}})};
  });
  t.add("Transpose", [](Converter& c) {
    return std::vector<Entry>{c.op("transpose", {c.in(0)}, {{"axes", c.attr_ints("perm", {})}})};
  });
  t.add("Concat", convert_concat);
  t.add("Squeeze", [](Converter& c) {
    Ints axes = c.opset < 13 ? c.attr_ints("axes", {})
                             : (c.has_input(1) ? c.const_ints(1, "axes") : Ints{});
    return std::vector<Entry>{c.op("squeeze", {c.in(0)}, {{"axes", axes}})};
  });
  t.add("Unsqueeze", [](Converter& c) {
    Ints axes = c.opset < 13 ? c.attr_ints("axes", {}) : c.const_ints(1, "axes");
    return std::vector<Entry>{c.op("unsqueeze", {c.in(0)}, {{"axes", axes}})};
  });
  t.add("Shape", [](Converter& c) {
    check_static_shape(c, c.in(0));
    return convert_shape(c);
  });
  t.add("Size", [](Converter& c) {
    check_static_shape(c, c.in(0));
    return convert_size(c);
  });
  t.add("Constant", convert_constant);
  t.add("ConstantOfShape", convert_constant_of_shape);
  t.add("Slice", convert_slice);
  t.add("Split", convert_split);
  t.add("Expand", convert_expand);
  t.add("Range", convert_range);
  t.add("Pad", convert_pad);
  t.add("Tile", convert_tile);
  t.add("Trilu", convert_trilu);
  t.add("DepthToSpace", [](Converter& c) { return convert_depth_space(c, true); });
  t.add("SpaceToDepth", [](Converter& c) { return convert_depth_space(c, false); });
  t.add("EyeLike", convert_eye_like);
  for (const char* w : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    t.add(w, [k = std::string(w)](Converter& c) { return convert_window(c, k); });
}

}  // namespace kiln::frontend::onnx_import
