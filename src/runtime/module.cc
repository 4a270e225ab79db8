// Modules and packed calls. The shared-library module opens a compiled library with
// dlopen(RTLD_NOW | RTLD_LOCAL) so every undefined symbol (kiln_parallel_for, ...) is resolved
// at load time against the already loaded libkiln_runtime.so and a broken library fails at
// load, not at first call. It reads the library's `__kiln_func_names` list (NUL-separated,
// ended by an empty name) once; when the list exists only listed names are looked up, so a
// stray symbol of a dependency (malloc, kiln_parallel_for) is never mistaken for a packed
// function. The library is closed when the last Module or PackedFunc referring to it goes
// away. PackedFunc turns a non-zero return code into a kiln::Error with the callee's message.
// Before dlopen, check_elf_library validates the file: a regular file (not a FIFO, not a link
// to a device), an ELF shared library of this host's class, byte order and machine, whose
// program and section header tables and every segment and section lie inside the file. A
// truncated lib.so would otherwise be mapped by the loader and raise SIGBUS when it touches a
// page beyond the end of the file. It also reads the library's target record (section
// .kiln_target, library_target.h): a library for another machine is refused naming its target,
// and one whose CPU features this CPU lacks is refused before any of its code can run.
#include "kiln/runtime/module.h"

#include <dlfcn.h>
#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "kiln/runtime/library_target.h"
#include "kiln/support/error.h"
#include "kiln/support/file.h"

namespace kiln::runtime {
namespace {

/// Name of the symbol that lists a library's functions.
constexpr const char* kFuncNamesSymbol = "__kiln_func_names";

/// A library produced by the compiler, opened with dlopen.
class SharedLibraryModuleNode : public ModuleNode {
 public:
  SharedLibraryModuleNode(void* handle, std::string path)
      : handle_(handle), path_(std::move(path)) {
    if (auto* names = static_cast<const char*>(dlsym(handle_, kFuncNamesSymbol))) {
      has_names_ = true;
      for (const char* p = names; *p; p += names_.back().size() + 1) names_.emplace_back(p);
    }
  }
  ~SharedLibraryModuleNode() override { dlclose(handle_); }

  std::string type_key() const override { return "shared_library"; }
  std::string describe() const override { return "shared_library '" + path_ + "'"; }

  KilnPackedCFunc get_function(const std::string& name) const override {
    if (has_names_ && std::find(names_.begin(), names_.end(), name) == names_.end()) {
      return nullptr;
    }
    return reinterpret_cast<KilnPackedCFunc>(dlsym(handle_, name.c_str()));
  }

  std::vector<std::string> function_names() const override { return names_; }

  /// The library is already a deployable file: copy it.
  void export_library(const std::string& path) const override {
    std::error_code ec;
    std::filesystem::copy_file(path_, path, std::filesystem::copy_options::overwrite_existing, ec);
    KILN_USER_CHECK(!ec) << "export_library: cannot copy '" << path_ << "' to '" << path
                         << "': " << ec.message();
  }

