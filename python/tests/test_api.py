"""The Python API: MONAI drop-in behaviour, reductions, errors, memory."""

import gc
import signal
import sys
import threading

import numpy as np
import pytest
import torch

import swi
from conftest import assert_golden_close, assert_labels_match
from reference import reductions, sliding_window, starts


def affine(x):
    s = x.sum(1, keepdim=True) if isinstance(x, torch.Tensor) else x.sum(1, keepdims=True)
    cat = torch.cat if isinstance(x, torch.Tensor) else np.concatenate
    return cat([s * (c + 1) + 0.25 * c for c in range(4)], 1)


def noisy(C, seed=0):
    """Scores with a per-channel random field: windows disagree, so ties are rare."""
    g = np.random.default_rng(seed)
    w = g.standard_normal(C).astype(np.float32)

    def f(x):
        s = x.sum(1, keepdims=True)
        ramp = (np.arange(x.shape[-1], dtype=np.float32) / x.shape[-1]).reshape((1, 1) + (1,) * (x.ndim - 3) + (-1,))
        return np.concatenate([np.sin(s * w[c] * 3 + c) + s * w[c] + ramp * w[(c + 1) % C] for c in range(C)],
                              1).astype(np.float32)

    return f


# ---- the random sweep against the reference semantics ----------------------------------
def _sweep_params(seed):
    g = np.random.default_rng(seed)
    d = int(g.integers(1, 5))  # 1 to 4 spatial dims, as MONAI allows
    S = [int(v) for v in g.integers(3, {4: 11, 3: 24}.get(d, 40), size=d)]
    roi = [int(v) for v in g.integers(1, 8 if d == 4 else 18, size=d)]
    if g.random() < 0.2:
        roi[int(g.integers(0, d))] = -1
    pad = str(g.choice(["constant", "replicate", "circular", "reflect"]))
    cval = float(g.normal()) if pad == "constant" else 0.0  # MONAI (torch's F.pad) refuses others a value
    return dict(shape=(int(g.integers(1, 3)), int(g.integers(1, 3)), *S), roi=roi, sw=int(g.integers(1, 6)),
                overlap=[float(v) for v in g.choice([0.0, 0.25, 0.5, 0.7], size=d)],
                mode=str(g.choice(["constant", "gaussian"])),
                sigma=[float(v) for v in g.choice([0.125, 0.3, 1.0], size=d)],
                pad=pad, cval=cval)


