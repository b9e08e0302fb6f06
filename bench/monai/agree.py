#!/usr/bin/env python3
"""Do swi and MONAI agree? Prints one JSON line; exit 1 if they do not.

  agree.py MONAI_SCORES.npy MONAI_LABELS.nii.gz SWI_SCORES.nii.gz SWI_LABELS.nii.gz \
           [SWI_LABELS_NO_SCORES.nii.gz ...] [--volume IN.nii.gz]

Scores: max and mean |swi - monai| and the max relative to max|monai|; fail above --tol
(default 1e-3; expect ~1e-5..1e-4 from float32 conv kernels of two libraries).
Labels: swi's label maps must equal MONAI's argmax except at near-ties, voxels where
MONAI's two best scores differ by less than --tie (default 1e-3, the e2e test's rule);
each swi label map (with and without --scores) is checked. Affine kept: swi's outputs
carry the input volume's sform/qform.
"""
import argparse
import json
import sys

import numpy as np
import nibabel as nib


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("monai_scores")
    ap.add_argument("monai_labels")
    ap.add_argument("swi_scores")
    ap.add_argument("swi_labels", nargs="+")
    ap.add_argument("--volume")
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--tie", type=float, default=1e-3)
    a = ap.parse_args()

    ref = np.load(a.monai_scores, mmap_mode="r")            # [i, j, k, c]
    s_img = nib.load(a.swi_scores)
    got = np.asarray(s_img.dataobj, dtype=np.float32)
    got = got.reshape(got.shape[:3] + (-1,))                 # [i, j, k, (1,) c]
    res = {"ok": True, "problems": []}
    if got.shape != ref.shape:
        res["ok"] = False
        res["problems"].append(f"scores shape swi {got.shape} vs monai {ref.shape}")
        print(json.dumps(res))
        return 1

    # chunked over i so memory stays ~2x one volume
    max_abs = 0.0
    sum_abs = 0.0
    n = 0
    ref_max = 0.0
    srt_gap = np.empty(ref.shape[:3], np.float32)
    ref_lab = np.empty(ref.shape[:3], np.int64)
    for i0 in range(0, ref.shape[0], 16):
        r = np.asarray(ref[i0:i0 + 16], dtype=np.float32)
        g = got[i0:i0 + 16]
        d = np.abs(g - r)
        max_abs = max(max_abs, float(d.max()))
        sum_abs += float(d.sum(dtype=np.float64))
        n += d.size
        ref_max = max(ref_max, float(np.abs(r).max()))
        part = np.partition(r, -2, axis=-1)
        srt_gap[i0:i0 + 16] = part[..., -1] - part[..., -2]
        ref_lab[i0:i0 + 16] = r.argmax(-1)
    res["scores_max_abs_diff"] = max_abs
    res["scores_mean_abs_diff"] = sum_abs / n
    res["scores_max_abs_monai"] = ref_max
    res["scores_max_rel_diff"] = max_abs / ref_max if ref_max else 0.0
    if not max_abs <= a.tol:
        res["ok"] = False
        res["problems"].append(f"scores differ by {max_abs:g} > {a.tol:g}")

    tie = srt_gap < a.tie
    res["voxels"] = int(tie.size)
    res["near_ties"] = int(tie.sum())
    m_lab = np.asarray(nib.load(a.monai_labels).dataobj)
    if not np.array_equal(m_lab.astype(np.int64), ref_lab):
        res["ok"] = False
        res["problems"].append("monai label map is not the argmax of monai's scores")
    res["classes_present"] = int(np.unique(ref_lab).size)
    res["labels"] = []
    aff = nib.load(a.volume).affine if a.volume else None
    for path in a.swi_labels + [a.swi_scores]:
        img = nib.load(path)
        if aff is not None and not np.allclose(img.affine, aff, atol=1e-5):
            res["ok"] = False
            res["problems"].append(f"{path}: affine differs from the input's")
        if path == a.swi_scores:
            continue
        lab = np.asarray(img.dataobj).astype(np.int64)
        diff = lab != ref_lab
        bad = diff & ~tie
        res["labels"].append({"file": path, "dtype": str(img.get_data_dtype()),
                              "differ": int(diff.sum()), "differ_not_tie": int(bad.sum()),
                              "max_gap_where_differ": float(srt_gap[diff].max()) if diff.any() else 0.0})
        if bad.any():
            res["ok"] = False
            res["problems"].append(f"{path}: {int(bad.sum())} labels differ away from ties")
    print(json.dumps(res))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
