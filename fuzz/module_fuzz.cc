// libFuzzer target: the module loader, as `kiln run` loads a module directory, on buffers.
// The input is graph.json, optionally followed by the separator line "#KILN-PARAMS#" and the
// bytes of params.bin, optionally followed by "#KILN-LIB#" and the bytes of a lib.so. The
// graph and params are parsed and bound exactly as GraphExecutor::load does
// (runtime::load_params_from_bytes, GraphExecutor::create), against a module whose every
// function is a stub that returns success: a fuzz input is never loaded as code. A lib.so
// part only goes through check_elf_library, the check Module::load runs before dlopen. An
// executor that was created is run once and its outputs read. Anything but success or a user
// error is a finding.
#include <cstdlib>

#include "fuzz_util.h"
#include "kiln/runtime/graph_executor.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/params.h"

namespace {

int32_t stub_function(const KilnValue*, const int32_t*, int32_t) { return 0; }

/// Every name resolves to stub_function.
class StubModule : public kiln::runtime::ModuleNode {
 public:
  std::string type_key() const override { return "fuzz_stub"; }
  KilnPackedCFunc get_function(const std::string&) const override { return stub_function; }
};

}  // namespace

// A memory plan beyond this is a user error (graph_executor.cc), not an allocation: tampered
// shapes of terabytes had reached the allocator, which under ASan aborts instead of failing.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ::setenv("KILN_MAX_MEMORY_MB", "256", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static kiln::fuzz::MemFile lib_file("module_fuzz_lib");
  static kiln::runtime::Module stub(kiln::make_object<StubModule>());
  std::string bytes(reinterpret_cast<const char*>(data), size), graph, rest, params, lib;
  bool has_params = kiln::fuzz::split_at(bytes, "\n#KILN-PARAMS#\n", graph, rest);
  bool has_lib = kiln::fuzz::split_at(rest, "\n#KILN-LIB#\n", params, lib);
  if (has_lib) {
    lib_file.set(lib.data(), lib.size());
    kiln::fuzz::expect_user_errors_only(
        "module_fuzz", bytes, [&] { kiln::runtime::check_elf_library(lib_file.path(), "lib.so"); });
  }
  kiln::fuzz::expect_user_errors_only("module_fuzz", bytes, [&] {
    std::map<std::string, kiln::runtime::NDArray> p;
    if (has_params) p = kiln::runtime::load_params_from_bytes(params, "params.bin");
    kiln::runtime::GraphExecutor ex = kiln::runtime::GraphExecutor::create(graph, stub, p);
    ex.run();
    for (int i = 0; i < ex.num_outputs(); ++i) ex.get_output(i);
  });
  return 0;
}
