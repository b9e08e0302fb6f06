#!/usr/bin/env python3
"""real_files.py SWI WORK -- `swi segment` over the real files other projects ship as test
data (Debian's python3-pydicom and python3-nibabel): every file of pydicom's test_files and
nibabel's tests/data as an input, series assembled from pydicom's single-frame images (each
copied 4 times along its slice normal), the multi-frame and RT dose files each in a directory
of its own, and nibabel's two DICOM slices as a series. Images without a position are also
placed (ImagePositionPatient, ImageOrientationPatient and PixelSpacing added), so their
decoders (JPEG 8/12-bit, JPEG-LS, JPEG 2000, RLE, deflate) run too.

Every run must end by itself (timeout 30 s) with exit status 0, or 1 with a one-line
message; never a signal. Every case that segments must give labels on the input's grid: the
output's shape and affine as nibabel (NIfTI) or pydicom (DICOM series) compute them for the
input. The model is a tiny ONNX graph made here (python3-onnx). Exits 77 (skipped) without
pydicom, nibabel, onnx or their test files."""
import concurrent.futures
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dicom_files  # noqa: E402  (make_series, pydicom_geometry)

FAILED = []


def check(cond, what):
    if not cond:
        print("FAIL " + what)
        FAILED.append(what)


def make_model(path):
    """4 classes, any input size: logits -(x - c)^2 for c = 0..3."""
    import onnx
    from onnx import TensorProto, helper
    centers = np.arange(4, dtype=np.float32).reshape(1, 4, 1, 1, 1)
    nodes = [helper.make_node("Sub", ["image", "centers"], ["d"]),
             helper.make_node("Mul", ["d", "d"], ["d2"]),
             helper.make_node("Neg", ["d2"], ["logits"])]
    g = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["n", 1, "i", "j", "k"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 4, "i", "j", "k"])],
        [helper.make_tensor("centers", TensorProto.FLOAT, centers.shape, centers.flatten().tolist())])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def expected_geometry(inp):
    """(shape, affine) of the input as nibabel or pydicom read it; None when neither can."""
    import nibabel as nib
    try:
        if os.path.isdir(inp):
            return dicom_files.pydicom_geometry(inp)
        img = nib.load(inp)
        return tuple(int(x) for x in img.shape[:3]), img.affine
    except Exception:
        return None


# ONNX Runtime's own leaks, as the CLI tests suppress them (for sanitizer builds)
LSAN_SUPP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "cli", "tests", "lsan.supp")
ENV = dict(os.environ, LSAN_OPTIONS=":".join(
    x for x in (os.environ.get("LSAN_OPTIONS"), "suppressions=" + LSAN_SUPP, "print_suppressions=0") if x))


def run_case(swi, model, inp, out):
    cmd = [swi, "segment", "-q", "--model", model, "--roi", "32,32,16", "--input", inp, "--output", out]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=ENV)
    except subprocess.TimeoutExpired:
        return inp, out, None, "timed out after 30 s"
    return inp, out, r.returncode, r.stderr


def main():
    swi, work = sys.argv[1], sys.argv[2]
    try:
        import nibabel
        import onnx  # noqa: F401
        import pydicom
    except ImportError as e:
        print("SKIPPED: %s (scripts/install-deps.sh installs python3-pydicom, -nibabel, -onnx)" % e)
        return 77
    pyd = os.path.join(os.path.dirname(pydicom.__file__), "data", "test_files")
    nibd = os.path.join(os.path.dirname(nibabel.__file__), "tests", "data")
    if not os.path.isdir(pyd) or not os.path.isdir(nibd):
        print("SKIPPED: pydicom's or nibabel's test data not found")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "out"))
    model = os.path.join(work, "tiny.onnx")
    make_model(model)

    inputs = []
    for d in (pyd, nibd):
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if os.path.isfile(p) and not name.endswith((".py", ".m", ".rst", ".txt", ".json", ".dump")):
                inputs.append(p)
    series = os.path.join(work, "series")
    import warnings
    warnings.simplefilter("ignore")
    for name in sorted(os.listdir(pyd)):
        p = os.path.join(pyd, name)
        try:
            ds = pydicom.dcmread(p, stop_before_pixels=True)
        except Exception:
            continue
        if "Rows" not in ds:
            continue
        try:
            frames = int(ds.get("NumberOfFrames", 1) or 1)
        except ValueError:  # a broken NumberOfFrames: the file alone, and a series of it
            frames = 0
        stem = os.path.splitext(name)[0]
        if frames != 1 or "rtdose" in name:  # a multi-frame or RT dose file, alone
            d = os.path.join(series, "alone_" + stem)
            os.makedirs(d)
            shutil.copy(p, d)
            inputs.append(d)
        if frames <= 1:
            # as it is, and (for an image without a position: secondary captures, most of the
            # JPEG and JPEG 2000 files) with one, so that their decoders are run too
            for prefix, geo in (("series_", False), ("placed_", True)):
                if geo and "ImagePositionPatient" in ds:
                    continue
                try:
                    inputs.append(dicom_files.make_series(series, prefix + stem, p, geometry=geo))
                except Exception as e:  # pydicom cannot write it back: not a case
                    print("note: %s: no series made (%s)" % (name, str(e).splitlines()[0]))
    pair = os.path.join(series, "nibabel_pair")
    os.makedirs(pair)
    for f in ("0.dcm", "1.dcm"):
        shutil.copy(os.path.join(nibd, f), pair)
    inputs.append(pair)

    jobs = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for n, inp in enumerate(inputs):
            out = os.path.join(work, "out", "%03d_%s.nii.gz" % (n, os.path.basename(inp)))
            jobs.append(pool.submit(run_case, swi, model, inp, out))
    segmented = refused = 0
    for j in jobs:
        inp, out, rc, err = j.result()
        lines = err.strip().splitlines()
        name = os.path.relpath(inp, work) if inp.startswith(work) else os.path.basename(inp)
        if rc is None or rc < 0:
            check(False, "%s: %s" % (name, err if rc is None else "killed by signal %d: %s" % (-rc, err[-300:])))
            continue
        print("%-48s %s" % (name[:48], "segmented" if rc == 0 else
                                  "refused: " + (lines[-1][:150] if lines else "") if rc == 1 else rc))
        if rc == 1:
            refused += 1
            check(len(lines) == 1 and lines[0].startswith("swi segment: "),
                  "%s: refused with one line: %r" % (name, err[:500]))
            check(not os.path.exists(out), "%s: refused, yet %s written" % (name, out))
            continue
        check(rc == 0, "%s: exit status %d: %r" % (name, rc, err[:300]))
        if rc != 0:
            continue
        segmented += 1
        check(len(lines) <= 1, "%s: at most one warning line: %r" % (name, err[:500]))
        want = expected_geometry(inp)
        check(want is not None, "%s: segmented, but neither nibabel nor pydicom reads it" % name)
        if want is None:
            continue
        img = nibabel.load(out)
        check(tuple(img.shape) == want[0] and np.allclose(img.affine, want[1], atol=1e-4, rtol=1e-5),
              "%s: labels of shape %s, affine\n%s\nwhere the input is %s,\n%s" %
              (name, img.shape, img.affine, want[0], want[1]))
    print("%d inputs: %d segmented (geometry checked), %d refused in one line, %d failed checks" %
          (len(inputs), segmented, refused, len(FAILED)))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
