// kiln-onnx-conformance: runs the ONNX backend test suite shipped in Debian's libonnx-testdata
// through Kiln. Each test directory holds model.onnx and test_data_set_*/{input,output}_i.pb;
// the model is imported, compiled with the graph builder, run by the runtime's GraphExecutor on
// the inputs, and every output compared with the reference (ONNX's tolerances: rtol 1e-3,
// atol 1e-7 for floats, exact for integers and booleans). Each test runs in a forked child
// with a time limit, so a crash or a hang costs one test. Sequence-typed inputs and outputs
// (SequenceProto test data) are flattened into one tensor per element. A test Kiln cannot handle
// must say so with an error (counted "unsupported"); a wrong number is a failure.
//
// Two counts (issue 26). The first, the one a user gets, gives every test input at run time, as
// `kiln compile` + `kiln run` would: a test whose importer wants one of its inputs constant (a
// shape, axes, TopK's k, Resize's scales, clip bounds) is unsupported, "needs a constant input:
// NAME", and so is a test the CLI cannot express (sequence or empty optional values, an input
// shape that contradicts the model's static one): "not expressible through kiln run: ...". It
// equals what scripts/conformance-cli.py counts through the CLI itself. The second ("bound") then
// binds such inputs as initializers, as a model with those values baked in would have them, and
// runs the test again; it equals the first for every other test. With --must-pass FILE the listed
// tests must pass or the program exits 1: a plain line must pass with run-time inputs, a line
// ending in "# bound" with bound inputs.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "kiln/frontend/onnx.h"
#include "kiln/graph/build_module.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/support/error.h"

namespace fs = std::filesystem;
using namespace kiln;  // NOLINT

namespace {

enum class Outcome { kPass, kFail, kUnsupported };

struct Result {
  Outcome outcome;
  std::string detail;
};

std::string compare(const runtime::NDArray& got, const runtime::NDArray& want, size_t out_index) {
  std::ostringstream os;
  os << "output " << out_index << ": ";
  if (got.shape() != want.shape()) {
    os << "shape " << runtime::shape_str(got.shape()) << ", expected "
       << runtime::shape_str(want.shape());
    return os.str();
  }
  if (got.dtype() != want.dtype()) {
    os << "dtype " << got.dtype() << ", expected " << want.dtype();
    return os.str();
  }
  DataType t = got.dtype();
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g, w;
    if (t == DataType::Float(32)) {
      g = got.data_as<float>()[i];
      w = want.data_as<float>()[i];
    } else if (t == DataType::Float(64)) {
      g = got.data_as<double>()[i];
      w = want.data_as<double>()[i];
    } else {
      if (std::memcmp(static_cast<const char*>(got.data()) + i * t.bytes(),
                      static_cast<const char*>(want.data()) + i * t.bytes(), t.bytes()) != 0) {
        os << "element " << i << " differs (" << t << ")";
        return os.str();
      }
      continue;
    }
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;
    if (!(std::abs(g - w) <= 1e-7 + 1e-3 * std::abs(w))) {
      os << "element " << i << " is " << g << ", expected " << w;
      return os.str();
    }
  }
  return "";
}

/// A test value: a tensor, or a sequence of tensors (a model input or output of sequence type);
/// an optional one may be empty (absent).
struct Value {
  bool is_sequence = false;
  bool absent = false;  ///< an empty optional
  runtime::NDArray tensor;
  std::vector<runtime::NDArray> items;
};

