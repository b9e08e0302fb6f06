#!/usr/bin/env python3
"""bench/frontier_orders.py -- how small can the engine's partial sums get in any window order?

The engine keeps the partial sums (classes + 1 floats a voxel) of a cell -- a box cut out by
every window edge -- from the first landing of a window on it to the last. This script lays
the windows out with nnU-Net's step rule (or MONAI's), lists the cells and their windows, and
reports the largest bytes open at once for the lexicographic order (the engine's order 0,1,2),
a greedy order and the best order found by simulated annealing over orders of all windows.
It counts cells as the planner does, without its 1/32 allowance for fragmentation.

usage: python3 bench/frontier_orders.py [D,H,W] [ROI] [STEP] [CLASSES] [ITERATIONS] [GRID]
       (defaults 273,273,267 128 0.5 118 20000 nnunet; GRID nnunet or monai, STEP the tile
       step = 1 - overlap)
"""
import itertools
import math
import random
import sys


def starts(n, roi, step, grid):
    if n <= roi:
        return [0]
    if grid == "monai":
        s = max(1, int(roi * step))
        out = list(range(0, n - roi, s))
        return out + [n - roi] if out[-1] != n - roi else out
    k = math.ceil((n - roi) / (roi * step)) + 1
    return sorted(set(round(t * (n - roi) / (k - 1)) for t in range(k)))


def cells(n, st, roi):
    cuts = sorted(set([0, n] + st + [min(s + roi, n) for s in st]))
    return [(b - a, tuple(i for i, s in enumerate(st) if s <= a and b <= s + roi)) for a, b in zip(cuts, cuts[1:])]


def main():
    a = sys.argv[1:]
    shape = tuple(int(x) for x in (a[0] if a else "273,273,267").split(","))
    roi = int(a[1]) if len(a) > 1 else 128
    step = float(a[2]) if len(a) > 2 else 0.5
    classes = int(a[3]) if len(a) > 3 else 118
    iters = int(a[4]) if len(a) > 4 else 20000
    grid = a[5] if len(a) > 5 else "nnunet"
    st = [starts(n, roi, step, grid) for n in shape]
    per_axis = [cells(n, s, roi) for n, s in zip(shape, st)]
    windows = list(itertools.product(*[range(len(s)) for s in st]))
    cell3 = []  # (voxels, windows covering it); one window: never open
    for parts in itertools.product(*per_axis):
        ws = list(itertools.product(*[p[1] for p in parts]))
        if len(ws) > 1:
            cell3.append((parts[0][0] * parts[1][0] * parts[2][0], len(ws), ws))
    by_window = {w: [] for w in windows}
    for i, (_, _, ws) in enumerate(cell3):
        for w in ws:
            by_window[w].append(i)
    bpv = (classes + 1) * 4

    def peak(order):
        landed = [0] * len(cell3)
        cur = top = 0
        for w in order:
            for i in by_window[w]:
                if landed[i] == 0:
                    cur += cell3[i][0]
                landed[i] += 1
            top = max(top, cur)
            for i in by_window[w]:
                if landed[i] == cell3[i][1]:
                    cur -= cell3[i][0]
        return top

    def greedy():
        landed = [0] * len(cell3)
        left, order = set(windows), []
        while left:
            def cost(w):
                opens = sum(cell3[i][0] for i in by_window[w] if landed[i] == 0)
                closes = sum(cell3[i][0] for i in by_window[w] if landed[i] == cell3[i][1] - 1)
                return (opens, -closes, w)
            w = min(left, key=cost)
            left.remove(w)
            order.append(w)
            for i in by_window[w]:
                landed[i] += 1
        return order

    gib = lambda v: v * bpv / 2**30
    lex = sorted(windows)
    print("grid %s: starts %s; %d windows, %d cells covered by several" % (grid, st, len(windows), len(cell3)))
    print("lexicographic (order 0,1,2): %.3f GiB" % gib(peak(lex)))
    print("greedy:                      %.3f GiB" % gib(peak(greedy())))
    random.seed(1)
    cur, cp = list(lex), peak(lex)
    best = cp
    temp = cp * 0.02
    for _ in range(iters):
        i, j = random.randrange(len(cur)), random.randrange(len(cur))
        if i == j:
            continue
        new = list(cur)
        if random.random() < 0.5:
            new[i], new[j] = new[j], new[i]
        else:
            new.insert(j, new.pop(i))
        p = peak(new)
        if p < cp or random.random() < math.exp((cp - p) / max(temp, 1)):
            cur, cp = new, p
            best = min(best, p)
        temp *= 0.9998
    print("annealed (%d steps):       %.3f GiB" % (iters, gib(best)))


if __name__ == "__main__":
    main()
