// Target strings: a kind followed by -key=value options, split on whitespace. Options are
// validated when parsed (unknown keys, empty values, malformed features, CPUs LLVM does not
// know) so a typo fails at the call that wrote it, naming the option. Feature queries ask LLVM
// through target_info.h: for -mcpu=native the host's feature list (LLVM names this VM's CPU
// "rocketlake" although it has AVX-512, so names are never trusted), otherwise the features
// LLVM associates with the CPU name; explicit -mattr entries override both, the last one wins.
#include "kiln/target/target.h"

#include <sstream>

#include "kiln/support/error.h"
#include "target_info.h"

namespace kiln {

namespace {
std::string arch_of(const std::string& triple) { return triple.substr(0, triple.find('-')); }
}  // namespace

Target Target::parse(const std::string& s) {
  std::istringstream is(s);
  std::string tok;
  Target t;
  t.kind.clear();
  bool first = true;
  while (is >> tok) {
    if (first) {
      first = false;
      KILN_USER_CHECK(tok == "llvm")
          << "target '" << s << "': unknown target kind '" << tok << "' (known: llvm)";
      t.kind = tok;
      continue;
    }
    size_t eq = tok.find('=');
    std::string key = tok.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : tok.substr(eq + 1);
    KILN_USER_CHECK(key == "-mcpu" || key == "-mtriple" || key == "-mattr")
        << "target '" << s << "': unknown option '" << tok
        << "' (known: -mcpu=, -mtriple=, -mattr=)";
    KILN_USER_CHECK(eq != std::string::npos && !value.empty())
        << "target '" << s << "': option '" << tok << "' needs a value (" << key << "=...)";
    if (key == "-mcpu") {
      t.mcpu = value;
    } else if (key == "-mtriple") {
      t.mtriple = value;
    } else {
      std::istringstream fs(value);
      std::string f;
      while (std::getline(fs, f, ',')) {
        KILN_USER_CHECK(f.size() > 1 && (f[0] == '+' || f[0] == '-'))
            << "target '" << s << "': option '" << tok << "': feature '" << f
            << "' must be written +name or -name";
        t.mattrs.push_back(f);
      }
    }
  }
  KILN_USER_CHECK(!first) << "target '" << s << "': empty target string (expected e.g. 'llvm')";
  if (!t.mcpu.empty() && t.mcpu != "native") {
    KILN_USER_CHECK(target_info::is_known_cpu(t.triple(), t.mcpu))
        << "target '" << s << "': option '-mcpu=" << t.mcpu << "': unknown CPU for triple "
        << t.triple();
  }
  KILN_USER_CHECK(t.mcpu != "native" || t.is_host_arch())
      << "target '" << s << "': option '-mcpu=native' needs the host triple, got " << t.triple();
  return t;
}

Target Target::host() { return parse("llvm -mcpu=native"); }

std::string Target::triple() const {
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
  if (arch != "x86_64" && arch != "i386" && arch != "i686") return 128;
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

std::string Target::str() const {
  std::string s = kind;
  if (!mcpu.empty()) s += " -mcpu=" + mcpu;
  if (!mtriple.empty()) s += " -mtriple=" + mtriple;
  if (!mattrs.empty()) {
    s += " -mattr=";
    for (size_t i = 0; i < mattrs.size(); ++i) s += (i ? "," : "") + mattrs[i];
  }
  return s;
}

}  // namespace kiln
