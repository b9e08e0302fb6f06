"""Whole jobs on scans: `segment` and `plan_job`, the library behind ``swi segment`` and
``swi plan`` (swi_pipeline.h) driven from Python.

The arguments are checked here and handed to swi._swi as swi_job_spec's fields by their C
names; the caller's predictors (torch modules or callables) reach the job through the
extension's predictor bridge, one batch of windows at a time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

import numpy as np

from . import _swi
from ._predictor import _copy_into, _engine_ready, _real_scores
from ._setup import _BLEND, _PAD, Memory, _choice, _is_torch, _parse_memory

try:  # torch is optional: numpy predictors work without it
    import torch
except ImportError:  # pragma: no cover - exercised only where torch is absent
    torch = None

__all__ = ["segment", "plan_job", "Segmentation"]

PathLike = Union[str, "os.PathLike[str]"]
Inputs = Union[PathLike, Sequence[PathLike]]
Predictor = Union[Callable[..., Any], Sequence[Callable[..., Any]]]
Triple = Union[float, Sequence[float]]
Part = Union[str, tuple[int, int], None]  # (I, N) from 0, "I/N", or "init"


@dataclass(frozen=True)
class Segmentation:
    """What `segment` hands back.

    labels: the label map on the input's own grid, ``[i, j, k]`` in the input's voxel order
      (nibabel's ``get_fdata()`` order for NIfTI), uint8 (uint16 above 256 classes); None for
      a part of a stores job (its labels are in the output store).
    affine: 4x4 float64, voxel index to RAS+ millimetres (nibabel's ``affine``), or None
      with the labels.
    scores: with ``scores=True``: the blended scores on the input grid, float32
      ``[classes, i, j, k]`` (softmax probabilities with ``softmax=True``); else None.
    classes: the number of classes; stats: the engine's counters (windows_total,
      windows_predicted, windows_reused, predictor_calls, bytes_partial_peak); seconds:
      the run's wall time; outputs: every file written, by what it is (``output``,
      ``scores``, ``preview``, ``report``, ``statistics``, ``label_names`` and
      ``color_table``: the card's class names beside a label file, ``probabilities`` and
      ``properties``: an nnU-Net job's ``save_probabilities`` files, ``masks`` the folder of
      masks and ``mask:NAME`` each of them); messages: the job's
      warnings and notes, one line each.
    statistics: with ``statistics=``: per class (by name) its voxels, volume (``volume_ml``;
      ``volume`` in mm³ as TotalSegmentator), bounding box (``bbox_voxels``, ``bbox_mm`` in
      scanner coordinates) and the first input's intensity as read (``intensity``: the mean,
      ``intensity_std``, ``intensity_min``, ``intensity_max``) at its voxels, as
      ``--statistics`` writes it (the ``classes`` object of that file); else None.
    """

    labels: Optional[np.ndarray]
    affine: Optional[np.ndarray]
    scores: Optional[np.ndarray]
    classes: int
    stats: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    outputs: dict[str, str] = field(default_factory=dict)
    messages: tuple[str, ...] = ()
    statistics: Optional[dict[str, Any]] = None


def _need_pipeline() -> None:
    if not getattr(_swi, "HAVE_PIPELINE", 0):
        raise RuntimeError("swi was built without the pipeline library (pipeline/ of libswi): swi.segment and "
                           "swi.plan_job need the CMake build of libswi with it")


def _paths(v: Any, what: str, most: int) -> list[str]:
    if isinstance(v, (str, bytes, os.PathLike)):
        v = [v]
    if not isinstance(v, Sequence) or isinstance(v, (str, bytes)):
        raise ValueError(f"{what} must be a path or a list of paths, got {v!r}")
    out = []
    for p in v:
        if not isinstance(p, (str, os.PathLike)):
            raise ValueError(f"{what} must be paths (str or os.PathLike), got {p!r}")
        s = os.fspath(p)
        if not s:
            raise ValueError(f"{what}: an empty path")
        out.append(s)
    if not out:
        raise ValueError(f"{what}: none given")
    if len(out) > most:
        raise ValueError(f"{what}: at most {most}, got {len(out)}")
    return out


def _path(v: Any, what: str) -> Optional[str]:
    if v is None:
        return None
    if not isinstance(v, (str, os.PathLike)) or not os.fspath(v):
        raise ValueError(f"{what} must be a path (str or os.PathLike), got {v!r}")
    return os.fspath(v)


def _triple(v: Any, what: str, lo: float, lo_open: bool = False, hi: Optional[float] = None) -> list[float]:
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
        v = [v, v, v]
    v = list(v)
    if len(v) != 3:
        raise ValueError(f"{what} must be one value or 3 (one per axis), got {len(v)}")
    out = []
    for x in v:
        if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
            raise ValueError(f"{what} must be numbers, got {x!r}")
        x = float(x)
        if not np.isfinite(x) or x < lo or (lo_open and x == lo) or (hi is not None and x >= hi):
            bound = f"> {lo}" if lo_open else f">= {lo}"
            if hi is not None:
                bound += f" and < {hi}"
            raise ValueError(f"{what} must be {bound}, got {v!r}")
        out.append(x)
    return out


def _whole(v: Any, what: str, lo: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ValueError(f"{what} must be an int, got {v!r}")
    if int(v) < lo:
        raise ValueError(f"{what} must be >= {lo}, got {v!r}")
    return int(v)


def _part(part: Part) -> tuple[int, int]:
    if isinstance(part, str):
        m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", part)
        if not m:
            raise ValueError(f"part must be (I, N) or 'I/N' (part I of N, from 0), got {part!r}")
        i, n = int(m.group(1)), int(m.group(2))
    elif isinstance(part, Sequence) and len(part) == 2:
        i, n = _whole(part[0], "part I"), _whole(part[1], "part N", 1)
    else:
        raise ValueError(f"part must be (I, N) or 'I/N' (part I of N, from 0), got {part!r}")
    if not 0 <= i < n:
        raise ValueError(f"part {i}/{n}: I must be in 0..N-1 (parts count from 0)")
    return i, n


def _is_store(name: str) -> bool:
    """A chunked store (Zarr, OME-Zarr, HDF5 dataset) rather than a volume file: only whole
    jobs on volume files hand their labels back."""
    s = name.rstrip("/")
    if re.search(r"\.(h5|hdf5|hdf):", s) or s.endswith(".zarr"):
        return True
    return os.path.isdir(s) and any(os.path.exists(os.path.join(s, m)) for m in (".zarray", ".zgroup", "zarr.json"))


class _JobPredictor:
    """A torch module (windows as tensors on its parameters' device, run under no_grad) or a
    callable (windows as float32 numpy arrays) as the bridge's predictor: called with the
    batch's windows [count, channels, *roi], its outputs checked to be [count, classes, *roi]."""

    def __init__(self, fn: Any, classes: int, index: int):
        if not callable(fn):
            raise TypeError(f"predictor {index} must be a torch module or a callable, got {type(fn).__name__}")
        self.fn = fn
        self.classes = classes
        self.what = "the predictor" if index < 0 else f"predictor {index}"
        self.module = torch is not None and isinstance(fn, torch.nn.Module)
        self.device = None
        self.dtype = None
        if self.module:
            p = next(iter(fn.parameters()), None)
            self.device = p.device if p is not None else torch.device("cpu")
            self.dtype = p.dtype if p is not None and p.dtype.is_floating_point else torch.float32

    def __call__(self, win: bytearray, images: tuple, starts: tuple, shape: tuple) -> list:
        x = np.frombuffer(win, dtype=np.float32).reshape(shape)
        if self.module:
            with torch.no_grad():
                out = self.fn(torch.from_numpy(x).to(device=self.device, dtype=self.dtype))
        else:
            out = self.fn(x)
        want = (shape[0], self.classes) + tuple(shape[2:])
        if not (_is_torch(out) or isinstance(out, np.ndarray)):
            raise ValueError(f"{self.what} returned a {type(out).__name__}; expected an array {list(want)}")
        if tuple(out.shape) != want:
            raise ValueError(f"{self.what} returned shape {list(out.shape)}; expected {list(want)} ([windows, "
                             f"classes, *roi] with classes={self.classes})")
        if not _real_scores(out):
            raise ValueError(f"{self.what} returned dtype {out.dtype}; expected real scores")
        return [(self.classes, tuple(shape[2:]), _engine_ready(out))]


def _job(input: Inputs, model: Any, predictor: Any, classes: Optional[int], orientation: Optional[str],
         spacing: Optional[Triple], roi: Any, overlap: Optional[Triple], mode: Optional[str],
         sigma_scale: Optional[Triple], padding: Optional[str], cval: Optional[float],
         sw_batch_size: Optional[int], tta: bool, head: int, clip: Any, scale: Any, zscore: bool,
         nonfinite: str, part: Part, part_grid: Any, no_card: bool, no_reuse: bool, reuse_cache: int,
         no_rewrite: bool, device: str, max_memory: Memory, threads: int) -> tuple[dict[str, Any], Any]:
    """(spec dict, predictors list or None) from the public keywords, shared by segment and plan_job."""
    spec: dict[str, Any] = {"inputs": _paths(input, "input", 16)}
    if model is not None:
        spec["models"] = _paths(model, "model", 16)
    preds = None
    if predictor is not None:
        if not getattr(_swi, "PIPELINE_PREDICTORS", 0):
            raise RuntimeError("predictor= needs a pipeline library that takes the caller's predictors "
                               "(swi_job_spec.predictors); this one runs ONNX models only: give model=, or run "
                               "the module on an array with swi.sliding_window_inference")
        if classes is None:
            raise ValueError("predictor= needs classes= (the number of output channels it returns)")
        spec["classes"] = _whole(classes, "classes", 1)
        members = list(predictor) if isinstance(predictor, (list, tuple)) else [predictor]
        if not 1 <= len(members) <= 16:
            raise ValueError(f"predictor: 1 to 16 members, got {len(members)}")
        if model is not None and len(spec["models"]) != 1:
            raise ValueError("with predictor=, model= names one ONNX model, for its card only")
        one = len(members) == 1
        preds = [_JobPredictor(p, spec["classes"], -1 if one else i) for i, p in enumerate(members)]
    elif model is None:
        raise ValueError("segment needs model= (an ONNX model, or a list of them: an ensemble) or predictor= "
                         "(a torch module or callable, or a list of them)")
    elif classes is not None:
        raise ValueError("classes= goes with predictor=; an ONNX model says its own")
    if orientation is not None:
        if not isinstance(orientation, str) or not re.fullmatch(r"[RLAPSIrlapsi]{3}", orientation):
            raise ValueError(f"orientation must be 3 axis codes such as 'RAS' or 'PIR', got {orientation!r}")
        spec["orientation"] = orientation.upper()
    if spacing is not None:
        spec["spacing"] = _triple(spacing, "spacing", 0.0, lo_open=True)
    if roi is not None:
        r = roi if isinstance(roi, Sequence) else [roi] * 3
        if len(r) != 3:
            raise ValueError(f"roi must be one size or 3, got {roi!r}")
        spec["roi"] = [_whole(v, "roi", -1) for v in r]  # 0 or -1: the whole volume along that axis
    if overlap is not None:
        spec["overlap"] = _triple(overlap, "overlap", 0.0, hi=1.0)
    if mode is not None:
        spec["mode"] = _choice(mode, _BLEND, "mode")
    if sigma_scale is not None:
        spec["sigma_scale"] = _triple(sigma_scale, "sigma_scale", 0.0, lo_open=True)
    if padding is not None:
        spec["padding"] = _choice(padding, _PAD, "padding")
    if cval is not None:
        spec["cval"] = float(cval)
    if sw_batch_size is not None:
        spec["sw_batch"] = _whole(sw_batch_size, "sw_batch_size", 1)
    spec["tta"] = int(bool(tta))
    spec["head"] = _whole(head, "head")
    if clip is not None:
        c = [float(v) for v in clip]
        if len(c) != 2 or not c[0] <= c[1]:
            raise ValueError(f"clip must be (lo, hi) with lo <= hi, got {clip!r}")
        spec["clip"] = c
    if scale is not None:
        s = [float(v) for v in scale]
        if len(s) != 4 or s[0] == s[1]:
            raise ValueError(f"scale must be (a_min, a_max, b_min, b_max) with a_min != a_max, got {scale!r}")
        spec["scale"] = s
    spec["zscore"] = int(bool(zscore))
    if nonfinite not in ("zero", "fail"):
        raise ValueError(f"nonfinite must be 'zero' or 'fail', got {nonfinite!r}")
    spec["nonfinite_fail"] = int(nonfinite == "fail")
    if part == "init":
        spec["shard_init"] = 1
    elif part is not None:
        spec["shard_part"], spec["shard_parts"] = _part(part)
    if part is not None:
        if part_grid is not None:
            g = list(part_grid)
            if len(g) != 3:
                raise ValueError(f"part_grid must be (A, B, C), got {part_grid!r}")
            spec["shard_grid"] = [_whole(v, "part_grid", 1) for v in g]
    elif part_grid is not None:
        raise ValueError("part_grid goes with part=")
    spec["no_card"] = int(bool(no_card))
    spec["no_reuse"] = int(bool(no_reuse))
    spec["reuse_cache"] = _whole(reuse_cache, "reuse_cache")
    spec["no_rewrite"] = int(bool(no_rewrite))
    dev = str(device).lower()
    if dev not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda' (ONNX Runtime's execution provider), got {device!r}")
    spec["cuda"] = int(dev == "cuda")
    spec["max_memory"] = _parse_memory(max_memory)
    spec["threads"] = _whole(threads, "threads")
    return spec, preds


