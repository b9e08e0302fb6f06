"""swi segment --model NNUNET_DIR (and swi.segment(model=NNUNET_DIR)): nnU-Net's whole
inference in C, on the converted test models (tests/data/nnunet-models), against a numpy /
PyTorch restatement of nnUNetPredictor (nnunet_pyref.py) on cases at the configurations'
spacing: labels (Dice), probabilities (--save-probabilities), the input's shape and affine
kept, mirroring off, one fold, the 2-D configuration, the reader's reorientation, folder
mode with nnU-Net's naming, and the refusals with their messages."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
nib = pytest.importorskip("nibabel")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nnunet_pyref as pyref  # noqa: E402
from swi import _nnunet_convert as conv  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "nnunet-models"
CT3D = "Dataset990_SwiTinyCT/nnUNetTrainer__nnUNetPlans__3d_fullres"
CT2D = "Dataset990_SwiTinyCT/nnUNetTrainer__nnUNetPlans__2d"
MR3D = "Dataset991_SwiTinyMR/nnUNetTrainer__nnUNetResEncUNetMPlans__3d_fullres"


def swi_binary():
    b = os.environ.get("SWI_BINARY")
    if not b or not Path(b).is_file():
        pytest.skip("SWI_BINARY (set by ctest) is needed")
    v = subprocess.run([b, "--version"], capture_output=True, text=True).stdout
    if "ONNX Runtime: not built in" in v:
        pytest.skip("swi without ONNX Runtime")
    return b


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("nnunet-dirs")
    out = {}
    for m in (CT3D, CT2D, MR3D):
        d = root / m.replace("/", "__")
        conv.convert(str(DATA / m), str(d))
        out[m] = d
    return out


def phantom(shape, sp, rad, seed, base, sd, margin=3):
    """Spheres (label 1, a core 2) brighter than the rest, zero background around them (the crop)."""
    rng = np.random.default_rng(seed)
    idx = np.meshgrid(*[np.arange(s) for s in shape], indexing="ij")
    r = np.sqrt(sum(((i - s / 2) * p) ** 2 for i, s, p in zip(idx, shape, sp)))
    y = np.zeros(shape, np.uint8)
    y[r < rad] = 1
    y[r < rad / 2] = 2
    x = base + sd * (y + rng.normal(0, 0.3, shape))
    x[:margin] = 0
    x[-margin:] = 0
    x[:, :margin] = 0
    return x.astype(np.float32)


def save(path, x, affine):
    nib.save(nib.Nifti1Image(x, affine), str(path))
    return path


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    d = tmp_path_factory.mktemp("nnunet-cases")
    # CT: the configuration's spacing 3 x 0.8 x 0.8 (k, j, i) is (0.8, 0.8, 3) along (i, j, k)
    aff = np.diag([0.8, 0.8, 3.0, 1.0])
    aff[:3, 3] = [-10, 5, 20]
    ct = save(d / "ct_0000.nii.gz", phantom((48, 44, 14), (0.8, 0.8, 3.0), 12, 1, 98.6, 57.2), aff)
    # the same voxels with an oblique, non-RAS affine (LPS-ish with a rotation): SimpleITKIO ignores it
    th = 0.3
    rot = np.array([[-np.cos(th), -np.sin(th), 0], [np.sin(th), -np.cos(th), 0], [0, 0, 1]])
    aff2 = np.eye(4)
    aff2[:3, :3] = rot @ np.diag([0.8, 0.8, 3.0])
    aff2[:3, 3] = [30, -4, 7]
    ct_obl = save(d / "obl_0000.nii.gz", np.asarray(nib.load(str(ct)).dataobj), aff2)
    # MR: transpose_forward [2, 0, 1], spacing [1, 1.2, 2.4] -> (i, j, k) = (1.0, 2.4, 1.2)
    sp = (1.0, 2.4, 1.2)
    x0 = phantom((40, 16, 32), sp, 14, 2, 0.0, 1.0)
    x1 = x0 + np.random.default_rng(5).normal(0, 0.3, x0.shape).astype(np.float32)
    x0 = np.where(x0 == 0, 0, x0 + 3).astype(np.float32)
    x1 = np.where(x0 == 0, 0, x1 + 3).astype(np.float32)
    x0[18:22, 6:9, 14:18] = x1[18:22, 6:9, 14:18] = 0  # a hole: binary_fill_holes puts it in the z-score's mask
    aff = np.diag(list(sp) + [1.0])
    mr = [save(d / "mr_0000.nii.gz", x0, aff), save(d / "mr_0001.nii.gz", x1, aff)]
    return {"ct": [ct], "obl": [ct_obl], "mr": mr}


def dice(a, b, c):
    s = (a == c).sum() + (b == c).sum()
    return 1.0 if s == 0 else 2 * ((a == c) & (b == c)).sum() / s


def run(swi, *args, ok=True):
    r = subprocess.run([swi, *map(str, args)], capture_output=True, text=True, timeout=300)
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def check_against_pyref(model_folder, model_dir, inputs, out, folds=None, mirroring=True, label=""):
    imgs = [nib.load(str(p)) for p in inputs]
    want_seg, want_p = pyref.predict(model_folder, model_dir, [np.asarray(i.dataobj, np.float32) for i in imgs],
                                     folds=folds, mirroring=mirroring, affine=imgs[0].affine)
    got = nib.load(str(out))
    seg = np.asarray(got.dataobj)
    assert seg.shape == imgs[0].shape
    assert np.allclose(got.affine, imgs[0].affine, atol=1e-5)
    labels = [c for c in np.union1d(np.unique(seg), np.unique(want_seg)) if c != 0]
    ds = [dice(seg, want_seg, c) for c in labels]
    probs = np.load(str(out).replace(".nii.gz", ".npz"))["probabilities"]
    assert probs.dtype == np.float32 and probs.shape == want_p.shape
    dp = float(np.abs(probs - want_p).max())
    print(f"{label}: Dice per class {[round(float(x), 4) for x in ds]}, max |prob diff| {dp:.3g}")
    assert not ds or (np.mean(ds) >= 0.99 and min(ds) >= 0.98)
    assert dp <= 1e-3
    return ds, dp


VARIANTS = [("default", [], None, True), ("no-mirroring", ["--disable-tta"], None, True),
            ("one-fold", ["--folds", "1"], ["1"], True)]


@pytest.mark.parametrize("name,flags,folds,_", VARIANTS)
@pytest.mark.parametrize("case,model", [("ct", CT3D), ("mr", MR3D), ("obl", CT3D), ("ct", CT2D)])
def test_segment_equals_pyref(tmp_path, models, cases, case, model, name, flags, folds, _):
    swi = swi_binary()
    ins = []
    for p in cases[case]:
        ins += ["--input", p]
    out = tmp_path / "seg.nii.gz"
    run(swi, "segment", "-q", "--model", models[model], *ins, "--output", out, "--save-probabilities", *flags)
    assert (tmp_path / "seg.json").is_file()
    props = json.loads((tmp_path / "seg.json").read_text())
    assert props["shape_before_cropping"] == list(nib.load(str(cases[case][0])).shape[::-1])
    check_against_pyref(DATA / model, models[model], cases[case], out, folds=folds,
                        mirroring="--disable-tta" not in flags, label=f"{case} {model.split('__')[-1]} {name}")


def test_reorient_reader(tmp_path, models, cases):
    """NibabelIOWithReorient: the case reoriented to RAS first, the labels written back."""
    swi = swi_binary()
    d = tmp_path / "model"
    shutil.copytree(models[CT3D], d)
    card = json.loads((d / "nnunet.json").read_text())
    card["image_reader_writer"] = "NibabelIOWithReorient"
    (d / "nnunet.json").write_text(json.dumps(card))
    out = tmp_path / "seg.nii.gz"
    run(swi, "segment", "-q", "--model", d, "--input", cases["obl"][0], "--output", out, "--save-probabilities")
    check_against_pyref(DATA / CT3D, d, cases["obl"], out, label="obl reoriented")


def test_python_segment(tmp_path, models, cases):
    import swi

    if not getattr(swi._swi, "PIPELINE_NNUNET", 0):
        pytest.skip("a pipeline library without nnU-Net jobs")
    out = tmp_path / "seg.nii.gz"
    r = swi.segment([str(p) for p in cases["mr"]], str(out), model=str(models[MR3D]), save_probabilities=True,
                    folds=[0, 1], statistics=tmp_path / "stats.json", masks=tmp_path / "masks")
    assert r.labels.shape == (40, 16, 32)
    # --statistics: every class over the whole grid (the crop box's outside too), as numpy has them
    assert r.outputs["statistics"] == str(tmp_path / "stats.json")
    img = nib.load(str(cases["mr"][0]))
    x = np.asarray(img.dataobj).astype(np.float32).astype(np.float64)
    assert sum(v["voxels"] for v in r.statistics.values()) == r.labels.size
    for name, v in r.statistics.items():  # --masks: one a class, the background left out
        if v["label-value"]:
            f = r.outputs["mask:" + name]
            assert np.array_equal(np.asarray(nib.load(f).dataobj), (r.labels == v["label-value"]).astype(np.uint8))
    for name, v in r.statistics.items():
        m = r.labels == v["label-value"]
        assert v["voxels"] == int(m.sum()), name
        if m.any():
            assert v["intensity"] == pytest.approx(x[m].mean(), rel=1e-6, abs=1e-9), name
            assert v["intensity_std"] == pytest.approx(x[m].std(), rel=1e-6, abs=1e-9), name
            assert v["intensity_max"] == pytest.approx(x[m].max()), name
    assert np.array_equal(r.labels, np.asarray(nib.load(str(out)).dataobj))
    # every file written is listed: nnU-Net's probabilities and properties beside the labels
    assert r.outputs["output"] == str(out)
    assert r.outputs["probabilities"] == str(tmp_path / "seg.npz") and (tmp_path / "seg.npz").is_file()
    assert r.outputs["properties"] == str(tmp_path / "seg.json") and (tmp_path / "seg.json").is_file()
    listed = set(r.outputs.values())
    assert all(str(f) in listed for f in tmp_path.iterdir() if f.is_file()), (r.outputs, list(tmp_path.iterdir()))
    assert all(str(f) in listed for f in (tmp_path / "masks").iterdir())
    check_against_pyref(DATA / MR3D, models[MR3D], cases["mr"], out, label="mr python")
    p = swi.plan_job([str(p) for p in cases["mr"]], model=str(models[MR3D]))
    assert p["members"] == 2 and "crop to the nonzero box" in p["describe"]


def test_python_statistics_and_masks_by_the_dataset_names(tmp_path, models, cases):
    # a label model: the dataset's label names name the statistics and the masks
    import swi

    if not getattr(swi._swi, "PIPELINE_MASKS", 0) or not getattr(swi._swi, "PIPELINE_NNUNET", 0):
        pytest.skip("a pipeline library without nnU-Net jobs, statistics or masks")
    r = swi.segment(str(cases["obl"][0]), str(tmp_path / "c.nii.gz"), model=str(models[CT3D]), statistics=True,
                    masks=tmp_path / "m")
    assert list(r.statistics) == ["background", "liver", "tumour"]
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["liver.nii.gz", "tumour.nii.gz"]
    for c, name in ((1, "liver"), (2, "tumour")):
        m = np.asarray(nib.load(str(tmp_path / "m" / (name + ".nii.gz"))).dataobj)
        assert np.array_equal(m, (r.labels == c).astype(np.uint8)) and r.statistics[name]["voxels"] == m.sum()


def test_python_accumulate_float16(tmp_path, models, cases):
    # accumulate="float16": nnU-Net's own accumulator, the same labels as float32 sums here and
    # probabilities close to them; refused for a plain model and for an unknown type
    import swi

    if not getattr(swi._swi, "PIPELINE_NNUNET", 0):
        pytest.skip("a pipeline library without nnU-Net jobs")
    ins = [str(p) for p in cases["mr"]]
    r32 = swi.segment(ins, str(tmp_path / "a.nii.gz"), model=str(models[MR3D]), save_probabilities=True)
    r16 = swi.segment(ins, str(tmp_path / "b.nii.gz"), model=str(models[MR3D]), save_probabilities=True,
                      accumulate="float16")
    assert np.array_equal(r32.labels, r16.labels)
    p32 = np.load(tmp_path / "a.npz")["probabilities"]
    p16 = np.load(tmp_path / "b.npz")["probabilities"]
    d = np.abs(p32 - p16)
    assert 0 < d.max() <= 0.05 and np.mean(d > 1e-3) < 0.01, (float(d.max()), float(np.mean(d > 1e-3)))
    with pytest.raises(ValueError, match="accumulate"):
        swi.segment(ins, str(tmp_path / "c.nii.gz"), model=str(models[MR3D]), accumulate="float64")
    assert not (tmp_path / "c.nii.gz").exists()


def test_plan_describes_the_steps(models, cases):
    swi = swi_binary()
    r = run(swi, "plan", "--model", models[CT3D], "--input", cases["ct"][0])
    for want in ("nnU-Net", "crop to the nonzero box", "model grid", "mirror   axes 0 1 2", "folds 0,1", "memory"):
        assert want in r.stdout, r.stdout


def test_plan_takes_nnunets_spellings(models, cases):
    """nnU-Net's own spellings of the same options: --folds 0 1 (one fold a word), -i/-m short
    forms, --disable_tta with an underscore."""
    swi = swi_binary()
    r = run(swi, "plan", "-m", models[CT3D], "-i", cases["ct"][0], "--folds", "1", "0", "--disable_tta")
    assert "folds 1,0" in r.stdout and "mirror   axes" not in r.stdout, r.stdout


def test_folder_mode_nnunet_naming(tmp_path, models, cases):
    swi = swi_binary()
    src = tmp_path / "imagesTs"
    src.mkdir()
    for name in ("a", "b"):
        for c, p in enumerate(cases["mr"]):
            shutil.copy(p, src / f"{name}_{c:04d}.nii.gz")
    shutil.copy(cases["mr"][0], src / "c_0000.nii.gz")  # its channel 1 is missing
    out = tmp_path / "pred"
    r = run(swi, "segment", "--model", models[MR3D], "--input-dir", src, "--output-dir", out, "--save-probabilities",
            ok=False)
    assert r.returncode == 1
    assert "c: channel 1 (c_0001.nii.gz) is missing" in r.stderr, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["a.json", "a.nii.gz", "a.npz", "b.json", "b.nii.gz", "b.npz"]
    one = tmp_path / "one.nii.gz"
    run(swi, "segment", "-q", "--model", models[MR3D], "--input", src / "a_0000.nii.gz", "--input",
        src / "a_0001.nii.gz", "--output", one)
    assert np.array_equal(np.asarray(nib.load(str(one)).dataobj), np.asarray(nib.load(str(out / "a.nii.gz")).dataobj))


@pytest.mark.parametrize("flags,msg", [
    (["--orientation", "RAS"], "--orientation does not apply to an nnU-Net model"),
    (["--spacing", "1"], "--spacing does not apply to an nnU-Net model"),
    (["--clip", "0,1"], "--clip does not apply to an nnU-Net model"),
    (["--zscore"], "--zscore does not apply to an nnU-Net model"),
    (["--roi", "8"], "--roi does not apply to an nnU-Net model"),
    (["--mode", "gaussian"], "--mode does not apply to an nnU-Net model"),
    (["--overlap", "0.5"], "--overlap does not apply to an nnU-Net model"),
    (["--tta"], "--tta does not apply to an nnU-Net model"),
    (["--scores", "s.nii.gz"], "--scores does not apply to an nnU-Net model"),
    (["--folds", "3"], "--folds 3: the model has no fold 3"),
])
def test_refusals(tmp_path, models, cases, flags, msg):
    swi = swi_binary()
    flags = [str(tmp_path / f) if f.endswith(".nii.gz") else f for f in flags]
    r = run(swi, "segment", "--model", models[CT3D], "--input", cases["ct"][0], "--output", tmp_path / "x.nii.gz",
            *flags, ok=False)
    assert r.returncode in (1, 2) and msg in r.stderr, r.stderr
    assert not (tmp_path / "x.nii.gz").exists()


def test_refusals_model_dir(tmp_path, models, cases):
    swi = swi_binary()
    d = tmp_path / "model"
    shutil.copytree(models[CT3D], d)
    (d / "fold_1.onnx").unlink()
    r = run(swi, "segment", "--model", d, "--input", cases["ct"][0], "--output", tmp_path / "x.nii.gz", ok=False)
    assert r.returncode == 1 and "fold 1's model" in r.stderr and "is missing" in r.stderr, r.stderr
    r = run(swi, "segment", "--model", models[MR3D], "--input", cases["mr"][0], "--output", tmp_path / "x.nii.gz",
            ok=False)
    assert r.returncode == 1 and "the model takes 2 channels (T1, T2), but 1 --input was given" in r.stderr, r.stderr
    r = run(swi, "segment", "--model", tmp_path / "none.onnx", "--input", cases["ct"][0], "--output",
            tmp_path / "x.nii.gz", "--disable-tta", ok=False)
    assert r.returncode != 0 and "--disable-tta applies to an nnU-Net model directory" in r.stderr, r.stderr
    r = run(swi, "segment", "--model", tmp_path / "none.onnx", "--input", cases["ct"][0], "--output",
            tmp_path / "x.nii.gz", "--accumulate", "float16", ok=False)
    assert r.returncode != 0 and "--accumulate float16 applies to an nnU-Net model directory" in r.stderr, r.stderr
    r = run(swi, "segment", "--model", models[CT3D], "--input", cases["ct"][0], "--output", tmp_path / "x.nii.gz",
            "--accumulate", "half", ok=False)
    assert r.returncode == 2 and "--accumulate 'half': takes float32 or float16" in r.stderr, r.stderr
    assert not (tmp_path / "x.nii.gz").exists()


def test_session_environment(tmp_path, models, cases):
    # The advanced ONNX Runtime settings of --help reach the folds' sessions as they reach a
    # plain model's: a config asking ORT to read its own format fails on an .onnx file.
    swi = swi_binary()
    env = dict(os.environ, SWI_ORT_CONFIG="session.load_model_format=ORT")
    out = tmp_path / "x.nii.gz"
    r = subprocess.run([swi, "segment", "--model", str(models[CT3D]), "--input", str(cases["ct"][0]), "--output",
                        str(out)], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 1 and "fold_0.onnx" in r.stderr and "cannot load the model" in r.stderr, r.stderr
    assert not out.exists()
    env = dict(os.environ, SWI_ORT_SPIN="1", SWI_ORT_NO_ARENA="1")
    r = subprocess.run([swi, "segment", "-q", "--model", str(models[CT3D]), "--input", str(cases["ct"][0]),
                        "--output", str(out)], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and out.exists(), r.stderr


def order1_copy(tmp_path, src, force_separate_z):
    """The model with its data resampled at order 1 (the orders this build resamples forward)."""
    d = tmp_path / "model1"
    shutil.copytree(src, d)
    card = json.loads((d / "nnunet.json").read_text())
    card["resampling"]["resampling_fn_data"]["kwargs"].update({"order": 1, "force_separate_z": force_separate_z})
    (d / "nnunet.json").write_text(json.dumps(card))
    return d


@pytest.mark.parametrize("case,model,spacing", [
    ("ct", CT3D, (0.7, 0.9, 2.5)),   # back: separate z along axis 0, nearest slices (order_z 0)
    ("mr", MR3D, (1.1, 2.0, 1.3)),   # no separate z either way
])
def test_resampled_equals_pyref(tmp_path, models, cases, case, model, spacing):
    swi = swi_binary()
    d = order1_copy(tmp_path, models[model], False)
    ins = []
    for k, p in enumerate(cases[case]):
        img = nib.load(str(p))
        aff = img.affine.copy()
        aff[:3, :3] = np.diag(spacing)
        q = tmp_path / f"in_{k:04d}.nii.gz"
        save(q, np.asarray(img.dataobj, np.float32), aff)
        ins.append(q)
    out = tmp_path / "seg.nii.gz"
    args = []
    for q in ins:
        args += ["--input", q]
    r = run(swi, "plan", "--model", d, *args)
    assert "model grid" in r.stdout
    run(swi, "segment", "-q", "--model", d, *args, "--output", out, "--save-probabilities")
    imgs = [nib.load(str(q)) for q in ins]
    want_seg, want_p = pyref.predict(DATA / model, d, [np.asarray(i.dataobj, np.float32) for i in imgs],
                                     affine=imgs[0].affine, spacing=spacing)
    seg = np.asarray(nib.load(str(out)).dataobj)
    labels = [c for c in np.union1d(np.unique(seg), np.unique(want_seg)) if c != 0]
    ds = [dice(seg, want_seg, c) for c in labels]
    probs = np.load(str(tmp_path / "seg.npz"))["probabilities"]
    dp = float(np.abs(probs - want_p).max())
    print(f"{case} resampled {spacing}: Dice per class {[round(float(x), 4) for x in ds]}, max |prob diff| {dp:.3g}")
    assert not ds or (np.mean(ds) >= 0.99 and min(ds) >= 0.98)
    assert dp <= 1e-3


@pytest.mark.parametrize("case,model,spacing", [
    ("ct", CT3D, (0.7, 0.9, 2.5)),   # order 3 in-plane, separate z (order_z 0) both ways
    ("mr", MR3D, (1.1, 2.0, 1.3)),   # order 3, no separate z
    ("ct", CT2D, (0.7, 0.9, 2.5)),   # 2-D: axis 0 keeps its spacing
])
def test_resampled_order3_equals_pyref(tmp_path, models, cases, case, model, spacing):
    """The cards as converted (data order 3, order_z 0, separate z decided from the spacings)."""
    swi = swi_binary()
    ins = []
    for k, p in enumerate(cases[case]):
        img = nib.load(str(p))
        aff = img.affine.copy()
        aff[:3, :3] = np.diag(spacing)
        q = tmp_path / f"in_{k:04d}.nii.gz"
        save(q, np.asarray(img.dataobj, np.float32), aff)
        ins.append(q)
    out = tmp_path / "seg.nii.gz"
    args = []
    for q in ins:
        args += ["--input", q]
    run(swi, "segment", "-q", "--model", models[model], *args, "--output", out, "--save-probabilities")
    imgs = [nib.load(str(q)) for q in ins]
    want_seg, want_p = pyref.predict(DATA / model, models[model], [np.asarray(i.dataobj, np.float32) for i in imgs],
                                     affine=imgs[0].affine, spacing=spacing)
    seg = np.asarray(nib.load(str(out)).dataobj)
    labels = [c for c in np.union1d(np.unique(seg), np.unique(want_seg)) if c != 0]
    ds = [dice(seg, want_seg, c) for c in labels]
    probs = np.load(str(tmp_path / "seg.npz"))["probabilities"]
    dp = float(np.abs(probs - want_p).max())
    print(f"{case} {model.split('__')[-1]} order 3 {spacing}: Dice per class {[round(float(x), 4) for x in ds]}, "
          f"max |prob diff| {dp:.3g}")
    assert not ds or (np.mean(ds) >= 0.99 and min(ds) >= 0.98)
    assert dp <= 1e-3
