// ONNX recurrent layers (LSTM, GRU, RNN) unrolled over the (static) sequence into graph ops.
// The input projection of all time steps is one dense product X·Wᵀ + Wb ([S·B, G·H]); each step
// then adds its recurrent product H·Rᵀ + Rb, slices the gates, applies the activations and
// updates the state, so a layer of S steps becomes S small dense products plus element-wise
// ops (which fusion merges into few kernels). Directions forward, reverse and bidirectional;
// layout 0 ([S, B, ·]) and 1 ([B, S, ·]); initial states, peepholes (LSTM), clip, input_forget
// (LSTM), linear_before_reset (GRU). sequence_lens must be constant: shorter sequences of a
// forward layer keep their state and emit zeros past their end; varying lengths in a reverse
// direction are not supported. An LSTM without peepholes, clip or input_forget, with the default
// activations and full sequences (f32) emits one lstm_cell op per step instead (gates = the
// step's projection + H·Rᵀ, R and the projection in ONNX's gate order; the op's packed form
// reorders the gates when it packs R). Y is one concat of the steps' states per direction.
#include "converter.h"

namespace kiln::frontend::onnx_import {

namespace {

using graph::Entry;
using Ints = std::vector<int64_t>;

/// One activation of an RNN node (ONNX names), with its alpha / beta when it takes them.
struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

class RnnBuilder {
 public:
  RnnBuilder(Converter& c, const std::string& kind, int gates, std::vector<std::string> dflt_acts)
      : c_(c), kind_(kind), gates_(gates) {
    direction_ = c.attr_string("direction", "forward");
    KILN_USER_CHECK(direction_ == "forward" || direction_ == "reverse" ||
                    direction_ == "bidirectional")
        << c.where() << ": unknown direction '" << direction_ << "'";
    dirs_ = direction_ == "bidirectional" ? 2 : 1;
    layout_ = c.attr_int("layout", 0);
    c.unsupported_if(layout_ != 0 && layout_ != 1, "layout=" + std::to_string(layout_));
    graph::TensorType xt = c.type_in(0);
    dtype_ = xt.dtype;
    c.unsupported_if(!(dtype_ == DataType::Float(32) || dtype_ == DataType::Float(64)),
                     kind + " of " + dtype_.str());
    KILN_USER_CHECK(xt.shape.size() == 3) << c.where() << ": X must be 3-D, got " << xt.str();
    seq_ = xt.shape[layout_ == 0 ? 0 : 1];
    batch_ = xt.shape[layout_ == 0 ? 1 : 0];
    input_ = xt.shape[2];
    graph::TensorType wt = c.type_in(1);
    KILN_USER_CHECK(wt.shape.size() == 3 && wt.shape[0] == dirs_ && wt.shape[1] % gates == 0 &&
                    wt.shape[2] == input_)
        << c.where() << ": W must be [" << dirs_ << ", " << gates << "·hidden, " << input_
        << "], got " << wt.str();
    hidden_ = c.attr_int("hidden_size", wt.shape[1] / gates);
    KILN_USER_CHECK(wt.shape[1] == gates * hidden_)
        << c.where() << ": W's second dimension " << wt.shape[1] << " is not " << gates
        << " × hidden_size " << hidden_;
    clip_ = c.has_attr("clip") ? std::optional<double>(c.attr_float("clip", 0)) : std::nullopt;
    // Activations: `dflt_acts` per direction, or the node's list (one set per direction).
    std::vector<std::string> names;
    if (c.has_attr("activations")) {
      auto it = c.node->attrs.find("activations");
      const auto* v = std::get_if<std::vector<std::string>>(&it->second);
      KILN_USER_CHECK(v) << c.where() << ": attribute 'activations' must be a list of strings";
      names = *v;
    } else {
      for (int d = 0; d < dirs_; ++d) names.insert(names.end(), dflt_acts.begin(), dflt_acts.end());
    }
    KILN_USER_CHECK(names.size() == dflt_acts.size() * static_cast<size_t>(dirs_))
        << c.where() << ": " << names.size() << " activations, expected "
        << dflt_acts.size() * static_cast<size_t>(dirs_);
    std::vector<double> alphas, betas;
    if (c.has_attr("activation_alpha")) alphas = float_list("activation_alpha");
    if (c.has_attr("activation_beta")) betas = float_list("activation_beta");
    for (size_t k = 0; k < names.size(); ++k) {
      Activation a{names[k]};
      if (a.name == "LeakyRelu") a.alpha = 0.01;
      if (a.name == "HardSigmoid") a.alpha = 0.2, a.beta = 0.5;
      if (k < alphas.size()) a.alpha = alphas[k];
      if (k < betas.size()) a.beta = betas[k];
      acts_.push_back(a);
    }
    // Sequence lengths (constant), all seq_ when absent.
    lens_.assign(static_cast<size_t>(batch_), seq_);
    if (c.has_input(4)) {
      lens_ = c.const_ints(4, "sequence_lens");
      KILN_USER_CHECK(static_cast<int64_t>(lens_.size()) == batch_)
          << c.where() << ": sequence_lens has " << lens_.size() << " entries for batch " << batch_;
      for (int64_t l : lens_)
        KILN_USER_CHECK(l >= 0 && l <= seq_)
            << c.where() << ": sequence length " << l << " is outside [0, " << seq_ << "]";
    }
    for (int64_t l : lens_) full_ &= l == seq_;
    c.unsupported_if(!full_ && direction_ != "forward",
                     "sequence_lens shorter than the sequence in a reverse direction");
    // X as [S, B, I].
    x_ = c.in(0);
    if (layout_ == 1) x_ = c.op("transpose", {x_}, {{"axes", Ints{1, 0, 2}}});
  }

