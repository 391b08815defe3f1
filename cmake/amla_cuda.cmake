# amla's CUDA backend (included from the root CMakeLists.txt when AMLA_ENABLE_CUDA is on).
#
#   amla::cuda                    INTERFACE target: include/amla/backend/cuda/*.cuh (header-only,
#                                 nvcc only); installed in its own export set, amlaCudaTargets
#   cuda_decode                   tests/cuda: one program, two ctest entries ("validate" runs
#                                 anywhere, "gpu" reports SKIPPED, exit code 77, when no GPU is
#                                 visible)
#   cuda_two_units[_rdc]          tests/cuda: the backend in two translation units of one
#                                 program, whole-program and with relocatable device code (-rdc)
#   cuda_self_contained_headers   every public .cuh compiled on its own by nvcc (objects only)
#   bm_cuda_decode                bench/cuda: a plain timing program (CUDA events, cuBLAS ratio)
#   amla_cuda_decode_kernels      tests/cuda/decode_kernels.cu: decode()'s kernels compiled once
#                                 for cuda_decode, bm_cuda_decode and bm_hopper_model
#
# Architectures: amla's own CUDA targets are built for AMLA_CUDA_ARCHITECTURES (default 90a: the
# Hopper kernel needs wgmma and TMA, which only the arch-specific sm_90a target has; CMake turns
# "90a" into -gencode=arch=compute_90a,code=[compute_90a,sm_90a]). CMAKE_CUDA_ARCHITECTURES
# belongs to the top-level project: amla gives it a default only when it is that project.

set(AMLA_CUDA_ARCHITECTURES "90a" CACHE STRING
    "CUDA architectures for amla's own CUDA targets (the Hopper kernel needs 90a)")
if(AMLA_IS_TOP_LEVEL AND NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES ${AMLA_CUDA_ARCHITECTURES})
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

option(AMLA_BUILD_CUDA_TESTS "Build the CUDA backend's tests" ${AMLA_BUILD_TESTS})

# The virtual architectures of AMLA_CUDA_ARCHITECTURES (90a -> 90a-virtual: PTX, no ptxas), for
# the checks that need amla's CUDA headers to compile but not their machine code.
set(AMLA_CUDA_VIRTUAL_ARCHITECTURES)
foreach(arch IN LISTS AMLA_CUDA_ARCHITECTURES)
  if(arch MATCHES "^([0-9]+[af]?)(-real|-virtual)?$")
    list(APPEND AMLA_CUDA_VIRTUAL_ARCHITECTURES ${CMAKE_MATCH_1}-virtual)
  else()
    list(APPEND AMLA_CUDA_VIRTUAL_ARCHITECTURES ${arch})  # native, all, all-major: as given
  endif()
endforeach()
list(REMOVE_DUPLICATES AMLA_CUDA_VIRTUAL_ARCHITECTURES)
option(AMLA_BUILD_CUDA_BENCH "Build the CUDA backend's timing program" ${AMLA_BUILD_BENCH})

add_library(amla_cuda INTERFACE)
add_library(amla::cuda ALIAS amla_cuda)
set_target_properties(amla_cuda PROPERTIES EXPORT_NAME cuda)
target_link_libraries(amla_cuda INTERFACE amla CUDA::cudart)
# C++20 for CUDA sources: CMake 3.25 does not know nvcc 13's standard levels (compile feature
# cuda_std_20 fails at generate time), so the flag is given directly.
target_compile_options(amla_cuda INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20>)

if(AMLA_INSTALL)
  # Its own export set: the package config loads it only where CUDAToolkit is found, so
  # consumers of the CPU headers never need CUDA.
  install(TARGETS amla_cuda EXPORT amlaCudaTargets)
  install(EXPORT amlaCudaTargets NAMESPACE amla:: FILE amlaCudaTargets.cmake
          DESTINATION ${CMAKE_INSTALL_DATADIR}/cmake/amla)
endif()

