// The module build_llvm returns. Compilation happens once: the optimized llvm::Module is
// compiled to an in-memory relocatable object (PIC). The JIT (ORC LLJIT, created on the first
// lookup) loads that object and resolves runtime symbols (kiln_parallel_for, libm, extern C
// functions of the executable) in the current process; export_library writes the same object
// to a temporary file and links it with the system C compiler (`cc -shared`, run with
// posix_spawnp, no shell) into the shared library Module::load opens; for another
// architecture with the GNU cross compiler named after the triple (aarch64-linux-gnu-gcc).
// The object of part 0 carries the target record (section .kiln_target) the runtime checks.
// get_source prints the optimized IR kept as text, or assembly from a clone of the module.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

// LLVM 16's ORC headers trip -Wredundant-move under GCC; they are not our code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wredundant-move"
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#pragma GCC diagnostic pop
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "codegen_llvm.h"
#include "kiln/runtime/library_target.h"
#include "kiln/target/codegen.h"

extern char** environ;

namespace kiln::codegen {

namespace {

std::string llvm_error(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

/// Emits `m` as an object file or assembly with `tm`; the module is modified by codegen.
std::string emit(llvm::Module& m, llvm::TargetMachine* tm, llvm::CodeGenFileType kind) {
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  KILN_ICHECK(!tm->addPassesToEmitFile(pm, os, nullptr, kind))
      << "the target machine cannot emit this file type";
  pm.run(m);
  return std::string(buf.data(), buf.size());
}

/// Runs argv (argv[0] looked up in PATH) and returns its exit status; its stderr and stdout go
/// to `output`.
int run_command(const std::vector<std::string>& argv, std::string* output) {
  char log_path[] = "/tmp/kiln_link_XXXXXX";
  int fd = mkstemp(log_path);
  KILN_USER_CHECK(fd >= 0) << "export_library: cannot create a temporary file in /tmp";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, 1);
  posix_spawn_file_actions_adddup2(&actions, fd, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fd);
  int status = -1;
  if (rc == 0) {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  std::ifstream log(log_path);
  std::stringstream ss;
  ss << log.rdbuf();
  *output = ss.str();
  unlink(log_path);
  if (rc != 0) {
    *output = "cannot run '" + argv[0] + "': " + std::strerror(rc);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// Adds what the library is built for (runtime/library_target.h) to `m`: the global
/// `__kiln_target` in section .kiln_target, which the runtime reads from the file before it
/// loads it. Only the object file gets it (get_source shows the kernels alone; a test that
/// looks for an instruction's name in the assembly must not find it in the record's text).
void add_target_record(llvm::Module& m, const Target& target) {
  std::string record =
      runtime::library_target_text({target.triple(), target.str(), target.runtime_features()});
  llvm::Constant* init = llvm::ConstantDataArray::getString(m.getContext(), record, true);
  auto* gv = new llvm::GlobalVariable(m, init->getType(), true, llvm::GlobalValue::ExternalLinkage,
                                      init, "__kiln_target");
  gv->setSection(runtime::kLibraryTargetSection);
  gv->setAlignment(llvm::Align(1));
}

/// True when `name` (no '/') is an executable file in a directory of PATH.
bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  for (std::string dir; std::getline(ss, dir, ':');) {
    std::string file = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(file.c_str(), X_OK) == 0) return true;
  }
  return false;
}

/// The C compiler that links a library for `target`: KILN_CC (default `cc`) for the host's
/// architecture; for another one KILN_CROSS_CC, else the GNU cross compiler named after the
/// triple (`aarch64-linux-gnu-gcc` for aarch64-linux-gnu, aarch64-unknown-linux-gnu and
/// arm64-linux-gnu), which must be on PATH. A user error naming the Debian package otherwise.
std::string linker_for(const Target& target) {
  if (target.is_host_arch()) {
    const char* cc = std::getenv("KILN_CC");
    return cc && *cc ? cc : "cc";
  }
  if (const char* cc = std::getenv("KILN_CROSS_CC"); cc && *cc) return cc;
  const std::string triple = target.triple();
  std::vector<std::string> parts;
  std::stringstream ss(triple);
  for (std::string p; std::getline(ss, p, '-');) parts.push_back(p);
  std::vector<std::string> names{triple + "-gcc"};
  if (!parts.empty()) {
    std::string arch = parts[0] == "arm64" ? "aarch64" : parts[0];
    std::string os_env = parts.size() == 4   ? parts[2] + "-" + parts[3]
                         : parts.size() == 3 ? parts[1] + "-" + parts[2]
                                             : "linux-gnu";
    std::string gnu = arch + "-" + os_env + "-gcc";
    if (gnu != names[0]) names.push_back(gnu);
  }
  for (const std::string& n : names)
    if (on_path(n)) return n;
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : " or ") + n;
  const std::string pkg = "gcc-" + names.back().substr(0, names.back().size() - 4);
  KILN_ERROR << "export_library: no linker for target triple '" << triple << "' (target '"
             << target.str() << "'): " << list << " is not on PATH. Install the cross "
             << "compiler (Debian/Ubuntu: apt-get install " << pkg
             << ") or set KILN_CROSS_CC to a C compiler that links shared libraries for this "
                "triple";
}

}  // namespace

namespace {

/// One independently compiled part of a module: its own context, module (optimized IR, kept for
/// get_source) and target machine, and the object file emitted from it.
struct ModulePart {
  std::unique_ptr<llvm::LLVMContext> ctx;  // declared first: destroyed after the module
  std::unique_ptr<llvm::Module> module;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::string object;
};

/// A module compiled by LLVM: object files (one per part), run through ORC LLJIT or exported.
class LLVMModuleNode : public runtime::ModuleNode {
 public:
  LLVMModuleNode(std::vector<ModulePart> parts, Target target, std::vector<std::string> names,
                 std::string device_format, std::string device_code)
      : parts_(std::move(parts)),
        target_(std::move(target)),
        names_(std::move(names)),
        device_format_(std::move(device_format)),
        device_code_(std::move(device_code)) {}

