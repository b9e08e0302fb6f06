"""Argument handling for swi's runs: the public API's types, the engine's codes for blend,
padding and reductions, the checks MONAI makes of its arguments, and `_Setup`, everything
run() and plan() derive from them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Union

import numpy as np

from . import _swi

try:  # torch is optional: numpy in, numpy out works without it
    import torch
except ImportError:  # pragma: no cover - exercised only where torch is absent
    torch = None

# The public API's types (for annotations; torch stays optional at run time).
ArrayLike = Any  # a numpy array or a torch tensor, [batch, channels, *spatial]
Sizes = Union[int, Sequence[int]]  # one value for every spatial axis, or one per axis
Floats = Union[float, Sequence[float]]
Reduction = Union[str, Callable[[Any, "Region"], None]]
Reduce = Union[None, Reduction, Sequence[Reduction]]
Memory = Union[None, int, str]  # bytes, or "4G", "512M"
Order = Union[str, Sequence[int], None]  # "monai", "auto", or a permutation of the spatial axes

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


def _is_torch(x) -> bool:
    return torch is not None and isinstance(x, torch.Tensor)


def _name(v) -> str:
    v = getattr(v, "value", v)  # MONAI's StrEnum members
    return str(v).lower()


def _choice(v, table: dict, what: str):
    """table's value for the name v (any case, or a StrEnum member), else ValueError."""
    k = _name(v)
    if k not in table:
        raise ValueError(f"{what} must be one of {sorted(table)}, got {v!r}")
    return table[k]


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
        self.mode = _choice(mode, _BLEND, "mode")
        self.padding_mode = _choice(padding_mode, _PAD, "padding_mode")
        pm = _name(padding_mode)
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
