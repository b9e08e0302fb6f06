"""python3 -m swi convert nnunet: hostile model folders (swi._nnunet_inputs). Every bad
input is one line `swi convert nnunet: FILE: FIELD: what is wrong`, exit 1, no traceback,
within a time and memory bound: FIFOs, huge or deep JSON, fields of the wrong type or
range, checkpoints whose tensors do not fit their storages, plans whose network is far
larger than the checkpoint's."""

import collections
import io
import json
import math
import os
import pickle
import resource
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from swi import _nnunet_convert as conv  # noqa: E402
from swi import _nnunet_inputs as inputs  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "nnunet-models"
M3D = "Dataset990_SwiTinyCT/nnUNetTrainer__nnUNetPlans__3d_fullres"
M2D = "Dataset990_SwiTinyCT/nnUNetTrainer__nnUNetPlans__2d"
# what the converter may take: the interpreter with torch and onnx imported is ~650 MiB of
# address space; the largest tiny model converts within 1.5 GiB
LIMIT_AS = 3 << 29


def copy_model(tmp_path, model=M3D):
    dst = tmp_path / "model"
    shutil.copytree(DATA / model, dst)
    return dst


def edit_json(path, fn):
    d = json.loads(path.read_text())
    fn(d)
    path.write_text(json.dumps(d))


def conf3d(p):
    return p["configurations"]["3d_fullres"]


def limited_run(args, limit_as=LIMIT_AS, timeout=120):
    """The command as a user runs it, within an address-space limit: (status, output)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(conv.__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    r = subprocess.run([sys.executable, "-m", "swi", "convert", "nnunet", *map(str, args)], env=env,
                       capture_output=True, text=True, timeout=timeout, preexec_fn=limit)
    return r.returncode, r.stdout + r.stderr


def one_line(rc, msg):
    assert rc == 1, msg
    assert "Traceback" not in msg, msg
    lines = msg.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("swi convert nnunet: "), msg
    return lines[0]


def refused(tmp_path, model, *extra):
    out = tmp_path / "out"
    rc = conv.main([str(model), "--output", str(out), "-q", *map(str, extra)])
    msg = _captured.readouterr().err
    line = one_line(rc, msg)
    assert not out.exists()
    return line


_captured = None


@pytest.fixture(autouse=True)
def _capture(capsys):
    global _captured
    _captured = capsys
    yield
    _captured = None


# ---- files that are not regular files ------------------------------------------------
@pytest.mark.parametrize("name", ["plans.json", "dataset.json", "fold_0/checkpoint_final.pth"])
def test_refuses_fifo(tmp_path, name):
    """A FIFO under an input's name is refused at once, never waited on."""
    m = copy_model(tmp_path)
    (m / name).unlink()
    os.mkfifo(m / name)
    rc, msg = limited_run([m, "--output", tmp_path / "o", "--folds", "0"], timeout=60)
    line = one_line(rc, msg)
    assert name in line and "not a regular file (a FIFO)" in line
    assert not (tmp_path / "o").exists()


def test_refuses_directory_as_plans(tmp_path):
    m = copy_model(tmp_path)
    (m / "plans.json").unlink()
    (m / "plans.json").mkdir()
    assert "plans.json: not a regular file (a directory)" in refused(tmp_path, m)


# ---- JSON: size, depth, numbers ------------------------------------------------------
def test_refuses_huge_integer(tmp_path):
    """A 100,000-digit number: Python's int limit would raise; ours names the field."""
    m = copy_model(tmp_path)
    text = (m / "plans.json").read_text().replace('"batch_size": 2', '"batch_size": ' + "9" * 100000)
    assert "9" * 1000 in text
    (m / "plans.json").write_text(text)
    line = refused(tmp_path, m)
    assert "plans.json: configurations.3d_fullres.batch_size: an integer of 100000 digits" in line


