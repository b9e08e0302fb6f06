"""Shared helpers: the golden cases and their predictors (shared/golden/README.md)."""

import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def golden_dir() -> Path:
    """$SWI_GOLDEN_DIR/cases (the CMake setting of that name), else tests/data/golden/cases
    in the repository, else shared/golden/cases above it. Missing cases are a failure,
    not a skip."""
    cands = []
    if os.environ.get("SWI_GOLDEN_DIR"):
        cands.append(Path(os.environ["SWI_GOLDEN_DIR"]) / "cases")
    cands.append(REPO / "tests" / "data" / "golden" / "cases")
    cands += [p / "shared" / "golden" / "cases" for p in REPO.parents]
    for c in cands:
        if c.is_dir() and any(c.iterdir()):
            return c
    raise FileNotFoundError("golden cases not found (looked in: " + ", ".join(map(str, cands)) + ")")


def read_case(d: Path) -> dict:
    kv = {}
    for line in (d / "case.txt").read_text().splitlines():
        parts = line.split()
        if parts:
            kv[parts[0]] = parts[1:]
    c = {
        "name": d.name,
        "dims": int(kv["dims"][0]),
        "batch": int(kv["batch"][0]),
        "in_channels": int(kv["in_channels"][0]),
        "image_size": [int(v) for v in kv["image_size"]],
        "roi_size": [int(v) for v in kv["roi_size"]],
        "sw_batch_size": int(kv["sw_batch_size"][0]),
        "overlap": [float(v) for v in kv["overlap"]],
        "mode": kv["mode"][0],
        "sigma_scale": [float(v) for v in kv["sigma_scale"]],
        "padding_mode": kv["padding_mode"][0],
        "cval": float(kv["cval"][0]),
        "predictor": kv["predictor"][0],
        "out_channels": int(kv["out_channels"][0]),
        "outputs": int(kv["outputs"][0]),
        "tags": kv.get("tags", []),
    }
    shape = [c["batch"], c["in_channels"], *c["image_size"]]
    c["input"] = np.fromfile(d / "input.f32", dtype="<f4").reshape(shape)
    outs = []
    for k in range(c["outputs"]):
        oshape = [int(v) for v in kv[f"output{k}_shape"]]
        f = d / f"output{k}.f32"
        if not f.exists() and k == 0:
            f = d / "output.f32"
        outs.append(np.fromfile(f, dtype="<f4").reshape(oshape))
    c["expected"] = outs
    return c


def golden_cases():
    return sorted(p for p in golden_dir().iterdir() if (p / "case.txt").is_file())


# ---- the golden predictors, in torch --------------------------------------------------
_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def _s(x):
    return x.sum(dim=1, keepdim=True)


def p_affine(x, C):
    s = _s(x)
    return torch.cat([(c + 1) * s + 0.5 * c for c in range(C)], dim=1)


def p_box(x, C):
    d = x.ndim - 2
    m = _POOL[d](_s(x), 3, stride=1, padding=1, count_include_pad=True)
    return torch.cat([(c + 1) * m + 0.1 * c for c in range(C)], dim=1)


def p_coord(x, C):
    d = x.ndim - 2
    s = _s(x)
    roi = x.shape[2:]
    shp0 = [1, 1] + [1] * d
    shp0[2] = roi[0]
    shpl = [1, 1] + [1] * d
    shpl[-1] = roi[-1]
    g0 = (torch.arange(roi[0], dtype=torch.float32) / roi[0]).reshape(shp0)
    gl = (torch.arange(roi[-1], dtype=torch.float32) / roi[-1]).reshape(shpl)
    return torch.cat([s + (c + 1) * g0 - (C - c) * gl for c in range(C)], dim=1)


def p_down2(x, C):
    d = x.ndim - 2
    m = _POOL[d](_s(x), 2, stride=2)
    return torch.cat([(c + 1) * m for c in range(C)], dim=1)


def predictor_for(name, C):
    if name == "pair":
        return lambda x: (p_box(x, C), p_coord(x, C + 1))
    fn = {"affine": p_affine, "box": p_box, "coord": p_coord, "down2": p_down2}[name]
    return lambda x: fn(x, C)


def assert_golden_close(got, expected, what=""):
    got = np.asarray(got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    err = np.abs(got - expected) - (1e-4 + 1e-4 * np.abs(expected))
    bad = int((err > 0).sum())
    assert bad == 0, f"{what}: {bad} values outside the golden tolerance (max |diff| {np.abs(got - expected).max()})"


def assert_labels_match(labels, scores, what=""):
    """Labels equal argmax over channels of scores except at near-ties (< 1e-4)."""
    labels = np.asarray(labels).astype(np.int64)
    top2 = np.sort(scores, axis=1)[:, -2:] if scores.shape[1] > 1 else None
    want = scores.argmax(axis=1)[:, None]
    ok = labels == want
    if top2 is not None:
        ok |= (top2[:, 1:2] - top2[:, 0:1]) < 1e-4
    assert ok.all(), f"{what}: {int((~ok).sum())} labels differ from argmax"
