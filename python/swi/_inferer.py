"""MONAI-style inferer classes over swi.sliding_window_inference."""

from __future__ import annotations

import importlib.util
from typing import Any, Callable

import numpy as np

from ._core import sliding_window_inference
from ._setup import (_BLEND, _PAD, Floats, Memory, Order, Reduce, Sizes, _is_torch, _name, _parse_memory, _reduce_spec,
                     _whole, torch)


def _inferer_base() -> type:
    """monai.inferers.Inferer when MONAI is installed (so isinstance checks and
    monai.engines accept swi's inferers), else object. MONAI is not imported otherwise."""
    if importlib.util.find_spec("monai") is None:
        return object
    try:
        from monai.inferers.inferer import Inferer
    except Exception:  # a broken MONAI install must not break swi
        return object
    return Inferer


_Base: Any = _inferer_base()


class SlidingWindowInferer(_Base):
    """MONAI's ``SlidingWindowInferer`` (same constructor arguments) plus ``reduce``,
    ``max_memory``, ``threads`` and ``order``; ``inferer(inputs, network, *args, **kwargs)``.
    Arguments are checked here, as MONAI checks them, not at the first call. Every keyword
    argument of a call reaches ``network`` (as in MONAI), except ``device``,
    ``buffer_steps`` and ``buffer_dim``, which MONAI's inferer takes too.
    ``cache_roi_weight_map`` is accepted (the engine computes the map once per run anyway);
    ``cpu_thresh`` stitches on the CPU above that many voxels, as in MONAI. A
    ``monai.inferers.Inferer`` when MONAI is importable."""

    def __init__(self, roi_size: Sizes, sw_batch_size: int = 1, overlap: Floats = 0.25, mode: str = "constant",
                 sigma_scale: Floats = 0.125, padding_mode: str = "constant", cval: float = 0.0,
                 sw_device: Any = None, device: Any = None, progress: bool = False,
                 cache_roi_weight_map: bool = False, cpu_thresh: int | None = None, buffer_steps: int | None = None,
                 buffer_dim: int = -1, with_coord: bool = False, *, reduce: Reduce = None, max_memory: Memory = None,
                 threads: int | None = None, order: Order = "monai") -> None:
        self.roi_size = roi_size
        self.sw_batch_size = sw_batch_size
        self.overlap = overlap
        self.mode = mode
        self.sigma_scale = sigma_scale
        self.padding_mode = padding_mode
        self.cval = cval
        self.sw_device = sw_device
        self.device = device
        self.progress = progress
        self.cache_roi_weight_map = cache_roi_weight_map
        self.cpu_thresh = cpu_thresh
        self.buffer_steps = buffer_steps
        self.buffer_dim = buffer_dim
        self.with_coord = with_coord
        self.reduce = reduce
        self.max_memory = max_memory
        self.threads = threads
        self.order = order
        self.roi_weight_map = None
        self._validate()

    def _validate(self):
        if _name(self.mode) not in _BLEND:
            raise ValueError(f"mode must be one of {sorted(_BLEND)}, got {self.mode!r}")
        pm = _name(self.padding_mode)
        if pm not in _PAD:
            raise ValueError(f"padding_mode must be one of {sorted(_PAD)}, got {self.padding_mode!r}")
        if _whole(self.sw_batch_size, "sw_batch_size") < 1:
            raise ValueError(f"sw_batch_size must be >= 1, got {self.sw_batch_size}")
        for o in (self.overlap if isinstance(self.overlap, (list, tuple)) else (self.overlap,)):
            if not 0.0 <= float(o) < 1.0:
                raise ValueError(f"overlap must be >= 0 and < 1, got {self.overlap}")
        if self.threads is not None and _whole(self.threads, "threads") < 0:
            raise ValueError(f"threads must be >= 0, got {self.threads}")
        _parse_memory(self.max_memory)
        _reduce_spec(self.reduce)
        if self.order not in (None, "monai", "auto"):
            if isinstance(self.order, (str, bytes)) or not all(
                    isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in self.order):
                raise ValueError(f"order must be 'monai', 'auto' or a permutation of the spatial axes (ints), "
                                 f"got {self.order!r}")

    def _device(self, inputs, kwargs):
        device = kwargs.pop("device", self.device)
        kwargs.pop("buffer_steps", None)
        kwargs.pop("buffer_dim", None)
        if device is None and self.cpu_thresh is not None and int(np.prod(inputs.shape[2:])) > self.cpu_thresh:
            device = "cpu"
        return device

    def __call__(self, inputs: Any, network: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._infer(inputs, network, args, kwargs, self.reduce)

    def _infer(self, inputs, network, args, kwargs, reduce, sw_batch_size=None):
        kwargs = dict(kwargs)
        device = self._device(inputs, kwargs)
        # every other keyword is the network's, whatever its name
        return sliding_window_inference(
            inputs, self.roi_size, self.sw_batch_size if sw_batch_size is None else sw_batch_size, network,
            self.overlap, self.mode, self.sigma_scale, self.padding_mode, self.cval, self.sw_device, device,
            self.progress, self.roi_weight_map, None, None, -1, self.with_coord, *args, reduce=reduce,
            max_memory=self.max_memory, threads=self.threads, order=self.order, predictor_kwargs=kwargs)


def _is_device_oom(e: BaseException) -> bool:
    oom = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None) if torch is not None else None
    return (oom is not None and isinstance(e, oom)) or (isinstance(e, RuntimeError) and "out of memory" in str(e))