class _Messages:
    def __init__(self, on_message: Optional[Callable[[str], Any]]):
        self.lines: list[str] = []
        self.fn = on_message

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        if self.fn is not None:
            self.fn(line)
        else:
            sys.stderr.write(f"swi: {line}\n")
            sys.stderr.flush()


Region = Union[None, str, os.PathLike, Sequence[Sequence[int]]]


def _region_fields(spec: dict, region: Any, region_mm: Any, margin: Optional[float],
                   keep_outside: Optional[PathLike]) -> None:
    """The region of interest into the spec (``--region``, ``--region-mm``, ``--region-mask``,
    ``--margin``, ``--keep-outside``; docs/regions.md)."""
    if region is not None and region_mm is not None:
        raise ValueError("region= and region_mm= name one region: give one")
    if isinstance(region, (str, os.PathLike)):
        spec["region_mask"] = _path(region, "region")
    elif region is not None:
        box = [tuple(r) for r in region]
        if len(box) != 3 or any(len(r) != 2 for r in box):
            raise ValueError(f"region must be ((i0, i1), (j0, j1), (k0, k1)) in voxels, or a mask's path; "
                             f"got {region!r}")
        lo = [_whole(r[0], "region") for r in box]
        hi = [_whole(r[1], "region") for r in box]
        if any(a >= b for a, b in zip(lo, hi)):
            raise ValueError(f"region: every axis needs lo < hi (hi exclusive), got {region!r}")
        spec["region_given"] = 1
        spec["region_lo"], spec["region_hi"] = lo, hi
    if region_mm is not None:
        box = [tuple(float(v) for v in r) for r in region_mm]
        if len(box) != 3 or any(len(r) != 2 or not r[0] <= r[1] for r in box):
            raise ValueError(f"region_mm must be ((x0, x1), (y0, y1), (z0, z1)) in mm, lo <= hi; got {region_mm!r}")
        spec["region_mm_lo"] = [r[0] for r in box]
        spec["region_mm_hi"] = [r[1] for r in box]
    if margin is not None:
        m = float(margin)
        if not m >= 0 or m == float("inf"):
            raise ValueError(f"margin must be millimetres >= 0, got {margin!r}")
        spec["margin_mm"] = m
    if keep_outside is not None:
        spec["keep_outside"] = _path(keep_outside, "keep_outside")


