#!/usr/bin/env python3
"""Write the seed corpora of the fuzz targets into fuzz/corpus/<target>/.

    /usr/bin/python3 fuzz/make_corpus.py [GOLDEN_CASES_DIR]

The seeds are small and committed; rerun this only to change them. NIfTI, option and
engine seeds need nothing but the standard library; the ONNX seeds need the `onnx`
package (Debian: python3-onnx) and are skipped without it. GOLDEN_CASES_DIR (default
tests/data/golden/cases) supplies real case.txt files.
"""
import gzip
import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- NIfTI ------------------------------------------------------------------------------

DT = {"uint8": (2, "B", 1), "int16": (4, "h", 2), "int32": (8, "i", 4), "float32": (16, "f", 4),
      "float64": (64, "d", 8), "int8": (256, "b", 1), "uint16": (512, "H", 2),
      "uint32": (768, "I", 4), "int64": (1024, "q", 8), "uint64": (1280, "Q", 8),
      "complex64": (32, None, 8), "rgb24": (128, None, 3)}


def nifti1(dims, dtype, values, slope=1.0, inter=0.0, endian="<", vox_offset=352.0,
           magic=b"n+1\0", extra=b""):
    code, fmt, size = DT[dtype]
    dim = [len(dims)] + list(dims) + [1] * (7 - len(dims))
    h = bytearray(348)
    struct.pack_into(endian + "i", h, 0, 348)
    struct.pack_into(endian + "8h", h, 40, *dim)
    struct.pack_into(endian + "hh", h, 70, code, size * 8)
    struct.pack_into(endian + "8f", h, 76, 1.0, 1.5, 2.0, 2.5, 1, 1, 1, 1)
    struct.pack_into(endian + "f", h, 108, vox_offset)
    struct.pack_into(endian + "ff", h, 112, slope, inter)
    struct.pack_into(endian + "hh", h, 252, 1, 1)  # qform_code, sform_code
    struct.pack_into(endian + "4f", h, 280, 1.5, 0, 0, -10)
    struct.pack_into(endian + "4f", h, 296, 0, 2.0, 0, -20)
    struct.pack_into(endian + "4f", h, 312, 0, 0, 2.5, -30)
    h[344:348] = magic
    data = b"".join(struct.pack(endian + fmt, v) for v in values) if fmt else bytes(values)
    pad = b"\0" * (int(vox_offset) - 348) if vox_offset >= 348 else b"\0" * 4
    return bytes(h) + pad + extra + data


def nifti2(dims, dtype, values, endian="<"):
    code, fmt, size = DT[dtype]
    dim = [len(dims)] + list(dims) + [1] * (7 - len(dims))
    h = bytearray(540)
    struct.pack_into(endian + "i", h, 0, 540)
    h[4:12] = b"n+2\0\r\n\x1a\n"
    struct.pack_into(endian + "hh", h, 12, code, size * 8)
    struct.pack_into(endian + "8q", h, 16, *dim)
    struct.pack_into(endian + "8d", h, 104, 1, 1, 1, 1, 1, 1, 1, 1)
    struct.pack_into(endian + "q", h, 168, 544)
    struct.pack_into(endian + "dd", h, 176, 1.0, 0.0)
    data = b"".join(struct.pack(endian + fmt, v) for v in values)
    return bytes(h) + b"\0" * 4 + data


