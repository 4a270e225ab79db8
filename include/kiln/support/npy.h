/// \file npy.h
/// \brief Reading and writing numpy `.npy` files, independent of any array type.
///
/// The format (numpy's NEP 1): the magic "\x93NUMPY", a version byte pair (1.0, 2.0 or 3.0), the
/// header length (2 bytes little-endian for 1.0, 4 bytes for 2.0 and 3.0), then a Python dict
/// literal `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` padded with spaces and
/// a newline to a multiple of 64 bytes, then the elements in C order.
///
/// Supported: little-endian ('<', or '|' for one-byte types) f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8
/// b1, C order, any rank including 0-d. Everything else is refused with an error naming the
/// file and the problem. This layer knows no array type: `kiln/runtime/npy.h` maps these files
/// to NDArrays (`runtime::load_npy`, `runtime::save_npy`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::support {

/// What a .npy header says, validated.
struct NpyHeader {
  /// The element type, normalised: "<f4", "<i8", "|u1", "|b1", ... (one-byte types use '|').
  std::string descr;
  /// Extent of each dimension ({} for a 0-d array).
  std::vector<int64_t> shape;
  /// Bytes per element.
  size_t item_bytes = 0;
  /// Bytes of element data: product(shape) * item_bytes.
  size_t nbytes = 0;
};

/// Bytes per element of a supported descr ("<f4" → 4), after normalising it (a '|' or '<'
/// before a one-byte type, '<' before a wider one). Returns 0 and leaves `descr` unchanged
/// when the type is not supported.
size_t npy_item_bytes(std::string& descr);

/// Reads the .npy file at `path`: parses and checks its header, calls `sink(header)`, which
/// returns where to put `header.nbytes` bytes, and reads the elements there. Throws
/// kiln::Error "npy file 'PATH': ..." for a missing file, a bad magic, an unsupported version,
/// a truncated or malformed header, an unsupported dtype, Fortran order or truncated data.
void read_npy(const std::string& path, const std::function<void*(const NpyHeader&)>& sink);

/// Writes `nbytes` bytes of C-order elements as a .npy file (format 1.0, or 2.0 when the header
/// does not fit 1.0). `descr` must be supported (see npy_item_bytes) and `nbytes` must equal
/// product(shape) * item size; throws kiln::Error naming the file otherwise or when the file
/// cannot be written.
void write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
               const void* data, size_t nbytes);

}  // namespace kiln::support
