/// \file params.h
/// \brief The params file: named NDArrays in one binary file ("params.bin" of a module).
///
/// Layout (all integers little-endian; see docs/module-format.md):
///
///     magic    8 bytes  "KILNPRM1"
///     count    u64      number of entries
///     per entry, in name order:
///       name_len u32, name (name_len bytes, UTF-8, no NUL)
///       dtype    u8 code, u8 bits, u16 lanes   (kiln::DataType / KilnDataType)
///       ndim     u32, shape: ndim × i64
///       nbytes   u64 (must equal product(shape) × dtype bytes), data: nbytes bytes, C order
///
/// Nothing follows the last entry.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "kiln/runtime/ndarray.h"

namespace kiln::runtime {

/// Writes `params` to `path` in the format above. Throws kiln::Error naming the file (and the
/// entry) for an undefined array, an empty name or a write failure.
void save_params(const std::string& path, const std::map<std::string, NDArray>& params);

/// Reads a params file. Throws kiln::Error "params file 'PATH': ..." for a missing file, a bad
/// magic, or a truncated or corrupt entry; the message names the entry by index and, once
/// read, by name ("entry 2 ('conv1.weight'): truncated data: ...").
std::map<std::string, NDArray> load_params(const std::string& path);

/// The same format in memory (for single-file modules and tests).
std::string save_params_to_bytes(const std::map<std::string, NDArray>& params);
/// Parses the format from memory; `source` names the bytes in error messages.
std::map<std::string, NDArray> load_params_from_bytes(const std::string& bytes,
                                                      const std::string& source);

}  // namespace kiln::runtime
