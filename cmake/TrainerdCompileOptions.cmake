# Warning, sanitizer and compiler-cache settings shared by every trainerd target.
find_program(TRAINERD_CCACHE ccache)
if(TRAINERD_CCACHE)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${TRAINERD_CCACHE})
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
