/*
 * onnx_metadata.h -- one value of an ONNX model's metadata_props, read through protobuf-c
 * (swi_onnx_static, not installed). Needs no protobuf-c header of its caller.
 */
#ifndef SWI_ONNX_METADATA_H
#define SWI_ONNX_METADATA_H

#include <stddef.h>

/** The value of the first metadata_props entry of the ONNX model at `path` whose key is
 *  `key`. Returns 1 and sets *value (NUL-terminated, malloc'd: the caller frees it) when
 *  the model has one; 0 and *value = NULL when it has none; -1 and *value = NULL with
 *  `err` filled when the file cannot be read, does not parse as an ONNX model, or memory
 *  runs out. The whole model is unpacked (its weights included) and released before the
 *  return. */
int ox_read_metadata(const char *path, const char *key, char **value, char *err, size_t errlen);

#endif
