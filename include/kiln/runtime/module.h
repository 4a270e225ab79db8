/// \file module.h
/// \brief Modules of compiled functions and the C++ way to call them.
///
/// A `Module` is a shared handle to a `ModuleNode`: a set of functions with the packed C
/// signature (`KilnPackedCFunc`), looked up by name. `Module::load` opens a shared library
/// written by the compiler; the compiler's JIT provides its own ModuleNode subclass. A
/// `PackedFunc` is one such function plus a reference that keeps its module (and so its code)
/// alive; calling it with C++ values packs them into KilnValues and turns a non-zero return
/// into a kiln::Error carrying the function's last-error message.
///
/// The library format: each function is an exported symbol with the packed signature, and the
/// symbol `__kiln_func_names` (a `const char[]` of NUL-separated names ended by an empty name)
/// lists them. Generated code calls kiln_parallel_for and friends, which it finds in
/// libkiln_runtime.so, already loaded by the process that loads the module.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/runtime/c_runtime_api.h"
#include "kiln/runtime/ndarray.h"
#include "kiln/support/object.h"

namespace kiln::runtime {

/// A set of packed functions. Subclasses: the shared-library module (module.cc), the JIT.
class ModuleNode : public Object {
 public:
  /// The kind of module: "shared_library", "llvm_jit", ...
  virtual std::string type_key() const = 0;
  /// The function called `name`, or nullptr if the module has none.
  virtual KilnPackedCFunc get_function(const std::string& name) const = 0;
  /// Writes the module as a shared library loadable by Module::load. The default throws
  /// kiln::Error "module of type X cannot be exported".
  virtual void export_library(const std::string& path) const;
  /// The names of the module's functions, in definition order; empty if unknown.
  virtual std::vector<std::string> function_names() const;
  /// How errors name the module: its type key, plus e.g. the file it came from.
  virtual std::string describe() const;
};

/// A callable packed function with a keep-alive reference to the module that owns its code.
class PackedFunc {
 public:
  PackedFunc() = default;
  /// Wraps `fn`; `keep_alive` (usually the module) lives as long as this PackedFunc; `name`
  /// is used in error messages.
  explicit PackedFunc(KilnPackedCFunc fn, Ref<Object> keep_alive = nullptr, std::string name = "")
      : fn_(fn), keep_alive_(std::move(keep_alive)), name_(std::move(name)) {}

  /// True when this refers to a function.
  bool defined() const { return fn_ != nullptr; }
  /// The C function pointer.
  KilnPackedCFunc raw() const { return fn_; }
  /// The function's name ("" if unnamed).
  const std::string& name() const { return name_; }

  /// Calls the function on packed arguments. Clears the thread's last error first; on a
  /// non-zero return throws kiln::Error with the message the function set.
  void call_packed(const KilnValue* args, const int32_t* type_codes, int32_t num_args) const;

  /// Calls the function, packing each argument: NDArray and KilnArray* (kKilnArrayHandle),
  /// integers and bool (kKilnInt), float and double (kKilnFloat), void* (kKilnOpaqueHandle),
  /// const char* and std::string (kKilnStr), nullptr (kKilnNull). Throws like call_packed.
  template <typename... Args>
  void operator()(Args&&... args) const {
    constexpr size_t n = sizeof...(Args);
    std::array<KilnValue, (n > 0 ? n : 1)> values{};
    std::array<int32_t, (n > 0 ? n : 1)> codes{};
    size_t i = 0;
    ((pack_arg(values[i], codes[i], i, args), ++i), ...);
    call_packed(values.data(), codes.data(), static_cast<int32_t>(n));
  }

 private:
  template <typename T>
  void pack_arg(KilnValue& v, int32_t& code, size_t index, const T& x) const;
  /// Throws the error for an undefined NDArray passed as argument `index`.
  [[noreturn]] void undefined_array_arg(size_t index) const;

  KilnPackedCFunc fn_ = nullptr;
  Ref<Object> keep_alive_;
  std::string name_;
};

/// A shared handle to a ModuleNode.
class Module {
 public:
  Module() = default;
  /// Wraps a node (e.g. a JIT module built by the compiler).
  explicit Module(Ref<ModuleNode> n) : node(std::move(n)) {}

  /// Loads a shared library written by the compiler (dlopen with RTLD_NOW | RTLD_LOCAL) after
  /// check_elf_library. Throws kiln::Error "Module::load: cannot load 'PATH': ..." naming the
  /// problem (check_elf_library's, or the loader's message).
  static Module load(const std::string& path);

  /// The function called `name`. Throws kiln::Error "function 'f' not found in module
  /// <module>; it has: a, b" when there is none.
  PackedFunc get_function(const std::string& name) const;
  /// The names of the module's functions (empty if the module does not list them).
  std::vector<std::string> function_names() const;
  /// Writes the module as a shared library; throws kiln::Error if this kind cannot be exported.
  void export_library(const std::string& path) const;
  /// The module's type key.
  std::string type_key() const;
  /// True when this handle refers to a module.
  bool defined() const { return node.defined(); }

  /// The module itself.
  Ref<ModuleNode> node;

 private:
  const ModuleNode& get(const char* what) const;
};

/// Checks, before it is loaded, that `path` is a shared library this host can load: a regular
/// file (not a FIFO or a link to a device), an ELF shared object of the host's class, byte order
/// and machine, whose program and section header tables and every segment and section lie
/// inside the file (a truncated library would otherwise crash the loader with SIGBUS). Throws
/// kiln::Error "WHAT: <problem>", e.g. "WHAT: built for aarch64, but this host is x86-64".
/// Module::load calls it.
void check_elf_library(const std::string& path, const std::string& what);

template <typename T>
void PackedFunc::pack_arg(KilnValue& v, int32_t& code, size_t index, const T& x) const {
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, NDArray>) {
    if (!x.defined()) undefined_array_arg(index);
    v.v_handle = x.raw();
    code = kKilnArrayHandle;
  } else if constexpr (std::is_same_v<D, KilnArray*> || std::is_same_v<D, const KilnArray*>) {
    v.v_handle = const_cast<KilnArray*>(x);
    code = kKilnArrayHandle;
  } else if constexpr (std::is_same_v<D, std::nullptr_t>) {
    v.v_handle = nullptr;
    code = kKilnNull;
  } else if constexpr (std::is_integral_v<D> || std::is_enum_v<D>) {
    v.v_int64 = static_cast<int64_t>(x);
    code = kKilnInt;
  } else if constexpr (std::is_floating_point_v<D>) {
    v.v_float64 = static_cast<double>(x);
    code = kKilnFloat;
  } else if constexpr (std::is_same_v<D, const char*> || std::is_same_v<D, char*>) {
    v.v_str = x;
    code = kKilnStr;
  } else if constexpr (std::is_same_v<D, std::string>) {
    v.v_str = x.c_str();
    code = kKilnStr;
  } else if constexpr (std::is_same_v<D, void*> || std::is_same_v<D, const void*>) {
    v.v_handle = const_cast<void*>(x);
    code = kKilnOpaqueHandle;
  } else {
    static_assert(sizeof(D) == 0,
                  "PackedFunc: unsupported argument type (use NDArray, KilnArray*, an integer, "
                  "a floating-point number, void*, const char*, std::string or nullptr)");
  }
}

}  // namespace kiln::runtime