class SlidingWindowInfererAdapt(SlidingWindowInferer):
    """Like MONAI's ``SlidingWindowInfererAdapt``: when the network runs out of device
    memory, the call is retried with half the ``sw_batch_size`` until 1, then with the
    windows and the network on the CPU (``sw_device="cpu"``; the network is not moved, so
    this last step needs a network that accepts CPU tensors, as a plain callable or a
    CPU module does). The blended scores always live in host memory, so MONAI's other
    fallbacks (buffered and CPU stitching) have nothing to do here. The batch size that
    worked is kept for the next call (``self.sw_batch_size``)."""

    def __call__(self, inputs: Any, network: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        sw = _whole(self.sw_batch_size, "sw_batch_size")
        while True:
            try:
                out = self._infer(inputs, network, args, kwargs, self.reduce, sw_batch_size=sw)
                self.sw_batch_size = sw
                return out
            except Exception as e:
                if not _is_device_oom(e):
                    raise
                if torch is not None and torch.cuda.is_available():
                    torch.cuda.empty_cache()
                if sw > 1:
                    sw = max(1, sw // 2)
                elif self.sw_device is None or str(self.sw_device) != "cpu":
                    self.sw_device = "cpu"
                else:
                    raise


class SlidingWindowInfererReduced(SlidingWindowInferer):
    """The proposed MONAI class of that name: ``reduction_fn`` is applied to every completed
    region of blended scores ([1, C, *region]) and its result ([1, K, *region], or
    [1, *region] which gets K = 1) is stored in an output of ``output_dtype``
    ([B, K, *spatial]). The default reduction is argmax over channels (computed by the
    engine, uint8/uint16 labels), so the full score volume never exists."""

    def __init__(self, roi_size: Sizes, sw_batch_size: int = 1, *args: Any,
                 reduction_fn: Callable[..., Any] | None = None, output_dtype: Any = None, **kwargs: Any) -> None:
        super().__init__(roi_size, sw_batch_size, *args, **kwargs)
        self.reduction_fn = reduction_fn
        self.output_dtype = output_dtype

    def __call__(self, inputs: Any, network: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.reduction_fn is None:
            out = self._infer(inputs, network, args, kwargs, "argmax")
            return out if self.output_dtype is None else _cast(out, self.output_dtype)
        store = _Store(inputs, self.reduction_fn, self.output_dtype)
        self._infer(inputs, network, args, kwargs, store)
        return store.result(self._device(inputs, dict(kwargs)), inputs)


def _cast(x, dtype):
    return x.to(dtype) if _is_torch(x) else np.asarray(x).astype(dtype)


class _Store:
    """Collects reduction_fn's per-region results into one output array (allocated at the
    first region, when the reduced channel count is known). Region callbacks arrive one at
    a time (each holds the GIL), so no lock is needed."""

    def __init__(self, inputs, fn, dtype):
        self.fn = fn
        self.dtype = dtype
        self.batch = int(inputs.shape[0])
        self.size = None  # grown to the regions' extent
        self.parts = []
        self.__name__ = getattr(fn, "__name__", "reduction_fn")

    def __call__(self, scores, region):
        y = self.fn(scores)
        if y.ndim == scores.ndim - 1:
            y = y[:, None]
        if _is_torch(y):
            y = y.detach().cpu()
            if self.dtype is not None:
                y = y.to(self.dtype)
            y = y.numpy()
        else:
            y = np.asarray(y) if self.dtype is None else np.asarray(y).astype(self.dtype)
        self.parts.append((region, y))

    def result(self, device, inputs):
        if not self.parts:
            raise RuntimeError("reduction_fn was never called")
        dims = len(self.parts[0][0].lo)
        size = [max(r.hi[k] for r, _ in self.parts) for k in range(dims)]
        k = self.parts[0][1].shape[1]
        out = np.empty((self.batch, k) + tuple(size), dtype=self.parts[0][1].dtype)
        for region, y in self.parts:
            out[region.index] = y
        self.parts.clear()
        if _is_torch(inputs):
            t = torch.from_numpy(out)
            return t.to(device if device is not None else inputs.device)
        return out
