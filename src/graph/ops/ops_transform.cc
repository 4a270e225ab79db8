// Registration of the shape ops (reshape, flatten, transpose, concat, squeeze, unsqueeze,
// expand_dims, pad, strided_slice, take, layout_transform) and the reductions (sum, mean,
// max, min, prod). All use the generic type rule: the topi compute built on placeholders,
// whose errors name the op and the shapes. Three carry a blocked form for layout propagation
// (OpDef::blocked): concat on whole channel blocks, strided_slice keeping whole channel blocks,
// and the last reshape of ShuffleNet's channel shuffle (reshape, transpose, reshape), which
// becomes one channel_shuffle (ops_layout.cc).

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include "../layout_util.h"
#include "kiln/graph/op_registry.h"
#include "kiln/support/error.h"
#include "kiln/topi/reduction.h"
#include "kiln/topi/transform.h"

namespace kiln::graph {

namespace {

using Ints = std::vector<int64_t>;

std::vector<int> to_int(const Ints& v) { return std::vector<int>(v.begin(), v.end()); }
std::vector<te::Tensor> one(te::Tensor t) { return {std::move(t)}; }

OpDef injective(const std::string& name, std::vector<AttrSpec> attrs, FCompute f) {
  OpDef d;
  d.name = name;
  d.pattern = topi::OpPattern::kInjective;
  d.attrs = std::move(attrs);
  d.compute = std::move(f);
  return d;
}

using ReduceFn = te::Tensor (*)(const te::Tensor&, const std::vector<int>&, bool,
                                const std::string&);

/// Gather (take) with constant indices: every index must lie in [-n, n) of the axis' extent n.
/// Run-time indices are checked by the generated code (topi::take).
void check_take_indices(const Graph& g, const Node& n, const std::vector<TensorType>& in,
                        const std::string& where) {
  if (n.inputs.size() != 2 || in[0].shape.empty()) return;
  const Node& src = g.node(n.inputs[1].node);
  if (!src.is_constant() || !src.value.defined()) return;
  int64_t axis = n.attrs.get_int("axis");
  const int64_t rank = static_cast<int64_t>(in[0].shape.size());
  if (axis < -rank || axis >= rank) return;  // the type rule reports it
  if (axis < 0) axis += rank;
  const int64_t extent = in[0].shape[static_cast<size_t>(axis)];
  const runtime::NDArray& v = src.value;
  const DataType t = v.dtype();
  if (!(t.is_int() || t.is_uint()) || t.lanes() != 1) return;
  for (int64_t k = 0; k < v.numel(); ++k) {
    int64_t idx = 0;
    const char* p = static_cast<const char*>(v.data()) + k * t.bytes();
    switch (t.bits()) {
      case 8:
        idx =
            t.is_int() ? *reinterpret_cast<const int8_t*>(p) : *reinterpret_cast<const uint8_t*>(p);
        break;
      case 16:
        idx = t.is_int() ? *reinterpret_cast<const int16_t*>(p)
                         : *reinterpret_cast<const uint16_t*>(p);
        break;
      case 32:
        idx = t.is_int() ? *reinterpret_cast<const int32_t*>(p)
                         : *reinterpret_cast<const uint32_t*>(p);
        break;
      case 64: {
        idx = *reinterpret_cast<const int64_t*>(p);
        if (t.is_uint() && idx < 0) idx = std::numeric_limits<int64_t>::max();
        break;
      }
      default:
        return;
    }
    KILN_USER_CHECK(idx >= -extent && idx < extent)
        << where << ": index " << idx << " (element " << k << " of constant '" << src.name
        << "') is out of range for axis " << axis << " of extent " << extent << " (data "
        << in[0].str() << "); indices must lie in [" << -extent << ", " << extent - 1 << "]";
  }
}

using Block = std::function<int64_t(Entry)>;

/// Concat of 4-D tensors along any axis on the blocked layout of its inputs that holds the
/// most elements among those whose block divides every input's channels (along channels: whole
/// blocks, axis 1 of [N, C/b, H, W, b]; along another axis the same axis).
/// A concat whose axis has only unit extents outside it lays its inputs end to end: input k
/// starts at the bytes of inputs 0..k-1.
std::optional<std::vector<size_t>> concat_in_place(const std::vector<TensorType>& in,
                                                   const Attrs& a) {
  if (in.empty() || !in[0].known()) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(in[0].shape.size());
  int64_t axis = a.get_int("axis");
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  std::vector<size_t> offsets;
  size_t at = 0;
  for (const TensorType& t : in) {
    if (!t.known() || static_cast<int64_t>(t.shape.size()) != rank) return std::nullopt;
    for (int64_t d = 0; d < axis; ++d)
      if (t.shape[static_cast<size_t>(d)] != 1) return std::nullopt;
    offsets.push_back(at);
    at += static_cast<size_t>(t.numel()) * static_cast<size_t>(t.dtype.bytes());
  }
  return offsets;
}

/// A reshape-like op (reshape, flatten, squeeze, unsqueeze, expand_dims) only reinterprets
/// its input's row-major bytes: the input lies at offset 0 of the output.
std::optional<std::vector<size_t>> reinterpret_in_place(const std::vector<TensorType>& in,
                                                        const Attrs&) {
  if (in.size() != 1 || !in[0].known()) return std::nullopt;
  return std::vector<size_t>{0};
}

/// A strided_slice that keeps every element in order (each sliced axis from its start to its
/// end with stride 1, GhostNet's [:, :C] of a C-channel concat) is its input.
std::optional<std::vector<size_t>> slice_in_place(const std::vector<TensorType>& in,
                                                  const Attrs& a) {
  if (in.size() != 1 || !in[0].known()) return std::nullopt;
  const Ints& begin = a.get_ints("begin");
  const Ints& end = a.get_ints("end");
  const Ints& strides = a.get_ints("strides");
  const Ints& axes = a.get_ints("axes");
  const int64_t rank = static_cast<int64_t>(in[0].shape.size());
  for (size_t k = 0; k < begin.size(); ++k) {
    int64_t axis = k < axes.size() ? axes[k] : static_cast<int64_t>(k);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || k >= end.size()) return std::nullopt;
    const int64_t n = in[0].shape[size_t(axis)];
    int64_t b = begin[k] < 0 ? begin[k] + n : begin[k], e = end[k] < 0 ? end[k] + n : end[k];
    if ((k < strides.size() && strides[k] != 1) || std::max<int64_t>(b, 0) != 0 || e < n)
      return std::nullopt;
  }
  return std::vector<size_t>{0};
}

std::optional<BlockedForm> blocked_concat(const Graph& g, const Node& n, const Block& block) {
  int64_t axis = n.attrs.has("axis") ? n.attrs.get_int("axis") : 0;
  if (axis < 0) axis += 4;
  if (axis < 0 || axis > 3) return std::nullopt;
  std::map<int64_t, int64_t> held;  // block → elements
  for (const Entry& e : n.inputs) {
    if (g.type_of(e).shape.size() != 4) return std::nullopt;
    if (int64_t b = block(e)) held[b] += g.type_of(e).numel();
  }
  int64_t best = 0, most = -1;
  for (const auto& [b, count] : held) {
    bool divides = true;
    for (const Entry& e : n.inputs) divides = divides && g.type_of(e).shape[1] % b == 0;
    if (divides && count > most) {
      best = b;
      most = count;
    }
  }
  if (best == 0) return std::nullopt;
  Attrs a = n.attrs;
  a.set("axis", axis);
  return BlockedForm{n.op, a, n.inputs, best};
}

/// A strided_slice of a blocked 4-D tensor that keeps whole channel blocks (stride 1 along
/// channels, begin and end multiples of the block; a Split on channels is such slices), the
/// channel bounds in blocks; the other axes are sliced as they are.
std::optional<BlockedForm> blocked_slice(const Graph& g, const Node& n, const Block& block) {
  const int64_t b = block(n.inputs[0]);
  const TensorType& t = g.type_of(n.inputs[0]);
  if (b == 0 || t.shape.size() != 4) return std::nullopt;
  auto ints = [&](const char* name) { return n.attrs.has(name) ? n.attrs.get_ints(name) : Ints{}; };
  Ints begin = ints("begin"), end = ints("end");
  const Ints strides = ints("strides"), axes = ints("axes");
  if (begin.size() != end.size() || begin.size() > 4 ||
      (!axes.empty() && axes.size() != begin.size()) ||
      (!strides.empty() && strides.size() != begin.size()))
    return std::nullopt;  // the type rule reports it
  Ints new_axes;
  for (size_t j = 0; j < begin.size(); ++j) {
    int64_t ax = axes.empty() ? static_cast<int64_t>(j) : axes[j];
    if (ax < 0) ax += 4;
    if (ax < 0 || ax > 3) return std::nullopt;
    new_axes.push_back(ax);
    if (ax != 1) continue;
    const int64_t c = t.shape[1];
    if (!strides.empty() && strides[j] != 1) return std::nullopt;
    const int64_t bg = std::clamp<int64_t>(begin[j] < 0 ? begin[j] + c : begin[j], 0, c);
    const int64_t en = std::clamp<int64_t>(end[j] < 0 ? end[j] + c : end[j], 0, c);
    if (en <= bg || bg % b != 0 || en % b != 0) return std::nullopt;
    begin[j] = bg / b;
    end[j] = en / b;
  }
  Attrs a = n.attrs;
  a.set("begin", begin).set("end", end).set("axes", new_axes);
  return BlockedForm{n.op, a, n.inputs, b};
}

/// A pad of a blocked 4-D tensor that adds no channels (a 3-D convolution's depth padding
/// over [N·D, C, H, W]): the same pad, nothing added along the block's lanes.
std::optional<BlockedForm> blocked_pad(const Graph& g, const Node& n, const Block& block) {
  const int64_t b = block(n.inputs[0]);
  Ints before = n.attrs.get_ints("pad_before"), after = n.attrs.get_ints("pad_after");
  if (b == 0 || g.type_of(n.inputs[0]).shape.size() != 4 || before.size() != 4 ||
      after.size() != 4 || before[1] != 0 || after[1] != 0)
    return std::nullopt;
  before.push_back(0);
  after.push_back(0);
  Attrs a = n.attrs;
  a.set("pad_before", before).set("pad_after", after);
  return BlockedForm{n.op, a, n.inputs, b};
}

/// A take along a 4-D blocked tensor's batch, row or column axis with 1-D indices (a
/// separable Resize's taps: SegFormer's and FPN decoders upsample blocked conv outputs): the
/// same take along the same axis of [N, C/b, H, W, b].
std::optional<BlockedForm> blocked_take(const Graph& g, const Node& n, const Block& block) {
  const int64_t b = block(n.inputs[0]);
  int64_t axis = n.attrs.get_int("axis");
  if (axis < 0) axis += 4;
  if (b == 0 || g.type_of(n.inputs[0]).shape.size() != 4 ||
      g.type_of(n.inputs[1]).shape.size() != 1 || axis < 0 || axis > 3 || axis == 1)
    return std::nullopt;
  Attrs a = n.attrs;
  a.set("axis", axis);
  return BlockedForm{n.op, a, n.inputs, b};
}

/// The last reshape of ShuffleNet's channel shuffle of a blocked x — reshape x [N, C, H, W] to
/// [N, g, C/g, H, W], transpose (0, 2, 1, 3, 4), reshape to [N, C, H, W] — as one
/// channel_shuffle of x in x's layout (the two intermediates are left to dead-code elimination
/// when nothing else reads them).
std::optional<BlockedForm> blocked_shuffle(const Graph& g, const Node& n, const Block& block) {
  const Node& t = g.node(n.inputs[0].node);
  if (!t.is_op() || t.op != "transpose" || !t.attrs.has("axes") ||
      t.attrs.get_ints("axes") != Ints{0, 2, 1, 3, 4})
    return std::nullopt;
  const Node& r = g.node(t.inputs[0].node);
  if (!r.is_op() || r.op != "reshape") return std::nullopt;
  const Entry x = r.inputs[0];
  const Ints& xs = g.type_of(x).shape;
  const Ints& rs = r.outputs[0].shape;
  const int64_t b = block(x);
  if (b == 0 || xs != n.outputs[0].shape || xs.size() != 4 || rs.size() != 5 || rs[0] != xs[0] ||
      rs[1] * rs[2] != xs[1] || rs[3] != xs[2] || rs[4] != xs[3])
    return std::nullopt;
  Attrs a;
  a.set("groups", rs[1]).set("layout", detail::blocked_layout(b));
  return BlockedForm{"channel_shuffle", a, {x}, b};
}

/// A reduction with keepdims of a blocked 4-D tensor: the same reduction of [N, C/b, H, W, b],
/// over the block's lanes too when it reduces the channels; its result then carries no
/// channels ([N, 1, H', W', 1], the NCHW result's elements in order).
std::optional<BlockedForm> blocked_reduce(const Graph& g, const Node& n, const Block& block) {
  const int64_t b = block(n.inputs[0]);
  if (b == 0 || g.type_of(n.inputs[0]).shape.size() != 4 || n.attrs.get_int("keepdims") == 0)
    return std::nullopt;
  Ints axes = n.attrs.get_ints("axes");
  if (axes.empty()) axes = {0, 1, 2, 3};
  for (int64_t& a : axes) {
    if (a < 0) a += 4;
    if (a < 0 || a > 3) return std::nullopt;
  }
  const bool channels = std::count(axes.begin(), axes.end(), 1) > 0;
  if (channels) axes.push_back(4);
  std::sort(axes.begin(), axes.end());
  Attrs a = n.attrs;
  a.set("axes", axes);
  BlockedForm f{n.op, a, n.inputs, b};
  if (channels) {
    const Ints& o = n.outputs[0].shape;
    f.plain_shape = {o[0], 1, o[2], o[3], 1};
  }
  return f;
}

}  // namespace

