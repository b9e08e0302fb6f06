"""Reference outputs of nnU-Net v2's own predictor (tests/data/nnunet-reference) for the
tiny model folders in tests/data/nnunet-models, on phantom cases they were never trained on.

    /usr/bin/python3 tools/make_nnunet_reference.py NNSRC tests/data/nnunet-reference

NNSRC holds source trees of nnU-Net and its dependencies, as `git archive` of these tags
(imported, never committed):
    NNSRC/nnUNet                          github.com/MIC-DKFZ/nnUNet v2.8.1
    NNSRC/dynamic-network-architectures   github.com/MIC-DKFZ/dynamic-network-architectures v0.4.4
    NNSRC/acvl_utils                      github.com/MIC-DKFZ/acvl_utils v0.2.5
    NNSRC/batchgenerators                 github.com/MIC-DKFZ/batchgenerators v0.25.3
Needs torch, numpy, scipy, scikit-image, pandas, scikit-learn, threadpoolctl, nibabel
(Debian: python3-skimage python3-pandas python3-sklearn python3-threadpoolctl python3-nibabel).
Modules nnU-Net imports but never calls on this path get empty stand-ins
(tools/nnunet_shims.py: torch._dynamo on torch < 2, SimpleITK, blosc2, batchgeneratorsv2,
seaborn); the versions and the stand-ins used are written to cases.json.

Every prediction goes through nnUNetPredictor.initialize_from_trained_model_folder (device
cpu, perform_everything_on_device False) and predict_single_npy_array(image, {'spacing':
...}, None, None, True): nnU-Net's preprocessing (transpose, crop to nonzero, normalisation,
resampling), its sliding window (Gaussian, mirroring, fold mean) and its export (probabilities
resampled back, cropping and transpose reverted, argmax or region thresholds).

Float32 variants (NAME_f32): nnU-Net v2.8.1 accumulates the Gaussian-weighted logits and
the weights in float16 (predicted_logits and n_predictions are torch.half, also on the CPU),
with compute_gaussian's default dtype float16; the per-fold blends it returns are float16, so
the sum and mean over folds and the export's resampling (resample_data_or_seg keeps its
input's dtype) are float16 too. A *_f32 variant is the same nnUNetPredictor with exactly that
switched to float32: for that predictor object only, the source of
nnUNetPredictor._internal_predict_sliding_window_return_logits is rewritten at run time
(F32_PATCH: `dtype=torch.half` -> `dtype=torch.float32` twice, the accumulators, and
`dtype=torch.float32` passed to compute_gaussian), compiled in a copy of its module's
namespace and bound to the predictor; nnU-Net's files are not touched and nothing else
changes (the fold sum/mean and the export follow the logits' dtype). The patch, the SHA-256 of the function's
original source and each variant's logits dtype (checked: float16 stock, float32 patched)
are written to cases.json, with each *_f32 variant's differences from its stock variant.

Axis convention ("reader order"): an input NIfTI holds an array a[i, j, k] (nibabel order);
nnU-Net got image = a.transpose(2, 1, 0) (channels stacked first: [C, k, j, i]) and spacing =
zooms reversed (z, y, x), which is what its SimpleITKIO reader gives for the same file.
seg.npy ([k, j, i], uint8) and probs.npy ([K, k, j, i], float32) are in that order as
nnU-Net returns them; transpose them back (seg.T, probs.transpose(0, 3, 2, 1)) to compare
with a NIfTI written in the input's grid.

Layout: CASE/input_0000.nii.gz (.. input_000C), CASE/labels.nii.gz (the phantom's truth),
CASE/CONFIG/preprocessed.npy (the network's input after nnU-Net's preprocessing, [C, ...]
in nnU-Net's transposed order), CASE/CONFIG/VARIANT/{seg.npy, probs.npy}, cases.json.
"""

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "tests" / "data" / "nnunet-models"
CT3D = "Dataset990_SwiTinyCT/nnUNetTrainer__nnUNetPlans__3d_fullres"
CT2D = "Dataset990_SwiTinyCT/nnUNetTrainer__nnUNetPlans__2d"
MR3D = "Dataset991_SwiTinyMR/nnUNetTrainer__nnUNetResEncUNetMPlans__3d_fullres"
SOURCES = {  # directory under NNSRC: (repository, tag)
    "nnUNet": ("MIC-DKFZ/nnUNet", "v2.8.1"),
    "dynamic-network-architectures": ("MIC-DKFZ/dynamic-network-architectures", "v0.4.4"),
    "acvl_utils": ("MIC-DKFZ/acvl_utils", "v0.2.5"),
    "batchgenerators": ("MIC-DKFZ/batchgenerators", "v0.25.3"),
}
VARIANTS = {  # name: (folds, use_mirroring, tile_step_size, accumulation dtype)
    "default": ((0, 1), True, 0.5, "float16"),
    "nomirror": ((0, 1), False, 0.5, "float16"),
    "fold0": ((0,), True, 0.5, "float16"),
    "default_f32": ((0, 1), True, 0.5, "float32"),
    "nomirror_f32": ((0, 1), False, 0.5, "float32"),
    "fold0_f32": ((0,), True, 0.5, "float32"),
}
# The float32 variants' patch: (text in nnUNetPredictor._internal_predict_sliding_window_return_logits,
# its replacement, how often it must occur there). Nothing else is changed.
F32_FUNCTION = "nnunetv2.inference.predict_from_raw_data.nnUNetPredictor._internal_predict_sliding_window_return_logits"
F32_PATCH = (
    ("dtype=torch.half", "dtype=torch.float32", 2),  # predicted_logits, n_predictions
    ("value_scaling_factor=10,", "value_scaling_factor=10, dtype=torch.float32,", 1),  # compute_gaussian (default float16)
)


