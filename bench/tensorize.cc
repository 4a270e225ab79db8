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
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/ndarray.h"
#include "kiln/target/build.h"
#include "kiln/topi/bitserial.h"
#include "kiln/topi/quantized.h"

namespace {

using kiln::runtime::NDArray;

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

/// GOPS of `threads` threads each running vnni_chains (best of 20).
double vnni_peak_gops(int threads) {
  auto run = vnni_chains;
  const int64_t iters = 1'000'000;
  double best = 0;
  for (int rep = 0; rep < 20; ++rep) {
    std::vector<std::thread> ts;
    std::atomic<int32_t> sink{0};
    double t0 = kiln::bench::now_ms();
    for (int t = 0; t < threads; ++t) ts.emplace_back([&] { sink += run(iters); });
    for (auto& t : ts) t.join();
    double ms = kiln::bench::now_ms() - t0;
    best = std::max(best, threads * iters * 12.0 * 16 * 4 * 2 / (ms * 1e6));
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
  const double peak = vnni ? vnni_peak_gops(threads) : 0;
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
  bench::write_json_rows(cl.get_string("--json", ""), rows);
  return 0;
}
