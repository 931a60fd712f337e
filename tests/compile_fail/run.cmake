# One compile-fail check: compiles SOURCE (-fsyntax-only, C++20, the repository on the include
# path) and passes when the result is what the file's first line says:
#   // expect: compiles                 the file must compile (the harness's control)
#   // expect: REGEX                    the compiler must fail and its output match REGEX
# Run by ctest (tests/CMakeLists.txt): cmake -DCXX=... -DROOT=... -DSOURCE=... -P run.cmake
file(STRINGS "${SOURCE}" first LIMIT_COUNT 1)
if(NOT first MATCHES "^// expect: (.+)$")
  message(FATAL_ERROR "${SOURCE}: the first line must be '// expect: compiles' or '// expect: REGEX'")
endif()
set(expect "${CMAKE_MATCH_1}")
execute_process(COMMAND "${CXX}" -std=c++20 -fsyntax-only -I "${ROOT}" "${SOURCE}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(expect STREQUAL "compiles")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${SOURCE} must compile, but:\n${out}")
  endif()
elseif(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must fail with a message matching: ${expect}")
elseif(NOT out MATCHES "${expect}")
  message(FATAL_ERROR "${SOURCE} failed as it must, but the message does not match '${expect}':\n${out}")
endif()
