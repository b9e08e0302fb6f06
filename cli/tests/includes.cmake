# cmake -DROOT=<source dir> -P includes.cmake: every #include "X" of cli/ names the command's
# own header (cli/), one of common/ or bench/lib/ (swi_common, swi_bench), the demo's
# generator (phantom.h), or an installed public header; never an internal header of the
# pipeline or of the other libraries.
cmake_minimum_required(VERSION 3.16)
set(_public swi.h swi_io.h swi_store.h swi_ort.h swi_resample.h swi_pipeline.h swi_report.h phantom.h)
file(GLOB _files ${ROOT}/cli/*.c ${ROOT}/cli/*.h)
set(_bad 0)
foreach(_f ${_files})
  file(STRINGS ${_f} _lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(_l ${_lines})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" _h "${_l}")
    if(_h IN_LIST _public OR EXISTS ${ROOT}/cli/${_h} OR EXISTS ${ROOT}/common/${_h} OR
       EXISTS ${ROOT}/bench/lib/${_h})
      continue()
    endif()
    message(SEND_ERROR "${_f}: #include \"${_h}\": the command includes public headers, its own, "
                       "common/'s and bench/lib/'s only")
    math(EXPR _bad "${_bad} + 1")
  endforeach()
endforeach()
list(LENGTH _files _n)
if(_bad EQUAL 0)
  message(STATUS "cli_includes: the ${_n} files of cli/ include public headers and their own only")
endif()