@pytest.mark.parametrize("depth", [100, 100000])
def test_refuses_deep_json(tmp_path, depth):
    m = copy_model(tmp_path)
    edit_json(m / "dataset.json", lambda d: d.update(deep="@"))
    (m / "dataset.json").write_text((m / "dataset.json").read_text().replace('"@"', "[" * depth + "]" * depth))
    line = refused(tmp_path, m)
    assert "dataset.json" in line and f"nested more than {inputs.MAX_JSON_DEPTH} deep" in line


def test_refuses_oversized_json(tmp_path):
    m = copy_model(tmp_path)
    edit_json(m / "plans.json", lambda p: p.update(padding=" " * (inputs.MAX_JSON_BYTES + 1)))
    line = refused(tmp_path, m)
    assert "plans.json" in line and "MiB" in line and len(line) < 200


def test_refuses_json_that_is_not_utf8_or_json(tmp_path):
    m = copy_model(tmp_path)
    (m / "plans.json").write_bytes(b'{"a": "\xff"}')
    assert "plans.json: not UTF-8" in refused(tmp_path, m)
    (m / "plans.json").write_text('{"a": [1, 2,,]}')
    assert "plans.json: not valid JSON (line 1" in refused(tmp_path, m)


# ---- JSON: fields of the wrong type or range -----------------------------------------
def _set(path, value):
    """plans/dataset edit: path is a list of keys below the document."""
    def fn(d):
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value
    return fn


C = ["configurations", "3d_fullres"]
K = C + ["architecture", "arch_kwargs"]
FIELD_CASES = [
    ("plans.json", C + ["spacing"], [0.0, 1.0, 1.0], "configurations.3d_fullres.spacing[0]"),
    ("plans.json", C + ["spacing"], [1.0, -2.0, 1.0], "configurations.3d_fullres.spacing[1]"),
    ("plans.json", C + ["spacing"], [1.0, 1.0, float("nan")], "configurations.3d_fullres.spacing[2]"),
    ("plans.json", C + ["spacing"], [1.0, 1.0, float("inf")], "configurations.3d_fullres.spacing[2]"),
    ("plans.json", C + ["spacing"], ["1", 1.0, 1.0], "configurations.3d_fullres.spacing[0]"),
    ("plans.json", C + ["spacing"], "1,1,1", "configurations.3d_fullres.spacing"),
    ("plans.json", C + ["patch_size"], [8.5, 16, 16], "configurations.3d_fullres.patch_size[0]"),
    ("plans.json", C + ["patch_size"], [True, 16, 16], "configurations.3d_fullres.patch_size[0]"),
    ("plans.json", C + ["patch_size"], "8,16,16", "configurations.3d_fullres.patch_size"),
    ("plans.json", C + ["patch_size"], [4096, 4096, 4096], "configurations.3d_fullres.patch_size"),
    ("plans.json", C + ["use_mask_for_norm"], ["no"], "configurations.3d_fullres.use_mask_for_norm[0]"),
    ("plans.json", C + ["normalization_schemes"], [["CTNormalization"]],
     "configurations.3d_fullres.normalization_schemes[0]"),
    ("plans.json", C + ["resampling_fn_data_kwargs"], [1, 2], "configurations.3d_fullres.resampling_fn_data_kwargs"),
    ("plans.json", C + ["inherits_from"], ["3d_lowres"], "configurations.3d_fullres.inherits_from"),
    ("plans.json", ["transpose_forward"], ["a", 1, 2], "transpose_forward"),
    ("plans.json", ["dataset_name"], {"x": 1}, "dataset_name"),
    ("plans.json", ["configurations"], [], "configurations"),
    ("plans.json", ["foreground_intensity_properties_per_channel"], {"0": 5},
     "foreground_intensity_properties_per_channel.0"),
    ("plans.json", K + ["n_stages"], 100000, "arch_kwargs.n_stages"),
    ("plans.json", K + ["n_stages"], 3.0, "arch_kwargs.n_stages"),
    ("plans.json", K + ["features_per_stage"], [4, 8, 10 ** 9], "arch_kwargs.features_per_stage[2]"),
    ("plans.json", K + ["features_per_stage"], [4, 8, -12], "arch_kwargs.features_per_stage[2]"),
    ("plans.json", K + ["kernel_sizes"], [[3, 3, 3], [3, 3, 3], [3, 3, 301]], "arch_kwargs.kernel_sizes[2][2]"),
    ("plans.json", K + ["strides"], "2", "arch_kwargs.strides"),
    ("plans.json", K + ["n_conv_per_stage"], [2, 2, 100000], "arch_kwargs.n_conv_per_stage[2]"),
    ("plans.json", K + ["norm_op_kwargs"], {"eps": "small"}, "arch_kwargs.norm_op_kwargs.eps"),
    ("plans.json", K + ["norm_op_kwargs"], {"eps": 1e-5, "affine": "yes"}, "arch_kwargs.norm_op_kwargs.affine"),
    ("plans.json", K + ["nonlin_kwargs"], {"negative_slope": None}, "arch_kwargs.nonlin_kwargs.negative_slope"),
    ("plans.json", K + ["conv_op"], ["torch.nn.Conv3d"], "arch_kwargs.conv_op"),
    ("dataset.json", ["labels", "liver"], 2 ** 40, "labels.liver"),
    ("dataset.json", ["channel_names", "0"], ["CT"], "channel_names.0"),
    ("dataset.json", ["file_ending"], [".nii.gz"], "file_ending"),
    ("dataset.json", ["regions_class_order"], "1,2", "regions_class_order"),
    ("dataset.json", ["labels", "a\nb"], 2 ** 40, "labels.a\\nb"),
    ("dataset.json", ["labels", "\ud800"], -1, "labels.\\ud800"),
]


