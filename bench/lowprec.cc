// kiln-bench-lowprec: int8 quantized models (issue 29). ResNet-50 and MobileNet-v2 with random
// weights, quantized once by ONNX Runtime's quantize_static (QDQ, per-channel int8 weights, int8
// activations; scripts/lowprec_models.py writes them with their fp32 originals, random inputs
// and ONNX Runtime's int8 outputs), run by Kiln in integer arithmetic (quantize_realize: VNNI
// convolutions with fused requantisation) against ONNX Runtime on the same int8 model and
// against Kiln on the fp32 model, in the same run, at each thread count. Kiln's int8 and fp32
// modules are timed interleaved (bench_util.h's measure_interleaved); ONNX Runtime in a child
// Python process (bench/lowprec_ort.py), right after them. It also reports the agreement: Kiln
// int8 against ONNX Runtime int8 on the saved inputs (the largest difference in quantization
// units of the output, the share of exactly equal elements) and Kiln int8 against Kiln fp32
// (top-1 agreement). Ratios are baseline median / Kiln int8 median (above 1: Kiln int8 faster).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "kiln/frontend/onnx.h"
#include "kiln/graph/build_module.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/runtime/npy.h"
#include "kiln/runtime/thread_pool.h"
#include "kiln/target/target.h"

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR "."
#endif

namespace {

namespace fs = std::filesystem;
using kiln::runtime::NDArray;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, sep);)
    if (!t.empty()) r.push_back(t);
  return r;
}

/// Compiles an ONNX file for the host; prints the compile time.
std::unique_ptr<kiln::runtime::GraphExecutor> compile(const fs::path& onnx, const char* what) {
  const double t0 = kiln::bench::now_ms();
  kiln::graph::Graph g = kiln::frontend::import_onnx(onnx.string());
  kiln::graph::CompiledModule cm = kiln::graph::build_module(g, kiln::Target::host(), {});
  std::cout << "  " << what << ": " << onnx.filename().string() << " compiled in "
            << kiln::bench::fixed((kiln::bench::now_ms() - t0) / 1e3, 1) << " s, " << cm.num_kernels
            << " kernels\n";
  return std::make_unique<kiln::runtime::GraphExecutor>(
      kiln::runtime::GraphExecutor::create(cm.graph_json, cm.lib, cm.params, "m"));
}

/// One input of a stack [n, ...] as its own array.
NDArray slice(const NDArray& stack, int64_t i) {
  std::vector<int64_t> shape(stack.shape().begin() + 1, stack.shape().end());
  NDArray r = NDArray::empty(shape, stack.dtype());
  const size_t bytes = r.nbytes();
  std::memcpy(r.data(), static_cast<const char*>(stack.data()) + bytes * size_t(i), bytes);
  return r;
}

int64_t argmax(const NDArray& a) {
  const float* p = a.data_as<float>();
  return std::max_element(p, p + a.numel()) - p;
}

double out_scale(const fs::path& json) {
  std::ifstream f(json);
  nlohmann::json j = nlohmann::json::parse(f);
  return j.at("out_scale").get<double>();
}

/// ONNX Runtime's median on `model` at `threads` threads (bench/lowprec_ort.py), or NaN.
double ort_median_ms(const std::string& python, const fs::path& model, int threads, int reps) {
  const std::string cmd = python + " " + KILN_SOURCE_DIR + "/bench/lowprec_ort.py " +
                          model.string() + " --threads " + std::to_string(threads) + " --reps " +
                          std::to_string(reps) + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return NAN;
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  if (pclose(p) != 0) return NAN;
  try {
    return nlohmann::json::parse(split(out, '\n').back()).at("median_ms").get<double>();
  } catch (const std::exception&) {
    return NAN;
  }
}

}  // namespace

