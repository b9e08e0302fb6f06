#!/usr/bin/env python3
"""Rewrite stride-2 ConvTranspose nodes as sub-pixel convolutions (a diagnostic).

  subpixel.py IN.onnx OUT.onnx [--split]

ONNX Runtime's CPU ConvTranspose is a GEMM into a column buffer followed by a generic
N-d col2im; for 3-D it is several times slower per multiply-add than its Conv. A
ConvTranspose with kernel 3, stride 2, pads 1, output_padding 1 (what MONAI's UNet
exports for every up-sampling) is exactly, per axis,
    y[2m]   = x[m] w[1]
    y[2m+1] = x[m] w[2] + x[m+1] w[0]
so it equals a Conv with a 2x2x2 kernel (pads 0 before, 1 after) that produces 8 x C
channels, one per output phase, followed by a depth-to-space (Reshape, Transpose,
Reshape). Default: that single Conv (2.4x the multiply-adds, zero taps included, but one
large NCHWc-friendly Conv). --split: eight Convs with the exact kernel of each phase
(1 or 2 taps per axis: the original's multiply-adds), then Concat. Same numbers up to
float rounding; spatial sizes must be static (they are for a fixed roi).
"""
import argparse
import itertools
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

TAP = {(0, 0): 1, (0, 1): None, (1, 0): 2, (1, 1): 0}   # (phase, tap) -> kernel index


def attr(n, name, default=None):
    for a in n.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--split", action="store_true")
    a = ap.parse_args()
    m = shape_inference.infer_shapes(onnx.load(a.src))
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    shapes = {}
    for vi in list(g.value_info) + list(g.input) + list(g.output):
        shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else -1
                           for d in vi.type.tensor_type.shape.dim]
    new_nodes, new_inits, done = [], [], 0
    for n in g.node:
        ok = (n.op_type == "ConvTranspose" and attr(n, "strides") == [2, 2, 2]
              and attr(n, "kernel_shape") == [3, 3, 3] and attr(n, "pads") == [1] * 6
              and attr(n, "output_padding") == [1, 1, 1] and attr(n, "group", 1) == 1
              and attr(n, "dilations", [1, 1, 1]) == [1, 1, 1] and n.input[1] in inits
              and n.input[0] in shapes and min(shapes[n.input[0]][2:]) > 0)
        if not ok:
            new_nodes.append(n)
            continue
        W = numpy_helper.to_array(inits[n.input[1]])          # [Ci, Co, 3, 3, 3]
        ci, co = W.shape[:2]
        B = numpy_helper.to_array(inits[n.input[2]]) if len(n.input) > 2 and n.input[2] else np.zeros(co, np.float32)
        M = shapes[n.input[0]][2:]
        base = n.name.replace("/", "_") + "_sp"
        phases = list(itertools.product((0, 1), repeat=3))
        outs = []
        if not a.split:
            Wp = np.zeros((8, co, ci, 2, 2, 2), np.float32)
            for pi, p in enumerate(phases):
                for t in itertools.product((0, 1), repeat=3):
                    k = [TAP[(p[d], t[d])] for d in range(3)]
                    if None in k:
                        continue
                    Wp[pi, :, :, t[0], t[1], t[2]] = W[:, :, k[0], k[1], k[2]].T
            new_inits += [numpy_helper.from_array(Wp.reshape(8 * co, ci, 2, 2, 2), base + "_W"),
                          numpy_helper.from_array(np.tile(B, 8).astype(np.float32), base + "_B")]
            new_nodes.append(helper.make_node("Conv", [n.input[0], base + "_W", base + "_B"], [base + "_c"],
                                              name=base + "_conv", kernel_shape=[2, 2, 2],
                                              pads=[0, 0, 0, 1, 1, 1], strides=[1, 1, 1]))
            cat = base + "_c"
        else:
            for pi, p in enumerate(phases):
                ks = [1 + p[d] for d in range(3)]                   # taps per axis
                Wp = np.zeros((co, ci) + tuple(ks), np.float32)
                for t in itertools.product(*[range(k) for k in ks]):
                    k = [TAP[(p[d], t[d])] for d in range(3)]
                    Wp[(slice(None), slice(None)) + t] = W[:, :, k[0], k[1], k[2]].T
                new_inits += [numpy_helper.from_array(Wp, f"{base}_W{pi}"),
                              numpy_helper.from_array(B.astype(np.float32), f"{base}_B{pi}")]
                new_nodes.append(helper.make_node(
                    "Conv", [n.input[0], f"{base}_W{pi}", f"{base}_B{pi}"], [f"{base}_c{pi}"],
                    name=f"{base}_conv{pi}", kernel_shape=ks,
                    pads=[0, 0, 0] + [k - 1 for k in ks], strides=[1, 1, 1]))
                outs.append(f"{base}_c{pi}")
            new_nodes.append(helper.make_node("Concat", outs, [base + "_c"], name=base + "_cat", axis=1))
            cat = base + "_c"
        s1 = np.array([0, 2, 2, 2, co] + M, np.int64)
        s2 = np.array([0, co] + [2 * x for x in M], np.int64)
        new_inits += [numpy_helper.from_array(s1, base + "_s1"), numpy_helper.from_array(s2, base + "_s2")]
        new_nodes += [
            helper.make_node("Reshape", [cat, base + "_s1"], [base + "_r1"], name=base + "_r1"),
            helper.make_node("Transpose", [base + "_r1"], [base + "_t"], name=base + "_t",
                             perm=[0, 4, 5, 1, 6, 2, 7, 3]),
            helper.make_node("Reshape", [base + "_t", base + "_s2"], [n.output[0]], name=base + "_r2"),
        ]
        done += 1
    del g.node[:]
    g.node.extend(new_nodes)
    g.initializer.extend(new_inits)
    del g.value_info[:]
    onnx.checker.check_model(m)
    onnx.save(m, a.dst)
    print(f"subpixel: rewrote {done} ConvTranspose node(s){' (split)' if a.split else ''}", file=sys.stderr)


if __name__ == "__main__":
    main()