def nifti_seeds():
    t = "fuzz_nifti"
    n = 4 * 3 * 2
    put(t, "f32_4x3x2.nii", nifti1((4, 3, 2), "float32", [i * 0.5 - 3 for i in range(n)]))
    put(t, "i16_scaled.nii", nifti1((3, 3, 3), "int16", list(range(-13, 14)), slope=0.5, inter=10))
    put(t, "u8_4d.nii", nifti1((2, 2, 2, 1), "uint8", list(range(8))))
    put(t, "u8.nii.gz", gzip.compress(nifti1((5, 4, 3), "uint8", [i % 7 for i in range(60)]), 9, mtime=0))
    put(t, "f64_bigendian.nii", nifti1((2, 3, 2), "float64", [1e300, -1e300, 0.25] * 4, endian=">"))
    put(t, "f32_nan_inf.nii", nifti1((2, 2, 2), "float32", [float("nan"), float("inf"), -float("inf"), 0,
                                                              1, 2, 3, 4]))
    put(t, "i64_offset.nii", nifti1((2, 2, 1), "int64", [2**62, -2**62, 5, 7], vox_offset=400.0))
    put(t, "u16_ext.nii", nifti1((2, 2, 2), "uint16", list(range(0, 65535, 8192)), vox_offset=368.0,
                                 extra=b""))
    put(t, "nifti2_f32.nii", nifti2((3, 2, 2), "float32", [float(i) for i in range(12)]))
    put(t, "nifti2_be.nii.gz", gzip.compress(nifti2((2, 2, 2), "int32", list(range(8)), endian=">"),
                                              6, mtime=0))
    put(t, "truncated.nii", nifti1((8, 8, 8), "float32", [0.0] * 10))
    put(t, "complex.nii", nifti1((2, 2, 1), "complex64", [0] * 32))
    put(t, "two_file.nii", nifti1((2, 2, 1), "uint8", [1, 2, 3, 4], magic=b"ni1\0"))
    put(t, "dim5.nii", nifti1((2, 2, 2, 2, 2), "uint8", [1] * 32))
    put(t, "slope0.nii", nifti1((2, 1, 1), "uint32", [7, 8], slope=0.0, inter=5))
    # fuzz_nifti picks its writer variant from the length mod 4: trailing bytes (ignored
    # by readers) give every variant a seed
    for extra in (1, 2, 3):
        put(t, "f32_4x3x2_v%d.nii" % extra, nifti1((4, 3, 2), "float32", [i * 0.25 for i in range(24)])
            + b"\0" * extra)
        put(t, "nifti2_i16_v%d.nii" % extra, nifti2((3, 2, 2), "int32", list(range(-6, 6))) + b"\0" * extra)


# ---- golden case.txt ----------------------------------------------------------------------

def golden_seeds(cases_dir):
    t = "fuzz_golden_case"
    if not os.path.isdir(cases_dir):
        sys.exit("make_corpus.py: no golden cases at %s" % cases_dir)
    for name in sorted(os.listdir(cases_dir)):
        p = os.path.join(cases_dir, name, "case.txt")
        if os.path.isfile(p):
            with open(p, "rb") as f:
                put(t, name + ".txt", f.read())
    put(t, "minimal.txt", "dims 2\nbatch 1\nin_channels 1\nimage_size 7 5\nroi_size 4 4\n"
                          "predictor affine\nout_channels 2\n")
    put(t, "down2_odd.txt", "dims 1\nbatch 1\nin_channels 2\nimage_size 9\nroi_size 5\n"
                            "predictor down2\nout_channels 1\npadding_mode reflect\n")
    put(t, "pair_given.txt", "dims 3\nbatch 2\nin_channels 1\nimage_size 3 4 5\nroi_size 0 2 9\n"
                             "predictor pair\nout_channels 1\noutputs 2\noutput0_shape 2 1 3 4 5\n"
                             "output1_shape 2 2 3 4 5\nmode gaussian\nsigma_scale 0.3 1 2\n")
    put(t, "nnunet_tile_step.txt", "dims 3\nbatch 1\nin_channels 1\nimage_size 9 20 48\nroi_size 8 16 16\n"
                                   "grid nnunet\nmode gaussian_nnunet\ntile_step 0.2 0.1 0.3\n"
                                   "predictor coord\nout_channels 3\n")
    put(t, "bad_values.txt", "dims 3\nbatch 0\nimage_size -1 99999999999999999999 4\n"
                             "overlap 1.0 nan 0.5\ncval inf\n")


# ---- CLI options -------------------------------------------------------------------------

def args(mode, *a):
    return bytes([mode]) + b"\0".join(x.encode() for x in a)


