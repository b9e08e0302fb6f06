"""swi.segment and swi.plan_job: the same job as the `swi` command (SWI_BINARY, set by
ctest) gives bitwise the same labels and scores; a torch module as the predictor gives the
engine's result; bad arguments, errors and Ctrl-C leave nothing behind."""

import os
import shutil
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import swi
from conftest import REPO

nib = pytest.importorskip("nibabel")

if not swi._swi.HAVE_PIPELINE:
    pytest.skip("swi was built without the pipeline library (pipeline/)", allow_module_level=True)

MODELS = REPO / "models"


def e2e_dir() -> Path:
    return Path(os.environ.get("SWI_GOLDEN_DIR") or REPO / "tests" / "data" / "golden") / "e2e"


VOLUME = e2e_dir() / "volume.nii.gz"


def swi_command() -> str:
    """The swi command with ONNX Runtime, or a skip naming what is missing."""
    b = os.environ.get("SWI_BINARY")
    if not b or not Path(b).is_file():
        pytest.skip("SWI_BINARY (the swi command, set by ctest) is needed to compare with")
    v = subprocess.run([b, "--version"], capture_output=True, text=True).stdout
    if "ONNX Runtime: not built in" in v:
        pytest.skip("the swi command was built without ONNX Runtime")
    return b


