#!/usr/bin/env python3
"""Test data and checks for cli_tests.sh (Debian's python3-numpy, -nibabel, -onnx).

    clitest.py make DIR                 small volumes, broken files and ONNX models
    clitest.py labels OUT IN... [--classes C] [--clip A,B] [--scale A,B,C,D] [--zscore]
                                        OUT must be the label map of the "quant" models
    clitest.py scores OUT IN... [--classes C] [--softmax] [same preprocessing]
    clitest.py same-geometry A B        same qform/sform/pixdim/shape (first 3 dims)
    clitest.py dtype FILE               print the data type
    clitest.py png FILE                 print "W H" of a PNG
    clitest.py equal A B                the voxel arrays are identical

The "quant" models compute, per voxel, out[c] = -(s - c)^2 with s the sum of the input
channels: the label is the class nearest to s, independent of the window and of the
blending, so the expected label map follows from the input alone.
"""
import gzip
import os
import struct
import sys

import numpy as np
import nibabel as nib

AFFINE = np.array([[-0.8, 0.05, 0.0, 120.0],
                   [0.0, 0.8, 0.1, -90.0],
                   [0.0, 0.0, 2.5, 30.0],
                   [0.0, 0.0, 0.0, 1.0]])
SHAPE = (20, 24, 16)


def volume(shape=SHAPE, seed=0, hi=3.6):
    rng = np.random.default_rng(seed)
    v = rng.uniform(0.0, hi, size=shape).astype(np.float32)
    # keep away from the label boundaries (x.5) so float rounding never decides
    frac = v - np.floor(v)
    v = np.where(np.abs(frac - 0.5) < 0.02, v + 0.05, v).astype(np.float32)
    return v


def save(img, path):
    img.to_filename(path)


def make_models(d):
    import onnx
    from onnx import TensorProto, helper

    def quant(name, classes=4, in_shape=("n", 1, 8, 8, 8), two_outputs=False, opset=13):
        centers = np.arange(classes, dtype=np.float32).reshape(1, classes, 1, 1, 1)
        nodes = [
            helper.make_node("ReduceSum", ["image", "axes"], ["s"], keepdims=1),
            helper.make_node("Sub", ["s", "centers"], ["d"]),
            helper.make_node("Mul", ["d", "d"], ["d2"]),
            helper.make_node("Neg", ["d2"], ["logits"]),
        ]
        inits = [helper.make_tensor("axes", TensorProto.INT64, [1], [1]),
                 helper.make_tensor("centers", TensorProto.FLOAT, centers.shape,
                                    centers.flatten().tolist())]
        out_shape = [in_shape[0], classes] + list(in_shape[2:])
        outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, out_shape)]
        if two_outputs:
            nodes.append(helper.make_node("Neg", ["logits"], ["neg"]))
            outputs.append(helper.make_tensor_value_info("neg", TensorProto.FLOAT, out_shape))
        g = helper.make_graph(nodes, name,
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                                             list(in_shape))],
                              outputs, inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        onnx.save(m, os.path.join(d, name + ".onnx"))

    quant("quant4")
    quant("quant4_dyn", in_shape=("n", 1, "i", "j", "k"))
    quant("quant4_c2", in_shape=("n", 2, 8, 8, 8))
    quant("quant4_b1", in_shape=(1, 1, 8, 8, 8))
    quant("quant300", classes=300, in_shape=("n", 1, 4, 4, 4))
    quant("quant4_2out", two_outputs=True)

    def simple(name, inputs, outputs, nodes, inits=()):
        g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        onnx.save(m, os.path.join(d, name + ".onnx"))

    f = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    simple("two_inputs", [vi("a", f, ["n", 1, 8, 8, 8]), vi("b", f, ["n", 1, 8, 8, 8])],
           [vi("y", f, ["n", 1, 8, 8, 8])], [helper.make_node("Add", ["a", "b"], ["y"])])
    simple("rank4", [vi("x", f, ["n", 1, 8, 8])], [vi("y", f, ["n", 1, 8, 8])],
           [helper.make_node("Identity", ["x"], ["y"])])
    simple("out_rank4", [vi("x", f, ["n", 1, 8, 8, 8])], [vi("y", f, ["n", 8, 8, 8])],
           [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
           [helper.make_tensor("axes", TensorProto.INT64, [1], [1])])
    simple("out_int64", [vi("x", f, ["n", 1, 8, 8, 8])],
           [vi("y", TensorProto.INT64, ["n", 1, 8, 8, 8])],
           [helper.make_node("ArgMax", ["x"], ["y"], axis=1, keepdims=1)])
    simple("in_double", [vi("x", TensorProto.DOUBLE, ["n", 1, 8, 8, 8])],
           [vi("y", TensorProto.DOUBLE, ["n", 1, 8, 8, 8])],
           [helper.make_node("Identity", ["x"], ["y"])])
    # 8 -> 3 per axis: a zoom of 3/8 that no window start maps onto a whole voxel
    simple("zoom", [vi("x", f, ["n", 1, 8, 8, 8])], [vi("y", f, ["n", 1, 3, 3, 3])],
           [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3, 3],
                             strides=[2, 2, 2])])
    # returns NaN everywhere
    simple("nan", [vi("x", f, ["n", 1, 8, 8, 8])], [vi("y", f, ["n", 2, 8, 8, 8])],
           [helper.make_node("Concat", ["q", "q"], ["y"], axis=1),
            helper.make_node("Mul", ["x", "nanc"], ["q"])],
           [helper.make_tensor("nanc", f, [1], [float("nan")])])


