# Warning, sanitizer and compiler-cache settings shared by every trainerd target.
find_program(TRAINERD_CCACHE ccache)
if(TRAINERD_CCACHE)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${TRAINERD_CCACHE})
endif()

add_library(trainerd_compile_options INTERFACE)
add_library(trainerd::compile_options ALIAS trainerd_compile_options)
target_compile_options(trainerd_compile_options INTERFACE -Wall -Wextra -Wpedantic)
if(TRAINERD_WERROR)
  target_compile_options(trainerd_compile_options INTERFACE -Werror)
endif()
if(TRAINERD_SANITIZE)
  target_compile_options(trainerd_compile_options INTERFACE
    -fsanitize=${TRAINERD_SANITIZE} -fno-omit-frame-pointer)
  target_link_options(trainerd_compile_options INTERFACE -fsanitize=${TRAINERD_SANITIZE})
endif()
