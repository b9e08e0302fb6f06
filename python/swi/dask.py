"""Sliding-window inference of one large volume on a Dask cluster: one task per part box.

Each task computes one box of the output with ``swi_params.part_lo/part_hi``: exactly the
windows touching its box run, in the whole run's order, so the boxes together are bitwise
the one-process result. The input is read box by box (a Zarr array, an HDF5 dataset or a
dask array); each task writes its box into one Zarr output array whose chunks the boxes
never share, so tasks never write the same chunk file, and a task retried after its worker
died rewrites exactly its own chunks. The array is written under a hidden name beside the
output (it carries ``.swi-incomplete`` meanwhile) and moved into place once every task has
finished; with ``force`` an existing output array is replaced only then.

    from dask.distributed import Client
    import swi.dask

    client = Client()                       # or a cluster's scheduler address
    swi.dask.segment(client, "ct.zarr", "labels.zarr", make_net, roi_size=128, sw_batch_size=4,
                     mode="gaussian", grid=(4, 1, 1))

``make_net`` is a picklable factory (a module-level function or class) that each worker
calls once to build its predictor: a torch module or any callable taking a float32 batch
[n, channels, *roi] (numpy, or torch for a module) and returning [n, classes, *roi].
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from . import _outputs, _swi
from ._core import run_part
from ._setup import Floats, Memory, Sizes

__all__ = ["segment", "part_boxes"]

_INCOMPLETE = ".swi-incomplete"


def part_boxes(size: Sequence[int], grid: Sequence[int], chunks: Sequence[int]) -> list[tuple[tuple[int, ...],
                                                                                           tuple[int, ...]]]:
    """The boxes of a grid of parts over `size`: each axis cut into grid[d] runs of whole
    chunks (the last run takes the rest), so no two boxes share a chunk. Empty boxes are
    left out."""
    cuts = []
    for n, g, c in zip(size, grid, chunks):
        if g < 1:
            raise ValueError(f"grid values must be >= 1, got {tuple(grid)}")
        nchunks = -(-int(n) // int(c))
        edges = sorted({min(int(n), (nchunks * i // g) * int(c)) for i in range(g + 1)})
        cuts.append([(a, b) for a, b in zip(edges, edges[1:]) if a < b])
    boxes = [((),())]
    for axis in cuts:
        boxes = [(lo + (a,), hi + (b,)) for lo, hi in boxes for a, b in axis]
    return boxes


def _open_input(src: Any) -> Any:
    """An indexable array: a Zarr path, 'file.h5:/dataset', or an array-like (dask, numpy)."""
    if isinstance(src, (str, os.PathLike)):
        name = os.fspath(src)
        for ext in (".h5:", ".hdf5:"):
            if ext in name:
                import h5py

                f, d = name.split(ext, 1)
                return h5py.File(f + ext[:-1], "r")[d if d.startswith("/") else "/" + d]
        import zarr

        z = zarr.open(name, mode="r")
        if isinstance(z, zarr.hierarchy.Group):
            ms = z.attrs.get("multiscales")
            if not ms:
                raise ValueError(f"{name}: a Zarr group without OME-Zarr multiscales metadata")
            z = z[ms[0]["datasets"][0]["path"]]
        return _drop_unit_axes(z)
    return src


def _drop_unit_axes(z: Any) -> Any:
    """An OME-Zarr level's leading axes of size 1 (t, c) indexed away, lazily."""
    lead = len(z.shape) - 3
    if lead <= 0 or any(int(v) != 1 for v in z.shape[:lead]):
        return z

    class View:
        shape = tuple(int(v) for v in z.shape[lead:])

        def __getitem__(self, box: Any) -> Any:
            return z[(0,) * lead + tuple(box)]

    return View()


def _spatial(arr: Any) -> tuple[tuple[int, ...], int]:
    """(spatial size, channels): [*spatial] (one channel) or [channels, *spatial], 3 spatial axes."""
    shape = tuple(int(v) for v in arr.shape)
    if len(shape) == 3:
        return shape, 1
    if len(shape) == 4:
        return shape[1:], shape[0]
    raise ValueError(f"the input must be [z, y, x] or [channels, z, y, x], got shape {shape}")


