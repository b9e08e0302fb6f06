# SwiOnnxProto.cmake -- swi_onnx_io, the ONNX model reader/writer both `swi export`
# (export/) and the ONNX Runtime backend's rewrites (backends/ort) use: export/onnx_io.c
# over the protobuf-c code generated from Debian libonnx-dev's onnx.proto.
#
# Included from every directory that needs it; defines, once:
#   SWI_ONNX_PROTO_FOUND   TRUE when protoc-c, libprotobuf-c and onnx.proto were found
#   swi_onnx_io            OBJECT library (position independent: it goes into libswi_ort.so)
#   SWI_ONNX_IO_INCLUDES   its include directories (export/ and the generated header)
#   SWI_PROTOBUF_C_LIB     the library to link where its objects are used
if(TARGET swi_onnx_io)
  return()
endif()
find_program(SWI_PROTOC_C protoc-c)
find_path(SWI_PROTOBUF_C_INCLUDE protobuf-c/protobuf-c.h)
find_library(SWI_PROTOBUF_C_LIB protobuf-c)
find_file(SWI_ONNX_PROTO onnx.proto PATHS /usr/include/onnx /usr/local/include/onnx NO_DEFAULT_PATH)
if(NOT SWI_PROTOC_C OR NOT SWI_PROTOBUF_C_INCLUDE OR NOT SWI_PROTOBUF_C_LIB OR NOT EXISTS "${SWI_ONNX_PROTO}")
  set(SWI_ONNX_PROTO_FOUND FALSE CACHE INTERNAL "")
  return()
endif()
set(SWI_ONNX_PROTO_FOUND TRUE CACHE INTERNAL "")

# onnx.pb-c.{c,h} are generated into the build directory, never committed.
get_filename_component(_swi_onnx_proto_dir ${SWI_ONNX_PROTO} DIRECTORY)
set(_swi_onnx_gen ${CMAKE_BINARY_DIR}/onnx_gen)
add_custom_command(
  OUTPUT ${_swi_onnx_gen}/onnx.pb-c.c ${_swi_onnx_gen}/onnx.pb-c.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${_swi_onnx_gen}
  COMMAND ${SWI_PROTOC_C} --proto_path=${_swi_onnx_proto_dir} --c_out=${_swi_onnx_gen} ${SWI_ONNX_PROTO}
  DEPENDS ${SWI_ONNX_PROTO}
  COMMENT "protoc-c: generating onnx.pb-c.c from ${SWI_ONNX_PROTO}")
add_library(swi_onnx_io OBJECT ${CMAKE_SOURCE_DIR}/export/onnx_io.c ${_swi_onnx_gen}/onnx.pb-c.c)
set(SWI_ONNX_IO_INCLUDES ${CMAKE_SOURCE_DIR}/export ${_swi_onnx_gen} ${SWI_PROTOBUF_C_INCLUDE}
    CACHE INTERNAL "")
target_include_directories(swi_onnx_io PRIVATE ${SWI_ONNX_IO_INCLUDES})
set_target_properties(swi_onnx_io PROPERTIES POSITION_INDEPENDENT_CODE ON)
# generated code: no warnings of ours apply
set_source_files_properties(${_swi_onnx_gen}/onnx.pb-c.c PROPERTIES COMPILE_OPTIONS "-w")
