# Warning, sanitizer and compiler-cache settings shared by every trainerd target.
# ccache: without the pch_defines and time_macros sloppiness it refuses every translation unit
# compiled with the precompiled torch header (the whole trainer library), and a warm cache
# rebuilt none of them. The base directory makes hits independent of where the tree is cloned.
find_program(TRAINERD_CCACHE ccache)
if(TRAINERD_CCACHE)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env
    CCACHE_SLOPPINESS=pch_defines,time_macros CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}
    ${TRAINERD_CCACHE})
endif()

add_library(trainerd_compile_options INTERFACE)
add_library(trainerd::compile_options ALIAS trainerd_compile_options)
target_compile_options(trainerd_compile_options INTERFACE -Wall -Wextra -Wpedantic)
# GCC 12 reports -Wrestrict false positives inside std::string concatenation at -O3
# (GCC bug 105651); they are not in our code.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
   AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(trainerd_compile_options INTERFACE -Wno-restrict)
endif()
if(TRAINERD_WERROR)
  target_compile_options(trainerd_compile_options INTERFACE -Werror)
endif()
if(TRAINERD_SANITIZE)
  target_compile_options(trainerd_compile_options INTERFACE
    -fsanitize=${TRAINERD_SANITIZE} -fno-omit-frame-pointer)
  target_link_options(trainerd_compile_options INTERFACE -fsanitize=${TRAINERD_SANITIZE})
endif()
# Fuzzing (tests/fuzz, scripts/fuzz.sh): every trainerd target is instrumented, not only the
# harness, with ASan and UBSan; any UBSan report aborts, which libFuzzer records as a crash.
#   clang: libFuzzer's edge coverage (the harnesses add -fsanitize=fuzzer, libFuzzer's main).
#     -fno-sanitize=function: clang 14 cannot emit that check for coroutines (the daemon's
#     asio::awaitable functions): "Cannot represent a difference across sections".
#   GCC: only the LibTorch harness, since clang (14 and 16 alike) cannot compile LibTorch 1.13's
#     headers in C++20 (std::vector<c10::IValue> of an incomplete type in ATen/core/List.h).
#     GCC has no edge coverage libFuzzer reads, only comparison tracing (-use_value_profile=1);
#     tests/fuzz links clang's libFuzzer archive.
if(TRAINERD_BUILD_FUZZERS)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    target_compile_options(trainerd_compile_options INTERFACE
      -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=function
      -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  elseif(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(trainerd_compile_options INTERFACE
      -fsanitize=address,undefined -fsanitize-coverage=trace-cmp -fno-sanitize-recover=undefined
      -fno-omit-frame-pointer)
  else()
    message(FATAL_ERROR "TRAINERD_BUILD_FUZZERS needs clang (or GCC for the LibTorch harness), "
                        "not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  target_link_options(trainerd_compile_options INTERFACE -fsanitize=address,undefined)
endif()
