// PackedFunc and Module: calling a hand-written packed function through the variadic call
// (argument packing and type codes), the error path turning a return code into kiln::Error
// with the callee's message, function lookup errors listing the module's functions, export of
// a module that cannot be exported, Module::load errors naming the path, the checks of a
// library's file before dlopen (hand-made ELF headers: another machine, 32-bit, an executable,
// header tables and segments beyond the end; a FIFO; a link to /dev/zero) and, when a C
// compiler is available, loading a real library that calls kiln_parallel_for.
#include "kiln/runtime/module.h"

#include <elf.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "common/error.h"
#include "kiln/support/error.h"

namespace kiln::runtime {
namespace {

using ::kiln::testing::error_of;

/// fill(out: float32 array, value: float, count: int) writes `value` into the first `count`
/// elements of `out`; checks its arguments like generated code does.
int32_t fill_packed(const KilnValue* args, const int32_t* codes, int32_t num_args) {
  if (num_args != 3) {
    kiln_set_last_error(("fill: expected 3 arguments, got " + std::to_string(num_args)).c_str());
    return -1;
  }
  if (codes[0] != kKilnArrayHandle || codes[1] != kKilnFloat || codes[2] != kKilnInt) {
    kiln_set_last_error("fill: bad argument type codes");
    return -1;
  }
  auto* a = static_cast<KilnArray*>(args[0].v_handle);
  if (a->dtype.code != DataType::kFloat || a->dtype.bits != 32 || a->ndim != 1) {
    kiln_set_last_error("fill: argument 0 must be a 1-d float32 array");
    return -1;
  }
  if (args[2].v_int64 > a->shape[0]) {
    kiln_set_last_error("fill: count exceeds the array's extent");
    return -2;
  }
  for (int64_t i = 0; i < args[2].v_int64; ++i) {
    static_cast<float*>(a->data)[i] = static_cast<float>(args[1].v_float64);
  }
  return 0;
}

/// Records the type codes it was called with.
int32_t record_codes(const KilnValue* args, const int32_t* codes, int32_t num_args) {
  static std::string* out = nullptr;
  if (num_args == 1 && codes[0] == kKilnOpaqueHandle) {
    out = static_cast<std::string*>(args[0].v_handle);
    return 0;
  }
  out->clear();
  for (int32_t i = 0; i < num_args; ++i) *out += std::to_string(codes[i]) + " ";
  return 0;
}

/// A module backed by a fixed table of C++ functions.
class TableModuleNode : public ModuleNode {
 public:
  std::string type_key() const override { return "table"; }
  KilnPackedCFunc get_function(const std::string& name) const override {
    auto it = table.find(name);
    return it == table.end() ? nullptr : it->second;
  }
  std::vector<std::string> function_names() const override {
    std::vector<std::string> names;
    for (auto& [n, f] : table) names.push_back(n);
    return names;
  }
  std::map<std::string, KilnPackedCFunc> table{{"fill", fill_packed}, {"record", record_codes}};
};

TEST(PackedFunc, CallsHandWrittenFunction) {
  Module m(make_object<TableModuleNode>());
  PackedFunc fill = m.get_function("fill");
  ASSERT_TRUE(fill.defined());
  NDArray a = NDArray::empty({8}, DataType::Float(32));
  for (int i = 0; i < 8; ++i) a.data_as<float>()[i] = -1.f;
  fill(a, 2.5, 5);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(a.data_as<float>()[i], i < 5 ? 2.5f : -1.f) << i;
  fill(a.raw(), 1.0f, int64_t{8});  // KilnArray* and float work too
  for (int i = 0; i < 8; ++i) EXPECT_EQ(a.data_as<float>()[i], 1.f);
}

TEST(PackedFunc, TypeCodes) {
  Module m(make_object<TableModuleNode>());
  PackedFunc record = m.get_function("record");
  std::string codes;
  record(static_cast<void*>(&codes));
  NDArray a = NDArray::empty({1}, DataType::Int(8));
  std::string s = "x";
  record(a, a.raw(), 1, 2u, true, 1.5f, 2.5, nullptr, "str", s, static_cast<void*>(&s));
  EXPECT_EQ(codes, "7 7 0 0 0 2 2 4 11 11 3 ");
  record();
  EXPECT_EQ(codes, "");
}

TEST(PackedFunc, ErrorBecomesException) {
  Module m(make_object<TableModuleNode>());
  PackedFunc fill = m.get_function("fill");
  NDArray a = NDArray::empty({4}, DataType::Float(32));
  EXPECT_EQ(error_of([&] { fill(a, 1.0, 10); }), "fill: count exceeds the array's extent");
  EXPECT_EQ(error_of([&] { fill(a, 1.0); }), "fill: expected 3 arguments, got 2");
  EXPECT_EQ(error_of([&] { fill(a, 1, 1); }), "fill: bad argument type codes");
  NDArray i32 = NDArray::empty({4}, DataType::Int(32));
  EXPECT_EQ(error_of([&] { fill(i32, 1.0, 1); }), "fill: argument 0 must be a 1-d float32 array");
  std::string msg = error_of([&] { fill(NDArray(), 1.0, 1); });
  EXPECT_NE(msg.find("argument 0 is an undefined NDArray"), std::string::npos) << msg;
  // The same through call_packed.
  KilnValue args[3];
  int32_t codes[3] = {kKilnArrayHandle, kKilnFloat, kKilnInt};
  args[0].v_handle = a.raw();
  args[1].v_float64 = 3.0;
  args[2].v_int64 = 4;
  fill.call_packed(args, codes, 3);
  EXPECT_EQ(a.data_as<float>()[3], 3.f);
  args[2].v_int64 = 5;
  EXPECT_EQ(error_of([&] { fill.call_packed(args, codes, 3); }),
            "fill: count exceeds the array's extent");
}

TEST(PackedFunc, ErrorWithoutMessage) {
  PackedFunc f([](const KilnValue*, const int32_t*, int32_t) -> int32_t { return 3; }, nullptr,
               "silent");
  std::string msg = error_of([&] { f(); });
  EXPECT_NE(msg.find("function 'silent' failed with code 3"), std::string::npos) << msg;
}

TEST(Module, MissingFunctionListsFunctions) {
  Module m(make_object<TableModuleNode>());
  EXPECT_EQ(m.type_key(), "table");
  EXPECT_EQ(m.function_names(), (std::vector<std::string>{"fill", "record"}));
  EXPECT_EQ(error_of([&] { m.get_function("conv2d"); }),
            "function 'conv2d' not found in module table; it has: fill, record");
}

TEST(Module, DefaultExportFails) {
  Module m(make_object<TableModuleNode>());
  std::string msg = error_of([&] { m.export_library("/tmp/x.so"); });
  EXPECT_NE(msg.find("module of type table cannot be exported"), std::string::npos) << msg;
  msg = error_of([] { Module().get_function("f"); });
  EXPECT_NE(msg.find("the module is undefined"), std::string::npos) << msg;
}

TEST(Module, LoadMissingFileNamesPath) {
  std::string msg = error_of([] { Module::load("/nonexistent/dir/model_lib.so"); });
  EXPECT_NE(msg.find("cannot load '/nonexistent/dir/model_lib.so'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;  // dlerror's text
}

TEST(Module, LoadInvalidFileNamesPath) {
  std::string path = ::testing::TempDir() + "kiln_not_a_library.so";
  std::ofstream(path) << "this is not an ELF file";
  std::string msg = error_of([&] { Module::load(path); });
  EXPECT_NE(msg.find("cannot load '" + path + "'"), std::string::npos) << msg;
  std::filesystem::remove(path);
}

/// An ELF header (and nothing else) of a 64-bit little-endian shared object for `machine`,
/// whose program header table (`phnum` entries) starts right after it.
std::string elf_header(uint16_t machine, uint16_t type = ET_DYN, uint16_t phnum = 1) {
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = type;
  eh.e_machine = machine;
  eh.e_version = EV_CURRENT;
  eh.e_phoff = sizeof(Elf64_Ehdr);
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = phnum;
  return std::string(reinterpret_cast<const char*>(&eh), sizeof eh);
}

// lib.so is checked before dlopen maps it (issue 26): what it is, and which check failed.
TEST(Module, LoadChecksTheFileBeforeTheLoader) {
  const std::string dir = ::testing::TempDir() + "kiln_module_elf_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/lib.so", prefix = "Module::load: cannot load '" + path + "': ";
  auto msg_for = [&](const std::string& bytes) {
    std::filesystem::remove(path);
    std::ofstream(path, std::ios::binary) << bytes;
    return error_of([&] { Module::load(path); });
  };
#if defined(__x86_64__)
  const uint16_t host = EM_X86_64, other = EM_AARCH64;
  EXPECT_EQ(msg_for(elf_header(other)),
            prefix +
                "built for aarch64, but this host is x86-64 (a module compiled for another target "
                "runs on a machine of that target)");
#else
  const uint16_t host = EM_AARCH64;
#endif
  std::string elf32 = elf_header(host);
  elf32[EI_CLASS] = ELFCLASS32;
  EXPECT_EQ(msg_for(elf32).rfind(prefix + "a 32-bit ELF file; this host loads 64-bit libraries", 0),
            0u);
  EXPECT_EQ(msg_for(elf_header(host, ET_EXEC)),
            prefix + "not a shared library (ELF type 2, an executable)");
  EXPECT_EQ(msg_for(elf_header(host, ET_DYN, 0)),
            prefix +
                "truncated or corrupt (64 bytes): its program header table is malformed (0 "
                "entries of 56 bytes)");
  EXPECT_EQ(msg_for(elf_header(host, ET_DYN, 3)),
            prefix +
                "truncated or corrupt (64 bytes): its program header table (bytes 64..232) lies "
                "beyond the end of the file");
  // A segment that claims bytes the file does not hold.
  Elf64_Phdr ph{};
  ph.p_type = PT_LOAD;
  ph.p_offset = 0;
  ph.p_filesz = 1 << 20;
  EXPECT_EQ(msg_for(elf_header(host) + std::string(reinterpret_cast<const char*>(&ph), sizeof ph)),
            prefix +
                "truncated or corrupt (120 bytes): its segment 0 (bytes 0..1048576) lies beyond "
                "the end of the file");
  ph.p_offset = ~uint64_t{0} - 10;  // offset + size overflows
  EXPECT_NE(msg_for(elf_header(host) + std::string(reinterpret_cast<const char*>(&ph), sizeof ph))
                .find("its segment 0 (bytes 18446744073709551605..(overflow)) lies beyond"),
            std::string::npos);
  EXPECT_EQ(msg_for("\x7f"
                    "EL"),
            prefix +
                "not a shared library (no ELF header; a module's lib.so "
                "is written by `kiln compile`)");
  EXPECT_EQ(msg_for(elf_header(host).substr(0, 20)),
            prefix + "truncated ELF header (the file has 20 bytes, the header 64)");
  // Not a regular file: never opened by the loader.
  std::filesystem::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { Module::load(path); }), prefix + "not a regular file (a FIFO)");
  std::filesystem::remove(path);
  std::filesystem::create_symlink("/dev/zero", path);
  EXPECT_EQ(error_of([&] { Module::load(path); }),
            prefix + "not a regular file (a symbolic link to '/dev/zero', a character device)");
  std::filesystem::remove_all(dir);
}

/// A library in the shape the compiler writes: packed functions, __kiln_func_names, and a call
/// to kiln_parallel_for resolved against libkiln_runtime.so at load time.
constexpr const char* kLibSource = R"(
#include <stdint.h>
typedef union { int64_t v_int64; double v_float64; void* v_handle; const char* v_str; } V;
typedef struct { void* data; int32_t dt, di; int32_t ndim; uint8_t c, b; uint16_t l;
                 int64_t* shape; int64_t* strides; uint64_t off; } A;
int32_t kiln_parallel_for(int64_t, int32_t (*)(int64_t, int64_t, void*), void*);
void kiln_set_last_error(const char*);
static int32_t body(int64_t b, int64_t e, void* p) {
  float* x = (float*)p;
  for (int64_t i = b; i < e; ++i) x[i] = 2.0f * x[i] + 1.0f;
  return 0;
}
__attribute__((visibility("default"))) int32_t scale(const V* a, const int32_t* c, int32_t n) {
  if (n != 1 || c[0] != 7) { kiln_set_last_error("scale: expected one array"); return -1; }
  A* t = (A*)a[0].v_handle;
  return kiln_parallel_for(t->shape[0], body, t->data);
}
__attribute__((visibility("default"))) int32_t noop(const V* a, const int32_t* c, int32_t n) {
  return 0;
}
__attribute__((visibility("default"))) const char __kiln_func_names[] = "scale\0noop\0";
)";

TEST(Module, LoadCompiledLibrary) {
  std::string dir = ::testing::TempDir() + "kiln_module_test_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::string src = dir + "/lib.c", lib = dir + "/lib.so";
  std::ofstream(src) << kLibSource;
  std::string cmd = "cc -shared -fPIC -O1 -o " + lib + " " + src + " > /dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "no C compiler to build a test library";
  }
  {
    Module m = Module::load(lib);
    EXPECT_EQ(m.type_key(), "shared_library");
    EXPECT_EQ(m.function_names(), (std::vector<std::string>{"scale", "noop"}));
    PackedFunc scale = m.get_function("scale");
    m = Module();  // the PackedFunc keeps the library loaded
    NDArray a = NDArray::empty({1000}, DataType::Float(32));
    for (int i = 0; i < 1000; ++i) a.data_as<float>()[i] = static_cast<float>(i);
    scale(a);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(a.data_as<float>()[i], 2.f * i + 1.f) << i;
    EXPECT_EQ(error_of([&] { scale(1); }), "scale: expected one array");
  }
  Module m = Module::load(lib);
  // Only listed names are functions, even though the library also sees kiln_parallel_for.
  std::string msg = error_of([&] { m.get_function("kiln_parallel_for"); });
  EXPECT_NE(msg.find("not found in module shared_library '" + lib + "'; it has: scale, noop"),
            std::string::npos)
      << msg;
  m.export_library(dir + "/copy.so");
  EXPECT_EQ(Module::load(dir + "/copy.so").function_names().size(), 2u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::runtime