  std::string type_key() const override { return "llvm"; }
  std::string describe() const override {
    return "llvm (" + target_.str() +
           (device_code_.empty() ? "" : ", with " + device_format_ + " device code") + ")";
  }
  std::vector<std::string> function_names() const override { return names_; }

  KilnPackedCFunc get_function(const std::string& name) const override {
    if (std::find(names_.begin(), names_.end(), name) == names_.end()) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(name);
    if (it != cache_.end()) return it->second;
    init_jit();
    auto addr = jit_->lookup(name);
    KILN_USER_CHECK(static_cast<bool>(addr))
        << "llvm module: JIT lookup of '" << name << "' failed: " << llvm_error(addr.takeError());
    auto fn = addr->toPtr<KilnPackedCFunc>();
    cache_[name] = fn;
    return fn;
  }

  void export_library(const std::string& path) const override {
    std::vector<std::string> objs;
    auto cleanup = [&] {
      for (const std::string& o : objs) unlink(o.c_str());
    };
    for (const ModulePart& part : parts_) {
      char obj_path[] = "/tmp/kiln_obj_XXXXXX";
      int fd = mkstemp(obj_path);
      if (fd < 0) {
        cleanup();
        KILN_ERROR << "export_library: cannot create a temporary object file in /tmp";
      }
      objs.push_back(obj_path);
      bool ok = write(fd, part.object.data(), part.object.size()) ==
                static_cast<ssize_t>(part.object.size());
      close(fd);
      if (!ok) {
        cleanup();
        KILN_ERROR << "export_library: cannot write the object file " << obj_path;
      }
    }
    std::string cc;
    try {
      cc = linker_for(target_);
    } catch (...) {
      cleanup();
      throw;
    }
    std::vector<std::string> argv{cc, "-shared", "-o", path, "-x", "none"};
    argv.insert(argv.end(), objs.begin(), objs.end());
    argv.push_back("-lm");
    std::string out;
    int rc = run_command(argv, &out);
    cleanup();
    KILN_USER_CHECK(rc == 0) << "export_library: linking '" << path << "' failed (" << argv[0]
                             << " exited with status " << rc << "): " << out;
  }

  std::string get_source(const std::string& fmt) const {
    if (fmt == "ptx" || fmt == "cl") {
      KILN_USER_CHECK(fmt == device_format_)
          << "get_source: the module has no " << (fmt == "ptx" ? "CUDA" : "OpenCL")
          << " device code";
      return device_code_;
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::string r;
    for (const ModulePart& part : parts_) {
      if (fmt == "ll" || fmt == "llvm") {
        llvm::raw_string_ostream os(r);
        part.module->print(os, nullptr);
      } else if (fmt == "asm" || fmt == "s") {
        auto clone = llvm::CloneModule(*part.module);
        r += emit(*clone, part.tm.get(), llvm::CGFT_AssemblyFile);
      } else {
        KILN_ERROR << "get_source: unknown format '" << fmt << "' (known: ll, asm, ptx, cl)";
      }
    }
    return r;
  }

 private:
  void init_jit() const {
    if (jit_) return;
    KILN_USER_CHECK(target_.is_host_arch()) << "llvm module for target '" << target_.str()
                                            << "' cannot run on this machine; export it instead";
    auto [cpu, fs] = cpu_and_features(target_);
    llvm::orc::JITTargetMachineBuilder jtmb(parts_[0].tm->getTargetTriple());
    jtmb.setCPU(cpu);
    jtmb.setRelocationModel(llvm::Reloc::PIC_);
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create();
    KILN_USER_CHECK(static_cast<bool>(jit))
        << "llvm module: cannot create the JIT: " << llvm_error(jit.takeError());
    jit_ = std::move(*jit);
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        jit_->getDataLayout().getGlobalPrefix());
    KILN_USER_CHECK(static_cast<bool>(gen))
        << "llvm module: cannot search the process for symbols: " << llvm_error(gen.takeError());
    jit_->getMainJITDylib().addGenerator(std::move(*gen));
    for (size_t i = 0; i < parts_.size(); ++i) {
      auto buf = llvm::MemoryBuffer::getMemBufferCopy(parts_[i].object,
                                                      "kiln_module_" + std::to_string(i) + ".o");
      if (auto err = jit_->addObjectFile(std::move(buf))) {
        KILN_ERROR << "llvm module: the JIT cannot load the object: " << llvm_error(std::move(err));
      }
    }
  }