int main(int argc, char** argv) {
  kiln::bench::CommandLine cl(
      argc, argv,
      {{"--models-dir", "folder of scripts/lowprec_models.py's files (default build/lowprec)"},
       {"--models", "comma-separated (default resnet50,mobilenet_v2)"},
       {"--threads", "comma-separated thread counts (default 1,2)"},
       {"--reps", "timed runs per runtime (default 10)"},
       {"--inputs", "inputs of the agreement checks, at most the saved ones (default 20)"},
       {"--python", "Python with onnxruntime (default SOURCE/.venv-bench/bin/python)"},
       {"--json", "also write the rows to this JSON file"}});
  const fs::path dir = cl.get_string("--models-dir", "build/lowprec");
  const int reps = static_cast<int>(cl.get_int("--reps", 10));
  const std::string python =
      cl.get_string("--python", std::string(KILN_SOURCE_DIR) + "/.venv-bench/bin/python");
  std::vector<int> threads;
  for (const std::string& t : split(cl.get_string("--threads", "1,2"), ',')) {
    const int n = std::atoi(t.c_str());
    if (n < 1) cl.fail("--threads: '" + t + "' is not a positive thread count");
    threads.push_back(n);
  }
  std::vector<nlohmann::ordered_json> rows;
  kiln::bench::Table table({"model", "threads", "kiln int8 ms", "kiln fp32 ms", "ort int8 ms",
                            "vs ort int8", "vs kiln fp32"});
  kiln::bench::Table agree(
      {"model", "inputs", "max |kiln - ort| (units)", "exact elements", "top-1 = fp32"});
  for (const std::string& name : split(cl.get_string("--models", "resnet50,mobilenet_v2"), ',')) {
    const fs::path q = dir / (name + "_int8.onnx"), f = dir / (name + "_fp32.onnx");
    if (!fs::exists(q) || !fs::exists(f)) {
      std::cerr << "kiln-bench-lowprec: " << q << " or " << f << " is missing; make them with\n  "
                << python << " " << KILN_SOURCE_DIR << "/scripts/lowprec_models.py " << dir << "\n";
      return 1;
    }
    std::cout << name << ":\n";
    auto exq = compile(q, "int8");
    auto exf = compile(f, "fp32");
    // Agreement on the saved inputs.
    NDArray xs = kiln::runtime::load_npy((dir / (name + ".inputs.npy")).string());
    NDArray ys = kiln::runtime::load_npy((dir / (name + "_int8.ort.npy")).string());
    const double s = out_scale(dir / (name + "_int8.json"));
    const int64_t n = std::min<int64_t>(cl.get_int("--inputs", 20), xs.shape()[0]);
    kiln::runtime::set_num_threads(threads.back());
    int64_t worst = 0, exact = 0, total = 0, top1 = 0;
    for (int64_t i = 0; i < n; ++i) {
      NDArray x = slice(xs, i), want = slice(ys, i);
      exq->set_input(0, x);
      exq->run();
      NDArray got = exq->get_output(0);
      exf->set_input(0, x);
      exf->run();
      top1 += argmax(got) == argmax(exf->get_output(0));
      for (int64_t k = 0; k < want.numel(); ++k) {
        const int64_t u =
            std::llround(std::abs(double(got.data_as<float>()[k]) - want.data_as<float>()[k]) / s);
        worst = std::max(worst, u);
        exact += u == 0;
        ++total;
      }
    }
    agree.add_row(
        {name, std::to_string(n), std::to_string(worst),
         kiln::bench::fixed(100.0 * double(exact) / double(std::max<int64_t>(total, 1)), 2) + "%",
         std::to_string(top1) + "/" + std::to_string(n)});
    // Timing.
    for (int t : threads) {
      kiln::runtime::set_num_threads(t);
      std::vector<kiln::bench::Timing> tm =
          kiln::bench::measure_interleaved({[&] { exq->run(); }, [&] { exf->run(); }}, 2, reps);
      const double ort = ort_median_ms(python, q, t, std::max(reps, 5));
      const double kq = tm[0].median_ms, kf = tm[1].median_ms;
      table.add_row({name, std::to_string(t), kiln::bench::fixed(kq, 2), kiln::bench::fixed(kf, 2),
                     std::isnan(ort) ? "n/a" : kiln::bench::fixed(ort, 2),
                     std::isnan(ort) ? "n/a" : kiln::bench::fixed(ort / kq, 2) + "x",
                     kiln::bench::fixed(kf / kq, 2) + "x"});
      nlohmann::ordered_json row = kiln::bench::make_row(
          name + "_int8", t, tm[0], {{"onnxruntime_int8", ort}, {"kiln_fp32", kf}});
      row["max_units_vs_onnxruntime"] = worst;
      row["exact_fraction_vs_onnxruntime"] = double(exact) / double(std::max<int64_t>(total, 1));
      row["top1_agreement_with_fp32"] = double(top1) / double(std::max<int64_t>(n, 1));
      rows.push_back(row);
    }
  }
  std::cout << "\n";
  table.print(std::cout);
  std::cout << "\n";
  agree.print(std::cout);
  kiln::bench::write_json_rows(cl.get_string("--json", ""), rows);
  return 0;
}