def cli_seeds():
    t = "fuzz_cli_options"
    put(t, "segment_min", args(0, "--model", "m.onnx", "--input", "a.nii.gz", "--output", "o.nii.gz"))
    put(t, "segment_all", args(0, "--model=m.onnx", "--input", "a.nii", "--input", "b.nii",
                               "--output", "o.nii", "--scores", "s.nii.gz", "--softmax", "--preview",
                               "p.png", "--roi", "96,96,0", "--overlap", "0.5", "--mode", "gaussian",
                               "--sigma-scale", "0.1,0.2,0.3", "--padding-mode", "reflect", "--cval",
                               "-1e3", "--sw-batch", "4", "--threads", "2", "--max-memory", "1.5G",
                               "--clip", "-175,250", "--scale", "-175,250,0,1", "--zscore", "--tta",
                               "--force", "--device", "cpu", "--head", "1", "-q"))
    put(t, "plan", args(1, "--model", "m.onnx", "--input", "x.nii.gz", "--max-memory", "512M"))
    put(t, "bad", args(0, "--roi", "1,2", "--overlap", "1", "--threads", "-1", "--bogus", "extra"))
    put(t, "numbers", args(2, "12", "-0", "1e308", "0x10", "64K", "4GiB", "1.5g", "3T", "nan", "1,2,3",
                           " 7", "9223372036854775807", "18446744073709551616", "2.5,,1", "name.NII.GZ"))
    card = ('{"roi": [96, 96, 64], "overlap": 0.5, "blending": "gaussian", "sigma_scale": 0.125, '
            '"padding": "reflect", "cval": -1000, "orientation": "RAS", "spacing": [1.5, 1.5, 2], '
            '"preprocessing": {"clip": [-175, 250], "scale": [-175, 250, 0, 1], "zscore": false}, '
            '"channels": ["CT"], "classes": ["background", "liver", "tumour"], "members": ["fold1.onnx"]}')
    put(t, "card_json", bytes([3, 0]) + card.encode())
    put(t, "card_bad", bytes([3, 0]) + b'{"roi": [0, 1], "spacing": -1, "bogus": true}')

    def field(num, payload):  # a length-delimited protobuf field
        n, v = len(payload), b""
        while True:
            v += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
            n >>= 7
            if not n:
                break
        return bytes([(num << 3) | 2]) + v + payload
    entry = field(1, b"swi.card") + field(2, card.encode())
    onnx = bytes([0x08, 0x07]) + field(2, b"pytorch") + field(14, entry) + field(7, b"\x0a\x01x")
    put(t, "card_onnx", bytes([3, 1]) + onnx)


# ---- engine --------------------------------------------------------------------------------

def engine_seeds():
    t = "fuzz_engine"
    rng = random.Random(6)
    # Hand-picked headers: dims, batch, cin, then per dim (size, roi, overlap, sigma), blend/pad,
    # cval, sw, threads, pipeline, order, budget, heads (1 + per head), outputs (1 + 2 per output),
    # misbehaviour, its call, mirroring and float16 sums; then voxels.
    heads = [
        [2, 0, 1, 8, 0x31, 1, 200, 9, 0x19, 2, 5, 4, 1, 1, 130, 0, 1, 0x0f, 0x1f, 3, 0x02, 1, 0x04, 2, 0x06, 3, 0x08, 0, 0],
        [0, 1, 0, 30, 0x4a, 2, 0, 1, 128, 2, 2, 0, 0, 0, 0, 0, 0, 3, 0x02, 0, 0x00, 2, 0, 0],
        [1, 0, 1, 6, 0x2b, 130, 201, 3, 0x00, 0, 0x05, 5, 0, 2, 1, 2, 250, 1, 0x03, 0x17, 1, 0x0a, 3, 0, 0],
        [2, 1, 1, 4, 0x09, 0, 0, 4, 0x11, 0, 0, 9, 0x00, 0, 0, 0x0c, 64, 3, 1, 2, 5, 0, 1, 0x07, 0x15, 0, 0x02, 2, 200, 1],
        [1, 0, 0, 9, 0x41, 1, 0, 6, 0x30, 2, 0, 0x0a, 90, 4, 2, 0, 0, 0, 1, 0x01, 0x11, 0, 0x0b, 0, 0x02, 3, 170, 2],
    ]
    for i, h in enumerate(heads):
        put(t, "case%d" % i, bytes(h) + bytes(rng.randrange(256) for _ in range(600)))
    for i in range(4):
        put(t, "random%d" % i, bytes(rng.randrange(256) for _ in range(300 + 200 * i)))
    # After the misbehaviour's call, one byte: >= 128 mirrors the dims in its low 3 bits, bit 3
    # asks for float16 partial sums. Case 0 mirrored on every axis in float16, case 1 (1-D) in
    # float32, case 4 (2-D) along its inner dim in float32; the byte's offset is where
    # fuzz_engine's parse of that case reads it (past the header's listed bytes for some).
    mrng = random.Random(7)
    for i, (h, at, xb) in enumerate([(heads[0], 33, 0x8f), (heads[1], 21, 0x81), (heads[4], 26, 0x82)]):
        seed = bytearray(bytes(h) + bytes(mrng.randrange(256) for _ in range(600)))
        seed[at - 2], seed[at] = 0, xb  # no misbehaviour; mirroring
        put(t, "mirror%d" % i, bytes(seed))


