"""swi.report: the review page of a segmentation (report/swi_report.h), from numpy."""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional, Union

import numpy as np

from . import _outputs, _swi


def report(labels: Any, image: Any = None, affine: Any = None, classes: Optional[Sequence[str]] = None,
           path: Union[str, "os.PathLike[str]"] = "report.html", title: Optional[str] = None,
           summary: Union[Mapping[str, Any], Iterable[tuple[str, Any]], None] = None, force: bool = False,
           identifiers: Union[Mapping[str, Any], Iterable[tuple[str, Any]], None] = None) -> None:
    """Write a self-contained HTML review page of a 3-D label map to ``path``.

    The page opens offline in a browser: the image with the labels overlaid in three
    linked planes and a 3-D rendering (NiiVue, inlined), a legend of the classes (toggle
    one, change the opacity), window presets (CT soft tissue, lung, bone; auto from the
    image's percentiles), a readout under the crosshair (mm, voxel, intensity, class), a
    table of the classes (voxels, millilitres, bounding box in voxels and mm) and
    ``summary``. The same page as ``swi segment --report``.

    labels   integer array [i, j, k] (values 0..65535; 0 is background)
    image    the image under the labels, same shape (any real dtype), or None
    affine   4x4 voxel -> millimetre matrix (nibabel's img.affine); None: identity (1 mm)
    classes  class names, background first (``["background", "liver", ...]``), or None
    title    the page's heading (default: the file's name)
    summary  a dict (or (key, value) pairs) shown as the page's "Run" table
    identifiers  a dict (or pairs) shown in the page's header: whose scan it is, as
             ``swi segment`` shows a DICOM series' ({"patient": ..., "study": ...,
             "series": ..., "date": "YYYYMMDD"})

    The file is written as ``swi segment`` writes its outputs: next to ``path`` under a
    temporary name and renamed into place once whole; an existing ``path`` is replaced only
    with ``force`` (FileExistsError otherwise), and never when it is a folder or other
    non-regular file.
    Raises OSError when NiiVue's browser build is missing (scripts/install-deps.sh
    installs it; SWI_NIIVUE_JS names another) or the file cannot be written.
    """
    if not hasattr(_swi, "report"):
        raise RuntimeError("swi was built without the report library (report/)")
    lab = np.asarray(labels)
    if lab.ndim != 3:
        raise ValueError("labels must be 3-D [i, j, k], not of shape %s" % (lab.shape,))
    if lab.dtype.kind not in "biu":
        raise TypeError("labels must be integers, not %s" % lab.dtype)
    if lab.size and (lab.min() < 0 or lab.max() > 65535):
        raise ValueError("labels must be 0..65535")
    lab = np.ascontiguousarray(lab, dtype=np.uint8 if (lab.size == 0 or lab.max() < 256) else np.uint16)
    img = None
    if image is not None:
        img = np.asarray(image)
        if img.shape != lab.shape:
            raise ValueError("image shape %s differs from the labels' %s" % (img.shape, lab.shape))
        img = np.ascontiguousarray(img, dtype=np.float32)
    aff = np.eye(4) if affine is None else np.asarray(affine, dtype=np.float64)
    if aff.shape != (4, 4) or not np.all(np.isfinite(aff)):
        raise ValueError("affine must be a finite 4x4 matrix")
    names = None if classes is None else [str(c) for c in classes]
    def pairs_of(x: Union[Mapping[str, Any], Iterable[tuple[str, Any]], None]) -> list[tuple[str, str]]:
        if not x:
            return []
        pairs = x.items() if isinstance(x, Mapping) else x
        return [(str(k), str(v)) for k, v in pairs]

    items = pairs_of(summary)
    ids = pairs_of(identifiers)
    where = os.fspath(path)
    if title is None:
        title = os.path.basename(where)
    with _outputs.output_file(where, force) as fd:
        # the writer closes fd in every case
        _swi.report(fd, where, lab, lab.itemsize, lab.shape, img, aff.flatten().tolist(), names, items, title, ids)