  int dirs() const { return dirs_; }
  int64_t hidden() const { return hidden_; }

  /// Slice [d] of a [dirs, ...] input, the leading dimension removed.
  Entry dir_slice(Entry e, int d) {
    Entry s =
        c_.op("strided_slice", {e}, {{"begin", Ints{d}}, {"end", Ints{d + 1}}, {"axes", Ints{0}}});
    return c_.op("squeeze", {s}, {{"axes", Ints{0}}});
  }
  /// Rows [g·H, (g+k)·H) of a 2-D tensor (gates g … g+k-1).
  Entry gate_rows(Entry e, int64_t g, int64_t k = 1, int64_t axis = 0) {
    return c_.op(
        "strided_slice", {e},
        {{"begin", Ints{g * hidden_}}, {"end", Ints{(g + k) * hidden_}}, {"axes", Ints{axis}}});
  }
  /// The bias of direction d: Wb and Rb ([G·H] each); zeros when B is absent.
  std::pair<Entry, Entry> biases(int d) {
    if (!c_.has_input(3)) {
      Entry z = c_.fill("zero_bias", 0, dtype_, {gates_ * hidden_});
      return {z, z};
    }
    Entry b = dir_slice(c_.in(3), d);
    return {gate_rows(b, 0, gates_), gate_rows(b, gates_, gates_)};
  }
  /// The initial state of direction d from input `idx` ([dirs, B, H]; [B, dirs, H] with
  /// layout 1), zeros when absent.
  Entry initial(size_t idx, int d) {
    if (!c_.has_input(idx)) return c_.fill("zero_state", 0, dtype_, {batch_, hidden_});
    Entry s = c_.in(idx);
    if (layout_ == 1) s = c_.op("transpose", {s}, {{"axes", Ints{1, 0, 2}}});
    return dir_slice(s, d);
  }
  /// Input projection of every step for direction d: [S, B, G·H] = X·Wᵀ + Wb.
  Entry project_input(int d, Entry wb) {
    Entry w = dir_slice(c_.in(1), d);
    Entry x2 = c_.op("reshape", {x_}, {{"newshape", Ints{seq_ * batch_, input_}}});
    Entry p = c_.op("add", {c_.op("dense", {x2, w}), wb});
    return c_.op("reshape", {p}, {{"newshape", Ints{seq_, batch_, gates_ * hidden_}}});
  }
  /// Step t of a projection [S, B, N] as [B, N].
  Entry step(Entry proj, int64_t t) {
    Entry s = c_.op("strided_slice", {proj},
                    {{"begin", Ints{t}}, {"end", Ints{t + 1}}, {"axes", Ints{0}}});
    return c_.op("squeeze", {s}, {{"axes", Ints{0}}});
  }
  /// Pre-activation clip (attribute `clip`).
  Entry clipped(Entry e) {
    if (!clip_) return e;
    return c_.op("clip", {e}, {{"a_min", -*clip_}, {"a_max", *clip_}});
  }
  /// Activation k of direction d applied to e.
  Entry act(int d, size_t k, Entry e) {
    const Activation& a = acts_.at(static_cast<size_t>(d) * acts_.size() / dirs_ + k);
    auto s = [&](const char* hint, double v) { return c_.fill(hint, v, dtype_); };
    if (a.name == "Sigmoid") return c_.op("sigmoid", {e});
    if (a.name == "Tanh") return c_.op("tanh", {e});
    if (a.name == "Relu") return c_.op("relu", {e});
    if (a.name == "LeakyRelu") return c_.op("leaky_relu", {e}, {{"alpha", a.alpha}});
    if (a.name == "HardSigmoid") {
      Entry y = c_.op("add", {c_.op("multiply", {e, s("alpha", a.alpha)}), s("beta", a.beta)});
      return c_.op("clip", {y}, {{"a_min", 0.0}, {"a_max", 1.0}});
    }
    if (a.name == "Affine")
      return c_.op("add", {c_.op("multiply", {e, s("alpha", a.alpha)}), s("beta", a.beta)});
    if (a.name == "ScaledTanh")
      return c_.op("multiply", {s("alpha", a.alpha),
                                c_.op("tanh", {c_.op("multiply", {e, s("beta", a.beta)})})});
    if (a.name == "Softsign")
      return c_.op("divide", {e, c_.op("add", {s("one", 1), c_.op("abs", {e})})});
    if (a.name == "Softplus") return c_.op("softplus", {e});
    c_.unsupported_if(true, "the " + kind_ + " activation '" + a.name + "'");
    return e;
  }
  /// Steps in processing order for direction d.
  std::vector<int64_t> order(int d) const {
    std::vector<int64_t> ts;
    bool rev = direction_ == "reverse" || (direction_ == "bidirectional" && d == 1);
    for (int64_t k = 0; k < seq_; ++k) ts.push_back(rev ? seq_ - 1 - k : k);
    return ts;
  }
  /// For short sequences: a [B, 1] bool constant, true where step t is inside the sequence.
  std::optional<Entry> live(int64_t t) {
    if (full_) return std::nullopt;
    runtime::NDArray m = runtime::NDArray::empty({batch_, 1}, DataType::Bool());
    for (int64_t b = 0; b < batch_; ++b) m.data_as<uint8_t>()[b] = t < lens_[b];
    return c_.constant("live", m);
  }
  /// Keeps `prev` where the step is past a sequence's end.
  Entry keep(std::optional<Entry> live, Entry next, Entry prev) {
    return live ? c_.op("where", {*live, next, prev}) : next;
  }
  /// The per-step outputs (in time order) of each direction as Y ([S, dirs, B, H], or
  /// [B, S, dirs, H] with layout 1), and a final state per direction as [dirs, B, H] (or
  /// [B, dirs, H]).
  Entry assemble_y(const std::vector<std::vector<Entry>>& per_dir) {
    // Per direction one concat of the steps' [B, H] along B (no per-step copy), viewed as
    // [S, 1, B, H].
    std::vector<Entry> dirs;
    for (const std::vector<Entry>& ys : per_dir) {
      Entry all = ys.size() == 1 ? ys[0] : c_.op("concat", ys, {{"axis", int64_t{0}}});
      dirs.push_back(c_.op("reshape", {all}, {{"newshape", Ints{seq_, 1, batch_, hidden_}}}));
    }
    Entry y = dirs.size() == 1 ? dirs[0] : c_.op("concat", dirs, {{"axis", int64_t{1}}});
    if (layout_ == 1) y = c_.op("transpose", {y}, {{"axes", Ints{2, 0, 1, 3}}});
    return y;
  }
  Entry assemble_state(const std::vector<Entry>& per_dir) {
    std::vector<Entry> parts;
    for (Entry s : per_dir) parts.push_back(c_.op("unsqueeze", {s}, {{"axes", Ints{0}}}));
    Entry y = parts.size() == 1 ? parts[0] : c_.op("concat", parts, {{"axis", int64_t{0}}});
    if (layout_ == 1) y = c_.op("transpose", {y}, {{"axes", Ints{1, 0, 2}}});
    return y;
  }
  /// Y's entry for step t: the state, zero past a sequence's end.
  Entry emitted(std::optional<Entry> live, Entry h) {
    if (!live) return h;
    return c_.op("where", {*live, h, c_.fill("zero", 0, dtype_)});
  }
  Entry fill(const char* hint, double v) { return c_.fill(hint, v, dtype_); }
  /// True when every activation is the kind's default (`dflt`, per direction).
  bool default_activations(const std::vector<std::string>& dflt) const {
    for (size_t k = 0; k < acts_.size(); ++k)
      if (acts_[k].name != dflt[k % dflt.size()]) return false;
    return true;
  }
  bool has_clip() const { return clip_.has_value(); }
  bool full_sequences() const { return full_; }
  DataType dtype() const { return dtype_; }

