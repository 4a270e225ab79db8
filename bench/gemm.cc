// kiln-bench-gemm: C = A·B in fp32 (row-major, M = N = K = 1024 by default) written in Kiln's
// tensor-expression language with a register- and cache-blocked CPU schedule, timed against
// OpenBLAS's sgemm in the same run at 1 and 2 threads.
//
// The schedule is the one high-performance GEMMs use (and TVM's "How to optimize GEMM on CPU"
// tutorial): B is packed into panels Bp[N/nr, K, nr] by its own compute stage (each element
// once per call, counted in Kiln's time; by default each panel is packed inside the panel loop,
// just before the micro-kernels that read it, so it is still in that core's L2); C is computed
// tile by tile (mr x nr) through a local accumulator (cache_write "local", attached at the tile
// loop) whose loops are ordered k, then rows (unrolled), then columns (split by the 16 lanes of
// a zmm register: lanes vectorized, the rest unrolled), so that after unrolling the accumulator
// has constant indices only and LLVM keeps it in registers: each k step is mr broadcasts of A
// and mr * nr / 16 FMAs with packed B vectors. The panel loop is outermost and parallel. The
// benchmark also measures the core's fp32 peak with independent FMA chains on __m512, the time
// to lower and compile the kernel, and checks Kiln's result against OpenBLAS before timing.
// docs/gemm-schedule.md explains the choices and the measurements.
#include <cblas.h>
#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/ndarray.h"
#include "kiln/target/build.h"
#include "kiln/target/codegen.h"
#include "kiln/te/schedule.h"
#include "kiln/te/tensor.h"
#include "kiln/tir/lower.h"

