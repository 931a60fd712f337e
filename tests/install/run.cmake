# Installs the nabla build in NABLA_BUILD_DIR into a scratch prefix, then builds and runs a
# consumer program against it twice: with find_package(nabla) and with pkg-config. Then, with
# pkg-config and -Wall -Wextra -Werror: shadow/main.cpp with a header of its own for each of nabla's
# (core/ops.h, nn/module.h, data/dataset.h, ...: each an #error, made here) in a folder ahead of
# nabla's include folder, so that one include of nabla's that does not go by a relative path fails
# the build; and every whole program among README.md's C++ blocks (those that begin with #include),
# compiled and linked.
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

run(${CMAKE_COMMAND} --install "${NABLA_BUILD_DIR}" --prefix "${prefix}")
run(${CMAKE_COMMAND} -S "${CONSUMER_SRC}" -B "${WORK_DIR}/consumer" -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_CXX_COMPILER=${CXX})
run(${CMAKE_COMMAND} --build "${WORK_DIR}/consumer")
run("${WORK_DIR}/consumer/consumer")

# A libtorch project (tests/install/torch_consumer: libtorch's own CMake lines) builds, unchanged,
# against nabla's TorchConfig.cmake (the install component torch_config, which
# -DNABLA_INSTALL_TORCH_CONFIG=ON puts in the default install), and runs.
get_filename_component(tests_dir "${CONSUMER_SRC}" DIRECTORY)
get_filename_component(tests_dir "${tests_dir}" DIRECTORY)
set(torch_program "${tests_dir}/torch_compat/programs/polynomial_autograd.cpp")
run(${CMAKE_COMMAND} --install "${NABLA_BUILD_DIR}" --prefix "${prefix}" --component torch_config)
file(GLOB_RECURSE torch_config "${prefix}/*/TorchConfig.cmake")
get_filename_component(torch_dir "${torch_config}" DIRECTORY)
run(${CMAKE_COMMAND} -S "${tests_dir}/install/torch_consumer" -B "${WORK_DIR}/torch_consumer" -DTorch_DIR=${torch_dir}
    -DPROGRAM=${torch_program} -DCMAKE_CXX_COMPILER=${CXX})
run(${CMAKE_COMMAND} --build "${WORK_DIR}/torch_consumer")
execute_process(COMMAND "${WORK_DIR}/torch_consumer/app" WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc
                OUTPUT_VARIABLE out)
# (The printed losses are compared with libtorch's by tests/torch_compat; here the exact gradients.)
if(NOT rc EQUAL 0 OR NOT out MATCHES "grad -1.031250 0.375000 6.000000")
  message(FATAL_ERROR "the libtorch program built with find_package(Torch) failed or printed other gradients (${rc}):\n${out}")
endif()
message(STATUS "a libtorch project built unchanged with find_package(Torch) and ran")

find_program(PKG_CONFIG pkg-config)
if(NOT PKG_CONFIG)
  message(FATAL_ERROR "pkg-config is not installed")
endif()
file(GLOB_RECURSE pcfile "${prefix}/*/nabla.pc")
get_filename_component(pcdir "${pcfile}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pcdir}")
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs nabla OUTPUT_VARIABLE flags RESULT_VARIABLE rc
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config cannot find nabla in ${pcdir}")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${CXX} "${CONSUMER_SRC}/main.cpp" "${CONSUMER_SRC}/old_paths.cpp" -o "${WORK_DIR}/consumer_pc" ${flags})
run("${WORK_DIR}/consumer_pc")

set(strict -Wall -Wextra -Werror)
file(GLOB_RECURSE installed RELATIVE "${prefix}/include/nabla" "${prefix}/include/nabla/*/*.h")
list(LENGTH installed ninstalled)
if(ninstalled LESS 50)
  message(FATAL_ERROR "only ${ninstalled} headers installed under ${prefix}/include/nabla")
endif()
foreach(h IN LISTS installed)
  file(WRITE "${WORK_DIR}/user_headers/${h}"
       "#error \"nabla's headers picked up the user's own ${h}: they must include each other by relative paths\"\n")
endforeach()
run(${CXX} ${strict} -I "${WORK_DIR}/user_headers" "${SHADOW_SRC}/main.cpp" -o "${WORK_DIR}/shadow" ${flags})
run("${WORK_DIR}/shadow")

# (awk, not CMake's regular expressions: C++'s semicolons and brackets would split CMake lists.)
execute_process(COMMAND awk -v dir=${WORK_DIR} [=[
  /^```cpp$/ { inb = 1; n++; buf = ""; first = 1; next }
  inb && /^```$/ { inb = 0; if (keep) { f = dir "/readme_" n ".cpp"; printf "%s", buf > f; close(f) } next }
  inb { if (first) { keep = ($0 ~ /^#include/); first = 0 } buf = buf $0 "\n" }
]=] "${README}" RESULT_VARIABLE rc)
file(GLOB programs "${WORK_DIR}/readme_*.cpp")
list(LENGTH programs nblocks)
if(NOT rc EQUAL 0 OR nblocks EQUAL 0)
  message(FATAL_ERROR "no whole C++ program found in ${README}")
endif()
foreach(src IN LISTS programs)
  get_filename_component(name "${src}" NAME_WE)
  run(${CXX} ${strict} "${src}" -o "${WORK_DIR}/${name}" ${flags})
endforeach()
message(STATUS "README.md: ${nblocks} whole programs compiled with ${strict}")

# libtorch's builder chain on nabla's options (structs, not builders) stops with a message that
# shows nabla's spelling.
file(WRITE "${WORK_DIR}/builder.cpp"
     "#include <nabla.h>\nint main() { auto o = nabla::nn::Conv2dOptions{1, 32, 3}.stride(2); (void)o; }\n")
execute_process(COMMAND ${CXX} -fsyntax-only ${flags} "${WORK_DIR}/builder.cpp" RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "options are structs, not builders")
  message(FATAL_ERROR "Conv2dOptions{...}.stride(2) should fail to compile, naming designated initialisers (${rc}):\n${err}")
endif()
message(STATUS "a libtorch builder chain fails to compile with nabla's spelling in the message")