class _Reader:
    def __init__(self, arr: Any):
        self.arr = arr
        self.size, self.channels = _spatial(arr)

    def __call__(self, image: int, lo: Sequence[int], hi: Sequence[int]) -> np.ndarray:
        box = tuple(slice(a, b) for a, b in zip(lo, hi))
        x = self.arr[box] if len(self.arr.shape) == 3 else self.arr[(slice(None),) + box]
        x = np.asarray(x.compute() if hasattr(x, "compute") else x, dtype=np.float32)
        return np.ascontiguousarray(x.reshape((self.channels,) + x.shape[-3:]))


def _numpy_predictor(net: Any) -> Callable[[np.ndarray], Any]:
    """A torch module as a numpy-in predictor (no graph kept); other callables as they are."""
    try:
        import torch
    except ImportError:
        return net
    if not isinstance(net, torch.nn.Module):
        return net
    dev = next((p.device for p in net.parameters()), torch.device("cpu"))

    def run(x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            y = net(torch.from_numpy(np.array(x)).to(dev))
        return y.detach().to("cpu", torch.float32).numpy()

    return run


def _task(input_src: Any, output: str, factory: Callable[[], Any], box: Any, options: dict[str, Any]) -> int:
    import zarr

    reader = _Reader(_open_input(input_src))
    out = zarr.open(output, mode="r+")
    lo, hi = box
    labels = np.zeros(tuple(b - a for a, b in zip(lo, hi)), dtype=out.dtype)
    run = box
    if options.get("region") is not None:
        # the part of the region in this box: its voxels get the whole run's values, the rest
        # of the box stays background (docs/regions.md)
        run = (tuple(max(a, r[0]) for a, r in zip(lo, options["region"])),
               tuple(min(b, r[1]) for b, r in zip(hi, options["region"])))

    def sink(data: np.ndarray, image: int, rlo: Sequence[int], rhi: Sequence[int]) -> None:
        labels[tuple(slice(a - o, b - o) for a, b, o in zip(rlo, rhi, lo))] = data[0, 0]

    predict = _numpy_predictor(factory())
    seen = [0]

    def counted(x: np.ndarray) -> Any:
        y = predict(x)
        seen[0] = max(seen[0], int(np.shape(y)[1]))
        return y

    run_part((1, reader.channels) + reader.size, reader, options["roi_size"], options["sw_batch_size"],
             counted, run, sink, overlap=options["overlap"], mode=options["mode"],
             sigma_scale=options["sigma_scale"], padding_mode=options["padding_mode"], cval=options["cval"],
             reduce="argmax", threads=options["threads"], max_memory=options["max_memory"])
    out[tuple(slice(a, b) for a, b in zip(lo, hi))] = labels  # whole chunks only: atomic per chunk file
    return seen[0]  # the classes the predictor gave, for the store's class table


def _cli_window_flags(o: dict[str, Any]) -> list[str]:
    def csv(v: Any) -> str:
        return ",".join(str(x) for x in v) if isinstance(v, (list, tuple)) else str(v)

    flags = ["--roi", csv(o["roi_size"]), "--sw-batch", str(int(o["sw_batch_size"])), "--overlap", csv(o["overlap"]),
             "--mode", str(o["mode"]), "--sigma-scale", csv(o["sigma_scale"]), "--padding-mode",
             str(o["padding_mode"]), "--cval", repr(float(o["cval"]))]
    if o["threads"]:
        flags += ["--threads", str(int(o["threads"]))]
    if o["max_memory"]:
        flags += ["--max-memory", str(o["max_memory"])]
    return flags


def _cli_task(cmd: list[str]) -> str:
    import subprocess

    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""


def _library_task(input: str, output: str, model: str, o: dict[str, Any], part: Any, grid: Any,
                  force: bool) -> str:
    """One part through swi.segment: the pipeline library the command is a client of (its
    parts, store writer, markers and output rules), in the worker's own swi package."""
    from ._pipeline import segment as _segment

    def seq(v: Any) -> Any:
        return tuple(v) if isinstance(v, (list, tuple)) else v

    _segment(input, output, model=model, roi=seq(o["roi_size"]), sw_batch_size=int(o["sw_batch_size"]),
             overlap=seq(o["overlap"]), mode=str(o["mode"]), sigma_scale=seq(o["sigma_scale"]),
             padding=str(o["padding_mode"]), cval=float(o["cval"]), threads=int(o["threads"] or 0),
             max_memory=o["max_memory"], part=part, part_grid=grid, force=force)
    return f"part {part} done"


def _segment_onnx(client: Any, input: Any, output: str, model: str, options: dict[str, Any],
                  grid: Optional[Sequence[int]], force: bool, swi: Optional[str]) -> str:
    """An ONNX model: each task runs one part, `--shard I/N --shard-grid AxBxC` (the command's
    exact parts and its own store writer, markers and output rules): through the installed
    package's library, or the `swi` command at the path `swi` names."""
    if not isinstance(input, (str, os.PathLike)):
        raise TypeError("with an ONNX model the input must be a store name (x.zarr, x.ome.zarr, x.h5:/path)")
    if grid is None:
        grid = (max(1, len(client.scheduler_info().get("workers", {}))), 1, 1)
    grid = tuple(int(g) for g in grid)
    n = int(np.prod(grid))
    job = uuid.uuid4().hex[:8]
    if swi is None:
        src, mdl = os.path.abspath(os.fspath(input)), os.path.abspath(model)
        dst = os.path.abspath(output)
        _library_task(src, dst, mdl, options, "init", grid, force)
        futures = [client.submit(_library_task, src, dst, mdl, options, (i, n), grid, force, pure=False,
                                 key=f"swi-shard-{i}-of-{n}-{job}") for i in range(n)]
        client.gather(futures)
        return dst
    base = [swi, "segment", "-q", "--model", os.fspath(model), "--input", os.fspath(input), "--output", output]
    base += _cli_window_flags(options) + (["--force"] if force else [])
    _cli_task(base + ["--shard", "init"])
    shape = "x".join(str(g) for g in grid)
    futures = [client.submit(_cli_task, base + ["--shard", f"{i}/{n}", "--shard-grid", shape], pure=False,
                             key=f"swi-shard-{i}-of-{n}-{job}") for i in range(n)]
    client.gather(futures)
    return os.path.abspath(output)


def _not_a_store(path: str) -> Optional[str]:
    """Why path is not a store that swi writes and may replace (None: it is one)."""
    try:
        _outputs.check_store(path, True)
    except FileExistsError as e:
        return str(e)
    return None


def segment(client: Any, input: Any, output: str, predictor_factory: Union[Callable[[], Any], str],
            roi_size: Sizes,
            sw_batch_size: int = 1, *, overlap: Floats = 0.25, mode: str = "constant", sigma_scale: Floats = 0.125,
            padding_mode: str = "constant", cval: float = 0.0, classes: Optional[int] = None,
            grid: Optional[Sequence[int]] = None, chunks: Union[None, int, Sequence[int]] = None,
            threads: Optional[int] = 1, max_memory: Memory = None, force: bool = False,
            swi: Optional[str] = None, region: Optional[Sequence[Sequence[int]]] = None) -> str:
    """Labels (argmax) of `input` into the Zarr array `output`, one Dask task per part box
    of `grid` (default: one part per worker along the first axis), on `client` (a
    ``dask.distributed.Client``). `input`: a Zarr path, 'file.h5:/dataset', or an array
    (dask, zarr, numpy) that pickles to the workers. `classes` picks the label dtype
    (uint16 above 256; default uint8). `output` must not exist unless `force`, and then
    must be a store of the kind swi writes (a folder of anything else is never removed); it
    is refused when it is the input, lies inside it or holds it, under any name or link.
    Returns the output path once every task has finished and the store is in place (a
    failed task raises; the hidden store is removed and any previous output is kept). A new
    output that another job created meanwhile is kept and this job is refused
    (FileExistsError): one job writes one store.

    `predictor_factory` may instead be an ONNX model's path: then every task segments its
    part as ``swi segment --shard I/N --shard-grid`` does, through the package's own pipeline
    library (ONNX Runtime carried in the wheel), or through the `swi` command when `swi`
    names its path on the workers; `input` and `output` are store names (x.zarr,
    x.ome.zarr, x.h5:/path; the command's output rules and markers apply).

    `region` ``((i0, i1), (j0, j1), (k0, k1))``: a region of interest (docs/regions.md), with
    a predictor factory: each task runs only the windows of the whole run touching the part
    of the region in its box (a box without region voxels runs none), so the region's
    voxels are bitwise the whole run's and the others 0."""
    options = dict(roi_size=roi_size, sw_batch_size=sw_batch_size, overlap=overlap, mode=mode,
                   sigma_scale=sigma_scale, padding_mode=padding_mode, cval=cval, threads=threads,
                   max_memory=max_memory, region=None)
    if region is not None:
        if isinstance(predictor_factory, (str, os.PathLike)):
            raise ValueError("region= goes with a predictor factory: an ONNX model's parts write stores, which "
                             "take no region")
        box = [tuple(int(v) for v in r) for r in region]
        if len(box) != 3 or any(len(r) != 2 or not 0 <= r[0] < r[1] for r in box):
            raise ValueError(f"region must be ((i0, i1), (j0, j1), (k0, k1)) with 0 <= lo < hi, got {region!r}")
        options["region"] = tuple(box)
    if isinstance(predictor_factory, (str, os.PathLike)):
        return _segment_onnx(client, input, output, os.fspath(predictor_factory), options, grid, force, swi)
    import zarr

    out_path = os.path.abspath(output)
    # the command's rules (swi._outputs): never the input under any name, inside it or
    # around it; an existing output replaced only with force and only when it is a store
    # of the kind swi writes; checked before any task runs
    if isinstance(input, (str, os.PathLike)):
        _outputs.check_apart([("input", os.fspath(input))], [("output", out_path)])
    old = _outputs.claim_dir(out_path, force, _not_a_store)
    arr = _open_input(input)
    size, _channels = _spatial(arr)
    if chunks is None:
        # the input's own chunking, as the command's stores follow it; else 64 along each axis
        own = getattr(arr, "chunks", None)
        try:
            ch = tuple(int(c if isinstance(c, (int, np.integer)) else max(c)) for c in own[-3:]) if own else (64,) * 3
        except (TypeError, ValueError):
            ch = (64,) * 3
    else:
        ch = (int(chunks),) * 3 if isinstance(chunks, int) else tuple(int(c) for c in chunks)
    ch = tuple(max(1, min(c, s)) for c, s in zip(ch, size))
    if grid is None:
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        grid = (workers, 1, 1)
    dtype = np.uint16 if classes is not None and classes > 256 else np.uint8
    # written beside the final name and moved into place whole: a failed run leaves any
    # previous output as it was
    parent, leaf = os.path.split(out_path)
    work = tempfile.mkdtemp(prefix=f".{leaf}.swi-", dir=parent)
    z = zarr.open(work, mode="w", shape=size, chunks=ch, dtype=dtype, fill_value=0)
    open(os.path.join(work, _INCOMPLETE), "w").close()
    boxes = part_boxes(size, grid, z.chunks)
    if options["region"] is not None:
        reg = options["region"]
        if any(r[0] >= n for r, n in zip(reg, size)):
            raise ValueError(f"region {region!r} holds no voxel of the input {tuple(size)}")
        # a box without region voxels runs nothing: its chunks keep the fill value 0
        boxes = [b for b in boxes if all(max(a, r[0]) < min(c, r[1]) for a, c, r in zip(b[0], b[1], reg))]
    job = uuid.uuid4().hex[:8]
    try:
        futures = [client.submit(_task, input, work, predictor_factory, b, options, pure=False,
                                 key=f"swi-part-{i}-of-{len(boxes)}-{job}")
                   for i, b in enumerate(boxes)]
        given = client.gather(futures)  # raises the first task's exception
        n = classes if classes is not None else max([int(g) for g in given] + [0])
        if n:
            # the class table every swi store carries (the command's swi_classes): a Python
            # predictor names no class, so label_N, the colours those of the command's stores
            z.attrs["swi_classes"] = [{"label-value": v, "name": "background" if v == 0 else f"label_{v}",
                                       "rgba": [*_swi.label_color(v), 255 if v else 0]} for v in range(n)]
        os.unlink(os.path.join(work, _INCOMPLETE))
        # whole, in one step: a new output never goes over one another job made meanwhile,
        # and a replaced one (force) goes only now, if it is still the one checked above
        _outputs.publish_dir(work, out_path, old, _not_a_store)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return out_path