def rotation(axis, degrees):
    c, s = math.cos(math.radians(degrees)), math.sin(math.radians(degrees))
    r = np.eye(3)
    a, b = [x for x in range(3) if x != axis]
    r[a, a], r[a, b], r[b, a], r[b, b] = c, -s, s, c
    return r


def affine(axes, zooms, rot, origin):
    """A NIfTI affine: voxel axis n runs along world direction axes[n] (a signed unit
    vector of RAS), scaled by zooms[n], then rotated by rot."""
    a = np.eye(4)
    a[:3, :3] = rot @ (np.array(axes, dtype=float).T * np.array(zooms, dtype=float))
    a[:3, 3] = origin
    return a


# The cases: nibabel-order shape and zooms (i, j, k), axis directions, which model runs them.
CASES = {
    "ct_sepz_lps_oblique": {
        "about": "CT-like, air background (no crop); reader spacing (3.6, 1.0, 0.9) is anisotropic "
                 "(ratio 4 > 3) with one low-resolution axis, so preprocessing resamples with "
                 "separate z (order 0 along z); LPS axes rotated 20 degrees about z",
        "kind": "ct", "shape": (48, 40, 14), "zooms": (0.9, 1.0, 3.6),
        "axes": [(-1, 0, 0), (0, -1, 0), (0, 0, 1)], "rot": rotation(2, 20.0), "origin": (30.0, 12.0, -40.0),
        "seed": 11, "runs": [(CT3D, ["default", "nomirror", "fold0", "default_f32"]), (CT2D, ["default", "default_f32"])],
    },
    "ct_nosepz_pir_oblique": {
        "about": "CT-like, air background (no crop); reader spacing (2.4, 2.4, 0.7) has two "
                 "low-resolution axes, so preprocessing resamples without separate z (order 3 "
                 "on all axes; the export back still uses separate z from the plans' spacing); "
                 "PIR axes rotated 15 degrees about x",
        "kind": "ct", "shape": (48, 16, 16), "zooms": (0.7, 2.4, 2.4),
        "axes": [(0, -1, 0), (0, 0, -1), (1, 0, 0)], "rot": rotation(0, 15.0), "origin": (-20.0, 35.0, 50.0),
        "seed": 12, "runs": [(CT3D, list(VARIANTS))],
    },
    "mr_crop_asl_oblique": {
        "about": "MR-like, two channels, zero outside the head so crop_to_nonzero cuts and "
                 "ZScoreNormalization uses the nonzero mask (use_mask_for_norm true in the "
                 "plans); transpose_forward [2, 0, 1]; region-based labels (sigmoid, "
                 "regions_class_order); no separate z either way; ASL axes rotated 10 degrees "
                 "about y",
        "kind": "mr", "shape": (40, 30, 24), "zooms": (1.1, 2.0, 1.5),
        "axes": [(0, 1, 0), (0, 0, 1), (-1, 0, 0)], "rot": rotation(1, 10.0), "origin": (5.0, -60.0, 22.0),
        "seed": 13, "runs": [(MR3D, list(VARIANTS))],
    },
}


