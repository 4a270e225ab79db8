/// \file allocator.h
/// \brief The process's allocator policy for compiling: freed memory is kept for reuse.
///
/// Compiling a model copies its weights several times (the parsed file, the initializers,
/// folded and packed constants, the params written out), each copy freed once the next exists.
/// glibc hands every freed block over 32 MiB back to the kernel (and trims the heap's top past
/// a threshold), so the next copy faults all its pages in again, and a first touch costs far
/// more than a write: on the 2-core EPYC VM measured, 1.2 GB/s to fault 400 MB in against
/// 20 GB/s to write them again. Called first thing by the command-line tools that compile;
/// the library itself never changes the process's allocator.
#pragma once

namespace kiln::support {

/// Serve every allocation from the heap and never return freed memory to the kernel (glibc:
/// M_MMAP_MAX 0, M_TRIM_THRESHOLD -1), so a freed copy's pages serve the next one. Peak
/// resident memory stays the same (compiling VGG-16: 1.68 GB either way); the memory is given
/// back when the process ends. A no-op on other C libraries.
void keep_freed_memory();

}  // namespace kiln::support
