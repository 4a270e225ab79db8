// Modules and packed calls. The shared-library module opens a compiled library with
// dlopen(RTLD_NOW | RTLD_LOCAL) so every undefined symbol (kiln_parallel_for, ...) is resolved
// at load time against the already loaded libkiln_runtime.so and a broken library fails at
// load, not at first call. It reads the library's `__kiln_func_names` list (NUL-separated,
// ended by an empty name) once; when the list exists only listed names are looked up, so a
// stray symbol of a dependency (malloc, kiln_parallel_for) is never mistaken for a packed
// function. The library is closed when the last Module or PackedFunc referring to it goes
// away. PackedFunc turns a non-zero return code into a kiln::Error with the callee's message.
#include "kiln/runtime/module.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "kiln/support/error.h"

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

}  // namespace

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
