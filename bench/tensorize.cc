// kiln-bench-tensorize: the int8 kernels of topi/quantized.h (quantized dense and the direct
// NCHWc quantized conv2d, default configs) on the host, in GOPS (2 ops per multiply-add)
// against the VNNI peak of the same thread count (one vpdpbusd zmm = 64 multiply-adds per
// cycle per core, measured as a dependent-chain-free loop of vpdpbusd here when the host has
// avx512vnni), and the same kernels built for the host without VNNI (the generic lowering of
// the same compute) as the baseline, in the same run. Kiln's rows are the tensorized kernels.
//
//   kiln-bench-tensorize [--threads N] [--reps R] [--json FILE]
#include <immintrin.h>

#include <cstring>
#include <iostream>
#include <random>

#include "bench_util.h"
#include "kiln/graph/tuning.h"
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/ndarray.h"
#include "kiln/target/build.h"
#include "kiln/topi/bitserial.h"
#include "kiln/topi/conv2d_winograd.h"
#include "kiln/topi/quantized.h"
#include "kiln/topi/x86_intrin.h"
#include "paper_layers.h"

namespace {

using kiln::runtime::NDArray;

std::vector<int64_t> const_shape(const kiln::te::Tensor& t) {
  std::vector<int64_t> s;
  for (const auto& d : t->shape) s.push_back(*kiln::ir::as_const_int(d));
  return s;
}

NDArray random_bytes(const std::vector<int64_t>& shape, kiln::DataType t, uint32_t seed) {
  NDArray a = NDArray::empty(shape, t);
  std::mt19937 rng(seed);
  auto* p = static_cast<uint8_t*>(a.data());
  for (size_t i = 0; i < a.nbytes(); ++i) p[i] = static_cast<uint8_t>(rng());
  return a;
}

/// One thread's 12 independent vpdpbusd zmm chains, `iters` rounds (inline assembly: a
/// compiler may copy the accumulators around the destructive instruction or merge chains).
int32_t vnni_chains(int64_t iters) {
  if (iters <= 0) return 0;
#define KILN_DP(r) "vpdpbusd %%zmm12, %%zmm13, %%zmm" #r "\n\t"
  asm volatile(
      "vpxord %%zmm12, %%zmm12, %%zmm12\n\t"
      "vpternlogd $0xff, %%zmm13, %%zmm13, %%zmm13\n\t"
      "1:\n\t" KILN_DP(0) KILN_DP(1) KILN_DP(2) KILN_DP(3) KILN_DP(4) KILN_DP(5) KILN_DP(6)
          KILN_DP(7) KILN_DP(8) KILN_DP(9) KILN_DP(10) KILN_DP(11) "dec %0\n\t"
                                                                    "jnz 1b\n\t"
      : "+r"(iters)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "cc");
#undef KILN_DP
  return static_cast<int32_t>(iters);
}

/// One thread's AND-popcount-accumulate steps (vpandd, vpopcntd, vpaddd on zmm: what a
/// bit-serial kernel does per 32 × 16 bit products), 8 independent chains, `iters` rounds.
int32_t popcount_chains(int64_t iters) {
  if (iters <= 0) return 0;
#define KILN_PC(t, a)                 \
  "vpandd %%zmm14, %%zmm15, %%zmm" #t \
  "\n\t"                              \
  "vpopcntd %%zmm" #t ", %%zmm" #t    \
  "\n\t"                              \
  "vpaddd %%zmm" #t ", %%zmm" #a ", %%zmm" #a "\n\t"
  asm volatile(
      "vpternlogd $0xff, %%zmm14, %%zmm14, %%zmm14\n\t"
      "vpternlogd $0xff, %%zmm15, %%zmm15, %%zmm15\n\t"
      "1:\n\t" KILN_PC(8, 0) KILN_PC(9, 1) KILN_PC(10, 2) KILN_PC(11, 3) KILN_PC(12, 4)
          KILN_PC(13, 5) KILN_PC(8, 6) KILN_PC(9, 7) "dec %0\n\t"
                                                     "jnz 1b\n\t"
      : "+r"(iters)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc");
#undef KILN_PC
  return static_cast<int32_t>(iters);
}

/// GOPS (2 per bit product) of `threads` threads each running `chains` (best of 20);
/// `per_iter` bit products per round.
double chain_peak_gops(int32_t (*chains)(int64_t), double per_iter, int threads) {
  const int64_t iters = 1'000'000;
  double best = 0;
  for (int rep = 0; rep < 20; ++rep) {
    std::vector<std::thread> ts;
    std::atomic<int32_t> sink{0};
    double t0 = kiln::bench::now_ms();
    for (int t = 0; t < threads; ++t) ts.emplace_back([&] { sink += chains(iters); });
    for (auto& t : ts) t.join();
    double ms = kiln::bench::now_ms() - t0;
    best = std::max(best, threads * iters * per_iter * 2 / (ms * 1e6));
  }
  return best;
}

struct Kernel {
  kiln::autotune::Instance inst;
  kiln::runtime::Module mod;
  kiln::runtime::PackedFunc fn;
};

Kernel build_kernel(const kiln::autotune::Template& t, const kiln::Target& target) {
  Kernel k;
  k.inst = kiln::autotune::instantiate(t, kiln::autotune::Config::fallback());
  k.mod = kiln::build(k.inst.sch, k.inst.args, target, "k");
  k.fn = k.mod.get_function("k");
  return k;
}

}  // namespace

int main(int argc, char** argv) {
  namespace bench = kiln::bench;
  bench::CommandLine cl(argc, argv,
                        {{"--threads", "threads (default 1)"},
                         {"--reps", "timed repetitions (default 30)"},
                         {"--json", "write the rows as JSON to this file"}});
  const int threads = static_cast<int>(cl.get_int("--threads", 1));
  const int reps = static_cast<int>(cl.get_int("--reps", 30));
  if (threads < 1 || reps < 1) cl.fail("need threads >= 1 and reps >= 1");
  kiln_set_num_threads(threads);
  const kiln::Target host = kiln::Target::host();
  const bool vnni = host.has_feature("avx512vnni");
  const kiln::Target plain("llvm -mcpu=native -mattr=-avx512vnni,-avxvnni");
  const double peak = vnni ? chain_peak_gops(vnni_chains, 12.0 * 16 * 4, threads) : 0;
  std::cout << "int8 kernels, " << threads << " thread(s); VNNI peak "
            << (vnni ? bench::fixed(peak, 0) + " GOPS" : std::string("n/a (no avx512vnni)"))
            << "\n\n";

  struct Case {
    std::string name;
    double ops;
    std::function<kiln::autotune::Template(const kiln::Target&)> tmpl;
    std::vector<NDArray> inputs;
  };
  std::vector<Case> cases;
  auto dense = [&](int64_t M, int64_t N, int64_t K) {
    kiln::topi::QuantizedDenseWorkload w{M, N, K};
    Case c{"qdense_" + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K),
           2.0 * M * N * K,
           [w](const kiln::Target& t) { return kiln::topi::quantized_dense_template(w, t); },
           {}};
    cases.push_back(c);
  };
  auto conv = [&](int64_t C, int64_t H, int64_t O, int64_t k, int64_t s, int64_t p) {
    kiln::topi::QuantizedConv2DWorkload w{1, C, H, H, O, k, k, {s, p}};
    const int64_t OH = (H + 2 * p - k) / s + 1;
    Case c{"qconv_c" + std::to_string(C) + "_h" + std::to_string(H) + "_o" + std::to_string(O) +
               "_k" + std::to_string(k) + "_s" + std::to_string(s),
           2.0 * O * OH * OH * C * k * k,
           [w](const kiln::Target& t) { return kiln::topi::quantized_conv2d_template(w, t); },
           {}};
    cases.push_back(c);
  };
  dense(1, 1024, 1024);
  dense(64, 1024, 1024);
  dense(128, 768, 3072);
  conv(64, 56, 64, 3, 1, 1);
  conv(128, 28, 128, 3, 1, 1);
  conv(256, 14, 256, 3, 1, 1);
  conv(512, 7, 512, 3, 1, 1);
  conv(256, 56, 64, 1, 1, 0);