@pytest.mark.parametrize("case", FIELD_CASES, ids=[f"{c[0]}:{c[3]}:{i}" for i, c in enumerate(FIELD_CASES)])
def test_refuses_field(tmp_path, case):
    name, path, value, field = case
    m = copy_model(tmp_path)
    edit_json(m / name, _set(path, value))
    line = refused(tmp_path, m)
    assert f"{name}: " in line and f"{field}: " in line, line
    assert len(line) < 400


# ---- checkpoints: tensors against their storages -------------------------------------
class _Storage:
    def __init__(self, key, numel, cls="FloatStorage"):
        self.key, self.numel, self.cls = key, numel, cls


class _Tensor:
    def __init__(self, storage, offset, size, stride):
        self.a = (storage, offset, tuple(size), tuple(stride), False, collections.OrderedDict())

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, self.a


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            return ("storage", getattr(torch, obj.cls), obj.key, "cpu", obj.numel)
        return None


def write_archive(path, obj, entries, compress=None):
    """A torch.save-style zip: obj pickled with _Tensor/_Storage as torch writes tensors,
    entries {key: bytes} as data/KEY."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=2).dump(obj)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", buf.getvalue())
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/version", "3\n")
        for k, v in entries.items():
            if callable(v):
                with zf.open(zipfile.ZipInfo(f"archive/data/{k}"), "w", force_zip64=True) as fh:
                    v(fh)
            else:
                zf.writestr(zipfile.ZipInfo(f"archive/data/{k}"), v, compress_type=compress or zipfile.ZIP_STORED)


def nnunet_checkpoint(weights, configuration="3d_fullres"):
    return {"network_weights": weights, "init_args": {"configuration": configuration},
            "trainer_name": "nnUNetTrainer", "inference_allowed_mirroring_axes": (0, 1, 2)}


def test_archive_of_own_writer_reads_as_torch_does(tmp_path):
    """The hand-made archives of these tests are what torch.load reads (so the refusals
    below are of checkpoints torch would take)."""
    s = _Storage("0", 6)
    write_archive(tmp_path / "c.pth", {"a": _Tensor(s, 1, [2, 2], [2, 1])},
                  {"0": torch.arange(6, dtype=torch.float32).numpy().tobytes()})
    want = torch.load(tmp_path / "c.pth")["a"]
    assert torch.equal(want, torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert torch.equal(conv.read_torch_archive(tmp_path / "c.pth")["a"], want)


def test_refuses_stride_zero_view_without_allocating(tmp_path):
    """653 bytes: a 4-byte storage viewed as 2^28 floats (stride 0) would take 1 GiB."""
    m = copy_model(tmp_path)
    s = _Storage("0", 1)
    write_archive(m / "fold_0" / "checkpoint_final.pth",
                  nnunet_checkpoint({"decoder.seg_layers.1.weight": _Tensor(s, 0, [1 << 28], [0])}),
                  {"0": b"\0\0\0\0"})
    assert (m / "fold_0" / "checkpoint_final.pth").stat().st_size < 1000
    rc, msg = limited_run([m, "--output", tmp_path / "o", "--folds", "0"], limit_as=1 << 30)
    line = one_line(rc, msg)
    assert "checkpoint_final.pth: tensor network_weights.decoder.seg_layers.1.weight" in line
    assert "repeated elements" in line


def test_refuses_view_outside_its_storage(tmp_path):
    m = copy_model(tmp_path)
    s = _Storage("0", 4)
    write_archive(m / "fold_0" / "checkpoint_final.pth",
                  nnunet_checkpoint({"w": _Tensor(s, 2, [2, 2], [2, 1])}), {"0": b"\0" * 16})
    line = refused(tmp_path, m, "--folds", "0")
    assert "tensor network_weights.w" in line and "reach element 5" in line


def test_refuses_storage_larger_than_its_entry(tmp_path):
    """The pickle says 2^28 floats, the archive holds 4 bytes."""
    m = copy_model(tmp_path)
    s = _Storage("0", 1 << 28)
    write_archive(m / "fold_0" / "checkpoint_final.pth",
                  nnunet_checkpoint({"w": _Tensor(s, 0, [1 << 28], [1])}), {"0": b"\0" * 4})
    line = refused(tmp_path, m, "--folds", "0")
    assert "tensor network_weights.w" in line and "holds 4 bytes" in line


def test_refuses_deflated_storage_without_inflating(tmp_path):
    """1 MiB deflated holding 2^28 floats of zeros: refused from the zip directory."""
    m = copy_model(tmp_path)
    n = 1 << 26
    s = _Storage("0", n)
    p = m / "fold_0" / "checkpoint_final.pth"

    def zeros(fh):
        chunk = bytes(1 << 20)
        for _ in range(n * 4 >> 20):
            fh.write(chunk)
    buf = io.BytesIO()
    _Pickler(buf, protocol=2).dump(nnunet_checkpoint({"decoder.seg_layers.1.weight": _Tensor(s, 0, [n], [1])}))
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr("archive/data.pkl", buf.getvalue())
        with zf.open("archive/data/0", "w", force_zip64=True) as fh:
            zeros(fh)
    assert p.stat().st_size < (2 << 20)
    rc, msg = limited_run([m, "--output", tmp_path / "o", "--folds", "0"], limit_as=1 << 30)
    line = one_line(rc, msg)
    assert "tensor network_weights.decoder.seg_layers.1.weight" in line


def test_refuses_missing_storage_and_bad_persistent_id(tmp_path):
    m = copy_model(tmp_path)
    p = m / "fold_0" / "checkpoint_final.pth"
    write_archive(p, nnunet_checkpoint({"w": _Tensor(_Storage("7", 1), 0, [1], [1])}), {})
    assert "storage data/7 is missing" in refused(tmp_path, m, "--folds", "0")
    write_archive(p, nnunet_checkpoint({"w": _Tensor(_Storage("0", "many"), 0, [1], [1])}), {"0": b"\0" * 4})
    assert "unknown persistent id" in refused(tmp_path, m, "--folds", "0")


def test_refuses_checkpoint_fields(tmp_path):
    m = copy_model(tmp_path)
    p = m / "fold_0" / "checkpoint_final.pth"
    ck = conv.load_checkpoint(p)
    ck["inference_allowed_mirroring_axes"] = "012"
    torch.save(ck, p)
    assert "inference_allowed_mirroring_axes" in refused(tmp_path, m, "--folds", "0")
    ck["inference_allowed_mirroring_axes"] = (0, 1, 2)
    ck["trainer_name"] = ["nnUNetTrainer"]
    torch.save(ck, p)
    assert "trainer_name" in refused(tmp_path, m, "--folds", "0")


def test_refuses_huge_pickle_string(tmp_path):
    """A pickle that asks for 2^40 bytes of string: refused, not allocated."""
    m = copy_model(tmp_path)
    p = m / "fold_0" / "checkpoint_final.pth"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("archive/data.pkl", b"\x80\x04\x8e" + (1 << 40).to_bytes(8, "little") + b"x")
    line = refused(tmp_path, m, "--folds", "0")
    assert "checkpoint_final.pth" in line


def test_refuses_damaged_archive(tmp_path):
    """A deflated data.pkl with a damaged stream, a bad CRC, a zip directory cut short:
    one line each (zlib.error, BadZipFile, struct.error are all the archive's fault)."""
    m = copy_model(tmp_path)
    p = m / "fold_0" / "checkpoint_final.pth"
    good = p.read_bytes()
    with zipfile.ZipFile(io.BytesIO(good)) as zf:
        entries = [(i.filename, zf.read(i)) for i in zf.infolist()]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in entries:
            zf.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED if name.endswith("data.pkl")
                        else zipfile.ZIP_STORED)
    raw = bytearray(buf.getvalue())
    start = raw.index(b"data.pkl") + len("data.pkl")
    for i in range(start + 20, start + 60):
        raw[i] ^= 0x5A
    p.write_bytes(bytes(raw))
    assert "checkpoint_final.pth: data.pkl: cannot be read" in refused(tmp_path, m, "--folds", "0")
    p.write_bytes(good[: len(good) - 30])
    assert "not a PyTorch checkpoint archive" in refused(tmp_path, m, "--folds", "0")