namespace {

using kiln::DataType;
using kiln::Target;
using kiln::runtime::NDArray;
namespace te = kiln::te;
namespace bench = kiln::bench;

// ---------------------------------------------------------------------------------------------
// The Kiln kernel.

/// Blocking of the schedule (see the file comment and docs/gemm-schedule.md).
struct GemmConfig {
  int mr = 6;   ///< rows of the register tile (A broadcasts per k step)
  int nr = 64;  ///< columns of the register tile (nr / lanes vectors); the B panel width
  int kc = 0;   ///< split of the k loop inside the micro-kernel (0: none)
  bool pack_at_panel = true;  ///< pack each B panel inside the panel loop, just before use
  bool pack_a = false;        ///< also pack A into row-block micro-panels Ap[M/mr, K, mr]
  int lanes = 16;
};

struct GemmKernel {
  te::Schedule sched;
  std::vector<te::Tensor> args;
};

/// Bp[jo, k, ji] = B[k, jo * nr + ji]: B cut into column panels nr wide, each stored k-major
/// so that the micro-kernel reads nr contiguous floats per k step.
te::Tensor pack_b(const te::Tensor& B, int N, int K, int nr) {
  using namespace kiln::ir;  // NOLINT
  return te::compute(
      {N / nr, K, nr}, [&](Var jo, Var k, Var ji) { return B(k, jo * nr + ji); }, "Bp");
}

/// Schedule of the packing stage: rows of B (k) outermost and in parallel, so B is read
/// sequentially (one stream) and each panel is written sequentially; nr floats per vector copy.
void schedule_pack_b(te::Schedule& s, const te::Tensor& Bp, int lanes, bool parallel) {
  te::Stage sb = s[Bp];
  auto ax = sb.op_axis();
  sb.reorder({ax[1], ax[0], ax[2]});
  auto vi = sb.split(ax[2], lanes).second;
  sb.vectorize(vi);
  if (parallel) sb.parallel(ax[1]);
}

/// A kernel that only packs B (to report how much of Kiln's time the packing takes).
GemmKernel make_pack_b_only(int N, int K, const GemmConfig& cfg) {
  te::Tensor B = te::placeholder({K, N}, DataType::Float(32), "B");
  te::Tensor Bp = pack_b(B, N, K, cfg.nr);
  te::Schedule s = te::create_schedule({Bp});
  schedule_pack_b(s, Bp, cfg.lanes, /*parallel=*/true);
  return {s, {B, Bp}};
}

/// C = A·B with B packed into panels and C computed through a register tile.
GemmKernel make_gemm(int M, int N, int K, const GemmConfig& cfg) {
  using namespace kiln::ir;  // NOLINT
  te::Tensor A = te::placeholder({M, K}, DataType::Float(32), "A");
  te::Tensor B = te::placeholder({K, N}, DataType::Float(32), "B");
  const int nr = cfg.nr;
  te::Tensor Bp = pack_b(B, N, K, nr);
  const int mr = cfg.mr;
  te::Tensor Ap;
  if (cfg.pack_a) {
    // Ap[io, k, ii] = A[io * mr + ii, k], zero past the last row: one contiguous micro-panel
    // per row block, so each k step broadcasts mr neighbouring floats.
    Ap = te::compute(
        {(M + mr - 1) / mr, K, mr},
        [&](Var io, Var k, Var ii) {
          Expr i = io * mr + ii;
          return if_then_else(i < M, A(min(i, M - 1), k), Expr(0.0f));
        },
        "Ap");
  }
  te::IterVar k = te::reduce_axis({0, K}, "k");
  te::Tensor C = te::compute(
      {M, N},
      [&](Var i, Var j) {
        Expr a = cfg.pack_a ? Ap(floordiv(i, mr), k, floormod(i, mr)) : A(i, k);
        return te::sum(a * Bp(floordiv(j, nr), k, floormod(j, nr)), {k});
      },
      "C");
  te::Schedule s = te::create_schedule({C});
  if (cfg.pack_a) {
    te::Stage sa = s[Ap];
    auto ax = sa.op_axis();
    sa.unroll(ax[2]);
    sa.parallel(ax[0]);
  }

  schedule_pack_b(s, Bp, cfg.lanes, /*parallel=*/!cfg.pack_at_panel);

  te::Tensor CC = s.cache_write(C, "local");
  te::Stage sc = s[C];
  auto cax = sc.op_axis();
  auto [io, jo, ii, ji] = sc.tile(cax[0], cax[1], cfg.mr, nr);
  sc.reorder({jo, io, ii, ji});
  auto [jio, jii] = sc.split(ji, cfg.lanes);
  sc.vectorize(jii);
  sc.parallel(jo);

  if (cfg.pack_at_panel) s[Bp].compute_at(sc, jo);

  te::Stage scc = s[CC];
  scc.compute_at(sc, io);
  auto ccax = scc.op_axis();
  te::IterVar ck = scc.op_reduce_axis()[0];
  auto [cjo, cji] = scc.split(ccax[1], cfg.lanes);
  if (cfg.kc > 0 && cfg.kc < K) {
    auto [ko, ki] = scc.split(ck, cfg.kc);
    scc.reorder({ko, ki, ccax[0], cjo, cji});
  } else {
    scc.reorder({ck, ccax[0], cjo, cji});
  }
  scc.unroll(ccax[0]);
  scc.unroll(cjo);
  scc.vectorize(cji);
  return {s, {A, B, C}};
}

// ---------------------------------------------------------------------------------------------
// Driver.

void fill_random(float* p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (size_t i = 0; i < n; ++i) p[i] = d(rng);
}

/// max |x - ref| / max |ref| (a norm-wise relative error, robust to entries near zero); NaN
/// anywhere in x gives infinity.
double max_rel_error(const float* x, const float* ref, size_t n) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return INFINITY;
    err = std::max(err, std::fabs(double(x[i]) - ref[i]));
    scale = std::max(scale, std::fabs(double(ref[i])));
  }
  return scale > 0 ? err / scale : err;
}

void openblas_sgemm(int M, int N, int K, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
}

