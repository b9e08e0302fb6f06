"""The Python side of swi: argument handling, numpy/torch conversion, result packing.

All sliding-window work (padding, window gathering, blending, reductions) happens in
libswi through swi._swi; this module only converts between Python objects and the
float32 buffers the engine reads and writes.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import numpy as np

from . import _autograd, _swi

try:  # torch is optional: numpy in, numpy out works without it
    import torch
except ImportError:  # pragma: no cover - exercised only where torch is absent
    torch = None

__all__ = ["sliding_window_inference", "plan", "Region", "BudgetError", "MAX_DIMS"]

# The public API's types (for annotations; torch stays optional at run time).
ArrayLike = Any  # a numpy array or a torch tensor, [batch, channels, *spatial]
Sizes = Union[int, Sequence[int]]  # one value for every spatial axis, or one per axis
Floats = Union[float, Sequence[float]]
Reduction = Union[str, Callable[[Any, "Region"], None]]
Reduce = Union[None, Reduction, Sequence[Reduction]]
Memory = Union[None, int, str]  # bytes, or "4G", "512M"
Order = Union[str, Sequence[int], None]  # "monai", "auto", or a permutation of the spatial axes

BudgetError = _swi.BudgetError
MAX_DIMS = _swi.MAX_DIMS

_BLEND = {"constant": 0, "gaussian": 1}
_PAD = {"constant": 0, "reflect": 1, "replicate": 2, "circular": 3}
_REDUCE = {"none": 0, "argmax": 1, "max": 2, "confidence": 3, "entropy": 4, "softmax": 6}
_CUSTOM = 5
_DTYPE_AUTO, _DTYPE_FLOAT32 = 0, 1


@dataclass(frozen=True)
class Region:
    """A completed region handed to a callable `reduce`: the blended scores of image
    `image`, head `head`, over ``[lo, hi)`` of that head's (cropped) output grid.
    ``index`` selects the region in a ``[B, C, *spatial]`` array."""

    image: int
    head: int
    lo: tuple[int, ...]
    hi: tuple[int, ...]

    @property
    def slices(self) -> tuple[slice, ...]:
        return tuple(slice(a, b) for a, b in zip(self.lo, self.hi))

    @property
    def index(self) -> tuple[slice, ...]:
        return (slice(self.image, self.image + 1), slice(None), *self.slices)


class _Restart(Exception):
    """Raised from the first predictor call when the run must be set up again with what
    that call revealed (several heads, or a process_fn weight map); the call's outputs
    are kept and served again, so the predictor still sees every window once."""


def _is_torch(x) -> bool:
    return torch is not None and isinstance(x, torch.Tensor)


def _name(v) -> str:
    v = getattr(v, "value", v)  # MONAI's StrEnum members
    return str(v).lower()


def _rep(v, n: int, what: str) -> tuple:
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
        return (v,) * n
    v = tuple(v)
    if len(v) != n:
        raise ValueError(f"{what} must have {n} values (one per spatial dim), got {len(v)}")
    return v


def _parse_memory(v) -> int:
    if v is None:
        return 0
    if isinstance(v, str):
        s = v.strip().upper().rstrip("B").rstrip("I")
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
        mult = units.get(s[-1:], 1)
        num = s[:-1] if s[-1:] in units else s
        try:
            return int(float(num) * mult)
        except ValueError:
            raise ValueError(f"max_memory: cannot read {v!r} (an int of bytes or a string like '4G')") from None
    v = int(v)
    if v < 0:
        raise ValueError("max_memory must be >= 0")
    return v


def _reduce_spec(reduce):
    """(kinds, is_single): kinds is a list of names or callables."""
    if reduce is None:
        return ["none"], True
    if isinstance(reduce, str) or callable(reduce):
        items, single = [reduce], True
    else:
        items, single = list(reduce), False
        if not items:
            raise ValueError("reduce: an empty list")
    out = []
    for r in items:
        if callable(r):
            out.append(r)
            continue
        n = _name(r)
        if n not in _REDUCE:
            raise ValueError(f"reduce: unknown reduction {r!r} (one of {sorted(_REDUCE)} or a callable)")
        out.append(n)
    return out, single


def _reduce_keys(kinds) -> list:
    """Result names: the reduction's name, a callable's __name__; repeats get a suffix."""
    keys = []
    for r in kinds:
        k = r if isinstance(r, str) else getattr(r, "__name__", "custom")
        base, i = k, 1
        while k in keys:
            i += 1
            k = f"{base}_{i}"
        keys.append(k)
    return keys


def _whole(v, what: str) -> int:
    """v as an int, refusing what int() would silently truncate (2.5, "3", True)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        if torch is not None and isinstance(v, torch.Tensor) and v.numel() == 1 and not v.is_floating_point():
            return int(v)
        raise TypeError(f"{what} must be an int, got {v!r}")
    return int(v)


