"""Gradients through swi (MONAI's differentiable result), and the argument checks MONAI
makes: each case here failed or was silently accepted before."""

import numpy as np
import pytest
import torch

import swi
from reference import sliding_window


def _conv(seed=0, cin=2, cout=3):
    torch.manual_seed(seed)
    return torch.nn.Conv3d(cin, cout, 3, padding=1).double()


@pytest.mark.parametrize("mode,pad", [("constant", "constant"), ("gaussian", "replicate"), ("gaussian", "circular")])
def test_gradients_equal_a_plain_torch_reference(mode, pad):
    """d(loss)/d(input) and d(loss)/d(weights) through swi equal those through an
    independent whole-volume PyTorch implementation of MONAI's algorithm."""
    net = _conv()
    x = torch.rand(2, 2, 13, 9, 6, dtype=torch.float64, requires_grad=True)
    roi, ov = (8, 6, 8), 0.4  # the last axis is padded
    out = swi.sliding_window_inference(x, roi, 3, net, ov, mode, padding_mode=pad)
    assert out.requires_grad and out.dtype == torch.float64 and out.shape == (2, 3, 13, 9, 6)
    with torch.no_grad():
        streamed = swi.sliding_window_inference(x.detach(), roi, 3, net, ov, mode, padding_mode=pad)
    torch.testing.assert_close(out.detach(), streamed, rtol=1e-5, atol=1e-5)
    g = torch.rand_like(out)
    (out * g).sum().backward()
    gx, gw = x.grad.clone(), net.weight.grad.clone()

    x2 = x.detach().clone().requires_grad_(True)
    net.zero_grad()
    ref = _torch_reference(x2, roi, 3, net, ov, mode, pad)
    torch.testing.assert_close(out.detach(), ref.detach(), rtol=1e-6, atol=1e-8)
    (ref * g).sum().backward()
    torch.testing.assert_close(gx, x2.grad, rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(gw, net.weight.grad, rtol=1e-6, atol=1e-8)


def _torch_reference(x, roi, sw, net, overlap, mode, pad):
    """MONAI's steps written out with torch ops (the golden README's algorithm)."""
    S = x.shape[2:]
    pads = []
    for k in reversed(range(3)):
        t = max(roi[k] - S[k], 0)
        pads += [t // 2, t - t // 2]
    xp = torch.nn.functional.pad(x, pads, mode=pad) if any(pads) else x
    P = xp.shape[2:]
    starts = []
    for k in range(3):
        r = roi[k]
        step = r if r == P[k] else max(int(r * (1 - overlap)), 1)
        n = 0
        while n * step + r < P[k]:
            n += 1
        starts.append(sorted({min(t * step, P[k] - r) for t in range(n + 1)}))
    if mode == "gaussian":
        ax = [torch.exp(-((torch.arange(r, dtype=torch.float64) - (r - 1) / 2) ** 2) / (2 * (0.125 * r) ** 2))
              for r in roi]
        w = (ax[0][:, None, None] * ax[1][None, :, None] * ax[2][None, None, :]).float()
        w = torch.clamp(w, min=max(float(w.min()), 1e-3)).double()
    else:
        w = torch.ones(roi, dtype=torch.float64)
    acc = torch.zeros((x.shape[0], 3) + tuple(P), dtype=torch.float64)
    cnt = torch.zeros(tuple(P), dtype=torch.float64)
    wins = [(b, i, j, k) for b in range(x.shape[0]) for i in starts[0] for j in starts[1] for k in starts[2]]
    for c in range(0, len(wins), sw):
        chunk = wins[c:c + sw]
        out = net(torch.cat([xp[b:b + 1, :, i:i + roi[0], j:j + roi[1], k:k + roi[2]] for b, i, j, k in chunk]))
        for n, (b, i, j, k) in enumerate(chunk):
            acc[b:b + 1, :, i:i + roi[0], j:j + roi[1], k:k + roi[2]] = (
                acc[b:b + 1, :, i:i + roi[0], j:j + roi[1], k:k + roi[2]] + out[n:n + 1] * w)
            if b == 0:
                cnt[i:i + roi[0], j:j + roi[1], k:k + roi[2]] += w
    r = acc / cnt
    lo = [max(roi[k] - S[k], 0) // 2 for k in range(3)]
    return r[:, :, lo[0]:lo[0] + S[0], lo[1]:lo[1] + S[1], lo[2]:lo[2] + S[2]]


def test_parameters_requiring_grad_give_a_differentiable_result(capsys):
    net = _conv(1).float()
    x = torch.rand(1, 2, 10, 10, 10)
    out = swi.sliding_window_inference(x, 6, 2, net, 0.5)
    assert out.requires_grad
    out.mean().backward()
    assert net.weight.grad is not None and torch.count_nonzero(net.weight.grad) > 0
    with torch.no_grad():
        assert not swi.sliding_window_inference(x, 6, 2, net, 0.5).requires_grad


def test_gradient_path_reductions_and_heads():
    x = torch.rand(1, 1, 12, 10, requires_grad=True)

    def two(d):
        y = torch.cat([d * (c + 1) + c for c in range(3)], 1)
        return {"full": y, "half": y[:, :, ::2, ::2] * 2}

    got = swi.sliding_window_inference(x, 6, 2, two, 0.5, "gaussian", reduce=["argmax", "softmax", "entropy"])
    with torch.no_grad():
        want = swi.sliding_window_inference(x.detach(), 6, 2, two, 0.5, "gaussian",
                                            reduce=["argmax", "softmax", "entropy"])
    assert set(got) == {"full", "half"}
    for h in got:
        assert got[h]["argmax"].dtype == torch.uint8
        assert torch.equal(got[h]["argmax"], want[h]["argmax"])
        torch.testing.assert_close(got[h]["softmax"].detach(), want[h]["softmax"], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got[h]["entropy"].detach(), want[h]["entropy"], rtol=1e-4, atol=1e-5)
        assert got[h]["entropy"].requires_grad
    got["full"]["entropy"].sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_sw_batch_size_must_be_whole():
    x = torch.rand(1, 1, 8, 8)
    with pytest.raises(TypeError, match="sw_batch_size"):
        swi.sliding_window_inference(x, 4, 2.5, lambda d: d)
    with pytest.raises(TypeError, match="sw_batch_size"):
        swi.SlidingWindowInferer(4, 2.5)


def test_buffer_dim_checked_as_monai_does():
    x = torch.rand(1, 1, 8, 8, 8)
    with pytest.raises(ValueError, match="buffer_dim"):
        swi.sliding_window_inference(x, 4, 1, lambda d: d, buffer_steps=2, buffer_dim=5)
    # MONAI checks it only when buffering
    swi.sliding_window_inference(x, 4, 1, lambda d: d, buffer_steps=None, buffer_dim=5)


def test_cval_with_other_padding_refused_when_padding_happens():
    x = torch.rand(1, 1, 6, 6)
    with pytest.raises(ValueError, match="cval"):
        swi.sliding_window_inference(x, 8, 1, lambda d: d, padding_mode="reflect", cval=2.0)
    # no padding needed: MONAI never pads, so no error
    swi.sliding_window_inference(x, 4, 1, lambda d: d, padding_mode="reflect", cval=2.0)


def test_order_letters_get_a_clear_error():
    x = np.zeros((1, 1, 8, 8, 8), np.float32)
    with pytest.raises(ValueError, match="permutation of the spatial axes"):
        swi.sliding_window_inference(x, 4, 1, lambda d: d, order="zyx")
    with pytest.raises(ValueError, match="permutation"):
        swi.SlidingWindowInferer(4, order="zyx")
    got = swi.sliding_window_inference(x + 1, 4, 1, lambda d: d * 2, order=(2, 1, 0))
    assert np.all(got == 2)


def test_inferer_validates_at_construction():
    with pytest.raises(ValueError, match="mode"):
        swi.SlidingWindowInferer(4, mode="bogus")
    with pytest.raises(ValueError, match="padding_mode"):
        swi.SlidingWindowInferer(4, padding_mode="bogus")
    with pytest.raises(ValueError, match="overlap"):
        swi.SlidingWindowInferer(4, overlap=1.0)
    with pytest.raises(ValueError, match="reduce"):
        swi.SlidingWindowInferer(4, reduce="median")
    with pytest.raises(ValueError, match="max_memory"):
        swi.SlidingWindowInferer(4, max_memory="lots")


def test_predictor_keywords_named_like_swi_options_are_forwarded():
    seen = {}

    def net(d, reduce=None, threads=None, order=None, max_memory=None):
        seen.update(reduce=reduce, threads=threads, order=order, max_memory=max_memory)
        return d

    x = torch.rand(1, 1, 8, 8)
    inf = swi.SlidingWindowInferer(4)
    out = inf(x, net, reduce="mine", threads=7, order="o", max_memory=3)
    assert seen == dict(reduce="mine", threads=7, order="o", max_memory=3)
    torch.testing.assert_close(out, x)
    seen.clear()
    swi.sliding_window_inference(x, 4, 1, net, predictor_kwargs={"reduce": "r", "threads": 1})
    assert seen["reduce"] == "r" and seen["threads"] == 1


def test_adaptive_inferer_halves_the_batch_on_device_oom():
    calls = []

    def net(d):
        calls.append(d.shape[0])
        if d.shape[0] > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return d * 3

    x = torch.rand(1, 1, 16, 16)
    inf = swi.SlidingWindowInfererAdapt(4, 8)
    out = inf(x, net)
    torch.testing.assert_close(out, x * 3)
    assert inf.sw_batch_size == 2 and max(calls[-3:]) <= 2
    with pytest.raises(ValueError):  # anything else propagates at once
        swi.SlidingWindowInfererAdapt(4, 2)(x, lambda d: (_ for _ in ()).throw(ValueError("bad")))


def test_a_budget_says_what_it_covers(capsys):
    x = np.random.default_rng(0).random((1, 1, 40, 40, 30), dtype=np.float32)
    swi.sliding_window_inference(x, 16, 2, lambda d: np.concatenate([d, -d], 1), reduce="argmax",
                                 max_memory="64M")
    err = capsys.readouterr().err
    assert "max_memory 64 MiB covers the engine" in err and "not the predictor" in err
    assert "the process peaked at" in err
    p = swi.plan((1, 1, 40, 40, 30), 16, 2, reduce="argmax", out_channels=2, max_memory="64M")
    assert "not the predictor" in p["budget_covers"] and p["bytes_peak"] <= 64 << 20
