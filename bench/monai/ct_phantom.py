#!/usr/bin/env python3
"""A CT-like benchmark volume: a body in air, in Hounsfield units.

    ct_phantom.py OUT.nii.gz [--shape 320,320,96] [--seed 0]

An elliptic torso (soft tissue +40 HU under a fat layer of -100 HU) with liver (+60),
spleen (+50), two kidneys (+30), a spine (+700) and two lungs (-850), inside air at
-1000 HU, over the whole field of view of a 38 cm scan at 1.2 x 1.2 x 2.5 mm (320 x 320 x
96 voxels; the body 28 x 15 cm, a slim adult). Quantum noise of 15 HU everywhere, air
included, as in a real scan. CT models clip to a soft-tissue window first (MONAI's
ScaleIntensityRange(-175, 250, 0, 1, clip=True), swi's --clip -175,250 --scale
-175,250,0,1): air and lungs then become exactly 0, so windows of air alone are bitwise
identical inputs, as they are in real scans (with roi 96 and overlap 0.25 here, the
windows along the anterior and posterior edges).
"""
import argparse

import numpy as np
import nibabel as nib


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--shape", default="320,320,96")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    shape = tuple(int(s) for s in a.shape.split(","))
    rng = np.random.default_rng(a.seed)
    i, j, k = np.indices(shape, dtype=np.float32)
    c = [s / 2.0 for s in shape]
    # i: left-right, j: anterior-posterior, k: feet-head (the body spans every slice)
    ni, nj = (i - c[0]) / shape[0], (j - c[1]) / shape[1]

    def ell(ci, cj, ri, rj, ck=None, rk=None):
        d = ((i - c[0] - ci * shape[0]) / (ri * shape[0])) ** 2 + \
            ((j - c[1] - cj * shape[1]) / (rj * shape[1])) ** 2
        if ck is not None:
            d = d + ((k - ck * shape[2]) / (rk * shape[2])) ** 2
        return d <= 1.0

    vol = np.full(shape, -1000.0, np.float32)
    body = (ni / 0.365) ** 2 + (nj / 0.20) ** 2 <= 1.0
    inner = (ni / 0.345) ** 2 + (nj / 0.18) ** 2 <= 1.0
    vol[body] = -100.0                        # subcutaneous fat
    vol[inner] = 40.0                         # muscle and soft tissue
    vol[ell(0.10, -0.02, 0.12, 0.09, 0.45, 0.40) & inner] = 60.0   # liver
    vol[ell(-0.16, 0.04, 0.05, 0.05, 0.55, 0.25) & inner] = 50.0   # spleen
    for s in (-1, 1):
        vol[ell(0.09 * s, 0.07, 0.035, 0.05, 0.35, 0.20) & inner] = 30.0   # kidneys
        vol[ell(0.09 * s, -0.02, 0.09, 0.08, 0.95, 0.35) & inner] = -850.0  # lung bases
    vol[ell(0.0, 0.12, 0.025, 0.03) & inner] = 700.0                   # spine
    vol += rng.normal(0.0, 15.0, size=shape).astype(np.float32)
    aff = np.diag([1.2, 1.2, 2.5, 1.0])
    img = nib.Nifti1Image(vol.astype(np.float32), aff)
    img.header.set_xyzt_units("mm", "sec")
    nib.save(img, a.out)
    print(f"ct: {shape} float32 HU, body {body.mean() * 100:.1f}% of the voxels, "
          f"air clipped to -175 in {(vol < -175).mean() * 100:.1f}%")


if __name__ == "__main__":
    main()