def _nnunet_fields(spec: dict, folds: Any, disable_tta: bool, tile_step_size: Optional[float],
                   save_probabilities: bool, accumulate: str = "float32") -> None:
    """The nnU-Net job's fields, set only when given (a library without them refuses them)."""
    if accumulate not in ("float32", "float16"):
        raise ValueError(f"accumulate must be 'float32' or 'float16', got {accumulate!r}")
    given = (folds is not None or disable_tta or tile_step_size is not None or save_probabilities
             or accumulate == "float16")
    if not given:
        return
    if not getattr(_swi, "PIPELINE_NNUNET", 0):
        raise RuntimeError("this pipeline library runs no nnU-Net model directories (folds=, disable_tta=, "
                           "tile_step_size=, save_probabilities=)")
    if folds is not None:
        items = [folds] if isinstance(folds, (int, str)) else list(folds)
        spec["folds"] = ",".join(str(f) for f in items)
    if disable_tta:
        spec["no_mirroring"] = 1
    if tile_step_size is not None:
        t = float(tile_step_size)
        if not 0 < t <= 1:
            raise ValueError(f"tile_step_size must be in (0, 1], got {tile_step_size!r}")
        spec["tile_step"] = t
    if save_probabilities:
        spec["save_probabilities"] = 1
    if accumulate == "float16":
        spec["accumulate_float16"] = 1


