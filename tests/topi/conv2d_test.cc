// conv2d (NCHW and NCHW[x]c) against the naive reference of conv_ref.h: seeded random inputs,
// NaN-poisoned outputs, odd sizes, strides 1/2, symmetric and asymmetric padding, dilation,
// groups, 1x1 kernels; for each template the fallback config and a sample of random points of
// its space; the fused epilogue (bias, relu, residual); shape-rule errors by message.
#include "kiln/topi/conv2d.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "conv_ref.h"
#include "kiln/arith/analyzer.h"
#include "kiln/ir/functor.h"
#include "kiln/ir/printer.h"
#include "topi_test_util.h"

namespace kiln::topi {
namespace {

using autotune::Config;
using autotune::Instance;
using runtime::NDArray;
using namespace testing;  // NOLINT

/// Builds an instance and runs it on `inputs`; returns the (poisoned, then written) output.
NDArray run_instance(const Instance& inst, const std::vector<NDArray>& inputs) {
  runtime::Module m = build(inst.sch, inst.args, host_target(), "f");
  NDArray out = poisoned(shape_of(inst.args.back()), f32);
  std::vector<NDArray> all = inputs;
  all.push_back(out);
  call(m.get_function("f"), all);
  return out;
}

Conv2DWorkload wl(int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t kh, int64_t kw,
                  int64_t stride, Padding2D pad, int64_t dil = 1, int64_t groups = 1) {
  Conv2DWorkload r;
  r.batch = n;
  r.in_channel = c;
  r.height = h;
  r.width = w;
  r.out_channel = o;
  r.kernel_h = kh;
  r.kernel_w = kw;
  r.params.stride_h = r.params.stride_w = stride;
  r.params.padding = pad;
  r.params.dilation_h = r.params.dilation_w = dil;
  r.params.groups = groups;
  return r;
}

// ---------------------------------------------------------------------------------------------
// Shape rules and errors

TEST(Conv2DShape, OutputShapes) {
  Conv2DParams p;
  p.padding = Padding2D::all(1);
  EXPECT_EQ(conv2d_nchw_shape({1, 3, 7, 7}, {8, 3, 3, 3}, p), (Shape{1, 8, 7, 7}));
  p.stride_h = p.stride_w = 2;
  p.padding = Padding2D::from({0, 1, 2, 1}, "t");
  EXPECT_EQ(conv2d_nchw_shape({2, 4, 13, 13}, {6, 4, 3, 3}, p), (Shape{2, 6, 7, 7}));
  Conv2DParams g;
  g.groups = 2;
  g.dilation_h = g.dilation_w = 2;
  EXPECT_EQ(conv2d_nchw_shape({1, 4, 9, 9}, {6, 2, 3, 3}, g), (Shape{1, 6, 5, 5}));
  EXPECT_EQ(conv2d_nchwc_shape({1, 2, 7, 7, 8}, {4, 2, 1, 1, 8, 16}, Conv2DParams{}),
            (Shape{1, 4, 7, 7, 16}));
}

TEST(Conv2DShape, Errors) {
  Conv2DParams p;
  EXPECT_NE(error_of([&] {
              conv2d_nchw_shape({1, 3, 7, 7}, {8, 4, 3, 3}, p);
            })
                .find("conv2d_nchw: kernel [8, 4, 3, 3] has 4 input channels per group, but "
                      "data [1, 3, 7, 7] with groups 1 has 3"),
            std::string::npos);
  p.groups = 2;
  EXPECT_NE(error_of([&] {
              conv2d_nchw_shape({1, 3, 7, 7}, {8, 1, 3, 3}, p);
            }).find("conv2d_nchw: groups 2 must divide the 3 input channels"),
            std::string::npos);
  p.groups = 1;
  EXPECT_NE(error_of([&] {
              conv2d_nchw_shape({1, 3, 2, 2}, {8, 3, 3, 3}, p);
            }).find("does not fit the padded input: data [1, 3, 2, 2]"),
            std::string::npos);
  p.stride_h = 0;
  EXPECT_NE(error_of([&] {
              conv2d_nchw_shape({1, 3, 7, 7}, {8, 3, 3, 3}, p);
            }).find("conv2d_nchw: strides must be positive, got (0, 1)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              conv2d_nchw_shape({1, 3, 7}, {8, 3, 3, 3}, Conv2DParams{});
            }).find("expected data [N, C, H, W]"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              Padding2D::from({1, 2, 3}, "conv2d");
            }).find("conv2d: padding [1, 2, 3] must have 1 (all sides), 2 (h, w) or 4"),
            std::string::npos);
  Conv2DParams g;
  g.groups = 2;
  EXPECT_NE(error_of([&] {
              conv2d_nchwc_shape({1, 2, 7, 7, 8}, {4, 2, 1, 1, 8, 16}, g);
            }).find("conv2d_nchwc: groups 2 is not supported in the blocked layout"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              conv2d_nchwc_shape({1, 2, 7, 7, 8}, {4, 1, 1, 1, 16, 16}, {});
            })
                .find("conv2d_nchwc: data [1, 2, 7, 7, 8] (16 channels in blocks of 8) does not "
                      "match packed kernel"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              packed_conv2d_weight_shape({8, 6, 3, 3}, 4, 8);
            }).find("pack_conv2d_weight: blocks (ic 4, oc 8) must divide"),
            std::string::npos);
  EXPECT_EQ(kConv2DPattern, OpPattern::kOutEWiseFusable);
}

