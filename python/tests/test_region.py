"""A region of interest (docs/regions.md): inside it the labels and scores are bitwise the
whole run's, outside 0 (or keep_outside's labels), and only the windows touching it run."""
import numpy as np
import pytest

import swi

nib = pytest.importorskip("nibabel")
pytestmark = pytest.mark.skipif(not getattr(swi._swi, "PIPELINE_PREDICTORS", 0),
                                reason="the pipeline library runs ONNX models only")

CLASSES = 4


def net(x):
    """Scores that depend on each voxel's neighbourhood and on where the window sits (its
    border voxels differ), so overlapping windows disagree and the blend matters."""
    n, _, a, b, c = x.shape
    ramp = np.linspace(-1, 1, a, dtype=np.float32)[:, None, None] * np.linspace(1, 2, c, dtype=np.float32)
    v = x[:, 0]
    out = np.stack([v * (k + 1) * 0.3 + np.sin(v * (k + 2)) + ramp * (k - 1.5) for k in range(CLASSES)], 1)
    return out.astype(np.float32)


@pytest.fixture(scope="module")
def scan(tmp_path_factory):
    d = tmp_path_factory.mktemp("region")
    rng = np.random.default_rng(7)
    v = rng.normal(size=(37, 29, 23)).astype(np.float32)
    aff = np.diag([1.2, 0.9, 2.0, 1.0])
    aff[:3, 3] = [-10, 5, 20]
    path = d / "ct.nii.gz"
    nib.Nifti1Image(v, aff).to_filename(path)
    return d, path, aff


def run(path, **kw):
    args = dict(predictor=net, classes=CLASSES, roi=(12, 10, 8), overlap=0.5, mode="gaussian", threads=2,
                scores=True, on_message=lambda line: None)
    args.update(kw)
    return swi.segment(str(path), **args)


def box_mask(shape, box):
    m = np.zeros(shape, bool)
    m[tuple(slice(lo, hi) for lo, hi in box)] = True
    return m


def check(whole, part, box):
    inside = box_mask(whole.labels.shape, box)
    assert np.array_equal(part.labels[inside], whole.labels[inside])
    assert np.array_equal(part.scores[:, inside], whole.scores[:, inside])  # bitwise: float equality
    assert not part.labels[~inside].any() and not part.scores[:, ~inside].any()
    assert 0 < part.stats["windows_total"] < whole.stats["windows_total"]


@pytest.mark.parametrize("grid", [{}, {"orientation": "PIR"}, {"spacing": (1.7, 1.3, 2.5)},
                                  {"orientation": "LPS", "spacing": 1.1}])
def test_region_is_bitwise_the_whole_run_inside(scan, grid):
    _, path, _ = scan
    whole = run(path, **grid)
    rng = np.random.default_rng(len(grid))
    for _ in range(2):
        box = []
        for n in whole.labels.shape:
            lo = int(rng.integers(0, n - 3))
            box.append((lo, int(rng.integers(lo + 1, min(n, lo + n // 2) + 1))))
        check(whole, run(path, region=box, **grid), box)


def test_region_mm_margin_and_mask(scan):
    d, path, aff = scan
    whole = run(path)
    # millimetres: voxel centres i*1.2-10 etc.; the covering voxel box of [2.1, 8.5] is 10..16
    r = run(path, region_mm=((2.1, 8.5), (9.6, 14.0), (26.0, 30.0)))
    box = [(10, 16), (5, 11), (3, 6)]
    check(whole, r, box)
    # a margin of 2 mm: ceil(2/1.2)=2, ceil(2/0.9)=3, ceil(2/2)=1 voxels
    r = run(path, region=[(10, 16), (5, 11), (3, 6)], margin=2.0)
    check(whole, r, [(8, 18), (2, 14), (2, 7)])
    # a mask: its bounding box
    m = np.zeros(whole.labels.shape, np.uint8)
    m[12, 4, 9] = m[20, 8, 11] = 3
    nib.Nifti1Image(m, aff).to_filename(d / "mask.nii.gz")
    check(whole, run(path, region=str(d / "mask.nii.gz")), [(12, 21), (4, 9), (9, 12)])


def test_keep_outside_and_plan(scan):
    d, path, aff = scan
    whole = run(path)
    prior = np.full(whole.labels.shape, 3, np.uint8)
    nib.Nifti1Image(prior, aff).to_filename(d / "prior.nii.gz")
    box = [(3, 20), (0, 29), (5, 9)]
    r = run(path, region=box, keep_outside=str(d / "prior.nii.gz"), scores=None)
    inside = box_mask(whole.labels.shape, box)
    assert np.array_equal(r.labels[inside], whole.labels[inside])
    assert (r.labels[~inside] == 3).all()
    p = swi.plan_job(str(path), predictor=net, classes=CLASSES, roi=(12, 10, 8), overlap=0.5, region=box)
    assert p["engine"]["windows_total"] == r.stats["windows_total"] < p["windows_whole"] == whole.stats["windows_total"]
    assert p["region"]["lo"] == (3, 0, 5) and p["region"]["whole_engine_bytes"] > 0
    assert "windows run" in p["describe"]


def test_region_refusals(scan):
    _, path, _ = scan
    with pytest.raises(ValueError, match="holds no voxel"):
        run(path, region=[(40, 50), (0, 5), (0, 5)])
    with pytest.raises(ValueError, match="lo < hi"):
        run(path, region=[(4, 4), (0, 5), (0, 5)])
    with pytest.raises(ValueError, match="name one region"):
        run(path, region=[(0, 4), (0, 5), (0, 5)], region_mm=((0, 1), (0, 1), (0, 1)))
    with pytest.raises(ValueError, match="applies to a region"):
        run(path, margin=3.0)
