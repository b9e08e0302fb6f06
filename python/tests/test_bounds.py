"""swi.segment's inputs that disagree or would not be bounded (docs/robustness.md, "Bounded
before allocating"): a predictor's NaN scores refused as the command refuses a network's,
channels of one size but another grid refused naming both files, a FIFO named nnunet.json
refused by name instead of blocking the call (run in a child: a regression would hang)."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import swi
from conftest import REPO

nib = pytest.importorskip("nibabel")

if not swi._swi.HAVE_PIPELINE:
    pytest.skip("swi was built without the pipeline library (pipeline/)", allow_module_level=True)

needs_predictors = pytest.mark.skipif(not swi._swi.PIPELINE_PREDICTORS,
                                      reason="the pipeline library takes no caller predictors")

AFFINE = np.array([[0.8, 0.0, 0.0, 10.0], [0.0, 0.8, 0.0, 20.0], [0.0, 0.0, 2.5, 30.0], [0, 0, 0, 1.0]])


def volume(path, affine=AFFINE, shape=(20, 20, 12), seed=0):
    x = np.random.default_rng(seed).uniform(0, 1, shape).astype(np.float32)
    nib.save(nib.Nifti1Image(x, affine), str(path))
    return path


def constant(value):
    def predict(a):
        return np.full((a.shape[0], 2) + a.shape[2:], value, np.float32)
    return predict


@needs_predictors
def test_predictor_nan_scores_are_refused(tmp_path):
    v = volume(tmp_path / "v.nii.gz")
    out = tmp_path / "l.nii.gz"
    with pytest.raises(ValueError, match=r"the predictor returned NaN for the window at \(0, 0, 0\); its labels "
                                         "would be meaningless"):
        swi.segment(v, out, predictor=constant(np.nan), classes=2, roi=8)
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["v.nii.gz"]

    # NaN in one window only, in a numpy array the engine reads in place or through a copy
    def one_window(a):
        y = np.zeros((a.shape[0], 2) + a.shape[2:], np.float32)
        y[-1, 1, 3, 3, 3] = np.nan
        return y if a.shape[0] > 1 else y.astype(np.float64)  # float64: copied, not adopted

    for sw in (1, 3):
        with pytest.raises(ValueError, match="returned NaN for the window at"):
            swi.segment(v, predictor=one_window, classes=2, roi=8, sw_batch_size=sw)
    # finite scores (infinities too: argmax ranks them) still run
    r = swi.segment(v, predictor=constant(1.0), classes=2, roi=8)
    assert r.labels.shape == (20, 20, 12)


@needs_predictors
def test_channels_of_another_grid_are_refused(tmp_path):
    a = volume(tmp_path / "a.nii.gz")
    shifted = AFFINE.copy()
    shifted[:3, 3] += [100, 0, 0]
    swapped = AFFINE[:, [1, 0, 2, 3]]
    close = AFFINE.copy()
    close[:3, 3] += [2e-4, 0, 0]
    for name, aff, pattern in (("shifted", shifted, r"shifted.nii.gz: origin \(110, 20, 30\) mm lies 100 mm from "),
                               ("swapped", swapped, r"swapped.nii.gz: voxel axis i is \(0, 0.8, 0\) mm")):
        b = volume(tmp_path / (name + ".nii.gz"), aff, seed=1)
        with pytest.raises(Exception, match=pattern + ".*a.nii.gz.*channels must share one grid"):
            swi.segment([a, b], predictor=constant(1.0), classes=2, roi=8)
    b = volume(tmp_path / "close.nii.gz", close, seed=1)
    r = swi.segment([a, b], predictor=constant(1.0), classes=2, roi=8)
    assert r.labels.shape == (20, 20, 12)


def test_fifo_nnunet_card_is_refused(tmp_path):
    """swi.segment(model=DIR) with DIR/nnunet.json a FIFO: refused by name at once (it
    used to block in the card's open, where Ctrl-C was ignored)."""
    model = tmp_path / "model"
    model.mkdir()
    shutil.copy(REPO / "models" / "demo.onnx", model / "fold_0.onnx")
    os.mkfifo(model / "nnunet.json")
    v = volume(tmp_path / "v_0000.nii.gz")
    code = textwrap.dedent("""
        import sys, swi
        for model in (sys.argv[2], sys.argv[2] + "/nnunet.json"):
            for call in (swi.segment, swi.plan_job):
                try:
                    call(sys.argv[1], model=model)
                except Exception as e:
                    print(type(e).__name__, e)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    try:
        r = subprocess.run([sys.executable, "-c", code, str(v), str(model)], capture_output=True, text=True,
                           timeout=60, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail("swi.segment blocked on a FIFO named nnunet.json")
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 4, r.stdout + r.stderr
    for ln in lines:
        assert "nnunet.json: is a FIFO (named pipe), not a regular file" in ln, ln


@needs_predictors
def test_store_channels_of_another_grid_are_refused(tmp_path):
    """OME-Zarr channels of one size but another scale or translation are another place:
    refused naming both stores; the same grid runs."""
    zarr = pytest.importorskip("zarr")

    def ome(name, scale, translation):
        g = zarr.open_group(str(tmp_path / name), mode="w")
        g.create_dataset("0", data=np.random.default_rng(2).random((20, 16, 12)).astype(np.float32),
                         chunks=(10, 8, 6))
        g.attrs["multiscales"] = [{"version": "0.4", "axes": [{"name": n, "type": "space", "unit": "millimeter"}
                                                              for n in "zyx"],
                                   "datasets": [{"path": "0", "coordinateTransformations": [
                                       {"type": "scale", "scale": scale},
                                       {"type": "translation", "translation": translation}]}]}]
        return str(tmp_path / name)

    a = ome("a.ome.zarr", [2.0, 1.0, 1.0], [0.0, 0.0, 0.0])
    for name, scale, tr in (("moved.ome.zarr", [2.0, 1.0, 1.0], [0.0, 100.0, 0.0]),
                            ("finer.ome.zarr", [1.0, 1.0, 1.0], [0.0, 0.0, 0.0])):
        b = ome(name, scale, tr)
        with pytest.raises(Exception, match=name + r": its grid .*a\.ome\.zarr's .*channels must share one grid"):
            swi.segment([a, b], tmp_path / "l.zarr", predictor=constant(1.0), classes=2, roi=8)
        assert not (tmp_path / "l.zarr").exists()
    same = ome("same.ome.zarr", [2.0, 1.0, 1.0], [0.0, 0.0, 0.0])
    swi.segment([a, same], tmp_path / "l.zarr", predictor=constant(1.0), classes=2, roi=8)
    assert (tmp_path / "l.zarr").exists()