# Options for amla's own CUDA programs: host warnings through -Xcompiler, device resource usage
# visible with AMLA_CUDA_VERBOSE (registers, spills, wgmma serialisation warnings from ptxas).
option(AMLA_CUDA_VERBOSE "Print ptxas resource usage for amla's CUDA programs" OFF)
add_library(amla_cuda_warnings INTERFACE)
target_compile_options(amla_cuda_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --expt-relaxed-constexpr>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${AMLA_WERROR}>>:-Werror=all-warnings>)
add_library(amla_cuda_dev_options INTERFACE)
target_link_libraries(amla_cuda_dev_options INTERFACE amla_cuda_warnings)
target_compile_options(amla_cuda_dev_options INTERFACE
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${AMLA_CUDA_VERBOSE}>>:-Xptxas=-v>)

# Code generation for amla's own programs that build the kernels (decode_kernels.cu below and the
# Python extension): ptxas's --register-usage-level=10, as FlashMLA's build passes, schedules the
# Hopper kernel's loop with more freedom for the same registers (bench/CUDA_RESULTS.md, row 144).
# A program that includes the headers chooses its own flags (and a project that only consumes
# amla::cuda runs no check for it); older ptxas without the option builds without it.
if(AMLA_BUILD_CUDA_TESTS OR AMLA_BUILD_CUDA_BENCH OR AMLA_BUILD_PYTHON)
  include(CheckCompilerFlag)
  check_compiler_flag(CUDA "-Xptxas=--register-usage-level=10"
                      AMLA_PTXAS_HAS_REGISTER_USAGE_LEVEL)
  add_library(amla_cuda_codegen INTERFACE)
  if(AMLA_PTXAS_HAS_REGISTER_USAGE_LEVEL)
    target_compile_options(amla_cuda_codegen INTERFACE
      $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=--register-usage-level=10>)
  endif()
endif()

# decode()'s kernels (detail::dispatch of both modes: the Hopper kernel's instantiations, the
# combine, the fallback kernel) in one object for the three programs below that launch them, each
# of which declares them extern (tests/cuda/decode_kernels.cuh): compiled and put through ptxas
# once instead of three times.
if(AMLA_BUILD_CUDA_TESTS OR AMLA_BUILD_CUDA_BENCH)
  add_library(amla_cuda_decode_kernels OBJECT tests/cuda/decode_kernels.cu)
  target_link_libraries(amla_cuda_decode_kernels PUBLIC amla::cuda PRIVATE amla_cuda_dev_options
                                                                       amla_cuda_codegen)
  target_include_directories(amla_cuda_decode_kernels PUBLIC
                             ${CMAKE_CURRENT_SOURCE_DIR}/tests/cuda)
  set_target_properties(amla_cuda_decode_kernels PROPERTIES
                        CUDA_ARCHITECTURES "${AMLA_CUDA_ARCHITECTURES}")
endif()

