#!/usr/bin/env python3
"""The review pages (swi segment --report, folder mode's index), in headless Chromium.

    report_test.py CASE SWI WORKDIR

Cases:
  page      swi segment --report: the page loads from file:// with no console error and
            fetches nothing; the canvas shows the colours of the classes present and none
            of the absent one; unticking a class in the legend removes its colour; the
            table equals the volumes nibabel computes from the label file
  offline   the same page in a browser with no network at all (its own network namespace,
            or, where that is not allowed, a proxy that goes nowhere)
  preview   a volume longer than 256 voxels is shown at a bounded resolution; the table
            still counts every voxel
  refused   without NiiVue, --report is refused before anything runs, with a message
            saying how to install it, and nothing is written
  folder    --report-dir: a page per case and index.html (every case, the failed one
            with its error, volumes, thumbnails, links; sortable), loaded in Chromium
  review    swi.report (PYTHONPATH: the built package) of a known image and labels 1 and
            9000: the window presets exist and set the window; the readout at a known
            voxel shows its mm, voxel, intensity and class; the boxes in mm equal numpy's
            through the affine; label 9000 is drawn (its colour on the canvas, its class
            index in the overlay volume)
  dicom     swi segment --report on a DICOM series (io/tests/formats.py) with --scale:
            the header shows the series' patient, study, series and date; the readout
            shows the scan's own HU, not the scaled values the network saw

The volumes and the model are made here (the "quant" model of cli/tests/clitest.py: the
label of a voxel is the class nearest to its intensity), so the expected labels are known.
Exits 77 (skipped, with a message) when chromium or NiiVue is missing.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import nibabel as nib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "cli", "tests"))
import browser  # noqa: E402

CLASSES = ["background", "liver", "spleen", "kidney"]
# swi_io_label_color: the colours of labels 1..3 in previews, colour tables and pages
COLORS = {1: (230, 25, 75), 2: (60, 180, 75), 3: (255, 225, 25)}
AFFINE = np.array([[-0.8, 0.0, 0.0, 10.0], [0.0, 0.9, 0.0, -20.0], [0.0, 0.0, 2.0, 5.0], [0, 0, 0, 1.0]])


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(browser.SKIP)


def niivue_path(build_default):
    return os.environ.get("SWI_NIIVUE_JS") or build_default


def make_model(work):
    import clitest
    clitest.make_models(work)
    with open(os.path.join(work, "quant4.json"), "w") as f:
        json.dump({"roi": [8, 8, 8], "classes": CLASSES}, f)
    return os.path.join(work, "quant4.onnx")


def make_volume(path, shape=(40, 36, 28), seed=1, boxes=((1, (4, 16), (5, 20), (3, 12)),
                                                          (2, (22, 34), (18, 30), (12, 24)))):
    """Noise around 0 with boxes of intensity 1 and 2 (never 3): labels 1 and 2 present,
    kept apart (no pixel between them mixes their colours), label 3 absent."""
    rng = np.random.default_rng(seed)
    v = rng.uniform(-0.3, 0.3, shape).astype(np.float32)
    for value, (i0, i1), (j0, j1), (k0, k1) in boxes:
        v[i0:i1, j0:j1, k0:k1] += value
    nib.Nifti1Image(v, AFFINE).to_filename(path)


def stats_from_file(path):
    img = nib.load(path)
    lab = np.asarray(img.dataobj)
    ml = abs(np.linalg.det(img.affine[:3, :3])) / 1000.0
    out = {}
    for c in range(1, len(CLASSES)):
        idx = np.argwhere(lab == c)
        n = len(idx)
        box = "\u2013" if n == 0 else ", ".join("%d\u2013%d" % (idx[:, a].min(), idx[:, a].max()) for a in range(3))
        out[c] = {"voxels": n, "ml": n * ml, "box": box, "name": CLASSES[c]}
    return out


def run(cmd, env=None, ok=True, cwd=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=120,
                       cwd=cwd)
    if ok and r.returncode != 0:
        fail("%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
    return r


def table_rows(page):
    return page.eval("""Array.from(document.querySelectorAll('#stats tbody tr')).map(tr => ({
        label: Number(tr.dataset.label), name: tr.querySelector('.name').textContent,
        voxels: tr.querySelector('.voxels').textContent, ml: tr.querySelector('.ml').textContent,
        box: tr.querySelector('.box').textContent }))""")


def check_table(page, want):
    rows = table_rows(page)
    if sorted(r["label"] for r in rows) != sorted(want):
        fail("the table lists labels %s, the label file %s" % ([r["label"] for r in rows], sorted(want)))
    for r in rows:
        w = want[r["label"]]
        if r["name"] != w["name"] or int(r["voxels"]) != w["voxels"] or r["box"] != w["box"] or \
                abs(float(r["ml"]) - w["ml"]) > 0.0005 + 1e-9:
            fail("class %d: the page says %s, nibabel %s" % (r["label"], r, w))
    print("table: %s" % ", ".join("%s %s voxels %s mL" % (r["name"], r["voxels"], r["ml"]) for r in rows))


def check_quiet(b, url):
    if b.errors:
        fail("errors on %s: %s" % (url, b.errors))
    other = [u for u in b.requests if not u.startswith(("file:", "data:", "blob:", "about:"))]
    if other:
        fail("the page fetched %s" % other)
    if not any(u.startswith("file:") for u in b.requests):
        fail("no request seen at all (is the Network domain on?): %s" % b.requests)


def segment_page(swi, work, extra=()):
    model = make_model(work)
    make_volume(os.path.join(work, "in.nii.gz"))
    # names relative to the folder, as a user types them (the page's summary shows them)
    run([swi, "segment", "--model", os.path.basename(model), "--input", "in.nii.gz", "--output", "out.nii.gz",
         "--report", "out.html", "--quiet", "--force"] + list(extra), cwd=work)
    return os.path.join(work, "out.nii.gz"), os.path.join(work, "out.html")


def case_page(swi, work):
    out, html = segment_page(swi, work)
    want = stats_from_file(out)
    if want[1]["voxels"] == 0 or want[2]["voxels"] == 0 or want[3]["voxels"] != 0:
        fail("the test data should have labels 1 and 2, not 3: %s" % want)
    url = "file://" + html
    with browser.Browser() as b:
        # opacity 1: the overlay's own colours, the image's grey beneath only at the edges
        page = b.open(url + "#opacity=1")
        page.settle()
        check_table(page, want)
        png = page.screenshot("#gl")
        _, _, rows = browser.png_pixels(png)
        seen = browser.count_hues(rows, COLORS)
        print("colours on the canvas: %s" % seen)
        if seen[1] < 50 or seen[2] < 50:
            fail("the classes present are not on the canvas: %s" % seen)
        if seen[3] > 2:
            fail("the absent class's colour is on the canvas: %s" % seen)
        with open(os.path.join(work, "page.png"), "wb") as f:
            f.write(page.screenshot())
        # untick spleen in the legend: its colour goes, liver's stays
        page.eval("document.getElementById('show-2').click()")
        page.settle()
        seen2 = browser.count_hues(browser.png_pixels(page.screenshot("#gl"))[2], COLORS)
        print("spleen hidden: %s" % seen2)
        if seen2[2] > 2 or seen2[1] < 50:
            fail("hiding spleen in the legend left %s" % seen2)
        # both hidden: no class colour anywhere (the colours came from the labels)
        page.eval("document.getElementById('show-1').click()")
        page.settle()
        seen3 = browser.count_hues(browser.png_pixels(page.screenshot("#gl"))[2], COLORS)
        print("both hidden: %s" % seen3)
        if seen3[1] > 2 or seen3[2] > 2:
            fail("with every class hidden the canvas still shows %s" % seen3)
        page.eval("document.getElementById('all').click()")
        page.settle()
        seen4 = browser.count_hues(browser.png_pixels(page.screenshot("#gl"))[2], COLORS)
        if seen4[1] < 50 or seen4[2] < 50:
            fail("'show all' did not bring the classes back: %s" % seen4)
        # the opacity slider reaches the overlay: at 0 no class colour is left
        page.eval("(() => { const o = document.getElementById('opacity'); o.value = '0';"
                  " o.dispatchEvent(new Event('input')); })()")
        page.settle()
        seen5 = browser.count_hues(browser.png_pixels(page.screenshot("#gl"))[2], COLORS)
        print("opacity 0: %s" % seen5)
        if seen5[1] > 2 or seen5[2] > 2:
            fail("at opacity 0 the canvas still shows %s" % seen5)
        # a row of the table takes the crosshair into its class's box
        page.eval("document.querySelector('#stats tr[data-label=\"2\"]').click()")
        page.settle()
        loc = page.eval("(() => { const v = window.swiLocation && window.swiLocation.values;"
                        " return v ? v.map(x => x.value) : null; })()")
        print("spleen's row: the values under the crosshair %s (%s)" %
              (loc, page.eval("document.getElementById('readout').textContent")))
        if not loc or loc[-1] != 2:
            fail("clicking spleen's row did not take the crosshair into spleen: %s" % loc)
        # each class's colour is where its voxels are: one plane, the crosshair on the class's
        # voxel (its row clicked), a pixel beside the crosshair's lines (drawn a voxel wide; the
        # boxes are 12 voxels wide)
        page3 = b.open(url + "#opacity=1&view=axial")
        page3.settle()
        for c in (1, 2):
            page3.eval("document.querySelector('#stats tr[data-label=\"%d\"]').click()" % c)
            page3.settle()
            pos = page3.eval("(() => { const p = swiViewer.frac2canvasPos(swiViewer.scene.crosshairPos);"
                             " const c = document.getElementById('gl'), r = c.getBoundingClientRect();"
                             " return p ? [p[0] * r.width / c.width, p[1] * r.height / c.height] : null; })()")
            _, _, rows = browser.png_pixels(page3.screenshot("#gl"))
            if not pos:
                fail("no canvas position for class %d" % c)
            x, y = int(pos[0]) + 20, int(pos[1]) + 20
            px = rows[y][x]
            got = browser.count_hues([[px]], COLORS)
            print("class %d: crosshair at %s, pixel %s at (%d, %d)" % (c, pos, px, x, y))
            if got[c] != 1:
                fail("class %d's voxel is drawn %s, not in its colour %s" % (c, px, COLORS[c]))
        # a fragment hides a class from the start
        page2 = b.open(url + "#opacity=1&hide=1")
        page2.settle()
        seen6 = browser.count_hues(browser.png_pixels(page2.screenshot("#gl"))[2], COLORS)
        if seen6[1] > 2 or seen6[2] < 50 or page2.eval("document.getElementById('show-1').checked"):
            fail("#hide=1 left %s" % seen6)
        check_quiet(b, url)
        print("summary: %s" % page.eval("Array.from(document.querySelectorAll('#summary tr'))"
                                        ".map(t => t.textContent).join('; ')"))
    print("ok: %s" % html)


def case_offline(swi, work):
    out, html = segment_page(swi, work)
    want = stats_from_file(out)
    mode = True
    if subprocess.run(["unshare", "-n", "true"], stderr=subprocess.DEVNULL).returncode != 0:
        mode = "proxy"
        print("unshare -n is not allowed here: a proxy that goes nowhere instead")
    with browser.Browser(offline=mode) as b:
        page = b.open("file://" + html + "#opacity=1")
        page.settle()
        check_table(page, want)
        seen = browser.count_hues(browser.png_pixels(page.screenshot("#gl"))[2], COLORS)
        if seen[1] < 50 or seen[2] < 50 or seen[3] > 2:
            fail("offline, the canvas shows %s" % seen)
        check_quiet(b, html)
    print("ok offline (%s): %s" % ("unshare -n" if mode is True else "dead proxy", seen))


def case_preview(swi, work):
    model = make_model(work)
    shape = (300, 20, 12)
    make_volume(os.path.join(work, "long.nii.gz"), shape=shape,
                boxes=((1, (3, 290), (4, 9), (2, 10)), (2, (100, 200), (12, 18), (3, 9))))
    out, html = os.path.join(work, "long_out.nii.gz"), os.path.join(work, "long.html")
    run([swi, "segment", "--model", model, "--input", os.path.join(work, "long.nii.gz"), "--output", out,
         "--report", html, "--quiet", "--force"])
    text = open(html, encoding="utf-8").read()
    meta = json.loads(re.search(r'<script id="swi-meta" type="application/json">(.*?)</script>', text, re.S).group(1))
    if meta["size"] != list(shape) or max(meta["preview"]) > 256 or meta["preview"] != [150, 20, 12]:
        fail("preview grid %s of %s" % (meta["preview"], meta["size"]))
    want = stats_from_file(out)
    for c in meta["classes"]:
        if c["voxels"] != want[c["label"]]["voxels"]:
            fail("class %d: %d voxels on the page, %d in the labels" % (c["label"], c["voxels"],
                                                                       want[c["label"]]["voxels"]))
    # the preview volume is what NiiVue loads: nibabel reads it as a NIfTI of the preview
    # grid, a voxel of it twice as long along i
    import base64
    import gzip
    import io
    b64 = re.search(r'<script id="swi-labels" type="text/plain">(.*?)</script>', text, re.S).group(1)
    img = nib.Nifti1Image.from_bytes(gzip.decompress(base64.b64decode(b64)))
    if img.shape != (150, 20, 12) or not np.allclose(img.affine[:3, 0], 2 * AFFINE[:3, 0], atol=1e-5):
        fail("the preview labels: shape %s, affine %s" % (img.shape, img.affine))
    full = np.asarray(nib.load(out).dataobj)
    if not np.array_equal(np.asarray(img.dataobj), full[0::2]):
        fail("the preview labels are not the full labels sampled every 2nd voxel along i")
    print("ok: preview %s of %s, table from the full labels" % (meta["preview"], meta["size"]))
    if browser.chromium():
        with browser.Browser() as b:
            page = b.open("file://" + html)
            page.settle()
            check_table(page, want)
            check_quiet(b, html)
        print("ok: loads in chromium")


def case_refused(swi, work):
    model = make_model(work)
    make_volume(os.path.join(work, "in.nii.gz"))
    env = dict(os.environ, SWI_NIIVUE_JS=os.path.join(work, "no-such-niivue.js"))
    out, html = os.path.join(work, "r_out.nii.gz"), os.path.join(work, "r.html")
    for p in (out, html):
        if os.path.exists(p):
            os.remove(p)
    r = run([swi, "segment", "--model", model, "--input", os.path.join(work, "in.nii.gz"), "--output", out,
             "--report", html], env=env, ok=False)
    print(r.stderr.strip())
    if r.returncode != 1 or "install-deps.sh" not in r.stderr or "SWI_NIIVUE_JS" not in r.stderr or \
            "r.html" not in r.stderr or len(r.stderr.strip().splitlines()) != 1:
        fail("exit %d, message %r" % (r.returncode, r.stderr))
    if os.path.exists(out) or os.path.exists(html) or [f for f in os.listdir(work) if f.startswith(".r")]:
        fail("something was written: %s" % os.listdir(work))
    # a file that is not NiiVue's bundle is refused too, and one that would end its
    # <script> element early
    for text, why in (("console.log('x')\n", "not NiiVue"),
                      ("var niivue = 1; // </script><script>alert(1)</script>\n", "cannot be inlined")):
        bad = os.path.join(work, "bad.js")
        open(bad, "w").write(text)
        r = run([swi, "segment", "--model", model, "--input", os.path.join(work, "in.nii.gz"), "--output", out,
                 "--report", html], env=dict(os.environ, SWI_NIIVUE_JS=bad), ok=False)
        print(r.stderr.strip())
        if r.returncode != 1 or "bad.js" not in r.stderr or why not in r.stderr or os.path.exists(out):
            fail("a bad bundle: exit %d, %r" % (r.returncode, r.stderr))
    # --report needs .html; --report-dir needs folder mode
    r = run([swi, "segment", "--model", model, "--input", "x.nii", "--output", out, "--report", "x.htm"], ok=False)
    if r.returncode != 2 or ".html" not in r.stderr:
        fail("--report x.htm: exit %d %r" % (r.returncode, r.stderr))
    r = run([swi, "segment", "--model", model, "--input", "x.nii", "--output", out, "--report-dir", work],
            ok=False)
    if r.returncode != 2 or "--input-dir" not in r.stderr:
        fail("--report-dir without folder mode: exit %d %r" % (r.returncode, r.stderr))
    # a page needs the whole label map: not with chunked-store outputs
    r = run([swi, "segment", "--model", model, "--input", os.path.join(work, "in.nii.gz"), "--output",
             os.path.join(work, "o.zarr"), "--report", html], ok=False)
    if r.returncode != 2 or "--report" not in r.stderr or os.path.exists(os.path.join(work, "o.zarr")):
        fail("--report with a store output: exit %d %r" % (r.returncode, r.stderr))
    # a page that cannot be written is refused before the run: no labels either
    r = run([swi, "segment", "--model", model, "--input", os.path.join(work, "in.nii.gz"), "--output", out,
             "--report", os.path.join(work, "no-such-dir", "r.html")], ok=False)
    print(r.stderr.strip())
    if r.returncode != 1 or "no-such-dir" not in r.stderr or os.path.exists(out):
        fail("--report in a missing folder: exit %d %r" % (r.returncode, r.stderr))
    print("ok: refused")


def case_folder(swi, work):
    model = make_model(work)
    cases = os.path.join(work, "cases")
    outd, repd = os.path.join(work, "out"), os.path.join(work, "pages")
    for d in (cases, outd, repd):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(cases)
    make_volume(os.path.join(cases, "a.nii.gz"), seed=1)
    make_volume(os.path.join(cases, "b.nii.gz"), seed=2, boxes=((1, (2, 30), (2, 30), (2, 20)),))
    with open(os.path.join(cases, "broken.nii.gz"), "wb") as f:
        f.write(b"not a volume")
    r = run([swi, "segment", "--model", model, "--input-dir", cases, "--output-dir", outd, "--report-dir", repd,
             "--quiet"], ok=False)
    if r.returncode != 1:
        fail("folder run: exit %d (one case fails: 1): %s" % (r.returncode, r.stderr))
    for n in ("a.html", "b.html", "index.html"):
        if not os.path.isfile(os.path.join(repd, n)):
            fail("%s missing in %s: %s" % (n, repd, os.listdir(repd)))
    if os.path.exists(os.path.join(repd, "broken.html")):
        fail("a page for the failed case")
    url = "file://" + os.path.join(repd, "index.html")
    with browser.Browser() as b:
        page = b.open(url)
        rows = page.eval("""Array.from(document.querySelectorAll('#cases tbody tr')).map(tr => ({
            name: tr.querySelector('.case').textContent, status: tr.querySelector('.status').textContent,
            href: tr.querySelector('.case a') ? tr.querySelector('.case a').getAttribute('href') : null,
            ml: Array.from(tr.querySelectorAll('.ml')).map(td => td.textContent),
            error: tr.querySelector('.error').textContent,
            thumb: !!tr.querySelector('img.thumb') && tr.querySelector('img.thumb').naturalWidth > 0 }))""")
        heads = page.eval("Array.from(document.querySelectorAll('#cases thead th')).map(t => t.textContent)")
        print("index: %s\n  %s" % (heads, rows))
        by = {r["name"]: r for r in rows}
        if sorted(by) != ["a", "b", "broken"]:
            fail("the index lists %s" % sorted(by))
        if by["broken"]["status"] != "failed" or "broken.nii.gz" not in by["broken"]["error"] or by["broken"]["href"]:
            fail("the failed case: %s" % by["broken"])
        for n in ("a", "b"):
            w = stats_from_file(os.path.join(outd, n + ".nii.gz"))
            got = [float(x) for x in by[n]["ml"]]
            if by[n]["status"] != "ok" or by[n]["href"] != n + ".html" or not by[n]["thumb"] or len(got) != 3 or \
                    any(abs(got[c - 1] - w[c]["ml"]) > 0.0005 + 1e-9 for c in (1, 2, 3)):
                fail("case %s: %s, nibabel %s" % (n, by[n], w))
        if not any("liver" in h for h in heads):
            fail("no class names in the index's head: %s" % heads)
        # sort by liver's volume, twice: ascending then descending
        col = [i for i, h in enumerate(heads) if "liver" in h][0]
        order = []
        for _ in range(2):
            page.eval("document.querySelectorAll('#cases thead th')[%d].click()" % col)
            order.append(page.eval("Array.from(document.querySelectorAll('#cases tbody tr .case'))"
                                   ".map(t => t.textContent)"))
        print("sorted by liver: %s" % order)
        va, vb = (float(by[n]["ml"][0]) for n in ("a", "b"))
        up = ["a", "b"] if va < vb else ["b", "a"]
        if order[0][:2] != up or order[1][:2] != up[::-1] or order[0][2] != "broken" or order[1][2] != "broken":
            fail("sorting by liver's volume gave %s" % order)
        check_quiet(b, url)
        with open(os.path.join(work, "index.png"), "wb") as f:
            f.write(page.screenshot())
        # a case's page, through the index's link
        page2 = b.open("file://" + os.path.join(repd, by["a"]["href"]) + "#opacity=1")
        page2.settle()
        check_table(page2, stats_from_file(os.path.join(outd, "a.nii.gz")))
        if page2.eval("document.getElementById('title').textContent") != "a":
            fail("case page title %r" % page2.eval("document.getElementById('title').textContent"))
        check_quiet(b, url)
    # a rerun skips the finished cases: listed as skipped, still linking to their pages
    r = run([swi, "segment", "--model", model, "--input-dir", cases, "--output-dir", outd, "--report-dir", repd,
             "--quiet"], ok=False)
    text = open(os.path.join(repd, "index.html"), encoding="utf-8").read()
    for n in ("a", "b"):
        if not re.search(r'<a href="%s.html">%s</a></td><td class="status">skipped \(output exists\)' % (n, n), text):
            fail("rerun: case %s is not listed as skipped with its link" % n)
    if r.returncode != 1 or '<td class="status">failed</td>' not in text:
        fail("rerun: exit %d, the failed case %s" % (r.returncode, "missing" if "failed" not in text else "listed"))
    # without NiiVue the folder run is refused before anything is made
    shutil.rmtree(outd)
    shutil.rmtree(repd)
    r = run([swi, "segment", "--model", model, "--input-dir", cases, "--output-dir", outd, "--report-dir", repd],
            env=dict(os.environ, SWI_NIIVUE_JS=os.path.join(work, "none.js")), ok=False)
    print(r.stderr.strip())
    if r.returncode != 1 or "install-deps.sh" not in r.stderr or os.path.exists(outd) or os.path.exists(repd):
        fail("folder run without NiiVue: exit %d %r, made %s" % (r.returncode, r.stderr,
                                                                 [d for d in (outd, repd) if os.path.exists(d)]))
    print("ok: folder")


def read_meta(html):
    text = open(html, encoding="utf-8").read()
    return json.loads(re.search(r'<script id="swi-meta" type="application/json">(.*?)</script>', text, re.S).group(1))


def cursor_at(page, affine, vox):
    """Put the crosshair on voxel vox (full resolution) and return the page's readout."""
    mm = (np.asarray(affine) @ np.array(list(vox) + [1.0]))[:3]
    page.eval("swiGoToVoxel([%d, %d, %d])" % tuple(int(x) for x in vox))
    page.settle()
    ro = page.eval("(() => { const r = document.getElementById('readout'); return { mm: r.dataset.mm,"
                   " vox: r.dataset.vox, value: r.dataset.value, label: r.dataset.label, text: r.textContent }; })()")
    print("readout at voxel %s (%s mm): %s" % (list(vox), np.round(mm, 3).tolist(), ro["text"]))
    return mm, ro


