// Builds a small kernel with the full compiler and exports it as a shared library for
// deploy_test.cc, which loads it with the runtime alone. Usage: kiln-export-fixture <dir>;
// writes <dir>/add.so holding `add_one` (C[i, j] = A[i, j] + B[i, j] + 1 over float32 [16, 64],
// with a parallel outer loop and a 16-lane vector inner loop).
#include <filesystem>
#include <iostream>

#include "kiln/ir/op.h"
#include "kiln/support/error.h"
#include "kiln/target/build.h"

using namespace kiln;      // NOLINT
using namespace kiln::ir;  // NOLINT

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " <output directory>\n";
    return 2;
  }
  try {
    std::filesystem::create_directories(argv[1]);
    VarMap<Buffer> buffers;
    std::vector<Var> params;
    std::vector<Buffer> bufs;
    for (const char* name : {"A", "B", "C"}) {
      Var p(name, DataType::Handle());
      Buffer b = Buffer::make(name, DataType::Float(32), {Expr(16), Expr(64)});
      params.push_back(p);
      buffers[p] = b;
      bufs.push_back(b);
    }
    Var i("i"), v("v");
    Expr idx = Ramp::make(i * 64 + v * 16, Expr(1), 16);
    DataType t = DataType::Float(32, 16);
    Stmt body = For::make(i, Expr(0), Expr(16), ForKind::kParallel,
                          For::make(v, Expr(0), Expr(4), ForKind::kSerial,
                                    Store::make(bufs[2]->data,
                                                Load::make(t, bufs[0]->data, idx) +
                                                    Load::make(t, bufs[1]->data, idx) +
                                                    Broadcast::make(Expr(1.0f), 16),
                                                idx)));
    auto f = tir::PrimFunc::make("add_one", params, buffers, body);
    runtime::Module m = build({f}, Target::host());
    std::string path = std::string(argv[1]) + "/add.so";
    m.export_library(path);
    std::cout << "wrote " << path << "\n";
  } catch (const Error& e) {
    std::cerr << "export_fixture: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