  Converter& c() { return c_; }
  int64_t seq() const { return seq_; }

 private:
  std::vector<double> float_list(const char* name) {
    auto it = c_.node->attrs.find(name);
    if (const auto* v = std::get_if<std::vector<double>>(&it->second)) return *v;
    KILN_ERROR << c_.where() << ": attribute '" << name << "' must be a list of floats";
  }

  Converter& c_;
  std::string kind_;
  int64_t gates_;
  std::string direction_;
  int dirs_ = 1;
  int64_t layout_ = 0;
  DataType dtype_;
  int64_t seq_ = 0, batch_ = 0, input_ = 0, hidden_ = 0;
  std::optional<double> clip_;
  std::vector<Activation> acts_;
  Ints lens_;
  bool full_ = true;
  Entry x_;
};

std::vector<Entry> convert_lstm(Converter& c) {
  // ONNX gate order: i, o, f, c.
  const std::vector<std::string> dflt{"Sigmoid", "Tanh", "Tanh"};
  RnnBuilder rb(c, "LSTM", 4, dflt);
  bool input_forget = c.attr_int("input_forget", 0) != 0;
  // The common case is one lstm_cell op per step (ops_rnn.cc: one kernel once R is packed).
  const bool cell_op = !c.has_input(7) && rb.default_activations(dflt) && !rb.has_clip() &&
                       !input_forget && rb.full_sequences() && rb.dtype() == DataType::Float(32);
  std::vector<std::vector<Entry>> ys(rb.dirs());
  std::vector<Entry> hs, cs;
  for (int d = 0; d < rb.dirs(); ++d) {
    auto [wb, rbias] = rb.biases(d);
    Entry proj = rb.project_input(d, c.op("add", {wb, rbias}));
    Entry r = rb.dir_slice(c.in(2), d);
    if (cell_op) {
      Entry h = rb.initial(5, d), cell = rb.initial(6, d);
      std::vector<Entry> out(static_cast<size_t>(rb.seq()));
      for (int64_t t : rb.order(d)) {
        Entry hc = c.op("lstm_cell", {rb.step(proj, t), h, cell, r});
        h = hc;
        cell = Entry{hc.node, 1};
        out[static_cast<size_t>(t)] = h;
      }
      ys[static_cast<size_t>(d)] = out;
      hs.push_back(h);
      cs.push_back(cell);
      continue;
    }
    std::optional<Entry> pi, po, pf;
    if (c.has_input(7)) {
      Entry p = rb.dir_slice(c.in(7), d);
      pi = rb.gate_rows(p, 0), po = rb.gate_rows(p, 1), pf = rb.gate_rows(p, 2);
    }
    Entry h = rb.initial(5, d), cell = rb.initial(6, d);
    std::vector<Entry> out(static_cast<size_t>(rb.seq()));
    for (int64_t t : rb.order(d)) {
      Entry g = c.op("add", {rb.step(proj, t), c.op("dense", {h, r})});
      Entry gi = rb.gate_rows(g, 0, 1, 1), go = rb.gate_rows(g, 1, 1, 1),
            gf = rb.gate_rows(g, 2, 1, 1), gc = rb.gate_rows(g, 3, 1, 1);
      if (pi) gi = c.op("add", {gi, c.op("multiply", {*pi, cell})});
      if (pf) gf = c.op("add", {gf, c.op("multiply", {*pf, cell})});
      Entry i = rb.act(d, 0, rb.clipped(gi));
      Entry f =
          input_forget ? c.op("subtract", {rb.fill("one", 1), i}) : rb.act(d, 0, rb.clipped(gf));
      Entry cand = rb.act(d, 1, rb.clipped(gc));
      Entry c_new = c.op("add", {c.op("multiply", {f, cell}), c.op("multiply", {i, cand})});
      if (po) go = c.op("add", {go, c.op("multiply", {*po, c_new})});
      Entry o = rb.act(d, 0, rb.clipped(go));
      Entry h_new = c.op("multiply", {o, rb.act(d, 2, c_new)});
      std::optional<Entry> live = rb.live(t);
      out[static_cast<size_t>(t)] = rb.emitted(live, h_new);
      h = rb.keep(live, h_new, h);
      cell = rb.keep(live, c_new, cell);
    }
    ys[static_cast<size_t>(d)] = out;
    hs.push_back(h);
    cs.push_back(cell);
  }
  return {rb.assemble_y(ys), rb.assemble_state(hs), rb.assemble_state(cs)};
}

std::vector<Entry> convert_gru(Converter& c) {
  // ONNX gate order: z, r, h.
  RnnBuilder rb(c, "GRU", 3, {"Sigmoid", "Tanh"});
  bool lbr = c.attr_int("linear_before_reset", 0) != 0;
  std::vector<std::vector<Entry>> ys(rb.dirs());
  std::vector<Entry> hs;
  for (int d = 0; d < rb.dirs(); ++d) {
    auto [wb, rbias] = rb.biases(d);
    Entry proj = rb.project_input(d, wb);
    Entry r = rb.dir_slice(c.in(2), d);
    Entry r_zr = rb.gate_rows(r, 0, 2), r_h = rb.gate_rows(r, 2);
    Entry rb_zr = rb.gate_rows(rbias, 0, 2), rb_h = rb.gate_rows(rbias, 2);
    Entry h = rb.initial(5, d);
    std::vector<Entry> out(static_cast<size_t>(rb.seq()));
    for (int64_t t : rb.order(d)) {
      Entry x = rb.step(proj, t);
      Entry zr =
          c.op("add", {c.op("add", {rb.gate_rows(x, 0, 2, 1), c.op("dense", {h, r_zr})}), rb_zr});
      Entry z = rb.act(d, 0, rb.clipped(rb.gate_rows(zr, 0, 1, 1)));
      Entry rg = rb.act(d, 0, rb.clipped(rb.gate_rows(zr, 1, 1, 1)));
      Entry hr = lbr ? c.op("multiply", {rg, c.op("add", {c.op("dense", {h, r_h}), rb_h})})
                     : c.op("add", {c.op("dense", {c.op("multiply", {rg, h}), r_h}), rb_h});
      Entry cand = rb.act(d, 1, rb.clipped(c.op("add", {rb.gate_rows(x, 2, 1, 1), hr})));
      // H = (1 - z) ⊙ cand + z ⊙ H
      Entry h_new = c.op("add", {c.op("multiply", {c.op("subtract", {rb.fill("one", 1), z}), cand}),
                                 c.op("multiply", {z, h})});
      std::optional<Entry> live = rb.live(t);
      out[static_cast<size_t>(t)] = rb.emitted(live, h_new);
      h = rb.keep(live, h_new, h);
    }
    ys[static_cast<size_t>(d)] = out;
    hs.push_back(h);
  }
  return {rb.assemble_y(ys), rb.assemble_state(hs)};
}

std::vector<Entry> convert_rnn(Converter& c) {
  RnnBuilder rb(c, "RNN", 1, {"Tanh"});
  std::vector<std::vector<Entry>> ys(rb.dirs());
  std::vector<Entry> hs;
  for (int d = 0; d < rb.dirs(); ++d) {
    auto [wb, rbias] = rb.biases(d);
    Entry proj = rb.project_input(d, c.op("add", {wb, rbias}));
    Entry r = rb.dir_slice(c.in(2), d);
    Entry h = rb.initial(5, d);
    std::vector<Entry> out(static_cast<size_t>(rb.seq()));
    for (int64_t t : rb.order(d)) {
      Entry pre = c.op("add", {rb.step(proj, t), c.op("dense", {h, r})});
      Entry h_new = rb.act(d, 0, rb.clipped(pre));
      std::optional<Entry> live = rb.live(t);
      out[static_cast<size_t>(t)] = rb.emitted(live, h_new);
      h = rb.keep(live, h_new, h);
    }
    ys[static_cast<size_t>(d)] = out;
    hs.push_back(h);
  }
  return {rb.assemble_y(ys), rb.assemble_state(hs)};
}

}  // namespace

void register_rnn_converters(ConvertTable& t) {
  t.add("LSTM", convert_lstm);
  t.add("GRU", convert_gru);
  t.add("RNN", convert_rnn);
}

}  // namespace kiln::frontend::onnx_import