def check_readout(ro, mm, vox, value, label, name):
    got_mm, got_vox = json.loads(ro["mm"] or "null"), json.loads(ro["vox"] or "null")
    if got_vox != list(vox) or not np.allclose(got_mm, mm, atol=1e-3):
        fail("readout: voxel %s at %s mm, expected %s at %s" % (got_vox, got_mm, list(vox), mm.tolist()))
    if value is not None and (ro["value"] == "" or abs(float(ro["value"]) - value) > 1e-3):
        fail("readout: intensity %r, expected %s" % (ro["value"], value))
    if int(ro["label"]) != label or name not in ro["text"] or ("%s" % list(vox)[0]) not in ro["text"]:
        fail("readout: label %s (%r), expected %d %s" % (ro["label"], ro["text"], label, name))


def case_review(swi, work):
    try:
        import swi as swipy
    except ImportError as e:
        skip("the swi package does not import (%s): PYTHONPATH names the built one" % e)
    shape = (40, 36, 28)
    rng = np.random.default_rng(7)
    image = rng.integers(-1000, 1500, size=shape).astype(np.float32)  # whole HU: kept exactly
    lab = np.zeros(shape, np.uint16)
    lab[4:16, 5:20, 3:12] = 9000
    lab[22:34, 18:30, 12:24] = 1
    html = os.path.join(work, "review.html")
    swipy.report(lab, image=image, affine=AFFINE, path=html, title="review", force=True,
                 identifiers={"patient": "P-7", "date": "20240229"})
    meta = read_meta(html)
    if meta["ids"] != [["patient", "P-7"], ["date", "20240229"]]:
        fail("swi.report's identifiers: %s" % meta["ids"])
    by = {c["label"]: c for c in meta["classes"]}
    if sorted(by) != [1, 9000] or meta["ncolors"] != 3:
        fail("listed classes %s, %d colours (1 and 9000 present: 3 with background)" %
             (sorted(by)[:10], meta["ncolors"]))
    rgb9000 = tuple(by[9000]["rgb"])
    hues = {1: COLORS[1], 9000: rgb9000}
    # the boxes in mm: numpy's, through the affine, over each class's voxel centres
    for l in (1, 9000):
        idx = np.argwhere(lab == l)
        mm = (AFFINE[:3, :3] @ idx.T).T + AFFINE[:3, 3]
        want = [mm.min(0).tolist(), mm.max(0).tolist()]
        if not np.allclose([by[l]["mm_lo"], by[l]["mm_hi"]], want, atol=1e-9):
            fail("class %d: box in mm %s, numpy %s" % (l, [by[l]["mm_lo"], by[l]["mm_hi"]], want))
    with browser.Browser() as b:
        url = "file://" + html
        page = b.open(url + "#opacity=1")
        page.settle()
        cells = page.eval("Object.fromEntries(Array.from(document.querySelectorAll('#stats tbody tr')).map("
                          "tr => [tr.dataset.label, [tr.querySelector('.boxmm').dataset.mm,"
                          " tr.querySelector('.boxmm').textContent]]))")
        for l in (1, 9000):
            got = json.loads(cells[str(l)][0])
            if not np.allclose(got, [by[l]["mm_lo"], by[l]["mm_hi"]], atol=1e-9) or \
                    "%.1f" % by[l]["mm_lo"][0] not in cells[str(l)][1]:
                fail("class %d: the table's box in mm %s" % (l, cells[str(l)]))
        print("boxes in mm: %s" % {k: v[1] for k, v in cells.items()})
        # label 9000 drawn: its colour on the canvas, its class index in the overlay volume
        seen = browser.count_hues(browser.png_pixels(page.screenshot("#gl"))[2], hues)
        print("colours on the canvas: %s" % seen)
        if seen[9000] < 50 or seen[1] < 50:
            fail("label 9000 (or 1) is not drawn: %s" % seen)
        vmax = page.eval("(() => { const v = swiViewer.volumes[swiViewer.volumes.length - 1];"
                         " let m = 0; for (const x of v.img) if (x > m) m = x; return m; })()")
        if vmax != by[9000]["index"] or by[9000]["index"] != 2:
            fail("the overlay's largest value %s, class 9000's index %s" % (vmax, by[9000]["index"]))
        # the presets: each sets the image's window, and the window is shown
        opts = page.eval("Array.from(document.querySelectorAll('#window option')).map(o => o.value)")
        if opts != ["auto", "soft", "lung", "bone"]:
            fail("window presets %s" % opts)
        shots = {}
        for name, (w, l) in (("soft", (400, 40)), ("lung", (1500, -600)), ("bone", (1800, 400))):
            page.eval("(() => { const s = document.getElementById('window'); s.value = '%s';"
                      " s.dispatchEvent(new Event('change')); })()" % name)
            page.settle()
            got = page.eval("(() => { const v = swiViewer.volumes[0]; return [v.cal_min, v.cal_max,"
                            " document.getElementById('wl').textContent]; })()")
            print("%s: cal %s..%s, shown %r" % (name, got[0], got[1], got[2]))
            if abs(got[0] - (l - w / 2)) > 1e-6 or abs(got[1] - (l + w / 2)) > 1e-6 or got[2] != "W %d L %d" % (w, l):
                fail("preset %s: window %s" % (name, got))
            shots[name] = page.screenshot("#gl")
        if shots["soft"] == shots["lung"]:
            fail("the lung window draws the same pixels as soft tissue")
        page.eval("(() => { const s = document.getElementById('window'); s.value = 'auto';"
                  " s.dispatchEvent(new Event('change')); })()")
        auto = page.eval("[swiViewer.volumes[0].cal_min, swiViewer.volumes[0].cal_max]")
        lo, hi = np.percentile(image, [0.5, 99.5])
        print("auto: %s, numpy's percentiles %.1f..%.1f" % (auto, lo, hi))
        if abs(auto[0] - lo) > 5 or abs(auto[1] - hi) > 5:
            fail("the automatic window %s is not the 0.5..99.5th percentiles %s" % (auto, (lo, hi)))
        # the readout: a voxel of each class and one of the background
        for vox, l, name in (((10, 12, 7), 9000, "class 9000"), ((30, 20, 15), 1, "class 1"),
                             ((37, 2, 26), 0, "background")):
            mm, ro = cursor_at(page, AFFINE, vox)
            check_readout(ro, mm, vox, float(image[vox]), l, name)
        check_quiet(b, url)
    print("ok: review")