def segment(input: Union[Inputs, np.ndarray, "torch.Tensor"], output: Optional[PathLike] = None, *,
            model: Optional[Inputs] = None,
            predictor: Optional[Predictor] = None, classes: Optional[int] = None,
            orientation: Optional[str] = None, spacing: Optional[Triple] = None,
            roi: Union[None, int, Sequence[int]] = None, overlap: Optional[Triple] = None,
            mode: Optional[str] = None, sigma_scale: Optional[Triple] = None, padding: Optional[str] = None,
            cval: Optional[float] = None, sw_batch_size: Optional[int] = None, tta: bool = False,
            part: Part = None, part_grid: Optional[Sequence[int]] = None,
            scores: Union[None, bool, PathLike] = None, softmax: bool = False,
            preview: Optional[PathLike] = None, report: Optional[PathLike] = None,
            report_title: Optional[str] = None, clip: Optional[Sequence[float]] = None,
            scale: Optional[Sequence[float]] = None, zscore: bool = False, nonfinite: str = "zero",
            head: int = 0, no_card: bool = False, no_reuse: bool = False, reuse_cache: int = 0,
            no_rewrite: bool = False, device: str = "cpu", max_memory: Memory = None, threads: int = 0,
            force: bool = False, progress: Union[bool, Callable[[int, int], Any]] = False,
            on_message: Optional[Callable[[str], Any]] = None, folds: Union[None, int, str, Sequence[Any]] = None,
            disable_tta: bool = False, tile_step_size: Optional[float] = None,
            save_probabilities: bool = False, accumulate: str = "float32", region: Region = None,
            region_mm: Optional[Sequence[Sequence[float]]] = None, margin: Optional[float] = None,
            keep_outside: Optional[PathLike] = None, statistics: Union[None, bool, PathLike] = None,
            chunks: Optional[Sequence[int]] = None, masks: Optional[PathLike] = None,
            affine: Any = None) -> Segmentation:
    """Segment a scan as ``swi segment`` does: read, preprocess, bring to the model's grid,
    run the sliding window, bring the result back to the scan's own grid, write.

    input: a volume file (NIfTI .nii/.nii.gz, NRRD, MetaImage .mha/.mhd), a DICOM series
      folder, a store (``x.zarr``, ``x.ome.zarr``, ``x.h5:/dataset``), or a list of them (the
      channels, in order; a 4-D NIfTI's frames are channels). Or an array: a numpy array or
      torch tensor ``[i, j, k]`` (one channel) or ``[channels, i, j, k]`` (MONAI's channel
      first), any real dtype, with ``affine=`` (4x4, voxel index to RAS+ mm; default the
      identity), or a MONAI MetaTensor (its ``affine`` taken): it is run as the same voxels in
      a NIfTI file with that affine would be, the labels bitwise the same (it travels to the
      job as a private temporary float32 NIfTI file, removed afterwards).
    output: where the label map goes (``--output``: a volume file by its extension, a .dcm
      DICOM SEG of a DICOM input, or a store). None: nothing is written and the labels come
      back in memory (volume inputs).
    model: an ONNX model, or a list of them: an ensemble (the mean of their outputs is
      blended). Its card (``m.json`` beside ``m.onnx``, or embedded) fills what is not given.
    predictor: instead of a model, a torch module (it gets float tensors on its parameters'
      device under ``torch.no_grad()``) or a callable (float32 numpy arrays), or a list of
      them: an ensemble. It is called with windows ``[n, channels, *roi]`` and returns
      ``[n, classes, *roi]`` scores; ``classes`` is then required, and ``roi`` too unless
      ``model=`` names one ONNX model for its card (the card's window). It needs a pipeline
      library that takes the caller's predictors (``swi._swi.PIPELINE_PREDICTORS``); one
      that runs ONNX models only refuses it with RuntimeError.
    orientation, spacing: the model's axis codes ("RAS", "PIR"...) and voxel size in mm
      (one value or three); the results are brought back to the input's grid.
    roi: the window, one size or three (0 or -1 on an axis: the whole axis; None: the
      card's, else the model's fixed input size).
    overlap, mode ("constant"/"gaussian"), sigma_scale, padding ("constant", "reflect",
      "replicate", "circular"), cval, sw_batch_size: the window, MONAI's meanings; None
      takes the card's value, else the engine's default.
    tta: test-time mirroring (the mean over the 8 flips of every window).
    part: ``(I, N)`` or ``"I/N"``: part I of N (from 0) of a stores job into shared output
      stores (``--shard I/N``); ``"init"`` only creates those stores (``--shard init``, for
      parts run at once elsewhere); ``part_grid=(A, B, C)`` cuts the parts as a grid.
    scores: a path: the blended scores are written there (float32, classes along the last
      axis, as ``--scores``); True: they come back in memory ([classes, i, j, k]).
    softmax: softmax probabilities instead of raw scores. preview: a PNG of the middle
      slices; report: an HTML review page (report_title its heading).
    clip (lo, hi), scale (a_min, a_max, b_min, b_max), zscore: intensity preprocessing per
      channel, in that order. nonfinite: "zero" (NaN/Inf read as 0, with a warning) or "fail".
    head: which output of a multi-output model. no_card: ignore the card. no_reuse: every
      window through the network. reuse_cache: window outputs kept for reuse (0: default).
      no_rewrite: load the ONNX model as it is. device: "cpu" or "cuda" (ONNX Runtime's
      execution provider, ``--device``).
    max_memory: budget of the whole job (bytes or "4G"; default: the memory available).
    threads: 0 for every core. force: replace existing outputs (never an input).
    progress: True for a bar over windows, or a callable ``(done, total)``.
    on_message: called with each warning line; default: "swi: LINE" on stderr.
    folds, disable_tta, tile_step_size, save_probabilities: for an nnU-Net model directory
      (``model=`` a folder ``swi convert nnunet`` wrote; the job runs nnU-Net's whole
      inference with its card's settings): the folds used (``[0, 1]`` or ``"0,1"``; default
      all), no mirroring, the window step (default 0.5), and ``OUT.npz`` / ``OUT.json``
      beside ``output`` (nnU-Net's probabilities and properties).
    accumulate: ``"float16"`` keeps the blend's partial sums in binary16 as nnU-Net does
      (half their memory, probabilities within about 1e-3); nnU-Net model directories only.
    region: a region of interest (docs/regions.md): ``((i0, i1), (j0, j1), (k0, k1))``, a box
      of input voxels (array order, hi exclusive), or a mask's path (the bounding box of its
      nonzero voxels); region_mm the box in the input's scanner millimetres instead. Only
      the whole run's windows touching it run; its voxels are bitwise the whole run's, the
      others 0 (or keep_outside's labels, a label map on the input's grid). margin grows
      the region by that many mm.
    masks: a folder: one binary mask a class (``DIR/NAME.nii.gz``, uint8, the background left
      out, NAME the card's class name, else ``label_N``), written whole or not at all
      (``--masks``); volume-file outputs only (nnU-Net model directories too).
    chunks: ``(A, B, C)``: the output stores' chunk (``--chunks``); None: the store input's
      chunk, else 64 along each axis.
    statistics: a path: per-class statistics written there as JSON (``--statistics``) and
      returned too; True: returned only (``Segmentation.statistics``); nnU-Net model
      directories too (classes named by the dataset's labels; a region model's ``label_N``).

    Returns a `Segmentation`. Errors: ValueError for a bad argument or spec (the library's
    SWI_ERR_INVALID_ARG), OSError when a file cannot be read or written, swi.BudgetError when
    it does not fit max_memory, RuntimeError for other failures; a predictor's own exception
    propagates unchanged. Ctrl-C cancels the job (nothing is left behind) and raises
    KeyboardInterrupt once it has stopped. Outputs appear only when complete.
    """
    _need_pipeline()
    array_dir = None
    if _is_array(input):
        array_dir = tempfile.mkdtemp(prefix="swi-array-")
        try:
            input = _array_nifti(input, affine, os.path.join(array_dir, "input.nii"))
        except BaseException:
            shutil.rmtree(array_dir, ignore_errors=True)
            raise
        if report is not None and report_title is None:
            report_title = "array"  # not the temporary's name
    elif affine is not None:
        raise ValueError("affine= goes with an array input; a file says its own geometry")
    try:
        return _segment(input, output, model, predictor, classes, orientation, spacing, roi, overlap, mode,
                        sigma_scale, padding, cval, sw_batch_size, tta, part, part_grid, scores, softmax, preview,
                        report, report_title, clip, scale, zscore, nonfinite, head, no_card, no_reuse,
                        reuse_cache, no_rewrite, device, max_memory, threads, force, progress, on_message, folds,
                        disable_tta, tile_step_size, save_probabilities, accumulate, statistics, chunks, masks,
                        region, region_mm, margin, keep_outside)
    finally:
        if array_dir is not None:
            shutil.rmtree(array_dir, ignore_errors=True)


