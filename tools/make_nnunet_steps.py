"""Golden data for nnU-Net v2's numeric preprocessing steps (tests/data/nnunet-steps), made
with nnU-Net's own functions.

    apt-get install -y python3-skimage      # scipy and numpy: the system python's
    /usr/bin/python3 tools/make_nnunet_steps.py NNUNET_SRC tests/data/nnunet-steps

NNUNET_SRC is a checkout of github.com/MIC-DKFZ/nnUNet (never committed). Three of its
modules are loaded alone, their other imports stubbed (they are not called):
  preprocessing/resampling/default_resampling.py   compute_new_shape,
      determine_do_sep_z_and_axis, resample_data_or_seg (skimage resize, scipy
      map_coordinates);
  preprocessing/cropping/cropping.py               create_nonzero_mask (binary_fill_holes);
  preprocessing/normalization/default_normalization_schemes.py   the schemes;
  utilities/label_handling/label_handling.py       LabelManager (torch): the export's
      logits to labels and probabilities, as convert_predicted_logits_to_segmentation_
      with_correct_shape calls it with and without return_probabilities.
Written: index.txt (one case a line, described at its top) and the cases' raw arrays,
little-endian, C order: NAME.in.f32 / NAME.out.f32 (float32), NAME.mask.u8 (uint8),
NAME.seg.u8 / NAME.segp.u8 (labels without / with the probabilities).
"""

import importlib.util
import re
import sys
import types
from pathlib import Path

import numpy as np


def load(src: Path, rel: str, name: str):
    spec = importlib.util.spec_from_file_location(name, src / rel)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def stub_modules(src: Path):
    bg = types.ModuleType("batchgenerators.augmentations.utils")
    bg.resize_segmentation = None  # segmentations are not resampled here
    for n in ("batchgenerators", "batchgenerators.augmentations"):
        sys.modules.setdefault(n, types.ModuleType(n))
    sys.modules["batchgenerators.augmentations.utils"] = bg
    # configuration.py imports the package; only its ANISO_THRESHOLD is needed
    conf = types.ModuleType("nnunetv2.configuration")
    text = (src / "nnunetv2/configuration.py").read_text()
    conf.ANISO_THRESHOLD = float(re.search(r"^ANISO_THRESHOLD\s*=\s*([0-9.]+)", text, re.M).group(1))
    pkg = types.ModuleType("nnunetv2")
    pkg.configuration = conf
    sys.modules["nnunetv2"] = pkg
    sys.modules["nnunetv2.configuration"] = conf
    bb = types.ModuleType("acvl_utils.cropping_and_padding.bounding_boxes")
    bb.get_bbox_from_mask = None  # the box is computed below
    bb.bounding_box_to_slice = None
    for n in ("acvl_utils", "acvl_utils.cropping_and_padding"):
        sys.modules.setdefault(n, types.ModuleType(n))
    sys.modules["acvl_utils.cropping_and_padding.bounding_boxes"] = bb


HEADER = """# nnU-Net v2's numeric steps, made by tools/make_nnunet_steps.py with nnU-Net's functions.
# shape  OLD_SPACING[3] NEW_SPACING[3] OLD_SHAPE[3] NEW_SHAPE[3]           compute_new_shape
# sepz   FORCE(-1 None, 0, 1) CURRENT[3] TARGET[3] DO AXIS(-1)             determine_do_sep_z_and_axis
# resize NAME PLANES IN[3] OUT[3] ORDER ORDER_Z AXIS(-1: no separate z)    resample_data_or_seg
# fill   NAME CHANNELS SIZE[3] LO[3] HI[3]                                 create_nonzero_mask + box
# norm   NAME SCHEME USE_MASK MEAN STD P005 P995 N                         default_normalization_schemes
# label  NAME KIND(labels|regions) K N [REGIONS_CLASS_ORDER[K]]            LabelManager: logits to labels
"""


