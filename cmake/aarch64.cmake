# aarch64 from this x86-64 build (issue 30, docs/aarch64.md). Included at the end of the
# top-level CMakeLists.txt.
#  - kiln (the command line) compiles in the runner's code (src/tools/runner/run_module.cc), so
#    `kiln run` and the cross-built `kiln-run` are one program.
#  - When Debian's cross compilers are installed (g++-aarch64-linux-gnu), the runtime and
#    kiln-run are cross-built into build/aarch64 (an ExternalProject with
#    cmake/aarch64-linux-gnu.cmake and KILN_RUNTIME_ONLY), as part of the normal build:
#    `kiln run DIR --emulate` runs that kiln-run under qemu-aarch64. KILN_AARCH64=OFF skips it.
#  - kiln-test-arm (tests/arm/): cross-compiled kernels and models run under qemu against the
#    x86 build. Without the cross compiler or qemu its emulated cases skip, saying why.
if(TARGET kiln-cli)
  target_sources(kiln-cli PRIVATE ${CMAKE_SOURCE_DIR}/src/tools/runner/run_module.cc)
endif()
find_program(KILN_AARCH64_CXX aarch64-linux-gnu-g++)
find_program(KILN_QEMU_AARCH64 qemu-aarch64)
set(KILN_AARCH64_DEFAULT OFF)  # and off in the fuzzing build (KILN_FUZZ)
if(KILN_AARCH64_CXX AND NOT KILN_FUZZ)
  set(KILN_AARCH64_DEFAULT ON)
elseif(NOT KILN_FUZZ)
  message(STATUS "aarch64 runtime: not built (no aarch64-linux-gnu-g++; Debian/Ubuntu: "
                 "apt-get install g++-aarch64-linux-gnu)")
endif()
option(KILN_AARCH64 "Cross-build the runtime and kiln-run for aarch64 (needs the cross compiler)"
       ${KILN_AARCH64_DEFAULT})
set(KILN_AARCH64_DIR ${CMAKE_BINARY_DIR}/aarch64)
set(KILN_AARCH64_RUNNER ${KILN_AARCH64_DIR}/bin/kiln-run)
if(KILN_AARCH64)
  include(ExternalProject)
  set(launcher)
  if(CMAKE_CXX_COMPILER_LAUNCHER)
    set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
                 -DCMAKE_C_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER})
  endif()
  ExternalProject_Add(kiln-aarch64-runtime
    SOURCE_DIR ${CMAKE_SOURCE_DIR}
    BINARY_DIR ${KILN_AARCH64_DIR}
    CMAKE_ARGS -DKILN_RUNTIME_ONLY=ON
               -DCMAKE_TOOLCHAIN_FILE=${CMAKE_SOURCE_DIR}/cmake/aarch64-linux-gnu.cmake
               -DCMAKE_BUILD_TYPE=Release ${launcher}
    BUILD_ALWAYS ON
    INSTALL_COMMAND ""
    BUILD_BYPRODUCTS ${KILN_AARCH64_RUNNER})
endif()
if(TARGET kiln-cli)
  target_compile_definitions(kiln-cli PRIVATE
                             KILN_AARCH64_RUNNER_DEFAULT="${KILN_AARCH64_RUNNER}")
endif()

# tests/arm (declared in CMakeLists.txt): `unit` cases run on the host alone; the emulated ones
# (Emulated*: qemu) are `e2e` and `arm`, and EmulatedModels.* need the `models` fixture.
if(TARGET kiln-test-arm)
  target_compile_definitions(kiln-test-arm PRIVATE
                             KILN_AARCH64_RUNNER="${KILN_AARCH64_RUNNER}"
                             KILN_QEMU_AARCH64="${KILN_QEMU_AARCH64}"
                             KILN_CLI="$<TARGET_FILE:kiln-cli>")
  if(TARGET kiln-cli)
    add_dependencies(kiln-test-arm kiln-cli)
  endif()
  if(TARGET kiln-aarch64-runtime)
    add_dependencies(kiln-test-arm kiln-aarch64-runtime)
  endif()
endif()
if(TARGET kiln-test-arm)
  set(script ${CMAKE_CURRENT_BINARY_DIR}/kiln_test_arm_models.cmake)
  file(WRITE ${script}
       "foreach(t IN LISTS kiln_test_arm__Emulated_)\n"
       "  if(t MATCHES \"EmulatedModels\")\n"
       "    set_tests_properties(\"\${t}\" PROPERTIES FIXTURES_REQUIRED models\n"
       "      ENVIRONMENT KILN_MODELS_DIR=${CMAKE_BINARY_DIR}/models)\n"
       "  endif()\n"
       "endforeach()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})
endif()
