"""The differentiable path: MONAI's sliding-window result built from PyTorch operations.

Used when gradients must flow (the input or the predictor's parameters require grad and
grad mode is on). The engine's windows, weights and blending rule are the same as the
streamed path's (window starts and the weight map come from libswi), but the blended
score volume is held whole, as in MONAI, so autograd can trace every window.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from . import _swi

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover - the path needs torch by definition
    torch = None
    F = None

_warned = False


def needs_grad(inputs, predictor) -> bool:
    """Would MONAI's result carry gradients? Only under grad mode, for a torch input that
    requires grad or a predictor (an nn.Module) with a parameter that does."""
    if torch is None or not torch.is_grad_enabled() or not isinstance(inputs, torch.Tensor):
        return False
    if inputs.requires_grad:
        return True
    params = getattr(predictor, "parameters", None)
    if isinstance(predictor, torch.nn.Module) and callable(params):
        return any(p.requires_grad for p in predictor.parameters())
    return False


def _say_once():
    global _warned
    if not _warned:
        _warned = True
        sys.stderr.write("swi: gradients requested (an input or parameter requires grad): computing with "
                         "PyTorch operations, as MONAI does, not streamed; call under torch.no_grad() to "
                         "stream\n")


def _weights_for(w, shape):
    """w resized to `shape` by nearest-exact sampling (MONAI's rule for zoomed heads)."""
    for k, o in enumerate(shape):
        r = w.shape[k]
        if r != o:
            idx = torch.clamp(torch.floor((torch.arange(o, dtype=torch.float64) + 0.5) * r / o).long(), max=r - 1)
            w = torch.index_select(w, k, idx.to(w.device))
    return w


def run(setup, predictor, sw_device, device, with_coord, process_fn, args, kwargs, flatten, check):
    """The blended, cropped heads as a list of tensors, plus (keys, kind) of the predictor's
    output structure. `setup` is the streamed path's _Setup (already validated)."""
    _say_once()
    x = setup.torch_input
    dims = setup.dims
    image = setup.shape[2:]
    roi = setup.roi
    before = setup.pad_before
    pad = []
    for k in reversed(range(dims)):  # F.pad lists the last dim first
        total = max(roi[k] - image[k], 0)
        pad += [before[k], total - before[k]]
    pm = {0: "constant", 1: "reflect", 2: "replicate", 3: "circular"}[setup.padding_mode]
    if any(pad):
        xp = F.pad(x, pad, mode=pm, value=setup.cval) if pm == "constant" else F.pad(x, pad, mode=pm)
    else:
        xp = x
    padded = tuple(int(v) for v in xp.shape[2:])
    starts = [_swi.window_starts(padded[k], roi[k], setup.overlap[k]) for k in range(dims)]
    grid = np.stack(np.meshgrid(*[np.asarray(s) for s in starts], indexing="ij"), -1).reshape(-1, dims)
    batch = setup.shape[0]
    n_win = grid.shape[0]
    total = batch * n_win
    sw_dev = sw_device if sw_device is not None else x.device
    out_dev = device if device is not None else x.device
    w0 = torch.from_numpy(setup.engine_weights().copy()).to(device=sw_dev, dtype=setup.compute_dtype)
    acc, cnt, zoom, keys, kind, first = None, None, None, None, None, None
    for i0 in range(0, total, setup.sw_batch_size):
        idx = range(i0, min(i0 + setup.sw_batch_size, total))
        sl = []
        for i in idx:
            b, st = i // n_win, grid[i % n_win]
            sl.append([slice(b, b + 1), slice(None)] + [slice(int(st[k]), int(st[k]) + roi[k]) for k in range(dims)])
        data = torch.cat([xp[tuple(s)] for s in sl]).to(sw_dev)
        call = (data, sl) if with_coord else (data,)
        out = predictor(*call, *args, **kwargs)
        k_, kind_, heads = flatten(out)
        w = w0
        if process_fn is not None:
            heads, w = process_fn(heads, data, w0)
            heads = tuple(heads)
            w = torch.as_tensor(w, device=sw_dev).reshape(roi)
        heads = [check(h, j, len(sl)) for j, h in enumerate(heads)]
        if first is None:
            keys, kind, first = k_, kind_, [tuple(h.shape[1:]) for h in heads]
            zoom = [[h.shape[2 + k] / roi[k] for k in range(dims)] for h in heads]
            acc = [torch.zeros((batch, h.shape[1]) + tuple(int(padded[k] * z[k]) for k in range(dims)),
                               dtype=setup.compute_dtype, device=out_dev) for h, z in zip(heads, zoom)]
            # one count map per head, shared by every image: the first call's weights over
            # one image's windows (MONAI's count_map)
            cnt = []
            for h, z, a in zip(heads, zoom, acc):
                wh = _weights_for(w, tuple(h.shape[2:])).to(device=out_dev, dtype=setup.compute_dtype)
                c = torch.zeros((1, 1) + tuple(a.shape[2:]), dtype=setup.compute_dtype, device=out_dev)
                for st in grid:
                    box = tuple([slice(None), slice(None)]
                                + [slice(int(st[k] * z[k]), int((st[k] + roi[k]) * z[k])) for k in range(dims)])
                    c[box] += wh.detach()
                cnt.append(c)
        elif k_ != keys or [tuple(h.shape[1:]) for h in heads] != first:
            raise ValueError("the predictor's outputs changed shape or structure between calls")
        for j, h in enumerate(heads):
            wh = _weights_for(w, tuple(h.shape[2:])).to(device=out_dev, dtype=setup.compute_dtype)
            h = h.to(device=out_dev, dtype=setup.compute_dtype)
            for n, s in enumerate(sl):
                lo = [int(s[2 + k].start * zoom[j][k]) for k in range(dims)]
                hi = [int((s[2 + k].start + roi[k]) * zoom[j][k]) for k in range(dims)]
                win = tuple([s[0], slice(None)] + [slice(a, b) for a, b in zip(lo, hi)])
                acc[j][win] = acc[j][win] + h[n:n + 1] * wh
    results = []
    for j in range(len(acc)):
        r = acc[j] / cnt[j]
        crop = tuple([slice(None), slice(None)]
                     + [slice(int(round(before[k] * zoom[j][k])), int(round((before[k] + image[k]) * zoom[j][k])))
                        for k in range(dims)])
        results.append(r[crop])
    return results, keys, kind


def reduce_torch(scores, kind: str):
    """A named reduction of whole blended scores [B, C, *spatial], differentiable where it
    can be (argmax is not): the streamed path's definitions."""
    if kind == "none":
        return scores
    if kind == "argmax":
        lab = torch.argmax(scores, 1, keepdim=True)
        return lab.to(torch.uint8) if scores.shape[1] <= 256 else lab.to(torch.int32)
    if kind == "max":
        return scores.max(1, keepdim=True).values
    p = torch.softmax(scores, 1)
    if kind == "softmax":
        return p
    if kind == "confidence":
        return p.max(1, keepdim=True).values
    if kind == "entropy":
        return -(p * torch.log(p.clamp_min(torch.finfo(p.dtype).tiny))).sum(1, keepdim=True)
    raise ValueError(f"reduce: unknown reduction {kind!r}")  # pragma: no cover - checked before


def call_custom(fn: Any, scores, head: int, region_cls) -> None:
    """A callable reduce sees each image's whole volume as one region."""
    dims = scores.ndim - 2
    for b in range(scores.shape[0]):
        fn(scores[b:b + 1], region_cls(b, head, (0,) * dims, tuple(int(v) for v in scores.shape[2:])))
