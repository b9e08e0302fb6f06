#!/usr/bin/env python3
"""io_stores: swi_store against independent readers and writers (zarr, h5py).

usage: stores.py STORE_TOOL WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

tool, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([tool, *args], capture_output=True, text=True, env=e)


def read_back(name, shape):
    out = os.path.join(work, "read.f32")
    r = run("read", name, out)
    if r.returncode != 0:
        return None, r.stderr
    return np.fromfile(out, dtype=np.float32).reshape(shape), r.stderr


rng = np.random.default_rng(7)
shape = (19, 13, 11)

try:
    import zarr
    import numcodecs
    have_zarr = True
except ImportError:
    have_zarr = False
try:
    import h5py
    have_h5 = True
except ImportError:
    have_h5 = False

if not have_zarr and not have_h5:
    print("skipped: neither zarr nor h5py (apt-get install python3-zarr python3-h5py)")
    sys.exit(77)

if have_zarr:
    dtypes = ["|u1", "|i1", "<u2", ">i2", "<u4", ">i4", "<u8", "<i8", "<f4", ">f4", "<f8", ">f8"]
    codecs = [numcodecs.Blosc(cname="zstd", shuffle=numcodecs.Blosc.BITSHUFFLE), numcodecs.Zstd(level=1),
              numcodecs.Zlib(level=1), numcodecs.GZip(level=1), None, numcodecs.Blosc(cname="lz4")]
    for n, dt in enumerate(dtypes):
        d = np.dtype(dt)
        if d.kind == "f":
            x = rng.normal(0, 1000, shape).astype(d)
        else:
            info = np.iinfo(d)
            x = rng.integers(max(info.min, -2**40), min(info.max, 2**40), shape, dtype=np.int64).astype(d)
        codec = codecs[n % len(codecs)]
        name = os.path.join(work, "a%d.zarr" % n)
        z = zarr.open(name, mode="w", shape=shape, chunks=(4, 5, 6), dtype=d, compressor=codec, fill_value=3)
        z[...] = x
        got, err = read_back(name, shape)
        check(got is not None and np.array_equal(got, x.astype(np.float32)), "zarr %s %s: %s" % (dt, codec, err))

    # missing chunks read as the fill value
    name = os.path.join(work, "sparse.zarr")
    z = zarr.open(name, mode="w", shape=shape, chunks=(8, 8, 8), dtype="<u2", fill_value=9)
    z[0:8, 0:8, 0:8] = 1
    want = np.full(shape, 9, np.float32)
    want[0:8, 0:8, 0:8] = 1
    got, err = read_back(name, shape)
    check(got is not None and np.array_equal(got, want), "zarr missing chunks: " + err)

    # 5-D with leading 1s, '/' separator
    name = os.path.join(work, "nested.zarr")
    x = rng.integers(0, 60000, (1, 1) + shape).astype("<u2")
    z = zarr.open(name, mode="w", shape=x.shape, chunks=(1, 1, 7, 7, 7), dtype=x.dtype,
                  dimension_separator="/")
    z[...] = x
    got, err = read_back(name, shape)
    check(got is not None and np.array_equal(got, x[0, 0].astype(np.float32)), "zarr 5-D nested: " + err)

    # OME-Zarr 0.4 image: level 0 of the first multiscale
    name = os.path.join(work, "img.ome.zarr")
    g = zarr.open_group(name, mode="w")
    x = rng.integers(0, 4000, (1,) + shape).astype("<i2")
    g.create_dataset("s0", data=x, chunks=(1, 8, 8, 8))
    g.create_dataset("s1", data=x[:, ::2, ::2, ::2], chunks=(1, 8, 8, 8))
    g.attrs["multiscales"] = [{"version": "0.4", "axes": [{"name": "c", "type": "channel"}] +
                               [{"name": a, "type": "space"} for a in "zyx"],
                               "datasets": [{"path": "s0"}, {"path": "s1"}]}]
    got, err = read_back(name, shape)
    check(got is not None and np.array_equal(got, x[0].astype(np.float32)), "ome-zarr level 0: " + err)

    # Fortran order: chunks stored first axis fastest, read as the same array (edge chunks
    # partial on every axis, a missing chunk, every codec)
    for n, codec in enumerate([None, numcodecs.Zlib(level=1), numcodecs.Blosc(cname="lz4")]):
        name = os.path.join(work, "fortran%d.zarr" % n)
        y = rng.integers(0, 60000, size=shape).astype("<u2")
        z = zarr.open(name, mode="w", shape=shape, chunks=(7, 5, 4), dtype="<u2", order="F", compressor=codec,
                      fill_value=9)
        z[...] = y
        os.remove(os.path.join(name, "1.1.1"))
        y[7:14, 5:10, 4:8] = 9
        got, err = read_back(name, shape)
        check(got is not None and np.array_equal(got, y.astype(np.float32)), "zarr order F %s: %s" % (codec, err))

    # Zarr v3 (zarr.json), written here by the specification: no reader of Debian's zarr
    # writes it. Chunks are the full chunk shape, edge chunks padded with the fill value.
    import gzip as gz
    import itertools
    import json

    def write_v3(name, x, chunks, codec=None, endian="little", order="C", encoding="default", fill=0,
                 missing=(), extra_codecs=()):
        os.makedirs(name, exist_ok=True)
        sep = "/" if encoding == "default" else "."
        dt = x.dtype.newbyteorder("<" if endian == "little" else ">")
        codecs = ([{"name": "transpose", "configuration": {"order": list(range(x.ndim))[::-1]}}]
                  if order == "F" else [])
        codecs.append({"name": "bytes", "configuration": {"endian": endian}})
        if codec == "gzip":
            codecs.append({"name": "gzip", "configuration": {"level": 1}})
        elif codec == "zstd":
            codecs.append({"name": "zstd", "configuration": {"level": 1, "checksum": False}})
        elif codec == "blosc":
            codecs.append({"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle",
                                                              "typesize": dt.itemsize, "blocksize": 0}})
        codecs += list(extra_codecs)
        meta = {"zarr_format": 3, "node_type": "array", "shape": list(x.shape), "data_type": str(x.dtype),
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
                "chunk_key_encoding": {"name": encoding, "configuration": {"separator": sep}},
                "fill_value": fill, "codecs": codecs, "attributes": {}}
        with open(os.path.join(name, "zarr.json"), "w") as f:
            json.dump(meta, f)
        grid = [range((n + c - 1) // c) for n, c in zip(x.shape, chunks)]
        for key in itertools.product(*grid):
            if key in missing:
                continue
            block = np.full(chunks, fill, dtype=x.dtype)
            sl = tuple(slice(k * c, min((k + 1) * c, n)) for k, c, n in zip(key, chunks, x.shape))
            block[tuple(slice(0, t.stop - t.start) for t in sl)] = x[sl]
            raw = (block.T if order == "F" else block).astype(dt).tobytes(order="C")
            if codec == "gzip":
                raw = gz.compress(raw)
            elif codec == "zstd":
                raw = numcodecs.Zstd(level=1).encode(raw)
            elif codec == "blosc":
                raw = numcodecs.Blosc(cname="lz4").encode(np.frombuffer(raw, dtype=dt))
            path = os.path.join(name, *(["c"] + [str(k) for k in key])) if encoding == "default" else \
                os.path.join(name, ".".join(str(k) for k in key))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(bytes(raw))

    v3cases = [("uint16", None, "little", "C", "default"), ("float32", "gzip", "little", "C", "default"),
               ("int16", "zstd", "big", "F", "default"), ("float64", "blosc", "little", "C", "v2"),
               ("uint8", "gzip", "little", "F", "v2")]
    for n, (dt, codec, endian, order, enc) in enumerate(v3cases):
        name = os.path.join(work, "v3_%d.zarr" % n)
        y = (rng.normal(0, 300, size=shape) if dt.startswith("f") else rng.integers(0, 200, size=shape)).astype(dt)
        write_v3(name, y, (7, 5, 4), codec, endian, order, enc, fill=3, missing=[(1, 1, 1)])
        y[7:14, 5:10, 4:8] = 3
        got, err = read_back(name, shape)
        check(got is not None and np.array_equal(got, y.astype(np.float32)),
              "zarr v3 %s %s %s-endian order %s keys %s: %s" % (dt, codec, endian, order, enc, err))
    # OME-Zarr 0.5: the group's zarr.json holds attributes.ome.multiscales; level 0 is read
    name = os.path.join(work, "v3img.ome.zarr")
    y = rng.integers(0, 1000, size=(1,) + shape).astype("uint16")
    write_v3(os.path.join(name, "0"), y, (1, 8, 8, 8), "zstd")
    write_v3(os.path.join(name, "1"), y[:, ::2, ::2, ::2], (1, 8, 8, 8), "zstd")
    with open(os.path.join(name, "zarr.json"), "w") as f:
        json.dump({"zarr_format": 3, "node_type": "group", "attributes": {"ome": {"version": "0.5", "multiscales": [
            {"axes": [{"name": "c", "type": "channel"}] + [{"name": a, "type": "space"} for a in "zyx"],
             "datasets": [{"path": "0"}, {"path": "1"}]}]}}}, f)
    got, err = read_back(name, shape)
    check(got is not None and np.array_equal(got, y[0].astype(np.float32)), "OME-Zarr 0.5 level 0: " + err)
    # refused with the field named: sharding, an unknown codec, a transpose that is not C or F
    for what, kw in [("sharding_indexed", dict(extra_codecs=[{"name": "sharding_indexed"}])),
                     ("crc32c", dict(extra_codecs=[{"name": "crc32c"}]))]:
        name = os.path.join(work, "v3bad_%s.zarr" % what)
        write_v3(name, np.zeros(shape, "uint16"), (8, 8, 8), **kw)
        r = run("read", name, os.path.join(work, "x.f32"))
        check(r.returncode == 1 and "zarr.json" in r.stderr and "codecs" in r.stderr,
              "zarr v3 %s refused: %s" % (what, r.stderr))
    name = os.path.join(work, "v3bad_transpose.zarr")
    write_v3(name, np.zeros(shape, "uint16"), (8, 8, 8))
    with open(os.path.join(name, "zarr.json")) as f:
        meta = json.load(f)
    meta["codecs"].insert(0, {"name": "transpose", "configuration": {"order": [1, 0, 2]}})
    with open(os.path.join(name, "zarr.json"), "w") as f:
        json.dump(meta, f)
    r = run("read", name, os.path.join(work, "x.f32"))
    check(r.returncode == 1 and "transpose" in r.stderr, "zarr v3 transpose 1,0,2 refused: " + r.stderr)

    # refused: filters, 2 channels; messages name the field
    for what, kw in [("filters", dict(filters=[numcodecs.Delta(dtype="<u2")]))]:
        name = os.path.join(work, "bad_%s.zarr" % what)
        zarr.open(name, mode="w", shape=shape, chunks=(8, 8, 8), dtype="<u2", **kw)[...] = 1
        r = run("read", name, os.path.join(work, "x.f32"))
        check(r.returncode == 1 and what in r.stderr and ".zarray" in r.stderr, "refuses %s: %s" % (what, r.stderr))
    name = os.path.join(work, "two.zarr")
    zarr.open(name, mode="w", shape=(2,) + shape, chunks=(1, 8, 8, 8), dtype="<u2")[...] = 1
    r = run("read", name, os.path.join(work, "x.f32"))
    check(r.returncode == 1 and "shape" in r.stderr, "refuses 2 leading planes: " + r.stderr)

    # a corrupt chunk: a clean error naming the chunk file
    name = os.path.join(work, "corrupt.zarr")
    zarr.open(name, mode="w", shape=shape, chunks=(8, 8, 8), dtype="<u2")[...] = 5
    with open(os.path.join(name, "1.1.1"), "r+b") as f:
        f.truncate(10)
    r = run("read", name, os.path.join(work, "x.f32"))
    check(r.returncode == 1 and "1.1.1" in r.stderr and "corrupt" in r.stderr, "corrupt chunk: " + r.stderr)

    # written by swi_store, read by zarr
    def pattern(planes, dtype, size):
        p, i, j, k = np.meshgrid(np.arange(planes), *[np.arange(s) for s in size], indexing="ij")
        m = {"uint8": 251, "uint16": 65521, "float32": 1000000}[dtype]
        v = (p * 7 + i * 5 + j * 3 + k) % m
        v = v.astype(np.float32) + 0.5 if dtype == "float32" else v.astype(dtype)
        return v if planes > 1 else v[0]

    size = (23, 17, 12)
    for dtype, planes, codec, chunk in [("uint8", 1, "blosc", "8,8,8"), ("uint16", 1, "zstd", "5,16,7"),
                                        ("float32", 3, "zlib", "4,9,12"), ("uint8", 1, "raw", "23,17,12")]:
        name = os.path.join(work, "w_%s_%s.zarr" % (dtype, codec))
        r = run("write", name, dtype, str(planes), codec, ",".join(map(str, size)), chunk)
        check(r.returncode == 0, "write %s: %s" % (name, r.stderr))
        z = zarr.open(name, mode="r")
        want = pattern(planes, dtype, size)
        check(z.shape == want.shape and z.dtype == want.dtype and np.array_equal(z[...], want),
              "zarr reads what swi_store wrote: " + name)
        check(not os.path.exists(os.path.join(name, ".swi-incomplete")), "complete store has no marker: " + name)
        leftovers = [f for f in os.listdir(name) if "tmp" in f or f.startswith(".swi-part")]
        check(not leftovers, "no temporary files left: %s" % leftovers)
        if planes == 1:
            got, err = read_back(name, size)
            check(got is not None and np.array_equal(got, want.astype(np.float32)), "swi_store round trip " + err)
    r = run("write", os.path.join(work, "w_uint8_blosc.zarr"), "uint8", "1", "blosc", "23,17,12", "8,8,8")
    check(r.returncode == 1 and "exists" in r.stderr, "refuses an existing store: " + r.stderr)
    # slabs along the second and third axes
    for axis in (1, 2):
        for dtype, planes in (("uint16", 1), ("float32", 2)):
            name = os.path.join(work, "axis%d_%s.zarr" % (axis, dtype))
            r = run("write", name, dtype, str(planes), "zstd", "23,17,12", "5,4,5", env={"STORE_TOOL_SLAB_AXIS": str(axis)})
            check(r.returncode == 0 and np.array_equal(zarr.open(name, mode="r")[...], pattern(planes, dtype, size)),
                  "slab axis %d, %s: %s" % (axis, dtype, r.stderr))

    # OME-Zarr labels inside the image group
    name = os.path.join(work, "img.ome.zarr", "labels", "seg")
    r = run("write", name, "uint8", "1", "blosc", "19,13,11", "8,8,8")
    check(r.returncode == 0, "ome labels: " + r.stderr)
    g = zarr.open_group(os.path.join(work, "img.ome.zarr"), mode="r")
    check(list(g["labels"].attrs["labels"]) == ["seg"], "labels/.zattrs lists seg")
    la = g["labels/seg"].attrs.asdict()
    check(la["image-label"]["source"]["image"] == "../../" and la["multiscales"][0]["datasets"][0]["path"] == "0",
          "labels group metadata")
    check(np.array_equal(g["labels/seg/0"][...], pattern(1, "uint8", (19, 13, 11))), "ome labels data")

    # a writer that stops midway: marked incomplete, refused by swi_store, nothing temporary left
    name = os.path.join(work, "failed.zarr")
    r = run("write", name, "uint8", "1", "blosc", "23,17,12", "8,8,8", "20")
    check(r.returncode == 1, "failing writer exits 1")
    check(os.path.exists(os.path.join(name, ".swi-incomplete")), "failed store is marked incomplete")
    check(not [f for f in os.listdir(name) if "tmp" in f], "failed store has no temporary files")
    r = run("read", name, os.path.join(work, "x.f32"))
    check(r.returncode == 1 and "incomplete" in r.stderr, "incomplete store refused: " + r.stderr)

if have_zarr:
    # ---- hostile stores: special files, sizes the metadata claims, inflation ----
    import stat as stat_mod
    import time

    def read_err(name, timeout=20):
        t0 = time.time()
        try:
            r = subprocess.run([tool, "read", name, os.path.join(work, "x.f32")], capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, "hung for %d s" % timeout
        return r, "%.1f s: %s" % (time.time() - t0, r.stderr.strip())

    def small(name, chunks=(8, 8, 8), codec=None, **kw):
        zarr.open(name, mode="w", shape=shape, chunks=chunks, dtype="<u2", compressor=codec, **kw)[...] = 7

    # a FIFO as a chunk, as .zarray, as .zattrs of an image, as zarr.json: refused at once
    for what in ["0.0.0", ".zarray", "zarr.json"]:
        name = os.path.join(work, "fifo_%s.zarr" % what.strip("."))
        if what == "zarr.json":
            write_v3(name, np.zeros(shape, "uint16"), (8, 8, 8))
            os.remove(os.path.join(name, what))
        else:
            small(name)
            os.remove(os.path.join(name, what))
        os.mkfifo(os.path.join(name, what))
        r, msg = read_err(name)
        check(r is not None and r.returncode == 1 and what in r.stderr and "FIFO" in r.stderr,
              "a FIFO as %s refused without blocking: %s" % (what, msg))
    name = os.path.join(work, "fifo_attrs.ome.zarr")
    os.makedirs(name)
    os.mkfifo(os.path.join(name, ".zattrs"))
    r, msg = read_err(name)
    check(r is not None and r.returncode == 1 and ".zattrs" in r.stderr and "FIFO" in r.stderr,
          "a FIFO as an image's .zattrs refused without blocking: " + msg)

    # a sparse 3 GB chunk file is refused by its size, unread (a raw chunk is 1 KiB here)
    name = os.path.join(work, "sparse_chunk.zarr")
    small(name)
    with open(os.path.join(name, "0.0.0"), "r+b") as f:
        f.truncate(3 << 30)
    r, msg = read_err(name)
    check(r is not None and r.returncode == 1 and "0.0.0" in r.stderr and "more than" in r.stderr,
          "a 3 GB chunk file refused by its size: " + msg)
    for codec in [numcodecs.Zlib(level=1), numcodecs.Zstd(level=1), numcodecs.Blosc(cname="lz4")]:
        name = os.path.join(work, "big_chunk_%s.zarr" % codec.codec_id)
        small(name, codec=codec)
        with open(os.path.join(name, "0.0.0"), "r+b") as f:
            f.truncate(1 << 20)
        r, msg = read_err(name)
        check(r is not None and r.returncode == 1 and "0.0.0" in r.stderr and "more than" in r.stderr,
              "a %s chunk file larger than its codec can make refused: %s" % (codec.codec_id, msg))

    # chunks: 8192^3 over a 19x13x11 array, over 1 GiB; a big chunk that fits the array is read
    for chunks, what in [((8192, 8192, 8192), "at most"), ((4096, 64, 64), "times what lies inside")]:
        name = os.path.join(work, "huge_chunks_%d.zarr" % chunks[0])
        small(name)
        with open(os.path.join(name, ".zarray")) as f:
            meta = json.load(f)
        meta["chunks"] = list(chunks)
        with open(os.path.join(name, ".zarray"), "w") as f:
            json.dump(meta, f)
        r, msg = read_err(name)
        check(r is not None and r.returncode == 1 and "chunks" in r.stderr and what in r.stderr,
              "chunks %s refused before allocating: %s" % (chunks, msg))
    name = os.path.join(work, "chunk_over_array.zarr")
    small(name, chunks=(64, 64, 64))
    got, err = read_back(name, shape)
    check(got is not None and np.all(got == 7), "a chunk of 64^3 over a 19x13x11 array is read: " + err)

    # a chunk that inflates beyond its size, and headers claiming other sizes, name the chunk
    cbytes = 8 * 8 * 8 * 2
    for cid, data in [("zlib", numcodecs.Zlib(level=1).encode(bytes(cbytes * 64))),
                      ("gzip", numcodecs.GZip(level=1).encode(bytes(cbytes * 64))),
                      ("zstd", numcodecs.Zstd(level=1).encode(bytes(cbytes * 64))),
                      ("blosc", numcodecs.Blosc(cname="lz4").encode(bytes(cbytes * 2)))]:
        codec = {"zlib": numcodecs.Zlib(level=1), "gzip": numcodecs.GZip(level=1), "zstd": numcodecs.Zstd(level=1),
                 "blosc": numcodecs.Blosc(cname="lz4")}[cid]
        name = os.path.join(work, "inflate_%s.zarr" % cid)
        small(name, codec=codec)
        with open(os.path.join(name, "1.0.0"), "wb") as f:
            f.write(data)
        r, msg = read_err(name)
        check(r is not None and r.returncode == 1 and "1.0.0" in r.stderr and
              ("beyond" in r.stderr or "claims" in r.stderr),
              "%s chunk inflating beyond its size refused: %s" % (cid, msg))

    # ---- geometry: OME-Zarr known by its metadata; scale and translation read ----
    name = os.path.join(work, "published.zarr")  # an OME-Zarr image named x.zarr
    g = zarr.open_group(name, mode="w")
    x = rng.integers(0, 4000, (1,) + shape).astype("<i2")
    g.create_dataset("s0", data=x, chunks=(1, 8, 8, 8))
    g.create_dataset("s1", data=x[:, ::2, ::2, ::2], chunks=(1, 8, 8, 8))
    axes = [{"name": "c", "type": "channel"}] + [{"name": a, "type": "space", "unit": "micrometer"} for a in "zyx"]
    g.attrs["multiscales"] = [{"version": "0.4", "axes": axes, "datasets": [
        {"path": "s0", "coordinateTransformations": [{"type": "scale", "scale": [1, 2000, 500, 250]},
                                                     {"type": "translation", "translation": [0, 10000, -3000, 0]}]},
        {"path": "s1", "coordinateTransformations": [{"type": "scale", "scale": [1, 4000, 1000, 500]}]}],
        "coordinateTransformations": [{"type": "scale", "scale": [1, 1, 1, 2]}]}]
    got, err = read_back(name, shape)
    check(got is not None and np.array_equal(got, x[0].astype(np.float32)), "OME-Zarr named x.zarr read: " + err)
    r = run("geom", name)
    check(r.returncode == 0 and r.stdout.split() == "scale 2 0.5 0.5 translation 10 -3 0 has 1".split(),
          "OME-Zarr scale and translation in mm (multiscale scale composed): " + r.stdout + r.stderr)
    name = os.path.join(work, "zero_scale.ome.zarr")
    shutil.copytree(os.path.join(work, "published.zarr"), name)
    attrs = json.load(open(os.path.join(name, ".zattrs")))
    attrs["multiscales"][0]["datasets"][0]["coordinateTransformations"][0]["scale"] = [1, 0, 1, 1]
    json.dump(attrs, open(os.path.join(name, ".zattrs"), "w"))
    r = run("geom", name)
    check(r.returncode == 1 and "coordinateTransformations" in r.stderr and "s0" in r.stderr,
          "a scale of 0 refused, naming the transformations: " + r.stderr)
    r = run("geom", os.path.join(work, "sparse.zarr"))
    check(r.returncode == 0 and r.stdout.split() == "scale 1 1 1 translation 0 0 0 has 0".split(),
          "a plain Zarr array has no geometry: " + r.stdout)

    # ---- the output rule: only swi's own kind of store is replaced, and only with force ----
    def tree(root):
        out = {}
        for d, _, files in os.walk(root):
            for f in files:
                p = os.path.join(d, f)
                out[os.path.relpath(p, root)] = open(p, "rb").read() if not stat_mod.S_ISFIFO(os.lstat(p).st_mode) else "fifo"
        return out

    wargs = ["uint8", "1", "blosc", "19,13,11", "8,8,8"]
    user = os.path.join(work, "user.zarr")
    os.makedirs(os.path.join(user, "thesis"))
    with open(os.path.join(user, "thesis", "notes.txt"), "w") as f:
        f.write("years of work\n")
    with open(os.path.join(user, ".zarray"), "w") as f:
        f.write("{}")
    plain = os.path.join(work, "plain.zarr")
    os.makedirs(plain)
    with open(os.path.join(plain, "notes.txt"), "w") as f:
        f.write("years of work\n")
    for d, who in [(user, "thesis"), (plain, "notes.txt")]:
        before = tree(d)
        for flags in ["", "force", "shared", "force,shared"]:
            r = run("write", d, *wargs, env={"STORE_TOOL_FLAGS": flags})
            check(r.returncode == 1 and "not a Zarr array" in r.stderr and who in r.stderr and tree(d) == before,
                  "a folder of the user's files refused (flags %r), untouched: %s" % (flags, r.stderr))
    # an OME image whose level is not named 0: refused without force, its metadata untouched
    img = os.path.join(work, "img.ome.zarr")
    before = tree(img)
    r = run("write", img, *wargs)
    check(r.returncode == 1 and "exists" in r.stderr and tree(img) == before,
          "an OME image (levels s0, s1, labels) as output refused, untouched: " + r.stderr)
    r = run("write", img, *wargs, env={"STORE_TOOL_FLAGS": "force"})
    check(r.returncode == 1 and "labels" in r.stderr and tree(img) == before,
          "an OME image holding labels is not replaced, even with force: " + r.stderr)
    # labels into an image: the image's own metadata and levels byte for byte, the labels
    # list merged, the level's scale and translation carried
    name = os.path.join(work, "geo.ome.zarr")
    shutil.copytree(os.path.join(work, "published.zarr"), name)
    os.makedirs(os.path.join(name, "labels"))
    with open(os.path.join(name, "labels", ".zattrs"), "w") as f:
        json.dump({"labels": ["manual"], "note": "kept"}, f)
    image = {k: v for k, v in tree(name).items() if not k.startswith("labels")}
    r = run("write", os.path.join(name, "labels", "auto"), *wargs)
    check(r.returncode == 0, "labels into an image with levels s0, s1: " + r.stderr)
    after = tree(name)
    check({k: v for k, v in after.items() if not k.startswith("labels")} == image,
          "the image's .zattrs, .zgroup and levels are byte for byte as before")
    la = json.load(open(os.path.join(name, "labels", ".zattrs")))
    check(la == {"labels": ["manual", "auto"], "note": "kept"}, "labels/.zattrs merged: %s" % la)
    ms = json.load(open(os.path.join(name, "labels", "auto", ".zattrs")))["multiscales"][0]
    ct = ms["datasets"][0]["coordinateTransformations"]
    check(ct == [{"type": "scale", "scale": [2000.0, 500.0, 500.0]},
                 {"type": "translation", "translation": [10000.0, -3000.0, 0.0]}]
          and all(a.get("unit") == "micrometer" for a in ms["axes"]),
          "labels carry level s0's scale and translation, in the image's units: %s" % ct)
    r = run("geom", os.path.join(name, "labels", "auto"))
    check(r.returncode == 0 and r.stdout.split()[:8] == "scale 2 0.5 0.5 translation 10 -3 0".split(),
          "the labels read back with the image's geometry: " + r.stdout + r.stderr)
    # force over the labels group: swapped in beside the image's own files, which stay as they were
    r = run("write", os.path.join(name, "labels", "auto"), "uint8", "1", "zstd", "19,13,11", "4,4,4",
            env={"STORE_TOOL_FLAGS": "force"})
    check(r.returncode == 0 and {k: v for k, v in tree(name).items() if not k.startswith("labels")} == image and
          json.load(open(os.path.join(name, "labels", ".zattrs"))) == la and
          zarr.open(os.path.join(name, "labels", "auto", "0"), mode="r").chunks == (4, 4, 4) and
          not [f for f in os.listdir(os.path.join(name, "labels")) if ".swi-" in f],
          "labels rewritten with force inside the image, nothing else touched: " + r.stderr)
    r = run("write", os.path.join(name, "labels", "auto"), "uint8", "1", "zstd", "19,13,11", "8,8,8", "5",
            env={"STORE_TOOL_FLAGS": "force"})
    check(r.returncode == 1 and zarr.open(os.path.join(name, "labels", "auto", "0"), mode="r").chunks == (4, 4, 4)
          and not [f for f in os.listdir(os.path.join(name, "labels")) if ".swi-" in f],
          "a failed forced rewrite of the labels leaves them as they were")
    with open(os.path.join(name, "labels", ".zattrs"), "w") as f:
        f.write("{not json")
    r = run("write", os.path.join(name, "labels", "third"), *wargs)
    check(r.returncode == 1 and ".zattrs" in r.stderr and open(os.path.join(name, "labels", ".zattrs")).read() ==
          "{not json", "an unreadable labels/.zattrs is refused, not replaced: " + r.stderr)

    # force over a complete store: written beside it and swapped in at commit; a writer that
    # fails or is killed midway leaves the old store exactly as it was
    name = os.path.join(work, "w_uint8_blosc.zarr")
    before = tree(name)
    r = run("write", name, "uint8", "1", "blosc", "23,17,12", "8,8,8", "20", env={"STORE_TOOL_FLAGS": "force"})
    check(r.returncode == 1 and tree(name) == before and not [f for f in os.listdir(work) if ".swi-new" in f],
          "a failed forced rewrite leaves the old store as it was, nothing beside it")
    p = subprocess.Popen([tool, "write", name, "uint16", "1", "zstd", "23,17,12", "8,8,8"],
                         env=dict(os.environ, STORE_TOOL_FLAGS="force", STORE_TOOL_PAUSE="20"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # the tool writes its first 20 boxes (of 30, in rows of 6 along the first axis) and sleeps:
    # the first chunk layer (12 boxes) is written, and the store is not swapped
    t0, seen = time.time(), False
    while time.time() - t0 < 50 and not seen:
        new = [f for f in os.listdir(work) if f.startswith(".w_uint8_blosc.zarr.swi-new")]
        seen = bool(new) and any(c[0].isdigit() for c in os.listdir(os.path.join(work, new[0])))
        time.sleep(0.05)
    p.kill()
    p.wait()
    check(seen and tree(name) == before, "a forced rewrite killed with chunks written: the old store as it was")
    for f in os.listdir(work):
        if f.startswith(".w_uint8_blosc.zarr.swi-new"):
            shutil.rmtree(os.path.join(work, f))
    r = run("write", name, "uint16", "1", "zstd", "23,17,12", "5,16,7", env={"STORE_TOOL_FLAGS": "force"})
    z = zarr.open(name, mode="r")
    check(r.returncode == 0 and z.dtype == np.uint16 and z.chunks == (5, 16, 7) and
          np.array_equal(z[...], pattern(1, "uint16", size)) and
          not [f for f in os.listdir(work) if ".swi-" in f], "force rewrites a complete store whole: " + r.stderr)

    # shared stores record the job; a part of another job is refused, naming both
    name = os.path.join(work, "jobs.zarr")
    r = run("write", name, *wargs, "3", env={"STORE_TOOL_FLAGS": "shared", "STORE_TOOL_JOB": "input a.zarr model m"})
    before = tree(name)
    r = run("write", name, *wargs, env={"STORE_TOOL_FLAGS": "shared", "STORE_TOOL_JOB": "input b.zarr model m"})
    check(r.returncode == 1 and "another job" in r.stderr and "a.zarr" in r.stderr and "b.zarr" in r.stderr and
          tree(name) == before, "a part of another job refused: " + r.stderr)
    r = run("write", name, *wargs, env={"STORE_TOOL_FLAGS": "shared", "STORE_TOOL_JOB": "input a.zarr model m"})
    check(r.returncode == 0 and not os.path.exists(os.path.join(name, ".swi-incomplete")) and
          not os.path.exists(os.path.join(name, ".swi-job")), "the same job completes it: " + r.stderr)

if have_h5:
    name = os.path.join(work, "v.h5")
    with h5py.File(name, "w") as f:
        x = rng.integers(0, 60000, shape).astype(">u2")
        f.create_dataset("grp/data", data=x, chunks=(4, 4, 4), compression="gzip", shuffle=True)
        y = rng.normal(0, 1, (1,) + shape)
        f.create_dataset("f64", data=y)
    got, err = read_back(name + ":/grp/data", shape)
    check(got is not None and np.array_equal(got, x.astype(np.float32)), "hdf5 big-endian uint16 gzip: " + err)
    got, err = read_back(name + ":f64", shape)
    check(got is not None and np.array_equal(got, y[0].astype(np.float32)), "hdf5 float64 4-D: " + err)
    r = run("read", name + ":/nope", os.path.join(work, "x.f32"))
    check(r.returncode == 1 and "/nope" in r.stderr, "missing dataset named: " + r.stderr)

    size = (23, 17, 12)
    for dtype, planes in [("uint16", 1), ("float32", 2)]:
        name = os.path.join(work, "w_%s.h5" % dtype)
        r = run("write", name + ":/out/labels", dtype, str(planes), "blosc", "23,17,12", "8,8,8")
        check(r.returncode == 0, "hdf5 write: " + r.stderr)
        with h5py.File(name, "r") as f:
            d = f["out/labels"]
            want = pattern(planes, dtype, size) if have_zarr else None
            check(d.chunks is not None and d.compression == "gzip", "hdf5 chunked and compressed")
            check(want is None or np.array_equal(d[...], want), "h5py reads what swi_store wrote")
    # chunks of 6 bytes, which deflate cannot shrink: stored raw, the filters marked skipped
    name = os.path.join(work, "w_tiny.h5")
    r = run("write", name + ":/t", "uint8", "1", "blosc", "23,17,12", "1,2,3")
    if r.returncode == 0:
        with h5py.File(name, "r") as f:
            check(not have_zarr or np.array_equal(f["t"][...], pattern(1, "uint8", size)),
                  "h5py reads chunks stored raw: " + r.stderr)
    check(r.returncode == 0, "hdf5 write, tiny chunks: " + r.stderr)
    name = os.path.join(work, "failed.h5")
    r = run("write", name + ":/x", "uint8", "1", "blosc", "23,17,12", "8,8,8", "5")
    check(r.returncode == 1 and not os.path.exists(name) and
          not [f for f in os.listdir(work) if f.startswith(".failed.h5")], "failed hdf5 leaves nothing")

if have_h5:
    import re
    import signal
    import time
    import zlib

    size = (23, 17, 12)
    want_u8 = pattern(1, "uint8", size) if have_zarr else None

    def h5_tree(path):
        """Every object of the file: its kind, attributes and data, to compare files."""
        out = {}
        with h5py.File(path, "r") as f:
            out["/"] = ("file", sorted((k, repr(v)) for k, v in f.attrs.items()))

            def visit(name, obj):
                attrs = sorted((k, repr(v)) for k, v in obj.attrs.items())
                if isinstance(obj, h5py.Dataset):
                    out[name] = ("dataset", attrs, obj.dtype.str, obj.shape, obj[...].tobytes())
                else:
                    out[name] = ("group", attrs)
            f.visititems(visit)
        return out

    def user_file(path):
        with h5py.File(path, "w") as f:
            f.attrs["study"] = "mine"
            f.create_dataset("raw/ct", data=rng.normal(0, 1, (5, 6, 7)), chunks=(2, 3, 4), compression="gzip")
            f["raw/ct"].attrs["units"] = "HU"
            f.create_group("notes").attrs["who"] = "me"
            f.create_dataset("mine", data=np.arange(60, dtype="<u2").reshape(3, 4, 5))

    def write(name, *extra, force=False, env=None):
        e = {"STORE_TOOL_FORCE": "1"} if force else {}
        e.update(env or {})
        return run("write", name, "uint8", "1", "blosc", "23,17,12", "8,8,8", *extra, env=e)

    def leftovers():
        return [f for f in os.listdir(work) if ".swi-" in f or ".tmp-" in f]

    # a new dataset in an existing file: every other object and attribute is kept
    name = os.path.join(work, "user.h5")
    user_file(name)
    before = h5_tree(name)
    r = write(name + ":/seg/labels")
    after = h5_tree(name) if r.returncode == 0 else {}
    check(r.returncode == 0 and all(after.get(k) == v for k, v in before.items()) and "seg/labels" in after,
          "a new dataset beside the user's keeps every other object and attribute: " + r.stderr)
    if want_u8 is not None and r.returncode == 0:
        with h5py.File(name, "r") as f:
            check(np.array_equal(f["seg/labels"][...], want_u8), "the new dataset holds what was written")
    # again without --force: refused, the file byte for byte as it was
    raw = open(name, "rb").read()
    r = write(name + ":/seg/labels")
    check(r.returncode == 1 and "--force" in r.stderr and open(name, "rb").read() == raw,
          "an existing dataset without --force refused, the file untouched: " + r.stderr)
    # --force replaces that dataset only; a failed --force run leaves the file byte for byte
    r = write(name + ":/seg/labels", "5", force=True)
    check(r.returncode == 1 and open(name, "rb").read() == raw and not leftovers(),
          "a failed --force run leaves the file byte for byte, no temporary: %s %s" % (r.stderr, leftovers()))
    r = write(name + ":/seg/labels", force=True)
    after = h5_tree(name) if r.returncode == 0 else {}
    check(r.returncode == 0 and all(after.get(k) == v for k, v in before.items()) and not leftovers(),
          "--force rewrites the dataset and keeps the rest of the file: " + r.stderr)
    sizes = [os.path.getsize(name)]
    for i in range(3):
        write(name + ":/seg/labels", force=True)
        sizes.append(os.path.getsize(name))
    print("file size over --force rewrites:", sizes)
    check(sizes[-1] <= 2 * sizes[0], "repeated --force rewrites reuse the old dataset's space: %s" % sizes)
    # --force never replaces what swi does not write: a user's dataset, a group, another file
    raw = open(name, "rb").read()
    for path, why in [("/raw/ct", "not a dataset swi writes"), ("/mine", "not a dataset swi writes"),
                      ("/notes", "not a dataset"), ("/raw", "not a dataset")]:
        r = write(name + ":" + path, force=True)
        check(r.returncode == 1 and why in r.stderr and open(name, "rb").read() == raw and not leftovers(),
              "--force on %s refused, the file untouched: %s" % (path, r.stderr))
    other = os.path.join(work, "notes.h5")
    with open(other, "wb") as f:
        f.write(b"my notes, not HDF5\n" * 10)
    r = write(other + ":/x", force=True)
    check(r.returncode == 1 and "not an HDF5 file" in r.stderr and
          open(other, "rb").read() == b"my notes, not HDF5\n" * 10, "--force over a non-HDF5 file refused: " + r.stderr)
    # writers of other datasets of the file at once: none loses another's dataset (a writer
    # whose copy is outdated at commit fails and says so)
    procs = [subprocess.Popen([tool, "write", "%s:/c%d" % (name, i), "uint8", "1", "blosc", "23,17,12", "8,8,8"],
                              env=dict(os.environ, STORE_TOOL_FORCE="1"), stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    after = h5_tree(name)
    ok = [i for i, p in enumerate(procs) if p.returncode == 0]
    print("concurrent writers of one file: %d of 4 committed, the others refused" % len(ok))
    check(ok and all("c%d" % i in after for i in ok) and all(after.get(k) == v for k, v in before.items()) and
          all(p.returncode == 0 or "changed while swi was running" in e for p, e in zip(procs, errs)) and
          not leftovers(), "concurrent writers of one file lose no dataset: %s %s" % (ok, errs))
    raw, prior = open(name, "rb").read(), h5_tree(name)
    # a writer killed midway (SIGKILL: nothing of it runs) leaves the previous file as it was
    p = subprocess.Popen([tool, "write", name + ":/seg/labels", "uint8", "1", "blosc", "23,17,12", "8,8,8"],
                         env=dict(os.environ, STORE_TOOL_FORCE="1"), stderr=subprocess.DEVNULL)
    time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    now = h5_tree(name)
    check(open(name, "rb").read() == raw or (now.keys() == prior.keys() and
                                             all(now[k] == v for k, v in prior.items() if k != "seg/labels")),
          "a killed writer leaves the file as it was (or, done before the kill, complete)")
    for d in leftovers():
        shutil.rmtree(os.path.join(work, d), ignore_errors=True)

    # the temporary is never a planted link: the victim stays untouched
    victim = os.path.join(work, "victim.txt")
    for out in ("planted.h5", "planted2.h5"):
        with open(victim, "w") as f:
            f.write("precious")
        outp = os.path.join(work, out)
        if out == "planted2.h5":
            user_file(outp)
        # the name the writer used to take: .NAME.tmp-PID, PID the process's own ($$ after exec)
        r = subprocess.run(["sh", "-c", 'ln -s "$1" "$2/.$3.tmp-$$"; exec "$4" write "$2/$3:/seg" uint8 1 blosc '
                            '23,17,12 8,8,8', "sh", victim, work, out, tool], capture_output=True, text=True)
        check(r.returncode == 0 and open(victim, "rb").read() == b"precious",
              "a link planted at a temporary name is not followed (%s): %s" % (out, r.stderr))
        for f in os.listdir(work):
            if f.startswith("." + out + ".tmp-"):
                os.unlink(os.path.join(work, f))

    # an input that is a FIFO, or a directory: refused at once
    fifo = os.path.join(work, "fifo.h5")
    os.mkfifo(fifo)
    os.mkdir(os.path.join(work, "dir.h5"))
    for what in ("fifo.h5", "dir.h5"):
        try:
            r = subprocess.run([tool, "read", os.path.join(work, what) + ":/x", os.path.join(work, "x.f32")],
                               capture_output=True, text=True, timeout=20)
            check(r.returncode == 1 and "not a regular file" in r.stderr, "%s refused: %s" % (what, r.stderr))
        except subprocess.TimeoutExpired:
            check(False, "%s as an HDF5 input blocks" % what)
    os.unlink(fifo)

    # chunks bounded by their header: a stream that inflates beyond its chunk, a chunk
    # over the cap, chunk dimensions over the dataset's, filters swi does not read
    def bomb(nbytes):
        """A zlib stream of nbytes zeros, built from one independently decodable 64 MiB piece."""
        piece = 64 << 20
        c = zlib.compressobj(9)
        head = c.compress(bytes(piece)) + c.flush(zlib.Z_FULL_FLUSH)
        seg = head[2:]
        tail = c.flush(zlib.Z_FINISH)[:-4]
        b = nbytes % 65521
        return head[:2] + seg * (nbytes // piece) + tail + ((b << 16) | 1).to_bytes(4, "big")

    name = os.path.join(work, "bomb.h5")
    with h5py.File(name, "w") as f:
        d = f.create_dataset("small", shape=(64, 64, 64), dtype="u1", chunks=(64, 64, 64), compression="gzip")
        d.id.write_direct_chunk((0, 0, 0), bomb(64 << 20), filter_mask=0)
        d = f.create_dataset("big", shape=(1536, 1024, 1024), dtype="u2", chunks=(1536, 1024, 1024),
                             compression="gzip")
        d.id.write_direct_chunk((0, 0, 0), bomb(3 << 30), filter_mask=0)
        f.create_dataset("wide", shape=(40, 40, 40), dtype="u1", chunks=(40, 40, 40), maxshape=(None, None, None),
                         compression="gzip")
        f["wide"].resize((4, 40, 40))
        f.create_dataset("fletcher", data=np.ones((8, 8, 8), "u1"), chunks=(4, 4, 4), fletcher32=True)
        f.create_dataset("lzf", data=np.ones((8, 8, 8), "u1"), chunks=(4, 4, 4), compression="lzf")
    for path, why in [("small", "chunk \\(0, 0, 0\\): it inflates beyond the 262144 bytes"),
                      ("big", "over the 1024 MiB a chunk may hold"),
                      ("wide", "chunk dimension 0 of 40 is larger than the dataset's 4"),
                      ("fletcher", "filter 3 \\(fletcher32\\)"), ("lzf", "filter 32000")]:
        # a fresh process per case: its peak memory is the children's maximum so far
        r = subprocess.run([sys.executable, "-c", "import resource, subprocess, sys; "
                            "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
                            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
                            "sys.stderr.write(r.stderr); sys.exit(r.returncode)",
                            tool, "read", name + ":/" + path, os.path.join(work, "x.f32")],
                           capture_output=True, text=True, timeout=300)
        rss_mb = int(r.stdout.split()[-1]) / 1024.0 if r.stdout.split() else -1
        check(r.returncode == 1 and re.search(why, r.stderr) and "bomb.h5:/" + path in r.stderr and rss_mb < 200,
              "%s refused (%s) within %.0f MB: %s" % (path, why, rss_mb, r.stderr))
    # data elsewhere: a path through an external link (here to a FIFO, which would block), raw
    # data in an external file, a soft link
    fifo = os.path.join(work, "fifo2.h5")
    os.mkfifo(fifo)
    name = os.path.join(work, "links.h5")
    with h5py.File(name, "w") as f:
        f["ext"] = h5py.ExternalLink(fifo, "/x")
        f["soft"] = h5py.SoftLink("/real")
        f.create_dataset("real", data=np.ones((4, 4, 4), "u1"))
        f.create_dataset("outside", shape=(4, 4, 4), dtype="u1", external=[(os.path.join(work, "raw.bin"), 0, 64)])
    with open(os.path.join(work, "raw.bin"), "wb") as f:
        f.write(bytes(64))
    for path, why in [("ext", "soft or external link"), ("soft", "soft or external link"),
                      ("outside", "external file")]:
        try:
            r = subprocess.run([tool, "read", name + ":/" + path, os.path.join(work, "x.f32")], capture_output=True,
                               text=True, timeout=20)
            check(r.returncode == 1 and why in r.stderr, "%s refused: %s" % (path, r.stderr))
        except subprocess.TimeoutExpired:
            check(False, "%s blocks" % path)
    os.unlink(fifo)
    # an HDF5 file holding swi's own chunks is still read, raw chunks (tiny) too
    got, err = read_back(os.path.join(work, "w_tiny.h5") + ":/t", size)
    check(got is not None and (want_u8 is None or np.array_equal(got, want_u8.astype(np.float32))),
          "swi reads its own raw-stored chunks: " + err)
    # an unwritten chunk reads as the fill value
    name = os.path.join(work, "fill.h5")
    with h5py.File(name, "w") as f:
        d = f.create_dataset("d", shape=(10, 10, 10), dtype="<i2", chunks=(5, 5, 5), compression="gzip",
                             shuffle=True, fillvalue=-7)
        d[:5, :5, :5] = 3
    got, err = read_back(name + ":/d", (10, 10, 10))
    exp = np.full((10, 10, 10), -7, np.float32)
    exp[:5, :5, :5] = 3
    check(got is not None and np.array_equal(got, exp), "unwritten chunks read as the fill value: " + err)

print("%d checks, %d failures" % (checks, len(failures)))
sys.exit(1 if failures or checks == 0 else 0)
