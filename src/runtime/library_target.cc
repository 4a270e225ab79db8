// The target record of a compiled library (library_target.h): its text form, written by the
// code generator into the section .kiln_target and parsed by the runtime, and the CPU feature
// check Module::load makes with it. On AArch64 Linux the kernel reports the CPU's features in
// the auxiliary vector (getauxval(AT_HWCAP), getauxval(AT_HWCAP2)); each feature name the
// compiler may record maps to one bit there. qemu-user fills the same vector from its -cpu
// model, so the check is tested under emulation (tests/arm/).
#include "kiln/runtime/library_target.h"

#include <sstream>

#include "kiln/support/error.h"

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace kiln::runtime {

namespace {

constexpr const char* kHeader = "kiln-target 1";

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string r;
  for (const std::string& s : v) r += (r.empty() ? "" : sep) + s;
  return r;
}

#if defined(__aarch64__) && defined(__linux__)
/// Whether this CPU has `feature` (a name of Target::runtime_features); false for an unknown
/// name.
bool cpu_has(const std::string& feature) {
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  if (feature == "neon") return hw & HWCAP_ASIMD;
  if (feature == "fullfp16") return hw & HWCAP_ASIMDHP;
  if (feature == "dotprod") return hw & HWCAP_ASIMDDP;
  if (feature == "sve") return hw & HWCAP_SVE;
  if (feature == "sve2") return hw2 & HWCAP2_SVE2;
  if (feature == "i8mm") return hw2 & HWCAP2_I8MM;
  if (feature == "bf16") return hw2 & HWCAP2_BF16;
  return false;
}
#endif

}  // namespace

std::string library_target_text(const LibraryTarget& t) {
  return std::string(kHeader) + "\ntriple=" + t.triple + "\ntarget=" + t.target +
         "\nfeatures=" + join(t.features, ",") + "\n";
}

LibraryTarget parse_library_target(const std::string& text, const std::string& what) {
  std::istringstream is(text);
  std::string line;
  auto fail = [&](const std::string& why) {
    KILN_ERROR << what << ": malformed target record (section " << kLibraryTargetSection
               << "): " << why;
  };
  if (!std::getline(is, line) || line != kHeader) {
    fail("the first line is '" + line + "', expected '" + kHeader + "'");
  }
  LibraryTarget t;
  bool has_target = false, has_features = false;
  for (int n = 2; std::getline(is, line); ++n) {
    size_t eq = line.find('=');
    if (eq == std::string::npos)
      fail("line " + std::to_string(n) + " '" + line + "' is not KEY=VALUE");
    std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "triple") {
      t.triple = value;
    } else if (key == "target") {
      t.target = value;
      has_target = true;
    } else if (key == "features") {
      has_features = true;
      std::istringstream fs(value);
      for (std::string f; std::getline(fs, f, ',');)
        if (!f.empty()) t.features.push_back(f);
    }
  }
  if (t.triple.empty()) fail("no triple");
  if (!has_target) fail("no target");
  if (!has_features) fail("no features");
  return t;
}

std::vector<std::string> missing_cpu_features(const std::vector<std::string>& features) {
  std::vector<std::string> missing;
#if defined(__aarch64__) && defined(__linux__)
  for (const std::string& f : features)
    if (!cpu_has(f)) missing.push_back(f);
#else
  (void)features;
#endif
  return missing;
}

void check_cpu_features(const LibraryTarget& t, const std::string& what) {
  std::vector<std::string> missing = missing_cpu_features(t.features);
  KILN_USER_CHECK(missing.empty())
      << what << ": compiled for target '" << t.target << "', which needs the CPU feature"
      << (missing.size() > 1 ? "s " : " ") << join(missing, ", ") << ", and this CPU does not have "
      << (missing.size() > 1 ? "them" : "it")
      << " (the kernel's HWCAP); running it would die of an illegal instruction. Compile the "
         "model for this CPU (its -mcpu, or without those -mattr features)";
}

}  // namespace kiln::runtime
