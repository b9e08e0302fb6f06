"""swi against MONAI 1.4 itself, when MONAI is importable (PYTHONPATH=<MONAI 1.4.0 source>).
Skipped otherwise: CI has no MONAI."""

import numpy as np
import pytest
import torch

import swi

monai_utils = pytest.importorskip("monai.inferers.utils", reason="MONAI is not importable")
monai_swi = monai_utils.sliding_window_inference


def _close(a, b):
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _close(a[k], b[k])
        return
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
        return
    assert type(a) is type(b) or (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor))
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def net(x):
    s = x.sum(1, keepdim=True)
    ramp = torch.linspace(0, 1, x.shape[-1], dtype=x.dtype).reshape((1, 1) + (1,) * (x.ndim - 3) + (-1,))
    return torch.cat([torch.sin(s * (c + 1)) + ramp * c for c in range(3)], 1)


@pytest.mark.parametrize("seed", range(25))
def test_random_vs_monai(seed):
    g = np.random.default_rng(seed)
    d = int(g.integers(1, 4))
    S = [int(v) for v in g.integers(4, 20 if d == 3 else 40, size=d)]
    roi = [int(v) for v in g.integers(2, 16, size=d)]
    kw = dict(overlap=[float(v) for v in g.choice([0.0, 0.25, 0.5, 0.6], size=d)],
              mode=str(g.choice(["constant", "gaussian"])), sigma_scale=float(g.choice([0.125, 0.5])),
              padding_mode=str(g.choice(["constant", "replicate", "circular"])), cval=float(g.normal()))
    if kw["padding_mode"] != "constant":
        kw["cval"] = 0.0  # torch 1.13's F.pad refuses a value for the other modes
    x = torch.from_numpy(g.standard_normal((int(g.integers(1, 3)), 2, *S))).to(
        torch.float64 if seed % 3 == 0 else torch.float32)
    sw = int(g.integers(1, 6))
    _close(swi.sliding_window_inference(x, roi, sw, net, **kw), monai_swi(x, roi, sw, net, **kw))


def test_multi_output_zoom_dict_vs_monai():
    x = torch.rand(2, 4, 24, 16)

    def f(d):
        return {"full": net(d), "half": net(d)[:, :, ::2, ::2] * 2, "q": d[:, :1, ::4, ::4]}

    _close(swi.sliding_window_inference(x, 8, 3, f, 0.5, "gaussian"), monai_swi(x, 8, 3, f, 0.5, "gaussian"))


def test_process_fn_and_weight_map_vs_monai():
    x = torch.rand(1, 1, 30, 22)
    w = torch.rand(8, 8) + 0.2

    def proc(seg, win, imp):
        return [s * 2 + 1 for s in seg], imp

    def proc_w(seg, win, imp):
        return seg, imp * 0 + 1.0 + win.mean() * 0

    for kw in (dict(roi_weight_map=w), dict(process_fn=proc, mode="gaussian"), dict(process_fn=proc_w),
               dict(process_fn=proc, roi_weight_map=w)):
        _close(swi.sliding_window_inference(x, 8, 3, net, 0.4, **kw), monai_swi(x, 8, 3, net, 0.4, **kw))


def test_with_coord_vs_monai():
    x = torch.rand(2, 1, 13, 9)

    def f(d, coords):
        return d * (1 + coords[0][2].start) + coords[-1][3].stop

    _close(swi.sliding_window_inference(x, (16, 4), 3, f, with_coord=True),
           monai_swi(x, (16, 4), 3, f, with_coord=True))


def test_metatensor_in_metatensor_out():
    from monai.data import MetaTensor

    x = MetaTensor(torch.rand(1, 1, 12, 12), meta={"filename_or_obj": "a.nii"})
    r = swi.sliding_window_inference(x, 6, 2, net)
    m = monai_swi(x, 6, 2, net)
    assert isinstance(r, MetaTensor) and r.meta.get("filename_or_obj") == "a.nii"
    torch.testing.assert_close(r.as_tensor(), m.as_tensor(), rtol=1e-4, atol=1e-4)


def test_metatensor_argmax_keeps_integer_labels():
    from monai.data import MetaTensor

    x = MetaTensor(torch.rand(1, 2, 12, 10, 8), affine=torch.diag(torch.tensor([2.0, 1.0, 3.0, 1.0])))
    lab = swi.sliding_window_inference(x, 6, 2, net, reduce="argmax")
    assert isinstance(lab, MetaTensor) and lab.dtype == torch.uint8
    torch.testing.assert_close(lab.affine, x.affine)
    with torch.no_grad():
        want = torch.argmax(monai_swi(x, 6, 2, net), 1, keepdim=True)
    assert torch.equal(lab.as_tensor().long(), want.as_tensor())


def test_inferers_are_monai_inferers():
    from monai.inferers import Inferer

    for cls in (swi.SlidingWindowInferer, swi.SlidingWindowInfererAdapt, swi.SlidingWindowInfererReduced):
        assert isinstance(cls(8), Inferer)


def test_gradients_as_monai():
    x = torch.rand(1, 2, 12, 10, 8, requires_grad=True)
    a = swi.sliding_window_inference(x, 6, 3, net, 0.5, "gaussian")
    (a ** 2).sum().backward()
    ga = x.grad.clone()
    x.grad = None
    b = monai_swi(x, 6, 3, net, 0.5, "gaussian")
    (b ** 2).sum().backward()
    torch.testing.assert_close(a.detach(), b.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ga, x.grad, rtol=1e-4, atol=1e-5)