 private:
  void* handle_;
  std::string path_;
  bool has_names_ = false;
  std::vector<std::string> names_;
};

/// A name for an ELF machine number.
std::string machine_name(unsigned m) {
  switch (m) {
    case EM_X86_64:
      return "x86-64";
    case EM_386:
      return "x86 (32-bit)";
    case EM_AARCH64:
      return "aarch64";
    case EM_ARM:
      return "arm (32-bit)";
    case EM_RISCV:
      return "riscv";
    case EM_PPC64:
      return "ppc64";
    case EM_S390:
      return "s390";
    default:
      return "ELF machine " + std::to_string(m);
  }
}

#if defined(__x86_64__)
constexpr unsigned kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr unsigned kHostMachine = EM_AARCH64;
#elif defined(__riscv)
constexpr unsigned kHostMachine = EM_RISCV;
#elif defined(__powerpc64__)
constexpr unsigned kHostMachine = EM_PPC64;
#else
constexpr unsigned kHostMachine = EM_NONE;  // not checked
#endif

/// `a + b <= limit`, without overflow.
bool fits(uint64_t a, uint64_t b, uint64_t limit) { return a <= limit && b <= limit - a; }

/// "bytes 4096..8200".
std::string byte_range(uint64_t off, uint64_t len) {
  return "bytes " + std::to_string(off) + ".." +
         (off > UINT64_MAX - len ? std::string("(overflow)") : std::to_string(off + len));
}

/// The checks of check_elf_library, the machine's only when `check_machine`, and the library's
/// target record (empty when it has none). The structure is checked before the record is
/// read, so a corrupt file is reported as such, whatever its machine.
LibraryTarget inspect_elf(const std::string& path, const std::string& what, bool check_machine) {
  static_assert(sizeof(void*) == 8, "the ELF check reads 64-bit headers");
  support::InputFile f(path, what, support::kMaxDataFileBytes);
  const uint64_t size = f.size();
  Elf64_Ehdr eh{};
  size_t got = f.read_some(&eh, sizeof eh);
  if (got < SELFMAG || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    f.fail("not a shared library (no ELF header; a module's lib.so is written by `kiln compile`)");
  }
  if (got < sizeof eh) {
    f.fail("truncated ELF header (the file has " + std::to_string(size) + " bytes, the header " +
           std::to_string(sizeof eh) + ")");
  }
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) {
    f.fail("a 32-bit ELF file; this host loads 64-bit libraries (built for " +
           machine_name(eh.e_machine) + ")");
  }
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    f.fail("a big-endian ELF file; this host is little-endian (built for " +
           machine_name(eh.e_machine) + ")");
  }
  if (check_machine && kHostMachine != EM_NONE && eh.e_machine != kHostMachine) {
    // A foreign library: name its target when its record can be read (an intact library).
    LibraryTarget record;
    try {
      record = inspect_elf(path, what, false);
    } catch (const Error&) {
    }
    std::string target, hint;
    if (record.known()) {
      target = " (target '" + record.target + "')";
      if (eh.e_machine == EM_AARCH64 && kHostMachine == EM_X86_64)
        hint = "; `kiln run DIR --emulate` runs an aarch64 module here under qemu-aarch64";
    }
    f.fail("built for " + machine_name(eh.e_machine) + target + ", but this host is " +
           machine_name(kHostMachine) +
           " (a module compiled for another target runs on a machine of that target" + hint + ")");
  }
  if (eh.e_type != ET_DYN) {
    f.fail("not a shared library (ELF type " + std::to_string(eh.e_type) +
           (eh.e_type == ET_EXEC  ? ", an executable"
            : eh.e_type == ET_REL ? ", an object file"
                                  : "") +
           ")");
  }
  const std::string corrupt = "truncated or corrupt (" + std::to_string(size) + " bytes): its ";
  // The program headers: dlopen maps every segment, and touching a page of a segment beyond
  // the end of the file raises SIGBUS.
  if (eh.e_phnum == 0 || eh.e_phentsize != sizeof(Elf64_Phdr)) {
    f.fail(corrupt + "program header table is malformed (" + std::to_string(eh.e_phnum) +
           " entries of " + std::to_string(eh.e_phentsize) + " bytes)");
  }
  const uint64_t ph_bytes = uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr);
  if (!fits(eh.e_phoff, ph_bytes, size)) {
    f.fail(corrupt + "program header table (" + byte_range(eh.e_phoff, ph_bytes) +
           ") lies beyond the end of the file");
  }
  // Section headers: dlopen does not need them, but a table that lies outside the file means
  // the file was cut.
  uint64_t sh_bytes = 0;
  if (eh.e_shoff != 0 && eh.e_shnum != 0) {
    if (eh.e_shentsize != sizeof(Elf64_Shdr)) {
      f.fail(corrupt + "section header entries have " + std::to_string(eh.e_shentsize) +
             " bytes, not " + std::to_string(sizeof(Elf64_Shdr)));
    }
    sh_bytes = uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr);
    if (!fits(eh.e_shoff, sh_bytes, size)) {
      f.fail(corrupt + "section header table (" + byte_range(eh.e_shoff, sh_bytes) +
             ") lies beyond the end of the file");
    }
  }
  // Both tables lie inside the file (checked above), so reading them is bounded by its size.
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  std::vector<Elf64_Shdr> sh(sh_bytes / sizeof(Elf64_Shdr));
  auto read_at = [&](uint64_t off, void* dst, size_t n) {
    if (::pread(f.fd(), dst, n, static_cast<off_t>(off)) != static_cast<ssize_t>(n)) {
      f.fail("cannot read its headers: " + std::string(std::strerror(errno)));
    }
  };
  read_at(eh.e_phoff, ph.data(), ph_bytes);
  if (sh_bytes) read_at(eh.e_shoff, sh.data(), sh_bytes);
  for (size_t i = 0; i < ph.size(); ++i) {
    if (ph[i].p_type == PT_NULL) continue;
    if (!fits(ph[i].p_offset, ph[i].p_filesz, size)) {
      f.fail(corrupt + "segment " + std::to_string(i) + " (" +
             byte_range(ph[i].p_offset, ph[i].p_filesz) + ") lies beyond the end of the file");
    }
  }
  for (size_t i = 0; i < sh.size(); ++i) {
    if (sh[i].sh_type == SHT_NOBITS || sh[i].sh_type == SHT_NULL) continue;
    if (!fits(sh[i].sh_offset, sh[i].sh_size, size)) {
      f.fail(corrupt + "section " + std::to_string(i) + " (" +
             byte_range(sh[i].sh_offset, sh[i].sh_size) + ") lies beyond the end of the file");
    }
  }
  // The target record: the section named .kiln_target (names are in section e_shstrndx).
  LibraryTarget record;
  if (eh.e_shstrndx != SHN_UNDEF && eh.e_shstrndx < sh.size() &&
      sh[eh.e_shstrndx].sh_type == SHT_STRTAB) {
    const Elf64_Shdr& names = sh[eh.e_shstrndx];
    constexpr uint64_t kMaxBytes = uint64_t{1} << 20;  // both tables are small
    if (names.sh_size > kMaxBytes) {
      f.fail(corrupt + "section name table has " + std::to_string(names.sh_size) + " bytes");
    }
    std::string strtab(names.sh_size, '\0');
    read_at(names.sh_offset, strtab.data(), strtab.size());
    const std::string want = kLibraryTargetSection;
    for (const Elf64_Shdr& s : sh) {
      if (s.sh_name >= strtab.size() ||
          strtab.compare(s.sh_name, want.size() + 1, want.c_str(), want.size() + 1) != 0) {
        continue;
      }
      if (s.sh_type == SHT_NOBITS || s.sh_size > kMaxBytes) {
        f.fail(corrupt + "section " + want + " is malformed (" + std::to_string(s.sh_size) +
               " bytes)");
      }
      std::string text(s.sh_size, '\0');
      read_at(s.sh_offset, text.data(), text.size());
      text.resize(std::min(text.size(), text.find('\0')));
      record = parse_library_target(text, what);
      break;
    }
  }
  return record;
}

}  // namespace

