"""Every golden case through the Python API, with the predictors in torch."""

import numpy as np
import pytest
import torch

import swi
from conftest import assert_golden_close, assert_labels_match, golden_cases, predictor_for, read_case


def _run(c, inputs, **kw):
    return swi.sliding_window_inference(
        inputs, c["roi_size"], c["sw_batch_size"], predictor_for(c["predictor"], c["out_channels"]),
        overlap=c["overlap"], mode=c["mode"], sigma_scale=c["sigma_scale"], padding_mode=c["padding_mode"],
        cval=c["cval"], **kw)


def test_golden_cases_found():
    assert len(golden_cases()) >= 20


@pytest.mark.parametrize("case", golden_cases(), ids=lambda p: p.name)
def test_golden_torch(case):
    c = read_case(case)
    out = _run(c, torch.from_numpy(c["input"].copy()))
    outs = out if isinstance(out, tuple) else (out,)
    assert len(outs) == c["outputs"]
    for k, (o, e) in enumerate(zip(outs, c["expected"])):
        assert isinstance(o, torch.Tensor) and o.dtype == torch.float32
        assert_golden_close(o.numpy(), e, f"{c['name']} head {k}")


@pytest.mark.parametrize("case", golden_cases(), ids=lambda p: p.name)
def test_golden_argmax(case):
    c = read_case(case)
    out = _run(c, torch.from_numpy(c["input"].copy()), reduce="argmax")
    outs = out if isinstance(out, tuple) else (out,)
    for k, (o, e) in enumerate(zip(outs, c["expected"])):
        assert o.shape == (e.shape[0], 1) + e.shape[2:]
        assert o.dtype == torch.uint8
        assert_labels_match(o.numpy(), e, f"{c['name']} head {k}")


@pytest.mark.parametrize("case", golden_cases(), ids=lambda p: p.name)
def test_golden_auto_order(case):
    """The planner's order changes nothing but the order of the calls."""
    c = read_case(case)
    out = _run(c, torch.from_numpy(c["input"].copy()), order="auto", threads=2)
    outs = out if isinstance(out, tuple) else (out,)
    for k, (o, e) in enumerate(zip(outs, c["expected"])):
        assert_golden_close(o.numpy(), e, f"{c['name']} head {k}")


@pytest.mark.parametrize("case", golden_cases()[:8], ids=lambda p: p.name)
def test_golden_numpy_float64(case):
    """numpy in, numpy out, in the input's float dtype (MONAI's compute dtype)."""
    c = read_case(case)
    fn = predictor_for(c["predictor"], c["out_channels"])

    def np_pred(x):
        assert isinstance(x, np.ndarray) and x.dtype == np.float64
        r = fn(torch.from_numpy(x.astype(np.float32)))
        return tuple(t.numpy() for t in r) if isinstance(r, tuple) else r.numpy()

    out = swi.sliding_window_inference(
        c["input"].astype(np.float64), c["roi_size"], c["sw_batch_size"], np_pred, overlap=c["overlap"],
        mode=c["mode"], sigma_scale=c["sigma_scale"], padding_mode=c["padding_mode"], cval=c["cval"])
    outs = out if isinstance(out, tuple) else (out,)
    for k, (o, e) in enumerate(zip(outs, c["expected"])):
        assert isinstance(o, np.ndarray) and o.dtype == np.float64
        assert_golden_close(o, e, f"{c['name']} head {k}")