def _is_array(x: Any) -> bool:
    return isinstance(x, np.ndarray) or _is_torch(x)


def _array_nifti(x: Any, affine: Any, path: str) -> str:
    """x ([i, j, k] or [channels, i, j, k]) as a float32 NIfTI-1 file at path whose sform
    is affine (a MetaTensor's own when None), as nibabel would save it: the job reads the
    same voxels and geometry."""
    if affine is None and _is_torch(x) and getattr(x, "affine", None) is not None:
        affine = x.affine  # a MONAI MetaTensor
    if _is_torch(x):
        x = x.detach().cpu().numpy()
    x = np.asarray(x)
    if x.ndim not in (3, 4) or not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise ValueError(f"an array input must be real [i, j, k] or [channels, i, j, k], got {x.dtype} "
                         f"{list(x.shape)}")
    if x.ndim == 4:
        if not 1 <= x.shape[0] <= 16:
            raise ValueError(f"an array input [channels, i, j, k] takes 1 to 16 channels, got {x.shape[0]}")
        x = np.moveaxis(x, 0, -1)  # the frames of a 4-D NIfTI are its channels
    if any(n < 1 or n > 32767 for n in x.shape):
        raise ValueError(f"an array input's axes must be 1 to 32767 voxels, got {list(x.shape)}")
    a = np.eye(4) if affine is None else np.asarray(
        affine.detach().cpu().numpy() if _is_torch(affine) else affine, dtype=np.float64)
    if a.shape != (4, 4) or not np.all(np.isfinite(a)):
        raise ValueError(f"affine must be a finite 4x4 matrix, got shape {list(a.shape)}")
    hdr = np.zeros(352, dtype=np.uint8)

    def put(off: int, dtype: str, values: Any) -> None:
        b = np.asarray(values, dtype=dtype).tobytes()
        hdr[off:off + len(b)] = np.frombuffer(b, dtype=np.uint8)

    put(0, "<i4", 348)
    put(40, "<i2", [x.ndim, *x.shape] + [1] * (7 - x.ndim))
    put(70, "<i2", [16, 32])  # float32
    put(76, "<f4", [1.0, *np.sqrt((a[:3, :3] ** 2).sum(0))] + [1.0] * 4)
    put(108, "<f4", [352.0, 1.0, 0.0])  # vox_offset, scl_slope, scl_inter
    hdr[123] = 2  # millimetres
    put(252, "<i2", [0, 2])  # qform unset, sform aligned (nibabel's codes)
    put(280, "<f4", a[:3].reshape(-1))
    hdr[344:348] = np.frombuffer(b"n+1\0", dtype=np.uint8)
    with open(path, "wb") as f:
        f.write(hdr.tobytes())
        f.write(np.asarray(x, dtype="<f4").tobytes(order="F"))
    return path