/// Reads `<prefix>_<i>.pb` for each i of `infos` that has a file, as a tensor or (when the
/// model declares a sequence) a sequence of tensors.
std::vector<Value> load_set(const fs::path& dir, const char* prefix,
                            const std::vector<frontend::OnnxValueInfo>& infos) {
  std::vector<Value> out;
  for (size_t i = 0;; ++i) {
    fs::path p = dir / (std::string(prefix) + "_" + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    Value v;
    if (i < infos.size() && infos[i].optional) {
      frontend::OnnxOptionalValue o = frontend::load_onnx_optional(p.string());
      v.absent = !o.present;
      v.is_sequence = o.is_sequence;
      v.tensor = o.tensor;
      v.items = o.items;
      out.push_back(std::move(v));
      continue;
    }
    v.is_sequence = i < infos.size() && infos[i].kind == "sequence";
    if (v.is_sequence)
      v.items = frontend::load_onnx_sequence(p.string());
    else
      v.tensor = frontend::load_onnx_tensor(p.string());
    out.push_back(std::move(v));
  }
  return out;
}

/// ONNX 1.12's test data stores bfloat16 tensors as UINT16 bits: the same bits as bfloat16.
void bfloat16_from_uint16_bits(runtime::NDArray& a, DataType declared) {
  if (!declared.is_bfloat16() || a.dtype() != DataType::UInt(16)) return;
  runtime::NDArray b = runtime::NDArray::empty(a.shape(), DataType::BFloat16());
  b.copy_from(a.data(), a.nbytes());
  a = b;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

/// The two outcomes of a test: inputs given at run time, and constant-like inputs bound.
struct Results {
  Result runtime, bound;
};

/// Runs one test in this process (the child). A sequence input `s` is flattened into tensor
/// inputs "s.0", "s.1", … (its element shapes given to the importer), a sequence output into
/// one output per element, compared with the expected sequence's tensors in order. When the
/// importer needs an input constant, `report_runtime` gets the run-time outcome
/// (unsupported, naming the inputs) before the bound run starts, so that a crash of the bound
/// run does not hide it; the returned runtime outcome is the same.
Results run_test(const fs::path& dir, const std::function<void(const Result&)>& report_runtime) {
  auto same = [](Result r) { return Results{r, r}; };
  frontend::OnnxModel m;
  std::vector<Value> inputs, outputs;
  fs::path data = dir / "test_data_set_0";
  try {
    m = frontend::load_onnx_model((dir / "model.onnx").string());
    inputs = load_set(data, "input", m.inputs);
    outputs = load_set(data, "output", m.outputs);
  } catch (const kiln::Error& e) {
    return same({Outcome::kUnsupported, e.what()});
  }
  if (inputs.size() != m.inputs.size())
    return same({Outcome::kUnsupported, "the test data does not match the model's inputs"});
  for (size_t i = 0; i < inputs.size(); ++i) {
    bfloat16_from_uint16_bits(inputs[i].tensor, m.inputs[i].dtype);
    for (runtime::NDArray& a : inputs[i].items) bfloat16_from_uint16_bits(a, m.inputs[i].dtype);
  }
  // The expected outputs, sequences flattened.
  std::vector<runtime::NDArray> expected;
  for (size_t i = 0; i < outputs.size(); ++i) {
    DataType declared = i < m.outputs.size() ? m.outputs[i].dtype : DataType::Void();
    if (outputs[i].absent)
      return same({Outcome::kUnsupported, "output " + std::to_string(i) +
                                              " is an empty optional, which Kiln cannot return"});
    if (!outputs[i].is_sequence) {
      bfloat16_from_uint16_bits(outputs[i].tensor, declared);
      expected.push_back(outputs[i].tensor);
    }
    for (runtime::NDArray& a : outputs[i].items) {
      bfloat16_from_uint16_bits(a, declared);
      expected.push_back(a);
    }
  }
  std::optional<Result> at_run_time;  // set when the run-time count differs from the bound one
  // What `kiln compile` + `kiln run` cannot express (scripts/conformance-cli.py runs the tests
  // that way): sequence or empty optional values (kiln run reads and writes .npy tensors), and
  // a test input whose shape differs from the model's static declaration (the CLI takes
  // --input-shape for symbolic dimensions only). The bound count still runs these.
  auto cli_limit = [&]() -> std::string {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const frontend::OnnxValueInfo& vi = m.inputs[i];
      if (inputs[i].is_sequence || inputs[i].absent)
        return "input '" + vi.name + "' is " +
               (inputs[i].absent ? "an empty optional" : "a sequence");
      if (!vi.has_shape) continue;
      std::vector<int64_t> declared;
      for (const frontend::OnnxDim& d : vi.shape) declared.push_back(d.size);
      bool is_static =
          std::all_of(declared.begin(), declared.end(), [](int64_t d) { return d >= 0; });
      if (is_static && declared != inputs[i].tensor.shape())
        return "input '" + vi.name + "' is " + runtime::shape_str(inputs[i].tensor.shape()) +
               ", the model declares " + runtime::shape_str(declared);
    }
    for (size_t i = 0; i < outputs.size(); ++i)
      if (outputs[i].is_sequence) return "output " + std::to_string(i) + " is a sequence";
    return "";
  };
  if (std::string why = cli_limit(); !why.empty()) {
    at_run_time = Result{Outcome::kUnsupported, "not expressible through kiln run: " + why};
    report_runtime(*at_run_time);
  }
  try {
    frontend::ImportOptions opt;
    opt.flatten_sequence_outputs = true;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string& name = m.inputs[i].name;
      if (inputs[i].absent) {
        opt.empty_optional_inputs.insert(name);
        continue;
      }
      if (!inputs[i].is_sequence) {
        opt.input_shapes[name] = inputs[i].tensor.shape();
        continue;
      }
      std::vector<std::vector<int64_t>>& shapes = opt.sequence_inputs[name];
      for (const runtime::NDArray& a : inputs[i].items) shapes.push_back(a.shape());
    }
    graph::Graph g;
    std::vector<bool> bound(inputs.size(), false);
    try {
      g = frontend::import_onnx(m, opt);
    } catch (const kiln::Error& e) {
      // Parameters given as graph inputs (shapes, axes, clip bounds, Resize's scales): the
      // run-time count stops here; the bound count binds integer, scalar and short 1-D inputs
      // as constants, as a deployed model would have them.
      if (std::string(e.what()).find("must be a constant") == std::string::npos) throw;
      frontend::OnnxModel m2 = m;
      m2.inputs.clear();
      std::string names;
      for (size_t i = 0; i < inputs.size(); ++i) {
        const runtime::NDArray& a = inputs[i].tensor;
        bool param =
            !inputs[i].is_sequence && !inputs[i].absent && !m.inputs[i].optional &&
            (i > 0 ? a.dtype().is_int() || a.numel() == 1 || (a.ndim() == 1 && a.numel() <= 8)
                   : a.ndim() == 0 || (a.dtype().is_int() && a.ndim() == 1));
        if (param) {
          m2.initializers[m.inputs[i].name] = a;
          bound[i] = true;
          names += (names.empty() ? "" : ", ") + m.inputs[i].name;
        } else {
          m2.inputs.push_back(m.inputs[i]);
        }
      }
      // "needs a constant input: shape (node 'Reshape_0' (Reshape): input 1 (shape) must be
      // a constant; ...)": the importer's message without the model's path.
      std::string why = first_line(e.what());
      std::string path = "'" + (dir / "model.onnx").string() + "', ";
      if (why.rfind(path, 0) == 0) why = why.substr(path.size());
      if (!at_run_time) {
        at_run_time = Result{Outcome::kUnsupported, "needs a constant input: " +
                                                        (names.empty() ? std::string("?") : names) +
                                                        " (" + why + ")"};
        report_runtime(*at_run_time);
      }
      g = frontend::import_onnx(m2, opt);
    }
    graph::CompiledModule cm = graph::build_module(g, Target::host(), {});
    runtime::GraphExecutor ex =
        runtime::GraphExecutor::create(cm.graph_json, cm.lib, cm.params, dir.filename().string());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (bound[i] || inputs[i].absent) continue;
      if (!inputs[i].is_sequence) ex.set_input(m.inputs[i].name, inputs[i].tensor);
      for (size_t k = 0; k < inputs[i].items.size(); ++k)
        ex.set_input(m.inputs[i].name + "." + std::to_string(k), inputs[i].items[k]);
    }
    ex.run();
    auto done = [&](Result r) { return Results{at_run_time.value_or(r), r}; };
    if (static_cast<size_t>(ex.num_outputs()) != expected.size())
      return done({Outcome::kFail, "the model has " + std::to_string(ex.num_outputs()) +
                                       " outputs, the test " + std::to_string(expected.size()) +
                                       " (sequences counted by their tensors)"});
    for (size_t i = 0; i < expected.size(); ++i) {
      std::string diff = compare(ex.get_output(static_cast<int>(i)), expected[i], i);
      if (!diff.empty()) return done({Outcome::kFail, diff});
    }
    return done({Outcome::kPass, ""});
  } catch (const kiln::Error& e) {
    Result r{Outcome::kUnsupported, e.what()};
    return {at_run_time.value_or(r), r};
  } catch (const std::exception& e) {
    Result r{Outcome::kFail, std::string("unexpected exception: ") + e.what()};
    return {at_run_time.value_or(r), r};
  }
}