def phantom(kind, shape, zooms, seed, margin=0):
    """The training phantom of tools/make_nnunet_models.py drawn on this grid (reader
    order, mm); an MR case gets a zero margin of MARGIN voxels per side for the crop."""
    import torch
    sys.path.insert(0, str(REPO / "tools"))
    from make_nnunet_models import body_phantom

    gen = torch.Generator().manual_seed(seed)
    inner = [s - 2 * margin for s in shape]
    img, lab = body_phantom(gen, inner, list(zooms), kind)
    if margin:
        pad = [margin] * 6
        img = torch.nn.functional.pad(img, pad)
        lab = torch.nn.functional.pad(lab, pad)
    return img.numpy().astype(np.float32), lab.numpy().astype(np.uint8)


def setup(nnsrc):
    nnsrc = Path(nnsrc).resolve()
    for d in ("batchgenerators", "acvl_utils", "dynamic-network-architectures", "nnUNet"):
        sys.path.insert(0, str(nnsrc / d))
    sys.path.insert(0, str(REPO / "tools"))
    import nnunet_shims
    return nnunet_shims.install()


def source_versions(nnsrc):
    out = {}
    for d, (repo, tag) in SOURCES.items():
        out[d] = {"repository": repo, "tag": tag}
    return out


def float32_accumulation(p):
    """Switch predictor P's sliding-window accumulators and Gaussian from float16 to float32
    (F32_PATCH applied to the source of F32_FUNCTION, compiled in a copy of its module's
    namespace, bound to P alone). Returns what was done, for cases.json."""
    import hashlib
    import inspect
    import textwrap
    import types
    from nnunetv2.inference import predict_from_raw_data as mod

    fn = mod.nnUNetPredictor._internal_predict_sliding_window_return_logits
    src = textwrap.dedent(inspect.getsource(fn))
    assert src.startswith("@torch.inference_mode()\ndef _internal_predict_sliding_window_return_logits("), src[:80]
    new = src
    for old, rep, count in F32_PATCH:
        assert new.count(old) == count, (old, new.count(old), count)
        new = new.replace(old, rep)
    ns = dict(vars(mod))
    exec(compile(new, f"{inspect.getsourcefile(fn)} ({fn.__name__}, float32 accumulation)", "exec"), ns)
    p._internal_predict_sliding_window_return_logits = types.MethodType(ns[fn.__name__], p)
    return {
        "function": F32_FUNCTION,
        "source_sha256": hashlib.sha256(src.encode()).hexdigest(),
        "replacements": [{"old": o, "new": r, "count": c} for o, r, c in F32_PATCH],
    }


def predictor(model, folds, mirroring, step, accumulation):
    import torch
    from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor

    p = nnUNetPredictor(tile_step_size=step, use_gaussian=True, use_mirroring=mirroring,
                        perform_everything_on_device=False, device=torch.device("cpu"), verbose=False,
                        verbose_preprocessing=False, allow_tqdm=False)
    p.initialize_from_trained_model_folder(str(MODELS / model), folds, "checkpoint_final.pth")
    seen = {}
    if accumulation == "float32":
        seen["patch"] = float32_accumulation(p)
    inner = p.predict_logits_from_preprocessed_data

    def recording(data):  # keeps the preprocessed input nnU-Net's sliding window got
        seen["data"] = np.asarray(data, dtype=np.float32).copy()
        logits = inner(data)
        seen["logits_dtype"] = str(logits.dtype).replace("torch.", "")
        return logits

    p.predict_logits_from_preprocessed_data = recording
    return p, seen


