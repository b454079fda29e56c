# Warnings, sanitizers and helper functions shared by every layer.

add_library(redline_warnings INTERFACE)
target_compile_options(redline_warnings INTERFACE -Wall -Wextra -Wno-unused-parameter)
if(RL_WARNINGS_AS_ERRORS)
  target_compile_options(redline_warnings INTERFACE -Werror)
endif()
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  # GCC 12 reports impossible sizes inside libstdc++'s std::string at -O2+
  # (GCC bugs 105329, 105651): false positives that -Werror must not trip on.
  target_compile_options(redline_warnings INTERFACE -Wno-restrict -Wno-stringop-overflow -Wno-stringop-overread)
endif()
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  target_compile_options(redline_warnings INTERFACE -Wthread-safety)
endif()

if(RL_NATIVE)
  add_compile_options(-march=native)
endif()

if(RL_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address)
  add_compile_definitions(RL_DCHECK_ALWAYS_ON=1)
elseif(RL_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread)
  add_link_options(-fsanitize=thread)
  add_compile_definitions(RL_DCHECK_ALWAYS_ON=1)
elseif(RL_SANITIZE STREQUAL "undefined")
  add_compile_options(-fsanitize=undefined -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=undefined)
  add_compile_definitions(RL_DCHECK_ALWAYS_ON=1)
elseif(NOT RL_SANITIZE STREQUAL "")
  message(FATAL_ERROR "RL_SANITIZE must be address, thread, undefined or empty")
endif()

# rl_add_library(NAME SOURCES ... DEPS ... [PUBLIC_DEPS ...])
# Defines redline_<NAME> with include root src/ so headers are included as "layer/file.h".
function(rl_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PUBLIC_DEPS" ${ARGN})
  if(NOT ARG_SOURCES)
    # A layer with no sources yet is header-only.
    add_library(redline_${name} INTERFACE)
    target_include_directories(redline_${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(redline_${name} INTERFACE ${ARG_PUBLIC_DEPS} ${ARG_DEPS})
    return()
  endif()
  add_library(redline_${name} STATIC ${ARG_SOURCES})
  target_include_directories(redline_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(redline_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE redline_warnings ${ARG_DEPS})
endfunction()

# rl_add_test(NAME SOURCES ... DEPS ... [LABELS ...])
# One GoogleTest binary per call; each TEST becomes a ctest case.
function(rl_add_test name)
  if(NOT RL_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE redline_warnings ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    RL_SHARED_DIR="${RL_SHARED_DIR}"
    RL_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    RL_BINARY_DIR="${PROJECT_BINARY_DIR}")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600)
  if(ARG_LABELS)
    # gtest_discover_tests's PROPERTIES split a list value into separate
    # arguments, which keeps only the first label. Instead, a ctest include
    # file that runs after the discovered tests' (TEST_INCLUDE_FILES keeps
    # order) labels every test in ${name}_TESTS with the whole list.
    # The label "serial" also makes ctest run those tests alone (RUN_SERIAL):
    # latency-measuring tests whose verdicts a parallel neighbour would skew.
    set(serial "")
    if("serial" IN_LIST ARG_LABELS)
      set(serial " RUN_SERIAL TRUE")
    endif()
    set(labels_file "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake")
    file(WRITE "${labels_file}"
      "foreach(t IN LISTS ${name}_TESTS)\n"
      "  set_tests_properties(\"\${t}\" PROPERTIES LABELS \"${ARG_LABELS}\"${serial})\n"
      "endforeach()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${labels_file}")
  endif()
endfunction()

# rl_isa_sources(SOURCES ... FLAGS ...): ISA flags on those files only.
function(rl_isa_sources)
  cmake_parse_arguments(ARG "" "" "SOURCES;FLAGS" ${ARGN})
  set_source_files_properties(${ARG_SOURCES} PROPERTIES COMPILE_OPTIONS "${ARG_FLAGS}")
endfunction()
