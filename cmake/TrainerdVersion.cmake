# Script mode (cmake -P), run by the trainerd_version target at every build: writes OUTPUT, a
# header defining TRAINERD_VERSION as PROJECT_VERSION plus SOURCE_DIR's git commit
# ("0.1.0+g8530f5d", "-dirty" for uncommitted changes), and rewrites it only when that changed,
# so an unchanged tree rebuilds nothing. Taken at build time, not at configure time: validated
# plans are keyed by this version, and `git pull && cmake --build` must not train new code
# under the old one's validations.
execute_process(
  COMMAND git describe --always --dirty --abbrev=7
  WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE describe OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
set(version ${PROJECT_VERSION})
if(describe)
  string(APPEND version "+g${describe}")
endif()
string(CONCAT text "// Generated at build time by cmake/TrainerdVersion.cmake.\n#pragma once\n"
                   "#define TRAINERD_VERSION \"${version}\"\n")
set(old "")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
