"""tests/data/nnunet-reference (nnU-Net v2's own predictor on phantom cases, made by
tools/make_nnunet_reference.py): every file cases.json names exists, and the stored
outputs agree with the input NIfTI's grid and with each other, without nnU-Net."""

import json
from pathlib import Path

import numpy as np
import pytest

nib = pytest.importorskip("nibabel")

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
REF = DATA / "nnunet-reference"
DOC = json.loads((REF / "cases.json").read_text())
RUNS = [(name, run, v) for name, case in DOC["cases"].items() for run in case["runs"] for v in run["variants"]]


def test_versions_recorded():
    assert DOC["nnunet"]["nnUNet"]["tag"].startswith("v2.")
    assert DOC["cases"]


@pytest.mark.parametrize("name", sorted(DOC["cases"]))
def test_inputs_match_the_case(name):
    case = DOC["cases"][name]
    for f in case["inputs"] + [case["labels"]]:
        img = nib.load(DATA / f)
        assert list(img.shape) == case["nifti_shape"]
        # reader order: the NIfTI array transposed, zooms reversed
        assert list(img.shape[::-1]) == case["reader_shape"]
        assert np.allclose(img.header.get_zooms()[:3][::-1], case["reader_spacing"])
        assert np.allclose(img.affine, case["affine"], atol=1e-5)
        assert "".join(nib.aff2axcodes(img.affine)) == case["axcodes"]
    for run in case["runs"]:
        assert (DATA / run["model"] / "plans.json").is_file()
        assert (DATA / run["converted"] / "nnunet.json").is_file()
        pre = np.load(DATA / run["preprocessed"], mmap_mode="r")
        assert list(pre.shape) == run["preprocessed_shape"]
        assert pre.shape[0] == len(case["inputs"])
        sbc = [run["shape_before_cropping"][i] for i in range(3)]
        assert sorted(sbc) == sorted(case["reader_shape"])
        for (lo, hi), n in zip(run["bbox_used_for_cropping"], sbc):
            assert 0 <= lo < hi <= n


@pytest.mark.parametrize("name,run,variant", RUNS, ids=[f"{n}-{r['configuration']}-{v['name']}" for n, r, v in RUNS])
def test_outputs_consistent(name, run, variant):
    case = DOC["cases"][name]
    seg = np.load(DATA / variant["seg"])
    probs = np.load(DATA / variant["probs"])
    assert seg.dtype == np.uint8 and probs.dtype == np.float32
    assert list(seg.shape) == case["reader_shape"]
    assert list(probs.shape) == variant["probs_shape"] and list(probs.shape[1:]) == case["reader_shape"]
    assert np.isfinite(probs).all() and probs.min() >= 0 and probs.max() <= 1
    dataset = json.loads((DATA / run["model"] / "dataset.json").read_text())
    if "regions_class_order" in dataset:
        # regions: each label where its region's probability passes 0.5, later ones on top
        want = np.zeros(seg.shape, np.uint8)
        for k, label in enumerate(dataset["regions_class_order"]):
            want[probs[k] > 0.5] = label
        close = np.zeros(seg.shape, bool)
        for k in range(probs.shape[0]):
            close |= np.abs(probs[k] - 0.5) < 1e-6
    else:
        assert np.allclose(probs.sum(0), 1, atol=1e-4)
        want = probs.argmax(0)
        top = np.sort(probs, 0)
        close = top[-1] - top[-2] < 1e-6
    assert (seg == want)[~close].all()
    assert np.bincount(seg.ravel(), minlength=len(variant["label_counts"])).tolist() == variant["label_counts"]
    # the tiny models really segment the phantom
    assert variant["dice_vs_phantom"]["fg"] > 0.85