// ---------------------------------------------------------------------------------------------
// NCHW

class Conv2DNCHW : public ::testing::TestWithParam<Conv2DWorkload> {};

TEST_P(Conv2DNCHW, FallbackAndSampledConfigs) {
  const Conv2DWorkload w = GetParam();
  SCOPED_TRACE(w.str());
  NDArray data = random_array(w.data_shape(), f32, 1);
  NDArray kernel = random_array(w.kernel_shape(), f32, 2);
  NDArray want = ref_conv2d_nchw(data, kernel, w.params);
  autotune::Template t = conv2d_nchw_template(w, host_target());
  for (const Config& c : sample_configs(t, 3, 7)) {
    Instance inst = autotune::instantiate(t, c);
    SCOPED_TRACE(inst.config.str());
    EXPECT_TRUE(all_close(run_instance(inst, {data, kernel}), want, {1e-4, 1e-4}));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Conv2DNCHW,
    ::testing::Values(wl(1, 3, 7, 7, 8, 3, 3, 1, Padding2D::all(1)),
                      wl(2, 4, 13, 13, 6, 3, 3, 2, Padding2D::from({0, 1, 2, 1}, "t")),
                      wl(1, 4, 13, 11, 8, 3, 3, 1, Padding2D::all(2), /*dil=*/2),
                      wl(1, 4, 9, 9, 6, 3, 3, 1, Padding2D::all(1), 1, /*groups=*/2),
                      wl(1, 6, 13, 13, 6, 3, 3, 2, Padding2D::all(1), 1, /*groups=*/6),
                      wl(1, 5, 1, 1, 7, 1, 1, 1, Padding2D{})));

TEST(Conv2DNCHW, DefaultScheduleWithReluConsumer) {
  const Conv2DWorkload w = wl(1, 3, 13, 13, 5, 3, 3, 1, Padding2D::all(1));
  te::Tensor data = input(w.data_shape(), f32, "data");
  te::Tensor kernel = input(w.kernel_shape(), f32, "kernel");
  te::Tensor conv = conv2d_nchw(data, kernel, w.params);
  te::Tensor out = te::compute(
      conv->shape,
      [&](const std::vector<ir::Var>& i) {
        return ir::max(conv(std::vector<ir::Expr>(i.begin(), i.end())), ir::Expr(0.0f));
      },
      "relu", "elemwise,relu");
  NDArray d = random_array(w.data_shape(), f32, 3), k = random_array(w.kernel_shape(), f32, 4);
  NDArray ref = ref_conv2d_nchw(d, k, w.params);
  for (int64_t i = 0; i < ref.numel(); ++i)
    ref.data_as<float>()[i] = std::max(ref.data_as<float>()[i], 0.0f);
  te::Schedule s = schedule_conv2d_nchw({out}, host_target());
  EXPECT_TRUE(all_close(run(s, {data, kernel}, {out}, {d, k})[0], ref, {1e-4, 1e-4}));
}

// ---------------------------------------------------------------------------------------------
// NCHW[x]c

struct NCHWcCase {
  Conv2DWorkload w;
  int samples;
};

class Conv2DNCHWc : public ::testing::TestWithParam<NCHWcCase> {};

/// Runs `configs` of the NCHWc template (with the given epilogue) against the reference.
/// Template t's fallback config with the knobs in `knobs` set (a JSON object of knob values).
Config fallback_with(const autotune::Template& t, const nlohmann::json& knobs) {
  nlohmann::json j = autotune::instantiate(t, Config::fallback()).config.to_json();
  j.erase("index");
  for (const auto& [k, v] : knobs.items()) j["knobs"][k] = v;
  return Config::from_json(j, autotune::define_space(t));
}

void check_nchwc_configs(const Conv2DWorkload& w, const EpilogueFlags& ep,
                         const autotune::Template& t, const std::vector<Config>& configs) {
  SCOPED_TRACE(w.str());
  NDArray data = random_array(w.data_shape(), f32, 11);
  NDArray kernel = random_array(w.kernel_shape(), f32, 12);
  NDArray bias = random_array({w.out_channel}, f32, 13);
  NDArray residual = random_array(w.out_shape(), f32, 14);
  NDArray want = ref_conv2d_nchw(data, kernel, w.params);
  apply_ref_epilogue(want, bias, residual, ep);
  for (const Config& c : configs) {
    Instance inst = autotune::instantiate(t, c);
    SCOPED_TRACE(inst.config.str());
    Conv2DNCHWcLayout l = define_conv2d_nchwc_knobs(inst.config, w, host_target());
    std::vector<NDArray> ins = {to_nchwc(data, l.ic_bn), pack_kernel_ref(kernel, l.ic_bn, l.oc_bn)};
    if (ep.bias) ins.push_back(bias);
    if (ep.residual) ins.push_back(to_nchwc(residual, l.oc_bn));
    NDArray got = run_instance(inst, ins);
    EXPECT_EQ(got.shape(), l.out_shape);
    EXPECT_TRUE(all_close(from_nchwc(got), want, {1e-4, 1e-4}));
  }
}

/// Runs the fallback and `samples` sampled configs of the NCHWc template against the reference.
void check_nchwc(const Conv2DWorkload& w, const EpilogueFlags& ep, int samples, uint64_t seed) {
  autotune::Template t = conv2d_nchwc_template(w, ep, host_target());
  check_nchwc_configs(w, ep, t, sample_configs(t, samples, seed));
}

TEST_P(Conv2DNCHWc, FallbackAndSampledConfigs) {
  check_nchwc(GetParam().w, {}, GetParam().samples, 21);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Conv2DNCHWc,
    ::testing::Values(NCHWcCase{wl(1, 16, 7, 7, 32, 3, 3, 1, Padding2D::all(1)), 6},
                      NCHWcCase{wl(1, 8, 13, 13, 16, 3, 3, 2, Padding2D{1, 0, 2, 1}), 6},
                      NCHWcCase{wl(1, 3, 13, 13, 16, 7, 7, 2, Padding2D::all(3)), 4},
                      NCHWcCase{wl(1, 32, 7, 7, 32, 1, 1, 1, Padding2D{}), 6},
                      NCHWcCase{wl(1, 16, 13, 13, 16, 1, 1, 2, Padding2D{}), 4},
                      NCHWcCase{wl(1, 8, 11, 9, 16, 3, 3, 1, Padding2D::all(2), 2), 4},
                      NCHWcCase{wl(2, 4, 7, 7, 8, 3, 3, 1, Padding2D::all(1)), 3},
                      NCHWcCase{wl(1, 16, 1, 1, 16, 1, 1, 1, Padding2D{}), 2},
                      // 24 channels: three 8-wide chunks per tile with AVX2 (oc_reg 3).
                      NCHWcCase{wl(1, 16, 9, 8, 24, 3, 3, 1, Padding2D::all(1)), 4},
                      // 40 channels from 3 (a stem): five 8-wide chunks with AVX2 (oc_reg 5).
                      NCHWcCase{wl(1, 3, 13, 13, 40, 3, 3, 2, Padding2D::all(1)), 4}));

TEST(Conv2DNCHWcEpilogue, BiasReluResidual) {
  check_nchwc(wl(1, 16, 7, 7, 32, 3, 3, 1, Padding2D::all(1)), {true, true, true}, 3, 5);
}

TEST(Conv2DNCHWcEpilogue, BiasOnly1x1) {
  check_nchwc(wl(1, 16, 7, 7, 16, 1, 1, 1, Padding2D{}), {true, false, false}, 1, 6);
}

TEST(Conv2DNCHWc, TilesWithATailMatchTheReference) {
  // Register tiles whose width does not divide the map's (7 = 4 + 3, 5 + 2, 3 + 3 + 1): the tail
  // tile is a partitioned copy of the loop nest with fewer pixels. Both accumulator layouts
  // (one register tile, the task's whole output) and a bias + residual + relu epilogue.
  for (const Conv2DWorkload& w : {wl(1, 16, 7, 7, 32, 1, 1, 1, Padding2D{}),
                                  wl(1, 8, 9, 7, 24, 3, 3, 1, Padding2D::all(1))}) {
    const EpilogueFlags ep{true, true, true};
    autotune::Template t = conv2d_nchwc_template(w, ep, host_target());
    std::vector<Config> configs;
    for (int64_t width : {4, 5, 3}) {
      for (int64_t acc_outer : {0, 1}) {
        configs.push_back(fallback_with(
            t,
            {{"tile_ow", {-1, width}}, {"acc_outer", acc_outer}, {"oc_reg", width == 3 ? 3 : 2}}));
      }
    }
    check_nchwc_configs(w, ep, t, configs);
  }
}

TEST(Conv2DNCHWc, ASingleRowSharesItsColumnTilesBetweenThreads) {
  // A Conv1d (WaveNet's 1x1 over 300 steps, 32 -> 32 channels): one output row and two channel
  // chunks, so the parallel loop also takes the column tiles.
  const Conv2DWorkload w = wl(1, 32, 1, 300, 32, 1, 1, 1, Padding2D{});
  autotune::Template t = conv2d_nchwc_template(w, {true, false, true}, host_target());
  check_nchwc_configs(w, {true, false, true}, t, {Config::fallback()});
  Instance inst = autotune::instantiate(t, Config::fallback());
  const std::string text = tir::to_string(tir::lower(inst.sch, inst.args, "f"));
  const Conv2DNCHWcLayout l = define_conv2d_nchwc_knobs(inst.config, w, host_target());
  const int64_t tw = inst.config.split("tile_ow").size[1], reg = inst.config.knob("oc_reg");
  const int64_t tiles = (300 + tw - 1) / tw * ((32 / l.oc_bn + reg - 1) / reg);
  EXPECT_NE(text.find("parallel for (i.j.outer.fused.k.outer.fused.l.outer.fused, 0, " +
                      std::to_string(tiles) + ")"),
            std::string::npos)
      << inst.config.str() << "\n"
      << text;
}

TEST(Conv2DNCHWc, TasksShareTheirInputRowsWhenTheInputOutweighsTheKernel) {
  // The parallel loop runs over (batch, channel chunk, row tile). A 1x1 conv over a big map to
  // few channels (SegFormer's decoder: 21 MB of input, 1 MB of kernel) has neighbouring tasks
  // share their input rows (rows outer), which then serve every chunk from L2; a small map
  // under a big kernel (ResNet's deep layers) has them share their kernel slice (chunks
  // outer).
  const EpilogueFlags ep{true, false, true};
  for (const auto& [w, rows_outer] :
       {std::pair{wl(1, 256, 16, 96, 64, 1, 1, 1, Padding2D{}), true},
        std::pair{wl(1, 256, 8, 8, 64, 1, 1, 1, Padding2D{}), false}}) {
    autotune::Template t = conv2d_nchwc_template(w, ep, host_target());
    std::vector<Config> configs;
    for (int64_t reg : {1, 2}) {
      configs.push_back(fallback_with(t, {{"tile_oh", {-1, rows_outer ? 2 : 1}},
                                          {"tile_ow", {-1, 4}},
                                          {"acc_outer", 0},
                                          {"oc_reg", reg}}));
    }
    check_nchwc_configs(w, ep, t, configs);
    for (const Config& c : configs) {
      Instance inst = autotune::instantiate(t, c);
      const std::string text = tir::to_string(tir::lower(inst.sch, inst.args, "f"));
      EXPECT_NE(text.find(rows_outer ? "parallel for (i.k.outer.fused.j.outer.fused,"
                                     : "parallel for (i.j.outer.fused.k.outer.fused,"),
                std::string::npos)
          << w.str() << " " << inst.config.str() << "\n"
          << text;
    }
  }
}

/// The cache lines (64 bytes) of `buffer` that prefetches in the lowered `body` hint, over every
/// iteration of the loops around them, with the loops named in `fixed` held at their minimum.
class PrefetchedLines : public ir::IRVisitor {
 public:
  PrefetchedLines(std::string buffer, std::vector<std::string> fixed)
      : buffer_(std::move(buffer)), fixed_(std::move(fixed)) {}
  std::set<int64_t> lines;
  int64_t statements = 0;

 protected:
  using ir::IRVisitor::visit;
  void visit(const ir::For* op) override {
    loops_.push_back(op);
    ir::IRVisitor::visit(op);
    loops_.pop_back();
  }
  void visit(const ir::Evaluate* op) override {
    const ir::Call* c = op->value.as<ir::Call>();
    if (!c || c->name != ir::builtin::kPrefetch) return;
    const ir::Load* l = c->args[0].as<ir::Call>()->args[0].as<ir::Load>();
    ASSERT_NE(l, nullptr);
    if (l->buffer_var.name() != buffer_) return;
    ++statements;
    enumerate(0, {}, l->index);
  }

 private:
  void enumerate(size_t k, ir::VarMap<ir::Expr> values, const ir::Expr& index) {
    if (k == loops_.size()) {
      arith::Analyzer ana;
      auto v = as_const_int(ana.simplify(ir::substitute(index, values)));
      ASSERT_TRUE(v.has_value()) << ir::to_string(index);
      lines.insert(*v * 4 / 64);
      return;
    }
    const ir::For* f = loops_[k];
    const int64_t lo = *as_const_int(f->min), n = *as_const_int(f->extent);
    const bool fix = f->for_kind == ir::ForKind::kParallel ||
                     std::find(fixed_.begin(), fixed_.end(), f->loop_var.name()) != fixed_.end();
    for (int64_t i = lo; i < (fix ? lo + 1 : lo + n); ++i) {
      values[f->loop_var] = ir::Expr(static_cast<int32_t>(i));
      enumerate(k + 1, values, index);
    }
  }
  std::string buffer_;
  std::vector<std::string> fixed_;
  std::vector<const ir::For*> loops_;
};

TEST(Conv2DNCHWc, AccOuterPrefetchesEveryLineOfTheNextKernelBlock) {
  // With acc_outer the task's register tiles go through the kernel one ic_outer block at a
  // time (oc_reg streams of KH x KW x ic_bn x oc_bn floats); over the iterations of block 0 the
  // prefetches must name every cache line of block 1 of the task's streams. Schedules only.
  const Target avx512("llvm -mcpu=skylake-avx512");
  for (int64_t oc_reg : {4, 2}) {
    SCOPED_TRACE(oc_reg);
    const Conv2DWorkload w = wl(1, 64, 7, 7, 128, 3, 3, 1, Padding2D::all(1));
    autotune::Template t = conv2d_nchwc_template(w, {}, avx512);
    Instance inst = autotune::instantiate(
        t,
        fallback_with(
            t, {{"acc_outer", 1}, {"oc_reg", oc_reg}, {"tile_oh", {-1, 1}}, {"tile_ow", {-1, 7}}}));
    tir::PrimFunc f = tir::lower(inst.sch, inst.args, "f");
    PrefetchedLines v("packed_kernel", {"ic_outer"});
    v.visit_stmt(f->body);
    EXPECT_GT(v.statements, 0) << tir::to_string(f);
    // Kernel [8, 4, 3, 3, 16, 16]: stream s of task 0 is output block s; block 1 of it starts
    // at (s * 4 + 1) * 2304 floats, 144 lines long.
    int64_t missing = 0;
    for (int64_t st = 0; st < oc_reg; ++st)
      for (int64_t line = 0; line < 144; ++line)
        missing += v.lines.count(((st * 4 + 1) * 2304) / 16 + line) == 0;
    EXPECT_EQ(missing, 0) << tir::to_string(f);
  }
}

TEST(Conv2DNCHWc, WithSixteenRegistersTheChannelLoopStaysRolledAndNoKernelPrefetch) {
  // AVX2 (16 vector registers): the ic_outer loop of a register tile carries
  // pragma_no_unroll (LLVM's full unroll of a short reduction spilled and chained the FMAs),
  // and acc_outer tiles prefetch nothing (the addresses took the tile's registers). AVX-512
  // keeps both as they were. Schedules only.
  const Target avx2("llvm -mcpu=haswell"), avx512("llvm -mcpu=skylake-avx512");
  const Conv2DWorkload w = wl(1, 64, 7, 7, 128, 1, 1, 1, Padding2D::all(0));
  for (const Target* t : {&avx2, &avx512}) {
    SCOPED_TRACE(t->str());
    const bool sixteen = t == &avx2;
    autotune::Template tp = conv2d_nchwc_template(w, {}, *t);
    Instance tile = autotune::instantiate(tp, fallback_with(tp, {{"acc_outer", 0}}));
    const std::string text = tir::to_string(tir::lower(tile.sch, tile.args, "f"));
    EXPECT_EQ(text.find("attr [ic_outer] pragma_no_unroll") != std::string::npos, sixteen) << text;
    Instance acc = autotune::instantiate(
        tp, fallback_with(tp, {{"acc_outer", 1}, {"tile_oh", {-1, 1}}, {"tile_ow", {-1, 7}}}));
    PrefetchedLines v("packed_kernel", {"ic_outer"});
    v.visit_stmt(tir::lower(acc.sch, acc.args, "f")->body);
    EXPECT_EQ(v.statements > 0, !sixteen);
  }
}

TEST(Conv2DNCHWc, FiveChunkTilesWhereOnlyOneWouldDivideWithSixteenRegisters) {
  // 40 output channels are five 8-wide blocks: with AVX2 the fallback tile takes all five
  // (5 vectors x 2 pixels, 16 registers) rather than one vector x 12 pixels (a broadcast per
  // FMA); AVX-512's fallback rules are unchanged (its blocks of 40 channels are 8 wide too).
  // The generated code is checked against the reference in the Shapes suite above.
  const Target avx2("llvm -mcpu=haswell"), avx512("llvm -mcpu=skylake-avx512");
  for (const Conv2DWorkload& w : {wl(1, 3, 32, 32, 40, 3, 3, 2, Padding2D::all(1)),
                                  wl(1, 144, 14, 14, 40, 1, 1, 1, Padding2D{})}) {
    Config c = Config::fallback();
    define_conv2d_nchwc_knobs(c, w, avx2);
    EXPECT_EQ(c.knob("oc_reg"), 5);
    EXPECT_EQ(c.split("tile_ow").size[1] * c.split("tile_oh").size[1], 2);
    Config d = Config::fallback();
    define_conv2d_nchwc_knobs(d, w, avx512);
    EXPECT_NE(d.knob("oc_reg"), 5);
  }
  // 48 channels (six blocks): two or three chunks, as before.
  Config c = Config::fallback();
  define_conv2d_nchwc_knobs(c, wl(1, 144, 14, 14, 48, 1, 1, 1, Padding2D{}), avx2);
  EXPECT_NE(c.knob("oc_reg"), 5);
}

TEST(Conv2DNCHWc, AShiftedLastChunkTileWhereNoChunkCountDivides) {
  // 136 output channels are 17 blocks of 8, 56 are 7: no oc_reg above 1 divides them. The last
  // register tile of chunks is shifted inwards (it recomputes chunks of the tile before it), so
  // every oc_reg runs whole tiles; against the reference with a bias and a residual epilogue.
  // With AVX2 the fallback takes more than one chunk there (one vector x 14 pixels paid a
  // broadcast per FMA); AVX-512's fallback rules are unchanged.
  const EpilogueFlags ep{true, false, true};
  for (const Conv2DWorkload& w : {wl(1, 24, 7, 9, 136, 1, 1, 1, Padding2D{}),
                                  wl(1, 16, 9, 9, 56, 3, 3, 1, Padding2D::all(1))}) {
    autotune::Template t = conv2d_nchwc_template(w, ep, host_target());
    std::vector<Config> configs;
    for (int64_t oc_reg : {2, 3, 4, 5})
      configs.push_back(fallback_with(
          t, {{"oc_reg", oc_reg}, {"acc_outer", 0}, {"tile_oc", {-1, 8}}, {"tile_ow", {-1, 2}}}));
    configs.push_back(fallback_with(t, {{"oc_reg", 4}, {"acc_outer", 1}, {"tile_oc", {-1, 8}}}));
    check_nchwc_configs(w, ep, t, configs);
    Config c = Config::fallback();
    define_conv2d_nchwc_knobs(c, w, Target("llvm -mcpu=haswell"));
    EXPECT_GT(c.knob("oc_reg"), 1) << w.str();
    EXPECT_EQ(c.knob("acc_outer"), 0) << w.str();
  }
}

TEST(Conv2DNCHWc, ManyInputStreamsPrefetchTheNextColumnTile) {
  // A 1x1 conv over 256 channels (16 blocks of 16, or 32 of 8) on a 16x96 map, 1.5 MB of input:
  // each register tile reads as many input streams, more than the hardware prefetchers
  // follow, so at each ic_outer block the tile prefetches the next column tile's pixels of that
  // block (one line a pixel). Task 0 (row 0), every column tile but the last, every block.
  const Conv2DWorkload w = wl(1, 256, 16, 96, 32, 1, 1, 1, Padding2D{});
  const EpilogueFlags ep{true, false, true};
  autotune::Template t = conv2d_nchwc_template(w, ep, host_target());
  const Config c = fallback_with(
      t, {{"tile_oh", {-1, 1}}, {"tile_ow", {-1, 4}}, {"oc_reg", 1}, {"acc_outer", 0}});
  check_nchwc_configs(w, ep, t, {c});
  Instance inst = autotune::instantiate(t, c);
  tir::PrimFunc f = tir::lower(inst.sch, inst.args, "f");
  const int64_t ib = define_conv2d_nchwc_knobs(inst.config, w, host_target()).ic_bn;
  PrefetchedLines v("data", {});
  v.visit_stmt(f->body);
  EXPECT_EQ(v.statements, 4) << tir::to_string(f);
  int64_t missing = 0;
  for (int64_t k = 0; k < 256 / ib; ++k)
    for (int64_t px = 4; px < 96; ++px) missing += v.lines.count((k * 16 * 96 + px) * ib / 16) == 0;
  EXPECT_EQ(missing, 0) << tir::to_string(f);
}

TEST(Conv2DNCHWc, PackWeightCompute) {
  te::Tensor k = input({32, 8, 3, 3}, f32, "k");
  te::Tensor pk = pack_conv2d_weight(k, 4, 16);
  NDArray kd = random_array({32, 8, 3, 3}, f32, 9);
  te::Schedule s = te::create_schedule({pk});
  EXPECT_TRUE(all_close(run(s, {k}, {pk}, {kd})[0], pack_kernel_ref(kd, 4, 16)));
}

TEST(Conv2DNCHWc, FallbackTileFitsTheTargetRegisters) {
  // Schedules only (no code), so any target will do. The register tile holds V vectors x n
  // pixels, the V kernel vectors of a step and one broadcast.
  const Target avx512("llvm -mcpu=skylake-avx512"), avx2("llvm -mcpu=znver1");
  auto fallback = [](const Conv2DWorkload& w, const Target& t) {
    Instance inst = autotune::instantiate(conv2d_nchwc_template(w, {}, t), Config::fallback());
    const Config& c = inst.config;
    return "oc_reg=" + std::to_string(c.knob("oc_reg")) + " tile " +
           std::to_string(c.split("tile_oh").size[1]) + "x" +
           std::to_string(c.split("tile_ow").size[1]);
  };
  // MobileNet-v2's 960 -> 320 1x1 layer on a 7x7 map: 2 x 7 with 32 zmm (17 registers; 4 x 7
  // would need 33, and a spill is not allowed); with 16 ymm 2 x 7 does not fit, and 2 x 4 with
  // a 2 x 3 tail is taken over 1 x 7 (9 registers, bound by its loads).
  const Conv2DWorkload m17p = wl(1, 960, 7, 7, 320, 1, 1, 1, Padding2D{});
  EXPECT_EQ(fallback(m17p, avx512), "oc_reg=2 tile 1x7");
  EXPECT_EQ(fallback(m17p, avx2), "oc_reg=2 tile 1x4");
  // 24 output channels are three 8-wide chunks with AVX2: 3 vectors x 4 contiguous pixels
  // (12 + 3 + 1 = 16 registers).
  EXPECT_EQ(fallback(wl(1, 144, 56, 56, 24, 1, 1, 1, Padding2D{}), avx2), "oc_reg=3 tile 1x4");
  // A prime width (Conv-TasNet's 1999 frames) has no divisor tile with the 8 accumulators
  // that hide the FMA latency: 8 pixels, the last tile shifted inwards. Inception's 17-wide
  // maps keep their divisor (1 x 17: 17 accumulators).
  EXPECT_EQ(fallback(wl(1, 256, 1, 1999, 128, 1, 1, 1, Padding2D{}), avx512), "oc_reg=2 tile 1x8");
  EXPECT_EQ(fallback(wl(1, 768, 17, 17, 192, 1, 1, 1, Padding2D{}), avx512), "oc_reg=1 tile 1x17");
}

TEST(Conv2DNCHWc, ALastColumnTileThatDoesNotFitIsShiftedInwards) {
  // A 1x1 conv on a 1 x 37 map (a prime width) with 4-pixel tiles: nine whole tiles and a
  // tenth shifted to end at column 37 (recomputing three columns), every tile through the
  // same unrolled body: one parallel loop, not the guarded tail's second, slower copy.
  const Conv2DWorkload w = wl(1, 32, 1, 37, 64, 1, 1, 1, Padding2D{});
  const EpilogueFlags ep{true, false, true};
  autotune::Template t = conv2d_nchwc_template(w, ep, host_target());
  const Config c = fallback_with(t, {{"tile_oh", {-1, 1}}, {"tile_ow", {-1, 4}}, {"acc_outer", 0}});
  check_nchwc_configs(w, ep, t, {c});
  Instance inst = autotune::instantiate(t, c);
  const std::string tir = tir::to_string(tir::lower(inst.sch, inst.args, "f"));
  size_t loops = 0;
  for (size_t p = tir.find("parallel for"); p != std::string::npos;
       p = tir.find("parallel for", p + 1))
    ++loops;
  EXPECT_EQ(loops, 1u) << tir;
  EXPECT_NE(tir.find("*4, 33)"), std::string::npos) << tir;  // a tile starts at min(4t, 37 - 4)
}

TEST(Conv2DNCHWc, ScheduleRejectsMismatchedConfig) {
  const Conv2DWorkload w = wl(1, 16, 7, 7, 32, 3, 3, 1, Padding2D::all(1));
  autotune::Template t = conv2d_nchwc_template(w, {}, host_target());
  autotune::ConfigSpace space = autotune::define_space(t);
  // A point of the space with ic block L (the host's lanes: 16 with AVX-512, 8 with AVX2),
  // applied to tensors blocked by L / 2.
  const int64_t L = host_target().vector_bits() / 32, half = L / 2;
  Config c = Config::fallback();
  Conv2DNCHWcLayout l = define_conv2d_nchwc_knobs(c, w, host_target());
  ASSERT_EQ(l.ic_bn, L);
  Instance inst = autotune::instantiate(t, Config::fallback());
  Config applied = space.at(inst.config.choice());
  te::Tensor data = input(nchwc_shape(w.data_shape(), half), f32, "data");
  te::Tensor kernel = input(packed_conv2d_weight_shape(w.kernel_shape(), half, 16), f32, "k");
  te::Tensor out = conv2d_nchwc(data, kernel, w.params);
  te::Schedule s = te::create_schedule({out});
  EXPECT_NE(error_of([&] {
              schedule_conv2d_nchwc(applied, s, out, host_target());
            }).find("differ from the tensors' (ic " + std::to_string(half) + ", oc 16)"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::topi
