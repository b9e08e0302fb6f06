#!/usr/bin/env python3
"""Volumes and ONNX models for tests/fault/cli_faults.sh, written into the folder given.

Needs numpy, nibabel and onnx (Debian: python3-numpy python3-nibabel python3-onnx).
Everything is small (a few KB) and deterministic.
"""
import os
import sys

import nibabel as nib
import numpy as np
from onnx import TensorProto, helper, save

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(6)
AFFINE = np.array([[1.5, 0, 0, -10], [0, 2.0, 0, -20], [0, 0, 2.5, -30], [0, 0, 0, 1]])


def vol(name, data):
    nib.save(nib.Nifti1Image(np.asarray(data, np.float32), AFFINE), os.path.join(out, name))


def model(name, nodes, inits, out_shape, out_name="y", roi=(8, 8, 8)):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, *roi])
    y = helper.make_tensor_value_info(out_name, TensorProto.FLOAT, out_shape)
    g = helper.make_graph(nodes, name, [x], [y], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="fault")
    m.ir_version = 8
    save(m, os.path.join(out, name + ".onnx"))


# ---- volumes ----------------------------------------------------------------------------
base = rng.normal(size=(12, 10, 9)).astype(np.float32)
vol("vol.nii.gz", base)
vol("vol.nii", base)  # the same voxels, uncompressed
bad = base.copy()
bad[1, 2, 3], bad[5, 5, 5], bad[10, 0, 8] = np.nan, np.inf, -np.inf
vol("nanvox.nii.gz", bad)
zero = base.copy()
zero[1, 2, 3] = zero[5, 5, 5] = zero[10, 0, 8] = 0
vol("nanvox_as_zero.nii.gz", zero)
# a sibling pair: X.nii.gz and a different X.nii beside it
os.makedirs(os.path.join(out, "sib"), exist_ok=True)
vol("sib/scan.nii.gz", base)
vol("sib/scan.nii", -3 * base[::-1])
# values 0..2, with a hot block (1000) in the corner the last windows cover
hot = rng.integers(0, 3, size=(16, 16, 16)).astype(np.float32)
hot[12:, 12:, 12:] = 1000
vol("hot.nii.gz", hot)
# a bigger volume for runs that must last a while
vol("long.nii.gz", rng.normal(size=(64, 64, 48)).astype(np.float32))

# a 120-byte .nii.gz whose header promises 2^38 voxels (int16): nothing to read
import gzip
import struct

h = bytearray(348)
struct.pack_into("<i", h, 0, 348)
struct.pack_into("<8h", h, 40, 3, 32767, 32767, 256, 1, 1, 1, 1)
struct.pack_into("<hh", h, 70, 4, 16)
struct.pack_into("<8f", h, 76, 1, 1, 1, 1, 1, 1, 1, 1)
struct.pack_into("<f", h, 108, 352.0)
h[344:348] = b"n+1\0"
with open(os.path.join(out, "promise.nii.gz"), "wb") as f:
    f.write(gzip.compress(bytes(h) + b"\0" * 4 + b"\0" * 64, 9, mtime=0))

# ---- models (window 8^3, one input channel) ---------------------------------------------
# tiny: a 3x3x3 convolution to 3 classes
w = (rng.normal(size=(3, 1, 3, 3, 3)) * 0.3).astype(np.float32)
b = np.array([0.1, -0.2, 0.05], np.float32)
model("tiny",
      [helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3, 3], pads=[1] * 6)],
      [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel()),
       helper.make_tensor("b", TensorProto.FLOAT, b.shape, b)],
      ["n", 3, 8, 8, 8])
# midway: y = [T[x], -T[x]] with T a 3-entry table; a voxel >= 3 makes Gather fail, so the
# run fails at the first window that reaches the hot block
t = np.array([0.5, -1.0, 2.0], np.float32)
model("midway",
      [helper.make_node("Cast", ["x"], ["i"], to=TensorProto.INT64),
       helper.make_node("Gather", ["t", "i"], ["g"], axis=0),
       helper.make_node("Neg", ["g"], ["ng"]),
       helper.make_node("Concat", ["g", "ng"], ["y"], axis=1)],
      [helper.make_tensor("t", TensorProto.FLOAT, [3], t)],
      ["n", 2, 8, 8, 8])
# shrink: declares a dynamic output but returns half the window (MaxPool stride 2)
model("shrink",
      [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2, 2], strides=[2, 2, 2]),
       helper.make_node("Concat", ["p", "p"], ["y"], axis=1)],
      [], ["n", 2, "a", "b", "c"])
# nan: every score is NaN (sqrt of a negative number)
model("nan",
      [helper.make_node("Mul", ["x", "x"], ["sq"]),
       helper.make_node("Add", ["sq", "one"], ["p"]),
       helper.make_node("Neg", ["p"], ["m"]),
       helper.make_node("Sqrt", ["m"], ["s"]),
       helper.make_node("Concat", ["s", "s"], ["y"], axis=1)],
      [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])],
      ["n", 2, 8, 8, 8])