# ---- ONNX ----------------------------------------------------------------------------------

def onnx_seeds():
    try:
        import onnx
        from onnx import TensorProto, helper
    except ImportError:
        print("make_corpus: no onnx module (python3-onnx): ONNX seeds not written", file=sys.stderr)
        return
    t = "fuzz_onnx_export"

    def model(dims, roi, classes, batch="n", dtype=TensorProto.FLOAT, opset=17, op="conv"):
        shape_in = [batch, 1] + roi
        shape_out = [batch, classes] + roi
        x = helper.make_tensor_value_info("x", dtype, shape_in)
        y = helper.make_tensor_value_info("y", dtype, shape_out)
        inits, nodes = [], []
        if op == "conv":
            w = helper.make_tensor("w", dtype, [classes, 1] + [1] * dims,
                                   [0.5 * (c + 1) for c in range(classes)])
            inits.append(w)
            nodes.append(helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[1] * dims))
        else:
            rep = helper.make_tensor("rep", TensorProto.INT64, [dims + 2], [1, classes] + [1] * dims)
            inits.append(rep)
            nodes.append(helper.make_node("Tile", ["x", "rep"], ["y"]))
        g = helper.make_graph(nodes, "seed", [x], [y], initializer=inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="seed")
        m.ir_version = 8
        return m.SerializeToString()

    # Sizes chosen so len % 4 spreads over the four option sets of the target.
    seeds = {
        "conv3d": model(3, [4, 4, 4], 2),
        "conv2d_fixed_batch": model(2, [5, 3], 3, batch=1),
        "tile1d": model(1, [6], 2, op="tile"),
        "conv3d_f16": model(3, [2, 2, 2], 2, dtype=TensorProto.FLOAT16),
        "conv2d_opset9": model(2, [4, 4], 2, opset=9),
        "tile3d_dynroi": model(3, ["a", 4, 4], 2, op="tile"),
    }
    for name, data in seeds.items():
        put(t, name + ".onnx", data)