@pytest.mark.parametrize("seed", range(40))
def test_random_sweep_vs_reference(seed):
    p = _sweep_params(seed)
    if p["pad"] == "reflect":
        S = p["shape"][2:]
        roi = [S[k] if r <= 0 else r for k, r in enumerate(p["roi"])]
        if any(max(r - s, 0) - max(r - s, 0) // 2 >= s for r, s in zip(roi, S)):
            p["pad"] = "replicate"  # reflect needs a pad smaller than the size
    x = np.random.default_rng(seed + 100).standard_normal(p["shape"]).astype(np.float32)
    pred = noisy(3, seed)
    want = sliding_window(x, p["roi"], p["sw"], pred, p["overlap"], p["mode"], p["sigma"], p["pad"], p["cval"])
    got = swi.sliding_window_inference(x, p["roi"], p["sw"], pred, p["overlap"], p["mode"], p["sigma"], p["pad"],
                                       p["cval"], threads=2)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    assert_golden_close(got, want, str(p))
    red = swi.sliding_window_inference(x, p["roi"], p["sw"], pred, p["overlap"], p["mode"], p["sigma"], p["pad"],
                                       p["cval"], reduce=["argmax", "max", "confidence", "entropy"], threads=2)
    ref = reductions(want)
    assert set(red) == {"argmax", "max", "confidence", "entropy"}
    assert red["argmax"].dtype == np.uint8 and red["argmax"].shape == ref["argmax"].shape
    assert_labels_match(red["argmax"], want, "argmax")
    for k in ("max", "confidence", "entropy"):
        assert red[k].dtype == np.float32
        np.testing.assert_allclose(red[k], ref[k], rtol=1e-4, atol=1e-4, err_msg=k)


def test_softmax_reduction():
    x = np.random.default_rng(3).standard_normal((2, 1, 30, 21)).astype(np.float32)
    f = noisy(5)
    full = swi.sliding_window_inference(x, 8, 3, f, 0.5, "gaussian")
    sm = swi.sliding_window_inference(x, 8, 3, f, 0.5, "gaussian", reduce="softmax", threads=2)
    e = np.exp(full - full.max(1, keepdims=True))
    assert sm.shape == full.shape and sm.dtype == np.float32
    np.testing.assert_allclose(sm, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("heads", [1, 2])
def test_windows_in_monai_order_and_chunks(heads):
    """Fixed order: C order over the start grid, then the batch, in sw_batch_size chunks
    (also with several heads, whose run is set up again after the first call)."""
    g = np.random.default_rng(7 + heads)
    for _ in range(60):
        d = int(g.integers(1, 5))
        S = [int(v) for v in g.integers(3, 12 if d == 4 else 30, size=d)]
        roi = [int(v) for v in g.integers(2, 8 if d == 4 else 16, size=d)]
        ov = float(g.choice([0.0, 0.25, 0.5, 0.8]))
        B, sw = int(g.integers(1, 4)), int(g.integers(1, 8))
        seen = []

        def f(w, coords):
            seen.append([(c[0].start,) + tuple(s.start for s in c[2:]) for c in coords])
            return w if heads == 1 else (w, w * 2)

        swi.sliding_window_inference(np.zeros((B, 1, *S), np.float32), roi, sw, f, ov, with_coord=True)
        import itertools

        grid = list(itertools.product(*[starts(S[k], roi[k], ov) for k in range(d)]))
        flat = [(b,) + gg for b in range(B) for gg in grid]
        assert seen == [flat[i:i + sw] for i in range(0, len(flat), sw)], (S, roi, ov, B, sw)


# ---- MONAI drop-in behaviour -------------------------------------------------------------
def test_types_devices_dtypes():
    x = torch.rand(2, 1, 20, 17)
    r = swi.sliding_window_inference(x, 8, 3, affine)
    assert isinstance(r, torch.Tensor) and r.dtype == torch.float32 and r.device == x.device
    r64 = swi.sliding_window_inference(x.double(), 8, 3, affine)
    assert r64.dtype == torch.float64
    torch.testing.assert_close(r64.float(), r, rtol=1e-5, atol=1e-5)
    rn = swi.sliding_window_inference(x.numpy(), 8, 3, affine)
    assert isinstance(rn, np.ndarray) and rn.dtype == np.float32
    np.testing.assert_allclose(rn, r.numpy(), rtol=1e-6)
    r16 = swi.sliding_window_inference(x.half(), 8, 3, lambda w: affine(w.float()).half())
    assert r16.dtype == torch.float16
    ri = swi.sliding_window_inference((x * 10).int(), 8, 3, affine)
    assert ri.dtype == torch.float32  # non-float inputs compute (and come back) in float32


def test_device_argument_and_sw_device():
    x = torch.rand(1, 1, 12, 12)
    seen = []
    r = swi.sliding_window_inference(x, 5, 2, lambda w: seen.append(w.device) or w, sw_device="cpu",
                                     device="cpu")
    assert r.device.type == "cpu" and all(d.type == "cpu" for d in seen)


def test_roi_fallback_and_int_roi():
    x = torch.rand(1, 2, 9, 13, 5)
    r = swi.sliding_window_inference(x, (4, -1, 0), 3, lambda w: w + 1)
    torch.testing.assert_close(r, x + 1)
    r = swi.sliding_window_inference(x, 4, 3, lambda w: w * 2)
    torch.testing.assert_close(r, x * 2)


def test_tuple_and_dict_outputs_with_zoomed_heads():
    x = torch.ones(1, 6, 20, 20)

    def tup(d):
        return d + 1, d[:, ::3, ::2, ::2] + 2, d[:, ::2, ::4, ::4] + 3

    def dct(d):
        return {"b": d[:, ::3, ::2, ::2] + 2, "a": d + 1}

    r = swi.sliding_window_inference(x, (8, 8), 10, tup, 0.5)
    assert isinstance(r, tuple) and [t.shape for t in r] == [(1, 6, 20, 20), (1, 2, 10, 10), (1, 3, 5, 5)]
    for t, v in zip(r, (2.0, 3.0, 4.0)):
        torch.testing.assert_close(t, torch.full_like(t, v))
    rd = swi.sliding_window_inference(x, (8, 8), 10, dct, 0.5)
    assert isinstance(rd, dict) and list(rd) == ["a", "b"]
    assert rd["a"].shape == (1, 6, 20, 20) and rd["b"].shape == (1, 2, 10, 10)
    one = swi.sliding_window_inference(x, (8, 8), 10, lambda d: [d + 1], 0.5)
    assert isinstance(one, torch.Tensor)  # a one-element sequence unpacks, as in MONAI
    lab = swi.sliding_window_inference(x, (8, 8), 10, tup, 0.5, reduce="argmax")
    assert isinstance(lab, tuple) and lab[1].shape == (1, 1, 10, 10)


def test_multi_head_predictor_called_once_per_window():
    calls = []

    def f(d):
        calls.append(d.shape[0])
        return d * 2, d[:, :, ::2, ::2]

    x = torch.rand(2, 1, 16, 16)
    r = swi.sliding_window_inference(x, 8, 3, f, 0.5)
    n = 2 * len(starts(16, 8, 0.5)) ** 2
    assert sum(calls) == n and calls == [3] * (n // 3) + ([n % 3] if n % 3 else [])
    torch.testing.assert_close(r[0], x * 2)


def test_args_kwargs_and_stateful_predictor():
    class Pred:
        add = 1

        def __call__(self, data, t1, test2=None):
            self.add += 1
            return data + self.add + t1 + test2

    x = torch.ones(1, 1, 7, 7)
    r = swi.sliding_window_inference(x, (3, 3), 10, Pred(), 0.5, "constant", 1.0, "constant", -1, None, None,
                                     False, None, None, None, -1, False, torch.ones(1), test2=torch.ones(1))
    # MONAI's test_sigma expectation (+2 for the two extra arguments)
    want = np.array([3.0, 3.0, 3.3333, 3.6667, 4.3333, 4.5, 5.0]) + 2
    np.testing.assert_allclose(r[0, 0, :, 0].numpy(), want, rtol=1e-4)


def test_with_coord_slices_are_monai_slices():
    x = torch.rand(2, 1, 5, 11)  # roi larger than the image along dim 0: padded coordinates
    got = []

    def f(w, coords):
        for c, win in zip(coords, w):
            got.append((c, win.clone()))
        return w

    swi.sliding_window_inference(x, (8, 4), 3, f, with_coord=True)
    xp = torch.nn.functional.pad(x, (0, 0, 1, 2))
    for c, win in got:
        assert len(c) == 4 and c[1] == slice(None)
        torch.testing.assert_close(xp[tuple(c)][0], win)


def test_roi_weight_map_is_used():
    x = torch.rand(1, 1, 16, 16)
    w = torch.rand(6, 6) + 0.1
    r = swi.sliding_window_inference(x, 6, 4, lambda d: d * 3, 0.5, roi_weight_map=w)
    torch.testing.assert_close(r, x * 3)  # any map blends a constant-factor predictor exactly
    f = noisy(2)
    want = None
    got = swi.sliding_window_inference(x.numpy(), 6, 4, f, 0.5, roi_weight_map=w)
    gauss = swi.sliding_window_inference(x.numpy(), 6, 4, f, 0.5, mode="gaussian")
    assert not np.allclose(got, gauss)  # the map changed the blend
    del want


def test_process_fn_as_monai_applies_it():
    x = torch.rand(1, 1, 16, 16)
    seen = []

    def process(seg, win, imp):
        seen.append(imp.shape)
        return [s * 2 for s in seg], imp

    r = swi.sliding_window_inference(x, 8, 2, lambda d: d + 1, 0.5, mode="gaussian", process_fn=process)
    assert seen and seen[0] == (8, 8)
    torch.testing.assert_close(r, (x + 1) * 2)

    # a different (constant) weight map from process_fn: MONAI's count uses the first call's map
    def process_const(seg, win, imp):
        return seg, torch.ones_like(imp)

    f = noisy(2)
    tf = lambda d: torch.from_numpy(f(d.numpy()))  # noqa: E731
    r1 = swi.sliding_window_inference(x, 8, 2, tf, 0.5, mode="gaussian", process_fn=process_const)
    r2 = swi.sliding_window_inference(x, 8, 2, tf, 0.5, mode="constant")
    torch.testing.assert_close(r1, r2, rtol=1e-4, atol=1e-5)


def test_callable_reduce_receives_regions():
    x = torch.rand(2, 1, 30, 21)
    f = noisy(3)
    tf = lambda d: torch.from_numpy(f(d.numpy()))  # noqa: E731
    full = swi.sliding_window_inference(x, 8, 4, tf, 0.25, mode="gaussian")
    out = torch.zeros(2, 1, 30, 21, dtype=torch.long)
    lock = threading.Lock()
    covered = torch.zeros(2, 30, 21, dtype=torch.int32)

    def mine(scores, region):
        assert scores.shape[:2] == (1, 3) and isinstance(region, swi.Region)
        with lock:
            out[region.index] = scores.argmax(1, keepdim=True)
            covered[(region.image,) + region.slices] += 1

    assert swi.sliding_window_inference(x, 8, 4, tf, 0.25, mode="gaussian", reduce=mine, threads=2) is None
    assert (covered == 1).all()
    assert_labels_match(out.numpy(), full.numpy())
    both = swi.sliding_window_inference(x, 8, 4, tf, 0.25, mode="gaussian", reduce=["max", mine])
    assert set(both) == {"max", "mine"} and both["mine"] is None


def test_many_classes_label_dtypes():
    x = np.random.default_rng(1).standard_normal((1, 1, 9, 10)).astype(np.float32)
    f = noisy(300)
    full = swi.sliding_window_inference(x, 5, 4, f)
    lab = swi.sliding_window_inference(x, 5, 4, f, reduce="argmax")
    assert lab.dtype == np.uint16
    assert_labels_match(lab, full)
    labt = swi.sliding_window_inference(torch.from_numpy(x), 5, 4, lambda d: torch.from_numpy(f(d.numpy())),
                                        reduce="argmax")
    assert labt.dtype == torch.int32
    np.testing.assert_array_equal(labt.numpy(), lab.astype(np.int32))


def test_max_memory_and_plan():
    x = torch.rand(1, 1, 64, 64, 32)
    p = swi.plan(x, 32, 4, mode="gaussian", reduce="argmax", out_channels=8, threads=2)
    assert p["windows_per_axis"] == (3, 3, 1) and p["windows_total"] == 9
    assert p["bytes_peak"] == sum(p[k] for k in ("bytes_input", "bytes_windows", "bytes_partial",
                                                 "bytes_outputs", "bytes_scratch"))
    assert swi.plan((1, 1, 64, 64, 32), 32, 4, reduce="argmax", out_channels=8)["windows_total"] == 9
    with pytest.raises(swi.BudgetError, match="at least"):
        swi.sliding_window_inference(x, 32, 4, lambda d: d.repeat(1, 8, 1, 1, 1), reduce="argmax",
                                     max_memory="1M")
    lab = swi.sliding_window_inference(x, 32, 4, lambda d: d.repeat(1, 8, 1, 1, 1), reduce="argmax",
                                       max_memory=p["bytes_min"] + (1 << 20))
    assert lab.shape == (1, 1, 64, 64, 32)
    with pytest.raises(swi.BudgetError):
        swi.plan(x, 32, 4, reduce="argmax", out_channels=8, max_memory=1000)


def test_inferer_classes():
    x = torch.rand(1, 1, 20, 20)
    inf = swi.SlidingWindowInferer(8, 4, 0.5, "gaussian")
    torch.testing.assert_close(inf(x, lambda d, k: d * k, 3.0), x * 3)
    lab = swi.SlidingWindowInferer(8, 4, reduce="argmax")(x, lambda d: torch.cat([d, 1 - d], 1))
    torch.testing.assert_close(lab.long(), (x < 0.5).long())
    red = swi.SlidingWindowInfererReduced(8, 4, reduction_fn=lambda s: s.argmax(1), output_dtype=torch.uint8)
    out = red(x, lambda d: torch.cat([d, 1 - d], 1))
    assert out.dtype == torch.uint8 and out.shape == (1, 1, 20, 20)
    torch.testing.assert_close(out.long(), (x < 0.5).long())
    dflt = swi.SlidingWindowInfererReduced(8, 4)(x, lambda d: torch.cat([d, 1 - d], 1))
    assert dflt.dtype == torch.uint8


def test_progress_line_without_tqdm(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import fails
    swi.sliding_window_inference(np.zeros((1, 1, 10, 10), np.float32), 4, 2, lambda d: d, progress=True)
    assert "windows" in capsys.readouterr().err


def test_progress_tqdm():
    pytest.importorskip("tqdm")
    swi.sliding_window_inference(np.zeros((1, 1, 10, 10), np.float32), 4, 2, lambda d: d, progress=True)


# ---- errors ------------------------------------------------------------------------------
class Boom(Exception):
    pass


def test_exception_propagates_unchanged():
    n = {"calls": 0}

    def bad(d):
        n["calls"] += 1
        if n["calls"] == 3:
            raise Boom("third call")
        return d

    with pytest.raises(Boom, match="third call") as ei:
        swi.sliding_window_inference(torch.rand(1, 1, 30, 30), 8, 1, bad)
    assert ei.traceback[-1].name == "bad"  # the original traceback, down to the raise
    assert n["calls"] == 3


def test_exception_in_region_callback():
    def mine(scores, region):
        raise Boom("region")

    with pytest.raises(Boom, match="region"):
        swi.sliding_window_inference(torch.rand(1, 1, 30, 30), 8, 2, lambda d: d, reduce=mine, threads=2)


@pytest.mark.parametrize("bad,match", [
    (lambda d: d[:1], r"expected \[2, channels"),
    (lambda d: d[0], r"expected \[\d+, channels"),
    (lambda d: "nope", "tensor"),
    (lambda d: d.to(torch.complex64), "dtype"),
])
def test_wrong_outputs_give_value_errors(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        swi.sliding_window_inference(torch.rand(1, 1, 12, 12), 6, 2, bad)


def test_shape_change_between_calls():
    n = {"c": 0}

    def f(d):
        n["c"] += 1
        return d if n["c"] == 1 else torch.cat([d, d], 1)

    with pytest.raises(ValueError, match="first call"):
        swi.sliding_window_inference(torch.rand(1, 1, 12, 12), 6, 1, f)


def test_argument_errors():
    x = torch.rand(1, 1, 8, 8)
    with pytest.raises(ValueError, match="overlap"):
        swi.sliding_window_inference(x, 4, 1, lambda d: d, overlap=1.0)
    with pytest.raises(ValueError, match="mode"):
        swi.sliding_window_inference(x, 4, 1, lambda d: d, mode="bilinear")
    with pytest.raises(ValueError, match="spatial dims"):
        swi.sliding_window_inference(torch.rand(1, 1, 4, 4, 4, 4, 4), 2, 1, lambda d: d)
    with pytest.raises(ValueError, match="reduce"):
        swi.sliding_window_inference(x, 4, 1, lambda d: d, reduce="median")
    xg = torch.rand(1, 1, 8, 8, requires_grad=True)
    with torch.no_grad():  # the streamed path: no graph, no gradient
        assert not swi.sliding_window_inference(xg, 4, 1, lambda d: d).requires_grad


def test_keyboard_interrupt_stops_promptly():
    n = {"c": 0}

    def f(d):
        n["c"] += 1
        if n["c"] == 2:
            signal.raise_signal(signal.SIGINT)  # as a Ctrl-C during the network call
        return d

    with pytest.raises(KeyboardInterrupt):
        swi.sliding_window_inference(torch.rand(1, 1, 64, 64), 8, 1, f, 0.5)
    assert n["c"] <= 3


# ---- reference counts and leaks ----------------------------------------------------------
def test_refcounts_stable():
    x = np.random.rand(1, 1, 12, 12).astype(np.float32)

    def pred(d):
        return d

    before = (sys.getrefcount(x), sys.getrefcount(pred))
    for _ in range(50):
        r = swi.sliding_window_inference(x, 5, 2, pred)
    del r
    for _ in range(20):
        with pytest.raises(Boom):
            swi.sliding_window_inference(x, 5, 2, lambda d: (_ for _ in ()).throw(Boom()))
    gc.collect()
    assert (sys.getrefcount(x), sys.getrefcount(pred)) == before


def _rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_no_growth_over_1000_calls():
    import tracemalloc

    x = torch.rand(1, 2, 16, 12)
    xn = x.numpy()

    def heads(d):
        return d * 2, d[:, :1, ::2, ::2]

    def one_round(i):
        r = swi.sliding_window_inference(x if i % 2 else xn, 6, 3, heads if i % 3 == 0 else affine, 0.25,
                                         "gaussian", reduce=None if i % 4 else ["argmax", "entropy"])
        if i % 5 == 0:
            try:
                swi.sliding_window_inference(xn, 6, 3, lambda d: 1 / 0)
            except ZeroDivisionError:
                pass
        return r

    for i in range(100):  # warm caches
        one_round(i)
    gc.collect()
    tracemalloc.start()
    rss0 = _rss_kb()
    snap0 = tracemalloc.take_snapshot()
    for i in range(1000):
        one_round(i)
    gc.collect()
    snap1 = tracemalloc.take_snapshot()
    rss1 = _rss_kb()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in snap1.compare_to(snap0, "filename"))
    assert grown < 256 * 1024, f"Python allocations grew by {grown} bytes"
    assert rss1 - rss0 < 16 * 1024, f"RSS grew by {rss1 - rss0} kB"


def test_results_outlive_nothing_else():
    """A result array keeps the engine's buffer alive by itself."""
    r = swi.sliding_window_inference(np.ones((1, 1, 8, 8), np.float32), 4, 1, lambda d: d * 5)
    t = torch.from_numpy(swi.sliding_window_inference(np.ones((1, 1, 8, 8), np.float32), 4, 1, lambda d: d))
    gc.collect()
    assert float(r.sum()) == 5 * 64 and float(t.sum()) == 64


def test_ctrl_c_from_outside_stops_the_run():
    """SIGINT arriving while the engine works (GIL released) ends the run promptly."""
    import os
    import time

    calls = {"n": 0}

    def slow(d):
        calls["n"] += 1
        time.sleep(0.02)
        return d.repeat(1, 8, 1, 1)

    x = torch.rand(1, 1, 200, 200)
    total = len(starts(200, 16, 0.5)) ** 2
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            swi.sliding_window_inference(x, 16, 1, slow, 0.5, reduce="argmax", threads=2)
    finally:
        timer.cancel()
    assert calls["n"] < total and time.monotonic() - t0 < 5


def test_budget_run_predicts_every_window_once():
    x = torch.rand(2, 1, 40, 36, 20)
    seen = []

    def f(d, coords):
        seen.extend((c[0].start,) + tuple(s.start for s in c[2:]) for c in coords)
        return torch.cat([d * (k + 1) + k for k in range(6)], 1)

    p = swi.plan(x, 16, 5, mode="gaussian", reduce="max", out_channels=6, threads=2)
    free = swi.sliding_window_inference(x, 16, 5, f, 0.25, "gaussian", with_coord=True, reduce="max")
    n = len(seen)
    seen.clear()
    tight = swi.sliding_window_inference(x, 16, 5, f, 0.25, "gaussian", with_coord=True, reduce="max",
                                         threads=2, max_memory=p["bytes_min"] + 4096)
    assert len(seen) == n == len(set(seen)) == p["windows_total"]
    torch.testing.assert_close(tight, free, rtol=1e-5, atol=1e-5)


def test_copy_failure_propagates():
    """An output that cannot be copied (a meta tensor has no data) fails the run cleanly."""
    with pytest.raises((RuntimeError, NotImplementedError, ValueError)):
        swi.sliding_window_inference(torch.rand(1, 1, 12, 12), 6, 2, lambda d: torch.empty_like(d, device="meta"))
    r = swi.sliding_window_inference(torch.rand(1, 1, 12, 12), 6, 2, lambda d: d)  # still usable
    assert r.shape == (1, 1, 12, 12)


def test_missing_system_library_names_its_package(monkeypatch, tmp_path):
    """import swi on a machine without one of the wheel's system libraries names the Debian
    package to install (the wheel's record of them, swi/_libs.json)."""
    import importlib

    from swi import _libs

    def fail(name):
        raise ImportError("libhdf5_serial.so.103: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(_libs, "manifest", lambda: {"system": {"libhdf5_serial.so.103": "libhdf5-103-1"}})
    monkeypatch.setattr(importlib, "import_module", fail)
    with pytest.raises(ImportError, match=r"libhdf5_serial\.so\.103 is missing \(apt-get install libhdf5-103-1"):
        _libs.load()
