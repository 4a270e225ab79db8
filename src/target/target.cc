// Target kinds and target strings. A kind is data (TargetKind): the options its strings accept,
// the keys strategies match on and the code generator that serves it; the built-in kinds are
// registered on first use, tests and new back ends add theirs with register_target_kind.
// Target strings are a kind followed by -key=value options, split on whitespace. Options are
// validated when parsed (unknown keys, empty values, malformed features, CPUs LLVM does not
// know) so a typo fails at the call that wrote it, naming the option. Feature queries ask LLVM
// through target_info.h: for -mcpu=native the host's feature list (LLVM names this VM's CPU
// "rocketlake" although it has AVX-512, so names are never trusted), otherwise the features
// LLVM associates with the CPU name; explicit -mattr entries override both, the last one wins.
#include "kiln/target/target.h"

#include <algorithm>
#include <mutex>
#include <sstream>

#include "kiln/support/error.h"
#include "target_info.h"

namespace kiln {

namespace {

std::string arch_of(const std::string& triple) { return triple.substr(0, triple.find('-')); }

bool is_x86(const std::string& arch) {
  return arch == "x86_64" || arch == "i386" || arch == "i686";
}

bool is_arm(const std::string& arch) {
  return arch == "aarch64" || arch == "arm64" || arch.rfind("arm", 0) == 0;
}

struct KindTable {
  std::mutex mu;
  std::map<std::string, TargetKind> kinds;
};

KindTable& kind_table() {
  static KindTable* table = [] {
    auto* t = new KindTable;
    TargetKind llvm;
    llvm.name = "llvm";
    llvm.keys = {"cpu"};
    llvm.options = {"mcpu", "mtriple", "mattr", "opt"};
    llvm.defaults = {{"opt", "3"}};
    llvm.codegen = "llvm";
    llvm.derived_keys = [](const Target& target) -> std::vector<std::string> {
      const std::string arch = arch_of(target.triple());
      if (is_x86(arch)) return {"x86"};
      if (is_arm(arch)) return {"arm"};
      return {};
    };
    TargetKind cuda;
    cuda.name = "cuda";
    cuda.keys = {"cuda", "gpu"};
    cuda.options = {"arch", "max_threads_per_block", "max_shared_memory_per_block"};
    cuda.defaults = {{"arch", "sm_75"},
                     {"max_threads_per_block", "1024"},
                     {"max_shared_memory_per_block", "49152"}};
    cuda.codegen = "cuda";
    TargetKind opencl;
    opencl.name = "opencl";
    opencl.keys = {"opencl", "gpu"};
    opencl.options = {"device", "max_threads_per_block", "max_shared_memory_per_block"};
    opencl.defaults = {{"max_threads_per_block", "256"}, {"max_shared_memory_per_block", "16384"}};
    opencl.codegen = "opencl";
    TargetKind vdla;
    vdla.name = "vdla";
    vdla.keys = {"vdla", "accel"};
    for (TargetKind* k : {&llvm, &cuda, &opencl, &vdla}) t->kinds.emplace(k->name, *k);
    return t;
  }();
  return *table;
}

}  // namespace

void register_target_kind(TargetKind kind) {
  KILN_ICHECK(!kind.name.empty()) << "register_target_kind: a kind needs a name";
  KindTable& t = kind_table();
  std::lock_guard<std::mutex> lock(t.mu);
  KILN_ICHECK(!t.kinds.count(kind.name))
      << "register_target_kind: kind '" << kind.name << "' is registered already";
  std::string name = kind.name;
  t.kinds.emplace(name, std::move(kind));
}

const TargetKind& target_kind(const std::string& name) {
  KindTable& t = kind_table();
  {
    std::lock_guard<std::mutex> lock(t.mu);
    auto it = t.kinds.find(name);
    if (it != t.kinds.end()) return it->second;  // std::map: references stay valid
  }
  std::string known;
  for (const std::string& k : target_kind_names()) known += (known.empty() ? "" : ", ") + k;
  KILN_ERROR << "unknown target kind '" << name << "' (known: " << known << ")";
}

std::vector<std::string> target_kind_names() {
  KindTable& t = kind_table();
  std::lock_guard<std::mutex> lock(t.mu);
  std::vector<std::string> r;
  for (const auto& [name, kind] : t.kinds) r.push_back(name);
  return r;
}

Target Target::parse(const std::string& s) {
  std::istringstream is(s);
  std::string tok;
  Target t;
  t.kind.clear();
  const TargetKind* kind = nullptr;
  while (is >> tok) {
    if (!kind) {
      try {
        kind = &target_kind(tok);
      } catch (const Error& e) {
        KILN_ERROR << "target '" << s << "': " << e.what();
      }
      t.kind = tok;
      continue;
    }
    size_t eq = tok.find('=');
    std::string key = tok.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : tok.substr(eq + 1);
    const std::vector<std::string>& opts = kind->options;
    const bool known = key.size() > 1 && key[0] == '-' &&
                       std::find(opts.begin(), opts.end(), key.substr(1)) != opts.end();
    if (!known) {
      std::string list;
      for (const std::string& o : opts) list += (list.empty() ? "-" : ", -") + o + "=";
      KILN_ERROR << "target '" << s << "': unknown option '" << tok << "' ("
                 << (list.empty() ? "kind '" + t.kind + "' takes no options" : "known: " + list)
                 << ")";
    }
    KILN_USER_CHECK(eq != std::string::npos && !value.empty())
        << "target '" << s << "': option '" << tok << "' needs a value (" << key << "=...)";
    if (key == "-mcpu") {
      t.mcpu = value;
    } else if (key == "-mtriple") {
      t.mtriple = value;
    } else if (key == "-mattr") {
      std::istringstream fs(value);
      std::string f;
      while (std::getline(fs, f, ',')) {
        KILN_USER_CHECK(f.size() > 1 && (f[0] == '+' || f[0] == '-'))
            << "target '" << s << "': option '" << tok << "': feature '" << f
            << "' must be written +name or -name";
        t.mattrs.push_back(f);
      }
    } else {
      t.attrs[key.substr(1)] = value;
    }
  }
  KILN_USER_CHECK(kind) << "target '" << s << "': empty target string (expected e.g. 'llvm')";
  if (kind->codegen == "llvm") {
    if (!t.mcpu.empty() && t.mcpu != "native") {
      KILN_USER_CHECK(target_info::is_known_cpu(t.triple(), t.mcpu))
          << "target '" << s << "': option '-mcpu=" << t.mcpu << "': unknown CPU for triple "
          << t.triple();
    }
    KILN_USER_CHECK(t.mcpu != "native" || t.is_host_arch())
        << "target '" << s << "': option '-mcpu=native' needs the host triple, got " << t.triple();
  }
  for (const auto& [name, value] : kind->defaults) {
    auto it = t.attrs.find(name);
    if (it != t.attrs.end() && it->second == value) t.attrs.erase(it);  // canonical form
  }
  if (auto it = t.attrs.find("opt"); it != t.attrs.end()) {
    KILN_USER_CHECK(it->second.size() == 1 && it->second[0] >= '0' && it->second[0] <= '3')
        << "target '" << s << "': option '-opt=" << it->second
        << "' needs an LLVM optimization level 0..3";
  }
  for (const auto& [name, value] : t.attrs) {
    bool numeric = name.rfind("max_", 0) == 0;
    if (!numeric) continue;
    char* end = nullptr;
    long long v = std::strtoll(value.c_str(), &end, 10);
    KILN_USER_CHECK(end && *end == '\0' && v > 0) << "target '" << s << "': option '-" << name
                                                  << "=" << value << "' needs a positive integer";
  }
  return t;
}

Target Target::host() { return parse("llvm -mcpu=native"); }

std::vector<std::string> Target::keys() const {
  const TargetKind& k = kind_info();
  std::vector<std::string> r;
  if (k.derived_keys) r = k.derived_keys(*this);
  for (const std::string& key : k.keys)
    if (std::find(r.begin(), r.end(), key) == r.end()) r.push_back(key);
  return r;
}

bool Target::has_key(const std::string& key) const {
  std::vector<std::string> k = keys();
  return std::find(k.begin(), k.end(), key) != k.end();
}

std::string Target::attr(const std::string& name, const std::string& fallback) const {
  if (auto it = attrs.find(name); it != attrs.end()) return it->second;
  const TargetKind& k = kind_info();
  if (auto it = k.defaults.find(name); it != k.defaults.end()) return it->second;
  return fallback;
}

int64_t Target::attr_int(const std::string& name, int64_t fallback) const {
  std::string v = attr(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  long long r = std::strtoll(v.c_str(), &end, 10);
  KILN_USER_CHECK(end && *end == '\0')
      << "target '" << str() << "': option '-" << name << "=" << v << "' is not an integer";
  return r;
}

Target Target::host_or_default() const { return host_target ? *host_target : host(); }

Target Target::with_host(const Target& h) const {
  Target t = *this;
  t.host_target = std::make_shared<const Target>(h);
  return t;
}

std::string Target::triple() const {
  if (kind == "cuda") return "nvptx64-nvidia-cuda";
  return mtriple.empty() ? target_info::host_triple() : mtriple;
}

bool Target::is_host_arch() const {
  return arch_of(triple()) == arch_of(target_info::host_triple());
}

bool Target::has_feature(const std::string& feature) const {
  for (auto it = mattrs.rbegin(); it != mattrs.rend(); ++it) {
    if (it->substr(1) == feature) return (*it)[0] == '+';
  }
  if (mcpu == "native") {
    static const std::vector<std::string> host = target_info::host_cpu_features();
    for (const std::string& f : host) {
      if (f.substr(1) == feature) return f[0] == '+';
    }
    return false;
  }
  return target_info::cpu_has_feature(triple(), mcpu, feature);
}

int Target::vector_bits() const {
  std::string arch = arch_of(triple());
  if (!is_x86(arch)) return 128;
  if (has_feature("avx512f")) return 512;
  if (has_feature("avx2")) return 256;
  return 128;
}

int Target::vector_registers() const {
  std::string arch = arch_of(triple());
  if (arch == "x86_64") return has_feature("avx512f") ? 32 : 16;
  if (arch == "i386" || arch == "i686") return 8;
  if (arch == "aarch64" || arch == "arm64") return 32;
  return 16;
}

std::vector<std::string> Target::runtime_features() const {
  // The AArch64 features LLVM may use that Linux reports in HWCAP/HWCAP2 (runtime/module.cc
  // maps each to its bit). Keep the two lists in step.
  static const char* const kArm[] = {"neon", "fullfp16", "dotprod", "i8mm", "bf16", "sve", "sve2"};
  std::vector<std::string> r;
  const std::string arch = arch_of(triple());
  if (arch != "aarch64" && arch != "arm64") return r;
  for (const char* f : kArm)
    if (has_feature(f)) r.push_back(f);
  return r;
}

std::string Target::str() const {
  std::string s = kind;
  if (!mcpu.empty()) s += " -mcpu=" + mcpu;
  if (!mtriple.empty()) s += " -mtriple=" + mtriple;
  if (!mattrs.empty()) {
    s += " -mattr=";
    for (size_t i = 0; i < mattrs.size(); ++i) s += (i ? "," : "") + mattrs[i];
  }
  for (const auto& [name, value] : attrs) s += " -" + name + "=" + value;
  return s;
}

}  // namespace kiln
