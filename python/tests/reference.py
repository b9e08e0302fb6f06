"""A naive numpy implementation of the reference semantics (shared/golden/README.md),
for the random sweep: pad, enumerate windows in C order, blend, crop."""

import itertools

import numpy as np

_NP_PAD = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def starts(size, roi, overlap):
    padded = max(size, roi)
    step = roi if roi == padded else max(int(roi * (1 - overlap)), 1)
    n = 1
    while (n - 1) * step + roi < padded:
        n += 1
    return [min(t * step, padded - roi) for t in range(n)]


def weights(mode, roi, sigma_scale):
    if mode == "constant":
        return np.ones(roi, np.float32)
    w = np.ones((), np.float32)
    for k, r in enumerate(roi):
        x = np.arange(r, dtype=np.float32) - np.float32((r - 1) / 2)
        s = np.float32(sigma_scale[k] * r)
        g = np.exp(-(x * x) / (np.float32(2) * s * s)).astype(np.float32)
        w = np.multiply.outer(w, g)
    w = w.astype(np.float32)
    return np.maximum(w, max(w.min(), np.float32(1e-3))).astype(np.float32)


def sliding_window(x, roi, sw_batch_size, predictor, overlap, mode="constant", sigma_scale=0.125,
                   padding_mode="constant", cval=0.0):
    x = np.asarray(x, np.float32)
    B, _, *S = x.shape
    d = len(S)
    roi = [S[k] if roi[k] <= 0 else roi[k] for k in range(d)]
    overlap = list(overlap) if isinstance(overlap, (list, tuple)) else [overlap] * d
    sigma = list(sigma_scale) if isinstance(sigma_scale, (list, tuple)) else [sigma_scale] * d
    before = [max(r - s, 0) // 2 for r, s in zip(roi, S)]
    pads = [(0, 0), (0, 0)] + [(b, max(r - s, 0) - b) for b, r, s in zip(before, roi, S)]
    kw = {"constant_values": cval} if padding_mode == "constant" else {}
    xp = np.pad(x, pads, mode=_NP_PAD[padding_mode], **kw)
    P = xp.shape[2:]
    grid = list(itertools.product(*[starts(S[k], roi[k], overlap[k]) for k in range(d)]))
    w = weights(mode, roi, sigma)
    wins = [(b, g) for b in range(B) for g in grid]
    acc = None
    count = np.zeros(P, np.float32)
    for g in grid:
        count[tuple(slice(g[k], g[k] + roi[k]) for k in range(d))] += w
    for i in range(0, len(wins), sw_batch_size):
        chunk = wins[i:i + sw_batch_size]
        batch = np.stack([xp[(b, slice(None)) + tuple(slice(g[k], g[k] + roi[k]) for k in range(d))]
                          for b, g in chunk])
        out = np.asarray(predictor(batch), np.float32)
        if acc is None:
            acc = np.zeros((B, out.shape[1], *P), np.float32)
        for j, (b, g) in enumerate(chunk):
            acc[(b, slice(None)) + tuple(slice(g[k], g[k] + roi[k]) for k in range(d))] += out[j] * w
    res = acc / count
    return res[(slice(None), slice(None)) + tuple(slice(b, b + s) for b, s in zip(before, S))]


def reductions(scores):
    """argmax, max, confidence, entropy over channels (axis 1), kept as [B, 1, ...]."""
    s = scores.astype(np.float64)
    m = s.max(axis=1, keepdims=True)
    e = np.exp(s - m)
    z = e.sum(axis=1, keepdims=True)
    p = e / z
    ent = -(p * np.log(np.where(p > 0, p, 1))).sum(axis=1, keepdims=True)
    return {"argmax": scores.argmax(axis=1)[:, None], "max": m, "confidence": 1.0 / z, "entropy": ent}