def dice(a, b):
    s = a.sum() + b.sum()
    return float(2 * (a & b).sum() / s) if s else 1.0


def make_case(name, spec, out, patches):
    import nibabel as nib
    from nnunetv2.preprocessing.resampling.default_resampling import determine_do_sep_z_and_axis

    cdir = out / name
    cdir.mkdir(parents=True, exist_ok=True)
    reader_shape = tuple(reversed(spec["shape"]))
    reader_spacing = [float(z) for z in reversed(spec["zooms"])]
    margin = 3 if spec["kind"] == "mr" else 0
    img, lab = phantom(spec["kind"], reader_shape, reader_spacing, spec["seed"], margin)
    aff = affine(spec["axes"], spec["zooms"], spec["rot"], spec["origin"])
    inputs = []
    for c in range(img.shape[0]):
        f = f"input_{c:04d}.nii.gz"
        ni = nib.Nifti1Image(img[c].transpose(2, 1, 0).astype(np.float32), aff)
        ni.set_qform(aff, code=1)
        ni.set_sform(aff, code=1)
        nib.save(ni, cdir / f)
        inputs.append(f"{out.name}/{name}/{f}")
    lni = nib.Nifti1Image(lab.transpose(2, 1, 0), aff)
    lni.set_qform(aff, code=1)
    lni.set_sform(aff, code=1)
    nib.save(lni, cdir / "labels.nii.gz")
    # what nnU-Net gets: read the files back the way its readers order them
    back = [nib.load(cdir / f.split("/")[-1]) for f in inputs]
    image = np.stack([np.asarray(b.dataobj, dtype=np.float32).transpose(2, 1, 0) for b in back])
    spacing = [float(z) for z in reversed(back[0].header.get_zooms()[:3])]
    entry = {
        "about": spec["about"],
        "inputs": inputs,
        "labels": f"{out.name}/{name}/labels.nii.gz",
        "nifti_shape": list(spec["shape"]),
        "nifti_zooms": [float(z) for z in spec["zooms"]],
        "affine": [[float(v) for v in row] for row in aff],
        "axcodes": "".join(nib.aff2axcodes(aff)),
        "reader_shape": list(image.shape[1:]),
        "reader_spacing": spacing,
        "runs": [],
    }
    for model, variants in spec["runs"]:
        plans = json.loads((MODELS / model / "plans.json").read_text())
        config = model.split("__")[-1]
        conf = plans["configurations"][config]
        tf = plans["transpose_forward"]
        sp_t = [spacing[i] for i in tf]
        target = conf["spacing"] if len(conf["spacing"]) == 3 else [sp_t[0], *conf["spacing"]]
        sep_in = determine_do_sep_z_and_axis(None, sp_t, target)
        sep_out = determine_do_sep_z_and_axis(None, target, sp_t)
        run = {
            "model": f"nnunet-models/{model}",
            "converted": f"nnunet-reference/models/{model.replace('/', '__')}",
            "configuration": config,
            "transpose_forward": tf,
            "spacing_transposed": sp_t,
            "target_spacing": target,
            "separate_z_preprocessing": [bool(sep_in[0]), None if sep_in[1] is None else int(sep_in[1])],
            "separate_z_export": [bool(sep_out[0]), None if sep_out[1] is None else int(sep_out[1])],
            "variants": [],
        }
        for v in variants:
            folds, mirroring, step, accumulation = VARIANTS[v]
            p, seen = predictor(model, folds, mirroring, step, accumulation)
            props = {"spacing": list(spacing)}
            t0 = time.time()
            seg, probs = p.predict_single_npy_array(image.copy(), props, None, None, True)
            dt = time.time() - t0
            vdir = cdir / config / v
            vdir.mkdir(parents=True, exist_ok=True)
            seg = np.ascontiguousarray(seg).astype(np.uint8)
            probs = np.ascontiguousarray(probs).astype(np.float32)
            assert seg.shape == image.shape[1:] and probs.shape[1:] == image.shape[1:], (seg.shape, probs.shape)
            assert seen["logits_dtype"] == accumulation, (v, seen["logits_dtype"])
            if "patch" in seen:
                patches.append(seen["patch"])
            np.save(vdir / "seg.npy", seg)
            np.save(vdir / "probs.npy", probs)
            if "preprocessed" not in run:
                np.save(cdir / config / "preprocessed.npy", seen["data"])
                run["preprocessed"] = f"{out.name}/{name}/{config}/preprocessed.npy"
                run["preprocessed_shape"] = list(seen["data"].shape)
                run["shape_before_cropping"] = [int(x) for x in props["shape_before_cropping"]]
                run["bbox_used_for_cropping"] = [[int(a), int(b)] for a, b in props["bbox_used_for_cropping"]]
                run["shape_after_cropping_and_before_resampling"] = [
                    int(x) for x in props["shape_after_cropping_and_before_resampling"]]
            regions = "regions_class_order" in p.dataset_json
            truth = {"fg": lab > 0}
            for k in range(1, int(lab.max()) + 1):
                truth[k] = (lab >= k) if regions else (lab == k)
            pred = {"fg": seg > 0}
            for k in range(1, int(lab.max()) + 1):
                pred[k] = (seg >= k) if regions else (seg == k)
            quality = {str(k): round(dice(pred[k], truth[k]), 4) for k in truth}
            run["variants"].append({
                "name": v,
                "folds": list(folds),
                "use_mirroring": mirroring,
                "tile_step_size": step,
                "use_gaussian": True,
                "accumulation": accumulation,
                "logits_dtype": seen["logits_dtype"],
                "seg": f"{out.name}/{name}/{config}/{v}/seg.npy",
                "probs": f"{out.name}/{name}/{config}/{v}/probs.npy",
                "probs_shape": list(probs.shape),
                "label_counts": np.bincount(seg.ravel(), minlength=probs.shape[0] + (1 if regions else 0)).tolist(),
                "dice_vs_phantom": quality,
                "seconds": round(dt, 3),
            })
            stock = v[:-len("_f32")] if v.endswith("_f32") else None
            if stock in variants:  # the precision's effect alone: same predictor, float16 vs float32
                s_seg = np.load(cdir / config / stock / "seg.npy")
                s_probs = np.load(cdir / config / stock / "probs.npy")
                run["variants"][-1]["vs_float16"] = {
                    "variant": stock,
                    "labels_differing": int((s_seg != seg).sum()),
                    "max_abs_prob_diff": float(np.abs(s_probs - probs).max()),
                    "share_prob_diff_over_1e-3": float(np.mean(np.abs(s_probs - probs) > 1e-3)),
                }
            print(f"{name} {config} {v}: labels {run['variants'][-1]['label_counts']} dice {quality} "
                  f"({dt:.2f} s) {run['variants'][-1].get('vs_float16', '')}", flush=True)
        entry["runs"].append(run)
    return entry