def make(d):
    os.makedirs(d, exist_ok=True)
    v = volume()
    img = nib.Nifti1Image(v, AFFINE)
    img.header.set_qform(AFFINE, code=1)
    img.header.set_sform(AFFINE, code=2)
    save(img, os.path.join(d, "vol.nii.gz"))
    save(img, os.path.join(d, "vol.nii"))
    v2 = volume(seed=1, hi=1.2)
    save(nib.Nifti1Image(v2, AFFINE), os.path.join(d, "vol2.nii.gz"))
    save(nib.Nifti1Image(volume((10, 12, 8), seed=2), AFFINE), os.path.join(d, "small.nii.gz"))
    # vol2's size, another grid: the origin 100 mm away, the i and j axes swapped; and within tolerance
    moved = AFFINE.copy()
    moved[0, 3] += 100
    save(nib.Nifti1Image(v2, moved), os.path.join(d, "vol2_moved.nii.gz"))
    save(nib.Nifti1Image(v2, AFFINE[:, [1, 0, 2, 3]]), os.path.join(d, "vol2_swapped.nii.gz"))
    near = AFFINE.copy()
    near[0, 3] += 2e-4
    save(nib.Nifti1Image(v2, near), os.path.join(d, "vol2_near.nii.gz"))
    save(nib.Nifti1Image(volume((1, 1, 1), seed=4), AFFINE), os.path.join(d, "one.nii.gz"))
    save(nib.Nifti1Image(volume((3000, 6, 4), seed=5), AFFINE), os.path.join(d, "long.nii.gz"))
    save(nib.Nifti2Image(v, AFFINE), os.path.join(d, "vol_n2.nii.gz"))
    h = nib.Nifti1Header(endianness=">")
    save(nib.Nifti1Image(v.astype(">f4"), AFFINE, header=h), os.path.join(d, "vol_be.nii"))
    save(nib.Nifti1Image(v.reshape(SHAPE + (1,)), AFFINE), os.path.join(d, "vol_4d1.nii.gz"))
    save(nib.Nifti1Image(np.stack([v, v, v], -1), AFFINE), os.path.join(d, "vol_4d3.nii.gz"))
    save(nib.Nifti1Image(v[:, :, 0], AFFINE), os.path.join(d, "vol_2d.nii.gz"))
    # every scalar type, stored with a scale so that slope/inter bring back ~v
    for name, dt, slope, inter in [("u8", np.uint8, 0.02, 0.0), ("i8", np.int8, 0.03, 0.0),
                                   ("i16", np.int16, 0.001, 0.5), ("u16", np.uint16, 0.0001, 0.0),
                                   ("i32", np.int32, 1e-6, -0.25), ("u32", np.uint32, 1e-6, 0.0),
                                   ("i64", np.int64, 1e-6, 0.0), ("u64", np.uint64, 1e-6, 0.0),
                                   ("f32", np.float32, 2.0, 0.25), ("f64", np.float64, None, None)]:
        if slope is None:
            raw = v.astype(dt)
        else:
            raw = np.round((v.astype(np.float64) - inter) / slope).astype(dt)
        im = nib.Nifti1Image(raw, AFFINE, dtype=dt)
        if slope is not None:
            im.header.set_slope_inter(slope, inter)
        # nibabel would rescale on save; write raw values with our slope/inter instead
        hdr = im.header.copy()
        with open(os.path.join(d, f"dt_{name}.nii"), "wb") as fh:
            hdr.set_data_offset(352)
            if slope is not None:
                hdr["scl_slope"] = slope
                hdr["scl_inter"] = inter
            fh.write(hdr.binaryblock)
            fh.write(b"\0" * 4)
            fh.write(np.asfortranarray(raw).tobytes(order="F"))
        expect = raw.astype(np.float64) * (slope if slope else 1.0) + (inter if slope else 0.0)
        np.save(os.path.join(d, f"dt_{name}.npy"), expect.astype(np.float32))

    # ---- broken files ----
    good = open(os.path.join(d, "vol.nii"), "rb").read()

    def put(name, data, gz=False):
        p = os.path.join(d, name)
        with (gzip.open(p, "wb") if gz else open(p, "wb")) as fh:
            fh.write(data)

    put("empty.nii", b"")
    put("random.nii", os.urandom(4096))
    put("text.nii.gz", b"this is not a NIfTI file\n" * 40)
    put("trunc_header.nii", good[:200])
    put("trunc_data.nii", good[:352 + 1000])
    put("trunc_data.nii.gz", good[:352 + 1000], gz=True)
    gzgood = open(os.path.join(d, "vol.nii.gz"), "rb").read()
    put("trunc_stream.nii.gz", gzgood[:len(gzgood) // 2])
    corrupt = bytearray(gzgood)
    for i in range(len(corrupt) // 3, len(corrupt) // 3 + 64):
        corrupt[i] ^= 0x5A
    put("corrupt.nii.gz", bytes(corrupt))

    def patched(fields):
        b = bytearray(good)
        for off, fmt, val in fields:
            struct.pack_into("<" + fmt, b, off, *(val if isinstance(val, tuple) else (val,)))
        return bytes(b)

    # nifti_1_header offsets: sizeof_hdr 0, dim 40, datatype 70, bitpix 72, vox_offset 108,
    # magic 344
    put("bad_sizeof.nii", patched([(0, "i", 123)]))
    put("bad_magic.nii", patched([(344, "4s", b"xyz\0")]))
    put("two_file.nii", patched([(344, "4s", b"ni1\0")]))
    put("bad_dim0.nii", patched([(40, "h", 9)]))
    put("bad_dimzero.nii", patched([(42, "h", 0)]))
    put("bad_dimneg.nii", patched([(44, "h", -5)]))
    put("huge_dims.nii", patched([(42, "3h", (32767, 32767, 32767))]))
    put("big_dims.nii", patched([(42, "3h", (2000, 2000, 2000))]))
    put("bad_rgb.nii", patched([(70, "h", 128), (72, "h", 24)]))
    put("bad_complex.nii", patched([(70, "h", 32), (72, "h", 64)]))
    put("bad_dtype.nii", patched([(70, "h", 77)]))
    put("bad_voxoffset.nii", patched([(108, "f", float("nan"))]))
    put("bad_ext.txt", good)
    # NIfTI-2 whose dims multiply past 2^63
    n2 = bytearray(open(os.path.join(d, "vol_n2.nii.gz"), "rb").read())
    n2raw = bytearray(gzip.decompress(bytes(n2)))
    struct.pack_into("<3q", n2raw, 24, 1 << 40, 1 << 40, 1 << 40)  # dim[1..3] at 16+8
    put("n2_overflow.nii", bytes(n2raw))
    # a volume for long runs (signals, concurrency)
    save(nib.Nifti1Image(volume((96, 96, 96), seed=3), AFFINE), os.path.join(d, "big.nii.gz"))
    # not ONNX
    put("not_onnx.onnx", b"hello, I am not a model\n")
    put("random.onnx", os.urandom(2048))
    put("empty.onnx", b"")
    # ---- non-finite voxels, and the same volumes with zeros there ----
    def with_bad(vals, dtype=np.float32):
        b = v.astype(dtype)
        z = b.copy()
        for idx, x in zip([(1, 2, 3), (5, 5, 5), (10, 0, 8), (19, 23, 15), (0, 0, 0)], vals):
            b[idx] = x
            z[idx] = 0
        return b, z
    b, z = with_bad([np.nan, np.inf, -np.inf, np.nan, np.inf])
    save(nib.Nifti1Image(b, AFFINE), os.path.join(d, "nonfinite.nii.gz"))
    save(nib.Nifti1Image(z, AFFINE), os.path.join(d, "nonfinite_zero.nii.gz"))
    hb = nib.Nifti1Header(endianness=">")
    save(nib.Nifti1Image(b.astype(">f4"), AFFINE, header=hb), os.path.join(d, "nonfinite_be.nii"))
    # finite in the file, infinite as float32: 1e300 in a float64 file
    b, z = with_bad([1e300, -1e300, np.nan], dtype=np.float64)
    save(nib.Nifti1Image(b, AFFINE), os.path.join(d, "nonfinite_f64.nii.gz"))
    save(nib.Nifti1Image(z.astype(np.float32), AFFINE), os.path.join(d, "nonfinite_f64_zero.nii.gz"))

    make_models(d)


def parse_opts(args):
    o = {"classes": 4, "clip": None, "scale": None, "zscore": False, "softmax": False}
    ins = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--classes":
            o["classes"] = int(args[i + 1]); i += 2
        elif a == "--clip":
            o["clip"] = [float(x) for x in args[i + 1].split(",")]; i += 2
        elif a == "--scale":
            o["scale"] = [float(x) for x in args[i + 1].split(",")]; i += 2
        elif a == "--zscore":
            o["zscore"] = True; i += 1
        elif a == "--softmax":
            o["softmax"] = True; i += 1
        else:
            ins.append(a); i += 1
    return o, ins


def expected_scores(o, ins):
    s = None
    for p in ins:
        x = np.asarray(nib.load(p).dataobj).astype(np.float32)
        x = x.reshape(x.shape[:3]).astype(np.float64)
        if o["clip"]:
            x = np.clip(x, o["clip"][0], o["clip"][1])
        if o["scale"]:
            a, b, c, dd = o["scale"]
            x = (x - a) / (b - a) * (dd - c) + c
        if o["zscore"]:
            sd = x.std()
            x = (x - x.mean()) / (sd if sd > 0 else 1.0)
        x = x.astype(np.float32).astype(np.float64)
        s = x if s is None else s + x
    c = np.arange(o["classes"]).reshape((1, 1, 1, -1))
    return -(s[..., None] - c) ** 2


def check_labels(out, args):
    o, ins = parse_opts(args)
    sc = expected_scores(o, ins)
    lab = np.asarray(nib.load(out).dataobj)
    srt = np.sort(sc, axis=-1)
    tie = (srt[..., -1] - srt[..., -2]) < 1e-3
    exp = np.argmax(sc, axis=-1)
    bad = (lab != exp) & ~tie
    if lab.shape != exp.shape or bad.any():
        print(f"FAIL: {bad.sum()} labels differ (shape {lab.shape} vs {exp.shape})")
        return 1
    print(f"labels ok ({lab.dtype}, {tie.sum()} near-ties skipped)")
    return 0


def check_scores(out, args):
    o, ins = parse_opts(args)
    sc = expected_scores(o, ins)
    if o["softmax"]:
        e = np.exp(sc - sc.max(axis=-1, keepdims=True))
        sc = e / e.sum(axis=-1, keepdims=True)
    got = np.asarray(nib.load(out).dataobj)
    if got.dtype != np.float32 or got.shape != sc.shape:
        print(f"FAIL: scores {got.dtype} {got.shape}, expected float32 {sc.shape}")
        return 1
    err = np.abs(got - sc)
    tol = 1e-4 + 1e-4 * np.abs(sc)
    if (err > tol).any():
        print(f"FAIL: {(err > tol).sum()} scores out of tolerance, max error {err.max()}")
        return 1
    print(f"scores ok (max error {err.max():.3g})")
    return 0


def same_geometry(a, b):
    ia, ib = nib.load(a), nib.load(b)
    ha, hb = ia.header, ib.header
    ok = True
    for k in ["qform_code", "sform_code", "quatern_b", "quatern_c", "quatern_d", "qoffset_x",
              "qoffset_y", "qoffset_z", "srow_x", "srow_y", "srow_z"]:
        if not np.array_equal(np.asarray(ha[k]), np.asarray(hb[k])):
            print(f"FAIL: {k} differs: {ha[k]} vs {hb[k]}")
            ok = False
    if not np.array_equal(np.asarray(ha["pixdim"])[1:4], np.asarray(hb["pixdim"])[1:4]):
        print(f"FAIL: pixdim differs: {ha['pixdim']} vs {hb['pixdim']}")
        ok = False
    if ia.shape[:3] != ib.shape[:3]:
        print(f"FAIL: shape {ia.shape} vs {ib.shape}")
        ok = False
    if not np.allclose(ia.affine, ib.affine, atol=0, rtol=0):
        print(f"FAIL: affine differs:\n{ia.affine}\n{ib.affine}")
        ok = False
    print("geometry ok" if ok else "geometry differs")
    return 0 if ok else 1


def main(argv):
    cmd = argv[1]
    if cmd == "make":
        make(argv[2])
        return 0
    if cmd == "labels":
        return check_labels(argv[2], argv[3:])
    if cmd == "scores":
        return check_scores(argv[2], argv[3:])
    if cmd == "same-geometry":
        return same_geometry(argv[2], argv[3])
    if cmd == "dtype":
        print(nib.load(argv[2]).get_data_dtype())
        return 0
    if cmd == "shape":
        print(" ".join(str(x) for x in nib.load(argv[2]).shape))
        return 0
    if cmd == "png":
        with open(argv[2], "rb") as fh:
            b = fh.read(24)
        if b[:8] != b"\x89PNG\r\n\x1a\n":
            print("FAIL: not a PNG")
            return 1
        w, h = struct.unpack(">II", b[16:24])
        print(w, h)
        return 0
    if cmd == "equal":
        a = np.asarray(nib.load(argv[2]).dataobj)
        b = np.asarray(nib.load(argv[3]).dataobj)
        if a.shape != b.shape or not np.array_equal(a, b):
            print("FAIL: arrays differ")
            return 1
        print("equal")
        return 0
    if cmd == "npy-vs-f32":
        # argv[2]: .npy (NIfTI [i,j,k] array), argv[3]: raw float32 in C order [i][j][k]
        a = np.load(argv[2])
        b = np.fromfile(argv[3], dtype=np.float32).reshape(a.shape)
        err = np.abs(a - b).max()
        if err > 1e-6 * max(1.0, np.abs(a).max()):
            print(f"FAIL: max error {err}")
            return 1
        print(f"ok (max error {err:.3g})")
        return 0
    print(f"unknown command {cmd}")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
