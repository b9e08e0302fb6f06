# SwiOnnxRuntime.cmake -- find ONNX Runtime's C API (optional).
#
# Looked for, in order:
#   1. ORT_ROOT (cache variable, or the ORT_ROOT environment variable): <root>/include,
#      <root>/lib (the layout of the official release archives);
#   2. ${CMAKE_SOURCE_DIR}/.deps/onnxruntime, where scripts/install-deps.sh puts the
#      npm package com.github.asus4.onnxruntime;
#   3. pkg-config (libonnxruntime).
# Defines, when found: the imported target swi::onnxruntime, SWI_ORT_FOUND=TRUE,
# SWI_ORT_LIBRARY_DIR (for RPATHs) and SWI_ORT_INSTALL_COPY (found in .deps: installed with
# swi). Include it from any directory; it runs once.

if(TARGET swi::onnxruntime OR DEFINED _SWI_ORT_SEARCHED)
  return()
endif()
set(_SWI_ORT_SEARCHED TRUE)
set(SWI_ORT_FOUND FALSE)

if(NOT ORT_ROOT AND DEFINED ENV{ORT_ROOT})
  set(ORT_ROOT "$ENV{ORT_ROOT}")
endif()
set(ORT_ROOT "${ORT_ROOT}" CACHE PATH "ONNX Runtime install prefix (with include/ and lib/)")

set(_swi_ort_roots "")
if(ORT_ROOT)
  list(APPEND _swi_ort_roots "${ORT_ROOT}")
endif()
list(APPEND _swi_ort_roots "${CMAKE_SOURCE_DIR}/.deps/onnxruntime")

foreach(_root IN LISTS _swi_ort_roots)
  unset(SWI_ORT_INCLUDE_DIR CACHE)
  unset(SWI_ORT_LIBRARY CACHE)
  find_path(SWI_ORT_INCLUDE_DIR onnxruntime_c_api.h
            PATHS "${_root}/include" "${_root}/include/onnxruntime"
                  "${_root}/include/onnxruntime/core/session"
            NO_DEFAULT_PATH)
  find_library(SWI_ORT_LIBRARY NAMES onnxruntime libonnxruntime.so.1
               PATHS "${_root}/lib" "${_root}/lib64" NO_DEFAULT_PATH)
  if(SWI_ORT_INCLUDE_DIR AND SWI_ORT_LIBRARY)
    set(SWI_ORT_FOUND TRUE)
    set(_swi_ort_how "${_root}")
    break()
  endif()
endforeach()

if(NOT SWI_ORT_FOUND)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(_SWI_PC_ORT QUIET libonnxruntime)
    if(_SWI_PC_ORT_FOUND)
      unset(SWI_ORT_INCLUDE_DIR CACHE)
      unset(SWI_ORT_LIBRARY CACHE)
      find_path(SWI_ORT_INCLUDE_DIR onnxruntime_c_api.h
                HINTS ${_SWI_PC_ORT_INCLUDE_DIRS} PATH_SUFFIXES onnxruntime
                      onnxruntime/core/session)
      find_library(SWI_ORT_LIBRARY NAMES onnxruntime HINTS ${_SWI_PC_ORT_LIBRARY_DIRS})
      if(SWI_ORT_INCLUDE_DIR AND SWI_ORT_LIBRARY)
        set(SWI_ORT_FOUND TRUE)
        set(_swi_ort_how "pkg-config libonnxruntime ${_SWI_PC_ORT_VERSION}")
      endif()
    endif()
  endif()
endif()

if(SWI_ORT_FOUND)
  get_filename_component(SWI_ORT_LIBRARY_DIR "${SWI_ORT_LIBRARY}" DIRECTORY)
  # The copy scripts/install-deps.sh unpacked into the source tree is no install: cmake
  # --install copies it under the prefix (SwiInstall.cmake) and the installed programs find
  # it there.
  get_filename_component(_swi_ort_real "${SWI_ORT_LIBRARY_DIR}" REALPATH)
  get_filename_component(_swi_deps_real "${CMAKE_SOURCE_DIR}/.deps" REALPATH)
  string(FIND "${SWI_ORT_LIBRARY_DIR}/" "${CMAKE_SOURCE_DIR}/.deps/" _swi_at)
  string(FIND "${_swi_ort_real}/" "${_swi_deps_real}/" _swi_at_real)
  if(_swi_at EQUAL 0 OR _swi_at_real EQUAL 0)
    set(SWI_ORT_INSTALL_COPY TRUE)
  else()
    set(SWI_ORT_INSTALL_COPY FALSE)
  endif()
  add_library(swi::onnxruntime SHARED IMPORTED GLOBAL)
  set_target_properties(swi::onnxruntime PROPERTIES
    IMPORTED_LOCATION "${SWI_ORT_LIBRARY}"
    IMPORTED_NO_SONAME FALSE
    INTERFACE_INCLUDE_DIRECTORIES "${SWI_ORT_INCLUDE_DIR}")
  message(STATUS "ONNX Runtime: ${SWI_ORT_LIBRARY} (from ${_swi_ort_how})")
else()
  message(STATUS "ONNX Runtime: not found (set ORT_ROOT, or run scripts/install-deps.sh); "
                 "swi will be built without it")
endif()
