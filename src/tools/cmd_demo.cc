// `kiln demo`: the built-in ResNet-18 (frontend/model_zoo.h) end to end — build the graph,
// compile it (compile time, kernels, memory plan), run it on a seeded random image, print the
// top-5 classes with their softmax probabilities and the median latency. `kiln demo --gemm`:
// the paper's matrix product (write it as a tensor expression, schedule it, lower, compile
// for this CPU, run, check against a naive reference, export a shared library and load it
// back with the runtime alone).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <numeric>
#include <random>

#include "cli_common.h"
#include "kiln/frontend/model_zoo.h"
#include "kiln/ir/printer.h"
#include "kiln/runtime/c_runtime_api.h"
#include "kiln/runtime/module.h"
#include "kiln/support/error.h"
#include "kiln/target/build.h"

namespace kiln::cli {

namespace {

using ir::Var;

int run_gemm_demo(int n, int threads, const std::string& out_dir, bool show_ir) {
  if (threads > 0) kiln_set_num_threads(threads);
  std::cout << "Kiln demo: C[y, x] = sum_k A[k, y] * B[k, x]  (the TVM paper's Figure 5), n = " << n
            << "\n\n";
  auto t0 = Clock::now();
  auto A = te::placeholder({n, n}, DataType::Float(32), "A");
  auto B = te::placeholder({n, n}, DataType::Float(32), "B");
  auto k = te::reduce_axis({0, n}, "k");
  // Data layout, as BLAS libraries do: A and B are packed into panels of 8 and 32 columns,
  // Ap[y / 8, k, y % 8] = A[k, y], so the micro-kernel reads consecutive memory per k instead
  // of touching a new 4 KiB page.
  const int mr = 8, nr = 32;
  auto Ap = te::compute(
      {n / mr, n, mr}, [&](Var yo, Var kk, Var yi) { return A(kk, yo * mr + yi); }, "Ap");
  auto Bp = te::compute(
      {n / nr, n, nr}, [&](Var xo, Var kk, Var xi) { return B(kk, xo * nr + xi); }, "Bp");
  auto C = te::compute(
      {n, n},
      [&](Var y, Var x) { return te::sum(Ap(y / mr, k, y % mr) * Bp(x / nr, k, x % nr), {k}); },
      "C");
  // Register blocking (docs/gemm-schedule.md): 8x32 tiles of C accumulate in a local buffer
  // that LLVM keeps in 16 zmm registers; per k step, 2 vector loads of B, 8 broadcasts of Ap
  // and 16 FMAs. The 32-column panel loop is outermost and parallel, so a panel of B stays in
  // cache while every row block uses it.
  auto s = te::create_schedule({C});
  auto CL = s.cache_write(C, "local");
  auto [yo, xo, yi, xi] = s[C].tile(s[C].op_axis()[0], s[C].op_axis()[1], mr, nr);
  s[C].reorder({xo, yo, yi, xi});
  s[CL].compute_at(s[C], yo);
  auto cy = s[CL].op_axis()[0], cx = s[CL].op_axis()[1];
  auto [cxo, cxi] = s[CL].split(cx, 16);
  s[CL].reorder({k, cy, cxo, cxi});
  s[CL].unroll(cy);
  s[CL].unroll(cxo);
  s[CL].vectorize(cxi);
  auto [xio, xii] = s[C].split(xi, 16);
  s[C].vectorize(xii);
  s[C].parallel(xo);
  for (const te::Tensor& P : {Ap, Bp}) {
    s[P].parallel(s[P].op_axis()[0]);
    s[P].vectorize(s[P].op_axis()[2]);
  }
  std::cout << "Schedule:\n" << s.to_string() << "\n";
  tir::PrimFunc f = tir::lower(s, {A, B, C}, "matmul");
  if (show_ir) std::cout << "Lowered loop program:\n" << f << "\n";
  runtime::Module m = build({f}, Target::host());
  double compile_ms = ms_since(t0);
  std::cout << "Target: " << Target::host() << "\n";
  std::printf("Lower + compile: %.1f ms\n", compile_ms);

  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto a = runtime::NDArray::empty({n, n}, DataType::Float(32));
  auto b = runtime::NDArray::empty({n, n}, DataType::Float(32));
  auto c = runtime::NDArray::empty({n, n}, DataType::Float(32));
  for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = dist(rng);
  for (int64_t i = 0; i < b.numel(); ++i) b.data_as<float>()[i] = dist(rng);
  std::fill(c.data_as<float>(), c.data_as<float>() + c.numel(), NAN);
  runtime::PackedFunc fn = m.get_function("matmul");
  fn(a, b, c);

  // Naive reference (k outermost for speed; the same sum).
  std::vector<float> ref(static_cast<size_t>(n) * n, 0.0f);
  const float* pa = a.data_as<float>();
  const float* pb = b.data_as<float>();
  for (int kk = 0; kk < n; ++kk)
    for (int y = 0; y < n; ++y) {
      float av = pa[kk * n + y];
      for (int x = 0; x < n; ++x) ref[y * n + x] += av * pb[kk * n + x];
    }
  auto max_err = [&](const float* got) {
    double e = 0;
    for (size_t i = 0; i < ref.size(); ++i)
      e = std::max(e, std::abs(static_cast<double>(got[i]) - ref[i]) / (1.0 + std::abs(ref[i])));
    return e;
  };
  double err = max_err(c.data_as<float>());
  std::printf("Max relative error vs naive C++ reference: %.2e\n", err);
  if (!(err < 1e-3)) {
    std::cerr << "kiln demo: result does not match the reference\n";
    return 1;
  }
  // Time it.
  for (int w = 0; w < 2; ++w) fn(a, b, c);
  std::vector<double> times;
  for (int r = 0; r < 10; ++r) {
    auto t = Clock::now();
    fn(a, b, c);
    times.push_back(ms_since(t));
  }
  std::sort(times.begin(), times.end());
  double med = times[times.size() / 2];
  std::printf("Run time (median of 10, %d thread(s)): %.2f ms = %.1f GFLOP/s\n",
              kiln_get_num_threads(), med, 2.0 * n * n * n / (med * 1e6));

  // Deploy: export a shared library and load it back with the runtime alone.
  std::filesystem::create_directories(out_dir);
  std::string so = out_dir + "/matmul.so";
  m.export_library(so);
  runtime::Module loaded = runtime::Module::load(so);
  std::fill(c.data_as<float>(), c.data_as<float>() + c.numel(), NAN);
  loaded.get_function("matmul")(a, b, c);
  double err2 = max_err(c.data_as<float>());
  std::printf("Exported %s; reloaded with the runtime, max relative error %.2e\n", so.c_str(),
              err2);
  if (!(err2 < 1e-3)) {
    std::cerr << "kiln demo: exported library gives a wrong result\n";
    return 1;
  }
  // A wrong call returns an error, not a crash.
  try {
    auto bad = runtime::NDArray::empty({n, n / 2}, DataType::Float(32));
    fn(a, b, bad);
  } catch (const Error& e) {
    std::cout << "A call with a wrong shape is refused: " << e.what() << "\n";
  }
  return 0;
}

struct DemoOptions {
  bool gemm = false, show_ir = false;
  int n = 1024, threads = 0, repeat = 10;
  std::string out_dir = "build/demo";
};

int run_resnet_demo(const DemoOptions& o) {
  apply_threads(o.threads);
  std::cout << "Kiln demo: ResNet-18 (torchvision's topology, built by Kiln's model builder with "
               "seeded random weights), batch 1, 3x224x224\n";
  auto t0 = Clock::now();
  graph::Graph g = frontend::resnet18(1, 0, 224);
  int64_t num_params = 0;
  for (int i : g.constant_nodes()) num_params += g.node(i).value.numel();
  graph::CompiledModule m = graph::build_module(g, Target::host());
  double compile_ms = ms_since(t0);
  std::printf("Model: %d nodes, %.1f M parameters\n", g.num_nodes(), num_params / 1e6);
  std::cout << "Target: " << Target::host() << "\n";
  std::printf("Compile: %.0f ms, %d kernels, %s\n", compile_ms, m.num_kernels,
              memory_summary(m).c_str());

  runtime::GraphExecutor ex = executor_of(m, "builtin:resnet18");
  set_random_inputs(ex, 0);
  ex.run();
  runtime::NDArray logits = ex.get_output(0);
  std::vector<double> z = to_doubles(logits);
  KILN_ICHECK(z.size() == 1000) << "resnet18 gave " << type_str(logits) << ", expected [1, 1000]";
  for (double v : z)
    KILN_ICHECK(std::isfinite(v)) << "resnet18 produced a non-finite logit: a compiler bug";
  double zmax = *std::max_element(z.begin(), z.end()), sum = 0;
  std::vector<double> p(z.size());
  for (size_t i = 0; i < z.size(); ++i) sum += p[i] = std::exp(z[i] - zmax);
  std::vector<int> idx(z.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + 5, idx.end(),
                    [&](int a, int b) { return p[a] > p[b]; });
  std::cout << "Top-5 on a random image (seed 0):\n";
  for (int r = 0; r < 5; ++r)
    std::printf("  class %4d  p = %.4f  (logit %+.3f)\n", idx[r], p[idx[r]] / sum, z[idx[r]]);
  Latency l = time_runs(ex, 2, o.repeat);
  std::printf("Latency (median of %d, %d thread(s)): %.2f ms (min %.2f, max %.2f)\n", l.repeat,
              kiln_get_num_threads(), l.median, l.min, l.max);
  return 0;
}

}  // namespace

Command add_demo_command(CLI::App& app) {
  auto o = std::make_shared<DemoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "demo", "Compile and run the built-in ResNet-18 (--gemm: the paper's matrix product)");
  cmd->add_flag("--gemm", o->gemm, "Run the matrix-product demo instead");
  cmd->add_option("--size", o->n, "--gemm: matrix size n (n x n x n), a multiple of 32")
      ->check(CLI::Validator(
          [](std::string& v) {
            std::string e = int_range(32, 8192)(v);  // the range first: no stoi on "abc"
            if (e.empty() && std::stoi(v) % 32) e = "must be a multiple of 32, got " + v;
            return e;
          },
          "INT in 32..8192, a multiple of 32"));
  add_threads_option(cmd, o->threads);
  cmd->add_option("--repeat", o->repeat, "Timed runs of ResNet-18 (default 10)")
      ->check(int_range(1, 100000));
  cmd->add_option("--out", o->out_dir, "--gemm: where to write matmul.so");
  cmd->add_flag("--show-ir", o->show_ir, "--gemm: print the lowered loop program");
  return {cmd, [o, cmd] {
            if (!o->gemm) {
              for (const char* f : {"--size", "--out", "--show-ir"})
                KILN_USER_CHECK(cmd->count(f) == 0) << f << " is an option of `kiln demo --gemm`";
              return run_resnet_demo(*o);
            }
            KILN_USER_CHECK(cmd->count("--repeat") == 0)
                << "--repeat is an option of the ResNet-18 demo, not of --gemm";
            return run_gemm_demo(o->n, o->threads, o->out_dir, o->show_ir);
          }};
}

}  // namespace kiln::cli
