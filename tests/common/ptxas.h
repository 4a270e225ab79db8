/// \file ptxas.h
/// \brief Assembling PTX with CUDA's ptxas in tests (the CUDA back end's check without a GPU).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace kiln::testing {

/// ptxas: KILN_PTXAS, else CUDA's default install; "" when there is none.
inline std::string find_ptxas() {
  if (const char* e = std::getenv("KILN_PTXAS"); e && *e) return e;
  for (const char* p : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

/// Assembles `ptx` for `arch` ("sm_90") with ptxas; "" on success, else what ptxas printed.
inline std::string ptxas(const std::string& ptx, const std::string& arch) {
  const std::string tool = find_ptxas();
  char path[] = "/tmp/kiln_ptx_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return "cannot create a temporary file";
  close(fd);
  std::ofstream(path) << ptx;
  const std::string log = std::string(path) + ".log";
  const std::string cmd = tool + " -arch=" + arch + " " + path + " -o /dev/null > " + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unlink(path);
  unlink(log.c_str());
  return rc == 0 ? "" : "ptxas -arch=" + arch + " failed:\n" + out;
}

}  // namespace kiln::testing
