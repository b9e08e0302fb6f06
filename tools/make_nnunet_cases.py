"""Golden cases for nnU-Net v2's sliding window (tests/data/golden-nnunet), made with
nnU-Net's own functions.

    python3 tools/make_nnunet_cases.py NNUNET_SRC tests/data/golden-nnunet

NNUNET_SRC is a checkout of github.com/MIC-DKFZ/nnUNet (never committed). Its
nnunetv2/inference/sliding_window_prediction.py gives compute_steps_for_sliding_window
and compute_gaussian (loaded alone; the package's other dependencies are not needed).
Written:
  starts.txt     `padded roi tile_step_size : starts...` for a sweep of axes and tile steps
                 (binary fractions, and decimal ones on the sizes where their count is decided
                 in the last bit), nnU-Net's steps;
  gaussian/      `R0xR1xR2_SIGMA.f64`: compute_gaussian(tile, sigma) in float64 (C order);
  cases/NAME/    swi-golden cases (case.txt, input.f32, output.f32) with `grid nnunet` and
                 `mode gaussian_nnunet`: the blend of nnUNetPredictor's loop
                 (_internal_predict_sliding_window_return_logits: prediction * gaussian added
                 to the logits, the gaussian to the count, one over the other; the image
                 padded to the patch with pad_nd_image's rule and cropped back) computed in
                 float64 with nnU-Net's steps and gaussian, for the golden README's predictors.
"""

import importlib.util
import itertools
import os
import sys
import types
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch


def load_nnunet(src: Path):
    # only the two functions are used; the module's padding import is not
    sys.modules.setdefault("acvl_utils", types.ModuleType("acvl_utils"))
    cp = types.ModuleType("acvl_utils.cropping_and_padding")
    pad = types.ModuleType("acvl_utils.cropping_and_padding.padding")
    pad.pad_nd_image = None
    sys.modules["acvl_utils.cropping_and_padding"] = cp
    sys.modules["acvl_utils.cropping_and_padding.padding"] = pad
    path = src / "nnunetv2" / "inference" / "sliding_window_prediction.py"
    spec = importlib.util.spec_from_file_location("nnunet_swp", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def predictor(name, x, C):
    """The golden README's predictors on windows [n, cin, *roi] (float64)."""
    s = x.sum(1, keepdims=True)
    d = x.ndim - 2
    if name == "box":
        k = torch.ones((1, 1) + (3,) * d, dtype=x.dtype) / 3 ** d
        conv = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}[d]
        m = conv(s, k, padding=1)
        return torch.cat([(c + 1) * m + 0.1 * c for c in range(C)], 1)
    if name == "coord":
        roi = x.shape[2:]
        g0 = (torch.arange(roi[0], dtype=torch.float32) / roi[0]).to(x.dtype)
        gl = (torch.arange(roi[-1], dtype=torch.float32) / roi[-1]).to(x.dtype)
        g0 = g0.reshape((1, 1, -1) + (1,) * (d - 1))
        gl = gl.reshape((1, 1) + (1,) * (d - 1) + (-1,))
        return torch.cat([s + (c + 1) * g0 - (C - c) * gl for c in range(C)], 1)
    raise ValueError(name)


