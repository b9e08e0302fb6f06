"""The predictor adapter: the engine's window batches handed to the user's predictor as
numpy arrays or torch tensors, its outputs checked and handed back to the engine."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ._setup import _Setup, _is_torch

try:  # torch is optional: numpy in, numpy out works without it
    import torch
except ImportError:  # pragma: no cover - exercised only where torch is absent
    torch = None


class _Restart(Exception):
    """Raised from the first predictor call when the run must be set up again with what
    that call revealed (several heads, or a process_fn weight map); the call's outputs
    are kept and served again, so the predictor still sees every window once."""


def _flatten(out):
    """MONAI's structure rules: a tensor, a mapping (keys sorted) or a sequence."""
    if _is_torch(out) or isinstance(out, np.ndarray):
        return None, "single", (out,)
    if isinstance(out, Mapping):
        keys = sorted(out.keys())
        return keys, "dict", tuple(out[k] for k in keys)
    if isinstance(out, (list, tuple)):
        return None, "seq", tuple(out)
    raise TypeError(f"the predictor must return a tensor, a tuple or a dict of tensors, got {type(out).__name__}")


def _resize_nearest(w: np.ndarray, shape: tuple) -> np.ndarray:
    """Nearest-exact resampling (MONAI's for zoomed heads): o reads min(floor((o+.5)*r/o), r-1)."""
    for k, o in enumerate(shape):
        r = w.shape[k]
        if r != o:
            idx = np.minimum(np.floor((np.arange(o) + 0.5) * r / o).astype(np.int64), r - 1)
            w = np.take(w, idx, axis=k)
    return w


def _to_numpy32(x) -> np.ndarray:
    if _is_torch(x):
        return x.detach().to(device="cpu", dtype=torch.float32).contiguous().numpy()
    return np.ascontiguousarray(x, dtype=np.float32)


def _engine_ready(h):
    """h as a float32 C-order numpy array sharing its memory, when it has one (the engine
    then reads it in place, no copy); else h itself, copied by _copy_into."""
    if _is_torch(h):
        t = h.detach()
        if t.device.type == "cpu" and t.dtype == torch.float32 and t.is_contiguous():
            return t.numpy()
        return h
    return h


def _real_scores(h) -> bool:
    """Whether a predictor's output (a tensor or an array) has a dtype the engine takes as
    scores: real numbers (float or integer), not complex, not bool."""
    if _is_torch(h):
        return not (h.is_complex() or h.dtype == torch.bool)
    return bool(np.issubdtype(h.dtype, np.floating) or np.issubdtype(h.dtype, np.integer))


def _copy_into(mv, obj):
    """Write one head of a predictor call into the engine's buffer (float32, C order)."""
    dst = np.frombuffer(mv, dtype=np.float32).reshape(tuple(obj.shape))
    try:
        if _is_torch(obj):
            t = obj.detach()
            if t.device.type == "cpu" and t.dtype != torch.bfloat16:
                np.copyto(dst, t.numpy(), casting="unsafe")  # a plain memcpy: about 2x torch's copy_
            else:
                torch.from_numpy(dst).copy_(t)
            del t
        else:
            np.copyto(dst, obj, casting="unsafe")
    finally:
        del dst  # no view of the engine's buffer may outlive this call


