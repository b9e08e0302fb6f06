"""MONAI-style inferer classes over swi.sliding_window_inference."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ._core import _is_torch, sliding_window_inference, torch


class SlidingWindowInferer:
    """MONAI's ``SlidingWindowInferer`` (same constructor arguments) plus ``reduce``,
    ``max_memory``, ``threads`` and ``order``; ``inferer(inputs, network, *args, **kwargs)``.
    ``cache_roi_weight_map`` is accepted (the engine computes the map once per run anyway);
    ``cpu_thresh`` stitches on the CPU above that many voxels, as in MONAI."""

    def __init__(self, roi_size, sw_batch_size: int = 1, overlap=0.25, mode="constant", sigma_scale=0.125,
                 padding_mode="constant", cval: float = 0.0, sw_device=None, device=None, progress: bool = False,
                 cache_roi_weight_map: bool = False, cpu_thresh: int | None = None, buffer_steps=None,
                 buffer_dim: int = -1, with_coord: bool = False, *, reduce=None, max_memory=None, threads=None,
                 order="monai"):
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

    def _device(self, inputs, kwargs):
        device = kwargs.pop("device", self.device)
        kwargs.pop("buffer_steps", None)
        kwargs.pop("buffer_dim", None)
        if device is None and self.cpu_thresh is not None and int(np.prod(inputs.shape[2:])) > self.cpu_thresh:
            device = "cpu"
        return device

    def __call__(self, inputs, network: Callable[..., Any], *args: Any, **kwargs: Any):
        device = self._device(inputs, kwargs)
        reduce = kwargs.pop("reduce", self.reduce)
        return sliding_window_inference(
            inputs, self.roi_size, self.sw_batch_size, network, self.overlap, self.mode, self.sigma_scale,
            self.padding_mode, self.cval, self.sw_device, device, self.progress, self.roi_weight_map, None,
            None, -1, self.with_coord, *args, reduce=reduce, max_memory=self.max_memory, threads=self.threads,
            order=self.order, **kwargs)


class SlidingWindowInfererReduced(SlidingWindowInferer):
    """The proposed MONAI class of that name: ``reduction_fn`` is applied to every completed
    region of blended scores ([1, C, *region]) and its result ([1, K, *region], or
    [1, *region] which gets K = 1) is stored in an output of ``output_dtype``
    ([B, K, *spatial]). The default reduction is argmax over channels (computed by the
    engine, uint8/uint16 labels), so the full score volume never exists."""

    def __init__(self, roi_size, sw_batch_size: int = 1, *args, reduction_fn: Callable | None = None,
                 output_dtype=None, **kwargs):
        super().__init__(roi_size, sw_batch_size, *args, **kwargs)
        self.reduction_fn = reduction_fn
        self.output_dtype = output_dtype

    def __call__(self, inputs, network: Callable[..., Any], *args: Any, **kwargs: Any):
        if self.reduction_fn is None:
            out = super().__call__(inputs, network, *args, reduce="argmax", **kwargs)
            return out if self.output_dtype is None else _cast(out, self.output_dtype)
        store = _Store(inputs, self.reduction_fn, self.output_dtype)
        super().__call__(inputs, network, *args, reduce=store, **kwargs)
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
