"""One timed sliding-window run in this process, printed as one JSON line.

    bench_case.py --impl swi|monai|predictor [--shape 256,256,160] [--classes 32] [--roi 96]
                  [--overlap 0.25] [--mode gaussian] [--sw-batch 2] [--threads 2] [--order monai]
                  [--labels out.npy]

The network is `x * w[c]` in torch (w: C fixed random weights), argmax wanted:
  swi        swi.sliding_window_inference(..., reduce="argmax")
  monai      MONAI 1.4's sliding_window_inference, then argmax (PYTHONPATH=<MONAI source>)
  predictor  the network alone on the same windows in the same chunks (no stitching)
Reported: the call's wall and CPU time (all threads), the predictor's share, and the
process's peak RSS.
"""

import argparse
import json
import resource
import sys
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", required=True, choices=["swi", "monai", "predictor"])
    ap.add_argument("--shape", default="256,256,160")
    ap.add_argument("--classes", type=int, default=32)
    ap.add_argument("--roi", type=int, default=96)
    ap.add_argument("--overlap", type=float, default=0.25)
    ap.add_argument("--mode", default="gaussian")
    ap.add_argument("--sw-batch", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--order", default="monai")
    ap.add_argument("--labels", default=None)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    shape = tuple(int(v) for v in a.shape.split(","))
    g = torch.Generator().manual_seed(0)
    x = torch.rand((1, 1) + shape, generator=g)
    w = (torch.rand(a.classes, generator=g) + 0.5).reshape((1, a.classes) + (1,) * len(shape))
    pred_s = [0.0, 0]

    def net(win):
        t = time.perf_counter()
        y = win * w
        pred_s[0] += time.perf_counter() - t
        pred_s[1] += 1
        return y

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    c0 = time.process_time()
    t0 = time.perf_counter()
    labels = None
    with torch.no_grad():
        if a.impl == "swi":
            import swi

            labels = swi.sliding_window_inference(x, a.roi, a.sw_batch, net, a.overlap, a.mode,
                                                  reduce="argmax", threads=a.threads, order=a.order)
        elif a.impl == "monai":
            from monai.inferers import sliding_window_inference

            scores = sliding_window_inference(x, a.roi, a.sw_batch, net, a.overlap, a.mode)
            labels = scores.argmax(1, keepdim=True).to(torch.uint8)
            del scores
        else:
            import swi

            starts = [swi._swi.window_starts(s, a.roi, a.overlap) for s in shape]
            import itertools

            wins = list(itertools.product(*starts))
            c0 = time.process_time()
            t0 = time.perf_counter()
            gather = 0.0
            for i in range(0, len(wins), a.sw_batch):
                tg = time.perf_counter()
                batch = torch.cat([x[(slice(None), slice(None)) + tuple(slice(s, s + a.roi) for s in st)]
                                   for st in wins[i:i + a.sw_batch]])
                gather += time.perf_counter() - tg
                net(batch)
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if a.labels and labels is not None:
        import numpy as np

        np.save(a.labels, labels.numpy())
    print(json.dumps({"impl": a.impl, "seconds": round(dt, 3), "cpu_seconds": round(cpu, 3), "predictor_seconds": round(pred_s[0], 3),
                      "predictor_calls": pred_s[1], "peak_rss_mb": round(peak / 1024, 1),
                      "rss_before_call_mb": round(rss0 / 1024, 1), "shape": shape, "classes": a.classes,
                      "roi": a.roi, "sw_batch": a.sw_batch, "threads": a.threads}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
