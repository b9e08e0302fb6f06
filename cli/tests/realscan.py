#!/usr/bin/env python3
"""Test data and checks for realscan_tests.sh (Debian's python3-numpy, -nibabel, -onnx).

    realscan.py make DIR                  clitest.py's data plus the models and volumes here
    realscan.py grad-labels OUT IN CODES  OUT must be the "grad" model's labels with the
                                          volume oriented to CODES (nibabel's orientations)
    realscan.py ensemble-labels OUT IN    OUT must be the mean of quant4 and quant4_shift

The "grad" model computes g = x[i + 1] - x[i] along the first axis of its window (x is 0
past the end) and scores -(g - c)^2 for c = -2..2: with the whole volume as one window its labels
depend on which way the first axis runs, so they show whether the volume was oriented.
"""
import os
import sys

import numpy as np
import nibabel as nib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest  # noqa: E402

GRAD_CENTERS = np.arange(-2, 3, dtype=np.float32)


def make(d):
    import onnx
    from onnx import TensorProto, helper
    clitest.make(d)
    f = TensorProto.FLOAT

    def save(name, nodes, inits, in_shape, out_shape):
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", f, in_shape)],
                              [helper.make_tensor_value_info("y", f, out_shape)], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        onnx.save(m, os.path.join(d, name + ".onnx"))

    c = GRAD_CENTERS.reshape(1, -1, 1, 1, 1)
    save("grad", [helper.make_node("Conv", ["x", "w"], ["g"], pads=[0, 0, 0, 1, 0, 0]),
                  helper.make_node("Sub", ["g", "c"], ["d"]),
                  helper.make_node("Mul", ["d", "d"], ["d2"]),
                  helper.make_node("Neg", ["d2"], ["y"])],
         [helper.make_tensor("w", f, [1, 1, 2, 1, 1], [-1.0, 1.0]),
          helper.make_tensor("c", f, c.shape, c.flatten().tolist())],
         ["n", 1, "i", "j", "k"], ["n", 5, "i", "j", "k"])
    c4 = (np.arange(4, dtype=np.float32) + 0.5).reshape(1, 4, 1, 1, 1)
    save("quant4_shift", [helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=1),
                          helper.make_node("Sub", ["s", "c"], ["d"]),
                          helper.make_node("Mul", ["d", "d"], ["d2"]),
                          helper.make_node("Neg", ["d2"], ["y"])],
         [helper.make_tensor("axes", TensorProto.INT64, [1], [1]),
          helper.make_tensor("c", f, c4.shape, c4.flatten().tolist())],
         ["n", 1, 8, 8, 8], ["n", 4, 8, 8, 8])
    save("quant5", [helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=1),
                    helper.make_node("Sub", ["s", "c"], ["y"])],
         [helper.make_tensor("axes", TensorProto.INT64, [1], [1]),
          helper.make_tensor("c", f, [1, 5, 1, 1, 1], list(range(5)))],
         ["n", 1, 8, 8, 8], ["n", 5, 8, 8, 8])
    # quant4 with a card in its metadata_props
    m = onnx.load(os.path.join(d, "quant4.onnx"))
    e = m.metadata_props.add()
    e.key = "swi.card"
    e.value = '{"orientation": "PIR", "overlap": 0.5, "classes": ["bg", "one", "two", "three"]}'
    onnx.save(m, os.path.join(d, "quant4_embedded.onnx"))
    v = np.asarray(nib.load(os.path.join(d, "vol.nii.gz")).dataobj)
    diag = np.diag([0.8, 0.8, 2.5, 1.0])
    diag[:3, 3] = [10, -20, 30]
    nib.Nifti1Image(v, diag).to_filename(os.path.join(d, "vol_diag.nii.gz"))
    v2 = np.asarray(nib.load(os.path.join(d, "vol2.nii.gz")).dataobj)
    nib.Nifti1Image(np.stack([v, v2], -1), clitest.AFFINE).to_filename(
        os.path.join(d, "vol_4d2.nii.gz"))


def compare(out, exp, scores):
    lab = np.asarray(nib.load(out).dataobj)
    srt = np.sort(scores, axis=-1)
    tie = (srt[..., -1] - srt[..., -2]) < 1e-3
    bad = (lab != exp) & ~tie
    if lab.shape != exp.shape or bad.any():
        print(f"FAIL: {bad.sum()} labels differ (shape {lab.shape} vs {exp.shape})")
        return 1
    print(f"labels ok ({tie.sum()} near-ties skipped)")
    return 0


def grad_labels(out, inp, codes):
    img = nib.load(inp)
    x = np.asarray(img.dataobj).astype(np.float32)
    o = nib.orientations
    fwd = o.ornt_transform(o.io_orientation(img.affine), o.axcodes2ornt(tuple(codes)))
    r = o.apply_orientation(x, fwd).astype(np.float64)
    g = -r  # the zero past the end: g = 0 - x there
    g[:-1] = r[1:] - r[:-1]
    sc = -(g[..., None] - GRAD_CENTERS.astype(np.float64)) ** 2
    back = o.ornt_transform(o.axcodes2ornt(tuple(codes)), o.io_orientation(img.affine))
    exp = o.apply_orientation(np.argmax(sc, -1), back)
    scb = np.stack([o.apply_orientation(sc[..., k], back) for k in range(sc.shape[-1])], -1)
    return compare(out, exp, scb)


def ensemble_labels(out, inp):
    s = np.asarray(nib.load(inp).dataobj).astype(np.float64)[..., None]
    c = np.arange(4, dtype=np.float64)
    sc = -((s - c) ** 2 + (s - c - 0.5) ** 2) / 2
    return compare(out, np.argmax(sc, -1), sc)


def main(argv):
    if argv[1] == "make":
        make(argv[2])
        return 0
    if argv[1] == "grad-labels":
        return grad_labels(argv[2], argv[3], argv[4])
    if argv[1] == "ensemble-labels":
        return ensemble_labels(argv[2], argv[3])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