if(AMLA_BUILD_CUDA_TESTS)
  enable_testing()
  # The CPU references (float64 golden, amla's Base and AMLA recurrences) are plain C++ translation
  # units: Eigen stays away from nvcc.
  add_executable(cuda_decode tests/cuda/test_decode.cu tests/cuda/cpu_reference.cpp)
  target_link_libraries(cuda_decode PRIVATE amla::cuda amla_cuda_decode_kernels amla_dev_options
                                            amla_cuda_dev_options)
  target_include_directories(cuda_decode PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/tests/cuda)
  set_target_properties(cuda_decode PROPERTIES CUDA_ARCHITECTURES "${AMLA_CUDA_ARCHITECTURES}")
  add_test(NAME cuda/validate COMMAND cuda_decode validate)
  add_test(NAME cuda/gpu COMMAND cuda_decode gpu)
  set_tests_properties(cuda/gpu PROPERTIES SKIP_RETURN_CODE 77)

  # The backend in two translation units of one program (tests/cuda/two_units_a.cu), linked as
  # whole-program code and with relocatable device code: building them is the check that every
  # kernel and function the headers define may be defined by several units. Unoptimised PTX, as
  # cuda_self_contained_headers below. The -rdc program is machine code for sm_80 instead: its
  # device link needs machine code, which from sm_90a PTX cost the link about 30 s of ptxas, and for
  # sm_80 the Hopper kernel's body is a trap (detail/ptx.cuh) that ptxas compiles at once. What
  # could fail to link (a kernel of each unit, and any header function defined without inline,
  # which every unit defines whether or not it is called) is defined there too.
  foreach(_amla_rdc IN ITEMS OFF ON)
    set(_amla_two_units cuda_two_units)
    set(_amla_two_units_archs "${AMLA_CUDA_VIRTUAL_ARCHITECTURES}")
    if(_amla_rdc)
      set(_amla_two_units cuda_two_units_rdc)
      set(_amla_two_units_archs 80-real)
    endif()
    add_executable(${_amla_two_units} tests/cuda/two_units_a.cu tests/cuda/two_units_b.cu)
    target_link_libraries(${_amla_two_units} PRIVATE amla::cuda amla_cuda_warnings)
    target_include_directories(${_amla_two_units} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/tests/cuda)
    target_compile_options(${_amla_two_units} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcicc=-O0>)
    set_target_properties(${_amla_two_units} PROPERTIES CUDA_SEPARABLE_COMPILATION ${_amla_rdc}
                          CUDA_ARCHITECTURES "${_amla_two_units_archs}")
    add_test(NAME cuda/${_amla_two_units} COMMAND ${_amla_two_units})
  endforeach()

  # Every public .cuh compiles on its own under nvcc (detail/ excepted), as tests/CMakeLists.txt
  # does for the .hpp headers; building the object library is the check. It stops at unoptimised
  # PTX (the virtual architectures, cicc at -O0): whether a header compiles alone is settled by
  # the front ends, and the kernels are optimised and go through ptxas for every real
  # architecture in cuda_decode and bm_cuda_decode.
  if(AMLA_TEST_HEADERS)
    include(${PROJECT_SOURCE_DIR}/cmake/amla_standalone_headers.cmake)
    amla_standalone_header_sources(_amla_cuh_sources cuh
                                   ${PROJECT_BINARY_DIR}/tests/self_contained_cuda)
    # amla.cuda's launches (python/src/cuda_bridge.cu) compile with the backend here too, where
    # the Python package is built without it.
    list(APPEND _amla_cuh_sources ${PROJECT_SOURCE_DIR}/python/src/cuda_bridge.cu)
    add_library(cuda_self_contained_headers OBJECT ${_amla_cuh_sources})
    target_link_libraries(cuda_self_contained_headers PRIVATE amla::cuda amla_cuda_dev_options)
    target_compile_options(cuda_self_contained_headers PRIVATE
                           $<$<COMPILE_LANGUAGE:CUDA>:-Xcicc=-O0>)
    set_target_properties(cuda_self_contained_headers PROPERTIES
                          CUDA_ARCHITECTURES "${AMLA_CUDA_VIRTUAL_ARCHITECTURES}")
  endif()
endif()

if(AMLA_BUILD_CUDA_BENCH)
  add_executable(bm_cuda_decode bench/cuda/bm_cuda_decode.cu)
  target_link_libraries(bm_cuda_decode PRIVATE amla::cuda amla_cuda_decode_kernels
                                               amla_cuda_dev_options CUDA::cublas)
  # tests/cuda/device_random.cuh: the random inputs the tests draw on the GPU.
  target_include_directories(bm_cuda_decode PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/tests/cuda)
  set_target_properties(bm_cuda_decode PROPERTIES CUDA_ARCHITECTURES "${AMLA_CUDA_ARCHITECTURES}")
  # The inputs of the simulator's Hopper model and the kernel times it predicts
  # (scripts/hopper-model.sh runs it).
  add_executable(bm_hopper_model bench/cuda/bm_hopper_model.cu)
  target_link_libraries(bm_hopper_model PRIVATE amla::cuda amla_cuda_decode_kernels
                                                amla_cuda_dev_options CUDA::cuda_driver)
  set_target_properties(bm_hopper_model PROPERTIES CUDA_ARCHITECTURES "${AMLA_CUDA_ARCHITECTURES}")
endif()
