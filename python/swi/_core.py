"""The Python side of swi's runs: sliding_window_inference, plan and run_part, the engine's
outputs and results, and the one set-up-again of a run (see _engine).

All sliding-window work (padding, window gathering, blending, reductions) happens in
libswi through swi._swi; the Python side only converts between Python objects and the
float32 buffers the engine reads and writes: _setup.py checks the arguments, _predictor.py
adapts the predictor.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, Union

import numpy as np

from . import _autograd, _swi
from ._predictor import _copy_into, _flatten, _Predictor, _Restart
from ._setup import (_CUSTOM, _DTYPE_AUTO, _DTYPE_FLOAT32, _REDUCE, MAX_DIMS, ArrayLike, Floats, Memory, Order,
                     Reduce, Region, Sizes, _check_buffer, _reduce_keys, _reduce_spec, _Setup)

try:  # torch is optional: numpy in, numpy out works without it
    import torch
except ImportError:  # pragma: no cover - exercised only where torch is absent
    torch = None

__all__ = ["sliding_window_inference", "plan", "Region", "BudgetError", "MAX_DIMS"]

BudgetError = _swi.BudgetError


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
