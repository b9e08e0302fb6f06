"""Folder mode: `segment_folder`, every scan of a folder segmented as ``swi segment --input-dir``
does (swi_pipeline.h's swi_folder_*): the model loaded once, the next case read while the
current one runs, a case that fails reported and the others segmented."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from . import _swi
from ._pipeline import (Inputs, PathLike, Predictor, Triple, _job, _Messages, _need_pipeline, _nnunet_fields,
                        _part, _path, _region_fields)
from ._predictor import _copy_into
from ._setup import Memory

__all__ = ["segment_folder", "FolderCase", "FolderResult"]

# A reader program in this Python: the extension module loaded alone (not the package, which
# imports numpy and torch), answering for one case's files.
_READER = ("import importlib.util as u, sys; s = u.spec_from_file_location('swi._swi', sys.argv.pop(1)); "
           "m = u.module_from_spec(s); s.loader.exec_module(m); sys.exit(m.serve_reader(sys.argv[1:]))")


@dataclass(frozen=True)
class FolderCase:
    """One case of a folder run: its name (the file's name without its ending, or the DICOM
    series folder's), its labels' path, ``status`` ("done", "failed", "skipped": its output
    existed, "not run": the run was stopped first), ``error`` (why it failed, else None), its
    input grid ``size`` (zeros until read) and the ``seconds`` reading and running it took."""

    name: str
    output: str
    status: str
    error: Optional[str]
    size: tuple[int, int, int]
    seconds: float


@dataclass(frozen=True)
class FolderResult:
    """What `segment_folder` hands back: the cases of this part by name, how many were done,
    failed and skipped, and the run's warnings and notes (``CASE: LINE`` for a case's)."""

    cases: tuple[FolderCase, ...]
    done: int
    failed: int
    skipped: int
    messages: tuple[str, ...] = ()


def _case(d: dict[str, Any]) -> FolderCase:
    return FolderCase(name=d["name"], output=d["output"], status=d["status"], error=d["error"],
                      size=tuple(d["size"]), seconds=float(d["seconds"]))


def segment_folder(input_dir: PathLike, output_dir: PathLike, *, model: Optional[Inputs] = None,
                   predictor: Optional[Predictor] = None, classes: Optional[int] = None,
                   output_format: str = "nii.gz", report_dir: Optional[PathLike] = None,
                   part: Union[str, tuple[int, int], None] = None, orientation: Optional[str] = None,
                   spacing: Optional[Triple] = None, roi: Union[None, int, Sequence[int]] = None,
                   overlap: Optional[Triple] = None, mode: Optional[str] = None,
                   sigma_scale: Optional[Triple] = None, padding: Optional[str] = None, cval: Optional[float] = None,
                   sw_batch_size: Optional[int] = None, tta: bool = False, clip: Optional[Sequence[float]] = None,
                   scale: Optional[Sequence[float]] = None, zscore: bool = False, nonfinite: str = "zero",
                   head: int = 0, no_card: bool = False, no_reuse: bool = False, reuse_cache: int = 0,
                   no_rewrite: bool = False, device: str = "cpu", max_memory: Memory = None, threads: int = 0,
                   force: bool = False, progress: Union[bool, Callable[[int, int], Any]] = False,
                   on_message: Optional[Callable[[str], Any]] = None,
                   on_case: Optional[Callable[[FolderCase], Any]] = None, isolate_reads: bool = False,
                   folds: Union[None, int, str, Sequence[Any]] = None, disable_tta: bool = False,
                   tile_step_size: Optional[float] = None, save_probabilities: bool = False,
                   accumulate: str = "float32", region: Optional[Sequence[Sequence[int]]] = None,
                   region_mm: Optional[Sequence[Sequence[float]]] = None,
                   margin: Optional[float] = None) -> FolderResult:
    """Segment every case of ``input_dir`` into ``output_dir`` as ``swi segment --input-dir``
    does, each case as `segment` would segment it alone.

    Cases: each volume file (.nii, .nii.gz, .nrrd, .nhdr, .mha, .mhd; nnU-Net's
    ``CASE_0000.nii.gz``, ``CASE_0001.nii.gz``, ... are the channels of CASE) and each folder (a
    DICOM series), sorted by name. Each case's labels go to ``OUTPUT_DIR/CASE.FORMAT``
    (``output_format``: "nii.gz", "nii", "nrrd" or "mha"; an nnU-Net model directory writes its
    own file ending); an output that exists is skipped unless ``force``. ``report_dir``: a review
    page per case and ``index.html``. ``part=(I, N)`` or ``"I/N"``: cases I, I+N, ... (from 0),
    for several processes sharing a folder. ``isolate_reads``: each case's volumes are read in
    a child process (this Python, the extension module alone), so that a file library that
    aborts or hangs on one file fails that case only; else they are read in a thread.

    The other keywords are `segment`'s (``region``/``region_mm``: the same box for every
    case; a mask names one case's file, so it is not taken here). ``progress``: True for a bar over each case's windows,
    or a callable ``(done, total)``; ``on_message``: each warning line, ``CASE: LINE`` for a
    case's; ``on_case``: called with each `FolderCase` as it ends (an exception it raises stops
    the run and propagates).

    Returns a `FolderResult` (a failed case is in it, not raised). Errors: ValueError for a bad
    argument or spec, OSError when a folder cannot be read or made (or the index written),
    RuntimeError for other failures; Ctrl-C stops the run (the finished cases are kept) and
    raises KeyboardInterrupt once it has stopped.
    """
    _need_pipeline()
    if not getattr(_swi, "PIPELINE_FOLDER", 0):
        raise RuntimeError("this pipeline library has no folder mode (swi_folder_run)")
    spec, preds = _job(["-"], model, predictor, classes, orientation, spacing, roi, overlap, mode, sigma_scale,
                       padding, cval, sw_batch_size, tta, head, clip, scale, zscore, nonfinite, None, None,
                       no_card, no_reuse, reuse_cache, no_rewrite, device, max_memory, threads)
    del spec["inputs"]  # each case's files
    _nnunet_fields(spec, folds, disable_tta, tile_step_size, save_probabilities, accumulate)
    if isinstance(region, (str, os.PathLike)):
        raise ValueError("segment_folder: region= is a box here (a mask names one case's file)")
    _region_fields(spec, region, region_mm, margin, None)
    spec["force"] = int(bool(force))
    if output_format not in ("nii.gz", "nii", "nrrd", "mha"):
        raise ValueError(f"output_format must be 'nii.gz', 'nii', 'nrrd' or 'mha', got {output_format!r}")
    folder: dict[str, Any] = {"input_dir": _path(input_dir, "input_dir"), "output_dir": _path(output_dir, "output_dir"),
                              "output_format": output_format, "report_dir": _path(report_dir, "report_dir")}
    if folder["input_dir"] is None or folder["output_dir"] is None:
        raise ValueError("segment_folder needs input_dir and output_dir")
    if part is not None:
        folder["part_index"], folder["part_count"] = _part(part)
    if isolate_reads:
        folder["reader_argv"] = [sys.executable, "-c", _READER, os.path.abspath(_swi.__file__)]
    bar: Any = None
    if progress is True:
        from ._core import _Progress
    elif not (progress in (False, None) or callable(progress)):
        raise ValueError(f"progress must be a bool or a callable (done, total), got {progress!r}")
    current: list[Optional[str]] = [None]
    msgs = _Messages(on_message)

    def message(line: str) -> None:
        msgs(f"{current[0]}: {line}" if current[0] else line)

    def prog(done: int, total: int) -> None:
        if bar is not None:
            bar(done, total)
        elif callable(progress):
            progress(done, total)

    def case_event(event: str, d: dict[str, Any]) -> None:
        nonlocal bar
        if event == "start":
            current[0] = d["name"]
            if progress is True:
                bar = _Progress()
            return
        if bar is not None:
            bar.close()
            bar = None
        current[0] = None
        if on_case is not None:
            on_case(_case(d))

    try:
        r = _swi.segment_folder(spec, folder, preds, _copy_into, prog if progress else None, message, case_event)
    finally:
        if bar is not None:
            bar.close()
    return FolderResult(cases=tuple(_case(d) for d in r["cases"]), done=int(r["done"]), failed=int(r["failed"]),
                        skipped=int(r["skipped"]), messages=tuple(msgs.lines))