void check_elf_library(const std::string& path, const std::string& what) {
  inspect_elf(path, what, true);
}

LibraryTarget read_library_target(const std::string& path) {
  return inspect_elf(path, "library '" + path + "'", false);
}

void ModuleNode::export_library(const std::string& path) const {
  KILN_ERROR << "module of type " << type_key() << " cannot be exported (to '" << path << "')";
}

std::vector<std::string> ModuleNode::function_names() const { return {}; }

std::string ModuleNode::describe() const { return type_key(); }

void PackedFunc::call_packed(const KilnValue* args, const int32_t* type_codes,
                             int32_t num_args) const {
  KILN_USER_CHECK(fn_ != nullptr) << "PackedFunc: calling an undefined function";
  kiln_set_last_error("");
  int32_t rc = fn_(args, type_codes, num_args);
  if (rc == 0) return;
  std::string msg = kiln_get_last_error();
  if (msg.empty()) {
    KILN_ERROR << "function '" << name_ << "' failed with code " << rc
               << " and did not set an error message";
  }
  throw Error(msg);
}

void PackedFunc::undefined_array_arg(size_t index) const {
  KILN_ERROR << "calling function '" << name_ << "': argument " << index
             << " is an undefined NDArray";
}

Module Module::load(const std::string& path) {
  // dlopen searches the library path for a name without '/'; a file name means this directory.
  std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  const std::string what = "Module::load: cannot load '" + path + "'";
  check_cpu_features(inspect_elf(file, what, true), what);
  dlerror();
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    KILN_ERROR << "Module::load: cannot load '" << path << "': " << (why ? why : "unknown error");
  }
  return Module(make_object<SharedLibraryModuleNode>(handle, path));
}

const ModuleNode& Module::get(const char* what) const {
  KILN_USER_CHECK(node.defined()) << "Module::" << what << ": the module is undefined";
  return *node;
}

PackedFunc Module::get_function(const std::string& name) const {
  const ModuleNode& n = get("get_function");
  KilnPackedCFunc fn = n.get_function(name);
  if (fn == nullptr) {
    std::vector<std::string> names = n.function_names();
    std::string list;
    for (const std::string& s : names) list += (list.empty() ? "" : ", ") + s;
    KILN_ERROR << "function '" << name << "' not found in module " << n.describe() << "; "
               << (names.empty() ? "it lists no functions" : "it has: " + list);
  }
  return PackedFunc(fn, Ref<Object>(node), name);
}

std::vector<std::string> Module::function_names() const {
  return get("function_names").function_names();
}

void Module::export_library(const std::string& path) const {
  get("export_library").export_library(path);
}

std::string Module::type_key() const { return get("type_key").type_key(); }

}  // namespace kiln::runtime
