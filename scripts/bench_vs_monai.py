#!/usr/bin/env python3
"""Benchmark: `swi segment` against MONAI's sliding_window_inference (the speed target).

The same 14-class MONAI UNet(spatial_dims=3, in_channels=1, out_channels=14,
channels=(16, 32, 64, 128), strides=(2, 2, 2), num_res_units=2), random weights (seed 0),
is run by MONAI 1.4 in PyTorch and, exported to ONNX (opset 17, batch dynamic), by
`swi segment`, on a 192x192x128 float32 volume: roi 96, overlap 0.25, gaussian,
sw_batch_size 2, 2 threads. Prints both times, both peak memories, the ratio (target
<= 0.5) and how many labels agree.

Needs Debian's python3-torch, python3-numpy, python3-nibabel and MONAI 1.4.0's source
in $MONAI_SRC (an empty folder):
    git clone https://github.com/Project-MONAI/MONAI && cd MONAI
    git archive 1.4.0 monai | tar -x -C "$MONAI_SRC"
    /usr/bin/python3 scripts/bench_vs_monai.py --swi build/swi --monai "$MONAI_SRC"

This is a benchmark, not a test: it takes about a minute and a half on 2 cores.
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time


def monai_run(args):
    """Child process: MONAI's inference, prints a JSON line."""
    sys.path.insert(0, args.monai)
    import numpy as np
    import nibabel as nib
    import torch
    from monai.inferers import sliding_window_inference
    from monai.networks.nets import UNet

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    net = UNet(spatial_dims=3, in_channels=1, out_channels=14, channels=(16, 32, 64, 128),
               strides=(2, 2, 2), num_res_units=2).eval()
    x = np.asarray(nib.load(args.volume).dataobj, dtype=np.float32)
    t0 = time.time()
    with torch.no_grad():
        y = sliding_window_inference(torch.from_numpy(x)[None, None], roi_size=args.roi,
                                     sw_batch_size=args.sw_batch, predictor=net,
                                     overlap=args.overlap, mode="gaussian")
        labels = torch.argmax(y, dim=1)[0].numpy().astype(np.uint8)
    dt = time.time() - t0
    np.save(args.labels_out, labels)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": dt, "peak_rss": rss}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--swi", required=True, help="the swi binary")
    ap.add_argument("--monai", required=True, help="folder holding MONAI 1.4.0's monai/ package")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--roi", type=int, default=96)
    ap.add_argument("--overlap", type=float, default=0.25)
    ap.add_argument("--sw-batch", type=int, default=2)
    ap.add_argument("--shape", default="192,192,128")
    ap.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--volume", help=argparse.SUPPRESS)
    ap.add_argument("--labels-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return monai_run(args)

    sys.path.insert(0, args.monai)
    import numpy as np
    import nibabel as nib
    import torch
    from monai.networks.nets import UNet

    work = args.work or tempfile.mkdtemp(prefix="swi-bench-")
    os.makedirs(work, exist_ok=True)
    shape = tuple(int(s) for s in args.shape.split(","))
    vol = os.path.join(work, "volume.nii.gz")
    model = os.path.join(work, "unet14.onnx")
    rng = np.random.default_rng(0)
    # a smooth random volume (a sum of blobs), float32
    g = np.stack(np.meshgrid(*[np.linspace(-1, 1, s, dtype=np.float32) for s in shape],
                             indexing="ij"))
    x = np.zeros(shape, np.float32)
    for _ in range(12):
        c = rng.uniform(-0.8, 0.8, 3).astype(np.float32)[:, None, None, None]
        r = rng.uniform(0.1, 0.4)
        x += rng.uniform(0.5, 2) * np.exp(-((g - c) ** 2).sum(0) / (2 * r * r))
    x += rng.normal(0, 0.05, shape).astype(np.float32)
    nib.save(nib.Nifti1Image(x.astype(np.float32), np.eye(4)), vol)

    torch.manual_seed(0)
    net = UNet(spatial_dims=3, in_channels=1, out_channels=14, channels=(16, 32, 64, 128),
               strides=(2, 2, 2), num_res_units=2).eval()
    r = args.roi
    torch.onnx.export(net, torch.zeros(1, 1, r, r, r), model, opset_version=17,
                      input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "n"}, "logits": {0: "n"}})

    # MONAI in its own process (its own peak memory)
    mon_labels = os.path.join(work, "monai_labels.npy")
    p = subprocess.run([sys.executable, __file__, "--child", "--swi", args.swi, "--monai",
                        args.monai, "--threads", str(args.threads), "--roi", str(r),
                        "--overlap", str(args.overlap), "--sw-batch", str(args.sw_batch),
                        "--volume", vol, "--labels-out", mon_labels],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("MONAI run failed:\n" + p.stderr)
    mon = json.loads(p.stdout.strip().splitlines()[-1])

    out = os.path.join(work, "swi_labels.nii.gz")
    cmd = [args.swi, "segment", "--model", model, "--input", vol, "--output", out, "--force",
           "--roi", str(r), "--overlap", str(args.overlap), "--mode", "gaussian",
           "--sw-batch", str(args.sw_batch), "--threads", str(args.threads)]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    swi_s = time.time() - t0
    if p.returncode != 0:
        sys.exit("swi failed:\n" + p.stderr)
    m = re.search(r"peak RSS ([0-9.]+) (\w+)", p.stderr)
    rss = p.stderr.strip().splitlines()[-1]
    a = np.load(mon_labels)
    b = np.asarray(nib.load(out).dataobj)
    agree = float((a == b).mean())
    print(f"volume {shape}, roi {r}, overlap {args.overlap}, gaussian, sw_batch {args.sw_batch}, "
          f"{args.threads} threads")
    print(f"MONAI 1.4 (PyTorch {torch.__version__}): {mon['seconds']:.1f} s, "
          f"peak RSS {mon['peak_rss'] / 2**30:.2f} GB")
    print(f"swi segment (whole command): {swi_s:.1f} s, peak RSS "
          f"{m.group(1) + ' ' + m.group(2) if m else '?'}")
    print(f"  {rss}")
    print(f"ratio swi / MONAI: {swi_s / mon['seconds']:.2f} (target <= 0.5); "
          f"labels agree on {100 * agree:.3f}% of voxels")


if __name__ == "__main__":
    main()
