# The runtime alone (-DKILN_RUNTIME_ONLY=ON): libkiln_runtime.so and the `kiln-run` runner,
# nothing of the compiler. This is what a deployed model needs, and what cross-builds for a
# board (cmake/aarch64-linux-gnu.cmake): the runtime links no LLVM, protobuf or ONNX. The
# top-level CMakeLists.txt includes this file right after project() and stops there.
# The two header-only libraries the runtime and the runner use (nlohmann-json, CLI11) come
# from the build machine's /usr/include: a cross sysroot has no copy, and copying only their
# folders keeps the host's other headers (glibc's) out of a cross build.
foreach(dir nlohmann CLI)
  find_path(KILN_${dir}_PARENT ${dir} PATHS /usr/include NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
  if(NOT KILN_${dir}_PARENT)
    message(FATAL_ERROR "KILN_RUNTIME_ONLY: header folder '${dir}' not found in /usr/include "
                        "(install nlohmann-json3-dev and libcli11-dev)")
  endif()
  file(COPY ${KILN_${dir}_PARENT}/${dir} DESTINATION ${CMAKE_BINARY_DIR}/third_party)
endforeach()
find_package(Threads REQUIRED)
include_directories(${CMAKE_SOURCE_DIR}/include)
file(GLOB_RECURSE RUNTIME_SRCS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/runtime/*.cc
     ${CMAKE_SOURCE_DIR}/src/support/*.cc)
add_library(kiln_runtime SHARED ${RUNTIME_SRCS})
target_link_libraries(kiln_runtime PUBLIC Threads::Threads ${CMAKE_DL_LIBS})
target_include_directories(kiln_runtime SYSTEM PRIVATE ${CMAKE_BINARY_DIR}/third_party)
# kiln-run: `kiln run` for a machine with only the runtime (src/tools/runner/).
add_executable(kiln-run ${CMAKE_SOURCE_DIR}/src/tools/runner/kiln_run.cc
                        ${CMAKE_SOURCE_DIR}/src/tools/runner/run_module.cc)
target_link_libraries(kiln-run PRIVATE kiln_runtime)
target_include_directories(kiln-run SYSTEM PRIVATE ${CMAKE_BINARY_DIR}/third_party)
# The runner finds libkiln_runtime.so beside it in ../lib, wherever the folder is copied.
set_target_properties(kiln-run PROPERTIES BUILD_RPATH "\$ORIGIN/../lib"
                                          INSTALL_RPATH "\$ORIGIN/../lib")