def main(nnsrc, out_dir):
    shims = setup(nnsrc)
    import torch

    torch.set_num_threads(1)  # deterministic reductions, and the machine is shared
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    patches = []
    cases = {name: make_case(name, spec, out, patches) for name, spec in CASES.items()}
    assert patches and all(x == patches[0] for x in patches), patches
    doc = {
        "about": "nnU-Net v2's nnUNetPredictor outputs on phantom cases; made by "
                 "tools/make_nnunet_reference.py (see its docstring for the axis convention). "
                 "Paths are relative to the directory above this file (tests/data).",
        "nnunet": source_versions(nnsrc),
        "torch": torch.__version__,
        "shims": sorted({s.split(".")[0] if not s.startswith("torch.") else s for s in shims}),
        "axis_order": "reader order: NIfTI array a[i,j,k] transposed to [k,j,i], spacing = zooms reversed",
        "float32_accumulation": {
            "about": "variants with accumulation float32 (NAME_f32) ran the same nnUNetPredictor with this "
                     "function's source rewritten at run time for that predictor alone (nnU-Net's files "
                     "untouched): its float16 accumulators (predicted_logits, n_predictions) and "
                     "compute_gaussian's float16 dtype become float32; the fold sum/mean and the export's "
                     "resampling follow the logits' dtype. vs_float16: the same settings' stock variant.",
            **patches[0],
        },
        "cases": cases,
    }
    (out / "cases.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