def test_weights_cap_against_available_memory(tmp_path, monkeypatch):
    m = copy_model(tmp_path)
    monkeypatch.setattr(inputs, "available_memory", lambda: 1000)
    line = refused(tmp_path, m, "--folds", "0")
    assert "network_weights" in line and "more than half the memory available" in line


# ---- plans against the checkpoint, before the network exists --------------------------
def test_large_plans_network_compared_before_it_is_built(tmp_path):
    """features_per_stage of 4096 would be a 1.8 GB network; the checkpoint's shapes
    refuse it first, and nothing of that size is allocated."""
    m = copy_model(tmp_path)
    edit_json(m / "plans.json", lambda p: conf3d(p)["architecture"]["arch_kwargs"].update(
        features_per_stage=[4, 8, 4096]))
    rc, msg = limited_run([m, "--output", tmp_path / "o", "--folds", "0"], limit_as=1 << 30)
    line = one_line(rc, msg)
    assert "checkpoint_final.pth: weight" in line and "4096" in line and "shape" in line


def test_meta_network_has_the_real_shapes():
    """The network built on the meta device has the state_dict of the real one."""
    from swi import _nnunet_nets as nets

    for model in (M3D, M2D, "Dataset991_SwiTinyMR/nnUNetTrainer__nnUNetResEncUNetMPlans__3d_fullres"):
        plans = json.loads((DATA / model / "plans.json").read_text())
        conf = conv.resolve_configuration(plans, model.split("__")[-1], Path("plans.json"))
        a = conf["architecture"]
        real = nets.build_network(a["network_class_name"], a["arch_kwargs"], 2, 3)
        meta = nets.build_network(a["network_class_name"], a["arch_kwargs"], 2, 3, device="meta")
        assert {k: tuple(v.shape) for k, v in real.state_dict().items()} == \
            {k: tuple(v.shape) for k, v in meta.state_dict().items()}
        assert all(v.is_meta for v in meta.state_dict().values())
        assert math.prod(conf["patch_size"]) > 0
