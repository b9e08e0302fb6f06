#!/usr/bin/env python3
"""geometry.py VOLUME_INFO WORK -- swi_io against nibabel, an independent reader.

Writes NIfTI files with nibabel (sform only, qform only with a rotation and qfac -1,
neither, both, NIfTI-2, big-endian, scaled integers, gzip) and checks that swi_io reads
the same sizes, spacing, affine (nibabel's img.affine) and voxels (the weighted sum
volume_info prints, in swi_io's [i][j][k] order)."""
import os
import subprocess
import sys

import nibabel as nib
import numpy as np

info, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(7)


def rot(ax, deg):
    t = np.deg2rad(deg)
    c, s = np.cos(t), np.sin(t)
    m = np.eye(4)
    i, j = [(1, 2), (0, 2), (0, 1)][ax]
    m[i, i], m[i, j], m[j, i], m[j, j] = c, -s, s, c
    return m


def write(name, data, aff, sform, qform, cls=nib.Nifti1Image, dtype=None, slope=None,
          endian=None):
    img = cls(data, None)
    hdr = img.header
    if endian:
        hdr = hdr.as_byteswapped(endian)
        img = cls(data, None, hdr)
        hdr = img.header
    hdr.set_zooms(tuple(np.sqrt((aff[:3, :3] ** 2).sum(0))))
    if sform is not None:
        img.set_sform(aff, code=sform)
    else:
        img.set_sform(None, code=0)
    if qform is not None:
        img.set_qform(aff, code=qform)
    else:
        img.set_qform(None, code=0)
    if dtype is not None:
        hdr.set_data_dtype(dtype)
    if slope is not None:
        hdr.set_slope_inter(*slope)
    path = os.path.join(work, name)
    nib.save(img, path)
    return path


base = np.diag([0.8, 1.5, 2.5, 1.0])
base[:3, 3] = [-40.0, 12.5, 7.0]
flip = base @ np.diag([1, 1, -1, 1])      # qfac -1
rotated = rot(2, 30) @ rot(0, 12) @ base
shape = (9, 7, 5)
vol = rng.normal(size=shape).astype(np.float32)
ints = rng.integers(-300, 300, size=shape).astype(np.int16)
files = [
    write("sform.nii.gz", vol, rotated, 2, None),
    write("qform.nii", vol, rotated, None, 1),
    write("qform_flip.nii.gz", vol, flip, None, 1),
    write("both.nii", vol, rotated @ rot(1, 5), 4, 1),
    write("neither.nii", vol, base, None, None),
    write("n2.nii.gz", vol, rotated, 1, 1, cls=nib.Nifti2Image),
    write("be.nii", vol, flip, 1, None, endian=">"),
    write("scaled.nii.gz", ints, base, 1, 1, dtype=np.int16, slope=(0.5, -3.0)),
]
out = subprocess.run([info, "--read"] + files, capture_output=True, text=True, check=True)
bad = 0
for line, path in zip(out.stdout.splitlines(), files):
    f = line.split()
    if f[1] != "size":
        print(f"FAIL {path}: swi_io refused it: {line}")
        bad += 1
        continue
    img = nib.load(path)
    size = [int(x) for x in f[2:5]]
    spacing = np.array([float(x) for x in f[14:17]])
    aff = np.array([float(x) for x in f[18:34]]).reshape(4, 4)
    got_sum = float(f[35])
    data = np.asarray(img.dataobj, dtype=np.float64).reshape(img.shape[:3])
    want_sum = float((data.astype(np.float32).astype(np.float64).ravel(order="C") *
                      (np.arange(data.size) % 7 + 1)).sum())
    checks = [
        (size == list(img.shape[:3]), f"size {size} vs {img.shape}"),
        (np.allclose(spacing, img.header.get_zooms()[:3], atol=1e-6), f"spacing {spacing}"),
        (np.allclose(aff, img.affine, atol=1e-5), f"affine\n{aff}\nnibabel\n{img.affine}"),
        (abs(got_sum - want_sum) <= 1e-6 * max(1.0, abs(want_sum)), f"voxels {got_sum} vs {want_sum}"),
    ]
    for ok, what in checks:
        if not ok:
            print(f"FAIL {os.path.basename(path)}: {what}")
            bad += 1
print(f"{len(files)} files, {bad} mismatches")
sys.exit(1 if bad else 0)