/// Forks a child for the test; returns its two results (a crash or time-out is a failure of
/// the count that had no result yet). The child writes each result as a record "R" (run-time
/// inputs) or "B" (bound), the outcome, a tab and the detail, ended by a NUL byte.
Results run_isolated(const fs::path& dir, int timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) return {{Outcome::kFail, "pipe failed"}, {Outcome::kFail, "pipe failed"}};
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    auto send = [&](char kind, const Result& r) {
      std::string msg = kind + std::to_string(static_cast<int>(r.outcome)) + "\t" + r.detail;
      msg.push_back('\0');
      (void)!write(fds[1], msg.data(), msg.size());
    };
    bool sent = false;
    Results r = run_test(dir, [&](const Result& at_run_time) {
      send('R', at_run_time);
      sent = true;
    });
    if (!sent) send('R', r.runtime);
    send('B', r.bound);
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string buf;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  bool timed_out = false;
  for (;;) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, left) <= 0) continue;
    char tmp[4096];
    ssize_t n = read(fds[0], tmp, sizeof(tmp));
    if (n <= 0) break;
    buf.append(tmp, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  Result missing{Outcome::kFail, "the test process reported nothing"};
  if (timed_out) missing.detail = "timed out after " + std::to_string(timeout_s) + " s";
  if (WIFSIGNALED(status))
    missing.detail = "crashed with signal " + std::to_string(WTERMSIG(status));
  std::optional<Result> got[2];
  for (size_t at = 0, end; (end = buf.find('\0', at)) != std::string::npos; at = end + 1) {
    std::string rec = buf.substr(at, end - at);
    size_t tab = rec.find('\t');
    if (rec.size() < 2 || tab == std::string::npos || (rec[0] != 'R' && rec[0] != 'B')) continue;
    got[rec[0] == 'B'] =
        Result{static_cast<Outcome>(std::stoi(rec.substr(1, tab - 1))), rec.substr(tab + 1)};
  }
  return {got[0].value_or(missing), got[1].value_or(missing)};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Runs the ONNX backend node tests through Kiln"};
  std::string suite = "/usr/share/libonnx-testdata/data/node", filter, must_pass, write_passing,
              skip_file;
  int timeout_s = 60;
  bool verbose = false;
  app.add_option("--suite", suite, "Directory of test directories");
  app.add_option("--filter", filter, "Only tests whose name contains this");
  app.add_option("--must-pass", must_pass,
                 "File listing tests that must pass, one a line: with every input given at run "
                 "time, or, for a line ending in '# bound', with constant-like inputs bound");
  app.add_option("--write-passing", write_passing,
                 "Write the passing tests here in --must-pass's format (bound-only ones marked)");
  app.add_option("--skip", skip_file,
                 "File of tests not to run, one a line: 'test_name  # reason' (reason required)");
  app.add_option("--timeout", timeout_s, "Seconds per test")->check(CLI::PositiveNumber);
  app.add_flag("-v,--verbose", verbose, "One line per test");
  CLI11_PARSE(app, argc, argv);
  if (!fs::is_directory(suite)) {
    std::cerr << "kiln-onnx-conformance: no test suite at " << suite
              << " (install libonnx-testdata)\n";
    return 2;
  }
  // The skip list: every entry names a test and says why it is not run.
  std::map<std::string, std::string> skips;
  if (!skip_file.empty()) {
    std::ifstream in(skip_file);
    if (!in) {
      std::cerr << "kiln-onnx-conformance: cannot read " << skip_file << "\n";
      return 2;
    }
    int line_no = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      if (line.empty() || line[0] == '#') continue;
      size_t hash = line.find('#');
      std::string name = line.substr(0, line.find_first_of(" \t#"));
      std::string reason = hash == std::string::npos ? "" : line.substr(hash + 1);
      if (reason.find_first_not_of(" \t") == std::string::npos) {
        std::cerr << "kiln-onnx-conformance: " << skip_file << ":" << line_no << ": '" << name
                  << "' has no reason (write 'test_name  # why it is skipped')\n";
        return 2;
      }
      skips[name] = reason;
    }
  }
  std::vector<fs::path> tests;
  int skipped = 0;
  for (const auto& e : fs::directory_iterator(suite)) {
    if (!fs::exists(e.path() / "model.onnx") ||
        e.path().filename().string().find(filter) == std::string::npos)
      continue;
    if (auto it = skips.find(e.path().filename().string()); it != skips.end()) {
      ++skipped;
      if (verbose) std::cout << "SKIP " << it->first << ":" << it->second << "\n";
      continue;
    }
    tests.push_back(e.path());
  }
  std::sort(tests.begin(), tests.end());
  // Counts per kind: [0] inputs at run time, [1] constant-like inputs bound.
  struct Count {
    int passed = 0, failed = 0, unsupported = 0;
    std::set<std::string> passing;
    std::vector<std::string> failures;
    void add(const std::string& name, const Result& r) {
      switch (r.outcome) {
        case Outcome::kPass:
          ++passed;
          passing.insert(name);
          break;
        case Outcome::kFail:
          ++failed;
          failures.push_back(name + ": " + first_line(r.detail));
          break;
        case Outcome::kUnsupported:
          ++unsupported;
          break;
      }
    }
  } count[2];
  int needs_constant = 0;
  auto tag = [](Outcome o) {
    return o == Outcome::kPass ? "PASS" : o == Outcome::kFail ? "FAIL" : "UNSUPPORTED";
  };
  for (const fs::path& t : tests) {
    Results r = run_isolated(t, timeout_s);
    std::string name = t.filename().string();
    count[0].add(name, r.runtime);
    count[1].add(name, r.bound);
    bool differs = r.runtime.outcome != r.bound.outcome || r.runtime.detail != r.bound.detail;
    if (r.runtime.detail.rfind("needs a constant input", 0) == 0) ++needs_constant;
    if (verbose) {
      std::cout << tag(r.runtime.outcome) << " " << name;
      if (r.runtime.outcome != Outcome::kPass) std::cout << ": " << first_line(r.runtime.detail);
      if (differs) {
        std::cout << "; bound: " << tag(r.bound.outcome);
        if (r.bound.outcome != Outcome::kPass) std::cout << ": " << first_line(r.bound.detail);
      }
      std::cout << "\n";
    }
  }
  for (const std::string& f : count[0].failures) std::cout << "failed: " << f << "\n";
  for (const std::string& f : count[1].failures)
    if (std::find(count[0].failures.begin(), count[0].failures.end(), f) == count[0].failures.end())
      std::cout << "failed (bound): " << f << "\n";
  auto pct = [&](int n) {
    std::ostringstream os;
    os.setf(std::ios::fixed);
    os.precision(1);
    os << (tests.empty() ? 0.0 : 100.0 * n / static_cast<double>(tests.size() + skipped)) << "%";
    return os.str();
  };
  std::cout << "ONNX conformance (" << suite << "): " << tests.size() + skipped << " tests\n"
            << "every input given at run time (as kiln run takes them): " << count[0].passed
            << " passed (" << pct(count[0].passed) << "), " << count[0].failed << " failed, "
            << count[0].unsupported << " unsupported (" << needs_constant
            << " of them need a constant input), " << skipped << " skipped\n"
            << "constant-like inputs bound as initializers: " << count[1].passed << " passed ("
            << pct(count[1].passed) << "), " << count[1].failed << " failed, "
            << count[1].unsupported << " unsupported, " << skipped << " skipped\n";
  if (!write_passing.empty()) {
    std::ofstream out(write_passing);
    for (const std::string& n : count[1].passing)
      out << n << (count[0].passing.count(n) ? "" : "  # bound") << "\n";
  }
  // A wrong answer is never acceptable: any failure of either count fails the run (unsupported
  // is fine).
  int rc = count[0].failed > 0 || count[1].failed > 0 ? 1 : 0;
  if (!must_pass.empty()) {
    std::ifstream in(must_pass);
    if (!in) {
      std::cerr << "kiln-onnx-conformance: cannot read " << must_pass << "\n";
      return 2;
    }
    std::vector<std::string> regressions;
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      std::string name = line.substr(0, line.find_first_of(" \t#"));
      bool bound_only = line.find("# bound") != std::string::npos;
      if (!filter.empty() && name.find(filter) == std::string::npos) continue;
      if (!count[bound_only ? 1 : 0].passing.count(name))
        regressions.push_back(name +
                              (bound_only ? " (with bound inputs)" : " (inputs at run time)"));
    }
    for (const std::string& r : regressions) std::cout << "must pass, but did not: " << r << "\n";
    if (!regressions.empty()) rc = 1;
  }
  return rc;
}
