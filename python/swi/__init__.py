"""swi -- libswi's streamed sliding-window inference for numpy and PyTorch.

``swi.sliding_window_inference`` is a drop-in for MONAI 1.4's function of that name
(same parameters, defaults, results and return types) whose stitching runs in C and
streams: with ``reduce="argmax"`` (or "max", "confidence", "entropy", a list, or your own
callable) every region is reduced as soon as its last window lands, so the full
[B, C, *spatial] score volume never exists.

``swi.segment`` runs a whole job on scans as the ``swi segment`` command does (files,
DICOM series or stores in; the model's orientation and spacing; ONNX models, torch
modules or callables, ensembles; labels back on the scan's grid or written), and
``swi.plan_job`` says what it would do; ``swi.segment_folder`` runs every scan of a folder
as ``swi segment --input-dir`` does.
"""

import os

from ._libs import load as _load_extension
from ._libs import niivue_path as _niivue_path

_load_extension()
if _niivue_path() and not os.environ.get("SWI_NIIVUE_JS"):
    # the review pages' viewer carried in the wheel (the C library reads SWI_NIIVUE_JS)
    os.environ["SWI_NIIVUE_JS"] = _niivue_path() or ""

from ._core import MAX_DIMS, BudgetError, Region, plan, sliding_window_inference
from ._folder import FolderCase, FolderResult, segment_folder
from ._inferer import SlidingWindowInferer, SlidingWindowInfererAdapt, SlidingWindowInfererReduced
from ._pipeline import Segmentation, plan_job, segment
from ._report import report
from ._swi import libswi_version

__version__ = libswi_version
__all__ = [
    "sliding_window_inference",
    "plan",
    "segment",
    "plan_job",
    "Segmentation",
    "segment_folder",
    "FolderCase",
    "FolderResult",
    "SlidingWindowInferer",
    "SlidingWindowInfererAdapt",
    "SlidingWindowInfererReduced",
    "Region",
    "report",
    "BudgetError",
    "MAX_DIMS",
]
