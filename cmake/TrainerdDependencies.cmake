# Every third-party dependency, found once. All come from Debian 12 packages
# (scripts/install-deps.sh).
find_package(Torch REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(prometheus-cpp REQUIRED)
find_package(Threads REQUIRED)
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
target_link_libraries(trainerd_torch INTERFACE ${TORCH_LIBRARIES})
target_compile_options(trainerd_torch INTERFACE ${TORCH_CXX_FLAGS})
