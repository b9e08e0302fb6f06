"""python3 -m swi convert nnunet: nnU-Net v2 model folders (tests/data/nnunet-models, made
by tools/make_nnunet_models.py with dynamic_network_architectures' own networks) ->
ONNX per fold + nnunet.json; outputs checked against the stored outputs of DNA's
forward pass; every refusal names what it refuses."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from swi import _nnunet_convert as conv  # noqa: E402
from swi import _nnunet_nets as nets  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "nnunet-models"
MODELS = [
    "Dataset990_SwiTinyCT/nnUNetTrainer__nnUNetPlans__3d_fullres",
    "Dataset990_SwiTinyCT/nnUNetTrainer__nnUNetPlans__2d",
    "Dataset991_SwiTinyMR/nnUNetTrainer__nnUNetResEncUNetMPlans__3d_fullres",
]
TOL = 1e-4


def ref_dir(model):
    return DATA / "reference" / model.replace("/", "__")


def reference(model, fold):
    d = ref_dir(model)
    return np.load(d / f"fold_{fold}.input.npy"), np.load(d / f"fold_{fold}.output.npy")


def run_convert(*args):
    """The command as a user runs it; returns (exit status, stderr)."""
    env = dict(os.environ)
    pkg = str(Path(conv.__file__).resolve().parents[1])
    env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "swi", "convert", "nnunet", *map(str, args)], env=env,
                       capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def copy_model(tmp_path, model):
    dst = tmp_path / "model"
    shutil.copytree(DATA / model, dst)
    return dst


# ---- the rebuild: own PyTorch networks, DNA's weights, DNA's outputs ------------------
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("fold", [0, 1])
def test_rebuild_equals_dna(model, fold):
    plans = json.loads((DATA / model / "plans.json").read_text())
    ck = conv.load_checkpoint(DATA / model / f"fold_{fold}" / "checkpoint_final.pth")
    conf = conv.resolve_configuration(plans, ck["init_args"]["configuration"], Path("plans.json"))
    x, want = reference(model, fold)
    net = nets.build_network(conf["architecture"]["network_class_name"], conf["architecture"]["arch_kwargs"],
                             x.shape[1], want.shape[1])
    nets.load_weights(net, ck["network_weights"], "ck")
    net.eval()
    with torch.no_grad():
        got = net(torch.from_numpy(x)).numpy()
    assert got.shape == want.shape
    err = float(np.abs(got - want).max())
    print(f"{model} fold {fold}: max |rebuild - DNA| = {err:.3g}")
    assert err <= TOL


# ---- the conversion ---------------------------------------------------------------
@pytest.mark.parametrize("model", MODELS)
def test_convert_model_folder(tmp_path, model):
    out = tmp_path / "out"
    rc, msg = run_convert(DATA / model, "--output", out)
    assert rc == 0, msg
    assert sorted(p.name for p in out.iterdir()) == ["fold_0.onnx", "fold_1.onnx", "nnunet.json"]
    card = json.loads((out / "nnunet.json").read_text())
    plans = json.loads((DATA / model / "plans.json").read_text())
    dataset = json.loads((DATA / model / "dataset.json").read_text())
    conf_name = model.split("__")[-1]
    conf = conv.resolve_configuration(plans, conf_name, Path("plans.json"))
    assert card["format"] == "swi-nnunet" and card["version"] == 1
    assert card["configuration"] == conf_name
    assert card["folds"] == [0, 1] and card["models"] == ["fold_0.onnx", "fold_1.onnx"]
    assert card["patch_size"] == conf["patch_size"]
    assert card["window"] == ([1] + conf["patch_size"] if len(conf["patch_size"]) == 2 else conf["patch_size"])
    assert card["spacing"] == conf["spacing"]
    assert card["transpose_forward"] == plans["transpose_forward"]
    assert card["transpose_backward"] == plans["transpose_backward"]
    assert card["file_ending"] == dataset["file_ending"]
    assert card["image_reader_writer"] == plans["image_reader_writer"] == "SimpleITKIO"
    assert card["mirroring_axes"] == list(range(len(conf["patch_size"])))
    assert card["labels"] == dataset["labels"]
    fp = plans["foreground_intensity_properties_per_channel"]
    for i, ch in enumerate(card["channels"]):
        assert ch["name"] == dataset["channel_names"][str(i)]
        assert ch["normalization"] == conf["normalization_schemes"][i]
        assert ch["use_mask_for_norm"] == conf["use_mask_for_norm"][i]
        if ch["normalization"] == "CTNormalization":
            for k in ("mean", "std", "percentile_00_5", "percentile_99_5"):
                assert ch[k] == fp[str(i)][k]
    if "regions_class_order" in dataset:
        assert card["has_regions"] and card["inference_nonlin"] == "sigmoid"
        assert card["regions"] == [[1, 2], [2]] and card["regions_class_order"] == [1, 2]
    else:
        assert not card["has_regions"] and card["inference_nonlin"] == "softmax"
    heads = card["num_segmentation_heads"]
    for f in (0, 1):
        m = onnx.load(str(out / f"fold_{f}.onnx"))
        onnx.checker.check_model(m)
        assert m.opset_import[0].version == 17
        dims = [d.dim_param or d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
        assert dims == ["batch", len(card["channels"]), *card["window"]]
        odims = [d.dim_param or d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim]
        assert odims == ["batch", heads, *card["window"]]
    assert oct(out.stat().st_mode & 0o777) != "0o700"  # not left as the temporary directory


def test_convert_selected_folds_and_checkpoint(tmp_path):
    model = copy_model(tmp_path, MODELS[0])
    shutil.copy(model / "fold_1" / "checkpoint_final.pth", model / "fold_1" / "checkpoint_best.pth")
    rc, msg = run_convert(model, "--output", tmp_path / "o", "--folds", "1", "--checkpoint", "checkpoint_best.pth")
    assert rc == 0, msg
    card = json.loads((tmp_path / "o" / "nnunet.json").read_text())
    assert card["folds"] == [1] and card["checkpoint"] == "checkpoint_best.pth"
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["fold_1.onnx", "nnunet.json"]
    # fold 0 has no checkpoint_best.pth
    rc, msg = run_convert(model, "--output", tmp_path / "o2", "--folds", "0,1", "--checkpoint", "checkpoint_best.pth")
    assert rc == 1 and "fold_0/checkpoint_best.pth: missing" in msg
    assert not (tmp_path / "o2").exists()


def test_convert_fold_all_and_inherited_configuration(tmp_path):
    """--folds all takes fold_all/ (the automatic choice never does, as nnU-Net's); a
    configuration that inherits_from another gets the parent's keys under its own."""
    m = copy_model(tmp_path, MODELS[0])
    shutil.copytree(m / "fold_0", m / "fold_all")
    edit_json(m / "plans.json", lambda p: p["configurations"].update(
        {"3d_fullres_bs4": {"inherits_from": "3d_fullres", "batch_size": 4, "spacing": [3.0, 0.9, 0.9]}}))
    edit_checkpoint(m / "fold_all" / "checkpoint_final.pth",
                    lambda ck: ck["init_args"].update(configuration="3d_fullres_bs4"))
    assert conv.main([str(m), "--output", str(tmp_path / "all"), "--folds", "all", "-q"]) == 0
    card = json.loads((tmp_path / "all" / "nnunet.json").read_text())
    assert card["folds"] == ["all"] and card["models"] == ["fold_all.onnx"]
    assert card["configuration"] == "3d_fullres_bs4"
    assert card["patch_size"] == [8, 16, 16] and card["spacing"] == [3.0, 0.9, 0.9]
    assert conv.main([str(m), "--output", str(tmp_path / "auto"), "-q"]) == 0
    assert json.loads((tmp_path / "auto" / "nnunet.json").read_text())["folds"] == [0, 1]


def swi_binary_with_ort():
    b = os.environ.get("SWI_BINARY")
    if not b or not Path(b).is_file():
        return None
    v = subprocess.run([b, "--version"], capture_output=True, text=True).stdout
    return None if "ONNX Runtime: not built in" in v else b


def onnx_through_swi(swi, model, x, tmp_path):
    """The ONNX run by the swi command (ONNX Runtime) on the batch x [2, C, *window]: the
    two inputs side by side along the first axis, two windows of the patch in one batch-2
    call, no overlap, constant blending: the scores are the network's outputs, returned
    as [2, K, *window]."""
    nib = pytest.importorskip("nibabel")
    vol = np.concatenate([x[0], x[1]], axis=1)
    ins = []
    for c in range(vol.shape[0]):
        p = tmp_path / f"in{c}.nii"
        nib.save(nib.Nifti1Image(vol[c], np.eye(4)), str(p))
        ins += ["--input", str(p)]
    r = subprocess.run([swi, "segment", "-q", "--model", str(model), *ins, "--output", str(tmp_path / "l.nii"),
                        "--scores", str(tmp_path / "s.nii"), "--force", "--roi", ",".join(map(str, x.shape[2:])),
                        "--overlap", "0", "--mode", "constant", "--sw-batch", "2", "--no-card", "--no-rewrite",
                        "--no-reuse"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = np.asarray(nib.load(str(tmp_path / "s.nii")).dataobj).transpose(3, 0, 1, 2)  # K, 2*D0, D1, D2
    d0 = x.shape[2]
    return np.stack([got[:, :d0], got[:, d0:]])


@pytest.mark.parametrize("model", MODELS)
def test_onnx_equals_dna_through_swi(tmp_path, model):
    swi = swi_binary_with_ort()
    if swi is None:
        pytest.skip("SWI_BINARY (set by ctest) with ONNX Runtime is needed to run the ONNX")
    out = tmp_path / "out"
    rc, msg = run_convert(DATA / model, "--output", out)
    assert rc == 0, msg
    for f in (0, 1):
        x, y = reference(model, f)
        if x.ndim == 4:  # 2-D: a window one voxel thick
            x, y = x[:, :, None], y[:, :, None]
        got = onnx_through_swi(swi, out / f"fold_{f}.onnx", x, tmp_path)
        assert got.shape == y.shape
        err = float(np.abs(got - y).max())
        print(f"{model} fold {f}: max |ONNX (swi) - DNA| = {err:.3g}")
        assert err <= TOL


VARIANTS = sorted(p.name for p in (DATA / "variants").iterdir())


@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_rebuild_and_onnx_equal_dna(tmp_path, variant):
    """Layers and options the model folders do not use (batch norm with running stats,
    dropout, nonlin_first, no norm, ELU, a 2-D ResidualEncoderUNet with stem_channels)."""
    d = DATA / "variants" / variant
    a = json.loads((d / "arch.json").read_text())
    x, want = np.load(d / "input.npy"), np.load(d / "output.npy")
    net = nets.build_network(a["network_class_name"], a["arch_kwargs"], a["input_channels"], a["num_classes"])
    nets.load_weights(net, conv.read_torch_archive(d / "network_weights.pth"), variant)
    net.eval()
    with torch.no_grad():
        got = net(torch.from_numpy(x)).numpy()
    err = float(np.abs(got - want).max())
    print(f"{variant}: max |rebuild - DNA| = {err:.3g}")
    assert got.shape == want.shape and err <= TOL
    conv.export_onnx(net, a["patch_size"], a["input_channels"], tmp_path / "m.onnx")
    onnx.checker.check_model(onnx.load(str(tmp_path / "m.onnx")))
    swi = swi_binary_with_ort()
    if swi is None:
        pytest.skip("SWI_BINARY (set by ctest) with ONNX Runtime is needed to run the ONNX")
    if x.ndim == 4:
        x, want = x[:, :, None], want[:, :, None]
    got = onnx_through_swi(swi, tmp_path / "m.onnx", x, tmp_path)
    err = float(np.abs(got - want).max())
    print(f"{variant}: max |ONNX (swi) - DNA| = {err:.3g}")
    assert err <= TOL


# ---- refusals: each names what it refuses, and writes nothing ------------------------
def edit_json(path, fn):
    d = json.loads(path.read_text())
    fn(d)
    path.write_text(json.dumps(d))


def edit_checkpoint(path, fn):
    ck = conv.load_checkpoint(path)
    fn(ck)
    torch.save(ck, str(path))


def refused(tmp_path, model, *extra):
    """The converter's main in this process (the command itself: test_convert_model_folder)."""
    out = tmp_path / "out"
    rc = conv.main([str(model), "--output", str(out), "-q", *map(str, extra)])
    msg = _captured.readouterr().err
    assert rc == 1, msg
    assert "Traceback" not in msg
    assert not out.exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []
    lines = [ln for ln in msg.splitlines() if ln.startswith("swi convert nnunet:")]
    assert len(lines) == 1, msg
    return lines[0]


_captured = None


@pytest.fixture(autouse=True)
def _capture(capsys):
    global _captured
    _captured = capsys
    yield
    _captured = None


def test_refuses_unknown_network_class(tmp_path):
    m = copy_model(tmp_path, MODELS[0])

    def f(p):
        p["configurations"]["3d_fullres"]["architecture"]["network_class_name"] = \
            "dynamic_network_architectures.architectures.primus.Primus"
    edit_json(m / "plans.json", f)
    msg = refused(tmp_path, m)
    assert "dynamic_network_architectures.architectures.primus.Primus" in msg and "not supported" in msg


def test_refuses_unknown_arch_kwarg_and_layer(tmp_path):
    m = copy_model(tmp_path, MODELS[2])

    def f(p):
        p["configurations"]["3d_fullres"]["architecture"]["arch_kwargs"]["squeeze_excitation"] = True
    edit_json(m / "plans.json", f)
    assert "squeeze_excitation" in refused(tmp_path, m)

    def g(p):
        kw = p["configurations"]["3d_fullres"]["architecture"]["arch_kwargs"]
        del kw["squeeze_excitation"]
        kw["nonlin"] = "torch.nn.PReLU"
    edit_json(m / "plans.json", g)
    assert "torch.nn.PReLU" in refused(tmp_path, m)


def test_refuses_missing_weight(tmp_path):
    m = copy_model(tmp_path, MODELS[2])
    name = "encoder.stages.1.blocks.0.skip.1.conv.weight"

    def f(ck):
        del ck["network_weights"][name]
    edit_checkpoint(m / "fold_1" / "checkpoint_final.pth", f)
    msg = refused(tmp_path, m)
    assert name in msg and "missing" in msg and "fold_1" in msg


def test_refuses_wrong_shape(tmp_path):
    m = copy_model(tmp_path, MODELS[0])
    name = "decoder.seg_layers.1.weight"

    def f(ck):
        w = ck["network_weights"][name]
        ck["network_weights"][name] = torch.zeros(w.shape[0] + 1, *w.shape[1:])
    edit_checkpoint(m / "fold_0" / "checkpoint_final.pth", f)
    msg = refused(tmp_path, m)
    assert name in msg and "shape" in msg


def test_refuses_weight_that_does_not_fit(tmp_path):
    m = copy_model(tmp_path, MODELS[1])

    def f(ck):
        ck["network_weights"]["decoder.extra_head.weight"] = torch.zeros(3)
    edit_checkpoint(m / "fold_0" / "checkpoint_final.pth", f)
    msg = refused(tmp_path, m)
    assert "decoder.extra_head.weight" in msg and "does not fit" in msg


def test_refuses_cascade(tmp_path):
    m = copy_model(tmp_path, MODELS[0])
    for fold in (0, 1):
        edit_checkpoint(m / f"fold_{fold}" / "checkpoint_final.pth",
                        lambda ck: ck["init_args"].update(configuration="3d_cascade_fullres"))
    msg = refused(tmp_path, m)
    assert "3d_cascade_fullres" in msg and "3d_lowres" in msg and "cascade" in msg


def test_refuses_unknown_configuration(tmp_path):
    m = copy_model(tmp_path, MODELS[0])
    edit_checkpoint(m / "fold_0" / "checkpoint_final.pth",
                    lambda ck: ck["init_args"].update(configuration="3d_mystery"))
    edit_checkpoint(m / "fold_1" / "checkpoint_final.pth",
                    lambda ck: ck["init_args"].update(configuration="3d_mystery"))
    msg = refused(tmp_path, m)
    assert "3d_mystery" in msg and "plans.json" in msg


def test_refuses_folds_that_disagree(tmp_path):
    m = copy_model(tmp_path, MODELS[0])
    edit_checkpoint(m / "fold_1" / "checkpoint_final.pth", lambda ck: ck.update(trainer_name="nnUNetTrainerDA5"))
    msg = refused(tmp_path, m)
    assert "nnUNetTrainerDA5" in msg and "agree" in msg


def test_refuses_unknown_reader_and_label_manager(tmp_path):
    m = copy_model(tmp_path, MODELS[0])
    edit_json(m / "plans.json", lambda p: p.update(image_reader_writer="Tiff3DIO"))
    assert "Tiff3DIO" in refused(tmp_path, m)
    edit_json(m / "plans.json", lambda p: p.update(image_reader_writer="SimpleITKIO", label_manager="MyLabels"))
    assert "MyLabels" in refused(tmp_path, m)


def test_refuses_malformed_labels_channels_and_kwargs(tmp_path):
    m = copy_model(tmp_path, MODELS[0])
    good = (m / "dataset.json").read_text()
    edit_json(m / "dataset.json", lambda d: d["labels"].update(liver="one"))
    assert "labels.liver" in refused(tmp_path, m)
    (m / "dataset.json").write_text(good)
    edit_json(m / "dataset.json", lambda d: d.update(channel_names={"CT": "0"}))
    assert "channel_names" in refused(tmp_path, m)
    (m / "dataset.json").write_text(good)
    edit_json(m / "plans.json",
              lambda p: p["configurations"]["3d_fullres"]["architecture"]["arch_kwargs"].update(
                  features_per_stage=[4, "8", 12]))
    assert "arch_kwargs" in refused(tmp_path, m)


def test_refuses_unsupported_normalization(tmp_path):
    m = copy_model(tmp_path, MODELS[0])
    edit_json(m / "plans.json",
              lambda p: p["configurations"]["3d_fullres"].update(normalization_schemes=["MyNormalization"]))
    msg = refused(tmp_path, m)
    assert "MyNormalization" in msg and "normalization_schemes[0]" in msg


def test_checkpoint_reader_equals_torch_load(tmp_path):
    """The allow-list reader gives what torch.load gives: shared storages, views with
    offsets and strides, every dtype a checkpoint holds, numpy scalars and arrays."""
    base = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    obj = {
        "w": base, "view": base[1:, ::2, 1:4], "t": base.transpose(0, 2), "half": base.half(),
        "d": torch.randn(3, dtype=torch.float64), "i": torch.arange(5), "b": torch.tensor([True, False]),
        "u8": torch.tensor([1, 255], dtype=torch.uint8), "empty": torch.zeros(0, 3), "scalar": torch.tensor(2.5),
        "np": [np.float64(0.25), np.float32(1.5), np.int64(7), np.arange(4.0)], "dev": torch.device("cpu"),
        "nested": {"a": (1, 2.0, "x", None, True), "s": {3}},
    }
    torch.save(obj, tmp_path / "c.pth")
    got, want = conv.read_torch_archive(tmp_path / "c.pth"), torch.load(tmp_path / "c.pth")
    for k in ("w", "view", "t", "half", "d", "i", "b", "u8", "empty", "scalar"):
        assert got[k].dtype == want[k].dtype and torch.equal(got[k], want[k]), k
    assert got["np"][:3] == want["np"][:3] and np.array_equal(got["np"][3], want["np"][3])
    assert got["dev"] == want["dev"] and got["nested"] == want["nested"]
    (tmp_path / "junk.pth").write_bytes(b"not a zip")
    with pytest.raises(conv.ConvertError, match="not a PyTorch checkpoint archive"):
        conv.read_torch_archive(tmp_path / "junk.pth")


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_refuses_checkpoint_with_code(tmp_path):
    """A checkpoint is unpickled with an allow-list: a callable other than a tensor
    rebuild is refused, never called."""
    m = copy_model(tmp_path, MODELS[0])
    p = m / "fold_0" / "checkpoint_final.pth"
    edit_checkpoint(p, lambda ck: ck.update(logging=_Evil()))
    msg = refused(tmp_path, m)
    assert "refused to unpickle" in msg and "system" in msg


def test_refuses_existing_output_and_bad_folds(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep").write_text("x")
    rc, msg = run_convert(DATA / MODELS[0], "--output", tmp_path / "out")
    assert rc == 1 and "exists" in msg and (tmp_path / "out" / "keep").read_text() == "x"
    rc, msg = run_convert(DATA / MODELS[0], "--output", tmp_path / "o", "--folds", "0,x")
    assert rc == 1 and "'x'" in msg and not (tmp_path / "o").exists()
    rc, msg = run_convert(tmp_path / "nothing", "--output", tmp_path / "o")
    assert rc == 1 and "not a directory" in msg
    # --force never removes a folder the converter did not write
    rc, msg = run_convert(DATA / MODELS[0], "--output", tmp_path / "out", "--force", "--folds", "0")
    assert rc == 1 and "did not write" in msg and (tmp_path / "out" / "keep").read_text() == "x", msg
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["keep"]
    # --force replaces a model directory the converter wrote, whole
    rc, msg = run_convert(DATA / MODELS[0], "--output", tmp_path / "conv", "--folds", "0")
    assert rc == 0, msg
    rc, msg = run_convert(DATA / MODELS[0], "--output", tmp_path / "conv", "--force", "--folds", "0")
    assert rc == 0, msg
    assert sorted(p.name for p in (tmp_path / "conv").iterdir()) == ["fold_0.onnx", "nnunet.json"]
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    # ... but not once the user put a file of their own into it
    (tmp_path / "conv" / "mine.txt").write_text("y")
    rc, msg = run_convert(DATA / MODELS[0], "--output", tmp_path / "conv", "--force", "--folds", "0")
    assert rc == 1 and "mine.txt" in msg and (tmp_path / "conv" / "mine.txt").read_text() == "y", msg


def test_refuses_output_that_is_or_holds_the_model(tmp_path):
    m = copy_model(tmp_path, MODELS[1])
    (tmp_path / "alias").symlink_to(m)
    (tmp_path / "up").symlink_to(tmp_path)
    # the folder itself, a folder around it, a folder inside it (its fold), each also by a link
    for target in (m, tmp_path, m / "fold_0", tmp_path / "alias", tmp_path / "up", tmp_path / "alias" / "fold_0",
                   m / "new"):
        before = sorted(str(p.relative_to(tmp_path)) for p in m.rglob("*"))
        rc = conv.main([str(m), "--output", str(target), "--force", "-q", "--folds", "0"])
        msg = _captured.readouterr().err
        assert rc == 1 and "is the model folder, lies inside it or holds it" in msg, (target, msg)
        assert sorted(str(p.relative_to(tmp_path)) for p in m.rglob("*")) == before, target
    assert (m / "fold_0" / "checkpoint_final.pth").is_file() and (m / "plans.json").is_file()
    # an output under a regular file: one line, no traceback
    (tmp_path / "file").write_text("x")
    rc = conv.main([str(m), "--output", str(tmp_path / "file" / "out"), "-q"])
    msg = _captured.readouterr().err
    assert rc == 1 and msg.startswith("swi convert nnunet: ") and len(msg.strip().splitlines()) == 1, msg


def test_help_teaches_by_example():
    rc, msg = run_convert("--help")
    assert rc == 0
    assert "examples:" in msg and "--folds 0,1" in msg and "nnunet.json" in msg


def test_swi_command_runs_the_converter(tmp_path):
    """`swi convert nnunet ...` runs `python3 -m swi convert nnunet ...`."""
    b = os.environ.get("SWI_BINARY")
    if not b or not Path(b).is_file():
        pytest.skip("SWI_BINARY is set by ctest")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(conv.__file__).resolve().parents[1])
    env["SWI_PYTHON"] = sys.executable
    r = subprocess.run([b, "convert", "nnunet", str(DATA / MODELS[1]), "--output", str(tmp_path / "o"), "-q"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "o" / "nnunet.json").is_file()
    r = subprocess.run([b, "convert", "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "convert nnunet" in r.stdout
    # without the package: one clear line
    env["PYTHONPATH"] = str(tmp_path / "empty")
    env["SWI_PYTHON"] = sys.executable
    r = subprocess.run([b, "convert", "nnunet", str(DATA / MODELS[1]), "--output", str(tmp_path / "o2")],
                       env=env, capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert r.returncode == 1
    assert "swi convert" in r.stderr and "not importable" in r.stderr
    assert not (tmp_path / "o2").exists()