def _segment(input, output, model, predictor, classes, orientation, spacing, roi, overlap, mode, sigma_scale,
             padding, cval, sw_batch_size, tta, part, part_grid, scores, softmax, preview, report, report_title,
             clip, scale, zscore, nonfinite, head, no_card, no_reuse, reuse_cache, no_rewrite, device, max_memory,
             threads, force, progress, on_message, folds, disable_tta, tile_step_size, save_probabilities,
             accumulate, statistics, chunks, masks, region, region_mm, margin, keep_outside) -> Segmentation:
    spec, preds = _job(input, model, predictor, classes, orientation, spacing, roi, overlap, mode, sigma_scale,
                       padding, cval, sw_batch_size, tta, head, clip, scale, zscore, nonfinite, part, part_grid,
                       no_card, no_reuse, reuse_cache, no_rewrite, device, max_memory, threads)
    outputs: dict[str, str] = {}
    for key, v in (("output", output), ("preview", preview), ("report", report)):
        p = _path(v, key)
        if p is not None:
            spec[key] = outputs[key] = p
    keep_scores = scores is True
    if scores is not None and scores is not False and not keep_scores:
        p = _path(scores, "scores")
        assert p is not None
        spec["scores"] = outputs["scores"] = p
    if masks is not None:
        if not getattr(_swi, "PIPELINE_MASKS", 0):
            raise RuntimeError("masks= needs a pipeline library that writes them (swi_job_spec.masks)")
        p = _path(masks, "masks")
        assert p is not None
        spec["masks"] = outputs["masks"] = p
    if chunks is not None:
        if not getattr(_swi, "PIPELINE_CHUNKS", 0):
            raise RuntimeError("chunks= needs a pipeline library that takes them (swi_job_spec.chunks)")
        c = list(chunks) if isinstance(chunks, Sequence) and not isinstance(chunks, str) else []
        if len(c) != 3:
            raise ValueError(f"chunks must be (A, B, C), got {chunks!r}")
        spec["chunks"] = [_whole(v, "chunks", 1) for v in c]
    keep_stats = statistics is True
    if statistics is not None and statistics is not False:
        if not getattr(_swi, "PIPELINE_STATISTICS", 0):
            raise RuntimeError("statistics= needs a pipeline library that gathers them (swi_job_spec.statistics)")
        if not keep_stats:
            p = _path(statistics, "statistics")
            assert p is not None
            spec["statistics"] = outputs["statistics"] = p
        spec["keep_statistics"] = 1
    if softmax and (scores is None or scores is False):
        raise ValueError("softmax=True applies to the scores: give scores=PATH or scores=True too")
    if report_title is not None:
        spec["report_title"] = str(report_title)
    spec["softmax"] = int(bool(softmax))
    _nnunet_fields(spec, folds, disable_tta, tile_step_size, save_probabilities, accumulate)
    _region_fields(spec, region, region_mm, margin, keep_outside)
    spec["force"] = int(bool(force))
    spec["quiet"] = int(progress is False or progress is None)  # the summary line comes with the bar
    # the labels come back from whole jobs on volume files (a store's labels are its output)
    keep = part is None and not any(_is_store(s) for s in spec["inputs"])
    if not keep and output is None:
        raise ValueError("a job on stores, or a part, needs output= (a store): its labels are not kept in memory")
    if keep_scores and not keep:
        raise ValueError("scores=True (in memory) needs a whole job on volume files; name a scores store instead")
    prog: Any = None
    bar = None
    if progress is True:
        from ._core import _Progress

        prog = bar = _Progress()
    elif callable(progress):
        prog = progress
    elif progress not in (False, None):
        raise ValueError(f"progress must be a bool or a callable (done, total), got {progress!r}")
    msgs = _Messages(on_message)
    tmp = None
    if keep_scores:
        if getattr(_swi, "PIPELINE_KEEP_SCORES", 0):
            spec["keep_scores"] = 1
        else:  # the library keeps no scores: they travel through a float32 NIfTI file
            tmp = tempfile.mkdtemp(prefix="swi-scores-")
            spec["scores"] = os.path.join(tmp, "scores.nii")
    started = time.time()
    try:
        r = _swi.segment(spec, preds, _copy_into, prog, msgs, keep)
        if tmp is not None:
            r["scores"] = _swi.read_frames(spec["scores"])
    finally:
        if bar is not None:
            bar.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    labels = np.asarray(r["labels"]) if r["labels"] is not None else None
    affine = np.array(r["affine"], dtype=np.float64).reshape(4, 4) if labels is not None else None
    sc = np.asarray(r["scores"]) if r["scores"] is not None else None
    st = None
    if r.get("statistics"):
        st = json.loads(r["statistics"])["classes"]
    elif "statistics" in outputs:  # a job whose labels are not kept (stores): the file it wrote
        with open(outputs["statistics"], encoding="utf-8") as f:
            st = json.load(f)["classes"]
    _side_outputs(spec, outputs, started)
    return Segmentation(labels=labels, affine=affine, scores=sc, classes=int(r["classes"]), stats=dict(r["stats"]),
                        seconds=float(r["seconds"]), outputs=outputs, messages=tuple(msgs.lines), statistics=st)


