"""swi.report: the review page written from numpy, checked against numpy's own counts and,
where Chromium and NiiVue are installed, loaded in headless Chromium (report/tests/browser.py)."""

import base64
import gzip
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import swi

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "report" / "tests"))
import browser  # noqa: E402

AFFINE = np.array([[0.0, -1.2, 0.0, 40.0], [1.5, 0.0, 0.0, -10.0], [0.0, 0.0, 2.5, 3.0], [0, 0, 0, 1]])
COLORS = {1: (230, 25, 75), 2: (60, 180, 75), 3: (255, 225, 25)}


def niivue():
    p = os.environ.get("SWI_NIIVUE_JS") or str(REPO / ".deps" / "niivue" / "niivue.umd.js")
    if not hasattr(swi._swi, "report"):
        pytest.skip("swi built without the report library")
    if not os.path.isfile(p):
        pytest.skip("NiiVue's browser build not found at %s (scripts/install-deps.sh)" % p)
    os.environ.setdefault("SWI_NIIVUE_JS", p)
    return p


def volumes():
    lab = np.zeros((36, 30, 20), np.int64)
    lab[3:14, 4:12, 2:9] = 1
    lab[20:33, 16:27, 10:18] = 2
    img = np.random.default_rng(0).normal(100, 10, lab.shape) + 50 * lab
    return lab, img


def meta_of(path):
    text = Path(path).read_text(encoding="utf-8")
    m = re.search(r'<script id="swi-meta" type="application/json">(.*?)</script>', text, re.S)
    return json.loads(m.group(1)), text


def test_report_stats_match_numpy(tmp_path):
    niivue()
    lab, img = volumes()
    out = tmp_path / "seg.html"
    swi.report(lab, image=img, affine=AFFINE, classes=["background", "liver", "spleen", "kidney"], path=out,
               title="case 7", summary={"model": "m.onnx", "note": "</script><b>x</b>"})
    meta, text = meta_of(out)
    assert meta["title"] == "case 7"
    assert meta["size"] == list(lab.shape) and meta["preview"] == list(lab.shape)
    ml = abs(np.linalg.det(AFFINE[:3, :3])) / 1000
    assert [c["name"] for c in meta["classes"]] == ["liver", "spleen", "kidney"]
    for c in meta["classes"]:
        idx = np.argwhere(lab == c["label"])
        assert c["voxels"] == len(idx)
        assert c["ml"] == pytest.approx(len(idx) * ml, rel=1e-12)
        if len(idx):
            assert c["lo"] == idx.min(0).tolist() and c["hi"] == idx.max(0).tolist()
            # where a click on the row goes: the class's voxel nearest its centroid
            d = ((idx - idx.mean(0)) ** 2).sum(1)
            assert c["at"] == idx[np.argmin(d)].tolist()
        else:
            assert c["lo"] == [-1, -1, -1]
    # a summary value cannot end the script element it is in
    assert ["note", "</script><b>x</b>"] in meta["summary"]
    assert "<b>x</b>" not in text
    # the labels NiiVue loads: the same voxels, the same affine
    import nibabel as nib
    b64 = re.search(r'<script id="swi-labels" type="text/plain">(.*?)</script>', text, re.S).group(1)
    img_l = nib.Nifti1Image.from_bytes(gzip.decompress(base64.b64decode(b64)))
    assert np.array_equal(np.asarray(img_l.dataobj), lab)
    assert np.allclose(img_l.affine, AFFINE, atol=1e-5)
    assert not [p for p in os.listdir(tmp_path) if p != "seg.html"], "a temporary file was left"


def test_report_volumes_one_gzip_member(tmp_path):
    """Volumes above swi_io's 2 MB gzip block: still one member (NiiVue reads only the first)."""
    niivue()
    import zlib
    lab = np.zeros((180, 160, 100), np.uint8)
    lab[20:150, 30:120, 10:90] = 1
    img = np.random.default_rng(1).normal(0, 1, lab.shape)
    out = tmp_path / "big.html"
    swi.report(lab, image=img, path=out)
    meta, text = meta_of(out)
    assert meta["preview"] == [180, 160, 100]
    # labels: a class index a byte; the image: 16 bits a voxel, in its own units
    for name, nbytes in (("swi-labels", 1), ("swi-image", 2)):
        raw = base64.b64decode(re.search(r'<script id="%s" type="text/plain">(.*?)</script>' % name, text,
                                         re.S).group(1))
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        first = d.decompress(raw)
        assert d.eof and d.unused_data == b"", "%s: more than one gzip member" % name
        assert len(first) == 352 + nbytes * lab.size, (name, len(first))


def test_report_refuses(tmp_path, monkeypatch):
    niivue()
    lab, _ = volumes()
    with pytest.raises(ValueError):
        swi.report(lab[0], path=tmp_path / "x.html")
    with pytest.raises(ValueError):
        swi.report(lab, image=np.zeros((2, 2, 2)), path=tmp_path / "x.html")
    with pytest.raises(TypeError):
        swi.report(lab.astype(np.float32), path=tmp_path / "x.html")
    monkeypatch.setenv("SWI_NIIVUE_JS", str(tmp_path / "missing.js"))
    with pytest.raises(OSError, match="install-deps.sh"):
        swi.report(lab, path=tmp_path / "x.html")
    assert os.listdir(tmp_path) == [], "something was written: %s" % os.listdir(tmp_path)


def test_report_output_rules(tmp_path):
    """swi.report writes as swi segment does: an existing file is replaced only with force,
    a folder never; a failed write leaves the old file as it was, and no temporary."""
    niivue()
    lab, _ = volumes()
    out = tmp_path / "r.html"
    out.write_text("mine")
    with pytest.raises(FileExistsError, match="r.html"):
        swi.report(lab, path=out)
    assert out.read_text() == "mine"
    (tmp_path / "d.html").mkdir()
    with pytest.raises(FileExistsError, match="d.html"):
        swi.report(lab, path=tmp_path / "d.html", force=True)
    swi.report(lab, path=out, force=True)
    assert out.read_text().startswith("<!DOCTYPE html>") or "<html" in out.read_text()[:2000]
    assert sorted(os.listdir(tmp_path)) == ["d.html", "r.html"]


def test_report_in_chromium(tmp_path):
    niivue()
    if not browser.chromium():
        pytest.skip("chromium not found (apt-get install chromium; scripts/install-deps.sh)")
    lab, img = volumes()
    out = tmp_path / "seg.html"
    swi.report(lab, image=img, affine=AFFINE, classes=["background", "liver", "spleen", "kidney"], path=out)
    with browser.Browser() as b:
        page = b.open("file://%s#opacity=1" % out)
        page.settle()
        seen = browser.count_hues(browser.png_pixels(page.screenshot("#gl"))[2], COLORS)
        assert seen[1] > 50 and seen[2] > 50 and seen[3] <= 2, seen
        page.eval("document.getElementById('show-1').click()")
        page.settle()
        seen = browser.count_hues(browser.png_pixels(page.screenshot("#gl"))[2], COLORS)
        assert seen[1] <= 2 and seen[2] > 50, seen
        rows = page.eval("Array.from(document.querySelectorAll('#stats tbody tr .voxels')).map(t => t.textContent)")
        assert rows == [str(int((lab == c).sum())) for c in (1, 2, 3)]
        assert not b.errors, b.errors
        assert all(u.startswith(("file:", "data:", "blob:", "about:")) for u in b.requests), b.requests
