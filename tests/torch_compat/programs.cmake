# tests/torch_compat: the unit tests link the layer; the libtorch-style programs in programs/ are
# each built twice when Debian's libtorch-dev is installed: against the layer (torch_program_<name>)
# and against libtorch 1.13 (libtorch_program_<name>, which sees no nabla header). test_programs.cpp
# runs them and compares their printed numbers with each other and with programs/<name>.expected,
# libtorch's output recorded by record_libtorch.sh (the reference where libtorch is not installed).
target_link_libraries(nabla_torch_compat_tests PRIVATE nabla::torch_compat)
file(GLOB NABLA_TORCH_PROGRAMS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/torch_compat/programs/*.cpp)
if(NOT NABLA_SANITIZE)
  find_package(Torch QUIET)
endif()
set(NABLA_TORCH_PROGRAM_NAMES "")
foreach(src ${NABLA_TORCH_PROGRAMS})
  get_filename_component(name ${src} NAME_WE)
  list(APPEND NABLA_TORCH_PROGRAM_NAMES ${name})
  add_executable(torch_program_${name} ${src})
  target_link_libraries(torch_program_${name} PRIVATE nabla::torch_compat)
  target_compile_options(torch_program_${name} PRIVATE -Wall -Wextra)
  nabla_test_program(torch_program_${name})
  add_dependencies(nabla_torch_compat_tests torch_program_${name})
  if(Torch_FOUND)
    add_executable(libtorch_program_${name} ${src})
    target_link_libraries(libtorch_program_${name} PRIVATE ${TORCH_LIBRARIES})
    nabla_test_program(libtorch_program_${name})
    add_dependencies(nabla_torch_compat_tests libtorch_program_${name})
  endif()
endforeach()
string(REPLACE ";" "," NABLA_TORCH_PROGRAM_NAMES "${NABLA_TORCH_PROGRAM_NAMES}")
target_compile_definitions(nabla_torch_compat_tests PRIVATE
  NABLA_TORCH_PROGRAM_DIR="${CMAKE_CURRENT_BINARY_DIR}" NABLA_TORCH_PROGRAM_NAMES="${NABLA_TORCH_PROGRAM_NAMES}"
  NABLA_TORCH_EXPECTED_DIR="${CMAKE_CURRENT_SOURCE_DIR}/torch_compat/programs"
  NABLA_LIBTORCH_TWINS=$<BOOL:${Torch_FOUND}>)