def dnnl_seeds():
    """fuzz_dnnl_model: small networks of the operators the oneDNN backend runs."""
    try:
        from onnx import TensorProto, helper
    except ImportError:
        print("make_corpus: no onnx module (python3-onnx): dnnl seeds not written", file=sys.stderr)
        return
    t = "fuzz_dnnl_model"
    rnd = random.Random(36)

    def w(name, shape):
        n = 1
        for s in shape:
            n *= s
        return helper.make_tensor(name, TensorProto.FLOAT, shape, [rnd.uniform(-1, 1) for _ in range(n)])

    def save(name, nodes, inits, opset=17):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 4, 4, 4])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        g = helper.make_graph(nodes, name, [x], [y], initializer=inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="seed")
        m.ir_version = 8
        put(t, name + ".onnx", m.SerializeToString())

    N = helper.make_node
    save("unet_block", [
        N("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3, 3], pads=[1] * 6),
        N("InstanceNormalization", ["c1", "s1", "t1"], ["n1"], epsilon=1e-5),
        N("LeakyRelu", ["n1"], ["a1"], alpha=0.01),
        N("MaxPool", ["a1"], ["p1"], kernel_shape=[2, 2, 2], strides=[2, 2, 2]),
        N("ConvTranspose", ["p1", "w2"], ["u1"], kernel_shape=[2, 2, 2], strides=[2, 2, 2]),
        N("Concat", ["a1", "u1"], ["k1"], axis=1),
        N("Conv", ["k1", "w3"], ["y"], kernel_shape=[1, 1, 1]),
    ], [w("w1", [2, 1, 3, 3, 3]), w("b1", [2]), w("s1", [2]), w("t1", [2]), w("w2", [2, 2, 2, 2, 2]),
        w("w3", [3, 4, 1, 1, 1])])
    save("residual_prelu", [
        N("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3, 3], pads=[1] * 6, strides=[2, 2, 2]),
        N("BatchNormalization", ["c1", "s", "t", "mu", "va"], ["n1"]),
        N("PRelu", ["n1", "sl"], ["a1"]),
        N("Add", ["a1", "c1"], ["y0"]),
        N("Softmax", ["y0"], ["y"], axis=1),
    ], [w("w1", [2, 1, 3, 3, 3]), w("s", [2]), w("t", [2]), w("mu", [2]),
        helper.make_tensor("va", TensorProto.FLOAT, [2], [1.0, 2.0]), w("sl", [2, 1, 1, 1])])
    save("resize_nearest", [N("Resize", ["x", "", "sc"], ["y"], mode="nearest")],
         [helper.make_tensor("sc", TensorProto.FLOAT, [5], [1, 1, 2, 2, 2])])
    save("resize_linear_sizes", [N("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1, 1]),
                                 N("Resize", ["c", "", "", "sz"], ["y"], mode="linear")],
         [w("w", [2, 1, 1, 1, 1]), helper.make_tensor("sz", TensorProto.INT64, [5], [1, 2, 6, 7, 4])])
    save("unsupported_erf", [N("Erf", ["x"], ["y"])], [])


# ---- Zarr / OME-Zarr stores ---------------------------------------------------------------

def store_seed(mode, meta, chunk=b""):
    meta = meta.encode() if isinstance(meta, str) else meta
    return bytes([mode]) + struct.pack("<H", len(meta)) + meta + chunk


def store_seeds():
    """fuzz_store_meta: mode byte, metadata length, metadata, one chunk (see the target)."""
    import json
    import zlib
    t = "fuzz_store_meta"

    def zarray(shape=(8, 8, 8), chunks=(8, 8, 8), dtype="<u2", compressor=None, fill=0, order="C", **kw):
        d = {"zarr_format": 2, "shape": list(shape), "chunks": list(chunks), "dtype": dtype,
             "compressor": compressor, "fill_value": fill, "order": order, "filters": None}
        d.update(kw)
        return json.dumps(d)

    def zjson(shape=(8, 8, 8), chunks=(8, 8, 8), dtype="uint16", codecs=None, fill=0):
        return json.dumps({"zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": dtype,
                           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
                           "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                           "fill_value": fill,
                           "codecs": codecs or [{"name": "bytes", "configuration": {"endian": "little"}}]})

    raw = bytes(range(256)) * 4  # one 8^3 uint16 chunk
    put(t, "v2_raw", store_seed(0, zarray(), raw))
    put(t, "v2_zlib", store_seed(0, zarray(compressor={"id": "zlib", "level": 1}), zlib.compress(raw, 1)))
    put(t, "v2_gzip", store_seed(0, zarray(compressor={"id": "gzip", "level": 1}), gzip.compress(raw, 1, mtime=0)))
    put(t, "v2_F_be", store_seed(0, zarray(dtype=">i2", order="F"), raw))
    put(t, "v2_missing_chunk_fill", store_seed(0, zarray(shape=(9, 9, 9), fill=7), raw))
    put(t, "v2_nested_5d", store_seed(0, zarray(shape=(1, 1, 8, 8, 8), chunks=(1, 1, 8, 8, 8),
                                                dimension_separator="/"), raw))
    # hostile: chunks far beyond the array and the cap, a zlib chunk inflating beyond its size
    put(t, "v2_huge_chunks", store_seed(0, zarray(shape=(19, 13, 11), chunks=(8192, 8192, 8192)), raw))
    put(t, "v2_wide_chunks", store_seed(0, zarray(shape=(19, 13, 11), chunks=(4096, 64, 64)), raw))
    put(t, "v2_huge_shape", store_seed(0, zarray(shape=(8192, 8192, 8192), chunks=(64, 64, 64)), raw))
    put(t, "v2_zlib_bomb", store_seed(0, zarray(compressor={"id": "zlib", "level": 1}),
                                      zlib.compress(bytes(len(raw) * 64), 9)))
    put(t, "v2_blosc_bad_header", store_seed(0, zarray(compressor={"id": "blosc", "cname": "lz4"}),
                                             bytes([2, 1, 1, 2]) + struct.pack("<III", 1 << 30, 1024, 16) + raw))
    put(t, "v3_raw", store_seed(1, zjson(), raw))
    put(t, "v3_gzip_F", store_seed(1, zjson(codecs=[
        {"name": "transpose", "configuration": {"order": [2, 1, 0]}},
        {"name": "bytes", "configuration": {"endian": "big"}}, {"name": "gzip", "configuration": {"level": 1}}]),
        gzip.compress(raw, 1, mtime=0)))
    put(t, "v3_nan_fill", store_seed(1, zjson(dtype="float32", shape=(9, 9, 9), fill="NaN"), bytes(2048)))
    put(t, "v3_sharded", store_seed(1, zjson(codecs=[{"name": "sharding_indexed"}]), raw))
    try:
        import numcodecs
        put(t, "v2_blosc", store_seed(0, zarray(compressor={"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1}),
                                      numcodecs.Blosc(cname="lz4").encode(raw)))
        put(t, "v2_zstd", store_seed(0, zarray(compressor={"id": "zstd", "level": 1}), numcodecs.Zstd(1).encode(raw)))
        put(t, "v2_zstd_wrong_size", store_seed(0, zarray(compressor={"id": "zstd", "level": 1}),
                                                numcodecs.Zstd(1).encode(raw * 3)))
        put(t, "v3_zstd", store_seed(1, zjson(codecs=[{"name": "bytes", "configuration": {"endian": "little"}},
                                                      {"name": "zstd", "configuration": {"level": 1}}]),
                                     numcodecs.Zstd(1).encode(raw)))
    except ImportError:
        print("numcodecs missing: no blosc or zstd seeds")
    axes = [{"name": "c", "type": "channel"}] + [{"name": a, "type": "space", "unit": "micrometer"} for a in "zyx"]
    ome = {"multiscales": [{"version": "0.4", "axes": axes, "datasets": [
        {"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 2000, 500, 250]},
                                                    {"type": "translation", "translation": [0, 10000, -3000, 0]}]}],
        "coordinateTransformations": [{"type": "scale", "scale": [1, 1, 1, 2]}]}]}
    put(t, "ome_geometry", store_seed(2, json.dumps(ome), zlib.compress(raw, 1)))
    put(t, "ome_no_multiscales", store_seed(2, json.dumps({"labels": ["a"]}), zlib.compress(raw, 1)))
    over = [{"type": "scale", "scale": [1, 1e300, 1, 1]}]
    put(t, "ome_scale_overflow", store_seed(2, json.dumps({"multiscales": [{"axes": [
        {"name": "c", "type": "channel"}] + [{"name": a, "type": "space"} for a in "zyx"],
        "datasets": [{"path": "0", "coordinateTransformations": over}], "coordinateTransformations": over}]}),
        zlib.compress(bytes(1024))))
    put(t, "ome_path_escape", store_seed(2, json.dumps({"multiscales": [{"datasets": [{"path": "../x"}]}]})))


def dicom_seeds():
    """Small DICOM slices made here (pydicom; skipped without it), well-formed and the kinds
    GDCM aborted on: FrameIncrementPointer without NumberOfFrames, BitsAllocated 1, 12 and
    32 over 16-bit data, short PixelData, RLE syntax over raw pixels, a file cut in its
    trailing padding, a JPEG syntax over raw pixels."""
    try:
        import pydicom
        from pydicom.dataset import FileDataset, FileMetaDataset
        from pydicom.uid import ExplicitVRLittleEndian, ImplicitVRLittleEndian
    except ImportError:
        print("make_corpus: pydicom not found: no DICOM seeds")
        return
    import io
    t = "fuzz_dicom_headers"

    def slice_(edit=None, implicit=False, padding=True):
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.2"
        meta.MediaStorageSOPInstanceUID = "1.2.3.4.5"
        meta.TransferSyntaxUID = ImplicitVRLittleEndian if implicit else ExplicitVRLittleEndian
        ds = FileDataset("seed", {}, file_meta=meta, preamble=b"\0" * 128)
        ds.is_little_endian, ds.is_implicit_VR = True, implicit
        ds.SOPClassUID, ds.SOPInstanceUID = meta.MediaStorageSOPClassUID, "1.2.3.4.5"
        ds.Modality, ds.SeriesInstanceUID, ds.StudyInstanceUID = "CT", "1.2.3.4", "1.2.3"
        ds.ImagePositionPatient = ["-10", "-20", "5"]
        ds.ImageOrientationPatient = ["1", "0", "0", "0", "1", "0"]
        ds.PixelSpacing = ["0.5", "0.75"]
        ds.Rows, ds.Columns, ds.SamplesPerPixel = 3, 4, 1
        ds.PhotometricInterpretation = "MONOCHROME2"
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 1
        ds.RescaleSlope, ds.RescaleIntercept = "1", "-1024"
        ds.PixelData = bytes(range(24))
        if padding:
            ds.add_new(0xFFFCFFFC, "OB", b"\0" * 16)
        if edit:
            edit(ds)
        b = io.BytesIO()
        ds.save_as(b, write_like_original=False)
        return b.getvalue()

    def setter(**kw):
        def e(ds):
            for k, v in kw.items():
                setattr(ds, k, v)
        return e

    def fip(ds):
        ds.FrameIncrementPointer = 0x3004000C
    ok = slice_()
    put(t, "ct_16bit.dcm", ok)
    put(t, "ct_implicit.dcm", slice_(implicit=True))
    put(t, "ct_8bit.dcm", slice_(setter(BitsAllocated=8, BitsStored=8, HighBit=7, PixelData=bytes(12))))
    put(t, "two_frames.dcm", slice_(setter(NumberOfFrames=2, PixelData=bytes(48))))
    put(t, "fip_no_frames.dcm", slice_(fip))
    put(t, "bits1.dcm", slice_(setter(BitsAllocated=1, BitsStored=1, HighBit=0)))
    put(t, "bits12.dcm", slice_(setter(BitsAllocated=12)))
    put(t, "bits32_over_16.dcm", slice_(setter(BitsAllocated=32)))
    put(t, "short_pixels.dcm", slice_(setter(PixelData=bytes(10))))
    explicit = b"1.2.840.10008.1.2.1\0"
    put(t, "rle_over_raw.dcm", ok.replace(explicit, b"1.2.840.10008.1.2.5\0"))
    put(t, "unknown_syntax.dcm", ok.replace(explicit, b"1.2.840.10008.1.2.4.70"[:20]))
    put(t, "cut_in_padding.dcm", ok[:-6])
    put(t, "no_position.dcm", slice_(lambda ds: delattr(ds, "ImagePositionPatient")))
    # NumberOfFrames with the VR AT (GDCM asserted; found by fuzz_dicom_headers)
    frames = slice_(setter(NumberOfFrames=1))
    put(t, "frames_vr_at.dcm", frames.replace(b"\x28\x00\x08\x00IS", b"\x28\x00\x08\x00AT"))


def main():
    cases = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "tests", "data", "golden", "cases")
    nifti_seeds()
    golden_seeds(cases)
    cli_seeds()
    engine_seeds()
    onnx_seeds()
    dnnl_seeds()
    store_seeds()
    dicom_seeds()


if __name__ == "__main__":
    main()
