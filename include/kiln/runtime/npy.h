/// \file npy.h
/// \brief NDArrays to and from numpy `.npy` files.
///
/// The file format itself lives in `kiln/support/npy.h` (the support layer knows no NDArray);
/// these functions map its dtypes to DataType: f2 f4 f8 → float16/32/64, i1..i8 → int8..int64,
/// u1..u8 → uint8..uint64, b1 → bool. Little-endian, C order, any rank including 0-d.
#pragma once

#include <string>

#include "kiln/runtime/ndarray.h"

namespace kiln::runtime {

/// Reads a .npy file into a new CPU NDArray. Throws kiln::Error "npy file 'PATH': ..." naming
/// the problem: cannot open, bad magic, unsupported version, truncated header, malformed
/// header, unsupported dtype '>f4', fortran_order True, truncated data.
NDArray load_npy(const std::string& path);

/// Writes `array` as a .npy file (format 1.0, or 2.0 for a header over 64 KiB). Throws
/// kiln::Error naming the file for an undefined array, a dtype with no .npy equivalent
/// (vectors, bfloat16, handles) or a write failure.
void save_npy(const std::string& path, const NDArray& array);

/// The .npy descr of a dtype ("<f4", "|u1", "|b1"), or "" when numpy has no equivalent.
std::string npy_descr_of(DataType dtype);

}  // namespace kiln::runtime