def load_label_handling(src: Path):
    """label_handling.py with the imports it does not call here stubbed; helpers.py is real."""
    import torch  # noqa: F401  (LabelManager's nonlinearities)
    bb = sys.modules.setdefault("acvl_utils.cropping_and_padding.bounding_boxes",
                                types.ModuleType("acvl_utils.cropping_and_padding.bounding_boxes"))
    bb.insert_crop_into_image = None
    ff = types.ModuleType("batchgenerators.utilities.file_and_folder_operations")
    ff.join = None
    sys.modules.setdefault("batchgenerators.utilities", types.ModuleType("batchgenerators.utilities"))
    sys.modules["batchgenerators.utilities.file_and_folder_operations"] = ff
    fc = types.ModuleType("nnunetv2.utilities.find_class_by_name")
    fc.recursive_find_python_class = None
    sys.modules.setdefault("nnunetv2.utilities", types.ModuleType("nnunetv2.utilities"))
    sys.modules["nnunetv2.utilities.find_class_by_name"] = fc
    sys.modules["nnunetv2.utilities.helpers"] = load(src, "nnunetv2/utilities/helpers.py", "nnunetv2.utilities.helpers")
    return load(src, "nnunetv2/utilities/label_handling/label_handling.py", "nn_label_handling")


def label_logits(rng):
    """Logits [K, N] per case: the last bit decides the sigmoid's threshold, and classes tie
    after the float32 softmax while their logits differ."""
    f = np.float32
    up = lambda v: np.nextafter(f(v), f(np.inf))  # noqa: E731
    # regions: region 0 at the threshold's edge (torch's float32 sigmoid is exactly 0.5 up to
    # a logit of about 9e-8), region 1 random
    edge = [0.0, 1e-8, 2.9e-8, 3e-8, 4.5e-8, 5e-8, 6e-8, 8.9e-8, 9e-8, 1e-7, 1.1e-7, 1.2e-7, 1.5e-7, 2e-7,
            3e-7, 1e-6, -1e-8, -5e-8, -1e-7, -2e-7, 0.5, -0.5, 10.0, -10.0, 30.0, -30.0, 100.0, -100.0]
    r0 = np.array(edge + list(rng.normal(0, 1e-7, 36)), f)
    regions = np.stack([r0, rng.normal(0, 2, r0.size).astype(f), r0[::-1].copy()])
    # labels: the top two differ by an ulp (tied after exp, or after the division), or not
    rows = []
    for a in (0.1, 0.2, 0.24, 0.25, -0.1, 1e-3, 0.0, 0.5, 1.0, 2.0, 3.7, 50.0):
        rows += [[f(a), up(a), f(-1)], [up(a), f(a), f(-1)], [f(-1), f(a), up(a)], [f(a), f(a), f(a)],
                 [f(a), f(-3), up(up(a))], [f(a), up(a), up(up(a))]]
    rows = np.array(rows, f).T
    labels = np.concatenate([rows, rng.normal(0, 3, (3, 160)).astype(f)], axis=1)
    return regions, labels


def smooth_field(rng, shape, planes):
    """A smooth field with some noise and both signs: splines overshoot on it."""
    g = np.meshgrid(*[np.linspace(0, 1, s) for s in shape], indexing="ij")
    out = []
    for p in range(planes):
        f = np.sin(3.1 * g[0] + 1.3 * p) * np.cos(2.3 * g[1]) + 0.7 * g[2] ** 2 - 0.3
        f = f + 0.25 * rng.standard_normal(shape)
        out.append(f * (40 + 60 * p))
    return np.array(out, dtype=np.float32)


