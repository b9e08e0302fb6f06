"""swi segment --model DIR against nnU-Net v2's own nnUNetPredictor
(tests/data/nnunet-reference, made by tools/make_nnunet_reference.py): on cases the
models never saw, every run and variant (both folds with mirroring, mirroring off, fold 0,
the 2-D configuration) gives nnU-Net's labels (mean Dice >= 0.99, every class >= 0.98) on
the input's grid and affine.

Probabilities (--save-probabilities): stock nnU-Net accumulates the windows, the weights
and its Gaussian in float16 (docs/semantics-nnunet.md), swi in float32, so against the stock
variants they agree within 1e-3 on 99 % of the values only (a few near steep softmax slopes
differ by up to 0.03). The *_f32 variants are the same predictor with that accumulation
switched to float32 (cases.json "float32_accumulation"): against them swi's labels are
nnU-Net's voxel for voxel and every probability is within 1e-3 (measured: 1.1e-6).

`swi plan --tile-step-size` counts the windows of nnU-Net's compute_steps_for_sliding_window
on each case's model grid (tests/data/golden-nnunet/starts.txt, made with nnU-Net's function),
also at decimal tile steps such as 0.2, where the count is decided in the last bit."""

import json
import math
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

nib = pytest.importorskip("nibabel")

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
DOC = json.loads((DATA / "nnunet-reference" / "cases.json").read_text())
RUNS = [(name, run, v) for name, case in DOC["cases"].items() for run in case["runs"] for v in run["variants"]]


def swi_binary():
    b = os.environ.get("SWI_BINARY")
    if not b or not Path(b).is_file():
        pytest.skip("SWI_BINARY (set by ctest) is needed")
    if "ONNX Runtime: not built in" in subprocess.run([b, "--version"], capture_output=True, text=True).stdout:
        pytest.skip("swi without ONNX Runtime")
    return b


def dice(a, b, label):
    x, y = a == label, b == label
    n = x.sum() + y.sum()
    return 1.0 if n == 0 else 2.0 * (x & y).sum() / n


@pytest.mark.parametrize("name,run,variant", RUNS, ids=[f"{n}-{r['configuration']}-{v['name']}" for n, r, v in RUNS])
def test_labels_equal_nnunets(tmp_path, name, run, variant):
    diff = _segment_and_compare(tmp_path, name, run, variant, [])
    if variant.get("accumulation") == "float32":
        assert diff.max() <= 1e-3, (float(diff.max()), np.unravel_index(np.argmax(diff), diff.shape))


STOCK = [(name, run, v) for name, run, v in RUNS if v.get("accumulation") != "float32"]


@pytest.mark.parametrize("name,run,variant", STOCK, ids=[f"{n}-{r['configuration']}-{v['name']}" for n, r, v in STOCK])
def test_float16_sums_agree_with_stock(tmp_path, name, run, variant):
    """--accumulate float16 (nnU-Net's own accumulator, half the partial sums' memory) meets the
    same agreement with stock nnU-Net: Dice >= 0.99 / 0.98, 99 % of the probabilities within
    1e-3 (measured: at most 0.17 % beyond, largest 0.030), and never more than 0.05 apart."""
    diff = _segment_and_compare(tmp_path, name, run, variant, ["--accumulate", "float16"])
    assert diff.max() <= 0.05, float(diff.max())


def _segment_and_compare(tmp_path, name, run, variant, extra):
    """Segment one case as the variant says, check labels and probabilities; the |difference|
    of the probabilities."""
    swi = swi_binary()
    case = DOC["cases"][name]
    out = tmp_path / "seg.nii.gz"
    cmd = [swi, "segment", "--model", str(DATA / run["converted"]), "--output", str(out), "--threads", "2",
           "--folds", ",".join(str(f) for f in variant["folds"]), "--tile-step-size", str(variant["tile_step_size"]), "--save-probabilities"]
    for f in case["inputs"]:
        cmd += ["--input", str(DATA / f)]
    if not variant["use_mirroring"]:
        cmd.append("--disable-tta")
    cmd += extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 and "libzip" in r.stderr:
        pytest.skip("swi built without libzip (--save-probabilities)")
    assert r.returncode == 0, r.stderr
    img = nib.load(str(out))
    src = nib.load(str(DATA / case["inputs"][0]))
    assert img.shape == src.shape
    assert np.allclose(img.affine, src.affine, atol=1e-5)
    ours = np.asarray(img.dataobj).transpose(2, 1, 0)  # reader order, as nnU-Net's seg.npy
    ref = np.load(DATA / variant["seg"])
    labels = [k for k in range(1, len(variant["label_counts"])) if variant["label_counts"][k] or (ours == k).any()]
    d = [dice(ours, ref, k) for k in labels]
    assert min(d) >= 0.98, dict(zip(labels, d))
    assert np.mean(d) >= 0.99, dict(zip(labels, d))
    npz = [f for f in tmp_path.iterdir() if f.suffix == ".npz"]
    assert len(npz) == 1, npz
    probs = np.load(npz[0])["probabilities"]
    want = np.load(DATA / variant["probs"])
    assert probs.shape == want.shape
    diff = np.abs(probs - want)
    assert np.mean(diff > 1e-3) < 0.01, np.quantile(diff, [0.99, 1.0])
    if variant.get("accumulation") == "float32" and not extra:
        # nnU-Net's arithmetic in float32, as swi's: the same labels, every probability within 1e-3
        differing = int((ours != ref).sum())
        assert differing == 0, (differing, dict(zip(labels, d)))
    if os.environ.get("SWI_REPORT_AGREEMENT"):
        print(f"\nAGREE {name} {run['configuration']} {variant['name']} {' '.join(extra)}: dice mean {np.mean(d):.5f} "
              f"min {min(d):.5f} labels differ {int((ours != ref).sum())}/{ours.size} probs >1e-3 "
              f"{np.mean(diff > 1e-3):.5f} max {diff.max():.3g}")
    return diff


