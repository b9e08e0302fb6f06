"""nnUNetPredictor's steps for one case, written from docs/semantics-nnunet.md in numpy and
PyTorch on swi's rebuilt networks (python/swi/_nnunet_nets.py, loaded from the original
checkpoints), for cases whose spacing is the configuration's (no resampling: steps 4 and 9.1
are the identity). A second implementation to test swi's C pipeline against where nnU-Net
itself is not installed; nnU-Net's own outputs (tests/data/nnunet-reference) are the
stronger check."""

import json
import math
from pathlib import Path

import numpy as np
import torch

from swi import _nnunet_convert as conv
from swi import _nnunet_nets as nets


def _steps(size, patch, step):
    if size <= patch:
        return [0]
    n = math.ceil((size - patch) / (patch * step)) + 1
    return sorted({int(round(i * (size - patch) / (n - 1))) for i in range(n)})


def _gaussian(patch, sigma_scale=0.125):
    g = np.ones(patch, np.float64)
    for ax, r in enumerate(patch):
        s = sigma_scale * r
        x = np.arange(r) - r // 2
        w = np.exp(-x ** 2 / (2 * s * s)) if s > 0 else (x == 0).astype(float)
        w[np.abs(x) > int(4 * s + 0.5)] = 0
        sh = [1] * len(patch)
        sh[ax] = r
        g = g * w.reshape(sh)
    g = g / g.max()
    g[g == 0] = g[g > 0].min()
    return g.astype(np.float32)


def _normalize(x, ch, mask):
    x = x.astype(np.float32)
    n = ch["normalization"]
    if n == "CTNormalization":
        x = np.clip(x, ch["percentile_00_5"], ch["percentile_99_5"])
        return (x - ch["mean"]) / max(ch["std"], 1e-8)
    if n == "ZScoreNormalization":
        if ch["use_mask_for_norm"]:
            m = mask
            mean, std = x[m].mean(), x[m].std()
            x = x.copy()
            x[m] = (x[m] - mean) / max(std, 1e-8)
            return x
        return (x - x.mean()) / max(x.std(), 1e-8)
    raise ValueError(n)


def _sep_z(sp):
    sp = np.asarray(sp, float)
    if not sp.max() / sp.min() > 3:
        return None
    axes = np.where(sp == sp.max())[0]
    return int(axes[0]) if len(axes) == 1 else None


def _decide(kw, cur, new):
    """resample_data_or_seg_to_shape's separate-z decision: (separate, axis)."""
    f = kw.get("force_separate_z")
    if f is not None:
        ax = _sep_z(cur) if f else None
        return ax is not None, ax
    ax = _sep_z(cur)
    if ax is None:
        ax = _sep_z(new)
    return ax is not None, ax


def resample(data, new_shape, kw, cur, new):
    """resample_data_or_seg_to_shape (is_seg False) of data [C, *shape], in float64 as nnU-Net."""
    from scipy import ndimage as ndi

    shape = data.shape[1:]
    new_shape = tuple(int(v) for v in new_shape)
    if tuple(shape) == new_shape:
        return data
    order, order_z = kw.get("order", 3), kw.get("order_z", 0)
    sep, axis = _decide(kw, cur, new)

    def zoom(x, out):
        # skimage.transform.resize(x, out, order, mode="edge", anti_aliasing=False): scipy's zoom, clipped
        x = x.astype(np.float64)
        y = ndi.zoom(x, [o / i for o, i in zip(out, x.shape)], order=order, mode="nearest", grid_mode=True)
        return np.clip(y, x.min(), x.max())

    out = np.zeros((data.shape[0], *new_shape), np.float64)
    for c in range(data.shape[0]):
        if not sep:
            out[c] = zoom(data[c], new_shape)
            continue
        plane = [new_shape[a] for a in range(3) if a != axis]
        sl = [zoom(np.take(data[c], k, axis=axis), plane) for k in range(shape[axis])]
        x = np.stack(sl, axis=axis)
        if shape[axis] != new_shape[axis]:
            grids = np.mgrid[tuple(slice(0, n) for n in new_shape)].astype(np.float64)
            coords = [(x.shape[a] / new_shape[a]) * (grids[a] + 0.5) - 0.5 for a in range(3)]
            x = ndi.map_coordinates(x, np.array(coords), order=order_z, mode="nearest")
        out[c] = x
    return out


