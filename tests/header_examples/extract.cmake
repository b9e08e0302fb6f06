# cmake -DHEADER=h -DOUT=f -P extract.cmake: writes to OUT the code between the lines
# `// example:begin` and `// example:end` of HEADER's comment, without the comment's
# leading " *", behind a #line directive so that compiler messages name the header's lines.
file(READ ${HEADER} _text)
set(_begin "// example:begin\n")
set(_end "// example:end\n")
string(FIND "${_text}" "${_begin}" _b)
string(FIND "${_text}" "${_begin}" _b2 REVERSE)
string(FIND "${_text}" "${_end}" _e)
string(FIND "${_text}" "${_end}" _e2 REVERSE)
if(_b EQUAL -1 OR _e EQUAL -1 OR _e LESS _b)
  message(FATAL_ERROR "${HEADER}: no example: its opening comment needs a line "
                      "'// example:begin' before the example's code and '// example:end' after it")
endif()
if(NOT _b EQUAL _b2 OR NOT _e EQUAL _e2)
  message(FATAL_ERROR "${HEADER}: more than one example:begin or example:end line")
endif()
string(LENGTH "${_begin}" _blen)
math(EXPR _start "${_b} + ${_blen}")
string(SUBSTRING "${_text}" 0 ${_e} _upto)
string(FIND "${_upto}" "\n" _stop REVERSE) # the end of the last line of code
math(EXPR _len "${_stop} + 1 - ${_start}")
string(SUBSTRING "${_text}" ${_start} ${_len} _code)
if(NOT _code MATCHES "\n$" OR "\n${_code}" MATCHES "\n([^ ]| [^*])" OR _code MATCHES "\\*/")
  message(FATAL_ERROR "${HEADER}: every line between example:begin and example:end must be "
                      "a line of its opening comment (' *' then the code)")
endif()
string(REGEX REPLACE "\n \\*" "\n" _code "\n${_code}")
string(SUBSTRING "${_code}" 1 -1 _code)
string(SUBSTRING "${_text}" 0 ${_start} _before)
string(REGEX MATCHALL "\n" _lines "${_before}")
list(LENGTH _lines _line)
math(EXPR _line "${_line} + 1")
file(WRITE ${OUT} "#line ${_line} \"${HEADER}\"\n${_code}")