  bench::Table table({"kernel", "tensorized ms", "GOPS", "% VNNI peak", "no-VNNI ms", "speedup"});
  std::vector<nlohmann::ordered_json> rows;
  for (Case& c : cases) {
    Kernel kt = build_kernel(c.tmpl(host), host);
    Kernel kp = build_kernel(c.tmpl(plain), plain);
    std::vector<NDArray> args;
    uint32_t seed = 1;
    for (size_t i = 0; i + 1 < kt.inst.args.size(); ++i) {
      std::vector<int64_t> shape;
      for (const auto& d : kt.inst.args[i]->shape) shape.push_back(*kiln::ir::as_const_int(d));
      args.push_back(random_bytes(shape, kt.inst.args[i]->dtype, seed++));
    }
    std::vector<int64_t> oshape;
    for (const auto& d : kt.inst.args.back()->shape) oshape.push_back(*kiln::ir::as_const_int(d));
    NDArray out = NDArray::empty(oshape, kt.inst.args.back()->dtype);
    NDArray out2 = NDArray::empty(oshape, kt.inst.args.back()->dtype);
    auto call = [&](const Kernel& k, NDArray& o) {
      if (args.size() == 2) k.fn(args[0], args[1], o);
    };
    std::vector<bench::Timing> ts = bench::measure_interleaved(
        {[&] { call(kt, out); }, [&] { call(kp, out2); }}, 3, reps, {}, true);
    if (std::memcmp(out.data(), out2.data(), out.nbytes()) != 0) {
      std::cerr << c.name << ": the tensorized and the plain kernel disagree\n";
      return 1;
    }
    const double gops = c.ops / (ts[0].median_ms * 1e6);
    table.add_row({c.name, bench::fixed(ts[0].median_ms, 3), bench::fixed(gops, 1),
                   vnni ? bench::fixed(100 * gops / peak, 1) : "-",
                   bench::fixed(ts[1].median_ms, 3),
                   bench::fixed(ts[1].median_ms / ts[0].median_ms, 2)});
    auto row = bench::make_row(c.name, threads, ts[0], {{"novnni", ts[1].median_ms}});
    row["gops"] = gops;
    row["vnni_peak_gops"] = peak;
    rows.push_back(row);
  }
  table.print(std::cout);

