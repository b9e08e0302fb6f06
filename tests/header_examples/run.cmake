# The test header_examples: builds every header's example (tests/header_examples) in the
# build folder BUILD_DIR and fails with the compiler's or linker's message when one fails.
string(REPLACE "|" ";" _notes "${NOTES}")
foreach(_n IN LISTS _notes)
  message(STATUS "${_n}")
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target header_examples --config ${CONFIG}
                RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "header_examples: a header's example does not compile or link (above)")
endif()
message(STATUS "header_examples: every example built")