F32 = [(name, run, v) for name, run, v in RUNS if v.get("accumulation") == "float32"]


def test_float32_variants_are_recorded():
    """Every run has a float32 variant of its default, and cases.json says what was patched."""
    patch = DOC["float32_accumulation"]
    assert patch["function"].endswith("nnUNetPredictor._internal_predict_sliding_window_return_logits")
    assert {r["old"] for r in patch["replacements"]} == {"dtype=torch.half", "value_scaling_factor=10,"}
    for name, case in DOC["cases"].items():
        for run in case["runs"]:
            names = [v["name"] for v in run["variants"]]
            assert "default_f32" in names, (name, run["configuration"], names)
            for v in run["variants"]:
                assert v["logits_dtype"] == ("float32" if v["name"].endswith("_f32") else "float16"), v["name"]


@pytest.mark.parametrize("name,run,variant", F32, ids=[f"{n}-{r['configuration']}-{v['name']}" for n, r, v in F32])
def test_float32_variant_changes_only_precision(name, run, variant):
    """The float32 patch changes nnU-Net's sums, not its result: the stock variant's labels,
    probabilities apart by float16 amounts (not zero: the patch took effect)."""
    stock = next(v for v in run["variants"] if v["name"] == variant["name"][: -len("_f32")])
    assert (stock["folds"], stock["use_mirroring"], stock["tile_step_size"]) == (
        variant["folds"], variant["use_mirroring"], variant["tile_step_size"])
    assert np.array_equal(np.load(DATA / stock["seg"]), np.load(DATA / variant["seg"]))
    diff = np.abs(np.load(DATA / stock["probs"]) - np.load(DATA / variant["probs"]))
    assert 1e-4 < diff.max() < 0.05, diff.max()
    assert np.mean(diff > 1e-3) < 0.01, np.mean(diff > 1e-3)


def nnunet_start_counts():
    """(padded, patch, tile step) -> how many distinct starts nnU-Net's
    compute_steps_for_sliding_window gives (tools/make_nnunet_cases.py wrote them)."""
    counts = {}
    for line in (DATA / "golden-nnunet" / "starts.txt").read_text().splitlines():
        head, starts = line.split(":")
        padded, patch, step = head.split()
        counts[(int(padded), int(patch), float(step))] = len(starts.split())
    return counts


PLANS = [(name, run) for name, case in DOC["cases"].items() for run in case["runs"]]


@pytest.mark.parametrize("step", [0.1, 0.2, 0.3, 0.5, 0.7, 0.9])
@pytest.mark.parametrize("name,run", PLANS, ids=[f"{n}-{r['configuration']}" for n, r in PLANS])
def test_plan_counts_nnunets_windows(name, run, step):
    """The windows `swi plan --tile-step-size` counts are nnU-Net's on the case's model grid
    (nnU-Net's preprocessed input, padded to the patch): 550 at 0.2 on the CT case without
    separate z, where 1 - (1 - 0.2) as the step would give 600."""
    swi = swi_binary()
    card = json.loads((DATA / run["converted"] / "nnunet.json").read_text())
    grid = np.load(DATA / run["preprocessed"], mmap_mode="r").shape[1:]
    window = card["window"]
    counts = nnunet_start_counts()
    want = math.prod(counts[(max(s, w), w, step)] for s, w in zip(grid, window))
    cmd = [swi, "plan", "--model", str(DATA / run["converted"]), "--tile-step-size", str(step)]
    for f in DOC["cases"][name]["inputs"]:
        cmd += ["--input", str(DATA / f)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"model grid {grid[0]} x {grid[1]} x {grid[2]}" in r.stdout, r.stdout
    got = re.search(r"tile step ([0-9.]+), .*: (\d+) windows", r.stdout)
    assert got and float(got.group(1)) == step and int(got.group(2)) == want, (r.stdout, want)