  // Bit-serial dense (paper section 6.2) on the GEMM shapes of the paper's ResNet-18 3x3
  // layers (im2col: M = OH·OW, N = O, K = 9·C), 2-bit activations x 1-bit weights: the
  // popcount_and micro-kernel vs the same loops without it, both from packed operands; the
  // run-time packing of the activations is timed on its own.
  std::cout << "\nbit-serial dense, 2-bit activations x 1-bit weights (ops: 2·M·N·K)\n\n";
  bench::Table bt({"layer", "tensorized ms", "GOPS", "plain ms", "speedup", "act. packing ms"});
  struct Layer {
    std::string name;
    int64_t M, N, K;
  };
  for (const Layer& l :
       {Layer{"C2_56x56_64", 3136, 64, 576}, Layer{"C5_28x28_128", 784, 128, 1152},
        Layer{"C8_14x14_256", 196, 256, 2304}, Layer{"C11_7x7_512", 49, 512, 4608}}) {
    using kiln::ir::Expr;
    const int64_t W = (l.K + 31) / 32;
    auto a = kiln::te::placeholder({Expr(int(l.M)), Expr(int(l.K))}, kiln::DataType::UInt(8), "a");
    auto Ap = kiln::te::placeholder({Expr(2), Expr(int(l.M)), Expr(int(W))},
                                    kiln::DataType::UInt(32), "Ap");
    auto Wp = kiln::te::placeholder({Expr(int(W)), Expr(int(l.N))}, kiln::DataType::UInt(32), "Wp");
    auto y = kiln::topi::bitserial_dense(Ap, Wp);
    auto pack = kiln::topi::bitpack_activations(a, 2);
    std::vector<kiln::runtime::PackedFunc> fns;
    std::vector<kiln::runtime::Module> mods;
    for (bool t : {true, false}) {
      mods.push_back(
          kiln::build(kiln::topi::schedule_bitserial_dense(y, host, t), {Ap, Wp, y}, host, "k"));
      fns.push_back(mods.back().get_function("k"));
    }
    kiln::te::Schedule ps = kiln::te::create_schedule({pack});
    ps[pack].parallel(ps[pack].op_axis()[1]);
    ps[pack].unroll(ps[pack].op_reduce_axis()[0]);
    mods.push_back(kiln::build(ps, {a, pack}, host, "k"));
    fns.push_back(mods.back().get_function("k"));
    NDArray aa = random_bytes({l.M, l.K}, kiln::DataType::UInt(8), 7);
    for (size_t i = 0; i < aa.nbytes(); ++i) static_cast<uint8_t*>(aa.data())[i] &= 3;
    NDArray ap = NDArray::empty({2, l.M, W}, kiln::DataType::UInt(32));
    NDArray wa = random_bytes({W, l.N}, kiln::DataType::UInt(32), 8);
    NDArray o1 = NDArray::empty({l.M, l.N}, kiln::DataType::Int(32));
    NDArray o2 = NDArray::empty({l.M, l.N}, kiln::DataType::Int(32));
    fns[2](aa, ap);
    std::vector<bench::Timing> ts = bench::measure_interleaved(
        {[&] { fns[0](ap, wa, o1); }, [&] { fns[1](ap, wa, o2); }, [&] { fns[2](aa, ap); }}, 3,
        reps, {}, true);
    if (std::memcmp(o1.data(), o2.data(), o1.nbytes()) != 0) {
      std::cerr << l.name << ": the tensorized and the plain bit-serial kernel disagree\n";
      return 1;
    }
    const double gops = 2.0 * l.M * l.N * l.K / (ts[0].median_ms * 1e6);
    bt.add_row({l.name, bench::fixed(ts[0].median_ms, 3), bench::fixed(gops, 1),
                bench::fixed(ts[1].median_ms, 3),
                bench::fixed(ts[1].median_ms / ts[0].median_ms, 2),
                bench::fixed(ts[2].median_ms, 3)});
    auto row = bench::make_row("bitserial_" + l.name, threads, ts[0], {{"plain", ts[1].median_ms}});
    row["gops"] = gops;
    row["activation_packing_ms"] = ts[2].median_ms;
    rows.push_back(row);
  }
  bt.print(std::cout);