class _Predictor:
    """Adapts the user's predictor to the engine's callback: windows in as numpy/torch on
    sw_device, outputs validated and handed back as (channels, spatial, tensor)."""

    def __init__(self, setup: _Setup, predictor, sw_device, with_coord, process_fn, args, kwargs):
        self.s = setup
        self.fn = predictor
        self.with_coord = with_coord
        self.process_fn = process_fn
        self.args = args
        self.kwargs = kwargs
        self.sw_device = sw_device if sw_device is not None else (setup.in_device if setup.is_torch else None)
        self.staging = None
        if setup.is_torch and self.sw_device is not None and torch.device(self.sw_device).type == "cuda":
            from ._cuda import Staging

            self.staging = Staging(self.sw_device)
        self.first = None  # [(channels, spatial)] of the first call
        self.keys = None
        self.kind = None
        self.restart = False  # set when the first call asks for a second setup
        self.cache = {}  # (image, start) -> [per-head float32 arrays]: first call, replayed after a restart
        self.w_engine = None  # weights the engine blends with (process_fn only)
        self.w_first = None
        self.importance = None
        if process_fn is not None:
            w = setup.engine_weights()
            self.w_engine = w
            if setup.is_torch:
                self.importance = torch.from_numpy(w.copy()).to(device=self.sw_device, dtype=setup.compute_dtype)
            else:
                self.importance = w.astype(setup.compute_dtype)

    # -- the callback ---------------------------------------------------------------------
    def __call__(self, win, images, starts):
        s = self.s
        count = len(images)
        keys = [(images[i], starts[i]) for i in range(count)]
        if self.cache:
            hit = [k in self.cache for k in keys]
            if all(hit):
                entries = [self.cache.pop(k) for k in keys]
                heads = [np.stack([e[h] for e in entries]) for h in range(len(self.first))]
                return [(a.shape[1], a.shape[2:], a) for a in heads]
            if any(hit):
                return self._mixed(win, images, starts, hit)
        x = np.frombuffer(win, dtype=np.float32).reshape((count, s.shape[1]) + s.roi)
        heads = self._predict(x, images, starts)
        if self.restart:
            # MONAI's order replays these outputs, so every window is predicted once. The
            # planner's order starts elsewhere: holding them would cost more memory than
            # calling the predictor on them again.
            if s.order is not None:
                for i, k in enumerate(keys):
                    self.cache[k] = [_to_numpy32(h[i]) for h in heads]
            raise _Restart()
        if self.staging is not None:
            return [(h.shape[1], tuple(h.shape[2:]), a) for h, a in zip(heads, self.staging.to_host(heads))]
        return [(h.shape[1], tuple(h.shape[2:]), _engine_ready(h)) for h in heads]

    def _mixed(self, win, images, starts, hit):
        """A batch partly served from the cache (the budget changed the batch size)."""
        s = self.s
        count = len(images)
        x = np.frombuffer(win, dtype=np.float32).reshape((count, s.shape[1]) + s.roi)
        new = [i for i in range(count) if not hit[i]]
        fresh = self._predict(x[new], [images[i] for i in new], [starts[i] for i in new])
        fresh = [_to_numpy32(h) for h in fresh]
        cached = {i: self.cache.pop((images[i], starts[i])) for i in range(count) if hit[i]}
        out = []
        for h in range(len(self.first)):
            c, sp = self.first[h]
            a = np.empty((count, c) + tuple(sp), np.float32)
            j = 0
            for i in range(count):
                if hit[i]:
                    a[i] = cached[i][h]
                else:
                    a[i] = fresh[h][j]
                    j += 1
            out.append((c, tuple(sp), a))
        return out

    def _predict(self, x, images, starts):
        s = self.s
        count = x.shape[0]
        if self.staging is not None:
            data = self.staging.to_device(np.asarray(x), s.compute_dtype)
        elif s.is_torch:
            data = torch.from_numpy(np.array(x, copy=False)).to(device=self.sw_device, dtype=s.compute_dtype)
        else:
            data = x if s.compute_dtype == np.float32 else x.astype(s.compute_dtype)
        if self.with_coord:
            coords = [[slice(b, b + 1), slice(None)]
                      + [slice(st[k] + s.pad_before[k], st[k] + s.pad_before[k] + s.roi[k]) for k in range(s.dims)]
                      for b, st in zip(images, starts)]
            call_args = (data, coords) + tuple(self.args)
        else:
            call_args = (data,) + tuple(self.args)
        if s.is_torch:
            with torch.no_grad():  # swi never propagates gradients; no graphs kept per window
                out = self.fn(*call_args, **self.kwargs)
        else:
            out = self.fn(*call_args, **self.kwargs)
        keys, kind, heads = _flatten(out)
        w_t = None
        if self.process_fn is not None:
            heads, w_t = self.process_fn(heads, data, self.importance)
            heads = tuple(heads)
        heads = [self._check(h, i, count) for i, h in enumerate(heads)]
        if self.first is None:
            self.first = [(h.shape[1], tuple(h.shape[2:])) for h in heads]
            self.keys, self.kind = keys, kind
            # several heads must be declared; the planner's order and a budget need the
            # real sizes (a plan made with learned sizes under-counts the frontier)
            if len(heads) > 1 or self.s.order is None or self.s.max_memory:
                self.restart = True
        elif len(heads) != len(self.first) or keys != self.keys:
            raise ValueError(f"the predictor returned {len(heads)} outputs{_keys_msg(keys)}; its first call "
                             f"returned {len(self.first)}{_keys_msg(self.keys)}")
        else:
            for i, h in enumerate(heads):
                want = (count,) + (self.first[i][0],) + self.first[i][1]
                if tuple(h.shape) != want:
                    raise ValueError(f"output {i} of the predictor has shape {tuple(h.shape)}; expected {want} "
                                     f"(the first call's, for {count} windows)")
        if self.process_fn is not None:
            heads = self._reweight(heads, w_t)
        return heads

    def _check(self, h, i, count):
        s = self.s
        if not (_is_torch(h) or isinstance(h, np.ndarray)):
            raise ValueError(f"output {i} of the predictor is a {type(h).__name__}; expected a tensor "
                             f"[{count}, channels, *spatial]")
        if h.ndim != s.dims + 2 or h.shape[0] != count:
            raise ValueError(f"output {i} of the predictor has shape {tuple(h.shape)}; expected "
                             f"[{count}, channels, *spatial] ({s.dims} spatial dims, {count} windows)")
        if not _real_scores(h):
            raise ValueError(f"output {i} of the predictor has dtype {h.dtype}; expected a real float "
                             f"{'tensor' if _is_torch(h) else 'array'}")
        return h

    def _reweight(self, heads, w_t):
        """The engine blends with one fixed map; a process_fn map is folded into the outputs
        (out * w_t / w_engine), and the first call's map becomes the engine's (a restart)."""
        w = _to_numpy32(w_t)
        if w.size != int(np.prod(self.s.roi)):
            raise ValueError(f"process_fn returned a weight map of shape {tuple(w.shape)}; expected one that "
                             f"broadcasts to [1, 1, *{self.s.roi}]")
        w = w.reshape(self.s.roi)
        if self.w_first is None:
            self.w_first = w
            if not np.array_equal(w, self.w_engine):
                if not (np.all(np.isfinite(w)) and np.all(w > 0)):
                    raise ValueError("process_fn returned a weight map with values <= 0 or not finite")
                self.restart = True
                self.s.weight_map = w.copy()
                self.w_engine = self.s.weight_map
        if np.array_equal(w, self.w_engine):
            return heads
        out = []
        for h in heads:
            sp = tuple(h.shape[2:])
            ratio = _resize_nearest(w, sp) / _resize_nearest(self.w_engine, sp)
            if _is_torch(h):
                out.append(h * torch.from_numpy(ratio).to(device=h.device, dtype=h.dtype))
            else:
                out.append(h * ratio)
        return out


def _keys_msg(keys):
    return f" (keys {keys})" if keys is not None else ""