def main():
    src, outdir = Path(sys.argv[1]), Path(sys.argv[2])
    outdir.mkdir(parents=True, exist_ok=True)
    stub_modules(src)
    rs = load(src, "nnunetv2/preprocessing/resampling/default_resampling.py", "nn_resampling")
    cr = load(src, "nnunetv2/preprocessing/cropping/cropping.py", "nn_cropping")
    nm = load(src, "nnunetv2/preprocessing/normalization/default_normalization_schemes.py", "nn_norm")
    rng = np.random.default_rng(20261202)
    lines = [HEADER.rstrip("\n")]

    def put(name, suffix, a, dtype):
        np.ascontiguousarray(a, dtype=dtype).astype(np.dtype(dtype).newbyteorder("<")).tofile(
            outdir / f"{name}.{suffix}")

    # -- the shape rule: ties (x.5) both ways, and random spacings
    shape_cases = [
        ((1.0, 1.0, 1.0), (2.0, 2.0, 2.0), (5, 7, 9)),  # 2.5 3.5 4.5 -> 2 4 4
        ((0.5, 1.5, 2.5), (1.0, 1.0, 1.0), (3, 5, 7)),  # 1.5 7.5 17.5 -> 2 8 18
        ((3.0, 0.7, 0.7), (1.5, 1.4, 1.4), (11, 13, 15)),  # 22 6.5 7.5 -> 22 6 8
        ((1.0, 1.0, 1.0), (4.0, 4.0, 4.0), (2, 6, 10)),  # 0.5 1.5 2.5 -> 0 2 2
    ]
    for _ in range(12):
        old = tuple(float(v) for v in rng.uniform(0.3, 5, 3))
        new = tuple(float(v) for v in rng.uniform(0.3, 5, 3))
        shp = tuple(int(v) for v in rng.integers(1, 400, 3))
        shape_cases.append((old, new, shp))
    for old, new, shp in shape_cases:
        ns = rs.compute_new_shape(shp, old, new)
        lines.append("shape " + " ".join(repr(v) for v in old + new) + " " +
                     " ".join(str(int(v)) for v in tuple(shp) + tuple(ns)))

    # -- the separate-z decision
    sep_cases = [
        (None, (3.0, 0.7, 0.7), (1.0, 1.0, 1.0)),  # current anisotropic, axis 0
        (None, (1.0, 1.0, 1.0), (0.8, 0.8, 4.0)),  # target anisotropic, axis 2
        (None, (0.8, 3.0, 0.8), (0.8, 0.8, 4.0)),  # current first: 3.75 > 3, axis 1
        (None, (1.0, 1.0, 3.0), (1.0, 1.0, 1.0)),  # exactly 3: not anisotropic
        (None, (1.0, 1.0, 3.0000001), (1.0, 1.0, 1.0)),
        (None, (0.24, 1.25, 1.25), (1.0, 1.0, 1.0)),  # two share the max: none
        (None, (5.0, 5.0, 5.0), (0.5, 5.0, 5.0)),  # target: two share the max
        (None, (1.0, 2.0, 2.9), (1.0, 2.0, 2.9)),
        (True, (1.0, 1.0, 1.0), (2.0, 2.0, 2.0)),  # forced, all equal: none
        (True, (1.0, 2.0, 1.5), (1.0, 1.0, 1.0)),  # forced: axis from current
        (True, (1.0, 1.0, 1.0), (1.0, 1.0, 9.0)),  # forced: the target does not count
        (False, (5.0, 1.0, 1.0), (1.0, 1.0, 1.0)),
        (None, (2.5, 0.78125, 0.78125), (2.5, 0.78125, 0.78125)),
        (None, (0.78125, 0.78125, 2.5), (1.0, 1.0, 1.0)),  # 3.2 > 3
    ]
    for force, cur, tgt in sep_cases:
        do, axis = rs.determine_do_sep_z_and_axis(force, cur, tgt)
        f = -1 if force is None else int(force)
        lines.append(f"sepz {f} " + " ".join(repr(v) for v in cur + tgt) +
                     f" {int(bool(do))} {-1 if axis is None else int(axis)}")

    # -- resampling: nnU-Net's resample_data_or_seg for data (is_seg False)
    resize_cases = [
        # name, planes, in, out, order, order_z, axis
        ("o3_up", 1, (5, 7, 6), (9, 11, 8), 3, 0, -1),
        ("o3_down", 1, (12, 9, 10), (7, 5, 6), 3, 0, -1),
        ("o3_mixed", 2, (6, 13, 8), (11, 7, 8), 3, 0, -1),
        ("o1_up", 1, (5, 7, 6), (9, 11, 8), 1, 0, -1),
        ("o1_down", 2, (12, 9, 10), (7, 5, 6), 1, 0, -1),
        ("o0_up", 1, (5, 7, 6), (9, 11, 8), 0, 0, -1),
        ("o0_down", 1, (12, 9, 10), (7, 5, 6), 0, 0, -1),
        ("o2_mixed", 1, (6, 9, 5), (10, 6, 7), 2, 0, -1),
        ("o4_mixed", 1, (6, 9, 5), (10, 6, 7), 4, 0, -1),
        ("o5_mixed", 1, (6, 9, 5), (10, 6, 7), 5, 0, -1),
        ("o3_flat", 1, (1, 9, 8), (1, 13, 5), 3, 0, -1),
        ("o1_flat", 1, (9, 1, 8), (5, 1, 13), 1, 0, -1),
        ("o3_to_one", 1, (4, 9, 8), (1, 6, 11), 3, 0, -1),
        ("sep0_o3_z0_up", 1, (4, 10, 9), (9, 13, 7), 3, 0, 0),
        ("sep0_o3_z0_down", 2, (11, 10, 9), (5, 6, 12), 3, 0, 0),
        ("sep2_o1_z0_back", 2, (14, 12, 5), (10, 9, 11), 1, 0, 2),
        ("sep1_o3_z1", 1, (8, 4, 9), (6, 10, 12), 3, 1, 1),
        ("sep1_o1_z0", 1, (8, 9, 4), (6, 4, 12), 1, 0, 1),
        ("sep0_o3_z3", 1, (5, 8, 9), (11, 6, 10), 3, 3, 0),
        ("sep0_same_z", 1, (5, 8, 9), (5, 12, 6), 3, 0, 0),
        ("sep0_flat", 1, (1, 9, 8), (1, 12, 6), 3, 0, 0),
        ("sep2_o0_z0", 1, (7, 6, 3), (10, 4, 8), 0, 0, 2),
    ]
    for name, planes, shp_in, shp_out, order, order_z, axis in resize_cases:
        x = smooth_field(rng, shp_in, planes)
        y = rs.resample_data_or_seg(x, shp_out, is_seg=False, axis=None if axis < 0 else axis, order=order,
                                    do_separate_z=axis >= 0, order_z=order_z)
        assert y.dtype == np.float32 and y.shape == (planes,) + tuple(shp_out), (name, y.dtype, y.shape)
        put(name, "in.f32", x, np.float32)
        put(name, "out.f32", y, np.float32)
        lines.append(f"resize {name} {planes} " + " ".join(str(v) for v in shp_in + shp_out) +
                     f" {order} {order_z} {axis}")

    # -- the nonzero mask: enclosed holes, a cavity open to the border, channels OR-ed
    def fill_case(name, data):
        mask = cr.create_nonzero_mask(data)
        if mask.any():
            w = np.where(mask)
            lo = [int(v.min()) for v in w]
            hi = [int(v.max()) + 1 for v in w]
        else:  # nnU-Net's bbox fails here; swi keeps the whole volume
            lo, hi = [0, 0, 0], list(data.shape[1:])
        put(name, "in.f32", data, np.float32)
        put(name, "mask.u8", mask, np.uint8)
        lines.append(f"fill {name} {data.shape[0]} " + " ".join(str(v) for v in
                                                                 list(data.shape[1:]) + lo + hi))

    g = np.indices((12, 14, 13)).astype(np.float32)
    r = np.sqrt((g[0] - 6) ** 2 + (g[1] - 7) ** 2 + (g[2] - 6) ** 2)
    shell = ((r > 3) & (r < 5.2)).astype(np.float32) * rng.uniform(0.5, 2, r.shape).astype(np.float32)
    fill_case("shell", shell[None])
    cup = np.zeros((10, 11, 12), np.float32)
    cup[2:9, 2:9, 1:11] = 3
    cup[4:7, 4:7, 0:9] = 0  # a cavity open to the border at z = 0
    cup[4:7, 4:7, 5] = 0
    fill_case("cup", cup[None])
    two = np.zeros((2, 9, 10, 11), np.float32)
    two[0, 1:8, 2:9, 2:6] = -1.5  # the lower half of a box in channel 0
    two[1, 1:8, 2:9, 6:10] = 2.0  # the upper half in channel 1
    two[:, 3:6, 4:7, 4:8] = 0  # a hole across both: filled
    two[0, 0, 0, 0] = 7  # a voxel in the corner
    fill_case("two_channels", two)
    diag = np.zeros((7, 7, 7), np.float32)
    diag[1:6, 1:6, 1:6] = 1
    diag[2:5, 2:5, 2:5] = 0  # a hole ...
    diag[1, 1, 1] = 0  # ... whose corner voxel touches a background voxel only along an edge
    diag[0, 0, 0] = 0
    fill_case("diagonal", diag[None])
    edge = np.zeros((6, 8, 9), np.float32)
    edge[:, 2:7, 1:8] = 5
    edge[:, 3:6, 3:6] = 0  # a tunnel through the whole first axis: open at both ends
    edge[2, 3:6, 3:6] = 1  # closed in the middle: two cavities, each open to a border
    fill_case("tunnel", edge[None])
    fill_case("empty", np.zeros((1, 4, 5, 6), np.float32))
    noisy = (rng.random((2, 10, 9, 8)) < 0.45).astype(np.float32) * rng.standard_normal((2, 10, 9, 8)).astype(
        np.float32)
    fill_case("random", noisy)

    # -- normalisation, on float32 images with a nonzero mask
    def norm_case(name, cls, scheme, use_mask, x, mask, props):
        n = cls(use_mask_for_norm=use_mask, intensityproperties=props)
        seg = np.where(mask, np.int8(0), np.int8(-1))
        y = n.run(x.copy(), seg)
        assert y.dtype == np.float32
        put(name, "in.f32", x, np.float32)
        put(name, "mask.u8", mask, np.uint8)
        put(name, "out.f32", y, np.float32)
        p = [props.get(k, 0.0) for k in ("mean", "std", "percentile_00_5", "percentile_99_5")]
        lines.append(f"norm {name} {scheme} {int(bool(use_mask))} " + " ".join(repr(float(v)) for v in p) +
                     f" {x.size}")

    n = 3000
    mr = (rng.gamma(2.0, 150.0, n) + 3).astype(np.float32)
    msk = rng.random(n) < 0.7
    mr[~msk] = 0
    ct = rng.normal(40, 300, n).astype(np.float32)
    ctp = {"mean": 37.25, "std": 211.7, "percentile_00_5": -812.5, "percentile_99_5": 1203.4}
    norm_case("ct", nm.CTNormalization, "ct", False, ct, msk, ctp)
    norm_case("ct_tiny_std", nm.CTNormalization, "ct", False, ct,
              msk, {"mean": -3.5, "std": 1e-9, "percentile_00_5": -4.0, "percentile_99_5": -3.0})
    norm_case("zscore", nm.ZScoreNormalization, "zscore", False, mr, msk, {})
    norm_case("zscore_mask", nm.ZScoreNormalization, "zscore", True, mr, msk, {})
    norm_case("zscore_const", nm.ZScoreNormalization, "zscore", False, np.full(50, 2.5, np.float32),
              np.ones(50, bool), {})
    norm_case("rescale", nm.RescaleTo01Normalization, "rescale01", False, ct, msk, {})
    rgb = rng.integers(0, 256, n).astype(np.float32)
    norm_case("rgb", nm.RGBTo01Normalization, "rgb01", False, rgb, msk, {})
    norm_case("none", nm.NoNormalization, "none", False, ct, msk, {})

    # -- the export's labels: LabelManager as convert_predicted_logits_to_segmentation_with_
    #    correct_shape calls it (float32 sigmoid > 0.5 for regions; the argmax of the logits,
    #    or of the float32 softmax when the probabilities are returned)
    lh = load_label_handling(src)
    import torch
    regions, labels = label_logits(np.random.default_rng(20261203))
    for name, x, label_dict, order in (
            ("label_regions", regions, {"background": 0, "whole": [1, 2, 3], "core": [2, 3], "tip": 3}, [1, 2, 3]),
            ("label_softmax", labels, {"background": 0, "a": 1, "b": 2}, None)):
        lm = lh.LabelManager(label_dict, order)
        logits = torch.from_numpy(x.copy())
        seg = lm.convert_logits_to_segmentation(logits)  # return_probabilities False
        probs = lm.apply_inference_nonlin(logits)  # return_probabilities True
        segp = lm.convert_probabilities_to_segmentation(probs)
        assert probs.dtype == torch.float32
        put(name, "in.f32", x, np.float32)
        put(name, "out.f32", probs.numpy(), np.float32)
        put(name, "seg.u8", np.asarray(seg), np.uint8)
        put(name, "segp.u8", np.asarray(segp), np.uint8)
        kind = "regions" if lm.has_regions else "labels"
        lines.append(f"label {name} {kind} {x.shape[0]} {x.shape[1]}" +
                     ("".join(f" {c}" for c in order) if order else ""))

    (outdir / "index.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