def _side_outputs(spec: dict, outputs: dict[str, str], started: float) -> None:
    """The files a job writes beside its named outputs, as it names them: the card's class
    names beside a label file (OUT.label.txt, OUT.ctbl) and an nnU-Net job's probabilities
    (OUT.npz, OUT.json); those this run wrote (a file older than the run is another's)."""
    if "masks" in outputs:  # each mask too, by its class: "mask:NAME"
        d = outputs["masks"]
        for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if f.endswith(".nii.gz"):
                outputs["mask:" + f[:-len(".nii.gz")]] = os.path.join(d, f)
    out = outputs.get("output")
    if out is None or _is_store(out):
        return
    stem = out
    for end in (".nii.gz", ".nii", ".nrrd", ".mha", ".mhd", ".dcm"):
        if out.endswith(end):
            stem = out[:-len(end)]
            break
    cand = [("label_names", stem + ".label.txt"), ("color_table", stem + ".ctbl")]
    if spec.get("save_probabilities"):
        cand += [("probabilities", stem + ".npz"), ("properties", stem + ".json")]
    for key, path in cand:
        try:
            fresh = os.path.isfile(path) and os.stat(path).st_mtime >= started - 2.0
        except OSError:
            fresh = False
        if key not in outputs and fresh:
            outputs[key] = path


