#!/usr/bin/env python3
"""Tiny ONNX models for test_ort_rewrite (Debian's python3-onnx and -numpy).

    make_rewrite_models.py DIR

Each model is one input [n, C, i, j, k] float32 -> one output, with random weights
(fixed seeds). The names say the ConvTranspose pattern; the number after "rw" is how many
layers the sub-pixel rewrite must replace.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def convt(name, x, y, ci, co, kernel, strides, pads=None, output_padding=None, bias=True,
          group=1, raw=True, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((ci, co // group) + tuple(kernel)).astype(np.float32)
    inits = []
    if raw:
        inits.append(numpy_helper.from_array(w, name + "_w"))
    else:  # float_data rather than raw_data
        inits.append(helper.make_tensor(name + "_w", TensorProto.FLOAT, w.shape, w.flatten().tolist()))
    ins = [x, name + "_w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(co).astype(np.float32), name + "_b"))
        ins.append(name + "_b")
    kw = dict(kernel_shape=list(kernel), strides=list(strides))
    if pads is not None:
        kw["pads"] = list(pads)
    if output_padding is not None:
        kw["output_padding"] = list(output_padding)
    if group != 1:
        kw["group"] = group
    return [helper.make_node("ConvTranspose", ins, [y], name=name, **kw)], inits


def save(d, name, nodes, inits, cin, cout, in_spatial, out_spatial):
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", cin] + list(in_spatial))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", cout] + list(out_spatial))],
        inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(d, name + ".onnx"))


def main(d):
    os.makedirs(d, exist_ok=True)
    S = [5, 6, 7]
    # stride == kernel, pads 0 (the U-Net up-sampling of nnU-Net, BasicUNet): a 1x1x1 Conv
    n, i = convt("up", "x", "y", 3, 4, (2, 2, 2), (2, 2, 2), seed=1)
    save(d, "k2s2_rw1", n, i, 3, 4, S, [10, 12, 14])
    n, i = convt("up", "x", "y", 2, 3, (3, 3, 3), (3, 3, 3), bias=False, raw=False, seed=2)
    save(d, "k3s3_nobias_floatdata_rw1", n, i, 2, 3, S, [15, 18, 21])
    n, i = convt("up", "x", "y", 2, 3, (2, 2, 1), (2, 2, 1), bias=False, seed=3)
    save(d, "k221s221_rw1", n, i, 2, 3, S, [10, 12, 7])
    # MONAI's UNet: kernel 3, stride 2, pads 1, output_padding 1 (a 2x2x2 Conv)
    n, i = convt("up", "x", "y", 3, 4, (3, 3, 3), (2, 2, 2), pads=[1] * 6,
                 output_padding=[1, 1, 1], seed=4)
    save(d, "k3s2p1op1_rw1", n, i, 3, 4, S, [10, 12, 14])
    # not rewritten: the output is not stride x the input (2M - 1), grouped, stride 1
    n, i = convt("up", "x", "y", 3, 4, (3, 3, 3), (2, 2, 2), pads=[1] * 6, seed=5)
    save(d, "k3s2p1_rw0", n, i, 3, 4, S, [9, 11, 13])
    n, i = convt("up", "x", "y", 4, 4, (2, 2, 2), (2, 2, 2), group=2, seed=6)
    save(d, "group2_rw0", n, i, 4, 4, S, [10, 12, 14])
    n, i = convt("up", "x", "y", 3, 4, (3, 3, 3), (1, 1, 1), pads=[1] * 6, seed=7)
    save(d, "stride1_rw0", n, i, 3, 4, S, S)
    # a chain with dynamic spatial sizes: Conv, both patterns, a nonlinearity between
    rng = np.random.default_rng(8)
    cw = numpy_helper.from_array(rng.standard_normal((3, 1, 3, 3, 3)).astype(np.float32), "c_w")
    n1, i1 = convt("up1", "h", "u1", 3, 5, (2, 2, 2), (2, 2, 2), seed=9)
    n2, i2 = convt("up2", "r", "y", 5, 2, (3, 3, 3), (2, 2, 2), pads=[1] * 6,
                   output_padding=[1, 1, 1], seed=10)
    nodes = ([helper.make_node("Conv", ["x", "c_w"], ["h"], pads=[1] * 6, kernel_shape=[3, 3, 3])]
             + n1 + [helper.make_node("Relu", ["u1"], ["r"])] + n2)
    save(d, "chain_dynamic_rw2", nodes, [cw] + i1 + i2, 1, 2, ["i", "j", "k"], ["I", "J", "K"])


if __name__ == "__main__":
    main(sys.argv[1])