def predict(model_folder, card_dir, images, folds=None, mirroring=True, step=0.5, affine=None, spacing=None):
    """images: the channels as nibabel arrays (i, j, k) of a file with this affine. Returns
    (seg (i, j, k), probs [K, reader axes]). spacing: the files' (i, j, k) voxel sizes, to
    resample as nnU-Net does (None: the case is at the configuration's spacing)."""
    card = json.loads((Path(card_dir) / "nnunet.json").read_text())
    reorient = card["image_reader_writer"] == "NibabelIOWithReorient"
    if reorient:
        import nibabel as nib
        from nibabel.orientations import io_orientation

        imgs = [nib.Nifti1Image(np.asarray(im, np.float32), affine) for im in images]
        imgs = [im.as_reoriented(io_orientation(affine)) for im in imgs]
        reor_affine = imgs[0].affine
        images = [np.asarray(im.dataobj, np.float32) for im in imgs]
        if spacing is not None:
            spacing = list(np.sqrt((reor_affine[:3, :3] ** 2).sum(0)))
    folder = Path(model_folder)
    plans = json.loads((folder / "plans.json").read_text())
    conf = conv.resolve_configuration(plans, card["configuration"], folder / "plans.json")
    arch = conf["architecture"]
    K = card["num_segmentation_heads"]
    net = nets.build_network(arch["network_class_name"], arch["arch_kwargs"], len(images), K)
    net.decoder.deep_supervision = False
    net.eval()
    tf = card["transpose_forward"]
    reader = [np.asarray(im, np.float32).transpose(2, 1, 0) for im in images]  # SimpleITK's (k, j, i)
    data = np.stack(reader).transpose([0, *[t + 1 for t in tf]])
    full = data.shape[1:]
    nz = np.any(data != 0, axis=0)
    idx = np.nonzero(nz)
    lo = [int(i.min()) for i in idx]
    hi = [int(i.max()) + 1 for i in idx]
    sl = tuple(slice(a, b) for a, b in zip(lo, hi))
    data = data[(slice(None),) + sl]
    from scipy.ndimage import binary_fill_holes

    nz = binary_fill_holes(nz)
    mask = nz[sl]
    data = np.stack([_normalize(data[c], card["channels"][c], mask) for c in range(len(images))])
    sp_reader = list(spacing[::-1]) if spacing is not None else None
    sp_orig = [sp_reader[t] for t in tf] if spacing is not None else None
    cropped = data.shape[1:]
    if spacing is not None:
        target = list(card["spacing"]) if card["dims"] == 3 else [sp_orig[0], *card["spacing"]]
        new_shape = [int(round(o / t * s)) for o, t, s in zip(sp_orig, target, cropped)]
        data = resample(data, new_shape, card["resampling"]["resampling_fn_data"]["kwargs"], sp_orig,
                        target).astype(np.float32)
    patch = card["patch_size"]
    dims = card["dims"]
    x = torch.from_numpy(data)
    if dims == 2:
        win = [1, *patch]
    else:
        win = patch
    S = x.shape[1:]
    pad = [max(w - s, 0) for w, s in zip(win, S)]
    before = [p // 2 for p in pad]
    padded = torch.nn.functional.pad(x, sum(([before[a], pad[a] - before[a]] for a in reversed(range(3))), []))
    P = padded.shape[1:]
    g = torch.from_numpy(_gaussian(patch))
    if dims == 2:
        g = g[None]
    axes = card["mirroring_axes"] if mirroring and card["mirroring_axes"] is not None else []
    waxes = [a + 2 + (1 if dims == 2 else 0) for a in axes]
    logits = torch.zeros((K, *P), dtype=torch.float64)
    count = torch.zeros(P, dtype=torch.float64)
    fold_list = folds if folds is not None else [str(f) for f in card["folds"]]
    for f in fold_list:
        ck = conv.load_checkpoint(folder / f"fold_{f}" / card["checkpoint"])
        nets.load_weights(net, ck["network_weights"], "ck")
        acc = torch.zeros((K, *P), dtype=torch.float64)
        cnt = torch.zeros(P, dtype=torch.float64)
        for s0 in _steps(P[0], win[0], step):
            for s1 in _steps(P[1], win[1], step):
                for s2 in _steps(P[2], win[2], step):
                    w = padded[:, s0:s0 + win[0], s1:s1 + win[1], s2:s2 + win[2]][None]
                    with torch.no_grad():
                        def run(t):
                            if dims == 2:
                                return net(t[:, :, 0])[:, :, None]
                            return net(t)
                        y = run(w)
                        n = 1
                        for k in range(1, len(waxes) + 1):
                            import itertools
                            for comb in itertools.combinations(waxes, k):
                                y = y + torch.flip(run(torch.flip(w, comb)), comb)
                                n += 1
                        y = y / n
                    acc[:, s0:s0 + win[0], s1:s1 + win[1], s2:s2 + win[2]] += (y[0] * g).double()
                    cnt[s0:s0 + win[0], s1:s1 + win[1], s2:s2 + win[2]] += g.double()
        logits += acc / cnt
    logits /= len(fold_list)
    logits = logits[(slice(None),) + tuple(slice(b, b + s) for b, s in zip(before, S))].float()
    if spacing is not None:
        logits = torch.from_numpy(resample(logits.numpy(), cropped,
                                           card["resampling"]["resampling_fn_probabilities"]["kwargs"], target,
                                           sp_orig).astype(np.float32))
    S = cropped
    if card["has_regions"]:
        p = torch.sigmoid(logits)
        seg_c = torch.zeros(S, dtype=torch.uint8)
        for i, lab in enumerate(card["regions_class_order"]):
            seg_c[p[i] > 0.5] = lab
    else:
        p = torch.softmax(logits, 0)
        seg_c = logits.argmax(0).to(torch.uint8)
    seg = np.zeros(full, np.uint8)
    seg[sl] = seg_c.numpy()
    probs = np.zeros((K, *full), np.float32)
    if not card["has_regions"]:
        probs[0] = 1
    probs[(slice(None),) + sl] = p.numpy()
    tb = card["transpose_backward"]
    seg = seg.transpose(tb)
    probs = probs.transpose([0, *[t + 1 for t in tb]])
    seg = seg.transpose(2, 1, 0)
    if reorient:
        seg = np.asarray(nib.Nifti1Image(seg, reor_affine).as_reoriented(io_orientation(affine)).dataobj)
    return seg, probs
