# SwiInstall.cmake -- what `cmake --install` puts under the prefix.
#
#   lib/libswi.{a,so}, lib/libswi_io.{a,so}, lib/libswi_ort.{a,so}, lib/libswi_pipeline.{a,so}
#   (when built); include/swi.h, swi_io.h, swi_store.h, swi_ort.h, swi_pipeline.h
#   lib/cmake/swi/swiConfig.cmake (+ version file, exported targets per component):
#       find_package(swi REQUIRED COMPONENTS ort io)   # or COMPONENTS pipeline (io, ort with it)
#       target_link_libraries(app PRIVATE swi::ort swi::io)   # or swi::swi alone
#     targets swi::swi, swi::io, swi::ort, swi::pipeline (shared) and swi::swi_static,
#     swi::io_static, swi::ort_static, swi::pipeline_static; a component this build lacks
#     fails find_package with a message.
#   lib/pkgconfig/swi.pc, swi-io.pc, swi-ort.pc, swi-pipeline.pc (pkg-config --static lists the private
#     dependencies of the static libraries)
#
# ONNX Runtime is installed only when it came from the source tree (.deps/onnxruntime,
# SWI_ORT_INSTALL_COPY): its shared libraries go to lib/, where the installed swi and
# libswi_ort find them ($ORIGIN run paths), so that the install works without the source
# tree. swiConfig.cmake and swi-ort.pc record where it was found at build time
# (SWI_ORT_LIBRARY), and a consumer may point elsewhere with ORT_ROOT.
# The swi command's own files: bin/swi (cli/), share/swi/niivue.umd.js (report/) and the
# Python package for swi convert, lib/swi/python/swi (python/).

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(_cfgdir ${CMAKE_INSTALL_LIBDIR}/cmake/swi)

install(TARGETS swi_static swi_shared EXPORT swiTargets)
install(FILES ${CMAKE_SOURCE_DIR}/include/swi.h TYPE INCLUDE)
install(EXPORT swiTargets NAMESPACE swi:: DESTINATION ${_cfgdir})

set(SWI_HAVE_IO_COMPONENT FALSE)
if(TARGET swi_io_shared)
  set(SWI_HAVE_IO_COMPONENT TRUE)
  install(TARGETS swi_io_static swi_io_shared EXPORT swiIoTargets)
  install(FILES ${CMAKE_SOURCE_DIR}/io/swi_io.h ${CMAKE_SOURCE_DIR}/io/swi_store.h TYPE INCLUDE)
  install(EXPORT swiIoTargets NAMESPACE swi:: DESTINATION ${_cfgdir})
  if(SWI_NIFTI_FOUND)
    install(FILES ${CMAKE_SOURCE_DIR}/cmake/SwiNifti.cmake DESTINATION ${_cfgdir})
  endif()
endif()

set(SWI_HAVE_ORT_COMPONENT FALSE)
if(TARGET swi_ort_shared)
  set(SWI_HAVE_ORT_COMPONENT TRUE)
  install(TARGETS swi_ort_static swi_ort_shared EXPORT swiOrtTargets)
  install(FILES ${CMAKE_SOURCE_DIR}/backends/ort/swi_ort.h TYPE INCLUDE)
  install(EXPORT swiOrtTargets NAMESPACE swi:: DESTINATION ${_cfgdir})
endif()

if(SWI_ORT_FOUND AND SWI_ORT_INSTALL_COPY)
  get_filename_component(_ort_dir "${SWI_ORT_LIBRARY}" DIRECTORY)
  file(GLOB _ort_files "${_ort_dir}/libonnxruntime*.so*")
  install(FILES ${_ort_files} TYPE LIB)
endif()

set(SWI_HAVE_PIPELINE_COMPONENT FALSE)
if(TARGET swi_pipeline_shared AND SWI_HAVE_IO_COMPONENT)
  set(SWI_HAVE_PIPELINE_COMPONENT TRUE)
  install(TARGETS swi_pipeline_static swi_pipeline_shared EXPORT swiPipelineTargets)
  install(FILES ${CMAKE_SOURCE_DIR}/pipeline/swi_pipeline.h TYPE INCLUDE)
  install(EXPORT swiPipelineTargets NAMESPACE swi:: DESTINATION ${_cfgdir})
endif()

# ---- CMake package ------------------------------------------------------------------
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/swiConfig.cmake.in
  ${CMAKE_BINARY_DIR}/pkg/swiConfig.cmake INSTALL_DESTINATION ${_cfgdir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/pkg/swiConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/pkg/swiConfig.cmake ${CMAKE_BINARY_DIR}/pkg/swiConfigVersion.cmake
  DESTINATION ${_cfgdir})