/// Gives OpenBLAS its best case and keeps it from disturbing Kiln's timing; both settings are
/// read when OpenBLAS loads, so the program re-runs itself with them (values the user set are
/// kept):
/// - OpenBLAS 0.3.21 (Debian 12) picks its kernels by CPU model and falls back to the SSE3
///   "Prescott" kernels on CPUs newer than it knows (e.g. Emerald Rapids), ~20x too slow:
///   OPENBLAS_CORETYPE names the newest AVX-512 (or AVX2) kernels it has.
/// - After each call OpenBLAS's worker threads busy-wait for more work. Since the benchmark
///   alternates Kiln and OpenBLAS calls, that spinning occupied a core during Kiln's 2-thread
///   calls (we measured Kiln at half speed, bimodally). OPENBLAS_THREAD_TIMEOUT=4 makes its
///   workers go to sleep almost at once; waking them costs microseconds on a 6 ms call.
void ensure_openblas_setup(char** argv) {
  bool changed = false;
  if (std::getenv("OPENBLAS_THREAD_TIMEOUT") == nullptr) {
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
    changed = true;
  }
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    std::string core = openblas_get_corename();
    const char* better = nullptr;
    if (core == "Prescott" || core == "Core2" || core == "Nehalem")
      better = __builtin_cpu_supports("avx512f") ? "SkylakeX"
               : __builtin_cpu_supports("avx2")  ? "Haswell"
                                                 : nullptr;
    if (better != nullptr) {
      std::cout << "note: OpenBLAS chose its generic '" << core << "' kernels for this CPU; "
                << "re-running with OPENBLAS_CORETYPE=" << better << "\n";
      setenv("OPENBLAS_CORETYPE", better, 1);
      changed = true;
    }
  }
  if (!changed) return;
  std::cout << std::flush;
  execv("/proc/self/exe", argv);
  std::cerr << "kiln-bench-gemm: re-exec failed (" << std::strerror(errno)
            << "); continuing with OpenBLAS as loaded\n";
}

}  // namespace