  // Bit-serial conv2d (paper section 6.2, Figure 13's workloads): the paper's ResNet-18 layers
  // C2-C12 in NHWC (C1's 3 input channels would fill 3 of each word's 32 bits), 1- and 2-bit
  // activations x 1-bit weights. Tensorized (popcount_and over a tile of output pixels) vs the
  // same loops without it, both from packed operands; the run-time packing of the activations
  // (with the padding) on its own; and Kiln's fp32 conv2d of the layer (the graph compiler's
  // algorithm, default config, NCHW16c) in the same run, against packing + bit-serial conv.
  const bool popcnt = kiln::topi::has_popcount(host);
  // The floor: 1-bit products at the AND-popcount-add rate; b-bit activations take b times
  // as many steps.
  const double pc_peak = popcnt ? chain_peak_gops(popcount_chains, 8.0 * 512, threads) : 0;
  std::cout << "\nbit-serial conv2d (NHWC), 1-bit weights (ops: 2·OH·OW·O·C·K²); "
            << "AND-popcount-add peak "
            << (popcnt ? bench::fixed(pc_peak, 0) + " GOPS at 1 bit" : std::string("n/a"))
            << "\n\n";
  bench::Table ct({"layer", "act. bits", "tensorized ms", "GOPS", "% peak", "plain ms", "speedup",
                   "packing ms", "plain packing ms", "fp32 ms", "vs fp32"});
  for (const bench::PaperLayer& l : bench::paper_layers()) {
    if (l.depthwise || l.name == "C1") continue;
    const kiln::topi::Conv2DWorkload w = bench::paper_workload(l);
    const int64_t pad = l.k / 2, OH = (l.hw + 2 * pad - l.k) / l.stride + 1;
    const double ops = 2.0 * OH * OH * l.oc * l.ic * l.k * l.k;
    // fp32: what the graph compiler builds for this layer by default.
    kiln::autotune::Task ft =
        kiln::topi::prefer_winograd(w, host)
            ? kiln::graph::conv2d_winograd_task(w, host)
            : kiln::graph::conv2d_task(w, host, kiln::topi::ChannelBlocks::kTuned);
    Kernel f32;
    f32.inst = ft.instantiate(kiln::autotune::Config::fallback());
    f32.mod = kiln::build(f32.inst.sch, f32.inst.args, host, "k");
    f32.fn = f32.mod.get_function("k");
    if (f32.inst.args.size() != 3) {
      std::cerr << l.name << ": expected the fp32 conv2d kernel to take (data, kernel, out)\n";
      return 1;
    }
    std::vector<NDArray> fargs;
    for (size_t i = 0; i < f32.inst.args.size(); ++i) {
      fargs.push_back(NDArray::empty(const_shape(f32.inst.args[i]), kiln::DataType::Float(32)));
      std::mt19937 rng(static_cast<uint32_t>(i + 1));
      std::uniform_real_distribution<float> u(-1, 1);
      for (int64_t e = 0; e < fargs.back().numel(); ++e) fargs.back().data_as<float>()[e] = u(rng);
    }
    for (int bits : {1, 2}) {
      namespace te = kiln::te;
      const kiln::DataType u8 = kiln::DataType::UInt(8), u32 = kiln::DataType::UInt(32);
      auto d = te::placeholder({1, int(l.hw), int(l.hw), int(l.ic)}, u8, "d");
      auto pack = kiln::topi::bitpack_nhwc(d, bits, pad, pad);
      auto Dp = te::placeholder(pack->shape, u32, "Dp");
      auto Wp = te::placeholder({int(l.k), int(l.k), int((l.ic + 31) / 32), int(l.oc)}, u32, "Wp");
      auto y = kiln::topi::bitserial_conv2d_nhwc(Dp, Wp, l.stride, l.stride);
      std::vector<kiln::runtime::Module> mods;
      std::vector<kiln::runtime::PackedFunc> fns;
      for (bool t : {true, false}) {
        mods.push_back(kiln::build(kiln::topi::schedule_bitserial_conv2d_nhwc(y, host, t),
                                   {Dp, Wp, y}, host, "k"));
        fns.push_back(mods.back().get_function("k"));
      }
      for (bool t : {true, false}) {
        te::Schedule ps = te::create_schedule({pack});
        kiln::topi::schedule_bitpack_nhwc(ps, pack, t);
        mods.push_back(kiln::build(ps, {d, pack}, host, "k"));
        fns.push_back(mods.back().get_function("k"));
      }
      NDArray da = random_bytes(const_shape(d), u8, 7);
      for (size_t i = 0; i < da.nbytes(); ++i)
        static_cast<uint8_t*>(da.data())[i] &= static_cast<uint8_t>((1 << bits) - 1);
      NDArray dp = NDArray::empty(const_shape(pack), u32);
      NDArray dp2 = NDArray::empty(const_shape(pack), u32);
      NDArray wp = random_bytes(const_shape(Wp), u32, 8);
      NDArray o1 = NDArray::empty(const_shape(y), kiln::DataType::Int(32));
      NDArray o2 = NDArray::empty(const_shape(y), kiln::DataType::Int(32));
      fns[2](da, dp);
      std::vector<bench::Timing> ts = bench::measure_interleaved(
          {[&] { fns[0](dp, wp, o1); }, [&] { fns[1](dp, wp, o2); }, [&] { fns[2](da, dp); },
           [&] { f32.fn(fargs[0], fargs[1], fargs[2]); }, [&] { fns[3](da, dp2); }},
          3, reps, {}, true);
      if (std::memcmp(o1.data(), o2.data(), o1.nbytes()) != 0 ||
          std::memcmp(dp.data(), dp2.data(), dp.nbytes()) != 0) {
        std::cerr << l.name << ": the tensorized and the plain bit-serial kernels disagree\n";
        return 1;
      }
      const double gops = ops / (ts[0].median_ms * 1e6);
      const double total = ts[0].median_ms + ts[2].median_ms;
      ct.add_row(
          {l.name, std::to_string(bits), bench::fixed(ts[0].median_ms, 3), bench::fixed(gops, 1),
           popcnt ? bench::fixed(100 * gops * bits / pc_peak, 1) : "-",
           bench::fixed(ts[1].median_ms, 3), bench::fixed(ts[1].median_ms / ts[0].median_ms, 2),
           bench::fixed(ts[2].median_ms, 3), bench::fixed(ts[4].median_ms, 3),
           bench::fixed(ts[3].median_ms, 3), bench::fixed(ts[3].median_ms / total, 2)});
      auto row = bench::make_row("bitserial_conv2d_" + l.name + "_a" + std::to_string(bits),
                                 threads, ts[0], {{"plain", ts[1].median_ms}});
      row["gops"] = gops;
      row["activation_packing_ms"] = ts[2].median_ms;
      row["plain_activation_packing_ms"] = ts[4].median_ms;
      row["fp32_ms"] = ts[3].median_ms;
      row["popcount_and"] = popcnt;
      row["popcount_peak_gops"] = pc_peak;
      rows.push_back(row);
    }
  }
  ct.print(std::cout);
  if (!popcnt) std::cout << "(no avx512vpopcntdq: both bit-serial columns are the plain loops)\n";
  bench::write_json_rows(cl.get_string("--json", ""), rows);
  return 0;
}