def _schedule(order, dims: int):
    """The engine's window order: 'monai' (C order over the start grid, MONAI's
    enumeration), 'auto' (the planner's choice), or a permutation of the axes (ints)."""
    if order is None or order == "monai":
        return tuple(range(dims))
    if order == "auto":
        return None
    bad = ValueError(f"order must be 'monai', 'auto' or a permutation of the spatial axes 0..{dims - 1} "
                     f"(ints, e.g. {tuple(reversed(range(dims)))}), got {order!r}")
    if isinstance(order, (str, bytes)) or not isinstance(order, Sequence):
        raise bad
    if any(isinstance(a, bool) or not isinstance(a, (int, np.integer)) for a in order):
        raise bad
    o = tuple(int(a) for a in order)
    if sorted(o) != list(range(dims)):
        raise bad
    return o


def _check_buffer(buffer_steps, buffer_dim, dims: int) -> None:
    """MONAI's checks of its buffering knobs (which change nothing here)."""
    if buffer_steps is None or buffer_steps <= 0:
        return
    if not -dims <= int(buffer_dim) <= dims:  # MONAI's bounds, both inclusive
        raise ValueError(f"buffer_dim must be in [{-dims}, {dims}], got {buffer_dim}.")


class _Setup:
    """Everything derived from the arguments, shared by run() and plan()."""

    def __init__(self, inputs, roi_size, sw_batch_size, overlap, mode, sigma_scale, padding_mode, cval,
                 roi_weight_map, threads, max_memory, order, grad=False):
        self.is_torch = _is_torch(inputs)
        self.meta = None
        self.in_device = None
        self.torch_input = None
        if isinstance(inputs, tuple):  # a bare shape (plan only)
            host = None
            shape = inputs
            self.compute_dtype = np.dtype(np.float32)
        elif self.is_torch:
            self.in_device = inputs.device
            self.compute_dtype = inputs.dtype if inputs.dtype.is_floating_point else torch.float32
            if type(inputs) is not torch.Tensor and type(inputs).__name__ == "MetaTensor":
                self.meta = inputs
            if grad:  # the differentiable path works on the tensor itself
                t = inputs if type(inputs) is torch.Tensor else inputs.as_subclass(torch.Tensor)
                self.torch_input = t if t.dtype == self.compute_dtype else t.to(self.compute_dtype)
                host = None
                shape = tuple(inputs.shape)
            else:
                t = inputs.detach()
                if type(t) is not torch.Tensor:
                    t = t.as_subclass(torch.Tensor)
                host = t.to(device="cpu", dtype=torch.float32).contiguous().numpy()
                shape = tuple(host.shape)
        else:
            a = np.asarray(inputs)
            self.compute_dtype = a.dtype if np.issubdtype(a.dtype, np.floating) else np.dtype(np.float32)
            host = np.ascontiguousarray(a, dtype=np.float32)
            shape = tuple(host.shape)
        if len(shape) < 3:
            raise ValueError(f"inputs must be [batch, channels, *spatial], got shape {shape}")
        dims = len(shape) - 2
        if dims > MAX_DIMS:
            raise ValueError(f"inputs have {dims} spatial dims; swi supports 1 to {MAX_DIMS} (shape {shape})")
        self.host = host
        self.dims = dims
        self.shape = tuple(int(v) for v in shape)
        image = self.shape[2:]
        roi = _rep(roi_size, dims, "roi_size")
        self.roi = tuple(int(image[k]) if (r is None or int(r) <= 0) else int(r) for k, r in enumerate(roi))
        self.overlap = tuple(float(o) for o in _rep(overlap, dims, "overlap"))
        for o in self.overlap:
            if not 0.0 <= o < 1.0:
                raise ValueError(f"overlap must be >= 0 and < 1, got {overlap}")
        self.sigma = tuple(float(s) for s in _rep(sigma_scale, dims, "sigma_scale"))
        m = _name(mode)
        if m not in _BLEND:
            raise ValueError(f"mode must be one of {sorted(_BLEND)}, got {mode!r}")
        self.mode = _BLEND[m]
        pm = _name(padding_mode)
        if pm not in _PAD:
            raise ValueError(f"padding_mode must be one of {sorted(_PAD)}, got {padding_mode!r}")
        self.padding_mode = _PAD[pm]
        self.cval = float(cval)
        self.sw_batch_size = _whole(sw_batch_size, "sw_batch_size")
        if self.sw_batch_size < 1:
            raise ValueError(f"sw_batch_size must be >= 1, got {sw_batch_size}")
        self.threads = 0 if threads is None else _whole(threads, "threads")
        if self.threads < 0:
            raise ValueError(f"threads must be >= 0 (0: all cores), got {threads}")
        self.max_memory = _parse_memory(max_memory)
        self.order = _schedule(order, dims)
        self.pipeline = -1
        self.pad_before = tuple(max(r - s, 0) // 2 for r, s in zip(self.roi, image))
        if self.cval != 0.0 and pm != "constant" and any(r > s for r, s in zip(self.roi, image)):
            # MONAI pads with torch's F.pad, which takes a value for constant padding only
            raise ValueError(f"cval={cval!r} applies to padding_mode='constant' only; got padding_mode={pm!r} "
                             f"(the window {self.roi} is larger than the image {image})")
        self.weight_map = None
        if roi_weight_map is not None:
            self.weight_map = self._weights_from(roi_weight_map)

    def _weights_from(self, w):
        if _is_torch(w):
            w = w.detach().to(device="cpu", dtype=torch.float32).numpy()
        w = np.ascontiguousarray(np.asarray(w, dtype=np.float32))
        if w.size != int(np.prod(self.roi)):
            raise ValueError(f"roi_weight_map has shape {w.shape}; expected {self.roi} (the window size)")
        return w.reshape(self.roi)

    def engine_weights(self) -> np.ndarray:
        """The weight map the engine blends with, [*roi] float32."""
        if self.weight_map is not None:
            return self.weight_map
        return np.frombuffer(_swi.weights(self.mode, self.roi, self.sigma), np.float32).reshape(self.roi)

    def kwargs(self, heads, outputs):
        return dict(roi=self.roi, overlap=self.overlap, mode=self.mode, sigma_scale=self.sigma,
                    weight_map=self.weight_map, padding_mode=self.padding_mode, cval=self.cval,
                    sw_batch_size=self.sw_batch_size, threads=self.threads, order=self.order,
                    pipeline=self.pipeline, max_memory=self.max_memory, heads=heads, outputs=outputs)


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
        if _is_torch(h):
            if h.is_complex() or h.dtype == torch.bool:
                raise ValueError(f"output {i} of the predictor has dtype {h.dtype}; expected a real float tensor")
        elif not (np.issubdtype(h.dtype, np.floating) or np.issubdtype(h.dtype, np.integer)):
            raise ValueError(f"output {i} of the predictor has dtype {h.dtype}; expected a real float array")
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


class _Progress:
    """A tqdm bar over windows when tqdm imports, else one rewritten line on stderr."""

    def __init__(self):
        self.bar = None
        self.last = 0

    def __call__(self, done, total):
        if self.bar is None:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, unit="win", desc="swi")
            except ImportError:
                self.bar = False
        if self.bar is False:
            sys.stderr.write(f"\rswi: {done}/{total} windows")
            sys.stderr.flush()
        else:
            self.bar.update(done - self.last)
        self.last = done

    def close(self):
        if self.bar:
            self.bar.close()
        elif self.bar is False:
            sys.stderr.write("\n")


