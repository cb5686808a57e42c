# Writes the CLI's version.cpp (from version.cpp.in) with `git describe` of the source tree.
# Run at every build (the tellus_version target), not once at configure time, so that a
# rebuilt `tellus --version` names the commit it was built from. configure_file rewrites the
# file only when its text changes, so an unchanged describe recompiles nothing.
#   cmake -DSOURCE_DIR=... -DINPUT=... -DOUTPUT=... -DPROJECT_VERSION=... [-DGIT_EXECUTABLE=...] -P version.cmake
set(TELLUS_GIT_DESCRIBE "")
if(GIT_EXECUTABLE AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" describe --always --tags --dirty
                  WORKING_DIRECTORY "${SOURCE_DIR}"
                  OUTPUT_VARIABLE TELLUS_GIT_DESCRIBE OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE git_describe_result ERROR_QUIET)
  if(NOT git_describe_result EQUAL 0)
    set(TELLUS_GIT_DESCRIBE "")
  endif()
endif()
configure_file("${INPUT}" "${OUTPUT}" @ONLY)