int main(int argc, char** argv) {
  bench::CommandLine cl(
      argc, argv,
      {{"--size", "M = N = K (default 1024; a multiple of --nr)"},
       {"--json", "write the result rows to this file"},
       {"--reps", "timed repetitions per measurement (default 20)"},
       {"--warmup", "untimed calls before timing (default 3)"},
       {"--mr", "register tile rows (default 6)"},
       {"--nr",
        "register tile columns, a multiple of the lanes (default 64 with AVX-512, 16 "
        "with AVX2: 24 or 12 accumulator registers)"},
       {"--kc", "split of k inside the micro-kernel (default 0: none)"},
       {"--pack-a", "1: also pack A into micro-panels (default 0)"},
       {"--pack-at-panel", "0: pack all of B before the product instead of per panel (default 1)"},
       {"--threads", "thread counts to time, e.g. 1,2 (default 1,2)"},
       {"--dump", "write lowered IR, LLVM IR and assembly to BASE.ir/.ll/.s"}});
  const int n = static_cast<int>(cl.get_int("--size", 1024));
  const int reps = static_cast<int>(cl.get_int("--reps", 20));
  const int warmup = static_cast<int>(cl.get_int("--warmup", 3));
  GemmConfig cfg;
  Target target = Target::host();
  cfg.lanes = std::max(1, std::min(16, target.vector_bits() / 32));
  if (target.vector_registers() < 32) cfg.nr = 2 * cfg.lanes;  // 6 x 2 of AVX2's 16 registers
  cfg.mr = static_cast<int>(cl.get_int("--mr", cfg.mr));
  cfg.nr = static_cast<int>(cl.get_int("--nr", cfg.nr));
  cfg.kc = static_cast<int>(cl.get_int("--kc", cfg.kc));
  cfg.pack_a = cl.get_int("--pack-a", cfg.pack_a) != 0;
  cfg.pack_at_panel = cl.get_int("--pack-at-panel", cfg.pack_at_panel) != 0;
  if (n <= 0 || cfg.mr <= 0 || cfg.nr <= 0 || cfg.nr % cfg.lanes != 0 || n % cfg.nr != 0)
    cl.fail("need size > 0, mr > 0, nr a multiple of " + std::to_string(cfg.lanes) +
            " and size a multiple of nr");
  if (reps < 1 || warmup < 0) cl.fail("need reps >= 1 and warmup >= 0");
  if (cl.has("--json") && !std::ofstream(cl.get_string("--json", ""), std::ios::app))
    cl.fail("cannot open '" + cl.get_string("--json", "") + "' for writing");
  ensure_openblas_setup(argv);
  const int M = n, N = n, K = n;
  const double flop = 2.0 * M * N * K;

  std::vector<int> thread_counts;
  {
    std::stringstream ss(cl.get_string("--threads", "1,2"));
    for (std::string t; std::getline(ss, t, ',');) {
      int v = std::atoi(t.c_str());
      if (v < 1) cl.fail("--threads expects positive integers separated by commas");
      thread_counts.push_back(v);
    }
  }
  const int max_threads = *std::max_element(thread_counts.begin(), thread_counts.end());
  const bool avx512 = __builtin_cpu_supports("avx512f");
  std::cout << "kiln-bench-gemm: C[" << M << "x" << N << "] = A[" << M << "x" << K << "] * B[" << K
            << "x" << N << "], fp32, row-major\n"
            << "OpenBLAS: " << openblas_get_config() << ", kernels " << openblas_get_corename()
            << "\n"
            << "target: " << target.str() << " (" << target.vector_bits() << "-bit vectors)\n"
            << "schedule: Bp[N/" << cfg.nr << ", K, " << cfg.nr << "] packed, register tile "
            << cfg.mr << "x" << cfg.nr << " (" << cfg.mr * cfg.nr / cfg.lanes
            << " vector accumulators), kc " << (cfg.kc ? std::to_string(cfg.kc) : "= K")
            << ", parallel over N panels, B panels packed "
            << (cfg.pack_at_panel ? "in the panel loop" : "before the product")
            << (cfg.pack_a ? ", A packed" : "") << "\n";

  // Peak, and the floor it implies.
  std::vector<double> peak(std::max(max_threads, 2) + 1, 0);
  for (int t = 1; t <= 2; ++t) peak[t] = bench::measure_peak_gflops(t, avx512);
  for (int t = 3; t <= max_threads; ++t) peak[t] = bench::measure_peak_gflops(t, avx512);
  std::cout << "measured fp32 peak (" << (avx512 ? "AVX-512" : "AVX2")
            << " FMA loop): " << bench::fixed(peak[1], 1) << " GFLOP/s on 1 thread, "
            << bench::fixed(peak[2], 1) << " on 2; floor for " << bench::fixed(flop / 1e9, 2)
            << " GFLOP: " << bench::fixed(flop / (peak[1] * 1e6), 2) << " ms (1 thread), "
            << bench::fixed(flop / (peak[2] * 1e6), 2) << " ms (2 threads)\n";

  // Lower and compile, timed (cold: the first build in the process; warm: a second one).
  kiln::runtime::Module mod;
  kiln::runtime::PackedFunc fn;
  double compile_ms[2] = {0, 0}, lower_ms[2] = {0, 0};
  std::string ir_text;
  for (int round = 0; round < 2; ++round) {
    double t0 = bench::now_ms();
    GemmKernel g = make_gemm(M, N, K, cfg);
    kiln::tir::PrimFunc f = kiln::tir::lower(g.sched, g.args, "kiln_gemm");
    lower_ms[round] = bench::now_ms() - t0;
    mod = kiln::build({f}, target);
    fn = mod.get_function("kiln_gemm");
    compile_ms[round] = bench::now_ms() - t0;
    if (round == 0) {
      std::ostringstream os;
      os << f;
      ir_text = os.str();
    }
  }
  std::cout << "lower + compile: " << bench::fixed(compile_ms[0], 1) << " ms cold (first build, "
            << "LLVM start-up included), " << bench::fixed(compile_ms[1], 1)
            << " ms warm, of which lowering " << bench::fixed(lower_ms[1], 1)
            << " ms (target < 200 ms)\n";
  if (cl.has("--dump")) {
    std::string base = cl.get_string("--dump", "");
    std::ofstream(base + ".ir") << ir_text;
    std::ofstream(base + ".s") << kiln::codegen::get_source(mod, "asm");
    std::ofstream(base + ".ll") << kiln::codegen::get_source(mod, "ll");
    std::cout << "wrote " << base << ".ir, " << base << ".ll and " << base << ".s\n";
  }

  NDArray a = NDArray::empty({M, K}, DataType::Float(32));
  NDArray b = NDArray::empty({K, N}, DataType::Float(32));
  NDArray c = NDArray::empty({M, N}, DataType::Float(32));
  std::vector<float> ref(static_cast<size_t>(M) * N);
  fill_random(a.data_as<float>(), a.numel(), 1);
  fill_random(b.data_as<float>(), b.numel(), 2);

  // Correctness first: Kiln against OpenBLAS on a NaN-poisoned output.
  openblas_set_num_threads(1);
  openblas_sgemm(M, N, K, a.data_as<float>(), b.data_as<float>(), ref.data());
  for (int threads : {1, 2}) {
    kiln_set_num_threads(threads);
    std::fill(c.data_as<float>(), c.data_as<float>() + c.numel(), NAN);
    fn(a, b, c);
    double err = max_rel_error(c.data_as<float>(), ref.data(), ref.size());
    if (!(err < 1e-5)) {
      std::cerr << "kiln-bench-gemm: WRONG RESULT with " << threads
                << " thread(s): max relative error vs OpenBLAS = " << err << "\n";
      return 1;
    }
    std::cout << "check (" << threads << " thread" << (threads > 1 ? "s" : "")
              << "): max relative error vs OpenBLAS " << err << " (ok)\n";
  }

  // Packing B alone, for the breakdown of Kiln's time.
  GemmKernel pk = make_pack_b_only(N, K, cfg);
  kiln::runtime::Module pack_mod = kiln::build(pk.sched, pk.args, target, "kiln_pack_b");
  kiln::runtime::PackedFunc pack_fn = pack_mod.get_function("kiln_pack_b");
  NDArray bp = NDArray::empty({N / cfg.nr, K, cfg.nr}, DataType::Float(32));

  // Timing: Kiln and OpenBLAS alternate call by call, so that load from other processes on
  // this shared machine slows both alike.
  struct Result {
    int threads;
    bench::Timing kiln, openblas, pack;
  };
  std::vector<Result> results;
  std::vector<float> cb(ref.size());
  for (int threads : thread_counts) {
    kiln_set_num_threads(threads);
    openblas_set_num_threads(threads);
    std::vector<bench::Timing> ts = bench::measure_interleaved(
        {[&] { fn(a, b, c); },
         [&] { openblas_sgemm(M, N, K, a.data_as<float>(), b.data_as<float>(), cb.data()); },
         [&] { pack_fn(b, bp); }},
        warmup, reps);
    results.push_back({threads, ts[0], ts[1], ts[2]});
  }
  // Peak again: the best of both measurements is the machine's (others' load only lowers it).
  for (int t = 1; t <= max_threads; ++t)
    peak[t] = std::max(peak[t], bench::measure_peak_gflops(t, avx512));

  std::vector<nlohmann::ordered_json> rows;
  bench::Table table({"threads", "kiln ms (min/med/max)", "openblas ms (min/med/max)",
                      "kiln GFLOP/s", "openblas GFLOP/s", "kiln/openblas", "kiln % peak",
                      "openblas % peak", "pack B ms"});
  auto ms3 = [](const bench::Timing& t) {
    return bench::fixed(t.min_ms, 2) + " / " + bench::fixed(t.median_ms, 2) + " / " +
           bench::fixed(t.max_ms, 2);
  };
  for (const Result& r : results) {
    const bench::Timing &tk = r.kiln, &tb = r.openblas;
    double gk = flop / (tk.median_ms * 1e6), gb = flop / (tb.median_ms * 1e6);
    auto row =
        bench::make_row("gemm_" + std::to_string(n), r.threads, tk, {{"openblas", tb.median_ms}});
    row["kiln_gflops"] = gk;
    row["openblas_gflops"] = gb;
    row["openblas_ms_min"] = tb.min_ms;
    row["peak_gflops"] = peak[r.threads];
    row["pack_b_ms_median"] = r.pack.median_ms;
    row["compile_ms"] = compile_ms[1];
    rows.push_back(row);
    table.add_row({std::to_string(r.threads), ms3(tk), ms3(tb), bench::fixed(gk, 1),
                   bench::fixed(gb, 1), bench::fixed(tb.median_ms / tk.median_ms, 3),
                   bench::fixed(100 * gk / peak[r.threads], 1) + "%",
                   bench::fixed(100 * gb / peak[r.threads], 1) + "%",
                   bench::fixed(r.pack.median_ms, 2)});
  }
  std::cout << "\n";
  table.print(std::cout);
  std::cout << "(GFLOP/s and ratios from medians of " << reps << " calls after " << warmup
            << " warm-up calls, Kiln and OpenBLAS alternating; kiln/openblas > 1 means Kiln is "
            << "faster; % peak against the best FMA-loop peak measured before and after: "
            << bench::fixed(peak[1], 1) << " GFLOP/s on 1 thread, " << bench::fixed(peak[2], 1)
            << " on 2; 'pack B' is Kiln's packing stage alone, included in Kiln's time)\n";
  try {
    bench::write_json_rows(cl.get_string("--json", ""), rows);
  } catch (const std::exception& e) {
    std::cerr << "kiln-bench-gemm: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