void register_transform_ops(OpRegistry& r) {
  using In = const std::vector<te::Tensor>&;
  using A = const Attrs&;
  using N = const std::string&;
  OpDef reshape = injective(
      "reshape", {{"newshape", AttrKind::kInts, std::nullopt}},
      [](In in, A a, N n) { return one(topi::reshape(in[0], a.get_ints("newshape"), n)); });
  reshape.blocked = blocked_shuffle;
  reshape.in_place = reinterpret_in_place;
  reshape.reinterprets = true;
  r.add(reshape);
  OpDef flatten = injective("flatten", {{"axis", AttrKind::kInt, int64_t{1}}}, [](In in, A a, N n) {
    return one(topi::flatten(in[0], static_cast<int>(a.get_int("axis")), n));
  });
  flatten.in_place = reinterpret_in_place;
  flatten.reinterprets = true;
  r.add(flatten);
  r.add(injective("transpose", {{"axes", AttrKind::kInts, Ints{}}}, [](In in, A a, N n) {
    return one(topi::transpose(in[0], to_int(a.get_ints("axes")), n));
  }));
  OpDef concat = injective("concat", {{"axis", AttrKind::kInt, int64_t{0}}}, [](In in, A a, N n) {
    return one(topi::concat(in, static_cast<int>(a.get_int("axis")), n));
  });
  concat.max_inputs = -1;
  concat.blocked = blocked_concat;
  concat.in_place = concat_in_place;
  concat.joins = true;
  r.add(concat);
  OpDef squeeze = injective("squeeze", {{"axes", AttrKind::kInts, Ints{}}}, [](In in, A a, N n) {
    return one(topi::squeeze(in[0], to_int(a.get_ints("axes")), n));
  });
  squeeze.in_place = reinterpret_in_place;
  squeeze.reinterprets = true;
  r.add(squeeze);
  OpDef unsqueeze = injective(
      "unsqueeze", {{"axes", AttrKind::kInts, std::nullopt}},
      [](In in, A a, N n) { return one(topi::unsqueeze(in[0], to_int(a.get_ints("axes")), n)); });
  unsqueeze.in_place = reinterpret_in_place;
  unsqueeze.reinterprets = true;
  r.add(unsqueeze);
  OpDef expand_dims = injective(
      "expand_dims",
      {{"axis", AttrKind::kInt, std::nullopt}, {"num_newaxis", AttrKind::kInt, int64_t{1}}},
      [](In in, A a, N n) {
        return one(topi::expand_dims(in[0], static_cast<int>(a.get_int("axis")),
                                     static_cast<int>(a.get_int("num_newaxis")), n));
      });
  expand_dims.in_place = reinterpret_in_place;
  expand_dims.reinterprets = true;
  r.add(expand_dims);
  OpDef pad = injective("pad",
                        {{"pad_before", AttrKind::kInts, std::nullopt},
                         {"pad_after", AttrKind::kInts, std::nullopt},
                         {"value", AttrKind::kFloat, 0.0}},
                        [](In in, A a, N n) {
                          return one(topi::pad(in[0], a.get_ints("pad_before"),
                                               a.get_ints("pad_after"), a.get_float("value"), n));
                        });
  pad.blocked = blocked_pad;
  r.add(pad);
  OpDef slice = injective(
      "strided_slice",
      {{"begin", AttrKind::kInts, std::nullopt, /*wide=*/true},
       {"end", AttrKind::kInts, std::nullopt, /*wide=*/true},
       {"strides", AttrKind::kInts, Ints{}},
       {"axes", AttrKind::kInts, Ints{}}},
      [](In in, A a, N n) {
        return one(topi::strided_slice(in[0], a.get_ints("begin"), a.get_ints("end"),
                                       a.get_ints("strides"), to_int(a.get_ints("axes")), n));
      });
  slice.blocked = blocked_slice;
  slice.in_place = slice_in_place;
  r.add(slice);
  OpDef take = injective("take", {{"axis", AttrKind::kInt, int64_t{0}}}, [](In in, A a, N n) {
    return one(topi::take(in[0], in[1], static_cast<int>(a.get_int("axis")), n));
  });
  take.min_inputs = take.max_inputs = 2;
  take.check = check_take_indices;
  take.blocked = blocked_take;
  r.add(take);
  OpDef gather_elements =
      injective("gather_elements", {{"axis", AttrKind::kInt, int64_t{0}}}, [](In in, A a, N n) {
        return one(topi::gather_elements(in[0], in[1], static_cast<int>(a.get_int("axis")), n));
      });
  gather_elements.min_inputs = gather_elements.max_inputs = 2;
  gather_elements.check = check_take_indices;
  r.add(gather_elements);
  r.add(injective("layout_transform",
                  {{"src_layout", AttrKind::kString, std::nullopt},
                   {"dst_layout", AttrKind::kString, std::nullopt}},
                  [](In in, A a, N n) {
                    return one(topi::layout_transform(in[0], a.get_string("src_layout"),
                                                      a.get_string("dst_layout"), n));
                  }));

  struct R {
    const char* name;
    ReduceFn f;
  };
  const R reductions[] = {{"sum", topi::sum},
                          {"mean", topi::mean},
                          {"max", topi::max},
                          {"min", topi::min},
                          {"prod", topi::prod}};
  for (const R& red : reductions) {
    OpDef d;
    d.name = red.name;
    d.pattern = topi::OpPattern::kCommReduce;
    d.attrs = {{"axes", AttrKind::kInts, Ints{}}, {"keepdims", AttrKind::kInt, int64_t{0}}};
    ReduceFn f = red.f;
    d.compute = [f](In in, A a, N n) {
      return one(f(in[0], to_int(a.get_ints("axes")), a.get_int("keepdims") != 0, n));
    };
    d.blocked = blocked_reduce;
    r.add(d);
  }

  // cumsum(x; axis, exclusive, reverse): a scan along one axis (topi::cumsum).
  OpDef cs;
  cs.name = "cumsum";
  cs.pattern = topi::OpPattern::kOpaque;
  cs.attrs = {{"axis", AttrKind::kInt, std::nullopt},
              {"exclusive", AttrKind::kInt, int64_t{0}},
              {"reverse", AttrKind::kInt, int64_t{0}}};
  cs.compute = [](In in, A a, N n) {
    return one(topi::cumsum(in[0], static_cast<int>(a.get_int("axis")), a.get_int("exclusive") != 0,
                            a.get_int("reverse") != 0, n));
  };
  r.add(cs);
  // cumsum_sums: the same as a te reduction (GPU targets rewrite cumsum into it: strategy/gpu.cc).
  OpDef css = cs;
  css.name = "cumsum_sums";
  css.pattern = topi::OpPattern::kCommReduce;
  css.compute = [](In in, A a, N n) {
    return one(topi::cumsum_by_sum(in[0], static_cast<int>(a.get_int("axis")),
                                   a.get_int("exclusive") != 0, a.get_int("reverse") != 0, n));
  };
  r.add(css);
}

}  // namespace kiln::graph