class _CustomRegion:
    """Adapts a callable reduce to the engine's region callback."""

    def __init__(self, setup: _Setup, fn, device):
        self.s = setup
        self.fn = fn
        self.device = device

    def __call__(self, data, image, head, channels, lo, hi):
        shape = (1, channels) + tuple(b - a for a, b in zip(lo, hi))
        a = np.frombuffer(data, dtype=np.float32).reshape(shape)
        x = torch.from_numpy(a).to(self.device) if self.s.is_torch else a
        self.fn(x, Region(image, head, tuple(lo), tuple(hi)))


def _outputs(kinds, n_heads, setup, device):
    outs = []
    for h in range(n_heads):
        for r in kinds:
            if callable(r):
                outs.append((h, _CUSTOM, _DTYPE_FLOAT32, _CustomRegion(setup, r, device)))
            else:
                outs.append((h, _REDUCE[r], _DTYPE_AUTO, None))
    return outs


def _finish(res, kind: str, setup: _Setup, device):
    """An engine result (or None for a callable reduce) as the caller's array type."""
    if res is None:
        return None
    a = np.asarray(res)  # a zero-copy view; it keeps the engine's context alive
    if kind == "none" and a.dtype != setup.compute_dtype and not setup.is_torch:
        a = a.astype(setup.compute_dtype)
    if not setup.is_torch:
        return a
    if a.dtype == np.uint16:  # torch 1.13 has no uint16
        a = a.astype(np.int32)
    t = torch.from_numpy(a)
    if kind == "none" and t.dtype != setup.compute_dtype:
        t = t.to(setup.compute_dtype)
    t = t.to(device)
    if setup.meta is not None:
        t = _as_meta(t, setup.meta)
    return t