def reference(m, x, roi, step, sigma, pred, C, gaussian):
    """nnUNetPredictor's loop for one image x [cin, *S], in float64."""
    S = x.shape[1:]
    diff = [max(r - s, 0) for r, s in zip(roi, S)]
    below = [v // 2 for v in diff]
    pads = []
    for k in reversed(range(len(S))):
        pads += [below[k], diff[k] - below[k]]
    xp = torch.nn.functional.pad(x, pads) if any(diff) else x
    P = xp.shape[1:]
    steps = m.compute_steps_for_sliding_window(tuple(P), tuple(roi), step)
    w = m.compute_gaussian(tuple(roi), sigma_scale=sigma, value_scaling_factor=10, dtype=torch.float64,
                           device=torch.device("cpu")) if gaussian else torch.ones(roi, dtype=torch.float64)
    logits = torch.zeros((C,) + tuple(P), dtype=torch.float64)
    count = torch.zeros(tuple(P), dtype=torch.float64)
    for st in itertools.product(*steps):
        sl = tuple(slice(a, a + r) for a, r in zip(st, roi))
        out = pred(xp[(slice(None),) + sl][None])[0]
        logits[(slice(None),) + sl] += out * w
        count[sl] += w
    logits /= count
    return logits[(slice(None),) + tuple(slice(b, b + s) for b, s in zip(below, S))]


def main():
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    m = load_nnunet(src)
    out.mkdir(parents=True, exist_ok=True)
    # the grid: every (padded, roi, step) of a sweep, nnU-Net's starts
    lines = []

    def grid_line(padded, roi, step):
        st = m.compute_steps_for_sliding_window((padded,), (roi,), step)[0]
        uniq = sorted(set(st))  # swi keeps a repeated start once (docs: swi_grid)
        lines.append(f"{padded} {roi} {step!r} : " + " ".join(map(str, uniq)))

    for roi in (1, 2, 3, 5, 16, 17, 64, 96, 128, 160):
        for padded in sorted({roi, roi + 1, roi + 2, roi + 7, 2 * roi - 1, 2 * roi, 3 * roi + 5, 300, 517}):
            if padded < roi:
                continue
            for step in (0.5, 0.25, 0.75, 1.0, 0.125, 0.375, 0.625):
                grid_line(padded, roi, step)
    # decimal tile steps, which no binary fraction is: on the sizes where (padded - roi) /
    # (roi * step) is a whole number in decimal the double arithmetic decides the count, so
    # only nnU-Net's own step (not 1 - (1 - step)) gives nnU-Net's starts
    decimal = (0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9, 0.05, 0.15, 0.35, 0.45, 0.55, 0.65, 0.85, 0.95, 0.33)
    seen = set()
    for roi in (1, 3, 5, 8, 10, 12, 16, 20, 24, 25, 40, 48, 64, 96, 112, 128, 160):
        for step in decimal:
            target = Fraction(repr(step)) * roi  # the step as written, in exact decimal
            padded = {roi, roi + 1, 2 * roi + 3}
            padded |= {roi + int(k * target) for k in range(1, 13) if (k * target).denominator == 1}
            for p in sorted(padded):
                seen.add((p, roi, step))
                grid_line(p, roi, step)
    # the model grids of tests/data/nnunet-reference's cases (preprocessed.npy, padded to the
    # patch) and their patches: test_nnunet_vs_reference.py counts `swi plan`'s windows
    for padded, roi in ((13, 8), (48, 16), (42, 16), (17, 8), (50, 16), (54, 16), (54, 24), (37, 16),
                        (18, 16), (18, 8), (14, 1)):
        for step in (0.1, 0.2, 0.3, 0.5, 0.7, 0.9):
            if (padded, roi, step) not in seen:
                seen.add((padded, roi, step))
                grid_line(padded, roi, step)
    # the model grid of test_job_nnunet.c's demo job (window 32), at a step decided in the last bit
    for padded in (32, 34, 38):
        grid_line(padded, 32, 0.0375)
    (out / "starts.txt").write_text("\n".join(lines) + "\n")
    gdir = out / "gaussian"
    gdir.mkdir(exist_ok=True)
    for tile, sigma in (((5,), 0.125), ((16,), 0.125), ((9, 14), 0.125), ((10, 7, 12), 0.125),
                        ((24, 20, 17), 0.125), ((12, 11, 16), 1 / 16), ((7, 30), 0.05)):
        g = m.compute_gaussian(tile, sigma_scale=sigma, value_scaling_factor=10, dtype=torch.float64,
                               device=torch.device("cpu")).numpy()
        g.astype("<f8").tofile(gdir / f"{'x'.join(map(str, tile))}_{sigma!r}.f64")
    cases = out / "cases"
    cases.mkdir(exist_ok=True)
    rng = np.random.default_rng(22)
    specs = [
        ("1d_box", 1, (50,), (16,), 0.5, 2, "box", 3, True),
        ("2d_coord", 2, (37, 29), (12, 10), 0.5, 3, "coord", 4, True),
        ("2d_coord_pad", 1, (9, 29), (12, 10), 0.5, 2, "coord", 3, True),
        ("3d_coord", 1, (33, 27, 20), (16, 12, 10), 0.5, 4, "coord", 3, True),
        ("3d_box_step025", 2, (30, 26, 21), (12, 10, 8), 0.25, 2, "box", 2, True),
        ("3d_coord_step075_const", 1, (31, 25, 22), (14, 12, 9), 0.75, 3, "coord", 2, False),
        ("3d_coord_sigma16", 1, (28, 24, 19), (12, 12, 10), 0.5, 1, "coord", 3, True),
        # a decimal tile step on sizes where 1 - (1 - 0.2) would count one start more along the
        # last dim, along which the coord predictor varies
        ("3d_coord_step02", 1, (9, 20, 48), (8, 16, 16), 0.2, 3, "coord", 3, True),
    ]
    for name, cin, S, roi, step, sw, pname, C, gauss in specs:
        sigma = 1 / 16 if "sigma16" in name else 0.125
        x = rng.standard_normal((cin,) + S).astype(np.float32)
        want = reference(m, torch.from_numpy(x).double(), roi, step, sigma,
                         lambda w: predictor(pname, w, C), C, gauss)
        d = cases / name
        d.mkdir(exist_ok=True)
        x[None].astype("<f4").tofile(d / "input.f32")
        want.numpy()[None].astype("<f4").tofile(d / "output.f32")
        dims = len(S)
        (d / "case.txt").write_text("\n".join([
            f"dims {dims}", "batch 1", f"in_channels {cin}", "image_size " + " ".join(map(str, S)),
            "roi_size " + " ".join(map(str, roi)), f"sw_batch_size {sw}",
            # the overlap when it gives the step back exactly (binary fractions), else the step
            "overlap " + " ".join([repr(1 - step)] * dims) if 1 - (1 - step) == step else
            "tile_step " + " ".join([repr(step)] * dims), "grid nnunet",
            f"mode {'gaussian_nnunet' if gauss else 'constant'}", "sigma_scale " + " ".join([repr(sigma)] * dims),
            "padding_mode constant", "cval 0.0", f"predictor {pname}", f"out_channels {C}", "outputs 1",
            "output0_shape 1 " + str(C) + " " + " ".join(map(str, S)), "tags nnunet " + f"{dims}d"]) + "\n")
    print(f"wrote {len(lines)} grid lines, the gaussians and {len(specs)} cases to {out}")


if __name__ == "__main__":
    main()
