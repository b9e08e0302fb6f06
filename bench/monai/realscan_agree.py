#!/usr/bin/env python3
"""swi's real-scan pipeline against MONAI's, on an anisotropic, oblique, non-RAS volume.

MONAI:  LoadImaged -> EnsureChannelFirstd -> Orientationd(RAS) -> Spacingd(PIXDIM,
        bilinear) -> sliding_window_inference -> Invertd (bilinear on the logits) -> argmax
swi:    swi segment --orientation RAS --spacing PIXDIM (the same window, overlap, blending)

Usage: realscan_agree.py SWI WORKDIR [--classes 6] [--roi 32] [--spacing 1.5,1.5,1.5]
Needs MONAI 1.4.0's source on PYTHONPATH and Debian's python3-torch, -numpy, -nibabel,
-onnx (see README.md). Prints the Dice of every class between the two label maps; exits
non-zero only when a step fails, never because of the numbers.
"""
import argparse
import os
import subprocess
import sys

import numpy as np


def make_volume(shape, seed=0):
    rng = np.random.default_rng(seed)
    idx = np.indices(shape, dtype=np.float32)
    vol = 0.1 * (idx[0] / shape[0]) - 0.05 * (idx[2] / shape[2])
    for _ in range(10):
        c = [rng.uniform(0.15, 0.85) * s for s in shape]
        r = [rng.uniform(0.08, 0.25) * s for s in shape]
        a = rng.uniform(-1.0, 1.0)
        vol += a * np.exp(-0.5 * sum(((idx[i] - c[i]) / r[i]) ** 2 for i in range(3)))
    vol += rng.normal(0.0, 0.03, size=shape).astype(np.float32)
    return vol.astype(np.float32)


def oblique_affine(spacing, degrees):
    """Voxel axes i -> P (posterior), j -> L, k -> S (a "PLS" volume), rotated about two axes."""
    t = np.radians(degrees)
    rz = np.array([[np.cos(t), -np.sin(t), 0], [np.sin(t), np.cos(t), 0], [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, np.cos(t / 2), -np.sin(t / 2)], [0, np.sin(t / 2), np.cos(t / 2)]])
    perm = np.array([[0, -1, 0], [-1, 0, 0], [0, 0, 1]], dtype=float)
    a = np.eye(4)
    a[:3, :3] = rz @ rx @ perm @ np.diag(spacing)
    a[:3, 3] = [40.0, -25.0, 12.0]
    return a


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("swi")
    ap.add_argument("work")
    ap.add_argument("--classes", type=int, default=6)
    ap.add_argument("--roi", type=int, default=32)
    ap.add_argument("--spacing", default="1.5,1.5,1.5")
    ap.add_argument("--shape", default="72,64,20")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    import nibabel as nib
    import torch
    from monai.inferers import sliding_window_inference
    from monai.networks.nets import UNet
    from monai.transforms import (Compose, EnsureChannelFirstd, Invertd, LoadImaged,
                                  Orientationd, Spacingd)
    torch.set_num_threads(2)
    torch.manual_seed(0)
    net = UNet(spatial_dims=3, in_channels=1, out_channels=a.classes, channels=(8, 16, 32),
               strides=(2, 2), num_res_units=1).eval()
    onnx_path = os.path.join(a.work, "unet.onnx")
    with torch.no_grad():
        torch.onnx.export(net, torch.zeros(1, 1, a.roi, a.roi, a.roi), onnx_path, opset_version=17,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    shape = tuple(int(s) for s in a.shape.split(","))
    aff = oblique_affine((0.9, 0.8, 3.0), 12.0)
    img = nib.Nifti1Image(make_volume(shape), aff)
    img.set_sform(aff, code=2)
    img.set_qform(aff, code=1)
    vol_path = os.path.join(a.work, "vol.nii.gz")
    img.to_filename(vol_path)
    print("input", shape, "axcodes", "".join(nib.aff2axcodes(nib.load(vol_path).affine)))

    pixdim = tuple(float(s) for s in a.spacing.split(","))
    pre = Compose([LoadImaged("image", image_only=True), EnsureChannelFirstd("image"),
                   Orientationd("image", axcodes="RAS"),
                   Spacingd("image", pixdim=pixdim, mode="bilinear")])
    d = pre({"image": vol_path})
    print("model grid (MONAI)", tuple(d["image"].shape[1:]))
    with torch.no_grad():
        logits = sliding_window_inference(d["image"][None], (a.roi,) * 3, 2, net, overlap=0.25,
                                          mode="gaussian")[0]
    d["pred"] = logits
    d["pred"].applied_operations = d["image"].applied_operations
    post = Invertd("pred", transform=pre, orig_keys="image", nearest_interp=False)
    inv = post(d)["pred"]
    monai_labels = torch.argmax(inv, 0).numpy()

    out = os.path.join(a.work, "swi.nii.gz")
    cmd = [a.swi, "segment", "--model", onnx_path, "--input", vol_path, "--output", out,
           "--orientation", "RAS", "--spacing", a.spacing, "--roi", str(a.roi), "--overlap",
           "0.25", "--mode", "gaussian", "--sw-batch", "2", "--force", "-q"]
    subprocess.run(cmd, check=True)
    swi_labels = np.asarray(nib.load(out).dataobj)
    if swi_labels.shape != monai_labels.shape:
        print(f"FAIL: shapes {swi_labels.shape} vs {monai_labels.shape}")
        return 1
    same = (swi_labels == monai_labels).mean()
    print(f"voxels equal: {same * 100:.3f} %")
    dices = []
    for c in range(a.classes):
        x, y = swi_labels == c, monai_labels == c
        n = x.sum() + y.sum()
        if n == 0:
            continue
        dc = 2.0 * (x & y).sum() / n
        dices.append(dc)
        print(f"class {c}: Dice {dc:.4f} ({y.sum()} voxels in MONAI's)")
    print(f"mean Dice {np.mean(dices):.4f}, min {np.min(dices):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
