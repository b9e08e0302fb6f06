#!/usr/bin/env python3
"""MONAI's side of the benchmark: the same network in PyTorch, the same sliding window.

Reads WORK/unet.pt and WORK/volume.nii.gz (made by make_inputs.py; --volume for another),
runs monai.inferers.sliding_window_inference(roi 96, overlap 0.25, gaussian, sw_batch_size 2)
under torch.no_grad() with torch.set_num_threads(THREADS), writes the argmax label map
as uint8 NIfTI (the input's affine) and prints one JSON line with the clocks:
  load_s   nibabel read + tensor
  swi_s    the sliding_window_inference call alone (what the 41.6 s baseline measured)
  post_s   argmax + label NIfTI write
  total_s  from the first line of this script (after the interpreter started) to the end
  peak_rss_mb  resource.getrusage(RUSAGE_SELF).ru_maxrss after the labels are written
--scores FILE also saves the blended scores [i, j, k, class] as float32 .npy, after the
clocks and the peak RSS were taken.
"""
import time
T0 = time.perf_counter()
import argparse
import json
import os
import resource
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("work")
    ap.add_argument("--labels", required=True, help="output label map (.nii.gz)")
    ap.add_argument("--scores", help="also save the scores as .npy [i,j,k,c] (untimed)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--roi", type=int, default=96)
    ap.add_argument("--overlap", type=float, default=0.25)
    ap.add_argument("--mode", default="gaussian")
    ap.add_argument("--sw-batch", type=int, default=2)
    ap.add_argument("--volume", default="volume.nii.gz", help="input in WORK (default volume.nii.gz)")
    ap.add_argument("--scale-range", help="A,B: ScaleIntensityRange(A, B, 0, 1, clip=True) first "
                                          "(timed with the load), as CT models do")
    a = ap.parse_args()

    import numpy as np
    import torch
    import nibabel as nib
    from monai.inferers import sliding_window_inference
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from make_inputs import build_net

    torch.set_num_threads(a.threads)
    net = build_net(0)
    net.load_state_dict(torch.load(os.path.join(a.work, "unet.pt")))
    net.eval()
    t_imp = time.perf_counter()

    t = time.perf_counter()
    img = nib.load(os.path.join(a.work, a.volume))
    vol = np.asarray(img.dataobj, dtype=np.float32)
    if a.scale_range:
        from monai.transforms import ScaleIntensityRange
        lo, hi = (float(v) for v in a.scale_range.split(","))
        vol = np.asarray(ScaleIntensityRange(lo, hi, 0.0, 1.0, clip=True)(vol), dtype=np.float32)
    x = torch.from_numpy(np.ascontiguousarray(vol))[None, None]
    load_s = time.perf_counter() - t

    t = time.perf_counter()
    with torch.no_grad():
        out = sliding_window_inference(x, roi_size=(a.roi,) * 3, sw_batch_size=a.sw_batch,
                                       predictor=net, overlap=a.overlap, mode=a.mode)
    swi_s = time.perf_counter() - t
    rss_inf = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

    t = time.perf_counter()
    lab = torch.argmax(out[0], dim=0).to(torch.uint8).numpy()
    li = nib.Nifti1Image(lab, img.affine, img.header)
    li.set_data_dtype(np.uint8)
    li.header.set_slope_inter(1, 0)
    nib.save(li, a.labels)
    post_s = time.perf_counter() - t
    total_s = time.perf_counter() - T0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
                      "import_s": round(t_imp - T0, 3), "load_s": round(load_s, 3),
                      "swi_s": round(swi_s, 3), "post_s": round(post_s, 3),
                      "total_s": round(total_s, 3), "peak_rss_inference_mb": round(rss_inf, 1),
                      "peak_rss_mb": round(rss, 1), "out_shape": list(out.shape)}))
    if a.scores:
        np.save(a.scores, np.ascontiguousarray(out[0].permute(1, 2, 3, 0).numpy()))


if __name__ == "__main__":
    main()
