# add_subdirectory() for every immediate child of DIR that has a CMakeLists.txt, in name order.
function(tellus_add_subdirectories dir)
  file(GLOB children LIST_DIRECTORIES true RELATIVE "${CMAKE_CURRENT_SOURCE_DIR}/${dir}"
       "${CMAKE_CURRENT_SOURCE_DIR}/${dir}/*")
  list(SORT children)
  foreach(child IN LISTS children)
    if(EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/${dir}/${child}/CMakeLists.txt")
      add_subdirectory("${dir}/${child}")
    endif()
  endforeach()
endfunction()

# tellus_library(NAME SOURCES ... DEPS ...): a static library tellus_NAME (alias Tellus::NAME)
# whose public headers are included as "NAME/header.h" from common/.
function(tellus_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(tellus_${name} STATIC ${ARG_SOURCES})
  add_library(Tellus::${name} ALIAS tellus_${name})
  target_include_directories(tellus_${name} PUBLIC ${PROJECT_SOURCE_DIR}/common)
  target_compile_options(tellus_${name} PRIVATE ${TELLUS_WARNINGS})
  target_link_libraries(tellus_${name} PUBLIC ${ARG_DEPS})
endfunction()

# tellus_test(NAME LABEL unit|integration SOURCES ... DEPS ...): a Catch2 test binary
# registered with ctest under LABEL (ctest -L unit runs only the no-I/O tests). LABEL may be a
# list ("unit;fuzz"): ctest -L fuzz runs the fuzz tests of both kinds.
function(tellus_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "LABEL;SOURCES;DEPS" ${ARGN})
  # A test whose sources are still being written is skipped loudly rather than breaking the
  # configure step for everyone else working in the tree.
  foreach(src IN LISTS ARG_SOURCES)
    if(NOT EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/${src}")
      message(WARNING "${name}: ${src} does not exist; test not built")
      return()
    endif()
  endforeach()
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${TELLUS_WARNINGS})
  target_link_libraries(${name} PRIVATE tellus_catch_main ${ARG_DEPS})
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABEL}" TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "TELLUS_BUILD_DIR=${PROJECT_BINARY_DIR};TELLUS_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  if("integration" IN_LIST ARG_LABEL)
    # Integration tests run real ZooKeeper JVMs and daemons with second-scale session
    # timeouts: two of them at once on a 2-core machine starve each other's heartbeats.
    set_tests_properties(${name} PROPERTIES RUN_SERIAL TRUE)
  endif()
endfunction()
