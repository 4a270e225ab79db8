// libFuzzer target: the ONNX importer, as `kiln compile` reads a model: the bytes are parsed
// (frontend::parse_onnx_model: protobuf, then the checks onnx.checker makes) and converted to
// the graph IR with default options (frontend::import_onnx, which types every node and folds
// constant subgraphs). A malformed or unsupported model must be refused with a user error that
// names the problem; a crash, a sanitizer report, an internal error or another exception is a
// finding. Nothing is compiled beyond what import itself folds.
#include "fuzz_util.h"
#include "kiln/frontend/onnx.h"
#include "kiln/frontend/onnx_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  kiln::fuzz::expect_user_errors_only("onnx_import_fuzz", bytes, [&] {
    kiln::frontend::OnnxModel m = kiln::frontend::parse_onnx_model(bytes, "fuzz.onnx");
    kiln::graph::Graph g = kiln::frontend::import_onnx(m);
    (void)g;
  });
  return 0;
}
