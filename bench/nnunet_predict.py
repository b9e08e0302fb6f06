"""nnU-Net v2's own predictor on one case, for bench/nnunet_side_by_side.sh.

    python3 bench/nnunet_predict.py --model MODEL_DIR --output SEG.nii.gz --threads N \
        [--folds 0,1] [--no-mirroring] [--step 0.5] IN_0000.nii.gz [IN_0001.nii.gz ...]
    python3 bench/nnunet_predict.py --make-case OUT.nii.gz [--shape 160,160,80]

MODEL_DIR is a trained-model folder (plans.json, dataset.json, fold_N/). nnU-Net must be
importable (its environment script sets PYTHONPATH); modules it imports but never calls get
the empty stand-ins of tools/nnunet_shims.py. The inputs are read with nibabel and handed to
nnUNetPredictor.predict_single_npy_array in SimpleITK's axis order (array transposed,
spacing reversed); the label map is written back in the input's grid. torch uses N threads,
and so does nnU-Net's export (nnUNet_def_n_proc). --make-case writes a CT-like phantom
(tools/make_nnunet_models.body_phantom) at 0.8 x 0.8 x 2.5 mm, LPS.
"""

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def make_case(path, shape):
    import nibabel as nib
    import numpy as np
    import torch

    sys.path.insert(0, str(REPO / "tools"))
    from make_nnunet_models import body_phantom

    zooms = (0.8, 0.8, 2.5)
    img, _ = body_phantom(torch.Generator().manual_seed(2), list(reversed(shape)), list(reversed(zooms)), "ct")
    aff = np.diag([-zooms[0], -zooms[1], zooms[2], 1.0])
    ni = nib.Nifti1Image(img[0].numpy().transpose(2, 1, 0).astype(np.float32), aff)
    ni.set_qform(aff, code=1)
    ni.set_sform(aff, code=1)
    nib.save(ni, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="*")
    ap.add_argument("--model")
    ap.add_argument("--output")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--folds", default="0,1")
    ap.add_argument("--no-mirroring", action="store_true")
    ap.add_argument("--step", type=float, default=0.5)
    ap.add_argument("--make-case")
    ap.add_argument("--shape", default="160,160,80")
    a = ap.parse_args()
    if a.make_case:
        make_case(a.make_case, [int(x) for x in a.shape.split(",")])
        return
    if not (a.model and a.output and a.inputs):
        ap.error("--model, --output and at least one input are needed")
    os.environ["nnUNet_def_n_proc"] = str(a.threads)
    for k in ("nnUNet_raw", "nnUNet_preprocessed", "nnUNet_results"):
        os.environ.setdefault(k, "/nonexistent")
    sys.path.insert(0, str(REPO / "tools"))
    import nnunet_shims

    nnunet_shims.install()
    import nibabel as nib
    import numpy as np
    import torch
    from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor

    torch.set_num_threads(a.threads)
    t0 = time.time()
    imgs = [nib.load(f) for f in a.inputs]
    image = np.stack([np.asarray(i.dataobj, dtype=np.float32).transpose(2, 1, 0) for i in imgs])
    spacing = [float(z) for z in reversed(imgs[0].header.get_zooms()[:3])]
    p = nnUNetPredictor(tile_step_size=a.step, use_gaussian=True, use_mirroring=not a.no_mirroring,
                        perform_everything_on_device=False, device=torch.device("cpu"), verbose=False,
                        allow_tqdm=False)
    folds = tuple(f if f == "all" else int(f) for f in a.folds.split(","))
    p.initialize_from_trained_model_folder(a.model, folds, "checkpoint_final.pth")
    seg = p.predict_single_npy_array(image, {"spacing": spacing}, None, None, False)
    out = nib.Nifti1Image(np.ascontiguousarray(seg.transpose(2, 1, 0)).astype(np.uint8), imgs[0].affine)
    nib.save(out, a.output)
    print(f"nnunet_predict: {image.shape} -> {a.output} in {time.time() - t0:.2f} s "
          f"(labels {np.bincount(seg.ravel()).tolist()})")


if __name__ == "__main__":
    main()
