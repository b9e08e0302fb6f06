#!/usr/bin/env python3
"""Build the benchmark network, export it to ONNX and make the benchmark volume.

Writes into OUTDIR:
  unet.pt        the state_dict (random weights, torch.manual_seed(SEED))
  unet.onnx      the same network, batch dimension dynamic, spatial 96^3 static
  volume.nii.gz  192x192x128 float32, deterministic (numpy seed), identity-ish affine

Needs MONAI's source on PYTHONPATH (monai/ of the 1.4.0 tag) and Debian's
python3-torch, python3-numpy, python3-nibabel.
"""
import argparse
import os
import sys

import numpy as np


def build_net(seed):
    import torch
    from monai.networks.nets import UNet
    torch.manual_seed(seed)
    net = UNet(spatial_dims=3, in_channels=1, out_channels=14,
               channels=(16, 32, 64, 128), strides=(2, 2, 2), num_res_units=2)
    return net.eval()


def make_volume(shape, seed):
    """Smooth blobs of varied intensity over a gentle background, plus noise: something
    with structure (so the random network's argmax is not one class everywhere) that
    gzip can still compress a little. Deterministic for a given seed."""
    rng = np.random.default_rng(seed)
    idx = np.indices(shape, dtype=np.float32)
    vol = 0.1 * (idx[0] / shape[0]) - 0.05 * (idx[2] / shape[2])
    for _ in range(12):
        c = [rng.uniform(0.15, 0.85) * s for s in shape]
        r = [rng.uniform(0.05, 0.2) * s for s in shape]
        a = rng.uniform(-1.0, 1.0)
        d2 = sum(((idx[i] - c[i]) / r[i]) ** 2 for i in range(3))
        vol += a * np.exp(-0.5 * d2)
    vol += rng.normal(0.0, 0.05, size=shape).astype(np.float32)
    return vol.astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shape", default="192,192,128")
    ap.add_argument("--roi", type=int, default=96)
    ap.add_argument("--opset", type=int, default=17)
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)

    import torch
    import nibabel as nib
    torch.set_num_threads(2)

    net = build_net(a.seed)
    torch.save(net.state_dict(), os.path.join(a.outdir, "unet.pt"))
    dummy = torch.zeros(2, 1, a.roi, a.roi, a.roi)
    onnx_path = os.path.join(a.outdir, "unet.onnx")
    with torch.no_grad():
        torch.onnx.export(net, dummy, onnx_path, opset_version=a.opset,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
                          do_constant_folding=True)
    # Structural check of the export (numerical agreement is checked end to end by agree.py).
    try:
        import onnx
        m = onnx.load(onnx_path)
        onnx.checker.check_model(m)
        print(f"onnx: opset {m.opset_import[0].version}, "
              f"input {[d.dim_param or d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]}",
              file=sys.stderr)
    except ImportError:
        pass

    shape = tuple(int(s) for s in a.shape.split(","))
    vol = make_volume(shape, a.seed)
    affine = np.diag([0.8, 0.8, 1.5, 1.0]).astype(np.float64)
    img = nib.Nifti1Image(vol, affine)
    img.set_data_dtype(np.float32)
    img.header.set_qform(affine, code=1)
    img.header.set_sform(affine, code=1)
    nib.save(img, os.path.join(a.outdir, "volume.nii.gz"))
    print(f"volume: {shape} float32, mean {vol.mean():.4f} sd {vol.std():.4f}", file=sys.stderr)


if __name__ == "__main__":
    main()