def _as_meta(t, like):
    try:
        from monai.data.meta_tensor import MetaTensor
        from monai.utils import convert_to_dst_type
    except ImportError:  # pragma: no cover
        return t
    temp = MetaTensor([]).copy_meta_from(like, copy_attr=False)
    return convert_to_dst_type(t, temp, device=t.device, dtype=t.dtype)[0]


def _pack(pred: _Predictor, per_head):
    if pred.kind == "dict":
        return dict(zip(pred.keys, per_head))
    if pred.kind == "seq" and len(per_head) != 1:
        return tuple(per_head)
    return per_head[0]


def sliding_window_inference(inputs: ArrayLike, roi_size: Sizes, sw_batch_size: int,
                             predictor: Callable[..., Any], overlap: Floats = 0.25, mode: str = "constant",
                             sigma_scale: Floats = 0.125, padding_mode: str = "constant", cval: float = 0.0,
                             sw_device: Any = None, device: Any = None, progress: bool = False,
                             roi_weight_map: Optional[ArrayLike] = None, process_fn: Optional[Callable[..., Any]] = None,
                             buffer_steps: Optional[int] = None, buffer_dim: int = -1, with_coord: bool = False,
                             *args: Any, reduce: Reduce = None, max_memory: Memory = None,
                             threads: Optional[int] = None, order: Order = "monai",
                             predictor_kwargs: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> Any:
    """MONAI 1.4's ``sliding_window_inference``, computed by libswi, streamed.

    With ``reduce=None`` the parameters, defaults, results and return types are MONAI's:
    a tensor, or a tuple/dict when the predictor returns one (heads of other resolutions
    included); torch in gives torch out on ``device`` (default: the input's) in the input's
    float dtype; numpy in gives numpy out. The engine computes in float32. ``buffer_steps``
    and ``buffer_dim`` are checked as MONAI checks them and change nothing else.

    Gradients: when grad mode is on and the input, or a parameter of the predictor (an
    ``nn.Module``), requires grad, the result is computed as MONAI computes it, with PyTorch
    operations on the whole score volume, so gradients flow to the input and the
    parameters (said once on stderr; no streaming, no ``reduce`` savings). Otherwise the
    predictor runs under ``torch.no_grad()`` and the engine streams. Call under
    ``torch.no_grad()`` (or ``torch.inference_mode()``) for validation.

    Keyword-only extras:
      reduce: None, "argmax" (labels [B, 1, *spatial], uint8; above 256 classes uint16 for
        numpy, int32 for torch), "max", "confidence", "entropy" (float32 [B, 1, *spatial]),
        "softmax" (float32 probabilities [B, C, *spatial], computed region by region), a
        list of those (a dict out), or a callable ``fn(scores, region)`` called with each
        completed region of blended scores ([1, C, *region], see `Region`); it returns None.
      max_memory: the engine's peak-bytes budget (int or "4G"): the input's float32 copy,
        window buffers, partial sums, outputs and scratch. The predictor's own memory and
        the caller's arrays are outside it; a run with a budget says on stderr what it
        planned and the process's peak. BudgetError names the smallest budget that works.
      threads: blending workers (default: all cores).
      order: "monai" (default: windows reach the predictor in MONAI's order and chunks),
        "auto" (the planner's memory-optimal order, planned with the real output size
        after the first call, whose windows are predicted again), or a permutation of the
        spatial axes (plain loop order in that permutation).
      predictor_kwargs: keyword arguments for the predictor whose names swi takes for
        itself (``reduce``, ``max_memory``, ``threads``, ``order``, ``predictor_kwargs``);
        any other keyword argument reaches the predictor as in MONAI.
    """
    if predictor_kwargs:
        kwargs = {**kwargs, **dict(predictor_kwargs)}
    dims = len(inputs.shape) - 2 if hasattr(inputs, "shape") else 0
    _check_buffer(buffer_steps, buffer_dim, dims)  # the streaming engine needs no buffering
    grad = _autograd.needs_grad(inputs, predictor)
    setup = _Setup(inputs, roi_size, sw_batch_size, overlap, mode, sigma_scale, padding_mode, cval,
                   roi_weight_map, threads, max_memory, order, grad=grad)
    if setup.is_torch:
        out_device = torch.device(device) if device is not None else setup.in_device
    else:
        out_device = None
    kinds, single = _reduce_spec(reduce)
    if grad:
        return _run_grad(setup, kinds, single, predictor, sw_device, out_device, with_coord, process_fn, args,
                         kwargs)
    pred = _Predictor(setup, predictor, sw_device, with_coord, process_fn, args, kwargs)
    prog = _Progress() if progress else None
    rss0 = _peak_rss()
    try:
        results = _engine(setup, pred, lambda n_heads: _outputs(kinds, n_heads, setup, out_device), prog,
                          source=setup.host)
    finally:
        if prog is not None:
            prog.close()
    if setup.max_memory:
        _budget_summary(setup, pred, kinds, rss0)
    per_head = []
    i = 0
    names = _reduce_keys(kinds)
    for _h in range(len(pred.first)):
        vals = {}
        for name, r in zip(names, kinds):
            vals[name] = _finish(results[i], "none" if r == "none" else "reduced", setup, out_device)
            i += 1
        per_head.append(next(iter(vals.values())) if single else vals)
    if all(callable(r) for r in kinds) and single:
        return None
    return _pack(pred, per_head)


BUDGET_COVERS = ("the engine: the input's float32 copy, the window buffers, the partial sums, the outputs and "
                 "scratch; not the predictor, its outputs before they are handed over, or the caller's arrays")


def _peak_rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB"


def _budget_summary(setup, pred, kinds, rss0) -> None:
    """One line on stderr: what max_memory covered, what the plan took of it, and the
    process's peak, so a budget is never mistaken for the process's limit."""
    outputs = [(0, _CUSTOM if callable(r) else _REDUCE[r], _DTYPE_FLOAT32 if callable(r) else _DTYPE_AUTO, None)
               for r in kinds]
    heads = [(c, tuple(sp)) for c, sp in pred.first] if pred.first else None
    try:
        p = _swi.plan(setup.shape, **setup.kwargs(heads, outputs))
    except Exception:  # the run succeeded; a summary is not worth an error
        return
    peak = _peak_rss()
    sys.stderr.write(f"swi: max_memory {_mib(setup.max_memory)} covers {BUDGET_COVERS}: planned "
                     f"{_mib(p['bytes_peak'])}; the process peaked at {_mib(peak)} "
                     f"({_mib(max(peak - rss0, 0))} above its peak before the call)\n")


def _engine(setup, pred, make_outputs, prog, source, **extra):
    """_swi.run, set up again once when the first predictor call reveals what the run
    must declare (several heads, or the real output size for the planner or a budget)."""
    heads = None
    try:
        while True:
            n_heads = 1 if heads is None else len(heads)
            try:
                return _swi.run(source, **setup.kwargs(heads, make_outputs(n_heads)), predictor=pred,
                                copy_into=_copy_into, progress=prog, **extra)
            except _Restart:
                if heads is not None:
                    raise RuntimeError("internal: the run was set up twice") from None
                pred.restart = False
                if setup.order is None or setup.max_memory:
                    heads = pred.first
                else:
                    # learned shapes keep the plain loop order (MONAI's): a fully declared
                    # run lets the planner reorder the last slabs to shrink the frontier
                    heads = [(0, (0,) * setup.dims)] * len(pred.first)
                if len(heads) > _swi.MAX_HEADS:
                    raise ValueError(f"the predictor returned {len(heads)} outputs; swi supports up to "
                                     f"{_swi.MAX_HEADS}") from None
    finally:
        pred.cache.clear()


def run_part(shape, reader, roi_size, sw_batch_size, predictor, part, sink, *, overlap=0.25, mode="constant",
             sigma_scale=0.125, padding_mode="constant", cval=0.0, reduce="argmax", threads=None,
             order="monai", max_memory=None):
    """One part of a run: the output box ``part = (lo, hi)`` of an input of ``shape``
    [batch, channels, *spatial] read box by box through ``reader(image, lo, hi)`` (float32
    [channels, *(hi - lo)]). Each region of the named reduction ``reduce`` reaches
    ``sink(data, image, lo, hi)`` (a numpy array [1, K, *(hi - lo)]) as soon as it is final.
    Parts of a grid together give bitwise the whole run's result (swi_params.part_lo)."""
    setup = _Setup(tuple(int(v) for v in shape), roi_size, sw_batch_size, overlap, mode, sigma_scale,
                   padding_mode, cval, None, threads, max_memory, order)
    kinds, single = _reduce_spec(reduce)
    if not single or callable(kinds[0]):
        raise ValueError("run_part takes one named reduction")
    kind = kinds[0]

    def deliver(data, image, head, channels, lo, hi):
        if head != 0:
            return
        dt = np.float32
        if kind == "argmax":
            dt = np.uint8 if len(data) == int(np.prod([b - a for a, b in zip(lo, hi)])) else np.uint16
        a = np.frombuffer(data, dtype=dt).reshape((1, channels) + tuple(b - a for a, b in zip(lo, hi)))
        sink(a, image, tuple(lo), tuple(hi))

    pred = _Predictor(setup, predictor, None, False, None, (), {})
    _engine(setup, pred, lambda n_heads: [(h, _REDUCE[kind], _DTYPE_AUTO, deliver) for h in range(n_heads)], None,
            source=setup.shape, reader=reader, part=(tuple(part[0]), tuple(part[1])))


def _run_grad(setup, kinds, single, predictor, sw_device, out_device, with_coord, process_fn, args, kwargs):
    """sliding_window_inference through PyTorch operations, gradients flowing (see _autograd)."""
    pred = _Predictor(setup, predictor, sw_device, with_coord, None, args, kwargs)
    sw_dev = pred.sw_device
    heads, keys, kind = _autograd.run(setup, predictor, sw_dev, out_device, with_coord, process_fn, args, kwargs,
                                      _flatten, pred._check)
    names = _reduce_keys(kinds)
    per_head = []
    for h, scores in enumerate(heads):
        vals = {}
        for name, r in zip(names, kinds):
            if callable(r):
                _autograd.call_custom(r, scores, h, Region)
                vals[name] = None
            else:
                vals[name] = _autograd.reduce_torch(scores, r)
                if setup.meta is not None:
                    vals[name] = _as_meta(vals[name], setup.meta)
        per_head.append(next(iter(vals.values())) if single else vals)
    if all(callable(r) for r in kinds) and single:
        return None
    pred.keys, pred.kind = keys, kind
    return _pack(pred, per_head)


def plan(inputs: Union[ArrayLike, Sequence[int]], roi_size: Sizes, sw_batch_size: int = 1, overlap: Floats = 0.25,
         mode: str = "constant", sigma_scale: Floats = 0.125, padding_mode: str = "constant", cval: float = 0.0,
         roi_weight_map: Optional[ArrayLike] = None, *, reduce: Reduce = None, out_channels: Optional[int] = None,
         max_memory: Memory = None, threads: Optional[int] = None, order: Order = "monai") -> dict[str, Any]:
    """What a run would do, without running: the window grid, predictor calls, the chosen
    batch size/order and the memory split (bytes_input, bytes_windows, bytes_partial,
    bytes_outputs, bytes_scratch, bytes_peak, bytes_min). ``inputs`` may be an array or a
    shape. ``out_channels`` (classes) makes the memory figures exact; without it the
    partial sums and outputs count as 0 bytes."""
    if isinstance(inputs, (tuple, list)) and all(isinstance(v, (int, np.integer)) for v in inputs):
        inputs = tuple(int(v) for v in inputs)
    setup = _Setup(inputs, roi_size, sw_batch_size, overlap, mode, sigma_scale, padding_mode, cval,
                   roi_weight_map, threads, max_memory, order)
    src = setup.shape if setup.host is None else setup.host
    kinds, _single = _reduce_spec(reduce)
    heads = None if out_channels is None else [(int(out_channels), (0,) * setup.dims)]
    outputs = [(0, _CUSTOM if callable(r) else _REDUCE[r], _DTYPE_FLOAT32 if callable(r) else _DTYPE_AUTO, None)
               for r in kinds]
    res = _swi.plan(src, **setup.kwargs(heads, outputs))
    res["budget_covers"] = BUDGET_COVERS
    return res
