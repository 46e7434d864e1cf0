# Every third-party dependency, found once. All come from Debian 12 packages
# (scripts/install-deps.sh), except LibTorch 2.x with CUDA, which comes from the PyPI wheel
# (scripts/install-libtorch.sh) when CMAKE_PREFIX_PATH names it (scripts/build.sh --torch pip).

# A CUDA LibTorch's CMake config compiles and runs a program to find the GPUs' architectures
# unless told them; we compile no kernels of our own, and the build machine has no GPU.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "8.0;8.6;8.9;9.0")
endif()
find_package(Torch REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(SQLite3 REQUIRED)
# The checkpoint loader checks the CRC-32s of LibTorch's zip archive (inflating what it deflated).
find_package(ZLIB REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(prometheus-cpp REQUIRED)
find_package(Threads REQUIRED)
# Time zones for the schedule without touching TZ (libhowardhinnant-date-dev).
find_package(date REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(SYSTEMD REQUIRED IMPORTED_TARGET libsystemd)
if(TRAINERD_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(TRAINERD_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()

# LibTorch's imported target carries its include directories and flags; wrap it once so
# every trainer target links the same thing.
add_library(trainerd_torch INTERFACE)
# The PyPI wheel's libtorch.so, built with a newer GCC, exports copies of libstdc++ symbols
# (std::filesystem among them) that are broken outside its own toolchain (remove_all jumps to
# address 0). The dynamic linker binds each symbol in the executable's NEEDED order, so
# libstdc++ is named first: our code binds to the system's libstdc++, the wheel's own copies
# stay private to it. Harmless for Debian's LibTorch, which exports none.
target_link_libraries(trainerd_torch INTERFACE
  "-Wl,--push-state,--no-as-needed" stdc++ "-Wl,--pop-state" ${TORCH_LIBRARIES})
target_compile_options(trainerd_torch INTERFACE ${TORCH_CXX_FLAGS})
# at::parallel_for is an inline template that runs its body on one thread unless the
# translation unit calling it is compiled with OpenMP (ATen/ParallelOpenMP.h tests _OPENMP),
# and LibTorch's CMake config does not say so: without this, the trainer's own CPU kernels
# (the blockwise attention's heads, the counter dropout) ran on one core whatever
# runtime.threads said. GCC's libgomp is the runtime both LibTorch builds use; clang (the fuzz
# build, which trains nothing) would bring its own libomp beside it, so it goes without.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  find_package(OpenMP REQUIRED COMPONENTS CXX)
  target_link_libraries(trainerd_torch INTERFACE OpenMP::OpenMP_CXX)
endif()
# The CUDA paths (allocator statistics, generators, autocast, device queries) where LibTorch
# has CUDA; every target that includes the trainer's headers must agree on it.
if(CAFFE2_USE_CUDA)
  target_compile_definitions(trainerd_torch INTERFACE TRAINERD_WITH_CUDA)
endif()
