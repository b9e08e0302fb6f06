# SwiOnnxProto.cmake -- what onnx/ (swi_onnx: ONNX models through protobuf-c) needs:
# protoc-c, libprotobuf-c and the onnx.proto that Debian's libonnx-dev ships.
#
# Defines:
#   SWI_ONNX_PROTO_FOUND   TRUE when all three were found
#   SWI_PROTOC_C, SWI_PROTOBUF_C_INCLUDE, SWI_PROTOBUF_C_LIB, SWI_ONNX_PROTO  where (cached)
find_program(SWI_PROTOC_C protoc-c)
find_path(SWI_PROTOBUF_C_INCLUDE protobuf-c/protobuf-c.h)
find_library(SWI_PROTOBUF_C_LIB protobuf-c)
find_file(SWI_ONNX_PROTO onnx.proto PATHS /usr/include/onnx /usr/local/include/onnx NO_DEFAULT_PATH)
if(NOT SWI_PROTOC_C OR NOT SWI_PROTOBUF_C_INCLUDE OR NOT SWI_PROTOBUF_C_LIB OR NOT EXISTS "${SWI_ONNX_PROTO}")
  set(SWI_ONNX_PROTO_FOUND FALSE CACHE INTERNAL "")
else()
  set(SWI_ONNX_PROTO_FOUND TRUE CACHE INTERNAL "")
endif()