# ---- pkg-config ---------------------------------------------------------------------
# Private dependencies as linker flags: full library paths become -L/-l pairs.
function(_swi_pc_libs out)
  set(flags "")
  foreach(lib IN LISTS ARGN)
    if(lib MATCHES "^/")
      get_filename_component(d "${lib}" DIRECTORY)
      get_filename_component(n "${lib}" NAME_WE)
      string(REGEX REPLACE "^lib" "" n "${n}")
      list(APPEND flags "-L${d}" "-l${n}")
    elseif(lib MATCHES "^-")
      list(APPEND flags "${lib}")
    elseif(lib)
      list(APPEND flags "-l${lib}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES flags)
  string(REPLACE ";" " " flags "${flags}")
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

# The prefix is found from the .pc file's own place, so `cmake --install --prefix P`
# anywhere gives working files.
file(RELATIVE_PATH _pc_up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" _pc_up "${_pc_up}")
set(SWI_PC_PREFIX "\${pcfiledir}/${_pc_up}")
set(SWI_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
set(SWI_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
set(SWI_PC_VERSION "${PROJECT_VERSION}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/swi.pc.in ${CMAKE_BINARY_DIR}/pkg/swi.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/pkg/swi.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

if(SWI_HAVE_IO_COMPONENT)
  set(SWI_PC_IO_REQUIRES_PRIVATE "")
  set(_io_private "")
  if(SWI_NIFTI_FOUND)
    list(APPEND _io_private ${SWI_NIFTI2_LIBRARY} ${SWI_ZNZ_LIBRARY} z)
  endif()
  list(APPEND _io_private ${SWI_ZARR_LIBS} ${SWI_HDF5_LIBS})
  if(SWI_LIBDEFLATE_FOUND)
    list(APPEND _io_private ${SWI_LIBDEFLATE_LIB}) # .nii.gz (io/gzip.c)
  endif()
  if(SWI_PNG_FOUND)
    set(SWI_PC_IO_REQUIRES_PRIVATE "libpng")
  endif()
  list(APPEND _io_private m)
  _swi_pc_libs(SWI_PC_IO_LIBS_PRIVATE ${_io_private})
  if(SWI_ITK_FOUND)
    # ITK's versioned library files as they are (io/ resolved its imported targets)
    string(REPLACE ";" " " _itk_files "${SWI_ITK_LINK_FILES}")
    string(APPEND SWI_PC_IO_LIBS_PRIVATE " ${_itk_files} -lstdc++")
  endif()
  configure_file(${CMAKE_SOURCE_DIR}/cmake/swi-io.pc.in ${CMAKE_BINARY_DIR}/pkg/swi-io.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/pkg/swi-io.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

if(SWI_HAVE_ORT_COMPONENT)
  set(_ort_private ${SWI_ORT_LIBRARY})
  if(SWI_ONNX_PROTO_FOUND)
    list(APPEND _ort_private ${SWI_PROTOBUF_C_LIB}) # the model rewrites (backends/ort/rewrite.c)
  endif()
  _swi_pc_libs(SWI_PC_ORT_LIBS_PRIVATE ${_ort_private})
  configure_file(${CMAKE_SOURCE_DIR}/cmake/swi-ort.pc.in ${CMAKE_BINARY_DIR}/pkg/swi-ort.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/pkg/swi-ort.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

if(SWI_HAVE_PIPELINE_COMPONENT)
  set(SWI_PC_PIPELINE_REQUIRES "swi-io = ${PROJECT_VERSION}")
  if(SWI_HAVE_ORT_COMPONENT)
    string(APPEND SWI_PC_PIPELINE_REQUIRES ", swi-ort = ${PROJECT_VERSION}")
  endif()
  _swi_pc_libs(SWI_PC_PIPELINE_LIBS_PRIVATE ${SWI_PL_PRIVATE_LIBS} m)
  configure_file(${CMAKE_SOURCE_DIR}/cmake/swi-pipeline.pc.in ${CMAKE_BINARY_DIR}/pkg/swi-pipeline.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/pkg/swi-pipeline.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

# ---- install_consumer: a program outside the tree, built against the install -------
if(BUILD_TESTING AND TARGET swi_ort_shared AND TARGET swi_io_shared AND SWI_NIFTI_FOUND)
  find_program(SWI_PKG_CONFIG NAMES pkg-config pkgconf)
  # A sanitizer or coverage build's libraries need their runtimes in the consumer too.
  set(_consumer_flags "")
  if(SWI_SANITIZE)
    string(APPEND _consumer_flags " -fsanitize=address,undefined")
  endif()
  if(SWI_COVERAGE)
    string(APPEND _consumer_flags " --coverage")
  endif()
  string(STRIP "${_consumer_flags}" _consumer_flags)
  if(SWI_PKG_CONFIG)
    add_test(NAME install_consumer
      COMMAND bash ${CMAKE_SOURCE_DIR}/tests/consumer/run.sh ${CMAKE_BINARY_DIR}
              ${CMAKE_BINARY_DIR}/install_consumer ${SWI_GOLDEN_DIR}/e2e ${CMAKE_COMMAND} ${CMAKE_C_COMPILER}
              "${_consumer_flags}" "$<$<AND:$<BOOL:${SWI_HAVE_PIPELINE_COMPONENT}>,$<TARGET_EXISTS:swi>>:$<TARGET_FILE:swi>>"
              ${CMAKE_SOURCE_DIR}/models/demo.onnx)
    set_tests_properties(install_consumer PROPERTIES TIMEOUT 600)
  else()
    message(STATUS "install_consumer: not registered (no pkg-config)")
  endif()
endif()

# ---- install_swi: the installed swi without the source and build trees -------------
if(BUILD_TESTING AND TARGET swi AND NOT SWI_SANITIZE AND NOT SWI_COVERAGE)
  add_test(NAME install_swi
    COMMAND bash ${CMAKE_SOURCE_DIR}/cli/tests/install_tests.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR}
            ${CMAKE_COMMAND} ${SWI_GOLDEN_DIR} "${Python3_EXECUTABLE}")
  set_tests_properties(install_swi PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