def run_cli(*args: str) -> None:
    r = subprocess.run([swi_command(), "segment", "-q", *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def voxels(path) -> np.ndarray:
    return np.asarray(nib.load(str(path)).dataobj)


@pytest.fixture
def ensemble(tmp_path):
    """The demo model with its card (roi, overlap, gaussian, class names) and the e2e U-Net:
    two members of the same interface."""
    m = tmp_path / "m"
    m.mkdir()
    shutil.copy(MODELS / "demo.onnx", m / "demo.onnx")
    shutil.copy(MODELS / "demo.json", m / "demo.json")
    return [str(m / "demo.onnx"), str(e2e_dir() / "unet.onnx")]


def test_real_scan_job_equals_the_command(tmp_path, ensemble):
    """Orientation, spacing, a two-member ensemble and the card: labels and scores in memory
    and the written files are bitwise the command's."""
    cli = tmp_path / "cli"
    py = tmp_path / "py"
    cli.mkdir()
    py.mkdir()
    flags = ["--orientation", "PIR", "--spacing", "1.5,1.5,1.5", "--threads", "2"]
    run_cli("--model", ensemble[0], "--model", ensemble[1], "--input", str(VOLUME), "--output",
            str(cli / "l.nii.gz"), "--scores", str(cli / "s.nii.gz"), *flags)
    want_l, want_s = voxels(cli / "l.nii.gz"), voxels(cli / "s.nii.gz")
    assert want_s.shape == want_l.shape + (4,)

    notes = []
    r = swi.segment(VOLUME, model=ensemble, orientation="PIR", spacing=1.5, threads=2, scores=True,
                    on_message=notes.append)
    assert list(r.messages) == notes
    assert isinstance(r, swi.Segmentation) and r.classes == 4
    assert r.labels.shape == want_l.shape and r.labels.dtype == want_l.dtype
    assert np.array_equal(r.labels, want_l)
    assert r.scores.shape == (4,) + want_l.shape and r.scores.dtype == np.float32
    assert np.array_equal(r.scores, np.moveaxis(want_s, -1, 0))
    np.testing.assert_allclose(r.affine, nib.load(str(VOLUME)).affine, rtol=0, atol=1e-5)
    assert r.stats["windows_total"] > 0 and r.outputs == {}

    # written as the command writes them: the same voxels, geometry and class tables
    r2 = swi.segment(str(VOLUME), py / "l.nii.gz", model=ensemble, orientation="PIR", spacing=(1.5, 1.5, 1.5),
                     threads=2, scores=py / "s.nii.gz")
    # every file written, the card's class tables beside the labels too
    assert r2.outputs == {"output": str(py / "l.nii.gz"), "scores": str(py / "s.nii.gz"),
                          "label_names": str(py / "l.label.txt"), "color_table": str(py / "l.ctbl")}
    assert np.array_equal(r2.labels, want_l) and r2.scores is None
    for name in ("l.nii.gz", "s.nii.gz"):
        a, b = nib.load(str(py / name)), nib.load(str(cli / name))
        assert np.array_equal(np.asarray(a.dataobj), np.asarray(b.dataobj)), name
        assert a.header.binaryblock == b.header.binaryblock, name
    assert sorted(p.name for p in py.iterdir()) == sorted(p.name for p in cli.iterdir())
    for extra in ("l.label.txt", "l.ctbl"):  # the card's class names
        assert (py / extra).read_bytes() == (cli / extra).read_bytes()

    # an existing output is refused without force, and left as it was
    before = (py / "l.nii.gz").read_bytes()
    with pytest.raises(OSError, match="l.nii.gz: already exists"):
        swi.segment(VOLUME, py / "l.nii.gz", model=ensemble, orientation="PIR", spacing=1.5)
    assert (py / "l.nii.gz").read_bytes() == before

    p = swi.plan_job(VOLUME, model=ensemble, orientation="PIR", spacing=1.5)
    assert p["members"] == 2 and p["classes"] == 4 and p["fits"] and p["unfit"] is None
    assert p["peak_bytes"] >= p["engine"]["bytes_peak"] > 0
    assert tuple(p["input_size"]) == want_l.shape
    assert tuple(p["engine"]["roi"]) == (32, 32, 32)  # the card's
    assert p["engine"]["windows_total"] == r.stats["windows_total"]
    cmd = subprocess.run([swi_command(), "plan", "--model", ensemble[0], "--model", ensemble[1], "--input",
                          str(VOLUME), *flags], capture_output=True, text=True)
    assert cmd.returncode == 0, cmd.stderr
    assert "PIR" in p["describe"] and "ensemble 2 models" in p["describe"]
    with pytest.raises(swi.BudgetError, match="smallest plan"):
        swi.plan_job(VOLUME, model=ensemble, orientation="PIR", spacing=1.5, max_memory="1M")
    lines = set(cmd.stdout.splitlines())
    assert [ln for ln in p["describe"].splitlines() if ln not in lines] == []  # as `swi plan` prints it


def test_statistics_equal_numpy_and_the_command(tmp_path, ensemble):
    """statistics=PATH writes the file --statistics writes and returns it; statistics=True
    returns it only; both as numpy computes them from the written labels and the input."""
    if not getattr(swi._swi, "PIPELINE_STATISTICS", 0):
        pytest.skip("the pipeline library gathers no statistics")
    import json

    run_cli("--model", ensemble[0], "--input", str(VOLUME), "--output", str(tmp_path / "c.nii.gz"),
            "--statistics", str(tmp_path / "c.json"), "--clip", "-0.5,0.5", "--threads", "2")
    r = swi.segment(VOLUME, tmp_path / "p.nii.gz", model=ensemble[0], clip=(-0.5, 0.5), threads=2,
                    statistics=tmp_path / "p.json")
    assert r.outputs["statistics"] == str(tmp_path / "p.json")
    assert set(r.outputs) == {"output", "statistics", "label_names", "color_table"}
    cli = json.loads((tmp_path / "c.json").read_text())["classes"]
    assert json.loads((tmp_path / "p.json").read_text())["classes"] == cli == r.statistics
    names = json.loads((MODELS / "demo.json").read_text())["classes"]
    assert list(r.statistics) == names
    img = nib.load(str(VOLUME))
    x = np.asarray(img.dataobj).astype(np.float32)  # as read: the clip does not reach them
    lab = voxels(tmp_path / "p.nii.gz")
    vox = abs(np.linalg.det(img.affine[:3, :3]))
    for c, name in enumerate(names):
        m = lab == c
        s = r.statistics[name]
        assert s["label-value"] == c and s["voxels"] == int(m.sum())
        assert s["volume_ml"] == pytest.approx(m.sum() * vox / 1000, rel=1e-6)
        if m.any():
            v = x[m].astype(np.float64)
            assert s["intensity"] == pytest.approx(v.mean(), rel=1e-6, abs=1e-9)
            assert s["intensity_std"] == pytest.approx(v.std(), rel=1e-6, abs=1e-9)
            assert (s["intensity_min"], s["intensity_max"]) == (pytest.approx(v.min()), pytest.approx(v.max()))
            idx = np.argwhere(m)
            assert s["bbox_voxels"] == [idx.min(0).tolist(), idx.max(0).tolist()]
    if getattr(swi._swi, "PIPELINE_MASKS", 0):  # masks=: one a class, listed with the outputs
        r3 = swi.segment(VOLUME, tmp_path / "m.nii.gz", model=ensemble[0], threads=2, masks=tmp_path / "masks")
        assert r3.outputs["masks"] == str(tmp_path / "masks")
        for c, name in enumerate(names[1:], 1):
            f = r3.outputs["mask:" + name]
            assert f == str(tmp_path / "masks" / (name + ".nii.gz"))
            assert np.array_equal(voxels(f), (r3.labels == c).astype(np.uint8))
        assert sorted(k for k in r3.outputs if k.startswith("mask:")) == sorted("mask:" + n for n in names[1:])
    r2 = swi.segment(VOLUME, model=ensemble[0], clip=(-0.5, 0.5), threads=2, statistics=True)
    assert r2.statistics == r.statistics and r2.outputs == {}
    assert swi.segment(VOLUME, model=ensemble[0], threads=2).statistics is None


def test_array_input_equals_the_file(tmp_path, ensemble):
    """A numpy array or torch tensor with affine= (or a MetaTensor, its affine implied) runs as
    the same voxels in a NIfTI file: bitwise the same labels, through orientation and spacing."""
    img = nib.load(str(VOLUME))
    x = np.asarray(img.dataobj).astype(np.float32)
    kw = dict(model=ensemble[0], orientation="PIR", spacing=1.5, threads=2)
    want = swi.segment(VOLUME, **kw).labels
    r = swi.segment(x, affine=img.affine, **kw)
    assert np.array_equal(r.labels, want) and np.allclose(r.affine, img.affine, atol=1e-5)
    t = swi.segment(torch.from_numpy(x.astype(np.float64)), affine=torch.from_numpy(img.affine), **kw)
    assert np.array_equal(t.labels, want)
    r4 = swi.segment(x[None], affine=img.affine, **kw)  # [channels, i, j, k], MONAI's channel first
    assert np.array_equal(r4.labels, want)
    out = swi.segment(x, tmp_path / "a.nii.gz", affine=img.affine, **kw)
    assert np.array_equal(voxels(tmp_path / "a.nii.gz"), want) and out.outputs["output"] == str(tmp_path / "a.nii.gz")
    try:
        from monai.data import MetaTensor
    except ImportError:
        MetaTensor = None
    if MetaTensor is not None:
        m = MetaTensor(torch.from_numpy(x)[None], affine=torch.from_numpy(img.affine))
    else:  # a tensor carrying its affine as a MetaTensor does
        m = torch.from_numpy(x)[None].as_subclass(torch.Tensor)
        m.affine = torch.from_numpy(img.affine)
    assert np.array_equal(swi.segment(m, **kw).labels, want)
    with pytest.raises(ValueError, match="affine"):
        swi.segment(VOLUME, affine=np.eye(4), **kw)
    with pytest.raises(ValueError, match="array input"):
        swi.segment(np.zeros((4, 4)), **kw)


@pytest.mark.parametrize("case", ["preprocessing", "window"])
def test_options_equal_the_command(tmp_path, case):
    """Each keyword is the command's flag: test-time mirroring, the intensity steps, the
    window's blending and padding, the batch and reuse give bitwise the command's scores."""
    model = str(e2e_dir() / "unet.onnx")
    if case == "preprocessing":
        flags = ["--tta", "--clip", "-1,2", "--scale", "-1,2,0,1", "--zscore", "--roi", "32", "--no-card"]
        kw = dict(tta=True, clip=(-1, 2), scale=(-1, 2, 0, 1), zscore=True, roi=32, no_card=True)
    else:
        flags = ["--mode", "gaussian", "--sigma-scale", "0.2", "--padding-mode", "replicate", "--overlap", "0.5",
                 "--sw-batch", "3", "--no-reuse", "--roi", "32", "--orientation", "RAS", "--spacing", "2.5,2.5,2.5",
                 "--softmax"]
        kw = dict(mode="gaussian", sigma_scale=0.2, padding="replicate", overlap=0.5, sw_batch_size=3,
                  no_reuse=True, roi=32, orientation="RAS", spacing=2.5, softmax=True)
    run_cli("--model", model, "--input", str(VOLUME), "--output", str(tmp_path / "l.nii"), "--scores",
            str(tmp_path / "s.nii"), "--threads", "2", *flags)
    r = swi.segment(VOLUME, model=model, threads=2, scores=True, **kw)
    assert np.array_equal(r.labels, voxels(tmp_path / "l.nii"))
    assert np.array_equal(r.scores, np.moveaxis(voxels(tmp_path / "s.nii"), -1, 0))
    if case == "window":
        assert r.stats["windows_reused"] == 0
        np.testing.assert_allclose(r.scores.sum(0), 1, rtol=1e-5)  # probabilities


def test_store_part_equals_the_command(tmp_path):
    """A Zarr input in parts (part 'init', then every I/N of a grid) into one store: bitwise
    the command's whole run."""
    zarr = pytest.importorskip("zarr")
    model = str(e2e_dir() / "unet.onnx")
    x = np.random.default_rng(3).random((70, 40, 36)).astype(np.float32)
    zarr.save_array(str(tmp_path / "in.zarr"), x, chunks=(32, 32, 32))
    common = dict(roi=32, overlap=0.25, mode="gaussian", sw_batch_size=2, threads=2)
    run_cli("--model", model, "--input", str(tmp_path / "in.zarr"), "--output", str(tmp_path / "whole.zarr"),
            "--roi", "32", "--overlap", "0.25", "--mode", "gaussian", "--sw-batch", "2", "--threads", "2")
    out = tmp_path / "parts.zarr"
    swi.segment(tmp_path / "in.zarr", out, model=model, part="init", part_grid=(2, 1, 1), **common)
    for i in range(2):
        r = swi.segment(tmp_path / "in.zarr", out, model=model, part=(i, 2), part_grid=(2, 1, 1), **common)
        assert r.labels is None and r.affine is None
    whole = zarr.open(str(tmp_path / "whole.zarr"), mode="r")[:]
    parts = zarr.open(str(out), mode="r")[:]
    assert parts.shape == x.shape and np.array_equal(parts, whole)
    assert not (out / ".swi-incomplete").exists()
    # a store's labels are not kept in memory: the output is required
    with pytest.raises(ValueError, match="output"):
        swi.segment(tmp_path / "in.zarr", model=model, part="1/2")
    # the output's chunks follow the input's, or chunks=; a store job's statistics come from its file
    assert zarr.open(str(tmp_path / "whole.zarr"), mode="r").chunks == (32, 32, 32)
    if getattr(swi._swi, "PIPELINE_CHUNKS", 0) and getattr(swi._swi, "PIPELINE_STATISTICS", 0):
        r = swi.segment(tmp_path / "in.zarr", tmp_path / "c.zarr", model=model, chunks=(16, 40, 9),
                        statistics=tmp_path / "c.json", **common)
        c = zarr.open(str(tmp_path / "c.zarr"), mode="r")
        assert c.chunks == (16, 40, 9) and np.array_equal(c[:], whole)
        assert r.outputs == {"output": str(tmp_path / "c.zarr"), "statistics": str(tmp_path / "c.json")}
        assert sum(v["voxels"] for v in r.statistics.values()) == whole.size
        with pytest.raises(ValueError, match="chunks"):
            swi.segment(tmp_path / "in.zarr", tmp_path / "d.zarr", model=model, chunks=(16, 40), **common)


def test_bad_arguments(tmp_path):
    model = str(e2e_dir() / "unet.onnx")
    with pytest.raises(ValueError, match="model= .* or predictor="):
        swi.segment(VOLUME)
    with pytest.raises(ValueError, match="orientation"):
        swi.segment(VOLUME, model=model, orientation="XYZ")
    with pytest.raises(ValueError, match="overlap"):
        swi.segment(VOLUME, model=model, overlap=1.0)
    with pytest.raises(ValueError, match="spacing"):
        swi.segment(VOLUME, model=model, spacing=(1.5, 0, 1.5))
    with pytest.raises(ValueError, match="part"):
        swi.segment(VOLUME, model=model, part=(3, 2))
    with pytest.raises(ValueError, match="classes="):
        swi.segment(VOLUME, model=model, classes=4)
    with pytest.raises(ValueError, match="softmax"):
        swi.segment(VOLUME, model=model, softmax=True)
    # the library's own checks: usage errors are ValueError, files that fail OSError
    with pytest.raises(ValueError, match="--shard"):
        swi.segment(VOLUME, tmp_path / "l.nii.gz", model=model, part=(0, 2))
    with pytest.raises(OSError, match="missing.nii.gz"):
        swi.segment(tmp_path / "missing.nii.gz", tmp_path / "l.nii.gz", model=model)
    with pytest.raises(OSError, match="no-model.onnx"):
        swi.segment(VOLUME, tmp_path / "l.nii.gz", model=tmp_path / "no-model.onnx")
    with pytest.raises(OSError, match="no-model.onnx"):
        swi.plan_job(VOLUME, model=tmp_path / "no-model.onnx")
    assert list(tmp_path.iterdir()) == []


def test_callback_exception_and_ctrl_c_leave_nothing(tmp_path):
    """An exception in a callback propagates unchanged; Ctrl-C (SIGINT while the network
    runs) cancels the job, raises KeyboardInterrupt, and no output is left."""
    model = str(e2e_dir() / "unet.onnx")

    class Boom(Exception):
        pass

    def boom(done, total):
        raise Boom("the progress bar failed")

    with pytest.raises(Boom, match="the progress bar failed"):
        swi.segment(VOLUME, tmp_path / "l.nii.gz", model=model, progress=boom)
    assert list(tmp_path.iterdir()) == []

    calls = []

    def interrupt(done, total):
        calls.append((done, total))
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        swi.segment(VOLUME, tmp_path / "l.nii.gz", model=model, overlap=0.75, progress=interrupt, threads=1)
    assert list(tmp_path.iterdir()) == []
    assert calls and calls[-1][0] < calls[-1][1]  # stopped before the last window


# ---- the caller's predictors (swi_job_spec.predictors) ----------------------------------
needs_predictors = pytest.mark.skipif(not swi._swi.PIPELINE_PREDICTORS,
                                      reason="the pipeline library takes no caller predictors "
                                             "(swi_job_spec.predictors): ONNX models only")


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Conv3d(1, 6, 3, padding=1)
        self.b = torch.nn.Conv3d(6, 3, 3, padding=1)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


@pytest.mark.skipif(bool(swi._swi.PIPELINE_PREDICTORS), reason="the pipeline library takes caller predictors")
def test_predictor_without_library_support_is_a_clear_error():
    with pytest.raises(RuntimeError, match="ONNX models only"):
        swi.segment(VOLUME, predictor=SmallNet().eval(), classes=3, roi=16)


@needs_predictors
def test_torch_module_equals_the_engine():
    """A torch module as the job's predictor (no model, no card): the labels and scores of
    swi.sliding_window_inference on the volume's voxels, bitwise; a numpy callable too, and
    an ensemble of two is the mean of its members."""
    net = SmallNet().eval()
    vol = np.asarray(nib.load(str(VOLUME)).dataobj).astype(np.float32)
    # a job lets the engine choose its window order (the smallest frontier), as swi segment does; MONAI's
    # order, sliding_window_inference's default, sums the windows otherwise (the last bits differ)
    with torch.no_grad():
        want = swi.sliding_window_inference(torch.from_numpy(vol[None, None]), 16, 2, net, 0.25, "gaussian",
                                            threads=2, order="auto").numpy()[0]
        want_l = swi.sliding_window_inference(torch.from_numpy(vol[None, None]), 16, 2, net, 0.25, "gaussian",
                                              reduce="argmax", threads=2, order="auto").numpy()[0, 0]
    r = swi.segment(VOLUME, predictor=net, classes=3, roi=16, overlap=0.25, mode="gaussian", sw_batch_size=2,
                    threads=2, scores=True)
    assert r.labels.dtype == np.uint8 and r.labels.shape == vol.shape
    assert np.array_equal(r.scores, want)
    assert np.array_equal(r.labels, want_l)

    def as_numpy(a):
        assert isinstance(a, np.ndarray) and a.dtype == np.float32 and a.shape[1:] == (1, 16, 16, 16)
        with torch.no_grad():
            return net(torch.from_numpy(a)).numpy()

    r2 = swi.segment(VOLUME, predictor=as_numpy, classes=3, roi=16, overlap=0.25, mode="gaussian",
                     sw_batch_size=2, threads=2)
    assert np.array_equal(r2.labels, want_l)

    def shifted(a):
        return as_numpy(a) + np.array([0.0, 0.5, -0.5], np.float32).reshape(1, 3, 1, 1, 1)

    r3 = swi.segment(VOLUME, predictor=[as_numpy, shifted], classes=3, roi=16, overlap=0.25, mode="gaussian",
                     sw_batch_size=2, threads=2, scores=True)
    mean = want + np.array([0.0, 0.25, -0.25], np.float32).reshape(3, 1, 1, 1)
    np.testing.assert_allclose(r3.scores, mean, rtol=1e-5, atol=1e-5)


@needs_predictors
def test_predictor_errors_leave_nothing(tmp_path):
    net = SmallNet().eval()
    with pytest.raises(ValueError, match="classes="):
        swi.segment(VOLUME, predictor=net, roi=16)
    with pytest.raises(TypeError, match="predictor"):
        swi.segment(VOLUME, predictor="net.pt", classes=3, roi=16)
    with pytest.raises(ValueError, match=r"expected \[1, 4, 16, 16, 16\]"):
        swi.segment(VOLUME, tmp_path / "l.nii.gz", predictor=net, classes=4, roi=16)

    class Boom(Exception):
        pass

    def boom(a):
        raise Boom("the network failed")

    with pytest.raises(Boom, match="the network failed"):
        swi.segment(VOLUME, tmp_path / "l.nii.gz", predictor=boom, classes=2, roi=16)
    assert list(tmp_path.iterdir()) == []


def test_model_without_onnx_runtime_is_a_clear_error(tmp_path):
    """Only where the library lacks ONNX Runtime: model= says so."""
    b = os.environ.get("SWI_BINARY")
    if not b or not Path(b).is_file():
        pytest.skip("SWI_BINARY (the swi command, set by ctest) tells whether ONNX Runtime is built in")
    if "ONNX Runtime: not built in" not in subprocess.run([b, "--version"], capture_output=True, text=True).stdout:
        pytest.skip("built with ONNX Runtime")
    with pytest.raises((ValueError, RuntimeError, OSError), match="ONNX Runtime"):
        swi.segment(VOLUME, model=str(MODELS / "demo.onnx"))
