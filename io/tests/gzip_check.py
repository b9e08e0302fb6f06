#!/usr/bin/env python3
"""io_gzip: .nii.gz through libdeflate (io/gzip.c) against gzip(1), Python's gzip and nibabel.

    gzip_check.py GZIP_WRITE VOLUME_INFO WORKDIR

Writes: outputs of several sizes (one member, several members compressed in parallel, an
empty-looking 1-voxel one) pass `gzip -t`, hold the members expected, and nibabel reads
the voxels written. Reads: what swi_io reads from .nii.gz files nibabel wrote (big-endian,
NaN and Inf, float64, scaled int16), from multi-member files, from a member holding data
after the voxels, and from a file with bytes after the gzip stream, equals what it reads
from the same data uncompressed; a stream failing its CRC or truncated is an error.
"""
import gzip
import os
import shutil
import subprocess
import sys
import zlib

import numpy as np
import nibabel as nib

failures = 0


def check(cond, msg):
    global failures
    if not cond:
        print("FAIL:", msg)
        failures += 1


def members(path):
    data = open(path, "rb").read()
    n = 0
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        d.decompress(data)
        if not d.eof:
            raise ValueError("truncated member")
        n += 1
        data = d.unused_data
    return n


def info(vinfo, *paths):
    out = subprocess.run([vinfo, "--read", *paths], capture_output=True, text=True, check=True).stdout
    return [line.split(" ", 1)[1] for line in out.splitlines()]


def main(gzw, vinfo, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    gz_tool = shutil.which("gzip")
    # ---- writing
    for name, dims, planes, kind, want_members in [
        ("one_voxel", (1, 1, 1), 1, "labels", 1),
        ("labels", (40, 30, 20), 1, "labels", 1),
        ("scores_multi", (64, 64, 64), 5, "float", 3),    # 5 MiB: members of 2 MiB
        ("noise_stored", (64, 64, 64), 5, "noise", 3),    # stored after the first blocks
        ("labels_multi", (160, 160, 100), 1, "labels", 2),
    ]:
        p = os.path.join(work, name + ".nii.gz")
        subprocess.run([gzw, p, *map(str, dims), str(planes), kind], check=True)
        if gz_tool:
            r = subprocess.run([gz_tool, "-t", p], capture_output=True, text=True)
            check(r.returncode == 0, f"{name}: gzip -t: {r.stderr.strip()}")
        n = members(p)
        check(n == want_members, f"{name}: {n} gzip members, expected {want_members}")
        img = nib.load(p)
        a = np.asarray(img.dataobj)
        x = np.arange(np.prod(dims) * planes, dtype=np.int64)
        if kind == "labels":
            exp = (x % 7).astype(np.uint8)
        elif kind == "noise":
            h = x.astype(np.uint64) * 2654435761 % 2**32
            h ^= h >> 15
            h = h * 2246822519 % 2**32
            h ^= h >> 13
            exp = h.astype(np.uint32)
        else:
            exp = (np.sin(0.001 * x.astype(np.float64)) * 100.0).astype(np.float32)
        exp = exp.reshape((planes,) + dims)             # [c][i][j][k] as written
        exp = np.moveaxis(exp, 0, -1).reshape(dims + ((planes,) if planes > 1 else ()))
        if a.ndim == 5:
            a = a[:, :, :, 0, :]
        if kind == "noise":  # compared as bits: some are NaN
            a = np.ascontiguousarray(a).view(np.uint32)
        check(a.shape == exp.shape and np.array_equal(a, exp), f"{name}: nibabel reads other voxels")
        if kind == "noise":
            check(os.path.getsize(p) > a.nbytes, f"{name}: incompressible data not stored")
        print(f"write {name}: {n} member(s), {os.path.getsize(p)} bytes, gzip -t and nibabel ok")

    # ---- reading
    rng = np.random.default_rng(1)
    aff = np.diag([0.7, 0.8, 1.5, 1.0])
    vol = rng.standard_normal((33, 29, 17)).astype(np.float32) * 100
    bad = vol.copy()
    bad[1, 2, 3], bad[4, 5, 6], bad[7, 8, 9] = np.nan, np.inf, -np.inf
    cases = {
        "f32": nib.Nifti1Image(vol, aff),
        "f32_nan": nib.Nifti1Image(bad, aff),
        "f64": nib.Nifti1Image(vol.astype(np.float64), aff),
        "i16_scaled": nib.Nifti1Image((vol * 10).astype(np.int16), aff),
        "n2": nib.Nifti2Image(vol, aff),
    }
    cases["i16_scaled"].header.set_slope_inter(0.25, -3.0)
    cases["f32_nan_big_endian"] = nib.Nifti1Image(bad, aff, header=nib.Nifti1Header(endianness=">"))
    for name, img in cases.items():
        plain = os.path.join(work, name + ".nii")
        img.to_filename(plain)
        raw = open(plain, "rb").read()
        variants = {"gz": gzip.compress(raw, 6)}
        # several members, cut inside the header and inside the voxels
        cuts = [0, 100, 352 + 1000, len(raw) // 2, len(raw)]
        variants["multi"] = b"".join(gzip.compress(raw[a:b], 1) for a, b in zip(cuts, cuts[1:]))
        # data after the voxels, inside the last member
        variants["tail_in_member"] = gzip.compress(raw + b"\0" * 5000, 6)
        # bytes after the gzip stream (ignored, as zlib ignores them)
        variants["garbage_after"] = gzip.compress(raw, 6) + b"\0\0\0\0"
        ref = info(vinfo, plain)[0]
        check(" sum " in ref, f"{name}: .nii not read: {ref}")
        for v, data in variants.items():
            p = os.path.join(work, f"{name}_{v}.nii.gz")
            open(p, "wb").write(data)
            got = info(vinfo, p)[0]
            check(got == ref, f"{name} ({v}): swi_io reads {got!r}, from the .nii {ref!r}")
        print(f"read {name}: .nii.gz (one member, several, data after the voxels, bytes after) == .nii")
    # errors: corrupt and truncated streams
    raw = open(os.path.join(work, "f32.nii"), "rb").read()
    z = bytearray(gzip.compress(raw, 6))
    z[-8] ^= 0xFF  # the CRC32 (zlib, reading only the bytes it needs, never checks it)
    p = os.path.join(work, "corrupt_crc.nii.gz")
    open(p, "wb").write(bytes(z))
    check("read-error" in info(vinfo, p)[0], "a stream failing its CRC is read")
    p = os.path.join(work, "truncated.nii.gz")
    open(p, "wb").write(gzip.compress(raw, 6)[: len(z) * 2 // 3])
    check("read-error" in info(vinfo, p)[0], "a truncated stream is read")
    if failures:
        print(f"{failures} failure(s)")
        return 1
    print("io_gzip: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