def case_dicom(swi, work):
    try:
        import pydicom
    except ImportError:
        skip("python3-pydicom not found (scripts/install-deps.sh installs it)")
    sys.path.insert(0, os.path.join(HERE, "..", "..", "io", "tests"))
    import formats
    model = make_model(work)
    series = os.path.join(work, "series")
    shutil.rmtree(series, ignore_errors=True)
    raw, hu = formats.scan()
    formats.write_dicom(series, raw)
    uids = None
    for n in os.listdir(series):
        f = pydicom.dcmread(os.path.join(series, n))
        f.StudyDate = "20240131"
        f.save_as(os.path.join(series, n))
        uids = (str(f.PatientID), str(f.StudyInstanceUID), str(f.SeriesInstanceUID))
    html, out = os.path.join(work, "dicom.html"), os.path.join(work, "dicom_out.nii.gz")
    # --scale: the network sees 0..1; the page must show the scan's own HU
    run([swi, "segment", "--model", model, "--input", series, "--output", out, "--report", html,
         "--scale", "-1024,1000,0,3", "--quiet", "--force"])
    meta = read_meta(html)
    want = [["patient", uids[0]], ["study", uids[1]], ["series", uids[2]], ["date", "20240131"]]
    if meta["ids"] != want:
        fail("the page's identifiers %s, the series' %s" % (meta["ids"], want))
    affine = np.array(meta["affine"]).reshape(4, 4)
    with browser.Browser() as b:
        url = "file://" + html
        page = b.open(url)
        page.settle()
        shown = page.eval("Array.from(document.querySelectorAll('#ids .id')).map(s => [s.dataset.key, s.textContent])")
        print("header: %s" % shown)
        if [k for k, _ in shown] != ["patient", "study", "series", "date"] or \
                any(v not in t for (_, v), (_, t) in zip(want[:3], shown[:3])) or "2024-01-31" not in shown[3][1]:
            fail("the header shows %s, the series %s" % (shown, want))
        labels = np.asarray(nib.load(out).dataobj)
        for vox in ((3, 4, 2), (10, 1, 6)):
            mm, ro = cursor_at(page, affine, vox)
            name = CLASSES[int(labels[vox])]
            check_readout(ro, mm, vox, float(hu[vox]), int(labels[vox]), name)
        check_quiet(b, url)
    print("ok: dicom")


def main(argv):
    if len(argv) != 5:
        print(__doc__)
        return 2
    case, swi, work, niivue = argv[1], argv[2], argv[3], argv[4]
    os.makedirs(work, exist_ok=True)
    work = os.path.abspath(work)
    if case != "refused":
        if not os.path.isfile(niivue_path(niivue)):
            skip("NiiVue's browser build not found at %s: run scripts/install-deps.sh (npm @niivue/niivue) "
                 "or set SWI_NIIVUE_JS" % niivue_path(niivue))
        if case != "preview" and not browser.chromium():
            skip("chromium not found: apt-get install chromium (scripts/install-deps.sh)")
    {"page": case_page, "offline": case_offline, "preview": case_preview, "refused": case_refused,
     "folder": case_folder, "review": case_review, "dicom": case_dicom}[case](swi, work)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