def plan_job(input: Inputs, *, model: Optional[Inputs] = None, predictor: Optional[Predictor] = None,
             classes: Optional[int] = None, orientation: Optional[str] = None, spacing: Optional[Triple] = None,
             roi: Union[None, int, Sequence[int]] = None, overlap: Optional[Triple] = None,
             mode: Optional[str] = None, sigma_scale: Optional[Triple] = None, padding: Optional[str] = None,
             cval: Optional[float] = None, sw_batch_size: Optional[int] = None, tta: bool = False,
             part: Part = None, part_grid: Optional[Sequence[int]] = None, clip: Optional[Sequence[float]] = None,
             scale: Optional[Sequence[float]] = None, zscore: bool = False, nonfinite: str = "zero",
             head: int = 0, no_card: bool = False, no_reuse: bool = False, reuse_cache: int = 0,
             no_rewrite: bool = False, device: str = "cpu", max_memory: Memory = None, threads: int = 0,
             count_reuse: bool = False, on_message: Optional[Callable[[str], Any]] = None,
             region: Region = None, region_mm: Optional[Sequence[Sequence[float]]] = None,
             margin: Optional[float] = None) -> dict[str, Any]:
    """What `segment` would do with the same arguments, without running it (``swi plan``):
    a dict with ``engine`` (the engine's plan, the keys of `swi.plan`: roi, windows, calls,
    batch, order, bytes_*), ``size`` (the model grid the windows run on), ``input_size``
    (the input grid), ``channels``, ``classes``, ``members`` (predictors averaged),
    ``beside_bytes``, ``reading_bytes``, ``peak_bytes``, ``fits`` (False when it does not
    fit the memory available), ``unfit`` (why not, naming the smallest budget that works, or
    None; a ``max_memory`` below the smallest plan raises swi.BudgetError instead) and
    ``describe`` (the plan as ``swi plan`` prints it). With ``count_reuse`` the voxels are
    read to count the windows window reuse spares. region, region_mm, margin: as `segment`'s
    (then ``windows_whole`` is the whole run's windows and ``region`` the boxes). Raises as
    `segment` does."""
    _need_pipeline()
    spec, preds = _job(input, model, predictor, classes, orientation, spacing, roi, overlap, mode, sigma_scale,
                       padding, cval, sw_batch_size, tta, head, clip, scale, zscore, nonfinite, part, part_grid,
                       no_card, no_reuse, reuse_cache, no_rewrite, device, max_memory, threads)
    _region_fields(spec, region, region_mm, margin, None)
    return dict(_swi.plan_job(spec, preds, _copy_into, _Messages(on_message), bool(count_reuse)))
