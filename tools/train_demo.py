#!/usr/bin/env python3
"""Train the bundled demo network (models/demo.onnx) on synthetic phantoms.

The network is a small 3D U-Net (4 levels, 12-24-48-96 channels, batch norm,
about 0.8 M parameters) that labels every voxel of a 32^3 window with one of
four classes: 0 background, 1 blobs, 2 tubes, 3 shells / bright spheres (see
demo/phantom.c). Training data come from the project's own phantom generator,
through the `swi-phantom` tool, so the network is trained on exactly what
`swi demo` later shows it. The image is fed as is: no intensity preprocessing.

Re-run (Debian 12; about 10-15 minutes on 2 CPU cores, no GPU needed):

    apt-get install python3-torch python3-numpy python3-onnx   # onnx optional
    cmake -S . -B build && cmake --build build --target swi-phantom
    python3 tools/train_demo.py --phantom build/swi-phantom --out models/demo.onnx

Everything is seeded (phantom seeds, patch sampling, weight init, thread
count), so a re-run on the same machine reproduces the same network; other
CPUs may differ in the last bits of floating-point sums.

Training phantoms use seeds 0 .. --train-phantoms - 1 (default 0..63) with
sizes drawn per seed between 64 and 112 voxels per axis; validation uses
unseen seeds (default 1000000 and up) at the demo size, segmented whole with
a gaussian-weighted sliding window (roi 32, overlap 0.25), and prints the Dice
of every class. The exported model: input `image` [n, 1, 32, 32, 32] float32,
output `logits` [n, 4, 32, 32, 32], batch dimension dynamic, ONNX opset 17.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROI = 32
CLASSES = 4
DEMO_SIZE = (80, 96, 96)


# ---------------------------------------------------------------- data

def make_phantom(tool, seed, size, workdir):
    img_path = os.path.join(workdir, f"p{seed}.f32")
    lab_path = os.path.join(workdir, f"p{seed}.u8")
    subprocess.run([tool, "--seed", str(seed), "--size", ",".join(map(str, size)),
                    "--image", img_path, "--labels", lab_path], check=True)
    img = np.fromfile(img_path, dtype=np.float32).reshape(size)
    lab = np.fromfile(lab_path, dtype=np.uint8).reshape(size)
    os.remove(img_path)
    os.remove(lab_path)
    return img, lab


class PatchSampler:
    """Random 32^3 patches: a third anywhere, the rest centred (with jitter) on
    a voxel of a class chosen uniformly among 1..3; then a random axis
    permutation and random flips, so the network does not depend on axis order
    or direction."""

    def __init__(self, volumes, rng):
        self.volumes = volumes
        self.rng = rng
        self.fg = []
        for _, lab in volumes:
            self.fg.append([np.flatnonzero(lab == c) for c in range(1, CLASSES)])

    def sample(self, batch):
        xs = np.empty((batch, 1, ROI, ROI, ROI), np.float32)
        ys = np.empty((batch, ROI, ROI, ROI), np.int64)
        rng = self.rng
        for b in range(batch):
            v = int(rng.integers(len(self.volumes)))
            img, lab = self.volumes[v]
            shape = np.array(img.shape)
            c = int(rng.integers(CLASSES - 1))
            if rng.random() < 1 / 3 or len(self.fg[v][c]) == 0:
                start = [int(rng.integers(0, s - ROI + 1)) for s in shape]
            else:
                idx = self.fg[v][c][int(rng.integers(len(self.fg[v][c])))]
                centre = np.array(np.unravel_index(idx, img.shape))
                centre = centre + rng.integers(-10, 11, size=3)
                start = np.clip(centre - ROI // 2, 0, shape - ROI).astype(int).tolist()
            sl = tuple(slice(s, s + ROI) for s in start)
            pi, pl = img[sl], lab[sl]
            perm = rng.permutation(3)
            pi, pl = pi.transpose(perm), pl.transpose(perm)
            for a in range(3):
                if rng.random() < 0.5:
                    pi, pl = np.flip(pi, a), np.flip(pl, a)
            xs[b, 0] = pi
            ys[b] = pl
        return torch.from_numpy(xs), torch.from_numpy(ys)


# ---------------------------------------------------------------- network

def conv_block(cin, cout):
    return nn.Sequential(
        nn.Conv3d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm3d(cout), nn.LeakyReLU(0.01, inplace=True),
        nn.Conv3d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm3d(cout), nn.LeakyReLU(0.01, inplace=True))


class UNet3D(nn.Module):
    def __init__(self, channels=(12, 24, 48, 96), classes=CLASSES):
        super().__init__()
        self.enc = nn.ModuleList()
        prev = 1
        for c in channels:
            self.enc.append(conv_block(prev, c))
            prev = c
        self.up = nn.ModuleList()
        self.dec = nn.ModuleList()
        for c in reversed(channels[:-1]):
            self.up.append(nn.ConvTranspose3d(prev, c, 2, stride=2))
            self.dec.append(conv_block(2 * c, c))
            prev = c
        self.head = nn.Conv3d(prev, classes, 1)

    def forward(self, x):
        skips = []
        for i, enc in enumerate(self.enc):
            if i:
                x = F.max_pool3d(x, 2)
            x = enc(x)
            skips.append(x)
        skips.pop()
        for up, dec in zip(self.up, self.dec):
            x = dec(torch.cat([up(x), skips.pop()], 1))
        return self.head(x)


def dice_loss(logits, target):
    prob = torch.softmax(logits, 1)
    onehot = F.one_hot(target, CLASSES).permute(0, 4, 1, 2, 3).float()
    dims = (0, 2, 3, 4)
    inter = (prob * onehot).sum(dims)
    denom = prob.sum(dims) + onehot.sum(dims)
    dice = (2 * inter + 1) / (denom + 1)
    return 1 - dice[1:].mean()


# ---------------------------------------------------------------- validation

def gaussian_map(roi, sigma_scale=0.125):
    c = (roi - 1) / 2
    sigma = roi * sigma_scale
    g = np.exp(-0.5 * ((np.arange(roi) - c) / sigma) ** 2)
    w = g[:, None, None] * g[None, :, None] * g[None, None, :]
    w = w / w.max()
    return np.maximum(w, w[w > 0].min()).astype(np.float32)


def window_starts(n, roi, overlap):
    stride = max(1, int(roi * (1 - overlap)))
    starts = list(range(0, max(n - roi, 0) + 1, stride))
    if starts[-1] + roi < n:
        starts.append(n - roi)
    return starts


@torch.no_grad()
def sliding_window(model, img, overlap=0.25, batch=4):
    """Whole-volume segmentation, gaussian-weighted like MONAI's
    sliding_window_inference(mode='gaussian'); returns the label map."""
    model.eval()
    w = gaussian_map(ROI)
    acc = np.zeros((CLASSES,) + img.shape, np.float32)
    norm = np.zeros(img.shape, np.float32)
    corners = [(i, j, k) for i in window_starts(img.shape[0], ROI, overlap)
               for j in window_starts(img.shape[1], ROI, overlap)
               for k in window_starts(img.shape[2], ROI, overlap)]
    for b in range(0, len(corners), batch):
        chunk = corners[b:b + batch]
        x = np.stack([img[i:i + ROI, j:j + ROI, k:k + ROI] for i, j, k in chunk])[:, None]
        y = model(torch.from_numpy(np.ascontiguousarray(x))).numpy()
        for (i, j, k), yy in zip(chunk, y):
            acc[:, i:i + ROI, j:j + ROI, k:k + ROI] += yy * w
            norm[i:i + ROI, j:j + ROI, k:k + ROI] += w
    return np.argmax(acc / norm, 0).astype(np.uint8)


def dice_per_class(pred, truth):
    out = []
    for c in range(1, CLASSES):
        p, t = pred == c, truth == c
        s = p.sum() + t.sum()
        out.append(1.0 if s == 0 else 2.0 * np.logical_and(p, t).sum() / s)
    return out


def validate(model, val, label):
    dices = np.array([dice_per_class(sliding_window(model, img), lab) for img, lab in val])
    per_class = dices.mean(0)
    print(f"{label}: Dice per class (1 blobs, 2 tubes, 3 shells/spheres) "
          + " ".join(f"{d:.4f}" for d in per_class) + f"  mean {per_class.mean():.4f}"
          + "  | per phantom mean " + " ".join(f"{d:.4f}" for d in dices.mean(1)), flush=True)
    return per_class


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phantom", required=True, help="path of the swi-phantom executable")
    ap.add_argument("--out", default="models/demo.onnx", help="ONNX file to write")
    ap.add_argument("--train-phantoms", type=int, default=64, help="training seeds 0..N-1")
    ap.add_argument("--val-seeds", default="1000000,1000001,1000002", help="comma-separated unseen seeds")
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--batch", type=int, default=6)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0, help="seed of patch sampling and weight init")
    args = ap.parse_args()

    if not os.access(args.phantom, os.X_OK):
        sys.exit(f"train_demo.py: {args.phantom}: not an executable (build the swi-phantom target)")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(args.seed)
    t0 = time.time()

    size_rng = np.random.default_rng(12345)
    with tempfile.TemporaryDirectory() as tmp:
        train = []
        for s in range(args.train_phantoms):
            size = tuple(int(x) for x in size_rng.integers(64, 113, size=3))
            train.append(make_phantom(args.phantom, s, size, tmp))
        val_seeds = [int(s) for s in args.val_seeds.split(",")]
        val = [make_phantom(args.phantom, s, DEMO_SIZE, tmp) for s in val_seeds]
    print(f"{len(train)} training phantoms (seeds 0..{len(train) - 1}), validation seeds {val_seeds} "
          f"at {DEMO_SIZE}: {time.time() - t0:.1f} s", flush=True)

    sampler = PatchSampler(train, rng)
    model = UNet3D()
    print(f"parameters: {sum(p.numel() for p in model.parameters())}", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    warmup = 50
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, args.steps) / args.steps)))

    t1 = time.time()
    running = 0.0
    for step in range(1, args.steps + 1):
        model.train()
        x, y = sampler.sample(args.batch)
        logits = model(x)
        loss = F.cross_entropy(logits, y) + dice_loss(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        running = 0.95 * running + 0.05 * loss.item() if step > 1 else loss.item()
        if step % 50 == 0:
            el = time.time() - t1
            print(f"step {step}/{args.steps} loss {running:.4f} lr {sched.get_last_lr()[0]:.2e} "
                  f"{el:.0f} s (eta {el / step * (args.steps - step):.0f} s)", flush=True)
        if step % 400 == 0 and step < args.steps:
            validate(model, val, f"step {step}")
    train_time = time.time() - t1
    print(f"training: {args.steps} steps of {args.batch} patches in {train_time:.0f} s", flush=True)

    model.eval()
    per_class = validate(model, val, "final (unseen seeds, whole volume, roi 32, overlap 0.25, gaussian)")

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    dummy = torch.zeros(1, 1, ROI, ROI, ROI)
    torch.onnx.export(model, dummy, args.out, opset_version=17, input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "n"}, "logits": {0: "n"}}, do_constant_folding=True)
    size_mb = os.path.getsize(args.out) / 1e6
    print(f"wrote {args.out}: {size_mb:.2f} MB", flush=True)
    try:
        import onnx
        m = onnx.load(args.out)
        onnx.checker.check_model(m, full_check=True)
        print(f"onnx checker: ok (opset {m.opset_import[0].version}, "
              f"input {[d.dim_param or d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]}, "
              f"output {[d.dim_param or d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim]})")
    except ImportError:
        print("python3-onnx not installed: ONNX check skipped")
    print(f"total time {time.time() - t0:.0f} s; mean Dice {per_class.mean():.4f}")
    if size_mb >= 5.0:
        sys.exit("train_demo.py: model is not under 5 MB")


if __name__ == "__main__":
    main()
