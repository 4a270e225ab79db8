# CMake toolchain file: cross-compile for 64-bit ARM Linux with Debian's GNU cross compilers
# (packages gcc-aarch64-linux-gnu g++-aarch64-linux-gnu, sysroot /usr/aarch64-linux-gnu).
# Used for the runtime alone (-DKILN_RUNTIME_ONLY=ON, cmake/runtime_only.cmake): the compiler
# needs LLVM, protobuf and ONNX, which have no aarch64 libraries on an x86-64 workstation.
#   cmake -S . -B build/aarch64 -DKILN_RUNTIME_ONLY=ON \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# Programs built with it run on an aarch64 board, or here under qemu-user:
#   qemu-aarch64 -L /usr/aarch64-linux-gnu build/aarch64/bin/kiln-run MODULE_DIR
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(KILN_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${KILN_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${KILN_CROSS_TRIPLE}-g++)
set(CMAKE_FIND_ROOT_PATH /usr/${KILN_CROSS_TRIPLE})
# Programs (build tools) from the host; libraries, headers and packages from the target only.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Run test programs through qemu-user when CMake or ctest needs to (no binfmt registration).
find_program(KILN_QEMU_AARCH64 qemu-aarch64)
if(KILN_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${KILN_QEMU_AARCH64} -L /usr/${KILN_CROSS_TRIPLE})
endif()
