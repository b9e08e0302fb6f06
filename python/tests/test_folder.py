"""swi.segment_folder: every case of a folder as swi.segment segments each file alone (the same
labels, bitwise), a case that cannot be read failed and the others done, outputs skipped and
forced, parts, reading in a child process, and the `swi` command's folder mode (SWI_BINARY)
writing the same files."""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import swi
from conftest import REPO

nib = pytest.importorskip("nibabel")

if not getattr(swi._swi, "PIPELINE_FOLDER", 0):
    pytest.skip("swi was built without the pipeline library's folder mode", allow_module_level=True)

MODEL = str(REPO / "models" / "demo.onnx")  # with its card (demo.json)
VOLUME = Path(os.environ.get("SWI_GOLDEN_DIR") or REPO / "tests" / "data" / "golden") / "e2e" / "volume.nii.gz"


def labels(path) -> np.ndarray:
    return np.asarray(nib.load(str(path)).dataobj)


@pytest.fixture
def cases(tmp_path):
    """in/a.nii.gz (the e2e volume), in/b.nii.gz (it flipped and cut), in/c.nii.gz (not a volume)."""
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(VOLUME, d / "a.nii.gz")
    img = nib.load(str(VOLUME))
    x = np.asarray(img.dataobj)[::-1, 4:, :36].copy()
    nib.save(nib.Nifti1Image(x, img.affine), str(d / "b.nii.gz"))
    (d / "c.nii.gz").write_bytes(b"not a volume")
    return d


def test_folder_equals_each_file_alone(tmp_path, cases):
    want = {n: swi.segment(cases / f"{n}.nii.gz", model=MODEL, threads=2).labels for n in ("a", "b")}
    out = tmp_path / "out"
    seen = []
    r = swi.segment_folder(cases, out, model=MODEL, threads=2, on_case=seen.append)
    assert isinstance(r, swi.FolderResult)
    assert (r.done, r.failed, r.skipped) == (2, 1, 0)
    assert [c.name for c in r.cases] == ["a", "b", "c"]
    assert [c.status for c in r.cases] == ["done", "done", "failed"]
    assert "c.nii.gz" in r.cases[2].error and r.cases[0].error is None
    assert r.cases[1].size == want["b"].shape and r.cases[0].seconds > 0
    assert [c.name for c in seen] == ["a", "b", "c"]
    for n in ("a", "b"):
        assert r.cases["ab".index(n)].output == str(out / f"{n}.nii.gz")
        got = labels(out / f"{n}.nii.gz")
        assert got.shape == want[n].shape and np.array_equal(got, want[n]), n

    # again: the outputs exist and are skipped; a part with force redoes its case only
    r = swi.segment_folder(cases, out, model=MODEL, threads=2)
    assert (r.done, r.failed, r.skipped) == (0, 1, 2)
    r = swi.segment_folder(cases, out, model=MODEL, threads=2, force=True, part="1/2")
    assert [(c.name, c.status) for c in r.cases] == [("b", "done")]

    # read in a child process: the same labels
    out2 = tmp_path / "out2"
    r = swi.segment_folder(cases, out2, model=MODEL, threads=2, isolate_reads=True, output_format="nii")
    assert (r.done, r.failed) == (2, 1) and "c.nii.gz" in r.cases[2].error
    for n in ("a", "b"):
        assert np.array_equal(labels(out2 / f"{n}.nii"), want[n]), n

    # the command's folder mode writes the same files
    b = os.environ.get("SWI_BINARY")
    if b and Path(b).is_file():
        out3 = tmp_path / "out3"
        p = subprocess.run([b, "segment", "-q", "--model", MODEL, "--threads", "2", "--input-dir", str(cases),
                            "--output-dir", str(out3)], capture_output=True, text=True, timeout=300)
        assert p.returncode == 1 and "c.nii.gz" in p.stderr  # the bad case failed
        for n in ("a", "b"):
            assert (out3 / f"{n}.nii.gz").read_bytes() == (out / f"{n}.nii.gz").read_bytes(), n


def test_folder_usage_errors(tmp_path, cases):
    with pytest.raises(ValueError, match="is the input directory"):
        swi.segment_folder(cases, cases, model=MODEL)
    with pytest.raises(ValueError, match="output_format"):
        swi.segment_folder(cases, tmp_path / "o", model=MODEL, output_format="png")
    with pytest.raises(ValueError, match="part"):
        swi.segment_folder(cases, tmp_path / "o", model=MODEL, part=(2, 2))
    with pytest.raises(OSError, match="no cases"):
        empty = tmp_path / "empty"
        empty.mkdir()
        swi.segment_folder(empty, tmp_path / "o", model=MODEL)


def test_folder_on_case_exception_stops_the_run(tmp_path, cases):
    def stop(case):
        raise LookupError("stop at " + case.name)

    with pytest.raises(LookupError, match="stop at a"):
        swi.segment_folder(cases, tmp_path / "o", model=MODEL, threads=2, on_case=stop)
    assert (tmp_path / "o" / "a.nii.gz").is_file() and not (tmp_path / "o" / "b.nii.gz").exists()
    assert not [p for p in (tmp_path / "o").iterdir() if p.name.startswith(".")]  # no temporaries


def test_rerun_in_another_format_replaces_side_files(tmp_path, cases):
    """The card's class names (OUT.label.txt, OUT.ctbl) belong to their output: a rerun to
    another format replaces those swi wrote, without force; a file of the user's is kept."""
    (cases / "c.nii.gz").unlink()
    out = tmp_path / "out"
    r = swi.segment_folder(cases, out, model=MODEL, threads=2)
    assert (r.done, r.failed) == (2, 0) and (out / "a.label.txt").is_file() and (out / "b.ctbl").is_file()
    r = swi.segment_folder(cases, out, model=MODEL, threads=2, output_format="nii")
    assert (r.done, r.failed, r.skipped) == (2, 0, 0), [c.error for c in r.cases]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{n}{e}" for n in "ab" for e in (".nii.gz", ".nii", ".label.txt", ".ctbl"))

    # one file: the same name in another format; a side file that is not swi's is refused
    one = tmp_path / "one"
    one.mkdir()
    swi.segment(cases / "a.nii.gz", one / "l.nii.gz", model=MODEL, threads=2)
    swi.segment(cases / "a.nii.gz", one / "l.nii", model=MODEL, threads=2)
    assert '"blobs"' in (one / "l.label.txt").read_text()
    (one / "k.ctbl").write_text("my colors\n")
    with pytest.raises(OSError, match="k.ctbl: already exists"):
        swi.segment(cases / "a.nii.gz", one / "k.nii.gz", model=MODEL, threads=2)
    assert (one / "k.ctbl").read_text() == "my colors\n" and not (one / "k.nii.gz").exists()