  std::vector<ModulePart> parts_;
  Target target_;
  std::vector<std::string> names_;
  std::string device_format_;  ///< "ptx", "cl" (build_gpu), "" for CPU modules
  std::string device_code_;
  mutable std::mutex mu_;
  mutable std::unique_ptr<llvm::orc::LLJIT> jit_;
  mutable std::unordered_map<std::string, KilnPackedCFunc> cache_;
};

/// Threads for code generation: KILN_COMPILE_THREADS, else the hardware's.
unsigned compile_threads() {
  if (const char* e = std::getenv("KILN_COMPILE_THREADS")) {
    int v = std::atoi(e);
    if (v > 0) return static_cast<unsigned>(v);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

runtime::Module build_llvm(const std::vector<tir::PrimFunc>& funcs, const Target& target) {
  KILN_USER_CHECK(target.kind_info().codegen == "llvm")
      << "build_llvm: target '" << target.str() << "' is not served by the llvm code generator";
  return build_llvm_host(funcs, target, "", "");
}

runtime::Module build_llvm_host(const std::vector<tir::PrimFunc>& funcs, const Target& target,
                                const std::string& device_format, const std::string& device_code) {
  // The module's functions; names must be unique across parts.
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const tir::PrimFunc& f : funcs) {
    KILN_USER_CHECK(!f->name.empty()) << "codegen llvm: a function has no name";
    KILN_USER_CHECK(seen.insert(f->name).second)
        << "codegen llvm: two functions are named '" << f->name << "'";
    names.push_back(f->name);
  }
  // Functions are dealt round-robin into parts compiled in parallel, each in its own LLVM
  // context (LLVM is thread-safe across contexts); part 0 carries the entry-point list.
  const unsigned threads = compile_threads();
  const size_t nparts = std::max<size_t>(1, std::min<size_t>(funcs.size(), 2 * threads));
  // Members of a family that shares a compute body (tir::share_compute_bodies) go to the part
  // of its first member, which emits the body; the others are dealt in turn.
  std::vector<size_t> part_of(funcs.size());
  {
    std::map<std::string, size_t> family_part;
    size_t next_part = 0;
    for (size_t k = 0; k < funcs.size(); ++k) {
      std::string family = funcs[k].attr("shared_compute");
      auto it = family.empty() ? family_part.end() : family_part.find(family);
      if (it != family_part.end()) {
        part_of[k] = it->second;
        continue;
      }
      part_of[k] = next_part++ % nparts;
      if (!family.empty()) family_part.emplace(family, part_of[k]);
    }
  }
  std::vector<ModulePart> parts(nparts);
  for (ModulePart& p : parts) {
    p.ctx = std::make_unique<llvm::LLVMContext>();
    p.tm = create_target_machine(target);
  }
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(nparts);
  auto work = [&] {
    for (size_t i = next++; i < nparts; i = next++) {
      try {
        ModulePart& p = parts[i];
        std::string name = funcs.empty() ? "kiln_module" : funcs[i]->name;
        CodeGenLLVM cg(p.ctx.get(), p.tm.get(), target, name);
        if (i == 0 && !device_code.empty()) cg.add_device_code(device_code);
        for (size_t k = 0; k < funcs.size(); ++k)
          if (part_of[k] == i) cg.add_function(funcs[k]);
        p.module = cg.finish(i == 0 ? &names : nullptr);
        auto clone = llvm::CloneModule(*p.module);
        if (i == 0) add_target_record(*clone, target);
        p.object = emit(*clone, p.tm.get(), llvm::CGFT_ObjectFile);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::min<size_t>(threads, nparts); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return runtime::Module(make_object<LLVMModuleNode>(std::move(parts), target, std::move(names),
                                                     device_format, device_code));
}

std::string get_source(const runtime::Module& m, const std::string& fmt) {
  KILN_USER_CHECK(m.defined()) << "get_source: the module is undefined";
  const auto* n = dynamic_cast<const LLVMModuleNode*>(m.node.get());
  KILN_USER_CHECK(n != nullptr) << "get_source: module of type " << m.type_key()
                                << " is not an llvm module";
  return n->get_source(fmt);
}

}  // namespace kiln::codegen
